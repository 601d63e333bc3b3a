"""Benchmark: core IK bake of a 10-bone chain following a 3-D Lissajous target.

The setup of ../shared/ANCHORS.md (Blender's own IK: 1,000 frames in ~0.35 s, 3e-3 m max tip
error): a connected chain of ten 0.5 m bones along +Y, the target on a Lissajous path kept
mostly within reach. Run from the repository root::

    python bench/ik_core.py [--quick]

Prints a markdown table; :func:`run` returns the rows for the top-level bench. FABRIK and DLS
are run with both bake strategies (sequential warm-started, and batched over all frames); the
``auto`` column marks the one ``strategy='auto'`` picks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from core import quat  # noqa: E402
from core.ik import SOLVERS, Chain, SolveSettings  # noqa: E402
from core.ik.bake import bake_chain, uses_batched  # noqa: E402


def lissajous(frames: int) -> np.ndarray:
    """Target path, shape (frames, 3), metres: stays 1.5-4.6 m from the root (reach 5 m)."""
    s = np.linspace(0.0, 2.0 * np.pi, frames, endpoint=False)
    return np.stack((2.2 * np.sin(3 * s + 0.5), 3.0 + 1.2 * np.sin(2 * s), 1.8 * np.sin(5 * s)), axis=1)


def run(quick: bool = False) -> list[dict]:
    """Bake the Lissajous path with every solver and, for FABRIK, both bake strategies.

    Parameters
    ----------
    quick : bool
        200 frames instead of 1,000.

    Returns
    -------
    list of dict
        One row per solver and strategy: solver, strategy ('sequential' or 'batched'), frames,
        seconds (best of a few runs for the fast ones), ms_per_frame, mean_iterations,
        max_iterations, max_error_m, converged_fraction, max_step_deg (largest joint turn
        between consecutive frames), auto (whether ``strategy='auto'`` bakes this way).
    """
    frames = 200 if quick else 1000
    pts = np.zeros((11, 3))
    pts[:, 1] = np.arange(11) * 0.5
    chain = Chain.from_points(pts)
    targets = lissajous(frames)
    settings = SolveSettings(max_iterations=100, tolerance=1e-4)
    rows = []
    for name in SOLVERS:
        strategies = ["sequential"] + (["batched"] if uses_batched(chain, name, None, "batched") else [])
        auto = "batched" if uses_batched(chain, name, None, "auto") else "sequential"
        for strategy in strategies:
            best = np.inf
            repeats = 5 if strategy == "batched" else 1
            for _ in range(repeats):
                t0 = time.perf_counter()
                res = bake_chain(chain, targets, name, settings, strategy=strategy)
                best = min(best, time.perf_counter() - t0)
            steps = quat.angle_between(res.rotations[:-1], res.rotations[1:]).max(axis=1)
            rows.append({
                "solver": name, "strategy": strategy, "frames": frames, "seconds": best,
                "ms_per_frame": 1e3 * best / frames, "mean_iterations": float(res.iterations.mean()),
                "max_iterations": int(res.iterations.max()), "max_error_m": float(res.errors.max()),
                "converged_fraction": float(res.converged.mean()),
                "max_step_deg": float(np.degrees(steps.max())), "auto": strategy == auto,
            })
    return rows


def main(argv: list[str]) -> None:
    rows = run("--quick" in argv)
    print("| solver | strategy | frames | time (s) | ms/frame | mean iter | max iter | max tip error (m) "
          "| converged | max joint step (deg) | auto |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['solver']} | {r['strategy']} | {r['frames']} | {r['seconds']:.3f} | {r['ms_per_frame']:.3f} | "
              f"{r['mean_iterations']:.2f} | {r['max_iterations']} | {r['max_error_m']:.2e} | "
              f"{100 * r['converged_fraction']:.1f}% | {r['max_step_deg']:.1f} | {'yes' if r['auto'] else ''} |")


if __name__ == "__main__":
    main(sys.argv[1:])
