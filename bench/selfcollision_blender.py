"""Self-collision: Sinew against Blender's Cloth on a strip folding over a box (not a test).

In one bpy process: a 0.4 m × 2.4 m strip (8 × 48 quads, 441 vertices) stands on its end,
leaning 3°, 5 cm above a 0.6 m box on which it falls and folds over itself.

* Blender Cloth at its defaults with ``collision_settings.use_self_collision`` on, the box
  carrying a Collision modifier at its defaults; frames stepped with ``frame_set``;
* Sinew end to end with the shipped ``COTTON`` preset (applied by name through
  ``sinew.springs_preset``, so it follows the preset's current values) and ``self_collision``
  on at the default ``self_distance``: ``bpy.ops.sinew.bake_springs`` (read, simulate, write
  shape keys); the box is a collider through ``collision_collection`` at the default 0.02 m
  thickness, the same as the Collision modifier's ``thickness_outer``.

For both: time per frame, the most crossing triangle pairs in any frame (non-adjacent
pairs, ``core.springs.count_crossings``), the smallest distance of a vertex to a triangle
it is not a corner of at the last frame, and the largest edge strain. Runs alternate and
repeat; medians are reported. Goals (issue 15): Sinew ≤ 0.5× Blender's time, 0 crossings.

``.venv/bpy-5.2/bin/python bench/selfcollision_blender.py [--quick]``; importable as
``run(quick) -> list[dict]``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tools.scenes import meshes  # noqa: E402
from tools.userdir import throwaway_user_resources  # noqa: E402

throwaway_user_resources("sinew-bench-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402

from bench.springs_blender import _evaluated, _positions  # noqa: E402
from core.springs import count_crossings  # noqa: E402
from core.springs.colliders import closest_points_on_triangles  # noqa: E402

NX, NY, TILT = 8, 48, 0.05
#: Frames of a full run.
FRAMES = 72
PRESET = "COTTON"
SINEW_ROW = f"Sinew ({PRESET.lower()} preset, self_collision on; read+simulate+write)"


def _install() -> None:
    from bench import install_addon

    install_addon()


def _strip(name: str) -> bpy.types.Object:
    return meshes.leaning_strip(name, NX, NY, TILT)


def _box(name: str, modifier: bool) -> bpy.types.Object:
    ob = meshes.cube_on_ground(0.6, name)
    if modifier:
        ob.modifiers.new("Collision", "COLLISION")
    return ob


def _topology(ob) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    me = ob.data
    e = np.empty(2 * len(me.edges), dtype=np.int64)
    me.edges.foreach_get("vertices", e)
    me.calc_loop_triangles()
    t = np.empty(3 * len(me.loop_triangles), dtype=np.int64)
    me.loop_triangles.foreach_get("vertices", t)
    return e.reshape(-1, 2), t.reshape(-1, 3), _positions(me)


def min_gap(x: np.ndarray, tris: np.ndarray) -> float:
    """Smallest distance of a vertex to a triangle it is not a corner of, m."""
    vi, fi = (a.reshape(-1) for a in np.meshgrid(np.arange(len(x)), np.arange(len(tris)), indexing="ij"))
    keep = ~np.any(tris[fi] == vi[:, None], axis=1)
    vi, fi = vi[keep], fi[keep]
    p = x[tris[fi]]
    return float(np.linalg.norm(x[vi] - closest_points_on_triangles(x[vi], p[:, 0], p[:, 1], p[:, 2]),
                                axis=1).min())


def _measure(ob, frames: int, edges, tris, rest) -> dict[str, float]:
    crossings, strain = 0, 0.0
    x = rest
    for f in range(1, frames + 1):
        bpy.context.scene.frame_set(f)
        x = _evaluated(ob)
        crossings = max(crossings, count_crossings(x, tris))
        ln = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
        strain = max(strain, float(np.max(ln / rest - 1.0)))
    return {"max_crossings": crossings, "max_edge_strain": strain, "min_gap_mm": 1000 * min_gap(x, tris)}


def _remove(*obs) -> None:
    for ob in obs:
        data = ob.data
        bpy.data.objects.remove(ob)
        bpy.data.meshes.remove(data)
    for c in list(bpy.data.collections):
        bpy.data.collections.remove(c)
    bpy.context.scene.frame_set(1)


def blender_cloth(frames: int) -> dict[str, float]:
    scene = bpy.context.scene
    scene.frame_set(1)
    box = _box("BlenderBox", modifier=True)
    ob = _strip("BlenderStrip")
    edges, tris, rest_x = _topology(ob)
    rest = np.linalg.norm(rest_x[edges[:, 0]] - rest_x[edges[:, 1]], axis=1)
    cloth = ob.modifiers.new("Cloth", "CLOTH")
    cloth.collision_settings.use_self_collision = True
    cloth.point_cache.frame_start, cloth.point_cache.frame_end = 1, frames
    scene.frame_set(1)
    _evaluated(ob)
    t = time.perf_counter()
    for f in range(2, frames + 1):
        scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
    elapsed = time.perf_counter() - t
    out = {"ms_per_frame": 1000 * elapsed / (frames - 1)}
    out.update(_measure(ob, frames, edges, tris, rest))
    _remove(ob, box)
    return out


def sinew_scene() -> tuple[bpy.types.Object, bpy.types.Object]:
    """Sinew's strip and its box (in a collision collection), with the preset and
    self-collision set as the bench bakes them (``tools.replay`` records this bake too)."""
    scene = bpy.context.scene
    scene.frame_set(1)
    box = _box("SinewBox", modifier=False)
    coll = bpy.data.collections.new("SinewColliders")
    scene.collection.children.link(coll)
    coll.objects.link(box)
    ob = _strip("SinewStrip")
    s = ob.sinew_springs
    s.enabled, s.collision_collection = True, coll
    assert bpy.ops.sinew.springs_preset(preset=PRESET) == {"FINISHED"}
    s.self_collision = True
    return ob, box


def sinew(frames: int) -> dict[str, float]:
    ob, box = sinew_scene()
    edges, tris, rest_x = _topology(ob)
    rest = np.linalg.norm(rest_x[edges[:, 0]] - rest_x[edges[:, 1]], axis=1)
    t = time.perf_counter()
    try:
        res = bpy.ops.sinew.bake_springs(frame_start=1, frame_end=frames)
    except RuntimeError as exc:  # a failed bake is a result too: say so
        _remove(ob, box)
        return {"ms_per_frame": float("nan"), "max_crossings": float("nan"), "min_gap_mm": float("nan"),
                "max_edge_strain": float("nan"), "error": str(exc).strip().splitlines()[-1][:160]}
    elapsed = time.perf_counter() - t
    assert res == {"FINISHED"}, res
    out = {"ms_per_frame": 1000 * elapsed / (frames - 1)}  # frames - 1 steps, as for Blender
    out.update(_measure(ob, frames, edges, tris, rest))
    _remove(ob, box)
    return out


def run(quick: bool = False) -> list[dict]:
    """Alternate Blender Cloth and Sinew; one dict per method (medians)."""
    _install()
    bpy.ops.wm.read_homefile(use_empty=True)
    frames, reps = (30, 1) if quick else (FRAMES, 3)
    runs: dict[str, list[dict]] = {"Blender Cloth (defaults, self-collision on)": [],
                                   SINEW_ROW: []}
    for _ in range(reps):
        runs["Blender Cloth (defaults, self-collision on)"].append(blender_cloth(frames))
        runs[SINEW_ROW].append(sinew(frames))
    base = statistics.median(r["ms_per_frame"] for r in runs["Blender Cloth (defaults, self-collision on)"])
    rows = []
    for method, rs in runs.items():
        row = {"method": method, "vertices": (NX + 1) * (NY + 1), "frames": frames, "repeats": reps}
        for key in ("ms_per_frame", "max_crossings", "min_gap_mm", "max_edge_strain"):
            row[key] = statistics.median(r[key] for r in rs)
        errors = sorted({r["error"] for r in rs if r.get("error")})
        if errors:
            row["error"] = "; ".join(errors)
        row["ratio_to_blender"] = row["ms_per_frame"] / base
        rows.append(row)
    return rows


if __name__ == "__main__":
    from tools.bench import table

    print(table(run(quick="--quick" in sys.argv[1:])))
