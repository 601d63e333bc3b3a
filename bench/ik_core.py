"""Benchmark: core IK bake of a 10-bone chain following a 3-D Lissajous target, and pose quality.

The setup of ../shared/ANCHORS.md (Blender's own IK: 1,000 frames in ~0.35 s, 3e-3 m max tip
error): a connected chain of ten 0.5 m bones along +Y, the target on a Lissajous path kept
mostly within reach. Run from the repository root::

    python bench/ik_core.py [--quick]

Prints a markdown table; :func:`run` returns the rows for the top-level bench. Per solver:
the bake's time and accuracy, and the quality figures of issue 13:

* loop closure: the Lissajous path is closed (its first target repeated as the last frame);
  the largest joint angle between the first and last frame's poses (Blender: 0.06 degrees);
* max twist: the largest rotation of any bone about its own axis over the bake (a position
  goal never demands twist; Blender: 0 degrees);
* hinge error: a 3-bone arm with a Rigify hinge elbow (``lock_ik_y`` + ``lock_ik_z``) baked to
  200 targets it can reach; the largest tip error.

``default`` marks :data:`core.ik.DEFAULT_SOLVER`.
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
from core.ik import DEFAULT_SOLVER, SOLVERS, Chain, JointLimits, SolveSettings, forward_kinematics_batch  # noqa: E402
from core.ik.bake import bake_chain  # noqa: E402
from core.ik.limits import clamp, limit_angles  # noqa: E402


def lissajous(frames: int) -> np.ndarray:
    """Target path, shape (frames, 3), metres: stays 1.5-4.6 m from the root (reach 5 m)."""
    s = np.linspace(0.0, 2.0 * np.pi, frames, endpoint=False)
    return np.stack((2.2 * np.sin(3 * s + 0.5), 3.0 + 1.2 * np.sin(2 * s), 1.8 * np.sin(5 * s)), axis=1)


def hinge_arm() -> tuple[Chain, np.ndarray]:
    """A Rigify-like arm (T-pose along +X, elbow bent a little back) with a hinge elbow, and 200
    targets it reaches (FK of random poses within its limits)."""
    lock = np.zeros((3, 3), bool)
    lock[1] = (False, True, True)
    lim = JointLimits(lock, np.zeros((3, 3), bool), np.zeros((3, 3)), np.zeros((3, 3)))
    chain = Chain.from_points(np.array([[0.0, 0, 0], [0.3, -0.03, 0], [0.6, 0, 0], [0.7, 0, 0]]), lim)
    rng = np.random.default_rng(0)
    q = clamp(quat.from_rotvec(rng.normal(scale=0.6, size=(200, 3, 3))), lim)
    return chain, forward_kinematics_batch(chain, q)[:, -1]


def run(quick: bool = False) -> list[dict]:
    """Bake the Lissajous path with every solver; measure the quality figures.

    Parameters
    ----------
    quick : bool
        200 frames instead of 1,000.

    Returns
    -------
    list of dict
        One row per solver: solver, frames, seconds (best of 3), ms_per_frame,
        mean_iterations, max_iterations, max_error_m, converged_fraction, max_step_deg (largest
        joint turn between consecutive frames), loop_closure_deg, max_twist_deg,
        hinge_error_m, default.
    """
    frames = 200 if quick else 1000
    pts = np.zeros((11, 3))
    pts[:, 1] = np.arange(11) * 0.5
    chain = Chain.from_points(pts)
    targets = lissajous(frames)
    closed = np.concatenate((targets, targets[:1]), axis=0)
    settings = SolveSettings(max_iterations=100, tolerance=1e-4)
    arm, arm_targets = hinge_arm()
    rows = []
    for name in SOLVERS:
        best = np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            res = bake_chain(chain, targets, name, settings)
            best = min(best, time.perf_counter() - t0)
        steps = quat.angle_between(res.rotations[:-1], res.rotations[1:]).max(axis=1)
        loop = bake_chain(chain, closed, name, settings)
        closure = quat.angle_between(loop.rotations[0], loop.rotations[-1]).max()
        twist = np.abs(limit_angles(res.rotations)[..., 1]).max()
        hinge = bake_chain(arm, arm_targets, name, SolveSettings(max_iterations=100, tolerance=1e-5))
        rows.append({
            "solver": name, "frames": frames, "seconds": best,
            "ms_per_frame": 1e3 * best / frames, "mean_iterations": float(res.iterations.mean()),
            "max_iterations": int(res.iterations.max()), "max_error_m": float(res.errors.max()),
            "converged_fraction": float(res.converged.mean()),
            "max_step_deg": float(np.degrees(steps.max())), "loop_closure_deg": float(np.degrees(closure)),
            "max_twist_deg": float(np.degrees(twist)), "hinge_error_m": float(hinge.errors.max()),
            "default": name == DEFAULT_SOLVER,
        })
    return rows


def main(argv: list[str]) -> None:
    rows = run("--quick" in argv)
    print("| solver | frames | time (s) | ms/frame | mean iter | max iter | max tip error (m) | converged "
          "| max joint step (deg) | loop closure (deg) | max twist (deg) | hinge error (m) | default |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['solver']} | {r['frames']} | {r['seconds']:.3f} | {r['ms_per_frame']:.3f} | "
              f"{r['mean_iterations']:.2f} | {r['max_iterations']} | {r['max_error_m']:.2e} | "
              f"{100 * r['converged_fraction']:.1f}% | {r['max_step_deg']:.1f} | {r['loop_closure_deg']:.2g} | "
              f"{r['max_twist_deg']:.2g} | {r['hinge_error_m']:.1e} | {'yes' if r['default'] else ''} |")


if __name__ == "__main__":
    main(sys.argv[1:])
