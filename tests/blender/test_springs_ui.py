"""Spring settings, presets, panels and registration."""

from __future__ import annotations

import sys

import bpy
import pytest

from tests.blender.conftest import ADDON_MODULE

CONTRACT_FIELDS = {
    "enabled": "BOOLEAN", "solver": "ENUM", "vertex_mass": "FLOAT", "stiffness": "FLOAT",
    "shear_stiffness": "FLOAT", "bending_stiffness": "FLOAT", "damping": "FLOAT",
    "air_drag": "FLOAT", "pin_group": "STRING", "substeps": "INT", "iterations": "INT",
    "collision_collection": "POINTER", "output": "ENUM",
    # added in the second round (material model, strain limit, soft pins, pre-roll)
    "mass_mode": "ENUM", "density": "FLOAT", "stiffness_mode": "ENUM", "max_stretch": "FLOAT",
    "pin_stiffness": "FLOAT", "pre_roll": "INT",
    # added in the third round (contact inside the solve, convergence)
    "tolerance": "FLOAT",
}


def test_settings_match_the_contract(scene):
    props = bpy.types.Object.bl_rna.properties["sinew_springs"].fixed_type.bl_rna.properties
    for name, kind in CONTRACT_FIELDS.items():
        assert props[name].type == kind, name
    assert [i.identifier for i in props["solver"].enum_items] == [
        "EXPLICIT", "SYMPLECTIC", "IMPLICIT", "NEWTON", "FAST", "VBD"]
    assert [i.identifier for i in props["output"].enum_items] == ["KEYFRAMES", "CACHE"]
    assert [i.identifier for i in props["mass_mode"].enum_items] == ["VERTEX", "DENSITY"]
    assert [i.identifier for i in props["stiffness_mode"].enum_items] == ["SPRING", "MATERIAL"]
    # new objects get the resolution-independent model
    assert props["mass_mode"].default == "DENSITY" and props["stiffness_mode"].default == "MATERIAL"
    assert props["pre_roll"].hard_min == 0 and props["pin_stiffness"].hard_min == 0
    assert props["substeps"].hard_min == 1 and props["iterations"].hard_min == 1
    assert props["collision_collection"].fixed_type.identifier == "Collection"
    assert bpy.types.Object.bl_rna.properties["sinew_springs"].fixed_type.identifier == "SINEW_PG_springs"


def test_presets_set_the_settings(scene):
    bpy.ops.mesh.primitive_grid_add()
    ob = bpy.context.active_object
    presets = sys.modules[ADDON_MODULE + ".springs.presets"].PRESETS
    for name, values in presets.items():
        assert bpy.ops.sinew.springs_preset(preset=name) == {"FINISHED"}
        for key, value in values.items():
            got = getattr(ob.sinew_springs, key)
            assert got == pytest.approx(value) if isinstance(value, float) else got == value, (name, key)
    assert set(presets) == {"COTTON", "SILK", "DENIM", "RUBBER", "ROPE", "FLAG"}
    for values in presets.values():  # every preset is resolution-independent
        assert values["mass_mode"] == "DENSITY" and values["stiffness_mode"] == "MATERIAL"


def test_panels_are_in_the_physics_tab(scene):
    parent = bpy.types.SINEW_PT_springs
    assert parent.bl_context == "physics" and parent.bl_space_type == "PROPERTIES"
    children = [c for c in bpy.types.Panel.__subclasses__()
                if getattr(c, "bl_parent_id", "") == "SINEW_PT_springs" and c.is_registered]
    assert sorted(c.bl_label for c in children) == sorted(
        ["Solver", "Springs", "Pins", "Collisions", "Force Fields", "Output", "Bake"])


def test_springs_register_and_unregister_twice_leave_nothing(scene):
    springs = sys.modules[ADDON_MODULE + ".springs"]
    assert len(springs.classes) == 12  # 1 property group, 3 operators, 8 panels
    for _ in range(2):
        springs.unregister()
        assert not hasattr(bpy.types.Object, "sinew_springs")
        assert not any(c.is_registered for c in springs.classes)
        for op in (bpy.ops.sinew.bake_springs, bpy.ops.sinew.free_bake, bpy.ops.sinew.springs_preset):
            with pytest.raises(KeyError):
                op.get_rna_type()
        springs.register()
        assert hasattr(bpy.types.Object, "sinew_springs")
        assert all(c.is_registered for c in springs.classes)
        assert bpy.ops.sinew.bake_springs.get_rna_type().identifier == "SINEW_OT_bake_springs"
