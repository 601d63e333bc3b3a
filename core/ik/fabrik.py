"""FABRIK: Forward And Backward Reaching Inverse Kinematics (Aristidou & Lasenby 2011).

Each iteration moves the joint *positions*: a backward pass from the tip (placed on the
target) to the base, then a forward pass from the fixed base to the tip, each keeping every
segment's length. One kernel, vectorised over problems (a single solve is a batch of one).

Start: the canonical start bent on an arc toward the target (:func:`.arc.start_joints`, shared
with CCD), so the bend is spread over the chain and knees and elbows keep bending the rest way
(or the pole's); the start, so the pose, is a function of the target.

Rotations: :func:`.chain.pose_from_joints`, each bone's minimal swing from its rest direction
in its new parent frame, measured from the rest pose: no twist.

Budget, limits, hinges and orientation goals: the passes get half of ``max_iterations``. Then
the FABRIK pose is clamped into the limits and finished by damped least squares (:func:`.least_squares.finish`,
with the other half) from that pose: every problem where a limit is active or an orientation goal
is set (FABRIK's passes know nothing of them: a documented fallback rather than the hinge
projection of Aristidou & Lasenby 2011), otherwise only the problems still short of the target
(FABRIK closes in slowly on targets near full reach). Chains with a non-zero IK stiffness or with a
pole are solved by damped least squares from the canonical start (joint positions carry no notion
of stiffness, nor of the twist through which Blender's iterations leave a pole's plane:
:mod:`.base` step 4).
"""

from __future__ import annotations

import numpy as np

from .arc import start_joints
from .base import Solver, SolveSettings
from .chain import Chain, pose_from_joints
from .least_squares import finish, solve_chain
from .limits import limit_angles

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
    idx = np.arange(b)  # every problem makes one pass: the start need not have the right lengths
    for _ in range(max_iter):
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
        e = pa[n] - ta
        idx = idx[np.einsum("ij,ij->j", e, e) > tol * tol]
    p[:] = pt.transpose(2, 0, 1)
    return iters


def kernel(chain: Chain, angles: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
           rotation_weight: float, root_rot: np.ndarray, root_pos: np.ndarray, settings: SolveSettings,
           twist: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """FABRIK for a batch: coordinates (B, n, 3) from the canonical start -> coordinates, iterations
    (``twist``: the damped-least-squares parts may twist every bone, :mod:`.base` step 4)."""
    if twist or (chain.limits is not None and np.any(chain.limits.stiffness > 0)):
        # Positions carry no notion of a joint's stiffness, nor of the twist through which
        # Blender's Jacobian iterations leave a pole's plane (:mod:`.base` step 4): such chains
        # are solved by DLS.
        return solve_chain(chain, angles, targets, orientations, rotation_weight, root_rot, root_pos, settings,
                           twist)
    p = start_joints(chain, angles, targets, root_rot, root_pos)
    first = (settings.max_iterations + 1) // 2
    iters = passes(p, targets, chain.segment_lengths, settings.tolerance, first)
    a = limit_angles(pose_from_joints(chain, p, root_rot, root_pos))
    if chain.limits is not None and chain.limits.active:
        lo, hi = chain.limits.bounds()
        a = np.clip(a, lo, hi)
    a, iters = finish(chain, a, iters, targets, orientations, rotation_weight, root_rot, root_pos, settings,
                      settings.max_iterations - first, twist)
    return a, iters


class FABRIK(Solver):
    """FABRIK (Aristidou & Lasenby 2011) from the rest pose, rotations with minimal swing."""

    name = "FABRIK"
    label = "FABRIK"
    description = ("Forward and backward reaching IK from the rest pose: fast, keeps the rest bend; "
                   "limits and orientation finished by damped least squares, chains with a pole solved by it")
    kernel = staticmethod(kernel)
    block = 512


#: Solve one pose with FABRIK; see :meth:`.base.Solver.solve`.
solve = FABRIK.solve
