"""Panels: the tip bone's Sinew IK settings (Bone properties) and the "Sinew" sidebar tab.

Only layout calls available since Blender 3.4 are used (no ``layout.panel``).
"""

from __future__ import annotations

import bpy

from ..core.errors import ExpressionError
from ..core.expr import compile_expression
from ..preferences import ArmatureSidebarPanel, BonePanel, draw_report
from .read import enabled_tips


def _expression_problem(text: str) -> str | None:
    try:
        compile_expression(text)
    except ExpressionError as exc:
        return f"{exc.reason}, at character {exc.position + 1}"
    return None


def _ik_constraints(pb: bpy.types.PoseBone) -> list[bpy.types.Constraint]:
    return [c for c in pb.constraints if c.type == "IK" and not c.mute]


def draw_targets(layout: bpy.types.UILayout, s: bpy.types.PropertyGroup) -> None:
    """Target and pole pickers; a bone picker when either is an armature (Blender's subtarget)."""
    if s.target_mode != "EXPRESSION":
        layout.prop(s, "target", text="Curve" if s.target_mode == "CURVE" else "Target")
    if s.target_mode == "OBJECT" and s.target is not None and s.target.type == "ARMATURE":
        layout.prop_search(s, "target_bone", s.target.data, "bones", text="Bone")
        if not s.target_bone:
            layout.label(text="Choose a bone of the armature", icon="ERROR")
    layout.prop(s, "pole_target")
    if s.pole_target is not None:
        if s.pole_target.type == "ARMATURE":
            layout.prop_search(s, "pole_bone", s.pole_target.data, "bones", text="Pole Bone")
            if not s.pole_bone:
                layout.label(text="Choose a bone of the pole armature", icon="ERROR")
        layout.prop(s, "pole_angle")
    if s.target_mode == "OBJECT":
        layout.prop(s, "use_rotation")
        row = layout.row()
        row.active = s.use_rotation
        row.prop(s, "rotation_weight")


def draw_stats(layout: bpy.types.UILayout, s: bpy.types.PropertyGroup) -> None:
    if s.last_frames <= 0:
        layout.label(text="Not baked yet")
        return
    col = layout.column(align=True)
    col.label(text=f"{s.last_frames} frames in {s.last_time:.2f} s")
    col.label(text=f"Iterations: mean {s.last_iterations_mean:.1f}, max {s.last_iterations_max}")
    col.label(text=f"Max tip error: {s.last_error_max:.2e} m")


class SINEW_PT_bone_ik(BonePanel, bpy.types.Panel):
    """Sinew IK settings of the active pose bone (the chain's tip)."""

    bl_label = "Sinew IK"
    bl_idname = "SINEW_PT_bone_ik"
    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(context.active_pose_bone.sinew_ik, "enabled", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        pb = context.active_pose_bone
        s = pb.sinew_ik
        layout.operator("sinew.import_ik_constraint", icon="CONSTRAINT_BONE")
        col = layout.column()
        col.active = s.enabled
        col.prop(s, "chain_length")
        col.prop(s, "solver")
        col.prop(s, "target_mode")
        if s.target_mode == "EXPRESSION":
            for axis in "xyz":
                name = f"expression_{axis}"
                col.prop(s, name)
                problem = _expression_problem(getattr(s, name))
                if problem:
                    col.label(text=f"{axis.upper()}: {problem}", icon="ERROR")
            col.label(text="Variables: t (0 to 1 over the range), frame; armature space", icon="INFO")
        draw_targets(col, s)
        col.prop(s, "max_iterations")
        col.prop(s, "tolerance")
        col.prop(s, "max_step_angle")
        col.prop(s, "trace")
        for con in _ik_constraints(pb):
            col.label(text=f"IK constraint '{con.name}' will be muted by the bake", icon="ERROR")
        box = layout.box()
        box.label(text="Last bake")
        draw_stats(box, s)
        draw_report(layout, context.object, "sinew.bake_ik")


class SINEW_PT_ik_chains(ArmatureSidebarPanel, bpy.types.Panel):
    """The active armature's Sinew IK chains, their last bake, and the Bake button."""

    bl_label = "IK Chains"
    bl_idname = "SINEW_PT_ik_chains"
    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        obj = context.active_object
        tips = enabled_tips(obj)
        if not tips:
            layout.label(text="No enabled chains: enable one on its tip bone", icon="INFO")
        for pb in tips:
            s = pb.sinew_ik
            box = layout.box()
            row = box.row()
            row.label(text=pb.name, icon="BONE_DATA")
            row.label(text=s.solver)
            if s.target_mode == "EXPRESSION":
                box.label(text="Target: expression")
            col = box.column()
            col.use_property_split = True
            col.use_property_decorate = False
            draw_targets(col, s)
            if _ik_constraints(pb):
                box.label(text="IK constraint will be muted", icon="ERROR")
            draw_stats(box, s)
        scene = context.scene
        layout.label(text=f"Range: {scene.frame_start}-{scene.frame_end}")
        row = layout.row()
        row.enabled = bool(tips)
        row.operator("sinew.bake_ik", icon="REC")
        draw_report(layout, obj, "sinew.bake_ik")


classes = (SINEW_PT_bone_ik, SINEW_PT_ik_chains)
