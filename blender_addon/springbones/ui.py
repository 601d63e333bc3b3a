"""Panels: the tip bone's Sinew Spring settings (Bone properties) and the sidebar's chain list.

Only layout calls available since Blender 3.4 are used (no ``layout.panel``).
"""

from __future__ import annotations

import bpy

from ..preferences import ArmatureSidebarPanel, BonePanel, draw_report
from .read import spring_tips


def draw_stats(layout: bpy.types.UILayout, s: bpy.types.PropertyGroup) -> None:
    if s.last_frames <= 0:
        layout.label(text="Not baked yet")
        return
    col = layout.column(align=True)
    col.label(text=f"{s.last_frames} frames baked")
    col.label(text=f"Max length error: {100 * s.last_length_error:.3f} %")
    col.label(text=f"Max penetration: {s.last_penetration:.2e} m")


class SINEW_PT_bone_spring(BonePanel, bpy.types.Panel):
    """Sinew Spring settings of the active pose bone (the chain's tip)."""

    bl_label = "Sinew Spring"
    bl_idname = "SINEW_PT_bone_spring"
    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(context.active_pose_bone.sinew_spring, "enabled", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        s = context.active_pose_bone.sinew_spring
        layout.operator_menu_enum("sinew.spring_bones_preset", "preset", text="Preset", icon="PRESET")
        col = layout.column()
        col.active = s.enabled
        for name in ("chain_length", "stiffness", "damping", "drag", "gravity", "stretch", "radius",
                     "collision_collection", "substeps", "pre_roll"):
            col.prop(s, name)
        box = layout.box()
        box.label(text="Last bake")
        draw_stats(box, s)
        layout.operator("sinew.bake_spring_bones", icon="REC")
        draw_report(layout, context.object, "sinew.bake_spring_bones")


class SINEW_PT_spring_chains(ArmatureSidebarPanel, bpy.types.Panel):
    """The active armature's spring chains, their last bake, and the Bake button."""

    bl_label = "Spring Bones"
    bl_idname = "SINEW_PT_spring_chains"
    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        obj = context.active_object
        tips = spring_tips(obj)
        if not tips:
            layout.label(text="No spring chains: enable one on its tip bone", icon="INFO")
        for pb in tips:
            s = pb.sinew_spring
            box = layout.box()
            row = box.row()
            row.label(text=pb.name, icon="BONE_DATA")
            row.label(text=f"{s.chain_length} bone(s)")
            draw_stats(box, s)
        scene = context.scene
        layout.label(text=f"Range: {scene.frame_start}-{scene.frame_end}")
        row = layout.row()
        row.enabled = bool(tips)
        row.operator("sinew.bake_spring_bones", icon="REC")
        draw_report(layout, obj, "sinew.bake_spring_bones")


classes = (SINEW_PT_bone_spring, SINEW_PT_spring_chains)
