"""The demo's shot: Sinew against Blender's own IK constraints and Cloth, element by element.

The shot is built once by the demo's own builder (``tools.demo.shot.build_shot``: the Rigify
metarig character walking with IK legs and a reaching arm, the cape, the flag in the wind, the
drape on the ball), saved to a temporary file and reopened fresh for every run, so both
contenders get the identical scene in this one process:

* **IK** (the character's three chains: both legs to their foot control bones with knee-pole
  bones, the left arm to the circling lantern with its rotation at weight 0.5):
  Blender's IK constraints (same subtargets, pole bones and ``pole_angle``, ``use_rotation``
  with ``orient_weight`` 0.5, 500 iterations) baked with ``nla.bake(visual_keying=True,
  clear_constraints=True)``, against ``bpy.ops.sinew.bake_ik`` with the shot's settings.
* **Cloth** (the cape on the walking body, self-collision on; the flag in the Wind and
  Turbulence fields; the drape falling onto the ball on the floor, self-collision on), each with the
  character's motion baked by Sinew first: Blender's Cloth modifier at its defaults (pinned
  through ``vertex_group_mass``, colliding with the shot's colliders through their Collision
  modifiers, ``use_self_collision`` on for the cape and the drape), frames stepped with ``frame_set``,
  against ``bpy.ops.sinew.bake_springs`` with the shot's preset and settings.

Columns: time per simulated frame (Sinew's flag also simulates its pre-roll frames) and the
ratio to Blender's; for IK the largest tip distance to its target over all chains and frames,
and the loop closure (the walk repeats every ``2·STEP`` frames relative to the body once both
feet step: the largest rotation between a leg bone's keyed rotation at frame f and f + 2·STEP);
for cloth the most vertices inside a collider at any frame, the most crossing face pairs of the
cloth with itself, the largest edge strain, and for the flag how far its free edge reaches
downwind of the pole (second-half mean), for the drape its fastest vertex at the last frame.
Runs alternate and repeat; medians.

``python3 build.py bench`` runs it with the others; alone: ``.venv/bench/bin/python tools/bench.py
--only shot [--quick]``. ``run(quick) -> list[dict]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if not os.environ.get("BLENDER_USER_RESOURCES"):  # run alone: tools/bench.py sets it
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="sinew-bench-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402

from bench import step_frames  # noqa: E402
from tools.demo import checks, shot  # noqa: E402

#: Frames per cloth run (the quick demo's range) and per IK run (two walk cycles: the loop
#: closure needs frame f and f + 2·STEP after both feet have started).
CLOTH_FRAMES = 48
IK_FRAMES = 4 * shot.STEP + 1
ROTATION_WEIGHT = 0.5


def _shot_file(frames: int, folder: Path) -> Path:
    """Build the demo's shot for ``frames`` frames and save it; the path of the file."""
    bpy.ops.wm.read_homefile(use_empty=True)
    shot.build_shot(frames)
    path = folder / f"shot_{frames}.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def _open(path: Path) -> None:
    bpy.ops.wm.open_mainfile(filepath=str(path))


def _bake_ik(arm, frames: int) -> float:
    bpy.context.view_layer.objects.active = arm
    t0 = time.perf_counter()
    res = bpy.ops.sinew.bake_ik(frame_start=1, frame_end=frames)
    elapsed = time.perf_counter() - t0
    assert res == {"FINISHED"}, res
    return elapsed


# ---------------------------------------------------------------------------- IK


def _chains(arm) -> dict[str, tuple[int, object, str, str, float]]:
    """tip -> (chain length, target object, target bone, pole bone, pole angle) from the Sinew settings."""
    out = {}
    for pb in arm.pose.bones:
        s = pb.sinew_ik
        if s.enabled:
            out[pb.name] = (s.chain_length, s.target, s.target_bone, s.pole_bone, s.pole_angle)
    return out


def _ik_measure(arm, chains, frames: int) -> dict[str, float]:
    scene = bpy.context.scene
    legs = [b for tip in shot.LEG_CHAINS for b in (tip, arm.pose.bones[tip].parent.name)]
    err, quats = 0.0, []
    for f in range(1, frames + 1):
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        ev = arm.evaluated_get(dg)
        mw = ev.matrix_world
        for tip, (_n, target, bone, _pole, _a) in chains.items():
            got = mw @ ev.pose.bones[tip].tail
            tev = target.evaluated_get(dg)
            want = tev.matrix_world @ tev.pose.bones[bone].head if bone else tev.matrix_world.translation
            err = max(err, (got - want).length)
        quats.append([tuple(ev.pose.bones[b].matrix_basis.to_quaternion()) for b in legs])
    q = np.array(quats)
    period, start = 2 * shot.STEP, shot.STEP
    a, b = q[start:frames - period], q[start + period:]
    loop = np.degrees(2 * np.arccos(np.clip(np.abs(np.sum(a * b, axis=-1)), 0.0, 1.0))).max()
    return {"max_tip_error_m": err, "loop_closure_deg": float(loop)}


def ik_blender(path: Path, frames: int) -> dict:
    from bench import metarig

    _open(path)
    arm = bpy.data.objects[shot.ARMATURE]
    chains = _chains(arm)
    for tip, (length, target, bone, pole, angle) in chains.items():
        arm.pose.bones[tip].sinew_ik.enabled = False
        con = arm.pose.bones[tip].constraints.new("IK")
        con.target, con.chain_count, con.iterations = target, length, 500
        if bone:
            con.subtarget = bone
        con.pole_target, con.pole_subtarget, con.pole_angle = arm, pole, angle
        if arm.pose.bones[tip].sinew_ik.use_rotation:
            con.use_rotation, con.orient_weight = True, ROTATION_WEIGHT
    t0 = time.perf_counter()
    metarig.nla_bake(arm, frames)
    elapsed = time.perf_counter() - t0
    return {"seconds": elapsed, **_ik_measure(arm, chains, frames)}


def ik_sinew(path: Path, frames: int) -> dict:
    _open(path)
    arm = bpy.data.objects[shot.ARMATURE]
    elapsed = _bake_ik(arm, frames)
    return {"seconds": elapsed, **_ik_measure(arm, _chains(arm), frames)}


# ---------------------------------------------------------------------------- cloth

#: Cloth element -> its colliders (object names), as the shot sets them up.
CLOTHS = {shot.CAPE: (shot.BODY,), shot.FLAG: (), shot.DRAPE: (shot.BALL, shot.FLOOR)}


def _cloth_measure(name: str, frames: int) -> dict[str, float]:
    """Play frames 1..frames back: penetrations, self-crossings, strain, and the element's own figure."""
    scene = bpy.context.scene
    obs = bpy.data.objects
    cloth = obs[name]
    edges = checks._edges(cloth)
    polys = [tuple(p.vertices) for p in cloth.data.polygons]
    colliders = [(obs[c], [tuple(p.vertices) for p in obs[c].data.polygons]) for c in CLOTHS[name]]
    rest = None
    inside = crossings = 0
    strain, reach, prev, speed = 0.0, [], None, 0.0
    far = None
    for f in range(1, frames + 1):
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        x = checks._world_vertices(cloth, dg)
        if rest is None:
            rest = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
            far = x[:, 0] > x[:, 0].max() - 1e-6
        strain = max(strain, float(np.max(np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1) / rest - 1.0)))
        crossings = max(crossings, checks._self_crossings(x, polys))
        bad = np.zeros(len(x), dtype=bool)
        for ob, ob_polys in colliders:
            if ob.name == shot.FLOOR:
                bad |= x[:, 2] < 0.0
            else:
                bad |= checks._signed_to_mesh(x, checks._world_vertices(ob, dg), ob_polys) < 0.0
        inside = max(inside, int(np.count_nonzero(bad)))
        if name == shot.FLAG and f > frames // 2:
            pole = np.array(obs[shot.FLAG_POLE].matrix_world.translation)
            reach.append(float((x[far, 0] - pole[0]).mean()))  # the wind blows along +X
        if prev is not None:
            speed = float(np.linalg.norm(x - prev, axis=1).max() * scene.render.fps)
        prev = x
    out = {"vertices_inside_max": inside, "self_crossings_max": crossings, "max_strain": strain}
    if name == shot.FLAG:
        out["flag_reach_m"] = float(np.mean(reach))
    if name == shot.DRAPE:
        out["last_frame_speed_m_s"] = speed
    return out


def cloth_blender(path: Path, name: str, frames: int) -> dict:
    _open(path)
    obs = bpy.data.objects
    _bake_ik(obs[shot.ARMATURE], frames)
    cloth = obs[name]
    cloth.sinew_springs.enabled = False
    mod = cloth.modifiers.new("Cloth", "CLOTH")  # after the cape's Armature modifier
    if cloth.vertex_groups.get("pin") is not None:
        mod.settings.vertex_group_mass = "pin"
    mod.collision_settings.collection = cloth.sinew_springs.collision_collection
    mod.collision_settings.use_self_collision = cloth.sinew_springs.self_collision
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, frames
    elapsed = step_frames(frames)
    return {"ms_per_frame": 1000 * elapsed / (frames - 1), **_cloth_measure(name, frames)}


def cloth_sinew(path: Path, name: str, frames: int) -> dict:
    _open(path)
    obs = bpy.data.objects
    _bake_ik(obs[shot.ARMATURE], frames)
    cloth = obs[name]
    bpy.context.view_layer.objects.active = cloth
    s = cloth.sinew_springs
    t0 = time.perf_counter()
    res = bpy.ops.sinew.bake_springs(frame_start=1, frame_end=frames)
    elapsed = time.perf_counter() - t0
    assert res == {"FINISHED"}, res
    label = f"Sinew ({s.solver}, {s.substeps} substeps" + (f", {s.pre_roll} pre-roll frames" if s.pre_roll else "")
    # Per simulated frame: the pre-roll frames are simulated too (Blender's Cloth has none).
    return {"ms_per_frame": 1000 * elapsed / (frames - 1 + s.pre_roll), "label": label + ")",
            **_cloth_measure(name, frames)}


# ---------------------------------------------------------------------------- the section


def _median(runs: list[dict]) -> dict:
    return {k: (statistics.median(r[k] for r in runs) if isinstance(runs[0][k], (int, float)) else runs[0][k])
            for k in runs[0]}


def run(quick: bool = False) -> list[dict]:
    """IK then each cloth element: Blender's solver then Sinew's, alternating; one row per contender."""
    from bench import install_addon

    install_addon()
    reps = 1 if quick else 3
    cloth_frames = 12 if quick else CLOTH_FRAMES
    ik_frames = 3 * shot.STEP + 2 if quick else IK_FRAMES
    rows = []
    with tempfile.TemporaryDirectory(prefix="sinew-shot-") as tmp:
        ik_path = _shot_file(ik_frames, Path(tmp))
        cloth_path = ik_path if cloth_frames == ik_frames else _shot_file(cloth_frames, Path(tmp))
        b_runs, s_runs = [], []
        for _ in range(reps):
            b_runs.append(ik_blender(ik_path, ik_frames))
            s_runs.append(ik_sinew(ik_path, ik_frames))
        b, s = _median(b_runs), _median(s_runs)
        for label, m in (("Blender IK constraints + nla.bake", b), ("Sinew (default solver)", s)):
            rows.append({"element": "character IK (2 legs, 1 arm)", "contender": label, "frames": ik_frames,
                         "repeats": reps, "ms_per_frame": 1000 * m["seconds"] / ik_frames,
                         "time_ratio": m["seconds"] / b["seconds"], "max_tip_error_m": m["max_tip_error_m"],
                         "loop_closure_deg": m["loop_closure_deg"]})
        for name in CLOTHS:
            b_runs, s_runs = [], []
            for _ in range(reps):
                b_runs.append(cloth_blender(cloth_path, name, cloth_frames))
                s_runs.append(cloth_sinew(cloth_path, name, cloth_frames))
            b, s = _median(b_runs), _median(s_runs)
            for label, m in (("Blender Cloth (defaults)", b), (s.pop("label"), s)):
                row = {"element": name.lower(), "contender": label, "frames": cloth_frames, "repeats": reps,
                       "ms_per_frame": m["ms_per_frame"], "time_ratio": m["ms_per_frame"] / b["ms_per_frame"]}
                row.update({k: v for k, v in m.items() if k not in ("ms_per_frame", "label")})
                rows.append(row)
    bpy.ops.wm.read_homefile(use_empty=True)
    return rows


def goals(rows: list[dict]) -> list[str]:
    """Headline lines for tools/bench.py: Sinew against Blender on each element of the shot."""
    out = []
    for r in rows:
        if not str(r["contender"]).startswith("Sinew"):
            continue
        blender = next(b for b in rows if b["element"] == r["element"] and not str(b["contender"]).startswith("Sinew"))
        line = f"shot {r['element']}: {r['time_ratio']:.2f}× Blender's time"
        if "max_tip_error_m" in r:
            line += (f"; max tip error {r['max_tip_error_m']:.1e} m (Blender {blender['max_tip_error_m']:.1e} m), "
                     f"loop closure {r['loop_closure_deg']:.2g}° (Blender {blender['loop_closure_deg']:.2g}°)")
        else:
            line += (f"; {r['vertices_inside_max']} vertices inside a collider (Blender "
                     f"{blender['vertices_inside_max']}), {r['self_crossings_max']} self-crossings (Blender "
                     f"{blender['self_crossings_max']}), max strain {100 * r['max_strain']:.1f}% (Blender "
                     f"{100 * blender['max_strain']:.1f}%)")
        out.append(line)
    return out

