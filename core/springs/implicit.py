"""IMPLICIT: one linearised backward-Euler step (Baraff & Witkin 1998
"Large Steps in Cloth Simulation"), with the β family of seed 004.

Forces are linearised about the start of the step, ``f(x₀ + βh v₁) ≈
f(x₀) − βh H v₁`` with ``H`` the spring Hessian (each 3×3 block made positive
semi-definite: see :mod:`.forces`), and damping and air drag act on
``(1 − β) v₀ + β v₁``:

``[M + βh (D + cM) + βh² H] v₁ = M v₀ + h [f_s(x₀) − (1 − β)(D + cM) v₀ + cM·wind + M g]``

then ``x₁ = x₀ + h v₁``. ``β = 0`` is semi-implicit (symplectic) Euler,
``β = ½`` the implicit midpoint-like rule, ``β = 1`` (default) backward Euler
as in Blender's cloth solver. Pinned velocities ``(target − x₀)/h`` are known
and moved to the right-hand side. The sparse system is solved exactly with a
sparse direct factorisation.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from . import forces as F
from .base import Integrator, StepInfo, block_apply, pin_targets
from .linsolve import factor_spd
from .model import Model, State

__all__ = ["LinearImplicitEuler"]


class LinearImplicitEuler(Integrator):
    """Linearised backward Euler (Baraff–Witkin), one sparse solve per step.

    Parameters
    ----------
    beta : float
        0, ½ or 1 (any value in [0, 1] works): how implicit the step is.
    """

    name = "IMPLICIT"
    label = "Implicit Euler (linearised)"
    description = ("One linearised backward-Euler step per substep (Baraff-Witkin, like "
                   "Blender's cloth): stable at large steps, adds numerical damping")
    implicit = True

    def __init__(self, beta: float = 1.0) -> None:
        if not 0.0 <= beta <= 1.0:
            raise ValueError("beta must be in [0, 1]")
        self.beta = float(beta)
        self._assemblers: Dict[int, F.HessianAssembler] = {}

    def _assembler(self, model: Model) -> F.HessianAssembler:
        asm = self._assemblers.get(model.uid)
        if asm is None:
            self._assemblers = {model.uid: F.HessianAssembler(model)}
            asm = self._assemblers[model.uid]
        return asm

    def step(self, model: Model, state: State, h: float, *, pins: Optional[np.ndarray] = None,
             iterations: int = 1, colliders: Sequence[Any] = ()) -> StepInfo:
        targets = pin_targets(model, state, pins)
        b = self.beta
        x0, v0 = state.x.copy(), state.v.copy()
        m = model.masses
        c = model.air_drag
        free, pinned = model.free_index, model.pinned_index
        v_pin = (targets - x0[pinned]) / h

        rhs = m[:, None] * v0 + h * (
            -F.spring_gradient(model, x0)
            + (1.0 - b) * F.damping_forces(model, x0, v0)
            - (1.0 - b) * c * m[:, None] * v0
            + c * m[:, None] * model.wind + m[:, None] * model.gravity)
        v1 = v0.copy()
        v1[pinned] = v_pin
        if len(free):
            if b > 0 and model.spring_count:
                blocks = (b * h**2) * F.spring_hessian_blocks(model, x0, project=True)
                if np.any(model.damping):
                    blocks += (b * h) * F.damping_blocks(model, x0)
                if len(pinned):
                    u = np.zeros_like(x0)
                    u[pinned] = v_pin
                    rhs -= block_apply(model, blocks, u)
            else:
                blocks = np.zeros((model.spring_count, 3, 3))
            diag = np.repeat(m[free] * (1.0 + b * h * c), 3)
            a = self._assembler(model).assemble(diag, blocks)
            solve = factor_spd(a)
            v1[free] = solve(rhs[free].reshape(-1)).reshape(-1, 3)
        x1 = x0 + h * v1
        self._finish(model, state, x1, v1, x0, h, targets, colliders)
        return StepInfo(1, float("nan"))
