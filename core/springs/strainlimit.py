"""Strain limiting: no structural spring ends a step longer than ``(1 + s) L``.

Provot 1995 "Deformation Constraints in a Mass-Spring Model to Describe Rigid
Cloth Behavior" shortens over-stretched springs after each step. Here the
over-stretched springs become equality constraints
``Cₛ(x) = ‖xᵢ − xⱼ‖ − (1 + s) Lₛ = 0`` and the positions are projected onto them
by *fast projection* (Goldenthal et al. 2007 "Efficient Simulation of
Inextensible Cloth"): the mass-weighted closest point satisfying the active
constraints, found by Newton steps on the constraints,

``(J W Jᵀ + εI) δλ = C(x)``, ``x ← x − W Jᵀ δλ``,

with ``J = ∂C/∂x`` (``+ûₛ`` at ``i``, ``−ûₛ`` at ``j``), ``W = M⁻¹`` (0 for hard
pins), and a tiny ``ε`` for redundant constraints; a step that makes the worst
violation grow is halved (up to 6 times). The ``|A| × |A|``
system (over the vertices of the active springs only) is formed and solved densely when
small (the usual case: the springs at a pinned corner) and by the shared
:func:`~.linsolve.factor_spd` otherwise. The active set holds the violated springs and,
as candidates, those stretched past ``1 + s/2``: without them the projection pulls the
next ring of springs over its bound and the set grows one ring per Newton step (7–8
steps per projection at the corners of a hanging sheet instead of 1–3). After each
Newton step the active set grows by springs that have become too long and
drops those the step left shorter than their bound (the inequality's other
side: cloth may always shorten). It stops when no spring exceeds its bound by
more than ``TOLERANCE`` (relative) or after ``MAX_ITERATIONS`` steps (then the
step reports that the limit was not reached). Only stretching is limited (the
lower end ``L`` of Provot's range is left to the springs: cloth buckles rather
than compresses). Velocities change by ``Δx/h`` so that ``v = (x₁ − x₀)/h``
stays consistent with the positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .linsolve import factor_spd
from .model import Model

__all__ = ["StrainLimitInfo", "limit_strain"]

#: Relative over-length tolerated at the end of the projection.
TOLERANCE = 5e-4
#: Newton steps on the constraints; the info says whether the bound was reached.
MAX_ITERATIONS = 30
#: The last active set per model (``Model.uid`` → bool ``(e,)``): the next step starts from
#: it, so a load that persists (a pinned corner) is projected in one or two Newton steps
#: instead of growing the set ring by ring. A bounded cache, like the integrators'
#: factorisations; it changes how fast the projection converges, not where it ends.
_ACTIVE: dict[int, np.ndarray] = {}
#: Active sets up to this size are solved densely (LAPACK) rather than by SuperLU.
_DENSE = 400
#: Springs stretched beyond ``1 + (1 − _BAND) s`` join the projection as candidates.
_BAND = 0.5
#: Regularisation of ``J W Jᵀ`` (relative to its largest diagonal entry), for
#: redundant constraints.
_EPS = 1e-9


@dataclass
class StrainLimitInfo:
    """What one projection did: ``iterations`` sweeps, ``converged`` (every
    structural spring within ``(1 + s)(1 + TOLERANCE) L``), ``excess`` the
    largest remaining relative over-length (0 when none)."""

    iterations: int
    converged: bool
    excess: float


def limit_strain(model: Model, x: np.ndarray, v: np.ndarray, h: float,
                 fixed: np.ndarray | None = None) -> StrainLimitInfo:
    """Project the structural springs of ``x`` onto ``ℓ ≤ (1 + max_stretch) L`` in place.

    Parameters
    ----------
    model : Model
        ``model.max_stretch`` > 0 (otherwise nothing happens).
    x : numpy.ndarray
        Shape ``(n, 3)``, m, positions at the end of the step; updated.
    v : numpy.ndarray
        Shape ``(n, 3)``, m/s; updated by ``Δx/h``.
    h : float
        Step length, s.
    fixed : numpy.ndarray, optional
        Shape ``(n,)`` bool: vertices that must not move (hard pins are always
        fixed).

    Returns
    -------
    StrainLimitInfo
    """
    s = model.max_stretch
    e = model.structural_count
    if s <= 0 or e == 0:
        return StrainLimitInfo(0, True, 0.0)
    springs = model.springs[:e]
    rest = model.rest_lengths[:e]
    inv_m = 1.0 / model.masses
    inv_m = np.where(model.pinned, 0.0, inv_m)
    if fixed is not None:
        inv_m = np.where(fixed, 0.0, inv_m)
    bound = (1.0 + s) * rest
    n = model.vertex_count
    x_start = x.copy()
    active = _ACTIVE.get(model.uid)
    if active is None or len(active) != e:
        active = np.zeros(e, dtype=bool)
    it = 0
    excess = 0.0
    converged = False
    while True:
        d = x[springs[:, 0]] - x[springs[:, 1]]
        length = np.sqrt(np.einsum("ij,ij->i", d, d))
        over = length - bound
        viol = over > TOLERANCE * bound
        if not np.any(viol):
            converged = True
            excess = max(float(np.max(over / np.maximum(rest, 1e-300), initial=0.0)), 0.0)
            break
        if it >= MAX_ITERATIONS:
            excess = float(np.max(over[viol] / rest[viol]))
            break
        # active: too long now, or near the bound (within half the allowed stretch): a
        # spring next to a violated one is pulled over its bound by the projection
        # unless it is a constraint too, so the set would grow one ring per Newton step.
        # Candidates the solve would have to push apart are released below.
        active = viol | (active & (over > -0.25 * s * rest)) | (over > -_BAND * s * rest)
        for _ in range(4):
            act = np.flatnonzero(active)
            lam, verts, dxv = _project(springs[act], d[act] / length[act, None], inv_m,
                                       over[act])
            # a spring within its bound that the solve would have to push apart is not
            # held by the inequality: release it and solve again (active-set step)
            release = (lam < 0) & (over[act] <= 0)
            if not np.any(release):
                break
            active[act[release]] = False
        dx = np.zeros((n, 3))
        dx[verts] = dxv
        # damped step: halve while the worst active violation grows (far from the
        # constraint manifold the linearisation overshoots)
        worst = float(np.max(over / bound))
        t = 1.0
        for _ in range(6):
            xt = x - t * dx
            dt = xt[springs[:, 0]] - xt[springs[:, 1]]
            lt = np.sqrt(np.einsum("ij,ij->i", dt, dt))
            if float(np.max((lt - bound) / bound)) < worst:
                break
            t *= 0.5
        x[...] = xt
        it += 1
    if len(_ACTIVE) > 8:
        _ACTIVE.clear()
    _ACTIVE[model.uid] = active
    if it:
        v += (x - x_start) / h
    return StrainLimitInfo(it, converged, excess)


def _project(pairs: np.ndarray, u: np.ndarray, inv_m: np.ndarray,
             c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One fast-projection Newton step on the constraints ``pairs`` ``(a, 2)``.

    Solves ``(J W Jᵀ + εI) λ = c`` for the springs' directions ``u`` ``(a, 3)``,
    inverse masses ``inv_m`` ``(n,)`` and violations ``c`` ``(a,)`` (m); returns
    ``λ`` ``(a,)``, the vertices ``verts`` ``(k,)`` the step moves and their
    displacement ``W Jᵀ λ`` ``(k, 3)`` (to be subtracted). Only those vertices enter
    the system: ``(J W Jᵀ)_{ab} = (Σ_v S_av S_bv w_v) (u_a·u_b)`` with the signed
    incidence ``S`` (+1 at ``i``, −1 at ``j``), formed densely for small sets (the
    usual case: the springs at a pinned corner) and as a sparse product otherwise.
    """
    a = len(pairs)
    verts, local = np.unique(pairs.T.reshape(-1), return_inverse=True)
    li, lj = local[:a], local[a:]
    k = len(verts)
    w = inv_m[verts]
    rows = np.arange(a)
    if a <= _DENSE:
        signs = np.zeros((a, k))
        signs[rows, li] = 1.0
        signs[rows, lj] = -1.0
        system = ((signs * w) @ signs.T) * (u @ u.T)
        system[np.diag_indices(a)] += _EPS * max(float(system.diagonal().max()), 1e-300)
        lam = np.linalg.solve(system, c)
        dxv = w[:, None] * (signs.T @ (lam[:, None] * u))
        return lam, verts, dxv
    cols = np.concatenate([3 * li[:, None] + np.arange(3), 3 * lj[:, None] + np.arange(3)],
                          axis=1).reshape(-1)
    swl = np.sqrt(np.repeat(w, 3))
    vals = np.concatenate([u, -u], axis=1).reshape(-1) * swl[cols]
    # J W^½ over the local coordinates: rows = active springs
    jw = sp.csr_matrix((vals, (np.repeat(rows, 6), cols)), shape=(a, 3 * k))
    system = (jw @ jw.T).tocsc()
    reg = _EPS * max(float(system.diagonal().max()), 1e-300)
    lam = factor_spd((system + sp.identity(a, format="csc") * reg).tocsc())(c)
    return lam, verts, (swl * (jw.T @ lam)).reshape(k, 3)
