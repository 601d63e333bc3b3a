"""SYMPLECTIC: semi-implicit (symplectic) Euler.

``v₁ = v₀ + h M⁻¹ f(x₀, v₀)``, ``x₁ = x₀ + h v₁`` (seeds 003, 004). Without
damping it conserves a modified energy, so the energy stays bounded when
``h ω_max < 2``; stiff springs need substeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Integrator, StepInfo, pin_targets
from .explicit import total_force
from .model import Model, State

__all__ = ["SymplecticEuler"]


class SymplecticEuler(Integrator):
    """Semi-implicit Euler, one force evaluation per step."""

    name = "SYMPLECTIC"
    label = "Symplectic Euler"
    description = ("Semi-implicit Euler: cheap and energy-preserving, but stiff springs need "
                   "small steps (more substeps)")

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 1, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None) -> StepInfo:
        targets = pin_targets(model, state, pins)
        x0 = state.x.copy()
        f = total_force(model, x0, state.v, targets)
        if external is not None:
            f += external
        a = f / model.masses[:, None]
        v1 = state.v + h * a
        x1 = x0 + h * v1
        limited = self._finish(model, state, x1, v1, x0, h, targets, colliders)
        return StepInfo(1, float("nan"), limited)
