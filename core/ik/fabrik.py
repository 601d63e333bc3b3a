"""FABRIK: Forward And Backward Reaching Inverse Kinematics (Aristidou & Lasenby 2011).

Each iteration moves the joint *positions*: a backward pass from the tip (placed on the
target) to the base, then a forward pass from the fixed base to the tip, each keeping every
segment's length. One kernel, vectorised over problems (a single solve is a batch of one).

Start: the canonical start (:mod:`.base`, the rest pose, pole-turned) turned rigidly about the
first head so that its head -> tip chord points at the target. The rest bend (and a pole's)
then lies in the plane the passes work in, so knees and elbows keep bending the rest way and
the bend is spread as in the rest pose.

Rotations: :func:`.chain.pose_from_joints`, each bone's minimal swing from its rest direction
in its new parent frame, measured from the rest pose: no twist.

Limits, hinges and orientation goals: FABRIK's passes know nothing of them, so the FABRIK pose
is clamped into the limits and, where a limit is active or an orientation goal is set, finished
by damped least squares (:mod:`.dls`) from that pose (a documented fallback rather than the
hinge projection of Aristidou & Lasenby 2011).
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .base import Solver, SolveSettings
from .chain import Chain, _fk, pose_from_joints
from .dls import kernel as dls_kernel
from .limits import from_angles, limit_angles

__all__ = ["FABRIK", "solve", "kernel", "passes"]


def passes(p: np.ndarray, targets: np.ndarray, seg: np.ndarray, tol: float, max_iter: int) -> np.ndarray:
    """FABRIK passes over many problems at once until each tip is within ``tol``.

    Parameters
    ----------
    p : ndarray, shape (B, n+1, 3)
        Joint positions (heads, then the tip), updated in place; ``p[:, 0]`` stays fixed.
    targets : ndarray, shape (B, 3)
    seg : ndarray, shape (n,)
        Segment lengths, metres.
    tol : float
        Metres.
    max_iter : int

    Returns
    -------
    ndarray of int, shape (B,)
        Passes made per problem.
    """
    b, n = p.shape[0], seg.shape[0]
    iters = np.zeros(b, dtype=np.int64)
    pt = np.ascontiguousarray(p.transpose(1, 2, 0))          # (n+1, 3, B): each joint contiguous
    tt = np.ascontiguousarray(targets.T)
    idx = np.arange(b)
    for _ in range(max_iter):
        e = pt[n][:, idx] - tt[:, idx]
        act = np.einsum("ij,ij->j", e, e) > tol * tol
        idx = idx[act]
        if idx.size == 0:
            break
        pa = pt[:, :, idx]
        ta = tt[:, idx]
        base = pa[0].copy()
        iters[idx] += 1
        nxt = ta
        pa[n] = nxt
        for i in range(n - 1, -1, -1):
            d = pa[i] - nxt
            ln = np.sqrt(np.einsum("ij,ij->j", d, d))
            d *= seg[i] / np.maximum(ln, 1e-300)  # coincident joints: d = 0 keeps the joint
            d += nxt
            pa[i] = d
            nxt = d
        nxt = base
        pa[0] = base
        for i in range(n):
            d = pa[i + 1] - nxt
            ln = np.sqrt(np.einsum("ij,ij->j", d, d))
            d *= seg[i] / np.maximum(ln, 1e-300)
            d += nxt
            pa[i + 1] = d
            nxt = d
        pt[:, :, idx] = pa
    p[:] = pt.transpose(2, 0, 1)
    return iters


def kernel(chain: Chain, angles: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
           rotation_weight: float, root_rot: np.ndarray, root_pos: np.ndarray, settings: SolveSettings
           ) -> tuple[np.ndarray, np.ndarray]:
    """FABRIK for a batch: coordinates (B, n, 3) from the canonical start -> coordinates, iterations."""
    pos, _ = _fk(chain, from_angles(angles), root_rot, root_pos)
    head = pos[:, 0]
    turn = quat.between(pos[:, -1] - head, targets - head)
    p = head[:, None] + quat.rotate(turn[:, None], pos - head[:, None])
    iters = passes(p, targets, chain.segment_lengths, settings.tolerance, settings.max_iterations)
    a = limit_angles(pose_from_joints(chain, p, root_rot, root_pos))
    limited = chain.limits is not None and chain.limits.active
    if limited:
        lo, hi = chain.limits.bounds()
        a = np.clip(a, lo, hi)
    if limited or orientations is not None:
        a, it = dls_kernel(chain, a, targets, orientations, rotation_weight, root_rot, root_pos, settings)
        iters = iters + it
    return a, iters


class FABRIK(Solver):
    """FABRIK (Aristidou & Lasenby 2011) from the rest pose, rotations with minimal swing."""

    name = "FABRIK"
    label = "FABRIK"
    description = ("Forward and backward reaching IK from the rest pose: fast, keeps the rest bend; "
                   "limits and orientation finished by damped least squares")
    kernel = staticmethod(kernel)


#: Solve one pose with FABRIK; see :meth:`.base.Solver.solve`.
solve = FABRIK.solve
