"""Sinew's core IK against ikpy on the same chains and targets.

ikpy (scipy least squares over revolute joints) is the usual pure-Python choice. Each
Sinew ball joint is modelled in ikpy as three revolute joints (X, Y, Z) at the same
point, so both solve the same 3-DOF-per-joint problem. Both are warm-started from the
previous frame. Tip error is measured by each library's own forward kinematics.

    python bench/ikpy_compare.py [--quick]      (needs ikpy: the bench environment has it)
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.ik import bake as ik_bake  # noqa: E402
from core.ik.base import SolveSettings  # noqa: E402
from core.ik.chain import Chain  # noqa: E402


def lissajous(frames: int, reach: float) -> np.ndarray:
    """A 3-D Lissajous path mostly inside the reach of a chain standing along +Z."""
    t = np.linspace(0.0, 2.0 * np.pi, frames)
    return np.stack([0.45 * reach * np.sin(3 * t), 0.35 * reach * np.sin(2 * t + 0.5),
                     0.55 * reach + 0.25 * reach * np.cos(t)], axis=1)


def worst(errors) -> float:
    """The largest tip error; ``inf`` if any is not finite (a NaN pose must not print as the
    table's "–", which means not applicable)."""
    e = np.asarray(errors, dtype=np.float64)
    return float(np.max(np.where(np.isfinite(e), e, np.inf)))


def ikpy_chain(bones: int, length: float):
    from ikpy.chain import Chain as IkChain
    from ikpy.link import OriginLink, URDFLink

    links = [OriginLink()]
    for i in range(bones):
        for k, axis in enumerate(([1, 0, 0], [0, 1, 0], [0, 0, 1])):
            offset = [0.0, 0.0, length if (k == 0 and i > 0) else 0.0]
            links.append(URDFLink(name=f"j{i}{'xyz'[k]}", origin_translation=offset,
                                  origin_orientation=[0, 0, 0], rotation=axis))
    links.append(URDFLink(name="tip", origin_translation=[0, 0, length], origin_orientation=[0, 0, 0],
                          rotation=[0, 0, 1]))
    mask = [False] + [True] * (3 * bones) + [False]
    return IkChain(name="chain", links=links, active_links_mask=mask)


def run(quick: bool = False) -> list[dict]:
    rows = []
    cases = [(10, 0.5, 60 if quick else 300), (30, 0.5, 20 if quick else 100)]
    for bones, length, frames in cases:
        reach = bones * length
        targets = lissajous(frames, reach)
        chain = Chain.from_points(np.array([(0.0, 0.0, length * i) for i in range(bones + 1)]))
        for solver in ("CCD", "FABRIK", "DLS"):
            settings = SolveSettings(max_iterations=200, tolerance=1e-6)
            t0 = time.perf_counter()
            res = ik_bake.bake_chain(chain, targets, solver, settings)
            dt = time.perf_counter() - t0
            rows.append({"library": "Sinew", "solver": solver, "bones": bones, "frames": frames,
                         "ms_per_frame": 1000 * dt / frames, "mean_iterations": float(np.mean(res.iterations)),
                         "max_iterations": int(np.max(res.iterations)), "max_error_m": worst(res.errors)})
        try:
            ch = ikpy_chain(bones, length)
        except ImportError:
            rows.append({"library": "ikpy", "solver": "not installed", "bones": bones, "frames": 0})
            continue
        q = np.zeros(len(ch.links))
        errs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            for target in targets:
                q = ch.inverse_kinematics(target_position=target, initial_position=q)
                errs.append(np.linalg.norm(ch.forward_kinematics(q)[:3, 3] - target))
            dt = time.perf_counter() - t0
        rows.append({"library": "ikpy", "solver": "least squares", "bones": bones, "frames": frames,
                     "ms_per_frame": 1000 * dt / frames, "mean_iterations": float("nan"),
                     "max_iterations": -1, "max_error_m": worst(errs)})
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
