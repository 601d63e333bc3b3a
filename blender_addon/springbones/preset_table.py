"""The spring-bone presets as plain data (no bpy: docs and tests read it too).

Each preset is chosen by the motion its name promises, through three derived figures
(docs/SPRING_BONES.md): a joint held by ``stiffness`` k (1/s²) alone swings about its
animated place at ``f = √k / 2π`` Hz; ``damping`` c (1/s) gives it the damping ratio
``ζ = c / (2 √k)`` (1 = no overshoot); and a horizontal bone of length L sags under
``gravity`` γ by ``atan(γ g / (k L))``. Implicit Euler (the solver) adds a numerical damping
of about ``ω² h / 2`` per second for a motion of ``ω`` rad/s at substep ``h``: ``substeps``
keep it below the preset's own damping.
"""

from __future__ import annotations

import math

#: Preset name → settings (the ``pose_bone.sinew_spring`` names).
PRESETS: dict[str, dict[str, float | int]] = {
    # soft and slow (0.3 Hz), floats in the air (drag), hangs under gravity, no overshoot to speak of
    "HAIR": dict(stiffness=4.0, damping=1.6, drag=2.0, gravity=1.0, stretch=0.0, radius=0.01,
                 substeps=2, pre_roll=24),
    # follows with a lag (0.8 Hz), a little overshoot (ζ 0.3), carries half its weight
    "TAIL": dict(stiffness=25.0, damping=3.0, drag=0.5, gravity=0.5, stretch=0.0, radius=0.03,
                 substeps=2, pre_roll=24),
    # stiff cartilage (1.9 Hz), bouncy (ζ 0.2), barely droops
    "EAR": dict(stiffness=150.0, damping=5.0, drag=0.5, gravity=0.2, stretch=0.0, radius=0.01,
                substeps=4, pre_roll=12),
    # hangs and swings like a pendulum (almost no pull to the pose), stretches 2 %
    "STRAP": dict(stiffness=1.0, damping=0.5, drag=0.3, gravity=1.0, stretch=0.02, radius=0.01,
                  substeps=2, pre_roll=24),
    # springy (3.2 Hz) and nearly undamped (ζ 0.05): keeps vibrating after a jolt
    "ANTENNA": dict(stiffness=400.0, damping=2.0, drag=0.1, gravity=0.05, stretch=0.0, radius=0.005,
                    substeps=6, pre_roll=12),
}

_LOOK = {
    "HAIR": ("Hair", "Soft, slow and floaty; hangs under gravity"),
    "TAIL": ("Tail", "Follows with a lag and a little overshoot; carries half its weight"),
    "EAR": ("Ear", "Stiff and bouncy; barely droops"),
    "STRAP": ("Strap", "Swings under gravity like a pendulum, stretches a little"),
    "ANTENNA": ("Antenna", "Springy and nearly undamped: keeps vibrating after a jolt"),
}


def frequency(preset: str) -> float:
    """Hz: ``√stiffness / 2π``."""
    return math.sqrt(float(PRESETS[preset]["stiffness"])) / (2.0 * math.pi)


def damping_ratio(preset: str) -> float:
    """``damping / (2 √stiffness)``."""
    p = PRESETS[preset]
    return float(p["damping"]) / (2.0 * math.sqrt(float(p["stiffness"])))


def _description(name: str) -> str:
    return f"{_LOOK[name][1]} ({frequency(name):.2f} Hz, damping ratio {damping_ratio(name):.2f})"


#: Preset name → tooltip with the derived figures.
DESCRIPTIONS = {name: _description(name) for name in PRESETS}
#: Enum items for the preset operator.
ITEMS = tuple((name, _LOOK[name][0], DESCRIPTIONS[name]) for name in PRESETS)
