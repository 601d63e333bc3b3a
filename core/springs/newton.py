"""NEWTON: implicit Euler as minimisation, solved by Newton's method.

Minimise ``g(x) = ½ h⁻² ‖x − y‖²_M + E(x)`` (plus the implicit drag and
spring-damping terms of :mod:`.base`) over the free vertices (seeds 000, 002,
004; Liu et al. 2013 §3). Each iteration solves ``(W + H + D/h) Δx = −∇g``
with ``H`` assembled from positive semi-definite per-spring blocks (the
compressive transverse term dropped, Choi & Ko 2002), so the system is
positive definite and ``Δx`` a descent direction; a sparse direct
factorisation solves it. A backtracking line search halves the step until
the Armijo condition ``g(x + tΔx) ≤ g(x) + 10⁻⁴ t ∇g·Δx`` holds. The loop
stops when ``‖∇g‖ ≤ tolerance · ‖∇g(x_start)‖`` or after ``iterations``
Newton steps. Near the minimiser, where no spring is compressed, ``H`` is
exact and convergence is quadratic.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import forces as F
from .base import Integrator, Objective, StepInfo, pin_targets
from .linsolve import factor_spd
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
        Halvings tried before accepting the smallest step.
    """

    name = "NEWTON"
    label = "Implicit Euler (Newton)"
    description = ("Implicit Euler solved by Newton's method with line search: accurate and "
                   "stable, the most expensive per iteration")
    implicit = True

    def __init__(self, tolerance: float = 1e-10, armijo: float = 1e-4,
                 max_backtracks: int = 30, linear_solver: str = "AUTO") -> None:
        if linear_solver not in ("AUTO", "DIRECT", "PCG"):
            raise ValueError("linear_solver must be 'AUTO', 'DIRECT' or 'PCG'")
        self.linear_solver = linear_solver
        self._fast = None
        self.tolerance = float(tolerance)
        self.armijo = float(armijo)
        self.max_backtracks = int(max_backtracks)
        self._assemblers: Dict[int, F.HessianAssembler] = {}
        self.residual_history: List[float] = []

    def _assembler(self, model: Model) -> F.HessianAssembler:
        asm = self._assemblers.get(model.uid)
        if asm is None:
            self._assemblers = {model.uid: F.HessianAssembler(model)}
            asm = self._assemblers[model.uid]
        return asm

    def step(self, model: Model, state: State, h: float, *, pins: Optional[np.ndarray] = None,
             iterations: int = 10, colliders: Sequence[Any] = ()) -> StepInfo:
        targets = pin_targets(model, state, pins)
        obj = Objective(model, state, h)
        x = obj.start(targets)
        free = model.free_index
        grad = obj.gradient(x)
        r = F.norm(grad)
        hist = [r]
        tol = self.tolerance * max(r, 1e-300)
        its = 0
        if len(free) and model.spring_count:
            asm = self._assembler(model)
            diag = np.repeat(obj.w[free], 3)
            dblocks = obj.damping_blocks() if obj.has_damping else None
            val = obj.value(x)
            while its < max(int(iterations), 1) and r > tol:
                blocks = F.spring_hessian_blocks(model, x, project=True)
                if dblocks is not None:
                    blocks += dblocks
                dx = np.zeros_like(x)
                use_pcg = self.linear_solver == "PCG" or (
                    self.linear_solver == "AUTO" and 3 * len(free) > 6000)
                if use_pcg:
                    dx[free] = self._pcg(model, obj, blocks, -grad[free], min(0.5, r / hist[0]))
                else:
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
                x = x + t * dx
                val = new_val
                grad = obj.gradient(x)
                r = F.norm(grad)
                hist.append(r)
                its += 1
                if t < 1.0 and r >= hist[-2]:
                    break  # stagnated at round-off level
        elif len(free):
            # No springs: g is a pure quadratic, minimised by ŷ.
            its = 1
            grad = obj.gradient(x)
            r = F.norm(grad)
            hist.append(r)
        self.residual_history = hist
        x0 = obj.x0
        v1 = (x - x0) / h
        self._finish(model, state, x, v1, x0, h, targets, colliders)
        return StepInfo(its, r)

    def _pcg(self, model: Model, obj: Objective, blocks: np.ndarray, b: np.ndarray,
             eta: float, max_iter: int = 200) -> np.ndarray:
        """Inexact Newton direction by conjugate gradients, preconditioned with
        the prefactored Liu 2013 matrix ``(W + L_k + L_d/h) ⊗ I`` (an upper
        bound of the projected Hessian), to relative residual ``eta``.

        Shapes: ``blocks (s, 3, 3)``, ``b (f, 3)``; returns ``(f, 3)``.
        """
        from .fast import LocalGlobal  # local import: fast imports base, not newton

        if self._fast is None:
            self._fast = LocalGlobal()
        pre = self._fast.prefactored(model, obj.h)
        free = model.free_index
        n = model.vertex_count
        w = obj.w[free, None]
        full = np.zeros((n, 3))

        def apply(u: np.ndarray) -> np.ndarray:
            full[free] = u
            du = model.incidence @ full
            return w * u + model.incidence_t[free] @ np.einsum("sij,sj->si", blocks, du)

        x = np.zeros_like(b)
        r = b.copy()
        z = pre.solve(r)
        p = z.copy()
        rz = F.dot(r, z)
        tol = eta * F.norm(b)
        for _ in range(max_iter):
            ap = apply(p)
            alpha = rz / F.dot(p, ap)
            x += alpha * p
            r -= alpha * ap
            if F.norm(r) <= tol:
                break
            z = pre.solve(r)
            rz_new = F.dot(r, z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        return x
