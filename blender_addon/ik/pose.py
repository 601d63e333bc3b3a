"""Blender's pose composition for baked bones, vectorised over frames (no bpy here).

A pose bone's armature-space matrix is ``M = M_parent . inv(R_parent) . R . B``, with ``R`` the
bone's rest matrix in armature space (``bone.matrix_local``) and ``B`` its basis
(location/rotation/scale channels), for bones that inherit rotation and scale fully (Blender's
defaults). A Sinew bake keys rotations only, so ``B`` is the rotation of the keyed quaternion.

Used for two things that must match what Blender evaluates, not what a solver believes:

* the frames of chain roots behind chains baked earlier in the same bake (an arm's root
  follows the spine that was just solved), and
* the reported tip error: the distance between the tip of the *written* pose and the target.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .rotations import quat_to_matrix

__all__ = ["compose", "relative_rest", "tip_positions", "rotation_error"]


def relative_rest(rest: np.ndarray, parent_rest: np.ndarray | None) -> np.ndarray:
    """A bone's rest matrix relative to its parent's, ``inv(R_parent) . R``, shape (4, 4)."""
    return rest.copy() if parent_rest is None else np.linalg.solve(parent_rest, rest)


def compose(order: list[str], rel_rest: Mapping[str, np.ndarray], parents: Mapping[str, str | None],
            rotations: Mapping[str, np.ndarray], outside: Mapping[str, np.ndarray],
            frames: int) -> dict[str, np.ndarray]:
    """Armature-space matrices of keyed bones over frames.

    Parameters
    ----------
    order : list of str
        Bone names, every parent before its children.
    rel_rest : mapping of str to ndarray (4, 4)
        :func:`relative_rest` per bone.
    parents : mapping of str to str or None
        Parent bone name per bone.
    rotations : mapping of str to ndarray (F, 4)
        Keyed pose quaternions ``(w, x, y, z)`` per bone.
    outside : mapping of str to ndarray (F, 4, 4)
        Armature-space matrices of parents that are not in ``order`` (evaluated elsewhere).
    frames : int
        F.

    Returns
    -------
    dict of str to ndarray (F, 4, 4)
    """
    out: dict[str, np.ndarray] = {}
    for name in order:
        parent = parents.get(name)
        if parent is None:
            base = np.broadcast_to(np.eye(4), (frames, 4, 4))
        elif parent in out:
            base = out[parent]
        else:
            base = outside[parent]
        basis = np.zeros((frames, 4, 4))
        basis[:, :3, :3] = quat_to_matrix(rotations[name])
        basis[:, 3, 3] = 1.0
        out[name] = base @ rel_rest[name] @ basis
    return out


def tip_positions(matrix: np.ndarray, length: float) -> np.ndarray:
    """Tails ``(F, 3)`` of a bone of ``length`` metres whose pose matrices are ``matrix`` (F, 4, 4)."""
    return matrix[:, :3, 3] + length * matrix[:, :3, 1]


def rotation_error(matrix: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Angle ``(F,)`` in radians between the rotation of ``matrix`` (F, 4, 4) and goal quaternions (F, 4)."""
    r = matrix[:, :3, :3] / np.linalg.norm(matrix[:, :3, :3], axis=1, keepdims=True)
    rel = np.einsum("fji,fjk->fik", r, quat_to_matrix(goal))
    cos = 0.5 * (np.trace(rel, axis1=1, axis2=2) - 1.0)
    return np.arccos(np.clip(cos, -1.0, 1.0))
