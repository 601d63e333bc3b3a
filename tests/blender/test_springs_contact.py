"""Collider contact through the real operator: Blender's Collision modifier, moving bodies."""

from __future__ import annotations

import bpy
import numpy as np

from tests.blender.test_springs_bake import bake, evaluated, to_world, world_matrix


def world_triangles(ob: bpy.types.Object) -> tuple[np.ndarray, np.ndarray]:
    """The evaluated mesh of ``ob`` in world space: vertices ``(m, 3)``, triangles ``(t, 3)``."""
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    me = ev.to_mesh()
    me.calc_loop_triangles()
    v = np.empty(3 * len(me.vertices))
    me.vertices.foreach_get("co", v)
    t = np.empty(3 * len(me.loop_triangles), dtype=np.int64)
    me.loop_triangles.foreach_get("vertices", t)
    m = np.array([list(r) for r in ev.matrix_world])
    ev.to_mesh_clear()
    return to_world(m, v.reshape(-1, 3)), t.reshape(-1, 3)


def test_collider_with_default_collision_modifier_in_collection_bakes(scene):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.4, segments=16, ring_count=8)
    sphere = bpy.context.active_object
    sphere.modifiers.new("Collision", "COLLISION")  # default settings
    coll = bpy.data.collections.new("Colliders")
    scene.collection.children.link(coll)
    coll.objects.link(sphere)
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=6, y_subdivisions=6, size=1.2, location=(0, 0, 0.6))
    ob = bpy.context.active_object
    s = ob.sinew_springs
    s.enabled, s.collision_collection = True, coll
    scene.frame_start, scene.frame_end = 1, 12
    assert bake() == {"FINISHED"}
    scene.frame_set(12)
    x = to_world(world_matrix(ob), evaluated(ob))
    assert np.linalg.norm(x, axis=1).min() > 0.4  # outside the sphere
    assert x[:, 2].max() < 0.6  # and it did fall
