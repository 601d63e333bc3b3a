"""Add-on preferences: what Sinew needs and whether this Blender has it."""

from __future__ import annotations

import bpy

from . import deps


class SINEW_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        problem = deps.scipy_problem()
        if problem:
            box = layout.box()
            box.alert = True
            box.label(text="scipy is missing: the spring solvers cannot run.", icon="ERROR")
            for line in _wrap(problem, 90):
                box.label(text=line)
        else:
            import numpy
            import scipy

            layout.label(text=f"numpy {numpy.__version__}, scipy {scipy.__version__}: ready.", icon="CHECKMARK")
        kernels = deps.kernels_problem()
        if kernels:
            box = layout.box()
            box.alert = True
            box.label(text="Sinew's compiled kernels are missing: the VBD and FAST solvers cannot run.",
                      icon="ERROR")
            for line in _wrap(kernels, 90):
                box.label(text=line)
        else:
            layout.label(text="Compiled kernels: ready.", icon="CHECKMARK")


class BonePanel:
    """Mixin: a panel in Bone properties for the active pose bone of an armature."""

    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "bone"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.object
        return obj is not None and obj.type == "ARMATURE" and getattr(context, "active_pose_bone", None) is not None


class ArmatureSidebarPanel:
    """Mixin: a panel in the 3D view sidebar's Sinew tab for the active armature."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Sinew"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.active_object
        return obj is not None and obj.type == "ARMATURE"


def draw_report(layout: bpy.types.UILayout, obj: bpy.types.Object, operator: str) -> None:
    """The object's last bake report written by ``operator`` (e.g. ``"sinew.bake_ik"``): its
    warnings, or why it failed."""
    from . import bakejob

    report = bakejob.read_report(obj)
    if report["operator"] != operator:
        return
    if report["state"] == "FAILED":
        draw_failure(layout, report["error"])
    for text in filter(None, report["warnings"].split("\n")):
        layout.label(text=text, icon="ERROR")


def draw_failure(layout: bpy.types.UILayout, message: str) -> None:
    """An alert box with a failed bake's message, wrapped to the panel."""
    box = layout.box()
    box.alert = True
    box.label(text="Last bake failed, nothing was changed:", icon="ERROR")
    for line in _wrap(message, 48):
        box.label(text=line)


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    return lines


classes = (SINEW_AP_preferences,)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
