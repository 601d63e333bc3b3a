"""The cloth presets as plain data (no bpy: the benchmarks and tools read it too).

Every preset uses ``mass_mode='DENSITY'`` and ``stiffness_mode='MATERIAL'`` (docs/MATERIAL.md),
so it gives the same cloth on a coarse or a fine mesh, and a strain limit ``max_stretch``
that keeps it from stretching more than such a cloth does. Densities are kg/m² (ROPE: kg
per metre of edge on a polyline), stiffness N per metre of width per unit strain (ROPE on
a polyline: N per unit strain), damping N·s/m on the same scale, drag 1/s.

:data:`MEASURED` holds each preset's largest edge strain on a hanging sheet (1 m square,
the two top corners pinned, 2 s = 48 frames at 24 fps from rest, 10² and 40² quads; ROPE: a
1 m polyline of 20 segments pinned at the top), from ``python bench/springs_presets.py``;
:data:`DESCRIPTIONS` quotes them to the user.
"""

from __future__ import annotations

_MATERIAL = dict(mass_mode="DENSITY", stiffness_mode="MATERIAL")

#: Preset name → settings.
PRESETS: dict[str, dict[str, object]] = {
    "COTTON": dict(_MATERIAL, density=0.15, stiffness=2000.0, shear_stiffness=200.0,
                   bending_stiffness=2.0, damping=1.0, air_drag=0.5, max_stretch=0.03,
                   pin_stiffness=0.0, solver="FAST", substeps=1, iterations=20),
    "SILK": dict(_MATERIAL, density=0.06, stiffness=800.0, shear_stiffness=40.0,
                 bending_stiffness=0.2, damping=0.3, air_drag=1.0, max_stretch=0.05,
                 pin_stiffness=0.0, solver="FAST", substeps=1, iterations=20),
    "DENIM": dict(_MATERIAL, density=0.45, stiffness=8000.0, shear_stiffness=1500.0,
                  bending_stiffness=20.0, damping=3.0, air_drag=0.3, max_stretch=0.02,
                  pin_stiffness=0.0, solver="FAST", substeps=1, iterations=20),
    "RUBBER": dict(_MATERIAL, density=0.8, stiffness=1000.0, shear_stiffness=300.0,
                   bending_stiffness=5.0, damping=0.5, air_drag=0.2, max_stretch=0.25,
                   pin_stiffness=0.0, solver="FAST", substeps=1, iterations=20),
    "ROPE": dict(_MATERIAL, density=0.1, stiffness=20000.0, shear_stiffness=0.0,
                 bending_stiffness=50.0, damping=2.0, air_drag=0.1, max_stretch=0.01,
                 pin_stiffness=0.0, solver="FAST", substeps=2, iterations=20),
    "FLAG": dict(_MATERIAL, density=0.12, stiffness=3000.0, shear_stiffness=300.0,
                 bending_stiffness=1.0, damping=1.0, air_drag=1.0, max_stretch=0.02,
                 pin_stiffness=0.0, solver="FAST", substeps=1, iterations=60),
}

#: What a preset sets instead for free cloth that collides (it has colliders, or
#: self-collision is on, and no pin group): Vertex Block Descent, contact inside the solve
#: (core/springs/vbd.py), at the substeps and iterations that let a tablecloth come to rest
#: centred with the strain limit held (docs/CONTACT.md).
CONTACT_SOLVER: dict[str, object] = dict(solver="VBD", substeps=3, iterations=10)

#: What a preset sets instead for pinned cloth with colliders (a skirt or a dress on a moving
#: body) or self-collision: VBD with more iterations. On the bench's skirt pinned to a body moving 5 m/s, 10
#: iterations left the cloth pressed deep into the body's thickness, the solve far from
#: converged (90 N of residual on 0.5 g vertices), and the body's vertical edges cut it
#: (21 cloth edges through the body); at 20 none did in five perturbed starts, at 18.7 ms per
#: frame against FAST's 38.5 with 3.3 % strain against FAST's 3.9 % (docs/CONTACT.md, *Pinned
#: cloth on moving bodies*). Since VBD starts pinned cloth from FAST's global solve of
#: the step (core/springs/vbd.py, ``GLOBAL_START``), 16 do what 20 did: no cut in eight
#: perturbed starts (14 cut one of them, and 14 and 15 without that start), and the skirt
#: and the dress end two to three times slower (docs/CONTACT.md, *A global start for pinned
#: cloth*). With self-collision, VBD has it inside the solve where FAST runs the post-solve
#: stage: a 32² sheet pinned at two corners that folds as one pin moves took 70 against 101 ms
#: per frame at 3 × 20, both with no crossing (docs/CONTACT.md), and at 3 × 16 from the global
#: start no crossing either, with 3.2 % strain against 3.4 %. Pinned cloth with neither
#: keeps the table's solver (a sheet that only hangs from pins is three times faster with
#: FAST's prefactored global solve), and so do the FLAG preset (a flag in the wind, its look
#: measured on FAST) and ROPE.
PINNED_CONTACT_SOLVER: dict[str, object] = dict(solver="VBD", substeps=3, iterations=16)

#: Largest edge strain while hanging (the 48 frames, settling included; see the module
#: docstring): preset → (10² quads, 40² quads), fractions. The 40² figures are larger because
#: a pinned corner is a point load: its strain grows with resolution until ``max_stretch``
#: caps it (RUBBER's cap is 25 %: rubber stretches, and on fine meshes its corners reach it).
MEASURED: dict[str, tuple[float, float]] = {
    "COTTON": (0.0070, 0.0278), "SILK": (0.0072, 0.0292), "DENIM": (0.0049, 0.0197),
    "RUBBER": (0.0735, 0.2500), "ROPE": (0.0001, 0.0001), "FLAG": (0.0036, 0.0147),
}

_LOOK = {
    "COTTON": ("Cotton", "Medium-weight woven cotton (150 g/m²): drapes in soft folds"),
    "SILK": ("Silk", "Light, flowing fabric (60 g/m²) with almost no bending resistance"),
    "DENIM": ("Denim / Leather", "Heavy, stiff cloth (450 g/m²) that keeps broad folds"),
    "RUBBER": ("Rubber", "Heavy, stretchy sheet (800 g/m², stretches up to 25 %): sags under its "
               "weight"),
    "ROPE": ("Rope", "Stiff along its length (polyline: 100 g/m, 20 kN per unit strain), bends "
             "freely"),
    "FLAG": ("Flag", "Light polyester flag fabric (120 g/m²), stiff in-plane, flutters freely"),
}


def _description(name: str) -> str:
    text = _LOOK[name][1]
    coarse, fine = MEASURED[name]
    return (f"{text}. Hanging from two corners: max strain {100 * coarse:.1f}% (10² quads), "
            f"{100 * fine:.1f}% (40²)")


#: Preset name → tooltip, with the measured strain.
DESCRIPTIONS = {name: _description(name) for name in PRESETS}

