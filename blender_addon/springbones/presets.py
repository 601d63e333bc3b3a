"""The ``sinew.spring_bones_preset`` operator; the values are in :mod:`.preset_table`."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from .preset_table import ITEMS, PRESETS

__all__ = ["SINEW_OT_spring_bones_preset", "classes"]


class SINEW_OT_spring_bones_preset(bpy.types.Operator):
    """Set the active bone's spring chain from a preset"""

    bl_idname = "sinew.spring_bones_preset"
    bl_label = "Spring Bones Preset"
    bl_options = {"REGISTER", "UNDO"}

    preset: EnumProperty(name="Preset", items=ITEMS)  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return getattr(context, "active_pose_bone", None) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        s = context.active_pose_bone.sinew_spring
        for name, value in PRESETS[self.preset].items():
            setattr(s, name, value)
        return {"FINISHED"}


classes = (SINEW_OT_spring_bones_preset,)
