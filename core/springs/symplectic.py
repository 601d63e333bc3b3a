"""SYMPLECTIC: semi-implicit (symplectic) Euler.

``v₁ = v₀ + h M⁻¹ f(x₀, v₀)``, ``x₁ = x₀ + h v₁`` (seeds 003, 004). Without
damping it conserves a modified energy, so the energy stays bounded when
``h ω_max < 2``; stiff springs need substeps.

Stability. For ``ẍ = −ω² x − γ ẋ`` the step maps ``(x, v)`` by a matrix of trace
``2 − h²ω² − hγ`` and determinant ``1 − hγ``; Jury's conditions reduce to
``h²ω² + 2hγ ≤ 4``, i.e. ``h ≤ 4/(γ + √(γ² + 4ω²))`` (``2/ω`` undamped). With the
vertex-wise bounds of :func:`.explicit.vibration_rates` (exact for the fastest mode of a
uniform chain) this gives :meth:`SymplecticEuler.stable_step`; the
:class:`~.simulate.Simulator` subdivides each frame into enough substeps and reports
how many. On COTTON that is ``2 √(m/8k)``-ish: ~200 substeps per frame on the 64² bench
sheet (a 3 cm cell weighs 0.15 g against 2000 N/m springs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Integrator, StepInfo, pin_targets
from .explicit import SAFETY, total_force, vibration_rates
from .model import Model, State

__all__ = ["SymplecticEuler"]


class SymplecticEuler(Integrator):
    """Semi-implicit Euler, one force evaluation per step."""

    name = "SYMPLECTIC"
    label = "Symplectic Euler"
    description = ("Semi-implicit Euler: cheap and energy-preserving, but stiff springs need "
                   "small steps (more substeps)")

    def stable_step(self, model: Model) -> float:
        """Largest stable step (s) by the bound of the module docstring, times
        :data:`~.explicit.SAFETY`; ``inf`` without springs or soft pins."""
        w, g = vibration_rates(model)
        if not np.any(w > 0) and not np.any(g > 0):
            return float("inf")
        moving = (w > 0) | (g > 0)
        w, g = w[moving], g[moving]
        return SAFETY * float(np.min(4.0 / (g + np.sqrt(g * g + 4.0 * w))))

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 1, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None, tolerance: float | None = None,
             self_collision: Any = None) -> StepInfo:
        targets = pin_targets(model, state, pins)
        x0 = state.x.copy()
        f = total_force(model, x0, state.v, targets)
        if external is not None:
            f += external
        a = f / model.masses[:, None]
        v1 = state.v + h * a
        x1 = x0 + h * v1
        return self._finish(model, state, x1, v1, x0, h, targets, colliders, StepInfo(1, float("nan")),
                            external=external, tolerance=tolerance, self_collision=self_collision)
