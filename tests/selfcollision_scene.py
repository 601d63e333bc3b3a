"""The self-collision test scene, built inside Blender: a 0.4 m × 2.4 m strip standing on
its end, leaning 3°, above a 0.6 m box it falls onto and folds over.

Shared by the bpy-module test (tests/blender) and the command-line test on the real binary
(tests/cli), which imports it after putting the repository on ``sys.path``.
"""

from __future__ import annotations

import math

NX, NY, TILT = 2, 12, 0.05  # quads across and along the strip; lean, rad
DISTANCE = 0.02  # self_distance, m


def strip_over_box(frames: int = 30):
    """Build the scene in the current (empty) file; return the strip object, set up for a
    FAST bake with self-collision over frames 1..``frames``."""
    import bpy

    scene = bpy.context.scene
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0.0, 0.0, 0.3))
    box = bpy.context.active_object
    coll = bpy.data.collections.new("Colliders")
    scene.collection.children.link(coll)
    coll.objects.link(box)
    w = NX + 1
    verts = [((i / NX - 0.5) * 0.4, 2.4 * j / NY * math.sin(TILT), 0.65 + 2.4 * j / NY * math.cos(TILT))
             for j in range(NY + 1) for i in range(w)]
    faces = [(j * w + i, j * w + i + 1, (j + 1) * w + i + 1, (j + 1) * w + i)
             for j in range(NY) for i in range(NX)]
    me = bpy.data.meshes.new("Strip")
    me.from_pydata(verts, [], faces)
    ob = bpy.data.objects.new("Strip", me)
    scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    s = ob.sinew_springs
    s.enabled, s.solver, s.collision_collection = True, "FAST", coll
    s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = 0.01, 1000.0, 200.0, 0.5
    s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0  # per vertex / spring
    s.damping, s.air_drag, s.substeps = 0.5, 0.1, 2
    s.self_collision, s.self_distance = True, DISTANCE
    scene.frame_start, scene.frame_end = 1, frames
    return ob
