"""Blender's force fields on spring bakes, through the real operator (Blender evaluates
the keys): a Wind field moves a flag downwind, field_weight 0 and use_force_fields off give
the no-field bake bit for bit, keyed strength acts per frame, unsupported or hidden fields
do nothing."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

from tests.blender.test_springs_bake import evaluated, play, world_matrix
from tools.scenes import meshes

FRAMES = 10


def flag(name: str = "Flag") -> bpy.types.Object:
    """A 1.5 × 1 m grid standing in the XZ plane (normal ±Y), pinned on its x-min edge."""
    ob = meshes.flag_on_pole(7, 5, name)
    s = ob.sinew_springs
    s.enabled, s.pin_group, s.solver = True, "pole", "FAST"
    s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = 0.02, 600.0, 60.0, 2.0
    s.damping, s.air_drag, s.substeps, s.iterations = 0.3, 0.1, 2, 10
    s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0  # the first round's per-vertex / per-spring model
    return ob


def wind(strength: float = 300.0, flow: float = 0.0) -> bpy.types.Object:
    """A Wind field (Add > Force Field > Wind) blowing along +Y."""
    bpy.ops.object.effector_add(type="WIND", location=(0.0, -2.0, 0.0),
                                rotation=(-math.pi / 2, 0.0, 0.0))
    ob = bpy.context.active_object
    ob.field.strength, ob.field.flow = strength, flow
    return ob


def bake_world(scene, ob) -> np.ndarray:
    """Bake frames 1..FRAMES through the operator; world positions per frame ``(F, n, 3)``."""
    bpy.context.view_layer.objects.active = ob
    scene.frame_start, scene.frame_end = 1, FRAMES
    if ob.sinew_springs.baked:
        assert bpy.ops.sinew.free_bake() == {"FINISHED"}
    assert bpy.ops.sinew.bake_springs() == {"FINISHED"}
    local = play(scene, ob, range(1, FRAMES + 1))
    m = world_matrix(ob)
    return local @ m[:3, :3].T + m[:3, 3]


def test_settings_and_panel(scene):
    props = bpy.types.Object.bl_rna.properties["sinew_springs"].fixed_type.bl_rna.properties
    assert props["use_force_fields"].type == "BOOLEAN" and props["use_force_fields"].default is True
    assert props["field_weight"].type == "FLOAT" and props["field_weight"].default == 1.0
    assert bpy.types.SINEW_PT_springs_fields.bl_parent_id == "SINEW_PT_springs"


def test_wind_field_moves_the_flag_downwind(scene):
    ob = flag()
    still = bake_world(scene, ob)
    field = wind(300.0)
    assert field.field.wind_factor == 1.0  # Blender's Add-menu Wind acts on faces by normal
    blown = bake_world(scene, ob)
    assert not np.array_equal(blown, still)
    assert np.abs(still[:, :, 1]).max() < 1e-4  # without wind it swings in its plane (float32 keys)
    free = blown[0, :, 0] > blown[0, :, 0].min() + 1e-6
    assert blown[-1, free, 1].mean() > 0.05  # downwind (+Y)
    assert blown[-1, free, 1].min() > -1e-4
    # turning the wind around blows the other way
    field.rotation_euler = (math.pi / 2, 0.0, 0.0)
    back = bake_world(scene, ob)
    assert back[-1, free, 1].mean() < -0.05


def test_field_weight_zero_and_fields_off_give_the_no_field_bake_bit_for_bit(scene):
    ob = flag()
    wind(400.0, flow=1.0)
    bpy.ops.object.effector_add(type="TURBULENCE", location=(0.5, 0.3, 0.0))
    bpy.context.active_object.field.strength = 5.0
    ob.sinew_springs.field_weight = 0.0
    weight0 = bake_world(scene, ob)
    ob.sinew_springs.field_weight = 1.0
    ob.sinew_springs.use_force_fields = False
    off = bake_world(scene, ob)
    for name in ("Wind", "Turbulence"):
        bpy.data.objects.remove(bpy.data.objects[name])
    ob.sinew_springs.use_force_fields = True
    none = bake_world(scene, ob)
    assert np.array_equal(weight0, none) and np.array_equal(off, none)
    # and a weight of 0.5 lies between nothing and the full field
    wind(400.0)
    ob.sinew_springs.field_weight = 0.5
    half = bake_world(scene, ob)
    ob.sinew_springs.field_weight = 1.0
    full = bake_world(scene, ob)
    assert 0.0 < half[-1, :, 1].mean() < full[-1, :, 1].mean()


def test_keyed_strength_takes_effect_per_frame(scene):
    ob = flag()
    still = bake_world(scene, ob)
    field = wind(0.0)
    for frame, value in ((1, 0.0), (5, 0.0), (6, 500.0)):
        field.field.strength = value
        field.keyframe_insert('field.strength', frame=frame)
    blown = bake_world(scene, ob)
    # frames 1..5: strength 0 at every substep, so exactly the still bake
    assert np.array_equal(blown[:5], still[:5])
    # the step into frame 6 already feels the rising strength
    assert blown[5, :, 1].mean() > still[5, :, 1].mean() + 1e-4
    assert blown[-1, :, 1].mean() > 0.02


def test_hidden_and_unsupported_fields_do_nothing(scene, capsys):
    ob = flag()
    still = bake_world(scene, ob)
    hidden = wind(400.0)
    hidden.hide_viewport = True
    bpy.ops.object.effector_add(type="MAGNET", location=(0.5, -1.0, 0.0))
    bpy.context.active_object.field.strength = 50.0
    capsys.readouterr()
    got = bake_world(scene, ob)
    assert np.array_equal(got, still)
    assert "skipped: Magnet (MAGNET)" in capsys.readouterr().out  # the bake report says so
    # the eye icon does not matter (as for Blender's Cloth)
    hidden.hide_viewport = False
    hidden.hide_set(True)
    assert not np.array_equal(bake_world(scene, ob), still)


@pytest.mark.parametrize("kind", ["FORCE", "VORTEX", "DRAG"])
def test_other_field_types_act_on_the_bake(scene, kind):
    ob = flag()
    still = bake_world(scene, ob)
    bpy.ops.object.effector_add(type=kind, location=(0.75, -1.0, -0.5))
    f = bpy.context.active_object.field
    f.strength = {"FORCE": 200.0, "VORTEX": 5.0, "DRAG": 2.0}[kind]
    got = bake_world(scene, ob)
    assert np.all(np.isfinite(got))
    if kind == "DRAG":  # drag slows the falling flag down
        speed = lambda x: np.linalg.norm(np.diff(x, axis=0), axis=2).mean()  # noqa: E731
        assert speed(got) < speed(still)
    else:
        assert np.abs(got - still).max() > 1e-3


def _world_now(ob) -> np.ndarray:
    m = world_matrix(ob)
    return evaluated(ob) @ m[:3, :3].T + m[:3, 3]


#: (type, settings, tilt about X, gravity) of the fields compared with Blender's Cloth
NEWTON_CASES = {
    "wind": ("WIND", dict(shape="PLANE", strength=20.0, flow=0.0), 0.0, False),
    "wind_45": ("WIND", dict(shape="PLANE", strength=20.0, flow=0.0), math.pi / 4, False),
    "force_plane": ("FORCE", dict(shape="PLANE", strength=20.0), 0.0, False),
    "vortex_point": ("VORTEX", dict(shape="POINT", strength=20.0), 0.0, False),
    "wind_flow": ("WIND", dict(shape="PLANE", strength=0.0, flow=1.0), 0.0, True),
    "drag": ("DRAG", dict(linear_drag=1.0, quadratic_drag=1.0), 0.0, True),
}


@pytest.mark.parametrize("case", list(NEWTON_CASES))
def test_fields_push_with_the_newtons_of_blenders_cloth(scene, case):
    """A free 2 × 2 m sheet, 0.3 kg per vertex, no air drag: its mean displacement
    integrates the net external force (internal spring forces cancel in the mean), so
    Sinew's and Blender's Cloth's agree when the field forces agree. Velocity-dependent
    fields (flow, Drag) are compared on the sheet falling under gravity; Blender's Cloth
    scales gravity by 0.001 · fps² (SIM_mass_spring.cc), so Sinew gets that gravity."""
    kind, settings, tilt, gravity = NEWTON_CASES[case]
    frames = 30 if gravity else 10
    moved = {}
    for mode in ("cloth", "sinew"):
        bpy.ops.wm.read_homefile(use_empty=True)
        sc = bpy.context.scene
        sc.use_gravity = gravity
        bpy.ops.mesh.primitive_grid_add(x_subdivisions=8, y_subdivisions=8, size=2.0)
        ob = bpy.context.active_object
        bpy.ops.object.effector_add(type=kind, location=(0.3, 0.2, -2.0), rotation=(tilt, 0.0, 0.0))
        f = bpy.context.active_object.field
        for key, value in settings.items():
            setattr(f, key, value)
        bpy.context.view_layer.objects.active = ob
        x0 = _world_now(ob)
        if mode == "cloth":
            cloth = ob.modifiers.new("Cloth", "CLOTH")
            cloth.settings.air_damping = 0.0
            cloth.point_cache.frame_start, cloth.point_cache.frame_end = 1, frames
            for fr in range(1, frames + 1):
                sc.frame_set(fr)
        else:
            fps = sc.render.fps / sc.render.fps_base
            sc.gravity = tuple(0.001 * fps * fps * np.array(sc.gravity))
            s = ob.sinew_springs
            s.enabled, s.solver, s.substeps, s.vertex_mass, s.air_drag = True, "IMPLICIT", 5, 0.3, 0.0
            s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0  # Blender's 0.3 kg per vertex
            assert bpy.ops.sinew.bake_springs(frame_start=1, frame_end=frames) == {"FINISHED"}
            sc.frame_set(frames)
        moved[mode] = (_world_now(ob) - x0).mean(axis=0)
    scale = np.linalg.norm(moved["cloth"])
    assert scale > 0.03
    np.testing.assert_allclose(moved["sinew"], moved["cloth"], atol=0.01 * scale)
    if gravity:  # the field really slowed the fall: without it the sheet falls further
        t = (frames - 1) / 24.0
        free_fall = 0.5 * 9.81 * 0.001 * 24 * 24 * t * t
        assert -moved["cloth"][2] < 0.99 * free_fall
