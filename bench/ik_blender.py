"""Benchmark: Sinew's ``sinew.bake_ik`` against Blender's IK constraint + ``nla.bake``.

One process (bpy 5.2 module), the same rig and target for every contender: a 10-bone connected
chain of 0.5 m bones and an empty keyed on every frame along a 3-D Lissajous path, 1,000 frames.

* Blender: an IK constraint with default settings (chain length 10), baked with
  ``bpy.ops.nla.bake(visual_keying=True, clear_constraints=True, bake_types={'POSE'})``;
* Sinew: ``bpy.ops.sinew.bake_ik`` with FABRIK, DLS and CCD (default settings).

Each bake is timed end to end (operator call). The max tip error is measured the same way for
all: Blender evaluates the baked keys at every frame (``frame_set``), and the tip bone's tail in
world space is compared with the target. Runs alternate and repeat; medians are reported.

    .venv/bpy-5.2/bin/python bench/ik_blender.py [--quick]
"""

from __future__ import annotations

import argparse
import importlib
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BONES, LENGTH = 10, 0.5


# The add-on is installed from its built zip into a throw-away user folder; Blender reads
# this once, when bpy is first imported (bpy is imported lazily below).
from tools.scenes import bones  # noqa: E402
from tools.userdir import throwaway_user_resources  # noqa: E402

throwaway_user_resources("sinew-bench-")


def _setup():
    """Blender with the add-on installed from its built zip (as the spring section does)."""
    import bpy
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import install_addon

    install_addon()
    bpy.ops.wm.read_homefile(use_empty=True)
    return bpy


def _target(bpy, frames: int):
    import numpy as np

    from bench import install_addon

    compat = importlib.import_module(install_addon().__name__ + ".compat")
    empty = bpy.data.objects.new("Target", None)
    bpy.context.scene.collection.objects.link(empty)
    f = np.arange(1, frames + 1, dtype=np.float64)
    t = 2 * math.pi * (f - 1) / frames
    xyz = (1.8 * np.sin(3 * t + 0.3), 1.5 * np.sin(2 * t), 3.0 + 1.0 * np.sin(5 * t))
    compat.ensure_action(empty, "TargetAction")
    for k in range(3):
        compat.set_keys(compat.ensure_fcurve(empty, "location", k, "Object Transforms"), f, xyz[k], "LINEAR")
    return empty


def _rig(bpy, name: str):
    return bones.straight_chain(name, BONES, LENGTH, select=True)


def _max_error(bpy, rig, target, frames: int) -> float:
    scene = bpy.context.scene
    worst = 0.0
    tip = f"B{BONES - 1}"
    for f in range(1, frames + 1):
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        ev = rig.evaluated_get(dg)
        d = (ev.matrix_world @ ev.pose.bones[tip].tail) - target.evaluated_get(dg).matrix_world.translation
        worst = max(worst, d.length)
    return worst


def _remove(bpy, obj):
    action = obj.animation_data.action if obj.animation_data else None
    data = obj.data
    bpy.data.objects.remove(obj)
    bpy.data.armatures.remove(data)
    if action is not None:
        bpy.data.actions.remove(action)


def _blender(bpy, target, frames: int) -> dict:
    rig = _rig(bpy, "Blender")
    con = rig.pose.bones[f"B{BONES - 1}"].constraints.new("IK")
    con.target, con.chain_count = target, BONES
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="POSE")
    t0 = time.perf_counter()
    bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=False, visual_keying=True,
                     clear_constraints=True, bake_types={"POSE"})
    elapsed = time.perf_counter() - t0
    bpy.ops.object.mode_set(mode="OBJECT")
    err = _max_error(bpy, rig, target, frames)
    _remove(bpy, rig)
    return {"time": elapsed, "error": err}


def _sinew(bpy, target, frames: int, solver: str) -> dict:
    rig = _rig(bpy, "Sinew")
    s = rig.pose.bones[f"B{BONES - 1}"].sinew_ik
    s.enabled, s.target, s.solver = True, target, solver
    bpy.context.view_layer.objects.active = rig
    t0 = time.perf_counter()
    res = bpy.ops.sinew.bake_ik(frame_start=1, frame_end=frames)
    elapsed = time.perf_counter() - t0
    assert res == {"FINISHED"}, res
    err = _max_error(bpy, rig, target, frames)
    _remove(bpy, rig)
    return {"time": elapsed, "error": err}


def run(quick: bool = False) -> list[dict]:
    """Run the benchmark; one row per contender with median time and max tip error."""
    bpy = _setup()
    frames = 200 if quick else 1000
    repeats = 1 if quick else 3
    target = _target(bpy, frames)
    names = ["Blender IK + nla.bake", "Sinew FABRIK", "Sinew DLS", "Sinew CCD"]
    samples: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(repeats):  # alternate contenders within each repeat
        samples[names[0]].append(_blender(bpy, target, frames))
        for name, solver in zip(names[1:], ("FABRIK", "DLS", "CCD")):
            samples[name].append(_sinew(bpy, target, frames, solver))
    base = samples[names[0]]
    base_t = statistics.median(r["time"] for r in base)
    base_e = statistics.median(r["error"] for r in base)
    rows = []
    for name in names:
        t = statistics.median(r["time"] for r in samples[name])
        e = statistics.median(r["error"] for r in samples[name])
        rows.append({"contender": name, "frames": frames, "bones": BONES, "repeats": repeats,
                     "time_s": t, "ms_per_frame": 1000 * t / frames, "max_tip_error_m": e,
                     "time_ratio": t / base_t, "error_ratio": e / base_e if base_e > 0 else float("nan")})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| contender | frames | time (s) | ms/frame | max tip error (m) | time vs Blender | error vs Blender |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['contender']} | {r['frames']} | {r['time_s']:.3f} | {r['ms_per_frame']:.3f} | "
                     f"{r['max_tip_error_m']:.2e} | {r['time_ratio']:.2f}x | {r['error_ratio']:.2e}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 frames, one repeat")
    args = parser.parse_args()
    print(table(run(args.quick)))
