"""NEWTON: implicit Euler as minimisation, solved by Newton's method.

Minimise ``g(x) = ½ h⁻² ‖x − y‖²_M + E(x)`` (plus the implicit drag and
spring-damping terms of :mod:`.base`) over the free vertices (seeds 000, 002,
004; Liu et al. 2013 §3). Each iteration solves ``(W + H + D/h) Δx = −∇g``
with ``H`` assembled from positive semi-definite per-spring blocks (the
compressive transverse term dropped, Choi & Ko 2002), so the system is
positive definite and ``Δx`` a descent direction. Small systems assemble
it and factorise it (exact Newton); larger ones (``linear_solver='AUTO'``
above :attr:`NewtonImplicitEuler.pcg_threshold` unknowns) solve it inexactly
by conjugate gradients preconditioned with the prefactored Liu 2013 matrix
``(W + L_k + L_d/h) ⊗ I`` (the shared :class:`~.linsolve.SpringLaplacian` of
FAST, through the shared :func:`~.linsolve.pcg`) to the relative residual
``min(½, ‖∇g‖/‖∇g₀‖)`` (inexact Newton, Eisenstat & Walker 1996) or at most
:attr:`NewtonImplicitEuler.max_cg_iterations` CG iterations (truncated Newton:
each CG iteration costs about one FAST iteration, and on stiff cloth the
isotropic preconditioner needs hundreds of them for the forcing term), matrix-free: the
Hessian is applied spring by spring as
``α I + β ûûᵀ`` on contiguous per-coordinate rows. A backtracking line search
halves the step until the Armijo condition
``g(x + tΔx) ≤ g(x) + 10⁻⁴ t ∇g·Δx`` holds; the accepted trial point's spring
geometry gives the next gradient and Hessian. The loop stops when
``‖∇g‖ ≤ tolerance · ‖∇g(x_start)‖`` or after ``iterations`` Newton steps.
Near the minimiser, where no spring is compressed, ``H`` is exact and
convergence is quadratic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import forces as F
from .base import CONVERGENCE_RTOL, Integrator, Objective, StepInfo, converged, force_scale, pin_targets, split_targets
from .linsolve import FactorCache, factor_spd, pcg
from .model import Model, State

__all__ = ["NewtonImplicitEuler"]


class NewtonImplicitEuler(Integrator):
    """Implicit Euler by Newton's method with backtracking line search.

    Parameters
    ----------
    tolerance : float
        Relative stopping tolerance on ``‖∇g‖``.
    armijo : float
        Sufficient-decrease constant of the line search.
    max_backtracks : int
        Halvings tried before accepting the smallest step (each costs an
        evaluation of ``g``; 12 halvings reach a step of 2.4e-4).
    linear_solver : str
        ``'DIRECT'`` (assembled ``3f × 3f`` Hessian, sparse factorisation:
        exact Newton directions), ``'PCG'`` (inexact Newton: conjugate
        gradients preconditioned with the prefactored Liu 2013 matrix, forcing
        term ``min(½, ‖∇g‖/‖∇g₀‖)``, Eisenstat & Walker 1996) or ``'AUTO'``
        (PCG above :attr:`pcg_threshold` unknowns).
    max_cg_iterations : int, optional
        Overrides the class default :attr:`max_cg_iterations`.
    """

    name = "NEWTON"
    label = "Implicit Euler (Newton)"
    description = ("Implicit Euler solved by Newton's method with line search: accurate and "
                   "stable, the most expensive per iteration")
    implicit = True

    #: Above this many unknowns (3 × free vertices) ``AUTO`` uses PCG.
    pcg_threshold = 300
    #: CG iterations per Newton iteration (PCG path). Each costs about one FAST
    #: iteration (a prefactored solve and a pass over the springs); the cap keeps a
    #: Newton iteration within ~3 FAST iterations on stiff cloth, where the
    #: isotropic preconditioner is weakest. The Newton loop makes up the rest.
    max_cg_iterations = 1

    def __init__(self, tolerance: float = 1e-10, armijo: float = 1e-4,
                 max_backtracks: int = 12, linear_solver: str = "AUTO",
                 max_cg_iterations: int | None = None) -> None:
        if linear_solver not in ("AUTO", "DIRECT", "PCG"):
            raise ValueError("linear_solver must be 'AUTO', 'DIRECT' or 'PCG'")
        self.linear_solver = linear_solver
        if max_cg_iterations is not None:
            self.max_cg_iterations = max(int(max_cg_iterations), 1)
        self._fast = None
        self._stop: float | None = None
        self.tolerance = float(tolerance)
        self.armijo = float(armijo)
        self.max_backtracks = int(max_backtracks)
        self._assemblers: FactorCache[F.HessianAssembler] = FactorCache(size=1)
        self.residual_history: list[float] = []
        self.last_cg_iterations = 0

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 10, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None, tolerance: float | None = None,
             self_collision: Any = None) -> StepInfo:
        targets = pin_targets(model, state, pins)
        # the loops stop at self.tolerance (relative to the start's residual) or, given one, at
        # ``tolerance`` relative to the force scale (base.converged)
        self._stop = None if tolerance is None else float(tolerance)
        obj = Objective(model, state, h, targets, external=external)
        x = obj.start(targets)
        free = model.free_index
        its = 0
        use_pcg = self.linear_solver == "PCG" or (
            self.linear_solver == "AUTO" and 3 * len(free) > self.pcg_threshold)
        hist: list[float] = []
        self.last_cg_iterations = 0
        if len(free) and model.spring_count and use_pcg:
            x[free], its, r = self._newton_pcg(model, obj, x[free], split_targets(model, targets)[0],
                                               int(iterations), hist)
        elif len(free) and model.spring_count:
            its, r = self._newton_direct(model, obj, x, int(iterations), hist)
        else:
            # No springs: g is a pure quadratic, minimised by ŷ.
            x = obj.predicted(targets)
            its = 1 if len(free) else 0
            r = F.norm(obj.gradient(x))
            hist += [r, r] if len(free) else [r]
        self.residual_history = hist
        x0 = obj.x0
        v1 = (x - x0) / h
        ok = (converged(r, hist[0], model, CONVERGENCE_RTOL if tolerance is None else float(tolerance))
              or r <= self.tolerance * max(hist[0], 1e-300))
        return self._finish(model, state, x, v1, x0, h, targets, colliders,
                            StepInfo(its, r, ok, r / force_scale(model, hist[0])),
                            external=external, tolerance=tolerance, self_collision=self_collision)

    def _threshold(self, model: Model, r0: float) -> float:
        """The residual (N) at which this step's Newton loop stops, from its start's ``r0``."""
        tol = self.tolerance * max(r0, 1e-300)
        if self._stop is not None:
            tol = max(tol, self._stop * force_scale(model, r0))
        return tol

    def _newton_direct(self, model: Model, obj: Objective, x: np.ndarray, iterations: int,
                       hist: list[float]) -> tuple[int, float]:
        """Newton iterations with exact directions from the assembled ``3f × 3f``
        system; updates ``x`` ``(n, 3)`` in place, returns (iterations, ‖∇g‖)."""
        free = model.free_index
        grad = obj.gradient(x)
        r = F.norm(grad)
        hist.append(r)
        tol = self._threshold(model, r)
        its = 0
        asm = self._assemblers.get(model.uid, lambda: F.HessianAssembler(model))
        diag = np.repeat(obj.w[free], 3)
        dblocks = obj.damping_blocks() if obj.has_damping else None
        val = obj.value(x)
        while its < max(iterations, 1) and r > tol:
            blocks = F.spring_hessian_blocks(model, x, project=True)
            if dblocks is not None:
                blocks += dblocks
            dx = np.zeros_like(x)
            solve = factor_spd(asm.assemble(diag, blocks))
            dx[free] = solve(-grad[free].reshape(-1)).reshape(-1, 3)
            slope = F.dot(grad, dx)
            t = 1.0
            for _ in range(self.max_backtracks):
                new_val = obj.value(x + t * dx)
                # 8 ulp of slack: near the minimiser g differs by round-off only
                if new_val <= val + self.armijo * t * slope + 8e-16 * abs(val):
                    break
                t *= 0.5
            x += t * dx
            val = new_val
            grad = obj.gradient(x)
            r = F.norm(grad)
            hist.append(r)
            its += 1
            if t < 1.0 and r >= hist[-2]:
                break  # stagnated at round-off level
        return its, r

    def _newton_pcg(self, model: Model, obj: Objective, xf: np.ndarray, targets: np.ndarray,
                    iterations: int, hist: list[float]) -> tuple[np.ndarray, int, float]:
        """Newton iterations with inexact directions from :meth:`_pcg`.

        Every evaluation works on the free vertices in structure-of-arrays
        form (:class:`_FreeObjective`): the line search's accepted trial point
        supplies the gradient and the Hessian of the next iteration, so one
        iteration costs one spring-geometry pass, the CG iterations and the
        backtracking trials. Shapes: ``xf (f, 3)``; returns the new ``xf``,
        the iterations used and ``‖∇g‖``.
        """
        from .fast import LocalGlobal  # local import: fast imports base, not newton

        if self._fast is None:
            self._fast = LocalGlobal()
        pre = self._fast.prefactored(model, obj.h)
        ev = _FreeObjective(model, obj, pre, targets)
        xf = np.asfortranarray(xf)
        geo = ev.evaluate(xf)
        grad = ev.gradient(xf, geo)
        r = F.norm(grad)
        hist.append(r)
        tol = self._threshold(model, r)
        its = 0
        while its < max(iterations, 1) and r > tol:
            dx = self._pcg(ev, pre, geo, -grad, min(0.5, r / hist[0]))
            slope = F.dot(grad, dx)
            val = geo.value
            t = 1.0
            for _ in range(self.max_backtracks):
                xt = xf + t * dx
                trial = ev.evaluate(xt)
                # 8 ulp of slack: near the minimiser g differs by round-off only
                if trial.value <= val + self.armijo * t * slope + 8e-16 * abs(val):
                    break
                t *= 0.5
            xf, geo = xt, trial
            grad = ev.gradient(xf, geo)
            r = F.norm(grad)
            hist.append(r)
            its += 1
            if t < 1.0 and r >= hist[-2]:
                break  # stagnated at round-off level
        return xf, its, r

    def _pcg(self, ev: _FreeObjective, pre: Any, geo: _Geometry, b: np.ndarray,
             eta: float) -> np.ndarray:
        """Inexact Newton direction by the shared :func:`~.linsolve.pcg`,
        preconditioned with the prefactored Liu 2013 matrix ``(W + L_k + L_d/h) ⊗ I``
        (an upper bound of the projected Hessian), from 0, to relative residual
        ``eta`` or :attr:`max_cg_iterations` (truncated Newton: every CG iterate
        from 0 is a descent direction, Nocedal & Wright 2006 §7.1).

        Shapes: ``b (f, 3)``; returns ``(f, 3)``.
        """
        coeffs = ev.hessian_coefficients(geo)

        def apply(u: np.ndarray, out: np.ndarray) -> np.ndarray:
            return ev.hessian_apply(geo, coeffs, u, out)

        res = pcg(apply, b, pre.solve, rtol=eta, max_iterations=self.max_cg_iterations)
        self.last_cg_iterations += res.iterations
        return res.x


class _Geometry:
    """Springs at one position, structure of arrays: ``d``, ``unit`` ``(3, s)``,
    ``length`` ``(s,)``, ``proj`` ``(s,)`` (``û⁰·(d − d⁰)``, damping only),
    ``value`` (``g``, J)."""

    __slots__ = ("d", "length", "unit", "proj", "value")


class _FreeObjective:
    """The objective ``g`` of :class:`~.base.Objective` over the free vertices,
    evaluated coordinate by coordinate (contiguous ``(s,)`` rows) with the
    incidence blocks of the Liu prefactorisation ``pre``.

    Shapes: positions ``(f, 3)`` (Fortran order preferred), springs ``(3, s)``.
    """

    def __init__(self, model: Model, obj: Objective, pre: Any, targets: np.ndarray) -> None:
        free, pinned = model.free_index, model.pinned_index
        self.model = model
        self.pre = pre
        self.w = obj.w[free]
        self.yf = np.asfortranarray(obj.y[free])
        rp = targets - obj.y[pinned]
        self.value_pinned = 0.5 * float(np.einsum("i,ij,ij->", obj.w[pinned], rp, rp))
        self.d_pin = None
        if len(pinned):
            self.d_pin = np.ascontiguousarray((pre.inc_pin_springs @ targets).T)
        self.damped = obj.has_damping
        if self.damped:
            d0, self.u0 = obj.geometry0()
            self.proj0 = _dot3(d0, self.u0)  # û⁰·d⁰, shape (s,)
        self.rest_t = np.ascontiguousarray(model.rest_directions.T)
        s = model.spring_count
        self._du = np.empty((3, s))
        self._per = np.empty((3, s))
        self._tmp = np.empty(s)
        self._sv = np.empty(s)

    def evaluate(self, xf: np.ndarray) -> _Geometry:
        """Spring geometry and ``g`` at free positions ``xf`` ``(f, 3)``."""
        m, pre = self.model, self.pre
        s = m.spring_count
        d = np.empty((3, s))
        for k in range(3):
            d[k] = pre.inc_free @ xf[:, k]
        if self.d_pin is not None:
            d[:, pre.pin_springs] += self.d_pin
        length = _dot3(d, d)
        np.sqrt(length, out=length)
        if length.min(initial=np.inf) > F._TINY:
            unit = d / length
        else:
            ok = length > F._TINY
            unit = np.where(ok, d / np.where(ok, length, 1.0), self.rest_t)
        geo = _Geometry()
        geo.d, geo.length, geo.unit = d, length, unit
        r = xf - self.yf
        stretch = length - m.rest_lengths
        val = (0.5 * float(np.einsum("i,ij,ij->", self.w, r, r)) + self.value_pinned
               + 0.5 * F.dot(m.stiffness, stretch * stretch))
        if self.damped:
            geo.proj = _dot3(d, self.u0)
            geo.proj -= self.proj0
            val += 0.5 * F.dot(pre.kd_h, geo.proj * geo.proj)
        geo.value = val
        return geo

    def gradient(self, xf: np.ndarray, geo: _Geometry) -> np.ndarray:
        """``∇g`` over the free vertices, shape ``(f, 3)`` (Fortran order), N."""
        m, pre = self.model, self.pre
        per = geo.unit * (m.stiffness * (geo.length - m.rest_lengths))
        if self.damped:
            per += self.u0 * (pre.kd_h * geo.proj)
        grad = np.asfortranarray(self.w[:, None] * (xf - self.yf))
        for k in range(3):
            grad[:, k] += pre.inc_t_free @ per[k]
        return grad

    def hessian_coefficients(self, geo: _Geometry) -> tuple[np.ndarray, np.ndarray]:
        """The projected spring block (:func:`~.forces.spring_hessian_blocks`)
        as ``α I + β ûûᵀ``: ``α = k max(1 − L/ℓ, 0)``, ``β = k − α``, each
        shape ``(s,)``. (Applying them directly is cheaper than forming the
        six block entries once the CG needs fewer than ~5 products.)"""
        m = self.model
        length, rest = geo.length, m.rest_lengths
        ratio = np.divide(rest, length, out=np.where(rest > 0, np.inf, 0.0),
                          where=length > F._TINY)
        alpha = np.maximum(1.0 - ratio, 0.0, out=ratio)
        alpha *= m.stiffness
        return alpha, m.stiffness - alpha

    def hessian_apply(self, geo: _Geometry, coeffs: tuple[np.ndarray, np.ndarray],
                      u: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out = (W + H + D/h) u`` for ``u``, ``out`` ``(f, 3)``: per spring
        ``α du + β (û·du) û + (k_d/h)(û⁰·du) û⁰`` with ``du = Aᵀ u``;
        ``coeffs = (α, β)`` from :meth:`hessian_coefficients`."""
        pre = self.pre
        alpha, beta = coeffs
        du, per, tmp, sv = self._du, self._per, self._tmp, self._sv
        unit = geo.unit
        for k in range(3):
            du[k] = pre.inc_free @ u[:, k]
        np.multiply(unit[0], du[0], out=sv)
        for k in (1, 2):
            np.multiply(unit[k], du[k], out=tmp)
            sv += tmp
        sv *= beta
        np.multiply(du, alpha, out=per)
        for k in range(3):
            np.multiply(unit[k], sv, out=tmp)
            per[k] += tmp
        if self.damped:
            u0 = self.u0
            np.multiply(u0[0], du[0], out=sv)
            for k in (1, 2):
                np.multiply(u0[k], du[k], out=tmp)
                sv += tmp
            sv *= pre.kd_h
            for k in range(3):
                np.multiply(u0[k], sv, out=tmp)
                per[k] += tmp
        for k in range(3):
            np.multiply(self.w, u[:, k], out=out[:, k])
            out[:, k] += pre.inc_t_free @ per[k]
        return out


def _dot3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise ``Σₖ a[k] b[k]`` of two ``(3, s)`` arrays, shape ``(s,)``."""
    out = a[0] * b[0]
    out += a[1] * b[1]
    out += a[2] * b[2]
    return out


