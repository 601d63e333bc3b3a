"""Per-frame world matrices of objects and pose matrices of bones, for a bake's reading.

When every object involved is moved only by its own F-curves (no constraints, drivers, NLA or
non-object parenting), the matrices are computed by evaluating the F-curves directly
(``fcurve.evaluate``), which is much cheaper than stepping the scene; otherwise the scene is
stepped with ``frame_set`` and the original frame restored (:class:`FrameSampler`).
"""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from .. import compat
from .pose import relative_rest
from .rotations import axis_angle_to_matrix, euler_to_matrix, quat_to_matrix

__all__ = ["FrameSampler", "mat4"]

_TRANSFORM_PATHS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale")
_DELTA_PATHS = ("delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale",
                "rotation_mode")


def mat4(m: Any) -> np.ndarray:
    """A Blender 4x4 matrix as a float64 array."""
    return np.array([list(row) for row in m], dtype=np.float64)


def _basis(loc: np.ndarray, rot: np.ndarray, scale: np.ndarray, mode: str) -> np.ndarray:
    """Object basis matrices (F, 4, 4) = T @ R @ S from per-frame channel values."""
    if mode == "QUATERNION":
        r = quat_to_matrix(rot[:, :4])
    elif mode == "AXIS_ANGLE":
        r = axis_angle_to_matrix(rot[:, :4])
    else:
        r = euler_to_matrix(rot[:, :3], mode)
    m = np.zeros((loc.shape[0], 4, 4))
    m[:, :3, :3] = r * scale[:, None, :]
    m[:, :3, 3] = loc
    m[:, 3, 3] = 1.0
    return m


def _fcurve_world(obj: bpy.types.Object, frames: np.ndarray) -> tuple[np.ndarray | None, str]:
    """World matrices (F, 4, 4) of ``obj`` from its own F-curves, or (None, reason)."""
    if any(not c.mute and c.influence > 0.0 for c in obj.constraints):
        return None, f"'{obj.name}' has constraints"
    ad = obj.animation_data
    curves: dict[tuple[str, int], Any] = {}
    if ad is not None:
        if len(ad.drivers):
            return None, f"'{obj.name}' has drivers"
        if any(not t.mute for t in ad.nla_tracks):
            return None, f"'{obj.name}' has NLA tracks"
        if getattr(ad, "action_influence", 1.0) != 1.0 or getattr(ad, "action_blend_type", "REPLACE") != "REPLACE":
            return None, f"'{obj.name}' blends its action"
        for fc in compat.fcurves(obj):
            if fc.mute:
                continue
            if fc.data_path in _DELTA_PATHS:
                return None, f"'{obj.name}' animates {fc.data_path}"
            if fc.data_path in _TRANSFORM_PATHS:
                curves[(fc.data_path, fc.array_index)] = fc
    if (any(obj.delta_location) or any(obj.delta_rotation_euler) or tuple(obj.delta_scale) != (1.0, 1.0, 1.0)
            or tuple(obj.delta_rotation_quaternion) != (1.0, 0.0, 0.0, 0.0)):
        return None, f"'{obj.name}' has delta transforms"
    mode = obj.rotation_mode
    rot_path = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")

    def channel(path: str, size: int) -> np.ndarray:
        base = np.array(getattr(obj, path), dtype=np.float64)
        out = np.repeat(base[None, :size], frames.shape[0], axis=0)
        for i in range(size):
            fc = curves.get((path, i))
            if fc is not None:
                out[:, i] = [fc.evaluate(float(f)) for f in frames]
        return out

    basis = _basis(channel("location", 3), channel(rot_path, 4 if rot_path != "rotation_euler" else 3),
                   channel("scale", 3), mode)
    if obj.parent is None:
        return basis, ""
    if obj.parent_type != "OBJECT":
        return None, f"'{obj.name}' has a {obj.parent_type.lower()} parent"
    parent, why = _fcurve_world(obj.parent, frames)
    if parent is None:
        return None, why
    return parent @ mat4(obj.matrix_parent_inverse) @ basis, ""


def _fcurve_bone(arm: bpy.types.Object, name: str, frames: np.ndarray) -> tuple[np.ndarray | None, str]:
    """Armature-space pose matrices (F, 4, 4) of bone ``name`` from the armature's own F-curves.

    The bone and its ancestors must be moved by their own keys (or not at all) with Blender's
    default inheritance: no constraints, drivers, NLA or blended actions, full rotation and
    scale inheritance, local location. Returns ``(None, reason)`` otherwise.
    """
    ad = arm.animation_data
    curves: dict[tuple[str, int], Any] = {}
    if ad is not None:
        if len(ad.drivers):
            return None, f"'{arm.name}' has drivers"
        if any(not t.mute for t in ad.nla_tracks):
            return None, f"'{arm.name}' has NLA tracks"
        if getattr(ad, "action_influence", 1.0) != 1.0 or getattr(ad, "action_blend_type", "REPLACE") != "REPLACE":
            return None, f"'{arm.name}' blends its action"
        curves = {(fc.data_path, fc.array_index): fc for fc in compat.fcurves(arm) if not fc.mute}
    chain: list[bpy.types.PoseBone] = []
    pb: bpy.types.PoseBone | None = arm.pose.bones[name]
    while pb is not None:
        if any(not c.mute and c.influence > 0.0 for c in pb.constraints):
            return None, f"bone '{pb.name}' has constraints"
        bone = pb.bone
        if (not bone.use_inherit_rotation or bone.inherit_scale != "FULL" or not bone.use_local_location
                or bone.use_relative_parent):
            return None, f"bone '{pb.name}' does not inherit its parent's transform fully"
        chain.append(pb)
        pb = pb.parent
    f_count = frames.shape[0]
    mats = np.repeat(np.eye(4)[None], f_count, axis=0)
    parent_rest = None
    for pb in reversed(chain):
        prefix = f'pose.bones["{bpy.utils.escape_identifier(pb.name)}"].'
        mode = pb.rotation_mode
        rot_path = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode,
                                                                                                "rotation_euler")

        def channel(path: str, size: int, pb: bpy.types.PoseBone = pb, prefix: str = prefix) -> np.ndarray:
            out = np.repeat(np.array(getattr(pb, path), dtype=np.float64)[None, :size], f_count, axis=0)
            for i in range(size):
                fc = curves.get((prefix + path, i))
                if fc is not None:
                    out[:, i] = [fc.evaluate(float(f)) for f in frames]
            return out

        basis = _basis(channel("location", 3), channel(rot_path, 3 if rot_path == "rotation_euler" else 4),
                       channel("scale", 3), mode)
        rest = mat4(pb.bone.matrix_local)
        mats = mats @ relative_rest(rest, parent_rest) @ basis
        parent_rest = rest
    return mats, ""


class FrameSampler:
    """Per-frame world matrices of objects and pose matrices of bones over a frame range.

    Parameters
    ----------
    context : bpy.types.Context
    frames : ndarray of int, shape (F,)
    objects : list of bpy.types.Object
        Objects whose world matrices are needed (the armature first).
    bones : list of (str, str)
        ``(armature object name, bone name)`` pairs whose armature-space pose matrices are
        needed (chain roots' parents, target and pole bones).

    Attributes
    ----------
    world : dict of str to ndarray (F, 4, 4)
    bone : dict of (str, str) to ndarray (F, 4, 4)
    path : str
        ``'F-curves'`` (evaluated directly) or ``'frame_set'`` (scene stepped, frame restored),
        and the reason for the latter.
    """

    def __init__(self, context: bpy.types.Context, frames: np.ndarray, objects: list[bpy.types.Object],
                 bones: list[tuple[str, str]]) -> None:
        self.world: dict[str, np.ndarray] = {}
        self.bone: dict[tuple[str, str], np.ndarray] = {}
        reason = ""
        for obj in objects:
            if obj.name in self.world:
                continue
            mats, why = _fcurve_world(obj, frames)
            if mats is None:
                reason = why
                break
            self.world[obj.name] = mats
        if not reason:
            for key in bones:
                mats, why = _fcurve_bone(bpy.data.objects[key[0]], key[1], frames)
                if mats is None:
                    reason = why
                    break
                self.bone[key] = mats
        if not reason:
            self.path = "F-curves"
            return
        self.path = f"frame_set ({reason})"
        self._step(context, frames, objects, bones)

    def _step(self, context: bpy.types.Context, frames: np.ndarray, objects: list[bpy.types.Object],
              bones: list[tuple[str, str]]) -> None:
        scene = context.scene
        frame0, sub0 = scene.frame_current, scene.frame_subframe
        f_count = frames.shape[0]
        names = list(dict.fromkeys([o.name for o in objects] + [k[0] for k in bones]))
        world = {name: np.empty((f_count, 4, 4)) for name in names}
        bone = {key: np.empty((f_count, 4, 4)) for key in bones}
        try:
            for k, f in enumerate(frames):
                scene.frame_set(int(f))
                dg = context.evaluated_depsgraph_get()
                for name in names:
                    world[name][k] = mat4(bpy.data.objects[name].evaluated_get(dg).matrix_world)
                for key in bones:
                    bone[key][k] = mat4(bpy.data.objects[key[0]].evaluated_get(dg).pose.bones[key[1]].matrix)
        finally:
            scene.frame_set(frame0, subframe=sub0)
        self.world, self.bone = world, bone
