"""``pose_bone.sinew_ik``: the settings of a Sinew IK chain, stored on the chain's tip bone.

The names, types and units are fixed by CONTRACT.md ("IK chains"). The ``last_*`` fields
hold the statistics of the last bake for the panels; the bake operator writes them.
"""

from __future__ import annotations

import math

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty, StringProperty

from ..core.ik import DEFAULT_SOLVER, SOLVERS

SOLVER_ITEMS = [(key, cls.label, cls.description) for key, cls in SOLVERS.items()]

TARGET_MODE_ITEMS = [
    ("OBJECT", "Object", "The target object's evaluated world location at each frame"),
    ("CURVE", "Curve", "A point travelling along a curve object, evenly by arc length, over the baked range"),
    ("EXPRESSION", "Expression", "Formulas of t (0 to 1 over the baked range) and frame, in the armature's space"),
]


def _target_poll(self: SINEW_PG_ik_chain, obj: bpy.types.Object) -> bool:
    if self.target_mode == "CURVE":
        return obj.type == "CURVE"
    return True


class SINEW_PG_ik_chain(bpy.types.PropertyGroup):
    """A Sinew IK chain whose tip is this pose bone."""

    enabled: BoolProperty(  # type: ignore[valid-type]
        name="Sinew IK", default=False,
        description="This bone is the tip of a Sinew IK chain (baked by Bake IK)")
    chain_length: IntProperty(  # type: ignore[valid-type]
        name="Chain Length", default=0, min=0, soft_max=64,
        description="Bones in the chain counting the tip; 0 = up to the root (as Blender's IK constraint)")
    solver: EnumProperty(  # type: ignore[valid-type]
        name="Solver", items=SOLVER_ITEMS, default=DEFAULT_SOLVER, description="The IK solver")
    target_mode: EnumProperty(  # type: ignore[valid-type]
        name="Target Mode", items=TARGET_MODE_ITEMS, default="OBJECT", description="Where the target comes from")
    target: PointerProperty(  # type: ignore[valid-type]
        name="Target", type=bpy.types.Object, poll=_target_poll,
        description="Object mode: the object the tip follows; Curve mode: the curve the target travels along")
    expression_x: StringProperty(  # type: ignore[valid-type]
        name="X", default="0", description="Target X in the armature's space, a formula of t and frame")
    expression_y: StringProperty(  # type: ignore[valid-type]
        name="Y", default="0", description="Target Y in the armature's space, a formula of t and frame")
    expression_z: StringProperty(  # type: ignore[valid-type]
        name="Z", default="0", description="Target Z in the armature's space, a formula of t and frame")
    max_iterations: IntProperty(  # type: ignore[valid-type]
        name="Max Iterations", default=100, min=1, soft_max=1000, max=100000,
        description="Largest number of solver iterations per frame")
    tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Tolerance", default=1e-6, min=0.0, soft_max=0.01, precision=7, step=0.0001,
        subtype="DISTANCE", unit="LENGTH",
        description="Stop iterating when the tip is this close to the target")
    max_step_angle: FloatProperty(  # type: ignore[valid-type]
        name="Max Step Angle", default=0.0, min=0.0, max=math.pi, subtype="ANGLE", unit="ROTATION",
        description="Largest rotation change of any joint between consecutive frames (jitter guard); 0 = off")
    target_bone: StringProperty(  # type: ignore[valid-type]
        name="Target Bone", default="",
        description="With an armature as target: the bone the tip follows (its head, as Blender's IK "
                    "constraint subtarget)")
    pole_target: PointerProperty(  # type: ignore[valid-type]
        name="Pole Target", type=bpy.types.Object, description="Optional: the chain bends toward this object")
    pole_bone: StringProperty(  # type: ignore[valid-type]
        name="Pole Bone", default="",
        description="With an armature as pole target: the bone (its head) used as the pole")
    pole_angle: FloatProperty(  # type: ignore[valid-type]
        name="Pole Angle", default=0.0, min=-math.pi, max=math.pi, subtype="ANGLE", unit="ROTATION",
        description="Rotation of the chain about the root-target axis relative to the pole, as Blender's "
                    "IK constraint Pole Angle")
    use_rotation: BoolProperty(  # type: ignore[valid-type]
        name="Rotation", default=False,
        description="The tip bone also follows the target's (or target bone's) orientation")
    rotation_weight: FloatProperty(  # type: ignore[valid-type]
        name="Rotation Weight", default=1.0, min=0.0, max=1.0, subtype="FACTOR",
        description="How strongly the orientation counts against the position when both cannot be met")
    trace: BoolProperty(  # type: ignore[valid-type]
        name="Trace", default=False,
        description="Add a curve object showing the tip's baked path (world space)")

    # Statistics of the last bake (written by the operator, shown in the panels).
    last_frames: IntProperty(name="Frames", default=0, min=0, description="Frames of the last bake")  # type: ignore[valid-type]
    last_iterations_mean: FloatProperty(  # type: ignore[valid-type]
        name="Mean Iterations", default=0.0, min=0.0, description="Mean solver iterations per frame, last bake")
    last_iterations_max: IntProperty(  # type: ignore[valid-type]
        name="Max Iterations", default=0, min=0, description="Largest solver iterations of a frame, last bake")
    last_error_max: FloatProperty(  # type: ignore[valid-type]
        name="Max Tip Error", default=0.0, min=0.0, precision=6, subtype="DISTANCE", unit="LENGTH",
        description="Largest distance between tip and target over the last bake")
    last_time: FloatProperty(  # type: ignore[valid-type]
        name="Time", default=0.0, min=0.0, description="Seconds the last bake took")


classes = (SINEW_PG_ik_chain,)


def register_properties() -> None:
    bpy.types.PoseBone.sinew_ik = PointerProperty(type=SINEW_PG_ik_chain)


def unregister_properties() -> None:
    if hasattr(bpy.types.PoseBone, "sinew_ik"):
        del bpy.types.PoseBone.sinew_ik
