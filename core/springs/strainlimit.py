"""Strain limiting: no structural spring ends a step longer than ``(1 + s) L``.

Provot 1995 "Deformation Constraints in a Mass-Spring Model to Describe Rigid
Cloth Behavior" shortens over-stretched springs after each step; written as
position-based constraints (Müller et al. 2007 "Position Based Dynamics") the
inequality ``C(x) = ‖xᵢ − xⱼ‖ − (1 + s) L ≤ 0`` is projected with inverse-mass
weights ``wᵢ = 1/mᵢ`` (0 for hard pins and for vertices that must not move):

``Δxᵢ = −wᵢ/(wᵢ + wⱼ) C û``, ``Δxⱼ = +wⱼ/(wᵢ + wⱼ) C û``.

All violated springs are projected at once (Jacobi); each vertex takes the
mean of its corrections (the averaging of Macklin et al. 2014 "Unified
Particle Physics for Real-Time Applications", §4.2) times an over-relaxation
``ω``, and the sweep repeats until no spring exceeds its bound by more than
``tolerance`` (relative) or ``max_iterations`` sweeps have run. Only
stretching is limited (the lower bound ``L`` of Provot's range is left to the
springs: cloth buckles rather than compresses). Velocities change by
``Δx/h`` so that ``v = (x₁ − x₀)/h`` stays consistent with the positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Model

__all__ = ["StrainLimitInfo", "limit_strain"]

#: Relative over-length tolerated at the end of the projection.
TOLERANCE = 1e-4
#: Sweep cap; the info says whether the bound was reached.
MAX_ITERATIONS = 500
#: Over-relaxation of the averaged Jacobi sweep.
OMEGA = 1.5


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
    inc = model.incidence[:e]
    n = model.vertex_count
    x_start = x.copy()
    it = 0
    excess = 0.0
    converged = False
    while True:
        d = inc @ x
        length = np.sqrt(np.einsum("ij,ij->i", d, d))
        over = length - bound
        viol = np.flatnonzero(over > TOLERANCE * bound)
        if len(viol) == 0:
            converged = True
            excess = max(float(np.max(over / np.maximum(rest, 1e-300), initial=0.0)), 0.0)
            break
        if it >= MAX_ITERATIONS:
            excess = float(np.max(over[viol] / rest[viol]))
            break
        i, j = springs[viol, 0], springs[viol, 1]
        wi, wj = inv_m[i], inv_m[j]
        wsum = wi + wj
        movable = wsum > 0
        if not np.any(movable):
            excess = float(np.max(over[viol] / rest[viol]))
            break
        viol, i, j, wi, wj, wsum = (a[movable] for a in (viol, i, j, wi, wj, wsum))
        # C û / (wᵢ + wⱼ) with û = d/ℓ (ℓ > bound > 0 here)
        corr = d[viol] * (over[viol] / (length[viol] * wsum))[:, None]
        idx = np.concatenate([i, j])
        delta = np.concatenate([-wi[:, None] * corr, wj[:, None] * corr])
        count = np.bincount(idx, minlength=n).astype(np.float64)
        dx = np.empty((n, 3))
        for k in range(3):
            dx[:, k] = np.bincount(idx, weights=delta[:, k], minlength=n)
        touched = count > 0
        x[touched] += (OMEGA / count[touched])[:, None] * dx[touched]
        it += 1
    if it:
        v += (x - x_start) / h
    return StrainLimitInfo(it, converged, excess)
