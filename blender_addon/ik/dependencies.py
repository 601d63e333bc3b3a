"""Which bones and objects move when a bake moves its bones: targets and poles that would chase
themselves are refused (:func:`source`)."""

from __future__ import annotations

from dataclasses import dataclass

import bpy

from ..core import SinewError

__all__ = ["moving_bones", "moved_by_chain", "Source", "source"]


def moving_bones(arm: bpy.types.Object, baked: set[str]) -> dict[str, str]:
    """Bones of ``arm`` that move when the ``baked`` bones do: name -> the baked bone it follows."""
    moving: dict[str, str] = {}
    for pb in arm.pose.bones:
        if pb.name in baked:
            moving[pb.name] = pb.name
            continue
        hit = next((p.name for p in pb.parent_recursive if p.name in baked), None)
        if hit is None:
            hit = next((c.subtarget for p in (pb, *pb.parent_recursive) for c in p.constraints
                        if not c.mute and getattr(c, "target", None) is arm and getattr(c, "subtarget", "") in baked),
                       None)
        if hit is not None:
            moving[pb.name] = hit
    return moving


def moved_by_chain(obj: bpy.types.Object, arm: bpy.types.Object, moving: dict[str, str]) -> str | None:
    """Why ``obj`` moves with the baked bones (parented or constrained to them), or None.

    Such a target would chase itself: every solve moves it, so the bake is refused.
    """
    seen = set()
    node: bpy.types.Object | None = obj
    while node is not None and node.name not in seen:
        seen.add(node.name)
        if node.parent is arm and node.parent_type == "BONE" and node.parent_bone in moving:
            return f"'{obj.name}' is parented to bone '{node.parent_bone}', which the bake moves"
        for con in getattr(node, "constraints", []):
            if getattr(con, "target", None) is arm and getattr(con, "subtarget", "") in moving and not con.mute:
                return f"'{obj.name}' follows bone '{con.subtarget}' (moved by the bake) through constraint '{con.name}'"
        node = node.parent
    return None


@dataclass(frozen=True)
class Source:
    """Where a target or pole comes from: an object, or a bone of an armature object (its head)."""

    obj: bpy.types.Object
    bone: str = ""


def source(role: str, obj: bpy.types.Object, bone: str, arm: bpy.types.Object, moving: dict[str, str],
            name: str) -> Source:
    """Validate a target/pole choice; refuse (SinewError) what would bake something unintended."""
    if obj.type != "ARMATURE":
        return Source(obj)  # a bone name left over from an armature target means nothing here
    if not bone:
        raise SinewError(f"{name}: the {role} '{obj.name}' is an armature; choose one of its bones as "
                         f"{role} bone (Blender's IK constraint follows a bone of an armature), or use an empty")
    if obj.data.bones.get(bone) is None:
        raise SinewError(f"{name}: the {role} bone '{bone}' is not a bone of '{obj.name}'")
    if obj is arm and bone in moving:
        via = moving[bone]
        how = "is baked itself" if via == bone else f"moves with the baked bone '{via}'"
        raise SinewError(f"{name}: the {role} bone '{bone}' {how}, so it would chase itself; parent it to a "
                         "bone the bake does not move (Rigify parents its IK controls to the root)")
    return Source(obj, bone)
