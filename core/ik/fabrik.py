"""FABRIK: Forward And Backward Reaching Inverse Kinematics (Aristidou & Lasenby 2011).

Each iteration moves the joint *positions*: a backward pass from the tip (placed on the
target) to the base, then a forward pass from the fixed base to the tip, each keeping every
segment's length. Rotations are then recovered from the positions with the minimal rotation
per bone on top of the previous pose, so each bone keeps its twist (:func:`recover_rotations`).
Without joint limits the recovery is exact, so it runs once after the position iterations;
with limits it runs (and clamps) every iteration and the next iteration starts from the
clamped pose's real joints.
"""

from __future__ import annotations

import numpy as np

from ..errors import ChainError  # noqa: F401  (re-exported for callers' convenience)
from .base import Solver, SolveSettings, bone_bounds, recover_rotations
from .chain import Chain, _fk

__all__ = ["FABRIK", "solve", "kernel"]


def _passes_scalar(p: np.ndarray, target: np.ndarray, seg: np.ndarray, count: int,
                   tol: float = -1.0) -> int:
    """Up to ``count`` passes for one problem with plain floats (numpy is slow on 3-vectors).

    Stops as soon as the tip is within ``tol`` of the target; returns the passes made.
    ``p`` has shape (n+1, 3) and is updated in place.
    """
    pts = p.tolist()
    segs = seg.tolist()
    n = len(segs)
    tx, ty, tz = (float(v) for v in target)
    bx, by, bz = pts[0]
    made = 0
    for _ in range(count):
        made += 1
        nx, ny, nz = tx, ty, tz
        pts[n] = [nx, ny, nz]
        for i in range(n - 1, -1, -1):
            px, py, pz = pts[i]
            dx, dy, dz = px - nx, py - ny, pz - nz
            ln = (dx * dx + dy * dy + dz * dz) ** 0.5
            if ln > 1e-12:
                k = segs[i] / ln
                nx, ny, nz = nx + dx * k, ny + dy * k, nz + dz * k
            else:
                nx, ny, nz = px, py, pz
            pts[i] = [nx, ny, nz]
        qx, qy, qz = bx, by, bz
        pts[0] = [bx, by, bz]
        for i in range(n):
            px, py, pz = pts[i + 1]
            dx, dy, dz = px - qx, py - qy, pz - qz
            ln = (dx * dx + dy * dy + dz * dz) ** 0.5
            if ln > 1e-12:
                k = segs[i] / ln
                qx, qy, qz = qx + dx * k, qy + dy * k, qz + dz * k
            else:
                qx, qy, qz = px, py, pz
            pts[i + 1] = [qx, qy, qz]
        ex, ey, ez = qx - tx, qy - ty, qz - tz
        if (ex * ex + ey * ey + ez * ez) ** 0.5 <= tol:
            break
    p[:] = pts
    return made


def _passes(p: np.ndarray, targets: np.ndarray, seg: np.ndarray) -> None:
    """One backward + forward pass on joint positions ``p (b, n+1, 3)``, in place."""
    n = seg.shape[0]
    if p.shape[0] == 1:
        _passes_scalar(p[0], targets[0], seg, 1)
        return
    base = p[:, 0].copy()
    nxt = targets
    p[:, n] = nxt
    for i in range(n - 1, -1, -1):
        d = p[:, i] - nxt
        ln = np.sqrt(np.einsum("bi,bi->b", d, d))
        ok = ln > 1e-12
        nxt = np.where(ok[:, None], nxt + d * (seg[i] / np.where(ok, ln, 1.0))[:, None], p[:, i])
        p[:, i] = nxt
    prev = base
    p[:, 0] = base
    for i in range(n):
        d = p[:, i + 1] - prev
        ln = np.sqrt(np.einsum("bi,bi->b", d, d))
        ok = ln > 1e-12
        prev = np.where(ok[:, None], prev + d * (seg[i] / np.where(ok, ln, 1.0))[:, None], p[:, i + 1])
        p[:, i + 1] = prev


def kernel(chain: Chain, q: np.ndarray, targets: np.ndarray, root_rot: np.ndarray,
           root_pos: np.ndarray, settings: SolveSettings, max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """FABRIK iterations for a batch; returns rotations (b, n, 4) and iterations (b,)."""
    b = q.shape[0]
    tol = settings.tolerance
    seg = chain.segment_lengths
    bounds = bone_bounds(chain)
    pos, _ = _fk(chain, q, root_rot, root_pos)
    iters = np.zeros(b, dtype=np.int64)
    err = np.linalg.norm(pos[:, -1] - targets, axis=1)
    active = err > tol
    if bounds is None and b == 1:
        if not active[0] or max_iter <= 0:
            return q, iters
        p = pos[0].copy()
        iters[0] = _passes_scalar(p, targets[0], seg, max_iter, tol)
        qn, _ = recover_rotations(chain, q, p[None], root_rot, root_pos, None)
        return qn, iters
    if bounds is None:
        p = pos.copy()
        for _ in range(max_iter):
            idx = np.nonzero(active)[0]
            if idx.size == 0:
                break
            if idx.size == b:
                _passes(p, targets, seg)
                iters += 1
                err = np.linalg.norm(p[:, -1] - targets, axis=1)
            else:
                sub = p[idx]
                _passes(sub, targets[idx], seg)
                p[idx] = sub
                iters[idx] += 1
                err[idx] = np.linalg.norm(sub[:, -1] - targets[idx], axis=1)
            # Stop items that no longer improve (out of reach): they are already straight.
            active = err > tol
        moved = np.nonzero(iters > 0)[0]
        if moved.size:
            qn, _ = recover_rotations(chain, q[moved], p[moved], root_rot[moved], root_pos[moved], None)
            q = q.copy()
            q[moved] = qn
        return q, iters
    q = q.copy()
    prev_err = np.full(b, np.inf)
    for _ in range(max_iter):
        idx = np.nonzero(active)[0]
        if idx.size == 0:
            break
        p = pos[idx].copy()
        _passes(p, targets[idx], seg)
        qn, pn = recover_rotations(chain, q[idx], p, root_rot[idx], root_pos[idx], bounds)
        q[idx] = qn
        pos[idx] = pn
        iters[idx] += 1
        e = np.linalg.norm(pn[:, -1] - targets[idx], axis=1)
        stalled = e > prev_err[idx] - 1e-12 * chain.reach
        prev_err[idx] = e
        err[idx] = e
        active[idx] = (e > tol) & ~stalled
    return q, iters


class FABRIK(Solver):
    """FABRIK solver (Aristidou & Lasenby 2011), rotations recovered with twist kept."""

    name = "FABRIK"
    label = "FABRIK"
    description = "Forward and backward reaching IK: fast, smooth, keeps each bone's twist"
    kernel = staticmethod(kernel)


#: Solve one pose with FABRIK; see :meth:`.base.Solver.solve`.
solve = FABRIK.solve
