"""The "Sinew Springs" panel in the Physics tab, with one sub-panel per topic."""

from __future__ import annotations

import bpy

from .. import bakejob, deps
from ..preferences import draw_failure


class _SpringsPanel:
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.object
        return obj is not None and obj.type == "MESH"


class _SubPanel(_SpringsPanel):
    bl_parent_id = "SINEW_PT_springs"

    def _props(self, context: bpy.types.Context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        props = context.object.sinew_springs
        layout.active = props.enabled
        layout.enabled = not props.baked
        return layout, props


class SINEW_PT_springs(_SpringsPanel, bpy.types.Panel):
    bl_label = "Sinew Springs"

    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(context.object.sinew_springs, "enabled", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        problem = deps.scipy_problem()
        if problem:
            box = layout.box()
            box.alert = True
            box.label(text="scipy is missing: springs cannot be baked.", icon="ERROR")
            box.label(text="See Preferences > Add-ons > Sinew for how to install it.")
        row = layout.row(align=True)
        row.enabled = not context.object.sinew_springs.baked
        row.operator_menu_enum("sinew.springs_preset", "preset", text="Presets", icon="PRESET")


class SINEW_PT_springs_solver(_SubPanel, bpy.types.Panel):
    bl_label = "Solver"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._props(context)
        layout.prop(props, "solver")
        if props.solver in ("VBD", "FAST"):  # (their loops are the compiled kernels)
            problem = deps.kernels_problem()
            if problem:
                box = layout.box()
                box.alert = True
                box.label(text=f"Sinew's compiled kernels are missing: {props.solver} cannot run.", icon="ERROR")
                box.label(text="Install the Sinew zip built for this platform.")
        col = layout.column(align=True)
        col.prop(props, "substeps")
        col.prop(props, "iterations")
        row = layout.row()
        row.active = props.solver not in ("EXPLICIT", "SYMPLECTIC")
        row.prop(props, "tolerance")
        layout.prop(props, "pre_roll")


class SINEW_PT_springs_springs(_SubPanel, bpy.types.Panel):
    bl_label = "Springs"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._props(context)
        layout.prop(props, "mass_mode")
        if props.mass_mode == "DENSITY":
            layout.prop(props, "density")
        else:
            layout.prop(props, "vertex_mass")
        layout.prop(props, "stiffness_mode")
        col = layout.column(align=True)
        col.prop(props, "stiffness")
        col.prop(props, "shear_stiffness")
        col.prop(props, "bending_stiffness")
        col = layout.column(align=True)
        col.prop(props, "damping")
        col.prop(props, "air_drag")
        layout.prop(props, "max_stretch")


class SINEW_PT_springs_pins(_SubPanel, bpy.types.Panel):
    bl_label = "Pins"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._props(context)
        layout.prop_search(props, "pin_group", context.object, "vertex_groups", text="Pin Group")
        layout.prop(props, "pin_stiffness")


class SINEW_PT_springs_collisions(_SubPanel, bpy.types.Panel):
    bl_label = "Collisions"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._props(context)
        layout.prop(props, "collision_collection", text="Collection")
        layout.label(text="Objects with a Collision modifier collide too", icon="INFO")
        col = layout.column(align=True)
        col.prop(props, "self_collision")
        sub = col.column(align=True)
        sub.active = props.self_collision
        sub.prop(props, "self_distance", text="Distance")


class SINEW_PT_springs_fields(_SubPanel, bpy.types.Panel):
    bl_label = "Force Fields"
    bl_options = {"DEFAULT_CLOSED"}

    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(context.object.sinew_springs, "use_force_fields", text="")

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._props(context)
        layout.active = props.enabled and props.use_force_fields
        layout.prop(props, "field_weight")


class SINEW_PT_springs_output(_SubPanel, bpy.types.Panel):
    bl_label = "Output"

    def draw(self, context: bpy.types.Context) -> None:
        layout, props = self._props(context)
        layout.prop(props, "output")
        if props.output == "CACHE" and not bpy.data.filepath:
            layout.label(text="Save the .blend first: the cache goes next to it", icon="INFO")


class SINEW_PT_springs_bake(_SubPanel, bpy.types.Panel):
    bl_label = "Bake"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        props = context.object.sinew_springs
        problem = deps.scipy_problem()
        row = layout.row(align=True)
        row.enabled = problem is None
        if props.baked:
            row.operator("sinew.free_bake", text="Free Bake", icon="TRASH")
            row.operator("sinew.bake_springs", text="Re-bake", icon="FILE_REFRESH")
            col = layout.column(align=True)
            col.label(text=f"Baked frames {props.bake_frame_start}–{props.bake_frame_end} "
                           f"({props.bake_output.title()})")
            col.label(text=f"Time {props.bake_time:.2f} s, {props.bake_iterations:.1f} iterations/frame")
            col.label(text=f"Max strain {100.0 * props.bake_max_strain:.2f}%")
            if props.bake_contacts:
                col.label(text=f"Contacts {props.bake_contacts}, max penetration "
                               f"{1000.0 * props.bake_max_penetration:.1f} mm")
            if props.bake_unconverged:
                col.label(text=f"{props.bake_unconverged} frames not converged "
                               f"(residual ≤ {props.bake_max_residual:.3g} N)", icon="ERROR")
            else:
                col.label(text="Solver converged on every frame")
        else:
            row.operator("sinew.bake_springs", text="Bake", icon="PHYSICS")
            layout.label(text=f"Frames {context.scene.frame_start}–{context.scene.frame_end} (scene range)")
        failure = bakejob.last_error_for("sinew.bake_springs", context.object.name)
        if failure:
            draw_failure(layout, failure)
        if problem:
            layout.label(text="scipy is missing", icon="ERROR")


classes = (SINEW_PT_springs, SINEW_PT_springs_solver, SINEW_PT_springs_springs,
           SINEW_PT_springs_pins, SINEW_PT_springs_collisions, SINEW_PT_springs_fields,
           SINEW_PT_springs_output,
           SINEW_PT_springs_bake)
