"""Benchmark: spring bones in core (``core.springbones``): the presets' look, and bake speed.

Run from the repository root::

    python bench/spring_bones.py [--quick]

Two parts, one table each (:func:`run` returns both as rows):

* **presets** — a 5-bone tail of 0.1 m bones pointing back (−Y) from a parent that is carried
  1 m along +X in 0.5 s (smoothstep) and then stops, 24 fps, each preset's own settings: the
  largest lag of the tip behind its animated place while carried, its overshoot past the
  animated place after the stop (along the motion), the time until it stays within 1 cm of
  its resting place, the tip's sag below the animated pose at rest, and the length error.
* **speed** — three characters, 80 spring bones in all (a 6-bone tail, a 5-bone ponytail and
  two 3-bone ears on each of two characters, 17 bones each; straps and antennae of 2-4 bones,
  46 in all, on the third), their parents swinging and travelling, 250 frames, each chain on its preset: bake
  time (best of 3), bone-frames per second, length error of the chains with ``stretch`` 0,
  max angular speed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from blender_addon.springbones.preset_table import PRESETS  # noqa: E402
from core import quat  # noqa: E402
from core.ik.chain import Chain  # noqa: E402
from core.springbones import SpringChain, SpringSettings, bake_spring_chains  # noqa: E402

FPS = 24.0
GRAVITY = np.array([0.0, 0.0, -9.81])


def _chain(n: int, length: float, direction) -> Chain:
    d = np.asarray(direction, dtype=np.float64)
    return Chain.from_points(np.arange(n + 1)[:, None] * length * d / np.linalg.norm(d))


def _settings(name: str, lead: int) -> SpringSettings:
    p = dict(PRESETS[name])
    p["pre_roll"] = min(int(p["pre_roll"]), lead)
    return SpringSettings(**p)


def preset_look(name: str) -> dict:
    """The carried-and-stopped tail of the module docstring on preset ``name``."""
    lead, frames = 24, 24 * 4
    total = lead + frames
    s = np.clip((np.arange(total) - lead) / 12.0, 0.0, 1.0)
    root = np.c_[3 * s**2 - 2 * s**3, np.zeros(total), np.ones(total)]
    chain = _chain(5, 0.1, (0.0, -1.0, 0.0))
    sc = SpringChain(chain, quat.identity((total, 5)), quat.identity((total,)), root, _settings(name, lead), name)
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=GRAVITY, frames=frames)
    tip, anim = r.joints[:, -1], r.animated[:, -1]
    rest = tip[-1]
    moving = slice(0, 13)
    after = slice(13, None)
    off = np.linalg.norm(tip - rest, axis=1)
    settled = np.flatnonzero(off[13:] > 0.01)
    return {"part": "presets", "preset": name,
            "lag_m": float(np.linalg.norm(tip[moving] - anim[moving], axis=1).max()),
            "overshoot_m": float(max(0.0, (tip[after, 0] - rest[0]).max())),
            "settle_s": float((settled[-1] + 1) / FPS) if len(settled) else 0.0,
            "sag_m": float(anim[-1, 2] - rest[2]),
            "length_error": r.length_error}


def _swinging(n: int, length: float, direction, frames: int, settings: SpringSettings, phase: float,
              origin) -> SpringChain:
    t = np.arange(frames) / FPS
    angle = np.radians(35.0) * np.sin(2 * np.pi * (0.8 + 0.1 * phase) * t + phase)
    axis = np.tile([np.cos(phase), np.sin(phase), 0.0], (frames, 1))
    travel = np.c_[0.8 * t, 0.1 * np.sin(4 * t + phase), 0.05 * np.abs(np.sin(6 * t))]
    return SpringChain(_chain(n, length, direction), quat.identity((frames, n)), quat.from_axis_angle(axis, angle),
                       np.asarray(origin, dtype=np.float64) + travel, settings, f"chain{phase:.2f}")


def characters(frames: int) -> list[SpringChain]:
    """The three characters of the module docstring: 80 bones."""
    chains = []
    for c in range(2):
        o = np.array([3.0 * c, 0.0, 1.0])
        chains.append(_swinging(6, 0.1, (0, -1, -0.3), frames, _settings("TAIL", 0), 0.1 + c, o))
        chains.append(_swinging(5, 0.06, (0, -0.3, -1), frames, _settings("HAIR", 0), 0.7 + c, o + (0, 0, 0.7)))
        for side in (-1, 1):
            chains.append(_swinging(3, 0.04, (0.3 * side, 0, 1), frames, _settings("EAR", 0), 1.3 + c + side,
                                    o + (0.08 * side, 0, 0.8)))
    bones, k = 0, 0
    o = np.array([6.0, 0.0, 1.0])
    while bones < 46:
        n = min(2 + k % 3, 46 - bones)
        kind = "STRAP" if k % 2 else "ANTENNA"
        direction = (0, 0, -1) if kind == "STRAP" else (0, 0, 1)
        chains.append(_swinging(n, 0.05, direction, frames, _settings(kind, 0), 0.3 * k, o + (0.1 * k, 0, 0)))
        bones += n
        k += 1
    return chains


def speed(frames: int) -> dict:
    chains = characters(frames)
    bones = sum(c.chain.n for c in chains)
    best, results = np.inf, None
    for _ in range(3):
        t0 = time.perf_counter()
        results = bake_spring_chains(chains, fps=FPS, gravity=GRAVITY, frames=frames)
        best = min(best, time.perf_counter() - t0)
    spin = max(float(2.0 * np.arccos(np.clip(np.abs(np.einsum("fni,fni->fn", r.rotations[1:], r.rotations[:-1])),
                                             -1, 1)).max() * FPS) for r in results)
    return {"part": "speed", "chains": len(chains), "bones": bones, "frames": frames, "seconds": best,
            "bone_frames_per_s": bones * frames / best,
            "length_error_rigid": max(r.length_error for r, c in zip(results, chains) if c.settings.stretch == 0),
            "max_angular_speed_deg_s": float(np.degrees(spin))}


def run(quick: bool = False) -> list[dict]:
    """The preset rows, then the speed row (``quick``: 60 frames instead of 250)."""
    rows = [preset_look(name) for name in PRESETS]
    rows.append(speed(60 if quick else 250))
    return rows


def goals(rows: list[dict]) -> list[str]:
    """The headline: issue 31's goal of under 1 s for ~80 bones over 250 frames."""
    out = []
    for r in rows:
        if r["part"] == "speed" and r["frames"] == 250:
            ok = "met" if r["seconds"] < 1.0 else "NOT met"
            out.append(f"spring bones in core: {r['bones']} bones, 250 frames in {r['seconds']:.2f} s (goal < 1 s: "
                       f"{ok}), length error of the rigid chains {100 * r['length_error_rigid']:.3f} %")
    return out


def _table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        lines.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r.values()) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    rows = run("--quick" in sys.argv)
    print(_table([r for r in rows if r["part"] == "presets"]))
    print()
    print(_table([r for r in rows if r["part"] == "speed"]))
    for line in goals(rows):
        print(line)
