"""Self-collision through the real operator: a strip folding over a box (bpy module)."""

from __future__ import annotations

import importlib

import bpy
import numpy as np

from tests.blender.conftest import ADDON_MODULE
from tests.blender.test_springs_bake import evaluated
from tests.selfcollision_scene import DISTANCE, strip_over_box


def core_springs():
    return importlib.import_module(ADDON_MODULE + ".core.springs")


def triangles(me: bpy.types.Mesh) -> np.ndarray:
    me.calc_loop_triangles()
    t = np.empty(3 * len(me.loop_triangles), dtype=np.int64)
    me.loop_triangles.foreach_get("vertices", t)
    return t.reshape(-1, 3)


def test_self_collision_settings_exist(scene):
    props = bpy.types.Object.bl_rna.properties["sinew_springs"].fixed_type.bl_rna.properties
    assert props["self_collision"].type == "BOOLEAN" and props["self_collision"].default is False
    assert props["self_distance"].type == "FLOAT" and props["self_distance"].unit == "LENGTH"
    assert props["self_distance"].hard_min > 0


def test_strip_folding_over_a_box_never_crosses_itself(scene):
    cs = core_springs()
    ob = strip_over_box()
    tris = triangles(ob.data)
    assert bpy.ops.sinew.bake_springs() == {"FINISHED"}
    heights = []
    for f in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(f)
        x = evaluated(ob)
        assert cs.count_crossings(x, tris) == 0, f
        heights.append(x[:, 2].max())
    x = evaluated(ob)
    assert heights[-1] < 1.5  # it came down on the box and folded ...
    on_box = (np.abs(x[:, 0]) < 0.3) & (np.abs(x[:, 1]) < 0.3) & (x[:, 2] > 0.55)
    assert on_box.sum() >= 3  # ... with part of it lying on top of the box
    assert min_vertex_face_distance(x, tris) > 0.3 * DISTANCE  # the layers stay apart


def min_vertex_face_distance(x: np.ndarray, tris: np.ndarray) -> float:
    """Brute force: the smallest distance of a vertex to a triangle it is not a corner of."""
    closest = importlib.import_module(ADDON_MODULE + ".core.springs.colliders").closest_points_on_triangles
    vi, fi = (a.reshape(-1) for a in np.meshgrid(np.arange(len(x)), np.arange(len(tris)), indexing="ij"))
    keep = ~np.any(tris[fi] == vi[:, None], axis=1)
    vi, fi = vi[keep], fi[keep]
    p = x[tris[fi]]
    return float(np.linalg.norm(x[vi] - closest(x[vi], p[:, 0], p[:, 1], p[:, 2]), axis=1).min())


def test_self_collision_changes_the_bake_and_is_reported(scene):
    cs = core_springs()
    ob = strip_over_box()
    tris = triangles(ob.data)
    ob.sinew_springs.self_collision = False
    assert bpy.ops.sinew.bake_springs() == {"FINISHED"}
    scene.frame_set(scene.frame_end)
    off = evaluated(ob)
    assert bpy.ops.sinew.free_bake() == {"FINISHED"}
    ob.sinew_springs.self_collision = True
    assert bpy.ops.sinew.bake_springs() == {"FINISHED"}
    scene.frame_set(scene.frame_end)
    on = evaluated(ob)
    assert np.abs(on - off).max() > 0.01  # the setting does something
    assert cs.count_crossings(on, tris) == 0
