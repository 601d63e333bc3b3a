"""EXPLICIT: forward Euler.

``v₁ = v₀ + h M⁻¹ f(x₀, v₀)``, ``x₁ = x₀ + h v₀`` (seed 004). Unstable for
undamped springs at any step size (the energy of an oscillator grows by a
factor ``1 + ω²h²`` per step); kept as the textbook baseline. The
:class:`~.simulate.Simulator` reports its divergence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import forces as F
from .base import Integrator, StepInfo, anchor_forces, pin_targets
from .model import Model, State

__all__ = ["ExplicitEuler", "total_force"]


def total_force(model: Model, x: np.ndarray, v: np.ndarray,
                targets: np.ndarray | None = None) -> np.ndarray:
    """All forces: springs, spring damping, gravity, air drag and soft pins
    (towards ``targets`` ``(t, 3)``, see :func:`.base.pin_targets`); shape ``(n, 3)``, N."""
    f = -F.spring_gradient(model, x)
    f += F.damping_forces(model, x, v)
    f += F.external_forces(model, v)
    if targets is not None and len(model.anchor_index):
        f += anchor_forces(model, x, targets)
    return f


class ExplicitEuler(Integrator):
    """Forward Euler (explicit), one force evaluation per step."""

    name = "EXPLICIT"
    label = "Explicit Euler"
    description = ("Forward Euler: cheapest per step but unstable unless the time step is tiny; "
                   "needs many substeps")

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 1, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None) -> StepInfo:
        targets = pin_targets(model, state, pins)
        x0, v0 = state.x.copy(), state.v
        f = total_force(model, x0, v0, targets)
        if external is not None:
            f += external
        a = f / model.masses[:, None]
        x1 = x0 + h * v0
        v1 = v0 + h * a
        limited = self._finish(model, state, x1, v1, x0, h, targets, colliders)
        return StepInfo(1, float("nan"), limited)
