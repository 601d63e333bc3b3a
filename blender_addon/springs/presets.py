"""The ``sinew.springs_preset`` operator; the preset values are in :mod:`.preset_table`."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from .preset_table import _LOOK, DESCRIPTIONS, MEASURED, PRESETS

__all__ = ["PRESETS", "MEASURED", "DESCRIPTIONS", "SINEW_OT_springs_preset", "classes"]

_ITEMS = tuple((name, _LOOK[name][0], DESCRIPTIONS[name]) for name in PRESETS)


class SINEW_OT_springs_preset(bpy.types.Operator):
    """Set the active mesh's spring settings from a material preset"""

    bl_idname = "sinew.springs_preset"
    bl_label = "Spring Preset"
    bl_options = {"REGISTER", "UNDO"}

    preset: EnumProperty(name="Preset", items=_ITEMS)

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.active_object
        return obj is not None and obj.type == "MESH"

    def execute(self, context: bpy.types.Context) -> set[str]:
        props = context.active_object.sinew_springs
        for name, value in PRESETS[self.preset].items():
            setattr(props, name, value)
        return {"FINISHED"}


classes = (SINEW_OT_springs_preset,)
