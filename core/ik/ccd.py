"""CCD: cyclic coordinate descent (Welman 1993).

Each iteration visits the joints from the tip towards the base; joint ``i`` turns by the
minimal rotation that points its head -> tip vector at the target, is clamped into its limits,
and carries the rest of the chain rigidly with it.
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .base import Solver, SolveSettings, bone_bounds, clamp_bone
from .chain import Chain, _fk
from .limits import clamp_bounds

__all__ = ["CCD", "solve", "kernel"]


def kernel(chain: Chain, q: np.ndarray, targets: np.ndarray, root_rot: np.ndarray,
           root_pos: np.ndarray, settings: SolveSettings, max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """CCD iterations for a batch; returns rotations (b, n, 4) and iterations (b,)."""
    b, n = q.shape[0], chain.n
    tol = settings.tolerance
    bounds = bone_bounds(chain)
    if b == 1:
        from ._scalar import ccd_one
        q1, it = ccd_one(chain, q[0], targets[0], root_rot[0], root_pos[0], tol, max_iter, bounds)
        return q1[None], np.array([it], dtype=np.int64)
    q = q.copy()
    pos, glob = _fk(chain, q, root_rot, root_pos)
    iters = np.zeros(b, dtype=np.int64)
    err = np.linalg.norm(pos[:, -1] - targets, axis=1)
    prev = np.full(b, np.inf)
    kicks = np.full(b, 8)
    best_err = err.copy()
    best_q = q.copy()
    active = err > tol
    for _ in range(max_iter):
        idx = np.nonzero(active)[0]
        if idx.size == 0:
            break
        qs, ps, gs, ts = q[idx], pos[idx], glob[idx], targets[idx]
        for i in range(n - 1, -1, -1):
            h = ps[:, i]
            r = quat.between(ps[:, n] - h, ts - h)
            par = quat.multiply(gs[:, i], quat.conjugate(qs[:, i]))
            qi = quat.normalize(quat.multiply(quat.conjugate(par), quat.multiply(r, gs[:, i])))
            qi = clamp_bone(qi, bounds, i)
            gi = quat.multiply(par, qi)
            delta = quat.normalize(quat.multiply(gi, quat.conjugate(gs[:, i])))
            qs[:, i] = qi
            gs[:, i:] = quat.multiply(delta[:, None], gs[:, i:])
            gs[:, i] = gi
            ps[:, i + 1:] = h[:, None] + quat.rotate(delta[:, None], ps[:, i + 1:] - h[:, None])
        q[idx], pos[idx], glob[idx] = qs, ps, gs
        iters[idx] += 1
        e = np.linalg.norm(ps[:, n] - ts, axis=1)
        stalled = (e > prev[idx] - 1e-14 * chain.reach) & (e > tol)
        prev[idx] = e
        better = e < best_err[idx]
        if np.any(better):
            bi = idx[better]
            best_err[bi] = e[better]
            best_q[bi] = qs[better]
        kick = stalled & (kicks[idx] > 0) & (e > 1e-4 * chain.reach)
        if np.any(kick):
            # CCD can stop in a folded, collinear pose where every joint already points the
            # tip at the target. Unfold it with a small deterministic zig-zag and go on.
            k = idx[kick]
            kicks[k] -= 1
            sign = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
            rv = np.zeros((k.size, n, 3))
            rv[:, :, 0] = 0.3 * sign
            rv[:, :, 2] = 0.2
            qk = quat.normalize(quat.multiply(q[k], quat.from_rotvec(rv)))
            if bounds is not None:
                qk = clamp_bounds(qk, bounds[0], bounds[1])
            q[k] = qk
            pos[k], glob[k] = _fk(chain, qk, root_rot[k], root_pos[k])
            prev[k] = np.inf
            stalled = stalled & ~kick
        active[idx] = (e > tol) & ~stalled
    return best_q, iters


class CCD(Solver):
    """Cyclic coordinate descent (Welman 1993)."""

    name = "CCD"
    label = "CCD"
    description = "Cyclic coordinate descent: simple and robust, bends the joints near the tip most"
    kernel = staticmethod(kernel)


#: Solve one pose with CCD; see :meth:`.base.Solver.solve`.
solve = CCD.solve
