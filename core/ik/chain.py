"""Bone chains and forward kinematics, using Blender's bone conventions.

Bone ``i`` has a frame whose +Y axis runs along the bone: its head is the frame's origin and
its tail is at local ``(0, length_i, 0)``. With ``T`` a translation and ``R`` a rotation, the
global frame of bone ``i`` is

``G_i = G_{i-1} . T(rest_offsets[i]) . R(rest_rotations[i]) . R(q_i)``

where ``G_{-1}`` is the chain's root frame (identity unless a root transform is given) and
``q_i`` is the pose rotation of bone ``i`` in its own rest frame, i.e. Blender's pose-bone
``rotation_quaternion``. Positions are the ``n`` bone heads followed by the tip's tail.

A chain is the serial case of a bone tree (:mod:`.tree`), whose FK kernel it uses.
:func:`pose_from_joints` turns joint positions into rotations the way every solver does:
each bone's rotation is the minimal swing taking its rest segment, in its *new* parent frame,
onto the solved direction, measured from the rest pose (never accumulated), so a bone gets
no rotation about its own axis that the positions do not demand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np

from .. import quat
from ..errors import ChainError
from .limits import JointLimits
from .tree import Tree, fk

__all__ = [
    "Chain", "RootTransform", "forward_kinematics", "forward_kinematics_full",
    "forward_kinematics_batch", "RootLike", "pose_from_joints",
]


@dataclass(frozen=True)
class RootTransform:
    """Rotation and position of a chain's root frame (e.g. the parent bone, in armature space).

    Attributes
    ----------
    rotation : ndarray, shape (..., 4)
        Unit quaternion(s) ``(w, x, y, z)``.
    position : ndarray, shape (..., 3)
        Metres.
    """

    rotation: np.ndarray
    position: np.ndarray

    @classmethod
    def from_matrix(cls, matrix: np.ndarray) -> RootTransform:
        """From 4x4 matrices, shape (..., 4, 4); scale is discarded."""
        m = np.asarray(matrix, dtype=np.float64)
        if m.shape[-2:] != (4, 4):
            raise ChainError(f"root matrix must have shape (..., 4, 4), got {m.shape}")
        return cls(quat.from_matrix(m[..., :3, :3]), m[..., :3, 3].copy())


RootLike = Union[None, RootTransform, np.ndarray]


def _root_arrays(root: RootLike, lead: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Root rotation ``lead + (4,)`` and position ``lead + (3,)`` from any accepted root form."""
    if root is None:
        return quat.identity(lead), np.zeros(lead + (3,))
    if not isinstance(root, RootTransform):
        root = RootTransform.from_matrix(root)
    rot = quat.normalize(np.asarray(root.rotation, dtype=np.float64))
    pos = np.asarray(root.position, dtype=np.float64)
    if not (np.all(np.isfinite(rot)) and np.all(np.isfinite(pos))):
        raise ChainError("root transform is not finite")
    try:
        rot = np.broadcast_to(rot, lead + (4,))
        pos = np.broadcast_to(pos, lead + (3,))
    except ValueError:
        raise ChainError(f"root transform shape {rot.shape}/{pos.shape} does not fit {lead}") from None
    return rot, pos


@dataclass(frozen=True)
class Chain:
    """An immutable serial chain of ``n`` bones (Blender conventions, see module docstring).

    Attributes
    ----------
    rest_rotations : ndarray, shape (n, 4)
        Rest frame of bone ``i`` relative to its parent bone's frame (bone 0: the root frame).
    rest_offsets : ndarray, shape (n, 3)
        Head of bone ``i`` in its parent bone's frame (bone 0: in the root frame), metres.
        For a connected child this is ``(0, parent_length, 0)``.
    lengths : ndarray, shape (n,)
        Bone lengths, metres, all > 0.
    limits : JointLimits or None
        Per-bone joint limits.
    """

    rest_rotations: np.ndarray
    rest_offsets: np.ndarray
    lengths: np.ndarray
    limits: JointLimits | None = None
    segments: np.ndarray = field(init=False, repr=False)
    segment_lengths: np.ndarray = field(init=False, repr=False)
    tree: Tree = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rr = np.array(self.rest_rotations, dtype=np.float64)
        ro = np.array(self.rest_offsets, dtype=np.float64)
        ln = np.array(self.lengths, dtype=np.float64)
        if ln.ndim != 1 or ln.shape[0] < 1:
            raise ChainError(f"lengths must have shape (n,) with n >= 1, got {ln.shape}")
        n = ln.shape[0]
        if rr.shape != (n, 4):
            raise ChainError(f"rest_rotations must have shape ({n}, 4), got {rr.shape}")
        if ro.shape != (n, 3):
            raise ChainError(f"rest_offsets must have shape ({n}, 3), got {ro.shape}")
        for name, a in (("rest_rotations", rr), ("rest_offsets", ro), ("lengths", ln)):
            if not np.all(np.isfinite(a)):
                raise ChainError(f"{name} contains non-finite values")
        if np.any(ln <= 1e-9):
            i = int(np.argmax(ln <= 1e-9))
            raise ChainError(f"bone {i} has zero length")
        if np.any(np.linalg.norm(rr, axis=1) < 1e-9):
            raise ChainError("rest_rotations contains a zero quaternion")
        rr = quat.normalize(rr)
        if self.limits is not None and self.limits.n != n:
            raise ChainError(f"limits are for {self.limits.n} bones, chain has {n}")
        # Segment i: vector from head i to head i+1 (or the tip), in bone i's frame.
        seg = np.zeros((n, 3))
        seg[:-1] = ro[1:]
        seg[-1] = (0.0, ln[-1], 0.0)
        seg_len = np.linalg.norm(seg, axis=1)
        for name, a in (("rest_rotations", rr), ("rest_offsets", ro), ("lengths", ln),
                        ("segments", seg), ("segment_lengths", seg_len)):
            a.setflags(write=False)
            object.__setattr__(self, name, a)
        if self.limits is not None:
            lo, hi = self.limits.bounds()
            w = self.limits.weights()
        else:
            lo, hi, w = np.full((n, 3), -np.inf), np.full((n, 3), np.inf), np.ones((n, 3))
        parents = np.arange(n) - 1
        object.__setattr__(self, "tree", Tree(parents, np.where(parents < 0, 0, -1), rr, ro, ln, lo, hi, w))

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_points(cls, points: np.ndarray, limits: JointLimits | None = None) -> Chain:
        """A connected chain through ``points`` (heads, then the tip), in the root frame.

        Each bone's rest frame has +Y along the bone; its roll is the minimal rotation from the
        parent's frame (bone 0: from the root frame's +Y), so rest frames are twist-free.

        Parameters
        ----------
        points : array_like, shape (n+1, 3)
            Metres. Consecutive points must be distinct.
        limits : JointLimits, optional

        Returns
        -------
        Chain
        """
        p = np.asarray(points, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 2:
            raise ChainError(f"points must have shape (n+1, 3) with n >= 1, got {p.shape}")
        if not np.all(np.isfinite(p)):
            raise ChainError("points contain non-finite values")
        d = np.diff(p, axis=0)
        ln = np.linalg.norm(d, axis=1)
        if np.any(ln <= 1e-9):
            raise ChainError(f"bone {int(np.argmax(ln <= 1e-9))} has zero length (coincident points)")
        n = d.shape[0]
        y = np.array([0.0, 1.0, 0.0])
        g = quat.identity(())
        heads_world = p[:-1]
        mats = np.empty((n, 3, 3))
        for i in range(n):
            cur = quat.rotate(g, y)
            g = quat.multiply(quat.between(cur, d[i]), g)
            mats[i] = quat.to_matrix(g)
        return cls.from_rest_matrices(heads_world, mats, ln, limits)

    @classmethod
    def from_rest_matrices(cls, heads: np.ndarray, rest_matrices: np.ndarray, lengths: np.ndarray,
                           limits: JointLimits | None = None) -> Chain:
        """A chain from rest orientations in a common space (Blender's ``bone.matrix_local``).

        Parameters
        ----------
        heads : array_like, shape (n, 3)
            Bone heads in the common (root) space, metres.
        rest_matrices : array_like, shape (n, 3, 3) or (n, 4, 4)
            Bone rest orientations in that space (columns are the bone's X, Y, Z axes).
        lengths : array_like, shape (n,)
            Metres.
        limits : JointLimits, optional

        Returns
        -------
        Chain
        """
        h = np.asarray(heads, dtype=np.float64)
        m = np.asarray(rest_matrices, dtype=np.float64)
        ln = np.asarray(lengths, dtype=np.float64)
        if m.ndim == 3 and m.shape[1:] == (4, 4):
            m = m[:, :3, :3]
        if h.ndim != 2 or h.shape[1] != 3 or m.shape != (h.shape[0], 3, 3) or ln.shape != (h.shape[0],):
            raise ChainError(f"shapes do not fit: heads {h.shape}, matrices {m.shape}, lengths {ln.shape}")
        if not (np.all(np.isfinite(h)) and np.all(np.isfinite(m)) and np.all(np.isfinite(ln))):
            raise ChainError("rest data contains non-finite values")
        g = quat.from_matrix(m)
        parent = np.concatenate((quat.identity((1,)), g[:-1]), axis=0)
        parent_pos = np.concatenate((np.zeros((1, 3)), h[:-1]), axis=0)
        rel = quat.multiply(quat.conjugate(parent), g)
        off = quat.rotate(quat.conjugate(parent), h - parent_pos)
        return cls(rel, off, ln, limits)

    def with_limits(self, limits: JointLimits | None) -> Chain:
        """The same chain with other limits."""
        return Chain(self.rest_rotations, self.rest_offsets, self.lengths, limits)

    # -- properties ---------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of bones."""
        return int(self.lengths.shape[0])

    @property
    def reach(self) -> float:
        """Largest possible distance from bone 0's head to the tip, metres."""
        return float(self.segment_lengths.sum())

    def check_rotations(self, rotations: np.ndarray) -> np.ndarray:
        """Validate and normalise pose rotations of shape (..., n, 4)."""
        q = np.asarray(rotations, dtype=np.float64)
        if q.ndim < 2 or q.shape[-2:] != (self.n, 4):
            raise ChainError(f"rotations must have shape (..., {self.n}, 4), got {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ChainError("rotations contain non-finite values")
        return quat.normalize(q)


def _fk(chain: Chain, q: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray
        ) -> tuple[np.ndarray, np.ndarray]:
    """Batched FK. ``q (B, n, 4)``, root ``(B, 4)``/``(B, 3)`` -> positions (B, n+1, 3), globals (B, n, 4)."""
    heads, glob = fk(chain.tree, q, root_rot[:, None], root_pos[:, None])
    tip = heads[:, -1] + quat.rotate(glob[:, -1], chain.segments[-1])
    return np.concatenate((heads, tip[:, None]), axis=1), glob


def pose_from_joints(chain: Chain, joints: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray,
                     base: np.ndarray | None = None) -> np.ndarray:
    """Pose rotations that point each bone at the next of ``joints``, with minimal swing from rest
    (or from a given ``base`` pose).

    From the root outwards, bone ``i``'s rotation is the shortest arc taking its rest segment
    (head to next head, in its rest frame under its already posed parent) onto the direction
    from its head to ``joints[i+1]``. For a connected bone the segment is its own +Y axis, so
    the rotation is a pure swing: no twist. A zero desired direction keeps the rest rotation; a
    direction opposite to the rest one is a half turn about the bone's X axis.

    With ``base`` (e.g. an animated pose that spring bones swing away from), the swing is
    taken from each bone's ``base`` rotation instead of from rest: bone ``i`` gets
    ``base[i] · swing``, so whatever twist ``base`` has is kept and none is added.

    Parameters
    ----------
    chain : Chain
    joints : ndarray, shape (B, n+1, 3)
        Desired joints (heads, then the tip), metres; index 0 is ignored (the first head
        follows the root).
    root_rot, root_pos : ndarray, shapes (B, 4), (B, 3)
    base : ndarray, shape (B, n, 4), optional
        Unit pose rotations the swings start from; default the rest pose (identity).

    Returns
    -------
    ndarray, shape (B, n, 4)
        Unit pose rotations (limits not applied).
    """
    b, n = joints.shape[0], chain.n
    q = np.empty((b, n, 4))
    g, h = root_rot, root_pos
    for i in range(n):
        h = h + quat.rotate(g, chain.rest_offsets[i])
        par = quat.multiply(g, chain.rest_rotations[i])
        if base is not None:
            par = quat.multiply(par, base[:, i])
        d = quat.rotate(quat.conjugate(par), joints[:, i + 1] - h)
        # A half turn (antiparallel) is taken about the bone's X axis, the canonical curl's.
        q[:, i] = (quat.between(chain.segments[i], d, fallback_axis=np.array([1.0, 0.0, 0.0]))
                   if chain.segment_lengths[i] > 0 else quat.identity(()))
        g = quat.multiply(par, q[:, i])
        if base is not None:
            q[:, i] = quat.multiply(base[:, i], q[:, i])
    return q


def forward_kinematics_full(chain: Chain, rotations: np.ndarray, root: RootLike = None
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Forward kinematics returning positions and global bone rotations.

    Parameters
    ----------
    chain : Chain
    rotations : array_like, shape (n, 4)
        Pose rotations (Blender's pose-bone quaternions).
    root : RootTransform or ndarray (4, 4), optional
        The root frame; identity by default.

    Returns
    -------
    positions : ndarray, shape (n+1, 3)
        Bone heads, then the tip's tail, metres.
    rotations : ndarray, shape (n, 4)
        Global rotation of each bone's frame.
    """
    q = chain.check_rotations(rotations)
    if q.ndim != 2:
        raise ChainError(f"rotations must have shape ({chain.n}, 4), got {q.shape}")
    rr, rp = _root_arrays(root, (1,))
    pos, glob = _fk(chain, q[None], rr, rp)
    return pos[0], glob[0]


def forward_kinematics(chain: Chain, rotations: np.ndarray, root: RootLike = None) -> np.ndarray:
    """Positions of the bone heads and the tip for one pose.

    Parameters
    ----------
    chain : Chain
    rotations : array_like, shape (n, 4)
    root : RootTransform or ndarray (4, 4), optional

    Returns
    -------
    ndarray, shape (n+1, 3)
        Metres.
    """
    return forward_kinematics_full(chain, rotations, root)[0]


def forward_kinematics_batch(chain: Chain, rotations: np.ndarray, roots: RootLike = None) -> np.ndarray:
    """Forward kinematics for many frames at once (vectorised over frames).

    Parameters
    ----------
    chain : Chain
    rotations : array_like, shape (F, n, 4)
    roots : RootTransform with shapes (F, 4)/(F, 3) or (4,)/(3,), or ndarray (F, 4, 4) or (4, 4), optional

    Returns
    -------
    ndarray, shape (F, n+1, 3)
        Metres.
    """
    q = chain.check_rotations(rotations)
    if q.ndim != 3:
        raise ChainError(f"rotations must have shape (F, {chain.n}, 4), got {q.shape}")
    rr, rp = _root_arrays(roots, (q.shape[0],))
    return _fk(chain, q, rr, rp)[0]
