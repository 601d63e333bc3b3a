"""CCD: cyclic coordinate descent (Welman 1993), swing-only and damped, from the rest pose.

Each iteration visits the joints from the tip towards the base. Joint ``i`` would turn by the
minimal rotation that points its head -> tip vector at the target; here that turn is

* capped at ``_MAX_TURN`` radians per visit (damping: the joints near the tip cannot take the
  whole bend at once, so it spreads over the chain, as in damped CCD variants, e.g.
  Kenwright 2012),
* applied as a change of the bone's swing coordinates only (:mod:`.limits`: its twist stays
  what it was, 0 from the rest pose), scaled by ``1 - stiffness`` and clamped into the limits,

and carries the rest of the chain rigidly with it. The start is the one FABRIK uses (:mod:`.arc`:
the canonical start turned toward the target and bent on an arc), so the bend starts spread and on
the rest side; on chains with an IK stiffness, the canonical start itself, so the weights decide
which joints bend. One kernel, vectorised over problems.
The sweeps get half of ``max_iterations``; orientation goals, limited chains and problems still
short of the target are finished by damped least squares from the CCD pose with the other half
(:func:`.least_squares.finish`). Chains with a pole are solved by damped least squares from the
canonical start (the twist through which Blender's iterations leave a pole's plane, :mod:`.base`
step 4, is what swing-only sweeps cannot give).
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .arc import start_joints
from .base import Solver, SolveSettings
from .chain import Chain, _fk, pose_from_joints
from .least_squares import finish, solve_chain
from .limits import from_angles, limit_angles

__all__ = ["CCD", "solve", "kernel"]

#: Largest turn of one joint per visit, radians.
_MAX_TURN = 0.2


def kernel(chain: Chain, angles: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
           rotation_weight: float, root_rot: np.ndarray, root_pos: np.ndarray, settings: SolveSettings,
           twist: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """CCD for a batch: coordinates (B, n, 3) from the canonical start -> coordinates, iterations
    (``twist``: the damped-least-squares finish may twist every bone, :mod:`.base` step 4)."""
    if twist:
        # With a pole the bend plane is where Blender's Jacobian iterations leave it, through
        # the bones' twist (:mod:`.base` step 4), which swing-only sweeps cannot give: DLS.
        return solve_chain(chain, angles, targets, orientations, rotation_weight, root_rot, root_pos, settings,
                           twist)
    b, n = angles.shape[0], chain.n
    tol = settings.tolerance
    if chain.limits is not None:
        lo, hi = chain.limits.bounds()
        w = chain.limits.weights()
    else:
        lo, hi, w = np.full((n, 3), -np.inf), np.full((n, 3), np.inf), np.ones((n, 3))
    w = w.copy()
    w[:, 1] = 0.0  # swing only
    # Start: FABRIK's (the canonical start turned toward the target, bent on an arc), so the
    # bend is spread and on the rest side before the first visit.
    # With a stiffness the start stays the rest pose, so the weights decide who bends.
    if chain.limits is None or not np.any(chain.limits.stiffness > 0):
        a = limit_angles(pose_from_joints(chain, start_joints(chain, angles, targets, root_rot, root_pos),
                                          root_rot, root_pos))
        a[..., 1] = angles[..., 1]
    else:
        a = angles.copy()
    a = np.clip(a, lo, hi)
    iters = np.zeros(b, dtype=np.int64)
    pos, glob = _fk(chain, from_angles(a), root_rot, root_pos)
    err = np.linalg.norm(pos[:, -1] - targets, axis=1)
    active = err > tol
    first = (settings.max_iterations + 1) // 2
    for _ in range(first):
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
            # unit to round-off, renormalised: ``delta`` turns every bone below ``i`` (and
            # ``rotate`` scales by ``|delta|²``), so a norm off by ε would compound over the
            # sweeps into a chain that grows without bound (NaN poses on long chains)
            gi = quat.normalize(quat.multiply(par, from_angles(new)))
            delta = quat.normalize(quat.multiply(gi, quat.conjugate(gk[:, i])))
            ak[:, i] = new
            gk[:, i:] = quat.multiply(delta[:, None], gk[:, i:])
            gk[:, i] = gi
            pk[:, i + 1:] = h[:, None] + quat.rotate(delta[:, None], pk[:, i + 1:] - h[:, None])
        a[idx], pos[idx], glob[idx] = ak, pk, gk
        iters[idx] += 1
        e = np.linalg.norm(pk[:, n] - tk, axis=1)
        # Only convergence ends the sweeps early: a stall test would make the pose depend on
        # where round-off tips it (the pose must be a function of the target).
        err[idx] = e
        active[idx] = e > tol
    a, iters = finish(chain, a, iters, targets, orientations, rotation_weight, root_rot, root_pos, settings,
                      settings.max_iterations - first, twist)
    return a, iters


class CCD(Solver):
    """Cyclic coordinate descent (Welman 1993), swing-only and damped."""

    name = "CCD"
    label = "CCD"
    description = ("Cyclic coordinate descent from the rest pose, swing only and damped so the bend "
                   "spreads; simple and robust (chains with a pole solved by damped least squares)")
    kernel = staticmethod(kernel)
    block = 256


#: Solve one pose with CCD; see :meth:`.base.Solver.solve`.
solve = CCD.solve
