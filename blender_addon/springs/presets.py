"""Material presets (as the Cloth panel offers): plain dicts of ``sinew_springs`` values."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty

#: Preset name → settings. Masses per vertex (kg), stiffness N/m, damping N·s/m, drag 1/s.
PRESETS: dict[str, dict[str, object]] = {
    "COTTON": dict(vertex_mass=0.3, stiffness=5000.0, shear_stiffness=500.0, bending_stiffness=50.0,
                   damping=5.0, air_drag=0.5, solver="FAST", substeps=1, iterations=10),
    "SILK": dict(vertex_mass=0.15, stiffness=2000.0, shear_stiffness=100.0, bending_stiffness=2.0,
                 damping=1.0, air_drag=1.0, solver="FAST", substeps=2, iterations=10),
    "ROPE": dict(vertex_mass=0.05, stiffness=20000.0, shear_stiffness=0.0, bending_stiffness=5.0,
                 damping=2.0, air_drag=0.1, solver="FAST", substeps=2, iterations=20),
    "STIFF_FLAG": dict(vertex_mass=0.2, stiffness=50000.0, shear_stiffness=5000.0,
                       bending_stiffness=1000.0, damping=10.0, air_drag=0.5, solver="FAST",
                       substeps=1, iterations=15),
}

_ITEMS = (
    ("COTTON", "Cotton", "Soft, fairly heavy fabric"),
    ("SILK", "Silk", "Light, flowing fabric with little bending resistance"),
    ("ROPE", "Rope", "Stiff along its length, light, bends freely"),
    ("STIFF_FLAG", "Stiff Flag", "Heavy, stiff cloth that keeps its shape"),
)


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
