"""Damped least squares on the positional Jacobian.

Nakamura & Hanafusa 1986 and Wampler 1986: the joint update is
``dtheta = J^T (J J^T + lambda^2 I)^-1 e`` with ``e`` the tip error (clamped in length, as
Buss & Kim 2005 recommend) and ``J`` the 3 x 3n Jacobian of the tip with respect to small
rotations about each bone's own X, Y, Z axes (locked axes get zero columns). The damping
``lambda`` (metres) adapts per problem, Levenberg-Marquardt style: a step that lowers the error
is kept and ``lambda`` shrinks; otherwise the step is rejected and ``lambda`` grows. Steps are
also capped so no joint turns more than pi/8 per iteration. This keeps the solver stable near
singularities (a straight chain) and for unreachable targets. Limits are applied by clamping
every trial pose.
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .base import Solver, SolveSettings, bone_bounds, clamp_bounds_all
from .chain import Chain, _fk

__all__ = ["DLS", "solve", "kernel"]

_MAX_JOINT_STEP = np.pi / 8


def kernel(chain: Chain, q: np.ndarray, targets: np.ndarray, root_rot: np.ndarray,
           root_pos: np.ndarray, settings: SolveSettings, max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """DLS iterations for a batch; returns rotations (b, n, 4) and iterations (b,)."""
    b, n = q.shape[0], chain.n
    tol = settings.tolerance
    bounds = bone_bounds(chain)
    reach = chain.reach
    free = np.ones((n, 3))
    if chain.limits is not None:
        free = (~chain.limits.lock).astype(np.float64)
    q = q.copy()
    pos, glob = _fk(chain, q, root_rot, root_pos)
    err = np.linalg.norm(pos[:, -1] - targets, axis=1)
    lam = np.full(b, 0.01 * reach)
    lam_min, lam_max = 1e-9 * reach, 1e3 * reach
    e_max = max(reach / n, 1e-9)
    iters = np.zeros(b, dtype=np.int64)
    active = err > tol
    eye = np.eye(3)
    for _ in range(max_iter):
        idx = np.nonzero(active)[0]
        if idx.size == 0:
            break
        qs, ps, gs, ts, ls = q[idx], pos[idx], glob[idx], targets[idx], lam[idx]
        axes = quat.to_matrix(gs)                       # (m, n, 3, 3), columns = bone axes
        r = ps[:, -1][:, None] - ps[:, :n]              # (m, n, 3) head -> tip
        cols = np.cross(np.swapaxes(axes, -1, -2), r[:, :, None, :])  # (m, n, 3 axes, 3 xyz)
        cols = cols * free[None, :, :, None]
        jac = cols.reshape(idx.size, 3 * n, 3).transpose(0, 2, 1)     # (m, 3, 3n)
        e = ts - ps[:, -1]
        en = np.linalg.norm(e, axis=1)
        e = e * np.minimum(1.0, e_max / np.maximum(en, 1e-300))[:, None]
        a = jac @ jac.transpose(0, 2, 1) + (ls ** 2)[:, None, None] * eye
        y = np.linalg.solve(a, e[..., None])[..., 0]
        dth = np.einsum("mij,mi->mj", jac, y).reshape(idx.size, n, 3)
        mx = np.max(np.linalg.norm(dth, axis=2), axis=1)
        dth = dth * np.minimum(1.0, _MAX_JOINT_STEP / np.maximum(mx, 1e-300))[:, None, None]
        qt = quat.normalize(quat.multiply(qs, quat.from_rotvec(dth)))
        qt = clamp_bounds_all(qt, bounds)
        pt, gt = _fk(chain, qt, root_rot[idx], root_pos[idx])
        et = np.linalg.norm(pt[:, -1] - ts, axis=1)
        ok = et < err[idx]
        q[idx] = np.where(ok[:, None, None], qt, qs)
        pos[idx] = np.where(ok[:, None, None], pt, ps)
        glob[idx] = np.where(ok[:, None, None], gt, gs)
        err[idx] = np.where(ok, et, err[idx])
        lam[idx] = np.clip(np.where(ok, ls * 0.3, ls * 4.0), lam_min, lam_max)
        iters[idx] += 1
        stalled = (~ok) & (lam[idx] >= lam_max)
        active[idx] = (err[idx] > tol) & ~stalled
    return q, iters


class DLS(Solver):
    """Damped least squares (Nakamura & Hanafusa 1986; Wampler 1986), adaptive damping."""

    name = "DLS"
    label = "Damped Least Squares"
    description = "Damped least squares on the Jacobian: spreads the bend over all joints, stable near singularities"
    kernel = staticmethod(kernel)


#: Solve one pose with DLS; see :meth:`.base.Solver.solve`.
solve = DLS.solve
