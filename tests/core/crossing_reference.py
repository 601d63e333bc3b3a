"""The numpy reference for triangle crossings: the rule ``sinew_crossing_pairs``
(core/kernels/src/crossing.c, :func:`core.springs.selfcollision.crossing_pairs`) implements,
row by row over every pair, with no broad phase."""

from __future__ import annotations

import numpy as np


def _orient(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Six times the signed volumes of tetrahedra ``(a, b, c, d)``, row by row."""
    return np.einsum("...j,...j->...", np.cross(b - a, c - a), d - a)


def triangles_intersect(t1: np.ndarray, t2: np.ndarray) -> np.ndarray:
    """Whether triangles ``t1[k]`` and ``t2[k]`` intersect, row by row.

    Two triangles in general position intersect exactly when an edge of one passes
    through the other; an edge ``PQ`` passes through ``ABC`` when ``P`` and ``Q`` lie
    strictly on opposite sides of its plane and ``PQ`` turns the same way around all three
    sides (signs of orientation determinants, a volume below ``1e-12 · size³`` counting as
    zero, ``size`` the pair's largest extent along an axis). Coplanar overlaps and mere
    touching are not reported.

    Parameters
    ----------
    t1, t2 : numpy.ndarray
        Shape ``(k, 3, 3)``: corners, m.

    Returns
    -------
    numpy.ndarray
        Shape ``(k,)``, bool.
    """
    out = np.zeros(len(t1), dtype=bool)
    both = np.concatenate([t1, t2], axis=1)
    size = np.max(np.ptp(both, axis=1), axis=1)
    tol = 1e-12 * size**3  # volumes below this count as zero (coplanar, touching)

    def sign(vol: np.ndarray) -> np.ndarray:
        return np.where(np.abs(vol) > tol, np.sign(vol), 0.0)

    for tri, other in ((t1, t2), (t2, t1)):
        a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
        for i, j in ((0, 1), (1, 2), (2, 0)):
            p, q = other[:, i], other[:, j]
            sp, sq = sign(_orient(a, b, c, p)), sign(_orient(a, b, c, q))
            s1 = sign(_orient(p, q, a, b))
            s2 = sign(_orient(p, q, b, c))
            s3 = sign(_orient(p, q, c, a))
            out |= (sp * sq < 0) & (s1 == s2) & (s2 == s3) & (s1 != 0)
    return out


def brute_force_pairs(x: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Every pair ``(i, j)``, ``i < j``, of triangles ``(t, 3)`` at ``x`` ``(n, 3)`` that share
    no vertex and intersect (:func:`triangles_intersect`), sorted by ``i`` then ``j``:
    ``(c, 2)`` int64."""
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    x = np.asarray(x, dtype=np.float64)
    i, j = np.triu_indices(len(tri), k=1)
    share = np.any(tri[i][:, :, None] == tri[j][:, None, :], axis=(1, 2))
    i, j = i[~share], j[~share]
    hit = triangles_intersect(x[tri[i]], x[tri[j]]) if len(i) else np.zeros(0, dtype=bool)
    return np.stack([i[hit], j[hit]], axis=1).astype(np.int64)
