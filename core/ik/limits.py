"""Per-bone joint limits, as Blender's bone IK settings define them.

For each bone and each axis of the bone's own frame (X, Y, Z), Blender offers ``lock_ik_*``,
``use_ik_limit_*``, ``ik_min_*`` and ``ik_max_*``. Y is the bone's long axis, so a rotation
about Y is *twist*; X and Z are *swing*. A pose rotation ``q`` (in the bone's rest frame) is
decomposed as ``q = swing * twist`` about +Y; the twist angle is clamped to
``[min_y, max_y]`` (0 if locked) and the swing's rotation vector ``(sx, 0, sz)`` is clamped
component-wise to ``[min_x, max_x]`` and ``[min_z, max_z]`` (0 if locked); then recomposed.

These three numbers, ``(swing_x, twist_y, swing_z)`` (:func:`limit_angles`, inverse
:func:`from_angles`), are also the joint coordinates every solver works in: absolute from the
rest pose, so limits are a box, a lock drops a coordinate, and a pose with ``twist_y = 0`` has
no rotation about the bone's own axis. ``ik_stiffness_x/y/z`` (Blender's per-bone IK
stiffness, 0..1) weight the coordinates: a stiffer joint takes less of the bend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import quat
from ..errors import ChainError

__all__ = ["JointLimits", "clamp", "clamp_bounds", "within", "limit_angles", "from_angles"]


@dataclass(frozen=True)
class JointLimits:
    """Per-bone, per-axis limits (axis order X, Y, Z of each bone's frame; Y is twist).

    Attributes
    ----------
    lock : ndarray of bool, shape (n, 3)
        The axis cannot rotate at all.
    use_limit : ndarray of bool, shape (n, 3)
        The axis is limited to ``[minimum, maximum]``.
    minimum, maximum : ndarray, shape (n, 3)
        Radians; Blender's ``ik_min_*`` (<= 0) and ``ik_max_*`` (>= 0).
    stiffness : ndarray, shape (n, 3), optional
        Blender's ``ik_stiffness_x/y/z`` in [0, 1) (0 by default): the solvers scale each
        coordinate's share of the motion by ``1 - stiffness``.
    """

    lock: np.ndarray
    use_limit: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    stiffness: np.ndarray | None = None

    def __post_init__(self) -> None:
        lock = np.array(self.lock, dtype=bool)
        use = np.array(self.use_limit, dtype=bool)
        lo = np.array(self.minimum, dtype=np.float64)
        hi = np.array(self.maximum, dtype=np.float64)
        if lock.ndim != 2 or lock.shape[1] != 3:
            raise ChainError(f"limits: lock must have shape (n, 3), got {lock.shape}")
        for name, a in (("use_limit", use), ("minimum", lo), ("maximum", hi)):
            if a.shape != lock.shape:
                raise ChainError(f"limits: {name} must have shape {lock.shape}, got {a.shape}")
        if not (np.all(np.isfinite(lo[use])) and np.all(np.isfinite(hi[use]))):
            raise ChainError("limits: minimum and maximum must be finite")
        if np.any(lo[use] > hi[use]):
            raise ChainError("limits: a minimum is greater than its maximum")
        st = np.zeros(lock.shape) if self.stiffness is None else np.array(self.stiffness, dtype=np.float64)
        if st.shape != lock.shape:
            raise ChainError(f"limits: stiffness must have shape {lock.shape}, got {st.shape}")
        if not np.all(np.isfinite(st)) or np.any(st < 0.0) or np.any(st > 1.0):
            raise ChainError("limits: stiffness must be within [0, 1]")
        for name, a in (("lock", lock), ("use_limit", use), ("minimum", lo), ("maximum", hi),
                        ("stiffness", st)):
            a.setflags(write=False)
            object.__setattr__(self, name, a)

    @classmethod
    def free(cls, n: int) -> JointLimits:
        """Limits that constrain nothing, for ``n`` bones."""
        return cls(np.zeros((n, 3), bool), np.zeros((n, 3), bool), np.zeros((n, 3)), np.zeros((n, 3)))

    @property
    def n(self) -> int:
        """Number of bones."""
        return int(self.lock.shape[0])

    @property
    def active(self) -> bool:
        """True if any axis is locked or limited."""
        return bool(np.any(self.lock) or np.any(self.use_limit))

    def weights(self) -> np.ndarray:
        """Per-coordinate weights ``1 - stiffness`` (0 where locked), shape (n, 3)."""
        w = 1.0 - np.minimum(self.stiffness, 0.99)
        return np.where(self.lock, 0.0, w)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Effective lower and upper bounds, shape (n, 3) each (+-inf where free, 0 where locked)."""
        lo = np.where(self.use_limit, self.minimum, -np.inf)
        hi = np.where(self.use_limit, self.maximum, np.inf)
        lo = np.where(self.lock, 0.0, lo)
        hi = np.where(self.lock, 0.0, hi)
        return lo, hi


def limit_angles(q: np.ndarray) -> np.ndarray:
    """The angles the limits act on: swing rotation-vector x, twist about Y, swing z.

    Parameters
    ----------
    q : array_like, shape (..., n, 4)
        Pose rotations in each bone's rest frame.

    Returns
    -------
    ndarray, shape (..., n, 3)
        Radians ``(swing_x, twist_y, swing_z)``.
    """
    sw, tw = quat.swing_twist(q)
    sv = quat.to_rotvec(sw)
    ty = quat.twist_angle(tw)
    return np.stack((sv[..., 0], ty, sv[..., 2]), axis=-1)


def from_angles(a: np.ndarray) -> np.ndarray:
    """Rotations from joint coordinates: ``swing(x, z) * twist(y)``, the inverse of :func:`limit_angles`.

    Parameters
    ----------
    a : array_like, shape (..., 3)
        Radians ``(swing_x, twist_y, swing_z)``; the swing is the rotation vector
        ``(swing_x, 0, swing_z)`` (|swing| < pi), the twist a rotation about +Y.

    Returns
    -------
    ndarray, shape (..., 4)
        Unit quaternions.
    """
    a = np.asarray(a, dtype=np.float64)
    sx, t, sz = a[..., 0], a[..., 1], a[..., 2]
    th = np.sqrt(sx * sx + sz * sz)
    small = th < 1e-6
    # sin(th/2)/th, with its Taylor series near zero.
    k = np.where(small, 0.5 - th * th / 48.0, np.sin(0.5 * th) / np.where(small, 1.0, th))
    w, x, z = np.cos(0.5 * th), k * sx, k * sz
    out = np.empty(a.shape[:-1] + (4,))
    if not np.any(t):
        out[..., 0], out[..., 1], out[..., 2], out[..., 3] = w, x, 0.0, z
        return out
    out[..., 0], out[..., 1], out[..., 2], out[..., 3] = w, x, 0.0, z
    half = 0.5 * t
    twist = np.stack((np.cos(half), np.zeros_like(half), np.sin(half), np.zeros_like(half)), axis=-1)
    return quat.multiply(out, twist)


def clamp(q: np.ndarray, limits: JointLimits | None) -> np.ndarray:
    """Clamp pose rotations into the limits (swing-twist about each bone's +Y).

    Parameters
    ----------
    q : array_like, shape (..., n, 4)
        Pose rotations in each bone's rest frame.
    limits : JointLimits or None
        ``None`` (or limits that constrain nothing) returns ``q`` unchanged.

    Returns
    -------
    ndarray, shape (..., n, 4)
        Unit quaternions within the limits.
    """
    q = np.asarray(q, dtype=np.float64)
    if limits is None or not limits.active:
        return q
    lo, hi = limits.bounds()
    return clamp_bounds(q, lo, hi)


def clamp_bounds(q: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Clamp rotations to explicit bounds (the kernel of :func:`clamp`).

    Parameters
    ----------
    q : array_like, shape (..., 4)
    lo, hi : array_like, shape broadcastable to (..., 3)
        Radians for (swing x, twist y, swing z); +-inf where free, 0 where locked.

    Returns
    -------
    ndarray, shape (..., 4)
    """
    q = np.asarray(q, dtype=np.float64)
    sw, tw = quat.swing_twist(q)
    sv = quat.to_rotvec(sw)
    ty = quat.twist_angle(tw)
    ang = np.stack((sv[..., 0], ty, sv[..., 2]), axis=-1)
    cl = np.clip(ang, lo, hi)
    if np.array_equal(cl, ang):
        return q
    out = from_angles(cl)
    changed = np.any(cl != ang, axis=-1, keepdims=True)
    return np.where(changed, out, q)


def within(q: np.ndarray, limits: JointLimits | None, tol: float = 1e-6) -> bool:
    """True if every rotation respects the limits within ``tol`` radians.

    Parameters
    ----------
    q : array_like, shape (..., n, 4)
    limits : JointLimits or None
    tol : float
        Radians.

    Returns
    -------
    bool
    """
    if limits is None or not limits.active:
        return True
    lo, hi = limits.bounds()
    ang = limit_angles(q)
    return bool(np.all(ang >= lo - tol) and np.all(ang <= hi + tol))
