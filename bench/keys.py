"""Keyframe writing speed: rotation keys on bones and per-frame vertex positions.

Both through the add-on's own writers' building blocks: ``compat.set_keys`` (bulk
``keyframe_points.add`` + ``foreach_set``) for bone channels, and ``foreach_set`` on
shape-key data for vertices. Run in a bpy environment.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run(quick: bool = False) -> list[dict]:
    import bpy

    from blender_addon import compat

    rows = []
    bones, frames = (10, 200) if quick else (30, 1000)
    bpy.ops.wm.read_homefile(use_empty=True)
    arm = bpy.data.armatures.new("A")
    ob = bpy.data.objects.new("A", arm)
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for i in range(bones):
        eb = arm.edit_bones.new(f"b{i}")
        eb.head, eb.tail = (0, 0, i), (0, 0, i + 1)
    bpy.ops.object.mode_set(mode="OBJECT")
    compat.ensure_action(ob, "A")
    f = np.arange(1, frames + 1, dtype=np.float64)
    rng = np.random.default_rng(0)
    values = rng.normal(size=(bones, 4, frames))

    def write_bones():
        for b in range(bones):
            for c in range(4):
                fc = compat.ensure_fcurve(ob, f'pose.bones["b{b}"].rotation_quaternion', c, f"b{b}")
                compat.set_keys(fc, f, values[b, c])

    t = _median_time(write_bones, 3)
    keys = bones * 4 * frames
    rows.append({"what": "bone rotation keys", "count": keys, "seconds": t, "per_second": keys / t})

    n = 16 if quick else 64
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n, y_subdivisions=n, size=2)
    grid = bpy.context.active_object
    nv = len(grid.data.vertices)
    vframes = 24 if quick else 100
    grid.shape_key_add(name="Basis")
    co = rng.normal(size=(vframes, nv * 3)).astype(np.float32)

    def write_vertices():
        for k in range(vframes):
            sk = grid.shape_key_add(name=f"f{k}", from_mix=False)
            sk.data.foreach_set("co", co[k])
        for sk in list(grid.data.shape_keys.key_blocks)[1:]:
            grid.shape_key_remove(sk)

    t = _median_time(write_vertices, 3)
    rows.append({"what": "vertex positions (shape key per frame)", "count": nv * vframes, "seconds": t,
                 "per_second": nv * vframes / t})
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
