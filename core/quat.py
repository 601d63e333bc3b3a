"""Unit quaternions ``(w, x, y, z)`` as float64 numpy arrays, vectorised over leading axes.

The component order and handedness match Blender's ``mathutils.Quaternion``: a quaternion
``q`` rotates a vector ``v`` as ``q v q*``, and ``multiply(a, b)`` applies ``b`` first, then
``a`` (like ``a @ b`` in Blender). Every function accepts arrays of shape ``(..., 4)`` (and
``(..., 3)`` for vectors) and broadcasts over the leading axes. Angles are in radians.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "identity", "normalize", "cross", "multiply", "conjugate", "inverse", "rotate",
    "from_axis_angle", "from_rotvec", "to_rotvec", "between", "to_matrix", "from_matrix",
    "angle", "angle_between", "slerp", "swing_twist", "twist_angle", "make_continuous",
    "canonical",
]

_EPS = 1e-12


def identity(shape: tuple[int, ...] | int = ()) -> np.ndarray:
    """Identity quaternions.

    Parameters
    ----------
    shape : tuple of int or int
        Leading shape.

    Returns
    -------
    ndarray, shape ``shape + (4,)``
    """
    if isinstance(shape, int):
        shape = (shape,)
    q = np.zeros(tuple(shape) + (4,))
    q[..., 0] = 1.0
    return q


def normalize(q: np.ndarray) -> np.ndarray:
    """Scale quaternions to unit length; zero quaternions become the identity.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    q = np.asarray(q, dtype=np.float64)
    n = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
    out = q / np.where(n > _EPS, n, 1.0)
    bad = (n <= _EPS)[..., 0]
    if np.any(bad):
        out = np.where(bad[..., None], identity(()), out)
    return out


def _components(a: np.ndarray, axis: int) -> list[np.ndarray]:
    """Views of the components of ``a`` along ``axis``."""
    if axis == 0:
        return list(a)
    if axis == -1 or axis == a.ndim - 1:
        return [a[..., i] for i in range(a.shape[-1])]
    return list(np.moveaxis(a, axis, 0))


def multiply(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Hamilton product ``a * b`` (rotation ``b`` first, then ``a``).

    Parameters
    ----------
    a, b : array_like, shape (..., 4)
        Broadcast against each other.
    axis : int
        The axis holding the components (``-1``; ``0`` for components-first arrays such as
        ``(4, B)``, whose rows are contiguous: much faster for long batches).

    Returns
    -------
    ndarray, shape (..., 4)
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    aw, ax, ay, az = _components(a, axis)
    bw, bx, by, bz = _components(b, axis)
    return np.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        axis=axis,
    )


def conjugate(q: np.ndarray) -> np.ndarray:
    """Conjugate ``(w, -x, -y, -z)``; the inverse of a unit quaternion.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    q = np.array(q, dtype=np.float64)
    q[..., 1:] *= -1.0
    return q


def inverse(q: np.ndarray) -> np.ndarray:
    """Multiplicative inverse (conjugate divided by the squared norm).

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    q = np.asarray(q, dtype=np.float64)
    n2 = np.einsum("...i,...i->...", q, q)[..., None]
    return conjugate(q) / np.where(n2 > _EPS, n2, 1.0)


def cross(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Cross product over ``axis`` (a faster ``np.cross`` for 3-vectors).

    Parameters
    ----------
    a, b : ndarray, shape (..., 3)
    axis : int
        The axis holding the components.

    Returns
    -------
    ndarray, shape (..., 3)
    """
    a0, a1, a2 = _components(np.asarray(a), axis)
    b0, b1, b2 = _components(np.asarray(b), axis)
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=axis)


def rotate(q: np.ndarray, v: np.ndarray, axis: int = -1) -> np.ndarray:
    """Rotate vectors by unit quaternions.

    Parameters
    ----------
    q : array_like, shape (..., 4)
    v : array_like, shape (..., 3)
        Broadcast against ``q``'s leading axes.
    axis : int
        The axis holding the components of both (see :func:`multiply`).

    Returns
    -------
    ndarray, shape (..., 3)
    """
    w, x, y, z = _components(np.asarray(q, dtype=np.float64), axis)
    v0, v1, v2 = _components(np.asarray(v, dtype=np.float64), axis)
    # v + w t + u x t with t = 2 u x v, u = (x, y, z).
    tx, ty, tz = 2.0 * (y * v2 - z * v1), 2.0 * (z * v0 - x * v2), 2.0 * (x * v1 - y * v0)
    return np.stack((v0 + w * tx + y * tz - z * ty, v1 + w * ty + z * tx - x * tz, v2 + w * tz + x * ty - y * tx),
                    axis=axis)


def from_axis_angle(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Quaternion rotating by ``angle`` radians about ``axis`` (normalised here).

    Parameters
    ----------
    axis : array_like, shape (..., 3)
        Need not be unit; a zero axis gives the identity.
    angle : array_like, shape (...)
        Radians, right-handed.

    Returns
    -------
    ndarray, shape (..., 4)
    """
    axis = np.asarray(axis, dtype=np.float64)
    angle = np.asarray(angle, dtype=np.float64)
    n = np.linalg.norm(axis, axis=-1)
    unit = axis / np.where(n > _EPS, n, 1.0)[..., None]
    half = 0.5 * np.where(n > _EPS, angle, 0.0)
    return np.concatenate((np.cos(half)[..., None], np.sin(half)[..., None] * unit), axis=-1)


def from_rotvec(rv: np.ndarray) -> np.ndarray:
    """Quaternion from a rotation vector (axis times angle in radians).

    Parameters
    ----------
    rv : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    rv = np.asarray(rv, dtype=np.float64)
    theta = np.sqrt(np.einsum("...i,...i->...", rv, rv))
    half = 0.5 * theta
    # sin(theta/2)/theta, with its Taylor series near zero.
    small = theta < 1e-6
    k = np.where(small, 0.5 - theta * theta / 48.0, np.sin(half) / np.where(small, 1.0, theta))
    return np.concatenate((np.cos(half)[..., None], k[..., None] * rv), axis=-1)


def to_rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vector (axis times angle, angle in [0, pi]) of unit quaternions.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 3)
    """
    q = canonical(q)
    s = np.sqrt(np.einsum("...i,...i->...", q[..., 1:], q[..., 1:]))
    theta = 2.0 * np.arctan2(s, q[..., 0])
    small = s < 1e-9
    k = np.where(small, 2.0 / np.where(q[..., 0] > _EPS, q[..., 0], 1.0), theta / np.where(small, 1.0, s))
    return k[..., None] * q[..., 1:]


def canonical(q: np.ndarray) -> np.ndarray:
    """The representative with ``w >= 0`` of each rotation.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    q = np.asarray(q, dtype=np.float64)
    return np.where(q[..., :1] < 0.0, -q, q)


def _any_perpendicular(u: np.ndarray) -> np.ndarray:
    """A unit vector perpendicular to each (unit) ``u``, shape (..., 3)."""
    ax = np.abs(u)
    # Cross with the basis axis least aligned with u.
    pick = np.argmin(ax, axis=-1)
    basis = np.eye(3)[pick]
    p = np.cross(u, basis)
    return p / np.linalg.norm(p, axis=-1, keepdims=True)


def between(u: np.ndarray, v: np.ndarray, fallback_axis: np.ndarray | None = None) -> np.ndarray:
    """Shortest-arc rotation taking the direction of ``u`` to the direction of ``v``.

    Parameters
    ----------
    u, v : array_like, shape (..., 3)
        Need not be unit. A zero vector gives the identity.
    fallback_axis : array_like, shape (..., 3), optional
        Rotation axis used when ``u`` and ``v`` are antiparallel (the shortest arc is then not
        unique). Its component along ``u`` is removed; default: any perpendicular axis.

    Returns
    -------
    ndarray, shape (..., 4)
    """
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    u, v = np.broadcast_arrays(u, v)
    nu = np.linalg.norm(u, axis=-1, keepdims=True)
    nv = np.linalg.norm(v, axis=-1, keepdims=True)
    zero = ((nu <= _EPS) | (nv <= _EPS))[..., 0]
    uu = u / np.where(nu > _EPS, nu, 1.0)
    vv = v / np.where(nv > _EPS, nv, 1.0)
    d = np.einsum("...i,...i->...", uu, vv)
    q = np.concatenate(((1.0 + d)[..., None], cross(uu, vv)), axis=-1)
    anti = (d < -1.0 + 1e-12) & ~zero
    if np.any(anti):
        perp = _any_perpendicular(uu)
        if fallback_axis is not None:
            fa = np.broadcast_to(np.asarray(fallback_axis, dtype=np.float64), uu.shape)
            fa = fa - np.einsum("...i,...i->...", fa, uu)[..., None] * uu
            nf = np.linalg.norm(fa, axis=-1, keepdims=True)
            perp = np.where(nf > 1e-9, fa / np.where(nf > 1e-9, nf, 1.0), perp)
        q = np.where(anti[..., None], np.concatenate((np.zeros(perp.shape[:-1] + (1,)), perp), axis=-1), q)
    q = normalize(q)
    if np.any(zero):
        q = np.where(zero[..., None], identity(()), q)
    return q


def to_matrix(q: np.ndarray) -> np.ndarray:
    """3x3 rotation matrices of unit quaternions (column vectors: ``M @ v``).

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    q = np.asarray(q, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - z * w)
    m[..., 0, 2] = 2 * (x * z + y * w)
    m[..., 1, 0] = 2 * (x * y + z * w)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - x * w)
    m[..., 2, 0] = 2 * (x * z - y * w)
    m[..., 2, 1] = 2 * (y * z + x * w)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def from_matrix(m: np.ndarray) -> np.ndarray:
    """Unit quaternions (``w >= 0``) of 3x3 rotation matrices.

    Scale and shear are removed first (polar decomposition by SVD), so matrices with a
    uniform or axis scale are accepted.

    Parameters
    ----------
    m : array_like, shape (..., 3, 3)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    m = np.asarray(m, dtype=np.float64)
    uu, _, vt = np.linalg.svd(m)
    r = uu @ vt
    det = np.linalg.det(r)
    if np.any(det < 0):
        uu = uu.copy()
        uu[det < 0, :, 2] *= -1.0
        r = uu @ vt
    # Shepperd's method, vectorised: pick the largest of 4 candidates per matrix.
    t = np.stack(
        (
            1 + r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2],
            1 + r[..., 0, 0] - r[..., 1, 1] - r[..., 2, 2],
            1 - r[..., 0, 0] + r[..., 1, 1] - r[..., 2, 2],
            1 - r[..., 0, 0] - r[..., 1, 1] + r[..., 2, 2],
        ),
        axis=-1,
    )
    k = np.argmax(t, axis=-1)
    c0 = np.stack((t[..., 0], r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]), -1)
    c1 = np.stack((r[..., 2, 1] - r[..., 1, 2], t[..., 1], r[..., 0, 1] + r[..., 1, 0], r[..., 0, 2] + r[..., 2, 0]), -1)
    c2 = np.stack((r[..., 0, 2] - r[..., 2, 0], r[..., 0, 1] + r[..., 1, 0], t[..., 2], r[..., 1, 2] + r[..., 2, 1]), -1)
    c3 = np.stack((r[..., 1, 0] - r[..., 0, 1], r[..., 0, 2] + r[..., 2, 0], r[..., 1, 2] + r[..., 2, 1], t[..., 3]), -1)
    cand = np.stack((c0, c1, c2, c3), axis=-2)
    q = np.take_along_axis(cand, k[..., None, None], axis=-2)[..., 0, :]
    return canonical(normalize(q))


def angle(q: np.ndarray) -> np.ndarray:
    """Rotation angle in [0, pi] of unit quaternions.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (...)
    """
    q = np.asarray(q, dtype=np.float64)
    s = np.linalg.norm(q[..., 1:], axis=-1)
    return 2.0 * np.arctan2(s, np.abs(q[..., 0]))


def angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle in [0, pi] of the rotation taking ``a`` to ``b`` (sign of either ignored).

    Parameters
    ----------
    a, b : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (...)
    """
    return angle(multiply(b, conjugate(a)))


def slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray | float) -> np.ndarray:
    """Spherical linear interpolation along the shorter arc.

    Parameters
    ----------
    a, b : array_like, shape (..., 4)
        Unit quaternions.
    t : array_like, shape (...) or float
        0 gives ``a``, 1 gives ``b`` (or ``-b`` if that is closer to ``a``).

    Returns
    -------
    ndarray, shape (..., 4)
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)[..., None]
    d = np.einsum("...i,...i->...", a, b)[..., None]
    b = np.where(d < 0, -b, b)
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    s = np.sin(theta)
    lin = s < 1e-9
    safe = np.where(lin, 1.0, s)
    wa = np.where(lin, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(lin, t, np.sin(t * theta) / safe)
    return normalize(wa * a + wb * b)


def swing_twist(q: np.ndarray, axis: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Decompose ``q = swing * twist`` with ``twist`` about ``axis`` and ``swing`` perpendicular.

    Parameters
    ----------
    q : array_like, shape (..., 4)
        Unit quaternions.
    axis : array_like, shape (3,), optional
        Unit twist axis in the frame ``q`` acts in; default +Y (Blender's bone axis).

    Returns
    -------
    swing : ndarray, shape (..., 4)
        Rotation about an axis perpendicular to ``axis`` (``w >= 0``).
    twist : ndarray, shape (..., 4)
        Rotation about ``axis`` (``w >= 0``); the identity when the swing is a half turn.
    """
    q = canonical(q)
    ax = np.array([0.0, 1.0, 0.0]) if axis is None else np.asarray(axis, dtype=np.float64)
    ax = ax / np.linalg.norm(ax)
    p = np.einsum("...i,i->...", q[..., 1:], ax)
    tw = np.concatenate((q[..., :1], p[..., None] * ax), axis=-1)
    tw = normalize(tw)  # zero (half-turn swing) -> identity
    tw = canonical(tw)
    sw = multiply(q, conjugate(tw))
    return canonical(sw), tw


def twist_angle(q: np.ndarray, axis: np.ndarray | None = None) -> np.ndarray:
    """Signed twist angle in [-pi, pi] of ``q`` about ``axis`` (default +Y).

    Parameters
    ----------
    q : array_like, shape (..., 4)
    axis : array_like, shape (3,), optional

    Returns
    -------
    ndarray, shape (...)
    """
    q = canonical(q)
    ax = np.array([0.0, 1.0, 0.0]) if axis is None else np.asarray(axis, dtype=np.float64)
    ax = ax / np.linalg.norm(ax)
    p = np.einsum("...i,i->...", q[..., 1:], ax)
    return 2.0 * np.arctan2(p, q[..., 0])


def make_continuous(q: np.ndarray, axis: int = 0) -> np.ndarray:
    """Flip signs so consecutive quaternions along ``axis`` have a non-negative dot product.

    ``q`` and ``-q`` are the same rotation; keyframe interpolation needs the sign-continuous
    representative.

    Parameters
    ----------
    q : array_like, shape (..., 4)
        Unit quaternions; ``axis`` indexes a leading axis (e.g. frames).
    axis : int
        The axis along which to enforce continuity.

    Returns
    -------
    ndarray, same shape as ``q``
    """
    q = np.array(q, dtype=np.float64)
    if q.ndim < 2:
        return q
    ax = axis % (q.ndim - 1)
    qm = np.moveaxis(q, ax, 0)
    if qm.shape[0] < 2:
        return q
    d = np.einsum("...i,...i->...", qm[1:], qm[:-1])
    flips = np.cumsum(d < 0, axis=0) % 2
    sign = np.concatenate((np.ones((1,) + flips.shape[1:]), np.where(flips == 1, -1.0, 1.0)), axis=0)
    return np.moveaxis(qm * sign[..., None], 0, ax)
