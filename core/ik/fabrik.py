"""FABRIK: Forward And Backward Reaching Inverse Kinematics (Aristidou & Lasenby 2011).

Each iteration moves the joint *positions*: a backward pass from the tip (placed on the
target) to the base, then a forward pass from the fixed base to the tip, each keeping every
segment's length. One kernel, vectorised over problems (a single solve is a batch of one).

Start: the canonical start (:mod:`.base`: the rest pose, pole-turned) turned rigidly about the
first head so its head -> tip chord points at the target, then its joints laid on a circular arc
from the head to the target (arc length = the chain's reach, joints at their distances along
the chain). The arc's side about the chord is searched (36 sides, then 9 finer ones) for the one
whose bend plane, seen in the first bone's frame after that bone's own minimal swing onto its arc
direction, is the start's bend plane with the same sense. So the bend is spread over the chain
and knees and elbows keep bending the rest way (or the pole's) in their parent's frame. The
start, so the pose, is a function of the target; it jumps only where the turn is undefined
(the target crossing the root, or straight opposite the rest chord).

Rotations: :func:`.chain.pose_from_joints`, each bone's minimal swing from its rest direction
in its new parent frame, measured from the rest pose: no twist.

Budget, limits, hinges and orientation goals: the passes get half of ``max_iterations``. Then
the FABRIK pose is clamped into the limits and finished by damped least squares (:func:`.dls.finish`,
with the other half) from that pose: every problem where a limit is active or an orientation goal
is set (FABRIK's passes know nothing of them: a documented fallback rather than the hinge
projection of Aristidou & Lasenby 2011), otherwise only the problems still short of the target
(FABRIK closes in slowly on targets near full reach). Chains with a non-zero IK stiffness are solved
by damped least squares from the canonical start (joint positions carry no notion of
stiffness).
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .base import Solver, SolveSettings
from .chain import Chain, _fk, pose_from_joints
from .dls import finish
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


def _arc_angle(ratio: np.ndarray) -> np.ndarray:
    """Half the arc angle ``t`` in (0, pi] with ``sin(t) / t = ratio`` (chord / arc length), by Newton."""
    r = np.clip(ratio, 0.0, 1.0)
    t = np.sqrt(np.maximum(6.0 * (1.0 - r), 0.0))  # sin t / t ~ 1 - t^2/6
    t = np.minimum(t, np.pi)
    for _ in range(30):
        st, ct = np.sin(t), np.cos(t)
        f = st - r * t
        df = ct - r
        t = np.clip(t - f / np.where(np.abs(df) > 1e-12, df, -1e-12), 1e-9, np.pi)
    return np.where(r >= 1.0 - 1e-15, 0.0, t)


def _bend_side(pos: np.ndarray) -> np.ndarray:
    """Sum of the middle joints' offsets from the head -> tip chord, shape (B, 3) (the bend side)."""
    head = pos[:, 0]
    chord = pos[:, -1] - head
    u = chord / np.maximum(np.linalg.norm(chord, axis=1), 1e-300)[:, None]
    off = (pos[:, 1:-1] - head[:, None]).sum(axis=1)
    return off - np.einsum("bi,bi->b", off, u)[:, None] * u


def arc_start(pos: np.ndarray, targets: np.ndarray, cum: np.ndarray, side: np.ndarray) -> np.ndarray:
    """Joints on a circular arc from the first head to the target, bent toward ``side``.

    Parameters
    ----------
    pos : ndarray, shape (B, n+1, 3)
        Start joints (only the first head is used).
    targets : ndarray, shape (B, 3)
    side : ndarray, shape (B, 3)
        Bend direction; its part perpendicular to the head -> target chord is used (any
        perpendicular where that vanishes).
    cum : ndarray, shape (n+1,)
        Distance of each joint along the chain from the head (0 .. reach), metres.

    Returns
    -------
    ndarray, shape (B, n+1, 3)
        Joint ``i`` at arc length ``cum[i]`` on the arc of length ``cum[-1]`` whose chord is
        head -> target (straight where the target is at full reach).
    """
    head = pos[:, 0]
    chord = targets - head
    d = np.linalg.norm(chord, axis=1)
    u = chord / np.maximum(d, 1e-300)[:, None]
    side = side - np.einsum("bi,bi->b", side, u)[:, None] * u
    ns = np.linalg.norm(side, axis=1)
    fallback = quat._any_perpendicular(np.where(d[:, None] > 1e-12, u, np.array([0.0, 1.0, 0.0])))
    side = np.where((ns > 1e-12)[:, None], side / np.maximum(ns, 1e-300)[:, None], fallback)
    total = cum[-1]
    t = _arc_angle(d / total)                       # half the arc's angle
    radius = np.where(t > 1e-9, total / (2.0 * np.maximum(t, 1e-9)), np.inf)
    phi = (cum[None] / total) * (2.0 * t)[:, None] - t[:, None]   # angle of each joint from the apex
    fin = np.isfinite(radius)
    rad = np.where(fin, radius, 0.0)[:, None]
    # Circle centre below the chord's midpoint on the far side from the bend.
    along = np.where(fin[:, None], rad * np.sin(phi), (cum[None] - 0.5 * total))
    across = np.where(fin[:, None], rad * (np.cos(phi) - np.cos(t)[:, None]), 0.0)
    mid = head + 0.5 * chord
    return mid[:, None] + along[..., None] * u[:, None] + across[..., None] * side[:, None]


def _best_side(chain: Chain, p: np.ndarray, pos: np.ndarray, glob0: np.ndarray, targets: np.ndarray,
               cum: np.ndarray, psi: np.ndarray, e1: np.ndarray, e2: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Of the arc sides ``cos(psi) e1 + sin(psi) e2`` (B, K), the one whose bend plane sits in the
    first bone's frame (after its minimal swing) as the start's does; returns its psi (B,)."""
    b, k = psi.shape
    side = np.cos(psi)[..., None] * e1[:, None] + np.sin(psi)[..., None] * e2[:, None]
    rep = lambda a: np.repeat(a, k, axis=0)  # noqa: E731
    arc = arc_start(rep(p), rep(targets), cum, side.reshape(b * k, 3)).reshape(b, k, -1, 3)
    head = pos[:, 0]
    d0 = arc[:, :, 1] - head[:, None]
    swing = quat.between(np.broadcast_to((pos[:, 1] - head)[:, None], d0.shape), d0)
    normal = np.cross(d0, np.broadcast_to(u[:, None], d0.shape))
    local = quat.rotate(quat.conjugate(quat.multiply(swing, glob0[:, None])), normal)
    want = quat.rotate(quat.conjugate(glob0), np.cross(pos[:, 1] - head, pos[:, -1] - head))
    score = np.einsum("bki,bi->bk", local, want) / np.maximum(np.linalg.norm(local, axis=2), 1e-300)
    return np.take_along_axis(psi, np.argmax(score, axis=1)[:, None], axis=1)[:, 0]


def start_joints(chain: Chain, angles: np.ndarray, targets: np.ndarray, root_rot: np.ndarray,
                 root_pos: np.ndarray) -> np.ndarray:
    """The canonical start bent on an arc toward the target (module docstring), shape (B, n+1, 3)."""
    pos, glob = _fk(chain, from_angles(angles), root_rot, root_pos)
    head = pos[:, 0]
    # Opposite the start's chord, turn in the bend plane (about the first bone's X axis).
    turn = quat.between(pos[:, -1] - head, targets - head,
                        fallback_axis=quat.rotate(glob[:, 0], np.array([1.0, 0, 0])))
    p = head[:, None] + quat.rotate(turn[:, None], pos - head[:, None])
    cum = np.concatenate(([0.0], np.cumsum(chain.segment_lengths)))
    side = _bend_side(p)
    if chain.n < 2:
        return arc_start(p, targets, cum, side)
    # Search the side about the chord: coarse, then fine around the best.
    chord = targets - head
    nc = np.linalg.norm(chord, axis=1)
    u = np.where((nc > 1e-12)[:, None], chord / np.maximum(nc, 1e-300)[:, None], np.array([0.0, 1.0, 0.0]))
    e1 = side - np.einsum("bi,bi->b", side, u)[:, None] * u
    n1 = np.linalg.norm(e1, axis=1)
    e1 = np.where((n1 > 1e-12)[:, None], e1 / np.maximum(n1, 1e-300)[:, None], quat._any_perpendicular(u))
    e2 = np.cross(u, e1)
    coarse = np.linspace(-np.pi, np.pi, 36, endpoint=False)[None].repeat(head.shape[0], 0)
    best = _best_side(chain, p, pos, glob[:, 0], targets, cum, coarse, e1, e2, u)
    fine = best[:, None] + np.linspace(-np.pi / 36, np.pi / 36, 9)[None]
    best = _best_side(chain, p, pos, glob[:, 0], targets, cum, fine, e1, e2, u)
    return arc_start(p, targets, cum, np.cos(best)[:, None] * e1 + np.sin(best)[:, None] * e2)


def kernel(chain: Chain, angles: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
           rotation_weight: float, root_rot: np.ndarray, root_pos: np.ndarray, settings: SolveSettings
           ) -> tuple[np.ndarray, np.ndarray]:
    """FABRIK for a batch: coordinates (B, n, 3) from the canonical start -> coordinates, iterations."""
    if chain.limits is not None and np.any(chain.limits.stiffness > 0):
        # Positions carry no notion of a joint's stiffness: such chains are solved by DLS.
        return dls_kernel(chain, angles, targets, orientations, rotation_weight, root_rot, root_pos, settings)
    p = start_joints(chain, angles, targets, root_rot, root_pos)
    first = (settings.max_iterations + 1) // 2
    iters = passes(p, targets, chain.segment_lengths, settings.tolerance, first)
    a = limit_angles(pose_from_joints(chain, p, root_rot, root_pos))
    if chain.limits is not None and chain.limits.active:
        lo, hi = chain.limits.bounds()
        a = np.clip(a, lo, hi)
    a, iters = finish(chain, a, iters, targets, orientations, rotation_weight, root_rot, root_pos, settings,
                      settings.max_iterations - first)
    return a, iters


class FABRIK(Solver):
    """FABRIK (Aristidou & Lasenby 2011) from the rest pose, rotations with minimal swing."""

    name = "FABRIK"
    label = "FABRIK"
    description = ("Forward and backward reaching IK from the rest pose: fast, keeps the rest bend; "
                   "limits and orientation finished by damped least squares")
    kernel = staticmethod(kernel)
    block = 512


#: Solve one pose with FABRIK; see :meth:`.base.Solver.solve`.
solve = FABRIK.solve
