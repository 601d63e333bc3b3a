"""Writing baked IK results back: rotation keys in bulk, and the optional trace curve.

Keys go through ``compat`` (legacy, slotted and channel-bag actions alike) with one
``keyframe_points.add`` + ``foreach_set`` per F-curve: no loop over frames here.
"""

from __future__ import annotations

import bpy
import numpy as np

from .. import compat
from .rotations import quat_to_axis_angle, quat_to_euler

__all__ = ["rotation_channels", "write_rotation_keys", "write_trace", "bone_data_path"]


def bone_data_path(bone: str, prop: str) -> str:
    """``pose.bones["<bone>"].<prop>`` with the name escaped as Blender does."""
    return f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{prop}'


def rotation_channels(rotations: np.ndarray, mode: str) -> tuple[str, np.ndarray]:
    """The property and per-frame values a bone in rotation ``mode`` is keyed with.

    Parameters
    ----------
    rotations : ndarray, shape (F, 4)
        Pose quaternions of one bone over the frames, sign-continuous.
    mode : str
        The pose bone's ``rotation_mode``.

    Returns
    -------
    prop : str
        ``'rotation_quaternion'``, ``'rotation_axis_angle'`` or ``'rotation_euler'``.
    values : ndarray, shape (F, 4) or (F, 3)
        Continuous along frames (no sign flips, no 2*pi jumps).
    """
    q = np.asarray(rotations, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    # Sign continuity (the solver already provides it; cheap to make sure).
    flip = np.concatenate(([False], np.einsum("fi,fi->f", q[1:], q[:-1]) < 0))
    q = np.where((np.cumsum(flip) % 2 == 1)[:, None], -q, q)
    if mode == "QUATERNION":
        return "rotation_quaternion", q
    if mode == "AXIS_ANGLE":
        return "rotation_axis_angle", quat_to_axis_angle(q)
    return "rotation_euler", quat_to_euler(q, mode)


def write_rotation_keys(arm: bpy.types.Object, bones: list[str], modes: list[str], frames: np.ndarray,
                        rotations: np.ndarray) -> int:
    """Key every bone's rotation, in its own rotation mode, at every frame; return the F-curve count.

    Keys of these F-curves inside the frame range are replaced; keys outside it and every other
    F-curve of the action are kept. F-curves are grouped by bone name.

    Parameters
    ----------
    arm : bpy.types.Object
        The armature object; an action is created if it has none.
    bones, modes : list of str
        Bone names and their rotation modes, one per chain bone.
    frames : ndarray, shape (F,)
    rotations : ndarray, shape (F, n, 4)
    """
    compat.ensure_action(arm, f"{arm.name}Action")
    count = 0
    for i, (name, mode) in enumerate(zip(bones, modes)):
        prop, values = rotation_channels(rotations[:, i], mode)
        path = bone_data_path(name, prop)
        for k in range(values.shape[1]):
            fc = compat.ensure_fcurve(arm, path, k, group=name)
            compat.set_keys(fc, frames, values[:, k], "LINEAR")
            count += 1
    return count


def write_trace(context: bpy.types.Context, name: str, points: np.ndarray) -> bpy.types.Object:
    """Add (or replace the spline of) the poly curve object ``name`` through ``points`` (F, 3), world space."""
    obj = bpy.data.objects.get(name)
    if obj is None or obj.type != "CURVE":
        data = bpy.data.curves.new(name, "CURVE")
        obj = bpy.data.objects.new(name, data)
    data = obj.data  # type: ignore[assignment]  # a curve: checked above
    data.dimensions = "3D"
    data.splines.clear()
    if obj.name not in context.scene.collection.all_objects:
        context.scene.collection.objects.link(obj)
    spline = data.splines.new("POLY")
    spline.points.add(points.shape[0] - 1)
    co = np.ones((points.shape[0], 4))
    co[:, :3] = points
    spline.points.foreach_set("co", co.ravel())
    obj.matrix_world = ((1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1))
    data.update_tag()
    return obj
