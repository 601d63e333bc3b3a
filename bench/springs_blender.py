"""Sinew springs in Blender vs Blender's own Cloth modifier (not a test).

In one bpy 5.2 process, on the 64² grid of ``primitive_grid_add(x_subdivisions=64,
y_subdivisions=64, size=2)`` rotated to hang in XZ with its two top corners pinned:

* Blender Cloth at its defaults (pin group through ``settings.vertex_group_mass``), frames
  stepped with ``frame_set``;
* Sinew end to end with each cloth preset a user picks (``sinew.springs_preset``: COTTON,
  SILK, DENIM, FLAG, RUBBER — DENSITY + MATERIAL, their own solver settings and strain
  limit, nothing hand-tuned): ``bpy.ops.sinew.bake_springs`` (read, simulate, write shape
  keys);
* playback of Sinew's baked result: ``frame_set`` + evaluated mesh read.

Runs alternate and repeat (≥ 3 times); medians and ratios are printed as a markdown table.
Goals (issues 6 and 16): per preset, Sinew ≤ 0.5× Blender's ms/frame and max edge strain ≤
Blender's; playback ≤ 5 ms/frame.

``.venv/bpy-5.2/bin/python bench/springs_blender.py [--quick]``; importable as
``run(quick) -> list[dict]``.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from tools.scenes import meshes  # noqa: E402
from tools.userdir import throwaway_user_resources  # noqa: E402

throwaway_user_resources("sinew-bench-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402

ADDON = "bl_ext.user_default.sinew"
GRID = 64
#: The presets compared (ROPE is for polylines, not sheets).
PRESETS = ("COTTON", "SILK", "DENIM", "FLAG", "RUBBER")


def _install() -> None:
    from bench import install_addon

    install_addon()


def _grid(name: str) -> bpy.types.Object:
    return meshes.hanging_grid(GRID, 2.0, name)


def _positions(me) -> np.ndarray:
    co = np.empty(3 * len(me.vertices), dtype=np.float32)
    me.vertices.foreach_get("co", co)
    return co.reshape(-1, 3).astype(np.float64)


def _edges(me) -> np.ndarray:
    e = np.empty(2 * len(me.edges), dtype=np.int64)
    me.edges.foreach_get("vertices", e)
    return e.reshape(-1, 2)


def _evaluated(ob) -> np.ndarray:
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    x = _positions(me)
    ev.to_mesh_clear()
    return x


def _world(ob) -> np.ndarray:
    """Evaluated vertices of ``ob`` in world space ``(n, 3)``."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    x = _positions(me)
    ev.to_mesh_clear()
    m = np.array([list(r) for r in ev.matrix_world])
    return x @ m[:3, :3].T + m[:3, 3]


def _strain(x: np.ndarray, edges: np.ndarray, rest: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1) / rest - 1)))


def _remove(ob) -> None:
    me = ob.data
    bpy.data.objects.remove(ob)
    bpy.data.meshes.remove(me)
    for a in list(bpy.data.actions):
        if a.users == 0:
            bpy.data.actions.remove(a)


def blender_cloth(frames: int) -> dict[str, float]:
    scene = bpy.context.scene
    scene.frame_set(1)
    ob = _grid("BlenderCloth")
    edges, rest_x = _edges(ob.data), _positions(ob.data)
    rest = np.linalg.norm(rest_x[edges[:, 0]] - rest_x[edges[:, 1]], axis=1)
    cloth = ob.modifiers.new("Cloth", "CLOTH")
    cloth.settings.vertex_group_mass = "pins"
    cloth.point_cache.frame_start, cloth.point_cache.frame_end = 1, frames
    scene.frame_set(1)
    _evaluated(ob)
    elapsed, strain = 0.0, 0.0
    for f in range(2, frames + 1):
        t = time.perf_counter()
        scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
        elapsed += time.perf_counter() - t
        strain = max(strain, _strain(_evaluated(ob), edges, rest))
    _remove(ob)
    scene.frame_set(1)
    return {"ms_per_frame": 1000 * elapsed / (frames - 1), "max_edge_strain": strain}


def sinew(frames: int, preset: str) -> dict[str, float]:
    scene = bpy.context.scene
    scene.frame_set(1)
    ob = _grid("SinewCloth")
    edges, rest_x = _edges(ob.data), _positions(ob.data)
    rest = np.linalg.norm(rest_x[edges[:, 0]] - rest_x[edges[:, 1]], axis=1)
    assert bpy.ops.sinew.springs_preset(preset=preset) == {"FINISHED"}
    s = ob.sinew_springs
    s.enabled, s.pin_group = True, "pins"
    t = time.perf_counter()
    res = bpy.ops.sinew.bake_springs(frame_start=1, frame_end=frames)
    elapsed = time.perf_counter() - t
    assert res == {"FINISHED"}, res
    play, strain = 0.0, 0.0
    for f in range(1, frames + 1):
        t = time.perf_counter()
        scene.frame_set(f)
        x = _evaluated(ob)
        play += time.perf_counter() - t
        strain = max(strain, _strain(x, edges, rest))
    unconverged = int(s.bake_unconverged)  # read before the object is removed
    _remove(ob)
    scene.frame_set(1)
    return {"ms_per_frame": 1000 * elapsed / frames, "max_edge_strain": strain,
            "playback_ms_per_frame": 1000 * play / frames, "unconverged_frames": unconverged}


def run(quick: bool = False) -> list[dict]:
    """Alternate Blender Cloth and Sinew (every preset) ≥ 3 times; one dict per method (medians)."""
    _install()
    bpy.ops.wm.read_homefile(use_empty=True)
    frames, reps = (30, 3) if quick else (100, 3)
    cloth_runs: list[dict] = []
    sinew_runs: dict[str, list[dict]] = {p: [] for p in PRESETS}
    for _ in range(reps):
        cloth_runs.append(blender_cloth(frames))
        for p in PRESETS:
            sinew_runs[p].append(sinew(frames, p))

    def med(runs, key):
        return statistics.median(r[key] for r in runs)

    c_ms, c_strain = med(cloth_runs, "ms_per_frame"), med(cloth_runs, "max_edge_strain")
    rows = [{"method": "Blender Cloth (defaults)", "grid": GRID, "frames": frames, "repeats": reps,
             "ms_per_frame": c_ms, "max_edge_strain": c_strain, "ratio_to_blender": 1.0,
             "playback_ms_per_frame": float("nan")}]
    for p, runs in sinew_runs.items():
        s_ms, s_strain = med(runs, "ms_per_frame"), med(runs, "max_edge_strain")
        rows.append({"method": f"Sinew {p} preset (read+simulate+write keys)", "grid": GRID,
                     "frames": frames, "repeats": reps, "ms_per_frame": s_ms,
                     "max_edge_strain": s_strain, "ratio_to_blender": s_ms / c_ms,
                     "playback_ms_per_frame": med(runs, "playback_ms_per_frame"),
                     "unconverged_frames": med(runs, "unconverged_frames"),
                     "goals_met": bool(s_ms <= 0.5 * c_ms and s_strain <= c_strain)})
    return rows


def table(rows: list[dict]) -> str:
    out = ["| method | grid | frames | ms/frame | × Blender | max edge strain | playback ms/frame |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        pb = "" if math.isnan(r["playback_ms_per_frame"]) else f"{r['playback_ms_per_frame']:.2f}"
        out.append(f"| {r['method']} | {r['grid']}² | {r['frames']} | {r['ms_per_frame']:.1f} | "
                   f"{r['ratio_to_blender']:.2f} | {100 * r['max_edge_strain']:.1f}% | {pb} |")
    out.append("")
    out.append("Goals: per preset Sinew ≤ 0.50× Blender's time and max edge strain ≤ Blender's; "
               "playback ≤ 5 ms/frame.")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(run(quick="--quick" in sys.argv[1:])))
