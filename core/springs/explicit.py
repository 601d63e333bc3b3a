"""EXPLICIT: forward Euler.

``v₁ = v₀ + h M⁻¹ f(x₀, v₀)``, ``x₁ = x₀ + h v₀`` (seed 004). Unstable for
undamped springs at any step size (the energy of an oscillator grows by a
factor ``1 + ω²h²`` per step); kept as the textbook baseline.

Stability (:func:`vibration_rates`, :meth:`ExplicitEuler.stable_step`). For one damped
oscillator ``ẍ = −ω² x − γ ẋ`` a forward-Euler step maps ``(x, v)`` by a matrix of trace
``2 − hγ`` and determinant ``1 − hγ + h²ω²``; it does not grow (Jury's conditions) when

``h ω² ≤ γ``, ``hγ − h²ω² ≤ 2`` and ``2hγ − h²ω² ≤ 4``:

damping has to take out, every step, the energy the step puts in; without damping
(``γ = 0``) no step is stable. The cloth's fastest modes are bounded vertex by vertex
(Gershgorin): ``ω² ≤ (2 Σ kₛ + kₐ)/mᵢ`` over the springs at vertex ``i``, ``γ ≤ 2 Σ k_d/mᵢ
+ c``. Spring damping acts only along the springs: a taut spring's sideways vibration
(stiffness up to ``k``) is damped by the air drag ``c`` alone, so the first condition is
taken with ``γ = c``: ``h ≤ c/ω²``. The largest ``h`` from 0 meeting the conditions at
every vertex, times 0.9, is the estimate; the :class:`~.simulate.Simulator` takes that
many substeps (up to its limit) or refuses, and the divergence check stays as the
backstop. Cloth-like settings need 10⁵–10⁶ steps per second (the 17² demo cloth: 5·10⁶):
EXPLICIT is the textbook baseline, not a solver for cloth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import forces as F
from .base import Integrator, StepInfo, anchor_forces, pin_targets
from .model import Model, State

__all__ = ["ExplicitEuler", "total_force", "vibration_rates"]

#: Fraction of the stability bound the automatic substeps keep to.
SAFETY = 0.9


def vibration_rates(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """Upper bounds of the squared angular frequency ``ω²`` (1/s²) and damping rate ``γ``
    (1/s) of the modes at each free vertex, each shape ``(f,)`` (Gershgorin's circles on
    ``M⁻¹K`` and ``M⁻¹D``: a spring block ``k ûûᵀ`` plus the tension term has norm at
    most ``k`` while the spring is stretched; soft pins add ``kₐ``; air drag adds ``c``)."""
    n = model.vertex_count
    sp_i, sp_j = model.springs[:, 0], model.springs[:, 1]
    k_sum = (np.bincount(sp_i, model.stiffness, n) + np.bincount(sp_j, model.stiffness, n))
    d_sum = (np.bincount(sp_i, model.damping, n) + np.bincount(sp_j, model.damping, n))
    k_sum = 2.0 * k_sum
    k_sum[model.anchor_index] += model.anchor_stiffness
    free = model.free_index
    m = model.masses[free]
    return k_sum[free] / m, 2.0 * d_sum[free] / m + model.vertex_drag[free]


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

    def stable_step(self, model: Model) -> float:
        """Estimated largest stable step (s) from :func:`vibration_rates` and the
        conditions of the module docstring, times :data:`SAFETY`; 0 when no step is
        stable (an undamped spring), ``inf`` without springs."""
        w, g = vibration_rates(model)
        stiff = w > 0
        if not np.any(stiff):
            return float("inf")
        w, g = w[stiff], g[stiff]
        c = model.vertex_drag[model.free_index][stiff]
        if np.any(c <= 0):
            return 0.0
        h = c / w  # h ω² ≤ γ, sideways: only the air drag damps
        for a, b in ((g, 8.0 * w), (2.0 * g, 16.0 * w)):
            # a h − w h² ≤ c: unstable between the roots of w h² − a h + c (if real)
            disc = a * a - b
            band = disc > 0
            low = np.where(band, (a - np.sqrt(np.maximum(disc, 0.0))) / (2.0 * w), np.inf)
            h = np.minimum(h, low)
        return SAFETY * float(h.min())

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 1, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None, tolerance: float | None = None,
             self_collision: Any = None) -> StepInfo:
        targets = pin_targets(model, state, pins)
        x0, v0 = state.x.copy(), state.v
        f = total_force(model, x0, v0, targets)
        if external is not None:
            f += external
        a = f / model.masses[:, None]
        x1 = x0 + h * v0
        v1 = v0 + h * a
        return self._finish(model, state, x1, v1, x0, h, targets, colliders, StepInfo(1, float("nan")),
                            external=external, tolerance=tolerance, self_collision=self_collision)
