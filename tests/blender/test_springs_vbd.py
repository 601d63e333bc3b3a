"""VBD (contact inside the solve) through the real operators: the kernel library the installed
add-on carries loads, the presets pick VBD for cloth with colliders, and a tablecloth on a
table with Blender's Collision modifier at its defaults bakes with nothing inside, centred,
within its strain limit, as Blender evaluates the result."""

from __future__ import annotations

import sys
from pathlib import Path

import bpy
import numpy as np

from tests.blender.conftest import ADDON_MODULE
from tests.blender.test_springs_bake import bake, evaluated, to_world, world_matrix
from tests.blender.test_springs_contact import convex_depth
from tools.scenes import meshes


def test_installed_addon_loads_its_own_kernel_library(scene):
    addon = sys.modules[ADDON_MODULE]
    deps = sys.modules[f"{ADDON_MODULE}.deps"]
    assert deps.kernels_problem() is None
    kernels = sys.modules[f"{ADDON_MODULE}.core.kernels"]
    path = Path(kernels.library_path()).resolve()
    # the library inside the installed extension, not the source tree's
    assert Path(addon.__file__).resolve().parent in path.parents
    assert kernels.library().sinew_abi_version() == kernels.ABI_VERSION


def _table(scene):
    bpy.ops.mesh.primitive_plane_add(size=4.0)
    bpy.context.active_object.modifiers.new("Collision", "COLLISION")
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0, 0, 0.3))
    table = bpy.context.active_object
    table.modifiers.new("Collision", "COLLISION")  # defaults: thickness 0.02, friction 5
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=16, y_subdivisions=16, size=0.9, location=(0, 0, 0.7))
    return table, bpy.context.active_object


def test_preset_picks_vbd_for_cloth_with_colliders_and_fast_otherwise(scene):
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=4, y_subdivisions=4, size=1.0)
    free = bpy.context.active_object
    assert bpy.ops.sinew.springs_preset(preset="COTTON") == {"FINISHED"}
    assert free.sinew_springs.solver == "FAST"
    _table(scene)
    ob = bpy.context.active_object
    assert bpy.ops.sinew.springs_preset(preset="COTTON") == {"FINISHED"}
    assert (ob.sinew_springs.solver, ob.sinew_springs.substeps) == ("VBD", 3)
    # pinned cloth with colliders or self-collision: VBD, iterated further
    ob.vertex_groups.new(name="pins").add([0, 1], 1.0, "REPLACE")
    ob.sinew_springs.pin_group = "pins"
    assert bpy.ops.sinew.springs_preset(preset="SILK") == {"FINISHED"}
    s = ob.sinew_springs
    assert (s.solver, s.substeps, s.iterations) == ("VBD", 3, 16)
    assert bpy.ops.sinew.springs_preset(preset="FLAG") == {"FINISHED"}  # a flag keeps FAST
    assert s.solver == "FAST"
    ob.sinew_springs.self_collision = True
    for other in scene.objects:  # no collider left
        if other is not ob:
            other.modifiers.clear()
    assert bpy.ops.sinew.springs_preset(preset="SILK") == {"FINISHED"}
    assert (s.solver, s.substeps, s.iterations) == ("VBD", 3, 16)
    assert bpy.ops.sinew.springs_preset(preset="FLAG") == {"FINISHED"}  # a flag keeps FAST
    assert s.solver == "FAST"
    ob.sinew_springs.self_collision = False
    assert bpy.ops.sinew.springs_preset(preset="SILK") == {"FINISHED"}  # pinned, nothing to hit
    assert s.solver == "FAST"
    ob.sinew_springs.pin_group = ""
    ob.sinew_springs.self_collision = False
    assert bpy.ops.sinew.springs_preset(preset="ROPE") == {"FINISHED"}
    assert ob.sinew_springs.solver == "FAST"


def test_tablecloth_on_a_table_bakes_outside_centred_and_within_its_limit(scene):
    table, ob = _table(scene)
    s = ob.sinew_springs
    s.enabled = True
    assert bpy.ops.sinew.springs_preset(preset="COTTON") == {"FINISHED"}
    assert s.solver == "VBD"
    scene.frame_start, scene.frame_end = 1, 36
    assert bake() == {"FINISHED"}
    assert s.bake_contacts > 0 and s.bake_max_penetration == 0.0
    me = ob.data
    e = np.empty(2 * len(me.edges), dtype=np.int64)
    me.edges.foreach_get("vertices", e)
    e = e.reshape(-1, 2)
    scene.frame_set(1)
    x0 = to_world(world_matrix(ob), evaluated(ob))
    rest = np.linalg.norm(x0[e[:, 0]] - x0[e[:, 1]], axis=1)
    worst = 0.0
    for f in range(2, 37):
        scene.frame_set(f)
        x = to_world(world_matrix(ob), evaluated(ob))
        assert convex_depth(table, x).max() <= 0.0, f  # no vertex inside the table
        assert x[:, 2].min() >= 0.0, f  # nor below the ground
        strain = np.linalg.norm(x[e[:, 0]] - x[e[:, 1]], axis=1) / rest - 1.0
        assert strain.max() <= s.max_stretch + 0.005 + 1e-4, f  # float32 mesh coordinates
        worst = max(worst, float(strain.max()))
    # the strain the bake reports is the strain Blender evaluates (float32 coordinates)
    assert abs(s.bake_max_strain - worst) < 1e-4, (s.bake_max_strain, worst)
    centre = x.mean(axis=0)
    assert np.hypot(centre[0], centre[1]) < 0.01
    assert x[:, 2].max() < 0.7  # it fell onto the table


def test_tight_tolerance_takes_more_iterations(scene):
    """A cloth swinging from two pinned corners: FAST at tolerance 1e-9 iterates more per frame
    than at the default 1 %."""
    out = []
    for tol in (1e-2, 1e-9):
        bpy.ops.wm.read_homefile(use_empty=True)
        bpy.ops.mesh.primitive_grid_add(x_subdivisions=5, y_subdivisions=5, size=1.0, location=(0, 0, 1))
        ob = bpy.context.active_object
        ob.vertex_groups.new(name="pins").add([0, 4], 1.0, "REPLACE")
        s = ob.sinew_springs
        s.enabled, s.solver, s.iterations, s.tolerance, s.pin_group = True, "FAST", 200, tol, "pins"
        bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 6
        assert bake() == {"FINISHED"}
        out.append(s.bake_iterations)
    assert out[1] > out[0]


def test_armature_deformed_body_moving_into_cloth_at_one_substep_leaves_nothing_inside(scene):
    """A ball skinned to a bone (Armature and Collision modifiers at their defaults) that rises
    into a falling cloth and then sweeps sideways under it; VBD at one substep: no cloth vertex
    inside the body at any frame, as Blender evaluates both, and contact was made."""
    rig = bpy.data.objects.new("Rig", bpy.data.armatures.new("Rig"))
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    bone = rig.data.edit_bones.new("root")
    bone.head, bone.tail = (0, 0, 0), (0, 0, 0.3)
    bpy.ops.object.mode_set(mode="OBJECT")
    pose = rig.pose.bones["root"]
    for f, loc in ((1, (0.0, 0.0, 0.0)), (10, (0.0, 0.25, 0.0)), (24, (0.3, 0.25, 0.0))):
        pose.location = loc  # bone space: y along the bone (up), x is world x
        pose.keyframe_insert("location", frame=f)
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0, 0, 0.3))
    ball = bpy.context.active_object
    ball.vertex_groups.new(name="root").add(list(range(len(ball.data.vertices))), 1.0, "REPLACE")
    ball.modifiers.new("Armature", "ARMATURE").object = rig
    ball.modifiers.new("Collision", "COLLISION")
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=16, y_subdivisions=16, size=1.0, location=(0, 0, 0.75))
    ob = bpy.context.active_object
    s = ob.sinew_springs
    s.enabled = True
    assert bpy.ops.sinew.springs_preset(preset="COTTON") == {"FINISHED"}
    s.solver, s.substeps = "VBD", 1
    scene.frame_start, scene.frame_end = 1, 24
    assert bake() == {"FINISHED"}
    assert s.bake_contacts > 0 and s.bake_max_penetration == 0.0
    for f in range(1, 25):
        scene.frame_set(f)
        x = to_world(world_matrix(ob), evaluated(ob))
        assert not meshes.inside(ball, x).any(), f
    centre = to_world(world_matrix(ball), evaluated(ball)).mean(axis=0)
    assert np.allclose(centre, [0.3, 0.0, 0.55], atol=0.02)  # the armature moved the body
