"""The add-on's cloth presets in ``core.springs`` (not a test): strain at rest, time per
frame and the resolution sweep.

For every preset of ``blender_addon/springs/presets.py`` (DENSITY + MATERIAL, with its own
solver, substeps, iterations and strain limit), built exactly as the bake builds it:

* hanging sheet: 1 m square in XZ, the two top corners pinned, 48 frames at 24 fps (2 s),
  at 10² and 40² quads; ROPE on a 1 m polyline of 20 segments pinned at the top. Figures:
  largest edge strain at the last frame and over the run, ms/frame, frames not converged;
* resolution sweep: the same preset at 20², 40², 80² quads: lowest point (m) and its
  spread relative to the sheet size (goal ≤ 3 %), total mass.

``python3 bench/springs_presets.py [--quick]`` (numpy and scipy only);
``run(quick) -> list[dict]``.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from core.springs import Simulator, build_model  # noqa: E402
from core.springs.shapes import grid, rope, springs_of, triangulate  # noqa: E402

FPS = 24.0
FRAMES = 48


def presets() -> dict[str, dict[str, object]]:
    """The add-on's preset table (plain data, no bpy)."""
    from blender_addon.springs.preset_table import PRESETS

    return PRESETS


def model_for(p: dict[str, object], n: int, *, polyline: bool = False, size: float = 1.0):
    """The model the bake would build for preset ``p`` on an ``n × n``-quad sheet ``size`` m
    wide hanging in XZ from its two top corners (or on a polyline hanging from its top)."""
    g = rope(n, size) if polyline else grid(n, size, plane="XZ")
    ss = springs_of(g, shear=p["shear_stiffness"] > 0, bending=p["bending_stiffness"] > 0)
    pin = np.zeros(len(g.positions))
    pin[[0] if polyline else [0, n]] = 1.0
    mass = ({"density": p["density"]} if p["mass_mode"] == "DENSITY"
            else {"vertex_mass": p["vertex_mass"]})
    return build_model(g.positions, ss, stiffness=p["stiffness"], shear_stiffness=p["shear_stiffness"],
                       bending_stiffness=p["bending_stiffness"], damping=p["damping"],
                       air_drag=p["air_drag"], pinned=pin, triangles=triangulate(g),
                       stiffness_mode=p["stiffness_mode"], max_stretch=p["max_stretch"],
                       pin_stiffness=p["pin_stiffness"], **mass)


def hang(p: dict[str, object], n: int, frames: int = FRAMES, *, polyline: bool = False) -> dict:
    """Simulate the hanging sheet; return figures."""
    m = model_for(p, n, polyline=polyline)
    sim = Simulator(m, p["solver"], fps=FPS, substeps=p["substeps"], iterations=p["iterations"])
    times, strain, unconv = [], 0.0, 0
    d = None
    for _ in range(frames):
        t0 = time.perf_counter()
        d = sim.advance()
        times.append(time.perf_counter() - t0)
        strain = max(strain, d.max_strain)
        unconv += 0 if d.converged else 1
    return dict(n=n, vertices=m.vertex_count, strain_end=round(d.max_strain, 4),
                strain_max=round(strain, 4), ms_per_frame=round(1e3 * float(np.median(times)), 2),
                unconverged=unconv, lowest=float(sim.state.x[:, 2].min()),
                mass=round(m.total_mass, 6), ke_end=d.kinetic_energy)


def run(quick: bool = False) -> list[dict[str, object]]:
    rows = []
    for name, p in presets().items():
        poly = name == "ROPE"
        for n in ((20,) if poly else (10, 40)):
            rows.append(dict(section="hanging", preset=name, **hang(p, n, polyline=poly)))
        sizes = (20, 40) if quick else (20, 40, 80)
        sweep = [hang(p, n, polyline=poly) for n in ((20, 40, 80) if poly else sizes)]
        lows = [r["lowest"] for r in sweep]
        rows.append(dict(section="sweep", preset=name, sizes=[r["n"] for r in sweep],
                         lowest=[round(v, 4) for v in lows],
                         spread_pct=round(100.0 * (max(lows) - min(lows)) / 1.0, 2),
                         mass=[r["mass"] for r in sweep],
                         ms_per_frame=[r["ms_per_frame"] for r in sweep]))
    return rows


def goals(rows: list[dict[str, object]]) -> list[str]:
    """The issue-16 resolution goal, measured (lines of text)."""
    out = []
    for r in rows:
        if r.get("section") == "sweep":
            ok = r["spread_pct"] <= 3.0
            out.append(f"{r['preset']} at {'², '.join(map(str, r['sizes']))}²: lowest points "
                       f"{r['lowest']} m, spread {r['spread_pct']}% of the sheet (goal ≤ 3 %: "
                       f"{'met' if ok else 'NOT met'}), mass {r['mass']} kg")
    return out


def main() -> None:
    rows = run("--quick" in sys.argv)
    for r in rows:
        print(" | ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    for line in goals(rows):
        print(line)


if __name__ == "__main__":
    main()
