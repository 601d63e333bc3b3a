"""Target trajectories for baking: curve polylines by arc length, and expressions."""

from __future__ import annotations

import numpy as np

from ..errors import ChainError, ExpressionError
from ..expr import compile_expression

__all__ = ["resample_polyline", "expression_targets"]


def resample_polyline(points: np.ndarray, count: int, cyclic: bool = False) -> np.ndarray:
    """Points evenly spaced by arc length along a polyline (a densely evaluated curve).

    Parameters
    ----------
    points : array_like, shape (m, 3)
        Polyline vertices, metres, m >= 1.
    count : int
        Number of output points F >= 1 (one per frame). The first is the start; the last is the
        end (or, if ``cyclic``, one step before returning to the start).
    cyclic : bool
        The polyline closes back to its first point.

    Returns
    -------
    ndarray, shape (F, 3)
    """
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 1:
        raise ChainError(f"curve points must have shape (m, 3), got {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ChainError("curve points are not finite")
    count = int(count)
    if count < 1:
        raise ChainError("count must be >= 1")
    if cyclic:
        p = np.concatenate((p, p[:1]), axis=0)
    seg = np.linalg.norm(np.diff(p, axis=0), axis=1)
    s = np.concatenate(([0.0], np.cumsum(seg)))
    total = s[-1]
    if total <= 0.0:
        return np.repeat(p[:1], count, axis=0)
    if cyclic:
        u = np.arange(count) * (total / count)
    else:
        u = np.linspace(0.0, total, count) if count > 1 else np.zeros(1)
    # Drop zero-length segments so interpolation is well defined.
    keep = np.concatenate(([True], seg > 0))
    s, p = s[keep], p[keep]
    return np.stack([np.interp(u, s, p[:, k]) for k in range(3)], axis=1)


def expression_targets(ex: str, ey: str, ez: str, frames: np.ndarray) -> np.ndarray:
    """Evaluate per-axis target expressions over a frame range.

    ``t`` runs from 0 at the first frame to 1 at the last (0 for a single frame) and
    ``frame`` is the frame number.

    Parameters
    ----------
    ex, ey, ez : str
        Expressions (see :mod:`core.expr`).
    frames : array_like, shape (F,)
        Frame numbers, in order.

    Returns
    -------
    ndarray, shape (F, 3)
        Metres.

    Raises
    ------
    ExpressionError
        A parse error, or a non-finite value (the message names the axis and first frame).
    """
    fr = np.asarray(frames, dtype=np.float64).reshape(-1)
    if fr.size == 0:
        raise ChainError("frames must not be empty")
    if fr.size == 1:
        t = np.zeros(1)
    else:
        t = (fr - fr[0]) / (fr[-1] - fr[0]) if fr[-1] != fr[0] else np.zeros_like(fr)
    out = np.empty((fr.size, 3))
    for k, (axis, text) in enumerate(zip("xyz", (ex, ey, ez))):
        v = compile_expression(text).evaluate(t, fr)
        bad = ~np.isfinite(v)
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ExpressionError(f"expression {axis} is not finite at frame {fr[i]:g}", 0, text)
        out[:, k] = v
    return out
