"""Rotation conversions for key writing and matrix building, vectorised with numpy.

No bpy here: these turn the solver's quaternions ``(w, x, y, z)`` into the values a pose
bone's rotation mode stores, for whole ``(F, n)`` arrays at once, and build object
matrices from F-curve values. Blender's conventions: Euler order ``'XYZ'`` means X is
applied first, i.e. ``R = Rz @ Ry @ Rx``; axis-angle is ``(angle, x, y, z)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["EULER_ORDERS", "quat_to_matrix", "matrix_to_euler", "quat_to_euler", "euler_to_matrix",
           "quat_to_axis_angle", "axis_angle_to_matrix", "continuous_euler"]

EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
_AXIS = {"X": 0, "Y": 1, "Z": 2}


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices, shape ``(..., 3, 3)``, from quaternions ``(..., 4)`` (normalised first)."""
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - w * z)
    m[..., 0, 2] = 2 * (x * z + w * y)
    m[..., 1, 0] = 2 * (x * y + w * z)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - w * x)
    m[..., 2, 0] = 2 * (x * z - w * y)
    m[..., 2, 1] = 2 * (y * z + w * x)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def _order(order: str) -> tuple[int, int, int, float]:
    if order not in EULER_ORDERS:
        raise ValueError(f"unknown Euler order {order!r}")
    i, j, k = (_AXIS[c] for c in order)
    parity = 1.0 if (j - i) % 3 == 1 else -1.0
    return i, j, k, parity


def matrix_to_euler(m: np.ndarray, order: str) -> np.ndarray:
    """Euler angles ``(..., 3)`` (X, Y, Z components, radians) of rotation matrices ``(..., 3, 3)``.

    The principal branch: the middle rotation lies in [-pi/2, pi/2].
    """
    i, j, k, s = _order(order)
    m = np.asarray(m, dtype=np.float64)
    a = np.arctan2(s * m[..., k, j], m[..., k, k])
    b = np.arcsin(np.clip(-s * m[..., k, i], -1.0, 1.0))
    c = np.arctan2(s * m[..., j, i], m[..., i, i])
    out = np.empty(m.shape[:-2] + (3,))
    out[..., i] = a
    out[..., j] = b
    out[..., k] = c
    return out


def _axis_rot(axis: int, angle: np.ndarray) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    m = np.zeros(np.shape(angle) + (3, 3))
    a1, a2 = (axis + 1) % 3, (axis + 2) % 3
    m[..., axis, axis] = 1.0
    m[..., a1, a1] = c
    m[..., a2, a2] = c
    m[..., a2, a1] = s
    m[..., a1, a2] = -s
    return m


def euler_to_matrix(e: np.ndarray, order: str) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` from Euler angles ``(..., 3)`` in Blender's convention."""
    i, j, k, _ = _order(order)
    e = np.asarray(e, dtype=np.float64)
    return _axis_rot(k, e[..., k]) @ _axis_rot(j, e[..., j]) @ _axis_rot(i, e[..., i])


def continuous_euler(e: np.ndarray, axis: int = 0) -> np.ndarray:
    """Remove 2*pi jumps along ``axis`` (frames) so keyframe interpolation never spins."""
    return np.unwrap(np.asarray(e, dtype=np.float64), axis=axis)


def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def quat_to_euler(q: np.ndarray, order: str) -> np.ndarray:
    """Euler angles ``(F, ..., 3)`` of quaternions ``(F, ..., 4)``, continuous along frames.

    Every rotation has two Euler triples: the principal one ``(a, b, c)`` (middle angle ``b``
    in [-pi/2, pi/2]) and ``(a + pi, pi - b, c + pi)``. When the motion carries the middle
    angle past +-pi/2 the principal triple jumps by pi in both outer angles; those jumps are
    detected (vectorised: a cumulative parity over frames) and the other triple is used from
    there on, then 2*pi jumps are unwrapped.
    """
    e = matrix_to_euler(quat_to_matrix(q), order)
    if e.shape[0] < 2:
        return e
    i, j, k, _ = _order(order)
    da = np.abs(_wrap(np.diff(e[..., i], axis=0)))
    dc = np.abs(_wrap(np.diff(e[..., k], axis=0)))
    jump = (da > 0.5 * np.pi) & (dc > 0.5 * np.pi)
    other = np.concatenate((np.zeros_like(jump[:1]), np.cumsum(jump, axis=0) % 2 == 1), axis=0)
    alt = e.copy()
    alt[..., i] = e[..., i] + np.pi
    alt[..., j] = np.pi - e[..., j]
    alt[..., k] = e[..., k] + np.pi
    e = np.where(other[..., None], alt, e)
    return continuous_euler(e, axis=0)


def quat_to_axis_angle(q: np.ndarray) -> np.ndarray:
    """Blender's axis-angle ``(angle, x, y, z)`` of quaternions ``(..., 4)``.

    Sign-continuous quaternions give continuous values; the angle lies in [0, 2*pi].
    A zero rotation gets the axis (0, 1, 0), Blender's default.
    """
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1)
    ang = 2.0 * np.arctan2(s, q[..., 0])
    axis = np.where((s > 1e-12)[..., None], v / np.where(s > 1e-12, s, 1.0)[..., None], (0.0, 1.0, 0.0))
    return np.concatenate((ang[..., None], axis), axis=-1)


def axis_angle_to_matrix(aa: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` from axis-angle ``(..., 4)`` = (angle, x, y, z)."""
    aa = np.asarray(aa, dtype=np.float64)
    axis = aa[..., 1:]
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    axis = np.where(n > 1e-12, axis / np.where(n > 1e-12, n, 1.0), (0.0, 1.0, 0.0))
    half = 0.5 * aa[..., 0]
    q = np.concatenate((np.cos(half)[..., None], np.sin(half)[..., None] * axis), axis=-1)
    return quat_to_matrix(q)
