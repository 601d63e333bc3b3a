"""Collider contact through the real operator: Blender's Collision modifier, moving bodies."""

from __future__ import annotations

import bpy
import numpy as np

from tests.blender.test_springs_bake import bake, evaluated, to_world, world_matrix
from tools.scenes import meshes


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


def convex_depth(ob: bpy.types.Object, points: np.ndarray) -> np.ndarray:
    """How deep ``points`` ``(k, 3)`` (world) are inside the convex evaluated mesh of ``ob``
    (> 0 inside, m): the smallest distance behind its face planes."""
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    me = ev.to_mesh()
    nrm = np.empty(3 * len(me.polygons))
    cen = np.empty(3 * len(me.polygons))
    me.polygons.foreach_get("normal", nrm)
    me.polygons.foreach_get("center", cen)
    m = np.array([list(r) for r in ev.matrix_world])
    ev.to_mesh_clear()
    cen = to_world(m, cen.reshape(-1, 3))
    nrm = nrm.reshape(-1, 3) @ np.linalg.inv(m[:3, :3])
    nrm /= np.linalg.norm(nrm, axis=1)[:, None]
    return -np.max((points[:, None, :] - cen[None]) @ np.ones(3) * 0 + np.einsum("kfi,fi->kf", points[:, None, :] - cen[None], nrm), axis=1)


def test_collision_modifier_alone_marks_a_collider(scene):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.4, segments=16, ring_count=8)
    sphere = bpy.context.active_object
    sphere.modifiers.new("Collision", "COLLISION")  # default settings, in no collection
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=6, y_subdivisions=6, size=1.2, location=(0, 0, 0.6))
    ob = bpy.context.active_object
    ob.sinew_springs.enabled = True
    scene.frame_start, scene.frame_end = 1, 12
    assert bake() == {"FINISHED"}
    assert ob.sinew_springs.bake_contacts > 0 and ob.sinew_springs.bake_max_penetration == 0.0
    for f in (6, 12):
        scene.frame_set(f)
        x = to_world(world_matrix(ob), evaluated(ob))
        assert np.linalg.norm(x, axis=1).min() > 0.4, f  # outside the sphere (and its polygon)
    assert x[:, 2].max() < 0.6  # it did fall


def test_drape_rests_on_the_sphere_above_the_ground(scene):
    """The COTTON preset as shipped dropped on a sphere on a ground plane, both colliders
    with Collision modifiers at their default settings (cloth friction 5, μ 0.05, as in
    Blender's Cloth): nothing inside either at any frame, and the cloth stays on the
    sphere. (A light spring cloth without a strain limit, 0.01 kg and 400 N/m per
    spring, is not yet at rest at frame 60 and may slide off the pole at this friction.)"""
    bpy.ops.mesh.primitive_plane_add(size=4.0)
    ground = bpy.context.active_object
    ground.modifiers.new("Collision", "COLLISION")
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.3, location=(0, 0, 0.3), segments=24, ring_count=12)
    ball = bpy.context.active_object
    ball.modifiers.new("Collision", "COLLISION")
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=14, y_subdivisions=14, size=1.2, location=(0, 0, 0.75))
    ob = bpy.context.active_object
    s = ob.sinew_springs
    s.enabled = True
    assert bpy.ops.sinew.springs_preset(preset="COTTON") == {"FINISHED"}
    scene.frame_start, scene.frame_end = 1, 60
    assert bake() == {"FINISHED"}
    assert s.bake_contacts > 0 and s.bake_max_penetration == 0.0
    thickness = ball.collision.thickness_outer
    for f in range(2, 61):
        scene.frame_set(f)
        x = to_world(world_matrix(ob), evaluated(ob))
        assert x[:, 2].min() >= -1e-6, f  # above the ground
        # outside the sphere's polygon mesh (a convex body): behind no face plane
        assert convex_depth(ball, x).max() <= 0.0, f
    # resting on the sphere's top, not slid off: the cloth still covers the pole
    r = np.hypot(x[:, 0], x[:, 1])
    over_pole = x[np.argmin(r)]
    assert r.min() < 0.15 and 0.55 < over_pole[2] < 0.6 + 3 * thickness
    assert x[:, 2].min() < 0.45  # its edges hang down the sphere's sides


def skirt(radius: float, top: float, height: float, around: int = 24, rings: int = 7) -> bpy.types.Object:
    """An open cylinder (no caps) of quads; vertex group "pins" holds its top ring."""
    return meshes.skirt(radius, top, height, around, rings, select=True)


def test_skirt_on_a_moving_body_stays_outside_it_at_every_frame(scene):
    bpy.ops.mesh.primitive_cylinder_add(radius=0.3, depth=1.2, vertices=16, location=(0, 0, 0))
    body = bpy.context.active_object
    body.modifiers.new("Collision", "COLLISION")
    for f, x in ((1, 0.0), (8, 0.6), (15, 0.0)):
        body.location = (x, 0.0, 0.0)
        body.keyframe_insert("location", frame=f)
    ob = skirt(radius=0.34, top=0.5, height=0.6)
    ob.parent = body  # the pinned ring rides on the body
    s = ob.sinew_springs
    s.enabled, s.pin_group = True, "pins"
    s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = 0.01, 500.0, 50.0, 1.0
    s.damping, s.air_drag = 0.5, 0.5
    scene.frame_start, scene.frame_end = 1, 20
    bpy.context.view_layer.objects.active = ob
    assert bake() == {"FINISHED"}
    assert s.bake_max_penetration == 0.0
    me = ob.data
    e = np.empty(2 * len(me.edges), dtype=np.int64)
    me.edges.foreach_get("vertices", e)
    e = e.reshape(-1, 2)
    t = np.linspace(0.0, 1.0, 9)
    swung = 0.0
    for f in range(1, 21):
        scene.frame_set(f)
        x = to_world(world_matrix(ob), evaluated(ob))
        assert convex_depth(body, x).max() <= 0.0, f  # no vertex inside the body
        pts = x[e[:, 0], None] + t[None, :, None] * (x[e[:, 1]] - x[e[:, 0]])[:, None]
        assert convex_depth(body, pts.reshape(-1, 3)).max() <= 0.0, f  # no edge through it
        bottom = x[-24:].mean(axis=0)
        swung = max(swung, abs(bottom[0] - body.matrix_world.translation.x))
    assert swung > 0.01  # the hem lags behind the moving body: it really is simulated
