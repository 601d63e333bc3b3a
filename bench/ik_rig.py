"""Benchmark: a production rig, Sinew against Blender's IK constraints + ``nla.bake``.

Blender's own Rigify human metarig (bundled ``rigify`` add-on), with control bones parented to
a ``root`` bone as Rigify's generated rig has them: both arms (upper arm, forearm, hand) and
both legs (thigh, shin) with bone targets and bone poles, and the spine (spine.001 to
spine.003) with a bone target; every control travels a closed loop over the range. The two
contenders get identical rigs in one process:

* Blender: an IK constraint per chain (same subtarget, pole bone and ``pole_angle``, 500
  iterations), baked with ``bpy.ops.nla.bake(visual_keying=True, clear_constraints=True)``;
* Sinew: ``bpy.ops.sinew.bake_ik`` with the default solver, every chain in one call.

Measured on the baked keys as Blender evaluates them (``frame_set``): the largest tip distance
to its control over all chains and frames, the largest rotation of any chain bone's keyed
rotation between consecutive frames (joint step), and the largest difference between the
first and last frame's keyed rotations (loop closure; the controls return to their start).

    .venv/bpy-5.2/bin/python bench/ik_rig.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from tools.userdir import throwaway_user_resources  # noqa: E402

throwaway_user_resources("sinew-bench-")


def _chain_bones(rig, controls: dict[str, str]) -> list[str]:
    from bench import metarig as M

    out = []
    for tip in controls:
        n = M.LIMBS[tip][1] if tip in M.LIMBS else M.SPINE[2]
        pb = rig.pose.bones[tip]
        out += [b.name for b in (pb, *pb.parent_recursive)][:n]
    return out


def _measure(bpy, rig, controls: dict[str, str], frames: int) -> dict:
    import numpy as np

    bones = _chain_bones(rig, controls)
    scene = bpy.context.scene
    tips, goals, basis = [], [], []
    for f in range(1, frames + 1):
        scene.frame_set(f)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        tips.append([tuple(ev.pose.bones[t].tail) for t in controls])
        goals.append([tuple(ev.pose.bones[c].head) for c in controls.values()])
        basis.append([tuple(ev.pose.bones[b].matrix_basis.to_quaternion()) for b in bones])
    err = np.linalg.norm(np.array(tips) - np.array(goals), axis=2)
    q = np.array(basis)  # (F, bones, 4)

    def angle(a, b):
        return np.degrees(2 * np.arccos(np.clip(np.abs(np.sum(a * b, axis=-1)), 0.0, 1.0)))

    return {"error": float(err.max()), "step": float(angle(q[1:], q[:-1]).max()),
            "loop": float(angle(q[0], q[-1]).max())}


def _rig(bpy, frames: int):
    from bench import metarig as M

    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    rig = M.add_metarig()
    controls = M.add_controls(rig, frames)
    return rig, controls, M.pole_angles(rig)


def _blender(bpy, frames: int) -> dict:
    from bench import metarig as M

    rig, controls, angles = _rig(bpy, frames)
    M.add_constraints(rig, controls, angles)
    t0 = time.perf_counter()
    M.nla_bake(rig, frames)
    elapsed = time.perf_counter() - t0
    return {"time": elapsed, **_measure(bpy, rig, controls, frames)}


def _sinew(bpy, frames: int) -> dict:
    from bench import metarig as M

    rig, controls, angles = _rig(bpy, frames)
    M.enable_chains(rig, controls)
    for tip, a in angles.items():
        rig.pose.bones[tip].sinew_ik.pole_angle = a
    bpy.context.view_layer.objects.active = rig
    t0 = time.perf_counter()
    res = bpy.ops.sinew.bake_ik(frame_start=1, frame_end=frames)
    elapsed = time.perf_counter() - t0
    assert res == {"FINISHED"}, res
    return {"time": elapsed, **_measure(bpy, rig, controls, frames)}


def run(quick: bool = False) -> list[dict]:
    """Run the benchmark; one row per contender (medians over the repeats)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import bpy

    from bench import install_addon

    install_addon()
    frames = 48 if quick else 240
    repeats = 1 if quick else 3
    samples: dict[str, list[dict]] = {"Blender IK + nla.bake": [], "Sinew (default solver)": []}
    for _ in range(repeats):  # alternate the contenders
        samples["Blender IK + nla.bake"].append(_blender(bpy, frames))
        samples["Sinew (default solver)"].append(_sinew(bpy, frames))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in samples.items()}
    base = med["Blender IK + nla.bake"]
    rows = []
    for name, m in med.items():
        rows.append({"contender": name, "frames": frames, "chains": 5, "repeats": repeats, "time_s": m["time"],
                     "ms_per_frame": 1000 * m["time"] / frames, "time_ratio": m["time"] / base["time"],
                     "max_tip_error_m": m["error"],
                     "error_x_smaller": base["error"] / m["error"] if m["error"] > 0 else float("inf"),
                     "max_joint_step_deg": m["step"], "loop_closure_deg": m["loop"]})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="48 frames, one repeat")
    args = parser.parse_args()
    for row in run(args.quick):
        print(row)
