"""``pose_bone.sinew_spring``: a spring chain's settings, stored on the chain's tip bone.

Names, types and units are fixed by CONTRACT.md ("Spring bones"); the meaning of each is in
docs/SPRING_BONES.md. The ``last_*`` fields hold the last bake's figures for the panel.
"""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, FloatProperty, IntProperty, PointerProperty


class SINEW_PG_spring_chain(bpy.types.PropertyGroup):
    """A Sinew spring chain whose tip is this pose bone."""

    enabled: BoolProperty(  # type: ignore[valid-type]
        name="Sinew Spring", default=False,
        description="This bone is the tip of a spring chain (baked by Bake Spring Bones)")
    chain_length: IntProperty(  # type: ignore[valid-type]
        name="Chain Length", default=1, min=1, soft_max=32,
        description="Bones in the chain counting the tip; the chain's root is carried by its animated parent")
    stiffness: FloatProperty(  # type: ignore[valid-type]
        name="Stiffness", default=25.0, min=0.0, soft_max=1000.0,
        description="Pull of each bone toward its animated pose, per unit mass (1/s²; a joint swings about "
                    "its place at √stiffness rad/s); 0 = swings freely")
    damping: FloatProperty(  # type: ignore[valid-type]
        name="Damping", default=3.0, min=0.0, soft_max=100.0,
        description="Damping of the motion relative to the animated pose (1/s; 2√stiffness = no overshoot)")
    drag: FloatProperty(  # type: ignore[valid-type]
        name="Drag", default=0.5, min=0.0, soft_max=50.0,
        description="Air drag on each joint's velocity (1/s)")
    gravity: FloatProperty(  # type: ignore[valid-type]
        name="Gravity", default=1.0, min=0.0, soft_max=2.0,
        description="Factor of the scene's gravity (0 = none)")
    stretch: FloatProperty(  # type: ignore[valid-type]
        name="Stretch", default=0.0, min=0.0, max=1.0, subtype="FACTOR",
        description="How far a bone may stretch, as a fraction of its length (0 = keeps its length); the "
                    "keys are rotations, so stretch shows as the springier motion it allows")
    radius: FloatProperty(  # type: ignore[valid-type]
        name="Radius", default=0.02, min=0.0, soft_max=1.0, subtype="DISTANCE", unit="LENGTH",
        description="Collision radius of the chain's joints: kept between them and every collider")
    collision_collection: PointerProperty(  # type: ignore[valid-type]
        name="Collision Collection", type=bpy.types.Collection,
        description="Mesh objects in this collection are colliders, beside objects with a Collision modifier")
    substeps: IntProperty(  # type: ignore[valid-type]
        name="Substeps", default=2, min=1, soft_max=32, max=1000,
        description="Time steps per frame (more: closer contacts, less numerical damping of fast, stiff pulls)")
    pre_roll: IntProperty(  # type: ignore[valid-type]
        name="Pre-roll", default=0, min=0, soft_max=250, max=10000,
        description="Frames simulated before the start frame (following the animation there), not written")

    # The last bake's figures (written by the operator, shown in the panel).
    last_frames: IntProperty(name="Frames", default=0, min=0, description="Frames of the last bake")  # type: ignore[valid-type]
    last_length_error: FloatProperty(  # type: ignore[valid-type]
        name="Length Error", default=0.0, min=0.0, subtype="FACTOR",
        description="Largest relative change of a bone's length in the last bake's simulation")
    last_penetration: FloatProperty(  # type: ignore[valid-type]
        name="Penetration", default=0.0, min=0.0, subtype="DISTANCE", unit="LENGTH",
        description="Deepest a joint ended inside a collider's radius in the last bake")


classes = (SINEW_PG_spring_chain,)


def register_properties() -> None:
    bpy.types.PoseBone.sinew_spring = PointerProperty(type=SINEW_PG_spring_chain)


def unregister_properties() -> None:
    if hasattr(bpy.types.PoseBone, "sinew_spring"):
        del bpy.types.PoseBone.sinew_spring
