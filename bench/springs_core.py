"""Benchmark of ``core.springs`` on hanging cloth grids (not a test).

Grids of ``n × n`` quads ((n+1)² vertices), 2 m wide, hanging in the XZ plane
from their two top corners; structural + shear + bending springs; cotton-like
0.3 kg/m². Prints ms/frame, iterations, max strain and peak traced memory per
integrator; compare with Blender's cloth (../shared/ANCHORS.md: 95 ms/frame at
64² in bpy 5.2).

Run from the repository root: ``python bench/springs_core.py [--quick]``.
"""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from core.errors import DivergenceError  # noqa: E402
from core.springs import INTEGRATORS, LocalGlobal, Simulator, build_model, build_springs  # noqa: E402
from core.springs.shapes import grid, triangulate  # noqa: E402

#: Cloth parameters (SI), printed by :func:`run`.
CLOTH = dict(width_m=2.0, areal_density_kg_m2=0.3, stiffness=4000.0, shear_stiffness=1000.0,
             bending_stiffness=20.0, damping=0.05, air_drag=0.1, fps=24.0)


def hanging_grid(n: int):
    """Model of an ``n × n`` hanging grid with the two top corners pinned."""
    g = grid(n, CLOTH["width_m"], plane="XZ")
    ss = build_springs(len(g.positions), g.edges, g.loop_starts, g.loop_totals, g.loop_vertices)
    pin = np.zeros(len(g.positions), bool)
    pin[[0, n]] = True
    return build_model(
        g.positions, ss, stiffness=CLOTH["stiffness"], shear_stiffness=CLOTH["shear_stiffness"],
        bending_stiffness=CLOTH["bending_stiffness"], damping=CLOTH["damping"],
        total_mass=CLOTH["areal_density_kg_m2"] * CLOTH["width_m"] ** 2,
        triangles=triangulate(g), pinned=pin, air_drag=CLOTH["air_drag"])


def stable_substeps(model) -> int:
    """Substeps per frame for symplectic Euler: ``h ω_max ≤ 1.8`` with the
    Gershgorin bound ``ω_max² ≤ maxᵢ 2 Σⱼ kᵢⱼ / mᵢ``."""
    ksum = np.bincount(model.springs.reshape(-1), weights=np.repeat(model.stiffness, 2),
                       minlength=model.vertex_count)
    omega = float(np.sqrt(np.max(2.0 * ksum / model.masses)))
    return int(np.ceil(omega / (1.8 * CLOTH["fps"])))


def _case(model, integrator, label, n, substeps, iterations, frames) -> Dict[str, object]:
    """Time ``frames`` frames (after one warm-up frame), then measure peak
    memory of one more frame under tracemalloc (kept out of the timing: it
    slows numpy's allocations)."""
    sim = Simulator(model, integrator, fps=CLOTH["fps"], substeps=substeps, iterations=iterations)
    row: Dict[str, object] = dict(grid=n, vertices=model.vertex_count, springs=model.spring_count,
                                  solver=label, substeps=substeps, iterations=iterations)
    try:
        sim.advance()  # first frame: factorisations, caches
        t0 = time.perf_counter()
        for _ in range(frames):
            d = sim.advance()
        ms = (time.perf_counter() - t0) / frames * 1e3
        row.update(ms_per_frame=round(ms, 2), iterations_per_frame=d.iterations,
                   max_strain=round(d.max_strain, 4), residual=d.residual, status="ok")
        tracemalloc.start()
        sim.advance()
        row["peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    except DivergenceError as e:
        row.update(ms_per_frame=float("nan"), status=f"diverged at frame {e.frame}")
    return row


def run(quick: bool = False) -> List[Dict[str, object]]:
    """Run the springs benchmark; return one dict per (grid, solver) case."""
    sizes = [32, 64] if quick else [32, 64, 128]
    frames = 5 if quick else 12
    rows = []
    for n in sizes:
        model = hanging_grid(n)
        cases = [("FAST", "FAST", 1, 10), ("FAST+cheb", LocalGlobal(chebyshev=True), 1, 10),
                 ("NEWTON", "NEWTON", 1, 3), ("IMPLICIT", "IMPLICIT", 1, 1)]
        if n <= 64:
            stable = stable_substeps(model)
            cases += [("SYMPLECTIC", "SYMPLECTIC", 1, 1), ("SYMPLECTIC", "SYMPLECTIC", stable, 1),
                      ("EXPLICIT", "EXPLICIT", stable, 1)]
        for label, integ, sub, its in cases:
            if isinstance(integ, str):
                integ = INTEGRATORS[integ]()
            rows.append(_case(model, integ, label, n, sub, its, frames if sub < 10 else 2))
    return rows


def main() -> None:
    quick = "--quick" in sys.argv
    print("cloth:", ", ".join(f"{k}={v}" for k, v in CLOTH.items()))
    rows = run(quick)
    keys = ["grid", "vertices", "springs", "solver", "substeps", "iterations", "ms_per_frame",
            "iterations_per_frame", "max_strain", "peak_mib", "status"]
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r.get(k, "")) for k in keys))
    fast = {r["grid"]: r["ms_per_frame"] for r in rows if r["solver"] == "FAST"}
    if 64 in fast:
        print(f"goal FAST 64² ≤ 20 ms/frame: {fast[64]} ms")
    if 64 in fast and 128 in fast:
        print(f"goal 128²/64² ≤ 4.5: {fast[128] / fast[64]:.2f}")
    newton = [r for r in rows if r["solver"] == "NEWTON" and r["grid"] == 64 and r["status"] == "ok"]
    if newton and 64 in fast:
        per_newton = newton[0]["ms_per_frame"] / max(newton[0]["iterations_per_frame"], 1)
        print(f"goal NEWTON iteration ≤ 3× FAST iteration at 64²: {per_newton / (fast[64] / 10):.1f}×")


if __name__ == "__main__":
    main()
