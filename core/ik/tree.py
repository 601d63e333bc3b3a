"""Bone trees: the one forward-kinematics kernel, and the Jacobian of end effectors.

A :class:`Tree` is a set of ``m`` bones, each attached either to another bone of the tree
(``parents[k] >= 0``, listed before it) or to one of ``R`` root frames (``parents[k] == -1``,
``root_of[k]`` says which). A serial :class:`.chain.Chain` is the tree ``parents = [-1, 0,
..., n-2]`` with one root frame; chains that share bones (an arm and a finger, two legs off
one hip) are one tree. With Blender's bone conventions (see :mod:`.chain`), the global frame of
bone ``k`` is ``G_k = G_parent . T(rest_offsets[k]) . R(rest_rotations[k]) . R(q_k)``.

Joint coordinates are the swing-twist angles of :func:`.limits.from_angles`, absolute from the
rest pose: ``q_k = swing(a_k0, a_k2) * twist(a_k1)`` (twist about the bone's own +Y).
:func:`jacobian` gives the exact derivative of end-effector positions (and orientations) with
respect to them: with ``q = S T`` the body angular velocity is ``T^-1 J_r(s) ds + dt e_y``,
where ``J_r`` is the right Jacobian of SO(3) (e.g. Sola, Deray & Atchuthan 2018, "A micro Lie
theory for state estimation in robotics").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import quat
from ..errors import ChainError

__all__ = ["Tree", "fk", "jacobian", "angular_rates"]


@dataclass(frozen=True)
class Tree:
    """An immutable bone tree with its limits and stiffness weights.

    Attributes
    ----------
    parents : ndarray of int, shape (m,)
        Parent bone index (< own index), or -1 for a bone attached to a root frame.
    root_of : ndarray of int, shape (m,)
        For ``parents == -1``: the index of its root frame (0 .. R-1); else -1.
    rest_rotations, rest_offsets : ndarray, shapes (m, 4), (m, 3)
        Rest frame and head of each bone in its parent's frame (or its root frame), metres.
    lengths : ndarray, shape (m,)
        Metres.
    lower, upper : ndarray, shape (m, 3)
        Bounds of the joint coordinates (swing x, twist y, swing z), radians; +-inf where
        free, 0 where locked.
    weights : ndarray, shape (m, 3)
        ``1 - stiffness`` per coordinate, 0 where locked.
    """

    parents: np.ndarray
    root_of: np.ndarray
    rest_rotations: np.ndarray
    rest_offsets: np.ndarray
    lengths: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    weights: np.ndarray
    n_roots: int = field(init=False)

    def __post_init__(self) -> None:
        par = np.asarray(self.parents, dtype=np.int64)
        m = par.shape[0]
        if np.any(par >= np.arange(m)) or np.any(par < -1):
            raise ChainError("tree: every bone's parent must come before it")
        ro = np.asarray(self.root_of, dtype=np.int64)
        if np.any((par == -1) != (ro >= 0)):
            raise ChainError("tree: root frames must be given exactly for parentless bones")
        object.__setattr__(self, "parents", par)
        object.__setattr__(self, "root_of", ro)
        object.__setattr__(self, "n_roots", int(ro.max()) + 1 if m else 0)

    @property
    def m(self) -> int:
        """Number of bones."""
        return int(self.parents.shape[0])

    def tails(self) -> np.ndarray:
        """Tail of each bone in its own frame, ``(0, length, 0)``, shape (m, 3)."""
        t = np.zeros((self.m, 3))
        t[:, 1] = self.lengths
        return t

    def ancestors(self, bones: np.ndarray) -> np.ndarray:
        """Which bones move each of ``bones``: mask (len(bones), m), a bone included in its own row."""
        bones = np.asarray(bones, dtype=np.int64)
        mask = np.zeros((bones.shape[0], self.m), dtype=bool)
        for e, k in enumerate(bones.tolist()):
            while k >= 0:
                mask[e, k] = True
                k = int(self.parents[k])
        return mask


def fk(tree: Tree, q: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray
       ) -> tuple[np.ndarray, np.ndarray]:
    """Forward kinematics of a tree for a batch of poses.

    Parameters
    ----------
    tree : Tree
    q : ndarray, shape (B, m, 4)
        Pose rotations (Blender's pose-bone quaternions).
    root_rot, root_pos : ndarray, shapes (B, R, 4), (B, R, 3)
        The root frames.

    Returns
    -------
    heads : ndarray, shape (B, m, 3)
        Metres.
    glob : ndarray, shape (B, m, 4)
        Global rotation of each bone's frame.
    """
    b, m = q.shape[0], tree.m
    # Components-first layout: each bone's (4, B) / (3, B) block is contiguous.
    qc = np.ascontiguousarray(q.transpose(1, 2, 0))
    rc = np.ascontiguousarray(np.moveaxis(root_rot, 0, -1))
    pc = np.ascontiguousarray(np.moveaxis(root_pos, 0, -1))
    heads = np.empty((m, 3, b))
    glob = np.empty((m, 4, b))
    # Right-multiplying by the constant rest rotation is a 4x4 linear map of the components.
    w, x, y, z = tree.rest_rotations.T
    right = np.stack((np.stack((w, -x, -y, -z), -1), np.stack((x, w, z, -y), -1),
                      np.stack((y, -z, w, x), -1), np.stack((z, y, -x, w), -1)), -1)  # (m, 4, 4)
    for k in range(m):
        p = int(tree.parents[k])
        if p < 0:
            r = int(tree.root_of[k])
            g, h = rc[r], pc[r]
        else:
            g, h = glob[p], heads[p]
        heads[k] = h + _rotate_const(g, tree.rest_offsets[k])
        glob[k] = quat.multiply(right[k].T @ g, qc[k], axis=0)
    return heads.transpose(2, 0, 1), glob.transpose(2, 0, 1)


def _rotate_const(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate the constant vector ``v (3,)`` by components-first quaternions ``g (4, B)`` -> (3, B).

    The rotation matrix's columns for the non-zero components of ``v`` only (a connected
    bone's offset is ``(0, length, 0)``: one column).
    """
    w, x, y, z = g
    cols = []
    if v[0] != 0.0:
        cols.append((v[0] * (1.0 - 2.0 * (y * y + z * z)), v[0] * 2.0 * (x * y + w * z), v[0] * 2.0 * (x * z - w * y)))
    if v[1] != 0.0:
        cols.append((v[1] * 2.0 * (x * y - w * z), v[1] * (1.0 - 2.0 * (x * x + z * z)), v[1] * 2.0 * (y * z + w * x)))
    if v[2] != 0.0:
        cols.append((v[2] * 2.0 * (x * z + w * y), v[2] * 2.0 * (y * z - w * x), v[2] * (1.0 - 2.0 * (x * x + y * y))))
    if not cols:
        return np.zeros((3,) + g.shape[1:])
    return np.stack([sum(c[i] for c in cols) for i in range(3)])


def angular_rates(angles: np.ndarray) -> np.ndarray:
    """Body angular velocity per unit rate of each joint coordinate.

    Parameters
    ----------
    angles : ndarray, shape (..., 3)
        Joint coordinates (swing x, twist y, swing z), radians.

    Returns
    -------
    ndarray, shape (..., 3, 3)
        Column ``j``: the angular velocity, in the bone's (posed) frame, of a unit rate of
        coordinate ``j``: ``T^-1 J_r(s) e_x``, ``e_y``, ``T^-1 J_r(s) e_z`` with the swing
        ``s = (x, 0, z)``, ``J_r(s) = I - (1 - cos th)/th^2 [s]x + (th - sin th)/th^3 [s]x^2``
        and ``T`` the twist about +Y.
    """
    cols = _rate_columns(angles[..., 0], angles[..., 1], angles[..., 2])
    out = np.zeros(angles.shape[:-1] + (3, 3))
    for j, col in enumerate(cols):
        for i in range(3):
            out[..., i, j] = col[i]
    return out


def _rate_columns(sx: np.ndarray, t: np.ndarray, sz: np.ndarray) -> tuple:
    """The columns of :func:`angular_rates` as component tuples (arrays shaped like ``sx``)."""
    th2 = sx * sx + sz * sz
    th = np.sqrt(th2)
    small = th < 1e-4
    ts = np.where(small, 1.0, th)
    inv2 = 1.0 / (ts * ts)
    c1 = np.where(small, 0.5 - th2 / 24.0, (1.0 - np.cos(th)) * inv2)
    c2 = np.where(small, 1.0 / 6.0 - th2 / 120.0, (th - np.sin(th)) * inv2 / ts)
    # Columns x and z of J_r(s) ([s]x^2 = s s^T - th^2 I).
    c2xz = c2 * sx * sz
    x0, x1, x2 = 1.0 - c2 * sz * sz, -c1 * sz, c2xz
    z0, z1, z2 = c2xz, c1 * sx, 1.0 - c2 * sx * sx
    if np.any(t):
        ct, st = np.cos(t), np.sin(t)
        x0, x2 = ct * x0 - st * x2, st * x0 + ct * x2
        z0, z2 = ct * z0 - st * z2, st * z0 + ct * z2
    zero = np.zeros_like(sx)
    return (x0, x1, x2), (zero, zero + 1.0, zero), (z0, z1, z2)


def jacobian(tree: Tree, angles: np.ndarray, heads: np.ndarray, glob: np.ndarray, points: np.ndarray,
             eff_bones: np.ndarray, moves: np.ndarray, orient: np.ndarray, used: np.ndarray | None = None
             ) -> np.ndarray:
    """Jacobian of end-effector positions (and orientations) w.r.t. the joint coordinates.

    Parameters
    ----------
    tree : Tree
    angles : ndarray, shape (B, m, 3)
    heads, glob : ndarray, shapes (B, m, 3), (B, m, 4)
        From :func:`fk`.
    points : ndarray, shape (B, E, 3)
        End-effector points (bone tails), metres.
    eff_bones : ndarray of int, shape (E,)
        The bone each effector sits on.
    moves : ndarray of bool, shape (E, m)
        :meth:`Tree.ancestors` of ``eff_bones``.
    orient : ndarray of bool, shape (E,)
        Effectors with orientation rows.
    used : ndarray of bool, shape (3m,), optional
        Columns wanted; the others are left 0 (not computed).

    Returns
    -------
    ndarray, shape (B, 3E + 3 * orient.sum(), 3m)
        Rows: each effector's position (metres per radian), then the orientation rows
        (world angular velocity) of the effectors with ``orient``; columns: bone-major
        coordinates (x, y, z).
    """
    b, m = angles.shape[0], tree.m
    use = np.ones((m, 3), dtype=bool) if used is None else used.reshape(m, 3)
    use = use & np.any(moves, axis=0)[:, None]
    bones = np.nonzero(use.any(axis=1))[0]
    coords = np.nonzero(use[bones].any(axis=0))[0]            # e.g. (0, 2): swing only
    mv = moves[:, bones]
    if bones.size == m:
        bones = slice(None)  # every bone: views and slice assignment, no gathering
    # Components first, (c, k, B): every operation below runs on contiguous rows.
    ac = np.ascontiguousarray(angles[:, bones].transpose(2, 1, 0))
    gc = np.ascontiguousarray(glob[:, bones].transpose(2, 1, 0))
    hc = np.ascontiguousarray(heads[:, bones].transpose(2, 1, 0))
    pc = points.transpose(2, 1, 0)                            # (3, E, B)
    rates = _rate_columns(ac[0], ac[1], ac[2])
    n_rows = 3 * eff_bones.shape[0] + 3 * int(np.count_nonzero(orient))
    out = np.zeros((n_rows, m, 3, b))
    for j in coords.tolist():
        omega = quat.rotate(gc, np.stack(rates[j]), axis=0)    # (3, k, B): world angular velocity
        for e in range(eff_bones.shape[0]):
            col = quat.cross(omega, pc[:, e][:, None, :] - hc, axis=0)
            out[3 * e:3 * e + 3, bones, j] = col * mv[e][None, :, None]
        row = 3 * eff_bones.shape[0]
        for e in np.nonzero(orient)[0].tolist():
            out[row:row + 3, bones, j] = omega * mv[e][None, :, None]
            row += 3
    out = out.transpose(3, 0, 1, 2)
    if used is not None:
        out *= use  # coordinates computed for some bones but not wanted on others
    return out.reshape(b, n_rows, 3 * m)
