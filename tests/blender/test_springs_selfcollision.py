"""Self-collision through the real operator: a strip folding over a box (bpy module)."""

from __future__ import annotations

import importlib

import bpy
import numpy as np

from tests.blender.conftest import ADDON_MODULE

NX, NY = 2, 12  # quads across and along the 0.4 m × 2.4 m strip
DISTANCE = 0.02


def core_springs():
    return importlib.import_module(ADDON_MODULE + ".core.springs")


def evaluated(ob: bpy.types.Object) -> np.ndarray:
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    co = np.empty(3 * len(me.vertices), dtype=np.float32)
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    return co.reshape(-1, 3).astype(np.float64)


def triangles(me: bpy.types.Mesh) -> np.ndarray:
    me.calc_loop_triangles()
    t = np.empty(3 * len(me.loop_triangles), dtype=np.int64)
    me.loop_triangles.foreach_get("vertices", t)
    return t.reshape(-1, 3)


def strip_over_box(scene) -> bpy.types.Object:
    """A 0.4 × 2.4 m strip standing on its end, leaning a little, above a 0.6 m box."""
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0.0, 0.0, 0.3))
    box = bpy.context.active_object
    coll = bpy.data.collections.new("Colliders")
    scene.collection.children.link(coll)
    coll.objects.link(box)
    tilt = 0.05
    verts = [((i / NX - 0.5) * 0.4, 2.4 * j / NY * np.sin(tilt), 0.65 + 2.4 * j / NY * np.cos(tilt))
             for j in range(NY + 1) for i in range(NX + 1)]
    faces = [(j * (NX + 1) + i, j * (NX + 1) + i + 1, (j + 1) * (NX + 1) + i + 1, (j + 1) * (NX + 1) + i)
             for j in range(NY) for i in range(NX)]
    me = bpy.data.meshes.new("Strip")
    me.from_pydata(verts, [], faces)
    ob = bpy.data.objects.new("Strip", me)
    scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    s = ob.sinew_springs
    s.enabled, s.solver, s.collision_collection = True, "FAST", coll
    s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = 0.01, 1000.0, 200.0, 0.5
    s.damping, s.air_drag, s.substeps = 0.5, 0.1, 2
    s.self_collision, s.self_distance = True, DISTANCE
    scene.frame_start, scene.frame_end = 1, 30
    return ob


def test_self_collision_settings_exist(scene):
    props = bpy.types.Object.bl_rna.properties["sinew_springs"].fixed_type.bl_rna.properties
    assert props["self_collision"].type == "BOOLEAN" and props["self_collision"].default is False
    assert props["self_distance"].type == "FLOAT" and props["self_distance"].unit == "LENGTH"
    assert props["self_distance"].hard_min > 0


def test_strip_folding_over_a_box_never_crosses_itself(scene):
    cs = core_springs()
    ob = strip_over_box(scene)
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
    ob = strip_over_box(scene)
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
