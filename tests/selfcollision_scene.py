"""The self-collision test scene, built inside Blender: a 0.4 m × 2.4 m strip standing on
its end, leaning 3°, above a 0.6 m box it falls onto and folds over.

Shared by the bpy-module test (tests/blender) and the command-line test on the real binary
(tests/cli), which imports it after putting the repository on ``sys.path``.
"""

from __future__ import annotations

NX, NY, TILT = 2, 12, 0.05  # quads across and along the strip; lean, rad
DISTANCE = 0.02  # self_distance, m


def strip_over_box(frames: int = 30):
    """Build the scene in the current (empty) file; return the strip object, set up for a
    FAST bake with self-collision over frames 1..``frames``."""
    import bpy

    from tools.scenes import meshes

    scene = bpy.context.scene
    box = meshes.cube_on_ground(0.6)
    coll = bpy.data.collections.new("Colliders")
    scene.collection.children.link(coll)
    coll.objects.link(box)
    ob = meshes.leaning_strip("Strip", NX, NY, TILT)
    s = ob.sinew_springs
    s.enabled, s.solver, s.collision_collection = True, "FAST", coll
    s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = 0.01, 1000.0, 200.0, 0.5
    s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0  # per vertex / spring
    s.damping, s.air_drag, s.substeps = 0.5, 0.1, 2
    s.self_collision, s.self_distance = True, DISTANCE
    scene.frame_start, scene.frame_end = 1, frames
    return ob
