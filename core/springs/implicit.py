"""IMPLICIT: one linearised backward-Euler step (Baraff & Witkin 1998
"Large Steps in Cloth Simulation"), with the β family of seed 004.

Forces are linearised about the start of the step, ``f(x₀ + βh v₁) ≈
f(x₀) − βh H v₁`` with ``H`` the spring Hessian (each 3×3 block made positive
semi-definite: see :mod:`.forces`), and damping and air drag act on
``(1 − β) v₀ + β v₁``:

``[M + βh (D + cM) + βh² H] v₁ = M v₀ + h [f_s(x₀) − (1 − β)(D + cM) v₀ + cM·wind + M g + f_ext]``

then ``x₁ = x₀ + h v₁``. ``β = 0`` is semi-implicit (symplectic) Euler,
``β = ½`` the implicit midpoint-like rule, ``β = 1`` (default) backward Euler
as in Blender's cloth solver. Pinned velocities ``(target − x₀)/h`` are known
and moved to the right-hand side.

The ``3f × 3f`` system (``f`` free vertices) is solved to a tight relative
residual (:attr:`LinearImplicitEuler.tolerance`) by conjugate gradients
preconditioned with ``P = M(1 + βhc) + βh² L_k + βh L_d`` (``L_k``, ``L_d``
the stiffness- and damping-weighted graph Laplacians acting on each
coordinate alike), the matrix of Liu et al. 2013 "Fast Simulation of
Mass-Spring Systems" for ``β = 1``, factored once per (model, h, β). Each
spring block ``βh² (αI + β'ûûᵀ) + βh k_d ûûᵀ`` lies below ``(βh² k + βh k_d) I``,
so ``P`` bounds the system matrix from above and the preconditioned spectrum
lies in ``(0, 1]``. The product with the system matrix never assembles it:
two coefficients per spring (structure of arrays). Small systems (at most
:attr:`~LinearImplicitEuler.pcg_threshold` unknowns), or CG that has not
converged after :attr:`~LinearImplicitEuler.max_cg_iterations`, use the
assembled matrix and a sparse direct factorisation instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import forces as F
from .base import Integrator, Objective, StepInfo, anchor_forces, pin_targets, split_targets
from .linsolve import FactorCache, SpringLaplacian, factor_spd, pcg, product
from .model import Model, State

__all__ = ["LinearImplicitEuler"]


class LinearImplicitEuler(Integrator):
    """Linearised backward Euler (Baraff–Witkin), one linear solve per step.

    Parameters
    ----------
    beta : float
        0, ½ or 1 (any value in [0, 1] works): how implicit the step is.
    residual : bool
        Measure :attr:`~.base.StepInfo.residual` (``‖∇g‖`` of the backward-Euler objective
        at the result: one more spring gradient per step); ``False`` reports ``nan``, for a
        caller that reads no diagnostics (spring bones: a tenth of their step).

    Attributes
    ----------
    tolerance : float
        Relative residual ``‖b − A v‖ ≤ tolerance · ‖b‖`` at which conjugate
        gradients stop (the step is the exact linear solve to this accuracy).
    pcg_threshold : int
        Systems with at most this many unknowns (3 × free vertices) are
        solved directly.
    max_cg_iterations : int
        Beyond this, fall back to the direct solve. Smoothly animated pins
        take 30–50 iterations on the 32²–128² benchmark grids; an abrupt pin
        jerk from rest excites the soft transverse modes that the isotropic
        preconditioner overestimates and can take several hundred.
    last_cg_iterations : int
        CG iterations of the last step (0 for a direct solve).
    """

    name = "IMPLICIT"
    label = "Implicit Euler (linearised)"
    description = ("One linearised backward-Euler step per substep (Baraff-Witkin, like "
                   "Blender's cloth): stable at large steps, adds numerical damping")
    implicit = True

    tolerance = 1e-10
    pcg_threshold = 2000
    max_cg_iterations = 200

    def __init__(self, beta: float = 1.0, residual: bool = True) -> None:
        if not 0.0 <= beta <= 1.0:
            raise ValueError("beta must be in [0, 1]")
        self.beta = float(beta)
        self.residual = bool(residual)
        self._assemblers: FactorCache[F.HessianAssembler] = FactorCache(size=1)
        self._pin_springs: FactorCache[tuple] = FactorCache(size=1)
        self._pre: FactorCache[SpringLaplacian] = FactorCache()
        self.last_cg_iterations = 0

    def _preconditioner(self, model: Model, h: float) -> SpringLaplacian:
        """``P = M(1 + βhc) + βh² Kₐ + βh² L_k + βh L_d`` (the shared Liu 2013 matrix), cached."""
        b = self.beta

        def build() -> SpringLaplacian:
            diag = model.masses * (1.0 + b * h * model.vertex_drag)
            diag[model.anchor_index] += b * h * h * model.anchor_stiffness
            return SpringLaplacian(model, diag, b * h * h * model.stiffness + b * h * model.damping)

        return self._pre.get((model.uid, float(h), b), build)

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 1, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None, tolerance: float | None = None,
             self_collision: Any = None) -> StepInfo:
        targets = pin_targets(model, state, pins)
        hard = split_targets(model, targets)[0]
        rtol = self.tolerance if tolerance is None else min(self.tolerance, float(tolerance))
        b = self.beta
        x0, v0 = state.x.copy(), state.v.copy()
        m = model.masses
        c = model.vertex_drag
        free, pinned = model.free_index, model.pinned_index
        v_pin = (hard - x0[pinned]) / h
        s = model.spring_count
        self.last_cg_iterations = 0

        # spring geometry at x0, once: gradient, damping force and Hessian coefficients
        if s:
            _, length, unit = F.spring_geometry(model, x0)
            per = unit * (model.stiffness * (length - model.rest_lengths))[:, None]
            if b < 1.0 and np.any(model.damping):
                dv = model.incidence @ v0
                per += unit * ((1.0 - b) * model.damping
                               * np.einsum("ij,ij->i", dv, unit))[:, None]
            spring_force = -product(model.incidence_t, per)
        else:
            unit = None
            spring_force = np.zeros_like(x0)
        mc = m[:, None]
        cmc = (c * m)[:, None]
        force = spring_force
        if b < 1.0:
            force = force - (1.0 - b) * cmc * v0
        if np.any(model.wind):
            force = force + cmc * model.wind
        rhs = mc * v0 + h * (force + mc * model.gravity)
        if external is not None:
            rhs += h * external
        if len(model.anchor_index):
            rhs += h * anchor_forces(model, x0, targets)
        v1 = v0.copy()
        solved = True
        v1[pinned] = v_pin
        if len(free):
            diag_n = m * (1.0 + b * h * c)
            diag_n[model.anchor_index] += b * h * h * model.anchor_stiffness
            diag = diag_n[free]
            if b > 0 and s:
                # blocks a I + e ûûᵀ (projected Hessian, spring damping along û)
                ratio = np.divide(model.rest_lengths, length,
                                  out=np.where(model.rest_lengths > 0, np.inf, 0.0),
                                  where=length > F._TINY)
                alpha = model.stiffness * np.maximum(1.0 - ratio, 0.0)
                a_co = (b * h * h) * alpha
                e_co = (b * h * h) * (model.stiffness - alpha) + (b * h) * model.damping
            else:
                a_co = e_co = None
            if a_co is not None and 3 * len(free) > self.pcg_threshold:
                v_free = self._solve_pcg(model, h, rhs, v0, v_pin, diag, a_co, e_co, unit, rtol)
            else:
                v_free = None
            if v_free is None:
                v_free = self._solve_direct(model, rhs, v_pin, diag, a_co, e_co, unit)
            v1[free] = v_free
        x1 = x0 + h * v1
        # the shared measure (base.converged): ‖∇g‖ of the backward-Euler objective at the
        # result, i.e. how far the one linearised step is from the implicit Euler step
        residual = (F.norm(Objective(model, state, h, targets, external=external).gradient(x1))
                    if self.residual else float("nan"))
        return self._finish(model, state, x1, v1, x0, h, targets, colliders, StepInfo(1, residual, solved),
                            external=external, tolerance=tolerance, self_collision=self_collision)

    def _solve_direct(self, model: Model, rhs: np.ndarray, v_pin: np.ndarray, diag: np.ndarray,
                      a_co: np.ndarray | None, e_co: np.ndarray | None,
                      unit: np.ndarray | None) -> np.ndarray:
        """Assemble the ``3f × 3f`` matrix and solve it directly; returns ``(f, 3)``."""
        free, pinned = model.free_index, model.pinned_index
        if a_co is not None:
            blocks = e_co[:, None, None] * (unit[:, :, None] * unit[:, None, :])
            idx = np.arange(3)
            blocks[:, idx, idx] += a_co[:, None]
            if len(pinned):
                # the pinned vertices' known velocities, moved to the right-hand side: only the
                # springs with a pinned end take part (the others' terms are exactly 0)
                on, inc, inc_t = self._pin_springs.get(model.uid, lambda: _pin_springs(model))
                u = np.zeros_like(rhs)
                u[pinned] = v_pin
                rhs = rhs - _block_apply_soa(inc, inc_t, a_co[on], e_co[on], unit[on], u)
        else:
            blocks = np.zeros((model.spring_count, 3, 3))
        asm = self._assemblers.get(model.uid, lambda: F.HessianAssembler(model))
        data = asm.values(np.repeat(diag, 3), blocks)
        # a narrow band (a rope, a strip) straight to LAPACK, else the shared sparse factor
        solve = None if asm.band is None else asm.band.factor(data)
        if solve is None:
            solve = factor_spd(asm.matrix(data))
        return solve(rhs[free].reshape(-1)).reshape(-1, 3)

    def _solve_pcg(self, model: Model, h: float, rhs: np.ndarray, v0: np.ndarray,
                   v_pin: np.ndarray, diag: np.ndarray, a_co: np.ndarray, e_co: np.ndarray,
                   unit: np.ndarray, rtol: float) -> np.ndarray | None:
        """Preconditioned CG to relative residual ``rtol`` from ``v0`` (or from 0 if that has the smaller
        residual); returns ``(f, 3)`` or ``None`` if it did not reach it within
        :attr:`max_cg_iterations`."""
        pre = self._preconditioner(model, h)
        free = model.free_index
        unit_t = np.ascontiguousarray(unit.T)
        b = np.asfortranarray(rhs[free])
        if len(model.pinned_index):
            b -= _block_apply_soa(pre.inc_pinned, pre.inc_t_free, a_co, e_co, unit, v_pin)
        s = model.spring_count
        du = np.empty((3, s))
        tmp = np.empty(s)

        def apply(u: np.ndarray, out: np.ndarray) -> np.ndarray:
            for k in range(3):
                du[k] = pre.inc_free @ u[:, k]
            np.multiply(unit_t[0], du[0], out=tmp)
            np.add(tmp, unit_t[1] * du[1], out=tmp)
            np.add(tmp, unit_t[2] * du[2], out=tmp)
            np.multiply(tmp, e_co, out=tmp)
            np.multiply(du, a_co, out=du)
            for k in range(3):
                du[k] += tmp * unit_t[k]
                out[:, k] = diag * u[:, k] + pre.inc_t_free @ du[k]
            return out

        res = pcg(apply, b, pre.solve, x0=np.asfortranarray(v0[free]), rtol=rtol,
                  max_iterations=self.max_cg_iterations)
        self.last_cg_iterations = res.iterations
        return res.x if res.converged else None


def _pin_springs(model: Model) -> tuple[np.ndarray, sp.csr_matrix, sp.csr_matrix]:
    """The springs with a pinned end ``(k,)`` and their rows of ``model.incidence`` (CSR
    ``(k, n)``) and its transpose (CSR ``(n, k)``)."""
    on = np.flatnonzero(model.pinned[model.springs[:, 0]] | model.pinned[model.springs[:, 1]])
    inc = model.incidence[on].tocsr()
    return on, inc, inc.T.tocsr()


def _block_apply_soa(inc: sp.csr_matrix, inc_t: sp.csr_matrix, a_co: np.ndarray,
                     e_co: np.ndarray, unit: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``inc_tᵀ-side`` product ``inc_t (B (inc u))`` with per-spring blocks
    ``B = a I + e ûûᵀ``. Shapes: ``a_co``, ``e_co`` ``(s,)``, ``unit`` ``(s, 3)``,
    ``u`` ``(cols of inc, 3)``; returns ``(rows of inc_t, 3)``."""
    du = product(inc, u)
    per = du * a_co[:, None]
    per += unit * (e_co * np.einsum("ij,ij->i", du, unit))[:, None]
    return product(inc_t, per)
