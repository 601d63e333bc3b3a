"""The ``sinew.springs_preset`` operator; the preset values are in :mod:`.preset_table`."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from . import read
from .preset_table import _LOOK, CONTACT_SOLVER, DESCRIPTIONS, MEASURED, PINNED_CONTACT_SOLVER, PRESETS

__all__ = ["PRESETS", "MEASURED", "DESCRIPTIONS", "SINEW_OT_springs_preset", "classes"]

_ITEMS = tuple((name, _LOOK[name][0], DESCRIPTIONS[name]) for name in PRESETS)


class SINEW_OT_springs_preset(bpy.types.Operator):
    """Set the active mesh's spring settings from a material preset (with the VBD solver when
    the mesh has colliders, or self-collision and no pins)"""

    bl_idname = "sinew.springs_preset"
    bl_label = "Spring Preset"
    bl_options = {"REGISTER", "UNDO"}

    preset: EnumProperty(name="Preset", items=_ITEMS)

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.active_object
        return obj is not None and obj.type == "MESH"

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.active_object
        props = obj.sinew_springs
        values = dict(PRESETS[self.preset])
        colliders = read.collider_objects(obj, props.collision_collection, context.scene)
        pinned = bool(props.pin_group) and obj.vertex_groups.get(props.pin_group) is not None
        if self.preset != "ROPE" and (colliders or props.self_collision) and not pinned:
            # free cloth that lands on things: contact inside the solve
            values.update(CONTACT_SOLVER)
        elif self.preset not in ("ROPE", "FLAG") and (colliders or props.self_collision) and pinned:
            # pinned cloth on a body or folding on itself: contact inside the solve, iterated
            # further (a flag flies in the wind, off bodies: it keeps the solver its look was
            # measured with)
            values.update(PINNED_CONTACT_SOLVER)
        for name, value in values.items():
            setattr(props, name, value)
        return {"FINISHED"}


classes = (SINEW_OT_springs_preset,)
