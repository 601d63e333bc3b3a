"""CCD: cyclic coordinate descent (Welman 1993), swing-only and damped, from the rest pose.

Each iteration visits the joints from the tip towards the base. Joint ``i`` would turn by the
minimal rotation that points its head -> tip vector at the target; here that turn is

* capped at ``_MAX_TURN`` radians per visit (damping: the joints near the tip cannot take the
  whole bend at once, so it spreads over the chain, as in damped CCD variants, e.g.
  Kenwright 2012),
* applied as a change of the bone's swing coordinates only (:mod:`.limits`: its twist stays
  what it was, 0 from the rest pose), scaled by ``1 - stiffness`` and clamped into the limits,

and carries the rest of the chain rigidly with it. One kernel, vectorised over problems.
Orientation goals, and limited chains that CCD leaves short of the target, are finished by
damped least squares (:mod:`.dls`) from the CCD pose.
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .base import Solver, SolveSettings
from .chain import Chain, _fk
from .dls import kernel as dls_kernel
from .limits import from_angles, limit_angles

__all__ = ["CCD", "solve", "kernel"]

#: Largest turn of one joint per visit, radians.
_MAX_TURN = 0.2


def kernel(chain: Chain, angles: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
           rotation_weight: float, root_rot: np.ndarray, root_pos: np.ndarray, settings: SolveSettings
           ) -> tuple[np.ndarray, np.ndarray]:
    """CCD for a batch: coordinates (B, n, 3) from the canonical start -> coordinates, iterations."""
    b, n = angles.shape[0], chain.n
    tol = settings.tolerance
    if chain.limits is not None:
        lo, hi = chain.limits.bounds()
        w = chain.limits.weights()
    else:
        lo, hi, w = np.full((n, 3), -np.inf), np.full((n, 3), np.inf), np.ones((n, 3))
    w = w.copy()
    w[:, 1] = 0.0  # swing only
    a = np.clip(angles, lo, hi)
    iters = np.zeros(b, dtype=np.int64)
    pos, glob = _fk(chain, from_angles(a), root_rot, root_pos)
    err = np.linalg.norm(pos[:, -1] - targets, axis=1)
    active = err > tol
    prev = np.full(b, np.inf)
    for _ in range(settings.max_iterations):
        idx = np.nonzero(active)[0]
        if idx.size == 0:
            break
        ak, pk, gk, tk = a[idx], pos[idx], glob[idx], targets[idx]
        for i in range(n - 1, -1, -1):
            h = pk[:, i]
            r = quat.between(pk[:, n] - h, tk - h)
            rv = quat.to_rotvec(r)
            ang = np.linalg.norm(rv, axis=1)
            rv *= np.minimum(1.0, _MAX_TURN / np.maximum(ang, 1e-300))[:, None]
            qi = from_angles(ak[:, i])
            par = quat.multiply(gk[:, i], quat.conjugate(qi))
            want = limit_angles(quat.multiply(quat.conjugate(par), quat.multiply(quat.from_rotvec(rv), gk[:, i])))
            new = np.clip(ak[:, i] + w[i] * (want - ak[:, i]), lo[i], hi[i])
            new[:, 1] = ak[:, i, 1]
            gi = quat.multiply(par, from_angles(new))
            delta = quat.multiply(gi, quat.conjugate(gk[:, i]))
            ak[:, i] = new
            gk[:, i:] = quat.multiply(delta[:, None], gk[:, i:])
            gk[:, i] = gi
            pk[:, i + 1:] = h[:, None] + quat.rotate(delta[:, None], pk[:, i + 1:] - h[:, None])
        a[idx], pos[idx], glob[idx] = ak, pk, gk
        iters[idx] += 1
        e = np.linalg.norm(pk[:, n] - tk, axis=1)
        stalled = e > prev[idx] - 1e-12 * chain.reach
        prev[idx] = e
        err[idx] = e
        active[idx] = (e > tol) & ~stalled
    limited = chain.limits is not None and chain.limits.active
    polish = np.zeros(b, dtype=bool)
    if orientations is not None:
        polish[:] = True
    elif limited:
        polish = err > tol
    if np.any(polish):
        idx = np.nonzero(polish)[0]
        ap, it = dls_kernel(chain, a[idx], targets[idx], None if orientations is None else orientations[idx],
                            rotation_weight, root_rot[idx], root_pos[idx], settings)
        a[idx] = ap
        iters[idx] += it
    return a, iters


class CCD(Solver):
    """Cyclic coordinate descent (Welman 1993), swing-only and damped."""

    name = "CCD"
    label = "CCD"
    description = ("Cyclic coordinate descent from the rest pose, swing only and damped so the bend "
                   "spreads; simple and robust")
    kernel = staticmethod(kernel)


#: Solve one pose with CCD; see :meth:`.base.Solver.solve`.
solve = CCD.solve
