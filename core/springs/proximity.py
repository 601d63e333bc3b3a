"""Geometry kernels shared by collider contact (:mod:`.contact`) and self-collision
(:mod:`.selfcollision`): one implementation of each.

Broad phase
    :class:`BoxTree` pairs overlapping axis-aligned boxes (of swept primitives) with one
    ``scipy.spatial.cKDTree`` over box centres and a fixed-radius query, the few unusually
    large boxes tested against all; it is built once per set of boxes and queried many
    times (a static collider's index lives for the whole bake). :func:`box_pairs` is the
    one-shot form.

Narrow-phase kernels
    :func:`coplanarity_times`: when four linearly moving points are coplanar, the roots
    in ``[0, 1]`` of the cubic ``det[x₁−x₀, x₂−x₀, x₃−x₀](t)`` (Provot 1997, "Collision
    and self-collision handling in cloth model dedicated to design garments"; Bridson,
    Fedkiw & Anderson 2002, "Robust treatment of collisions, contact and friction for
    cloth animation"), bracketed between the roots of its derivative and bisected;
    :func:`first_coplanar_time` is the earliest of them. :func:`segment_parameters`
    (closest points of two segments) and :func:`closest_points_on_triangles` (closest
    point of a triangle) follow Ericson 2004, "Real-Time Collision Detection", §5.1.9 and
    §5.1.5; :func:`barycentric` gives a point's weights on a triangle.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from .. import kernels

__all__ = ["BoxTree", "PairCache", "points_box", "boxes_meet", "element_boxes", "overlapping", "box_pairs", "coplanarity_times",
           "first_coplanar_time", "segment_parameters", "closest_points_on_triangles", "barycentric", "dot", "unit",
           "BIG"]

#: Sets of at most this many boxes are not indexed: they are tested against every query.
FEW = 16
#: Boxes whose largest side is more than this times the median are tested against all boxes.
BIG = 3.0
#: Bisection steps for a coplanarity root: 2⁻⁴⁰ of the step.
_BISECTIONS = 40

_EMPTY = np.zeros(0, dtype=np.int64)


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot product over the last axis: ``(..., 3), (..., 3) → (...)``."""
    return np.einsum("...j,...j->...", a, b)


def unit(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors ``(k, 3)`` along ``a`` (zero rows stay zero) and the lengths ``(k,)``."""
    ln = np.sqrt(dot(a, a))
    return a / np.where(ln > 0, ln, 1.0)[:, None], ln


# -- broad phase ----------------------------------------------------------------------


def points_box(*points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` ``(3,)``: the box of every point of the ``(k, 3)`` arrays (at least one
    point in all). Column by column: numpy's ``min(axis=0)`` of a ``(k, 3)`` array is about
    ten times slower."""
    lo = np.array([min(float(p[:, a].min()) for p in points if len(p)) for a in range(3)])
    hi = np.array([max(float(p[:, a].max()) for p in points if len(p)) for a in range(3)])
    return lo, hi


def boxes_meet(alo: np.ndarray, ahi: np.ndarray, blo: np.ndarray, bhi: np.ndarray,
               slack: float | np.ndarray = 0.0) -> np.ndarray:
    """Whether boxes ``a`` and ``b`` come within ``slack`` (m) of each other along every axis:
    the one box-overlap test of the broad and narrow phases.

    Corners are given axis first: ``alo[k]`` holds axis ``k`` of the lower corners (a
    ``(3, m)`` array, or the transpose of an ``(m, 3)`` one). Rows broadcast, so ``(3, m)``
    against ``(3, m)`` tests pairs row by row and ``(3, na, 1)`` against ``(3, 1, nb)`` tests
    every pair of two sets; ``slack`` is a scalar or broadcasts the same way. Axis by axis on
    contiguous columns: gathering ``(m, 3)`` rows and reducing them with
    ``numpy.all(axis=1)`` costs about 8 times more.
    """
    ok = (alo[0] <= bhi[0] + slack) & (blo[0] <= ahi[0] + slack)
    for k in (1, 2):
        ok &= (alo[k] <= bhi[k] + slack) & (blo[k] <= ahi[k] + slack)
    return ok


def _overlap(alo: np.ndarray, ahi: np.ndarray, blo: np.ndarray, bhi: np.ndarray) -> np.ndarray:
    """Dense overlap test ``(na, nb)`` of two small sets of boxes ``(na, 3)``, ``(nb, 3)``."""
    return boxes_meet(alo.T[:, :, None], ahi.T[:, :, None], blo.T[:, None, :], bhi.T[:, None, :])


def _overlap_pairs(alo: np.ndarray, ahi: np.ndarray, ia: np.ndarray, blo: np.ndarray, bhi: np.ndarray,
                   ib: np.ndarray) -> np.ndarray:
    """Whether box ``ia[j]`` of the first set overlaps box ``ib[j]`` of the second, ``(k,)``;
    corners axis first, ``(3, n)``."""
    return boxes_meet(alo[:, ia], ahi[:, ia], blo[:, ib], bhi[:, ib])


class BoxTree:
    """Axis-aligned boxes ``(nb, 3)`` indexed for overlap queries (module docstring).

    Two boxes can only overlap when their centres are closer, along every axis, than
    the sum of their largest half-sides (a Chebyshev-distance query). The boxes no larger
    than :data:`BIG` times the median go into one ``scipy.spatial.cKDTree`` of centres,
    paired with the query boxes by one fixed-radius query; the few larger ones (a fast
    primitive) are tested against every query box, as are all the boxes of a set of at
    most :data:`FEW` (a ground plane's two triangles). Candidates are then filtered by
    the exact overlap test.
    Build it once and query it many times (a static collider's triangles).

    Parameters
    ----------
    lo, hi : numpy.ndarray
        Shape ``(nb, 3)``, box corners, m.
    """

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo = np.asarray(lo, dtype=np.float64).reshape(-1, 3)
        self.hi = np.asarray(hi, dtype=np.float64).reshape(-1, 3)
        self.lo_t, self.hi_t = np.ascontiguousarray(self.lo.T), np.ascontiguousarray(self.hi.T)
        r = 0.5 * np.max(self.hi - self.lo, axis=1)
        # a handful of boxes (a ground plane): one dense test against the queries
        self.limit = BIG * float(np.median(r)) + 1e-12 if len(r) > FEW else -1.0
        self.small = np.flatnonzero(r <= self.limit)
        self.big = np.flatnonzero(r > self.limit)
        self.radius = float(r[self.small].max()) if len(self.small) else 0.0
        self.tree = cKDTree(0.5 * (self.lo[self.small] + self.hi[self.small])) if len(self.small) else None

    def pairs(self, alo: np.ndarray, ahi: np.ndarray, subset: np.ndarray | None = None,
              same: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(ia, ib)`` of overlapping boxes: query boxes ``alo, ahi`` ``(na, 3)``
        (only rows ``subset`` if given) against the indexed ones.

        With ``same`` the query boxes are the indexed boxes themselves (no ``subset``):
        pairs within the set, ``ia < ib``.

        Returns
        -------
        ia, ib : numpy.ndarray
            Shape ``(k,)`` each, int64: query box ``ia[j]`` overlaps indexed box ``ib[j]``;
            each pair once.
        """
        rows = np.arange(len(alo)) if subset is None else np.asarray(subset, dtype=np.int64)
        if len(rows) == 0 or len(self.lo) == 0:
            return _EMPTY, _EMPTY
        qlo, qhi = alo[rows], ahi[rows]
        out_a, out_b = [], []
        if same:  # the query set is the indexed set: its small boxes are its tree
            qs, qb = self.small, self.big
            if self.tree is not None:
                pr = self.tree.query_pairs(2.0 * self.radius * (1 + 1e-9), p=np.inf, output_type="ndarray")
                out_a.append(qs[pr[:, 0]])
                out_b.append(qs[pr[:, 1]])
        else:
            rq = 0.5 * np.max(qhi - qlo, axis=1)
            qs, qb = np.flatnonzero(rq <= self.limit), np.flatnonzero(rq > self.limit)
            if self.tree is not None and len(qs):
                radius = (float(rq[qs].max()) + self.radius) * (1 + 1e-9)
                tq = cKDTree(0.5 * (qlo[qs] + qhi[qs]))
                m = tq.sparse_distance_matrix(self.tree, radius, p=np.inf, output_type="ndarray")
                out_a.append(qs[m["i"].astype(np.int64)])
                out_b.append(self.small[m["j"].astype(np.int64)])
        if len(self.big):  # big indexed boxes against every query
            r, c = np.nonzero(_overlap(qlo, qhi, self.lo[self.big], self.hi[self.big]))
            if same:  # a big-big pair once
                keep = ~np.isin(r, self.big) | (r < self.big[c])
                r, c = r[keep], c[keep]
            out_a.append(r)
            out_b.append(self.big[c])
        if len(qb) and len(self.small) and not same:  # big queries against the small indexed boxes
            r, c = np.nonzero(_overlap(qlo[qb], qhi[qb], self.lo[self.small], self.hi[self.small]))
            out_a.append(qb[r])
            out_b.append(self.small[c])
        if not out_a:
            return _EMPTY, _EMPTY
        ia, ib = np.concatenate(out_a).astype(np.int64), np.concatenate(out_b).astype(np.int64)
        if same:
            ia, ib = np.minimum(ia, ib), np.maximum(ia, ib)
            keep = ia < ib
            ia, ib = ia[keep], ib[keep]
        ok = _overlap_pairs(np.ascontiguousarray(qlo.T), np.ascontiguousarray(qhi.T), ia,
                            self.lo_t, self.hi_t, ib)
        return rows[ia[ok]], ib[ok]


def element_boxes(lo: np.ndarray, hi: np.ndarray, elements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes ``(m, 3)`` of elements (rows of vertex indices ``(m, c)``: triangles, edges)
    from their vertices' boxes ``lo, hi`` ``(n, 3)``: the smallest ``lo`` and largest ``hi``
    over each element's vertices, column by column (``lo[elements].min(axis=1)`` reduces
    over a short axis, several times slower)."""
    blo, bhi = lo[elements[:, 0]], hi[elements[:, 0]]
    for c in range(1, elements.shape[1]):
        np.minimum(blo, lo[elements[:, c]], out=blo)
        np.maximum(bhi, hi[elements[:, c]], out=bhi)
    return blo, bhi


def overlapping(alo: np.ndarray, ahi: np.ndarray, ia: np.ndarray, blo: np.ndarray, bhi: np.ndarray,
                ib: np.ndarray) -> np.ndarray:
    """Whether box ``ia[j]`` of ``alo, ahi`` ``(na, 3)`` overlaps box ``ib[j]`` of ``blo, bhi``
    ``(nb, 3)``: the exact test of a candidate pair, shape ``(k,)`` bool."""
    return _overlap_pairs(np.ascontiguousarray(alo.T), np.ascontiguousarray(ahi.T), ia,
                          np.ascontiguousarray(blo.T), np.ascontiguousarray(bhi.T), ib)


class PairCache:
    """Candidate pairs of query boxes against one :class:`BoxTree`, kept between queries.

    Each query row (a cloth vertex, edge or face) remembers the indexed boxes that overlap
    a grown copy of its box. A later query whose box still lies inside that grown box is
    answered from those candidates with the exact overlap test alone (every indexed box
    it overlaps overlaps the grown one); only rows that left their grown box query the
    tree again. So the passes of a contact step, and a second pass over the vertices a
    later stage moved, cost one tree query, and a collider kept across steps (a static
    one) queries again only where the cloth moved. The pairs of each tree query are kept
    sorted by row then indexed box: their order does not depend on the tree, so a subset
    of the indexed boxes numbered in the same order gives its pairs in the same order
    (the contact stage's response depends on the order it meets its pairs in).

    Parameters
    ----------
    tree : BoxTree
    rows : int
        Number of query rows.
    """

    def __init__(self, tree: BoxTree, rows: int) -> None:
        self.tree = tree
        self.rows = rows
        self.glo = np.full((rows, 3), np.inf)  # nothing inside: every row queries first
        self.ghi = np.full((rows, 3), -np.inf)
        self.ia, self.ib = _EMPTY, _EMPTY

    def pairs(self, lo: np.ndarray, hi: np.ndarray, subset: np.ndarray,
              grow: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(ia, ib)`` of query boxes ``lo, hi`` ``(rows, 3)`` (only rows ``subset``)
        overlapping indexed boxes, as :meth:`BoxTree.pairs` gives them (in another order);
        ``subset`` holds distinct rows.

        ``grow`` (m; scalar, ``(rows,)`` or ``(rows, 3)``): how far a re-queried row's box is
        grown for the candidates it keeps (room for the motion of the following queries).
        """
        rows = np.asarray(subset, dtype=np.int64)
        if len(rows) == 0 or len(self.tree.lo) == 0:
            return _EMPTY, _EMPTY
        glo, ghi = self.glo, self.ghi
        inside = lo[rows, 0] >= glo[rows, 0]
        for k in (1, 2):
            inside &= lo[rows, k] >= glo[rows, k]
        for k in (0, 1, 2):
            inside &= hi[rows, k] <= ghi[rows, k]
        stale = rows[~inside]
        if len(stale):
            g = np.asarray(grow, dtype=np.float64)
            g = g[stale] if g.ndim else g
            g = g[:, None] if g.ndim == 1 else g
            glo[stale], ghi[stale] = lo[stale] - g, hi[stale] + g
            ia, ib = self.tree.pairs(glo, ghi, stale)
            order = np.argsort(ia * len(self.tree.lo) + ib, kind="stable")  # whatever the traversal
            ia, ib = ia[order], ib[order]
            gone = np.zeros(self.rows, bool)
            gone[stale] = True
            keep = ~gone[self.ia]
            self.ia = np.concatenate([self.ia[keep], ia])
            self.ib = np.concatenate([self.ib[keep], ib])
        if len(rows) == self.rows:  # every row (no row twice): every cached pair
            ia, ib = self.ia, self.ib
        else:
            want = np.zeros(self.rows, bool)
            want[rows] = True
            sel = want[self.ia]
            ia, ib = self.ia[sel], self.ib[sel]
        ok = _overlap_pairs(np.ascontiguousarray(lo.T), np.ascontiguousarray(hi.T), ia,
                            self.tree.lo_t, self.tree.hi_t, ib)
        return ia[ok], ib[ok]


def box_pairs(lo_a: np.ndarray, hi_a: np.ndarray, lo_b: np.ndarray | None = None,
              hi_b: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs of overlapping axis-aligned boxes (see :class:`BoxGrid`).

    Parameters
    ----------
    lo_a, hi_a : numpy.ndarray
        Shape ``(a, 3)``, box corners, m.
    lo_b, hi_b : numpy.ndarray, optional
        Shape ``(b, 3)``; omitted: pairs within the first set, ``i < j``.

    Returns
    -------
    ia, ib : numpy.ndarray
        Shape ``(k,)`` each, int64: box ``ia[r]`` of the first set overlaps box ``ib[r]``
        of the second (of the first, with ``ia < ib``); every pair once.
    """
    if lo_b is None or hi_b is None:
        return BoxTree(lo_a, hi_a).pairs(lo_a, hi_a, same=True)
    return BoxTree(lo_b, hi_b).pairs(lo_a, hi_a)


# -- continuous collision: coplanarity of four moving points ---------------------------


def _cubic(c: tuple[np.ndarray, ...], t: np.ndarray) -> np.ndarray:
    return ((c[3] * t + c[2]) * t + c[1]) * t + c[0]


def coplanarity_times(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """Times in ``[0, 1]`` at which four linearly moving points are coplanar.

    Parameters
    ----------
    p0, p1 : numpy.ndarray
        Shape ``(k, 4, 3)``, the points at the start and the end of the step, m.

    Returns
    -------
    numpy.ndarray
        Shape ``(k, 3)``, up to three times per row in increasing order, ``nan`` where
        none.

    Notes
    -----
    ``f(t) = (u × v)·w`` with ``u, v, w`` the vectors from point 0 to points 1, 2, 3 is a
    cubic in ``t`` whose coefficients follow from the products of the start vectors and
    their displacements. ``[0, 1]`` is cut at the roots of ``f′`` into three monotone
    pieces; a piece whose ends differ in sign, or touch zero (``|f|`` below ``1e-12`` of
    the coefficients' size, so rounding cannot hide a contact at an end), is bisected.
    Rows whose four Bernstein coefficients on ``[0, 1]`` share a sign, all further than
    twice that tolerance from zero, have no root (``f`` lies between the smallest and
    the largest of them: Farin 2002, "Curves and Surfaces for CAGD", the convex hull
    property) and are answered ``nan`` before that work: most candidate pairs of a step.
    """
    out = np.full((len(p0), 3), np.nan)
    dp = p1 - p0
    u0, v0, w0 = (p0[:, i] - p0[:, 0] for i in (1, 2, 3))
    du, dv, dw = (dp[:, i] - dp[:, 0] for i in (1, 2, 3))
    uv0 = np.cross(u0, v0)
    mix = np.cross(du, v0) + np.cross(u0, dv)
    duv = np.cross(du, dv)
    c = (dot(uv0, w0), dot(mix, w0) + dot(uv0, dw), dot(duv, w0) + dot(mix, dw), dot(duv, dw))
    scale = np.abs(c[0]) + np.abs(c[1]) + np.abs(c[2]) + np.abs(c[3])
    b1, b2 = c[0] + c[1] / 3.0, c[0] + (2.0 * c[1] + c[2]) / 3.0
    b3 = c[0] + c[1] + c[2] + c[3]
    margin = 2e-12 * scale
    lo_b = np.minimum(np.minimum(c[0], b1), np.minimum(b2, b3))
    hi_b = np.maximum(np.maximum(c[0], b1), np.maximum(b2, b3))
    maybe = np.flatnonzero((lo_b <= margin) & (hi_b >= -margin))
    if len(maybe) == 0:
        return out
    c, scale = tuple(ci[maybe] for ci in c), scale[maybe]
    out[maybe] = _cubic_roots(c, scale)
    return out


def _cubic_roots(c: tuple[np.ndarray, ...], scale: np.ndarray) -> np.ndarray:
    """Roots ``(k, 3)`` in ``[0, 1]`` of the cubics ``c₀ + c₁t + c₂t² + c₃t³`` (coefficients
    ``(k,)`` each, ``scale`` the sum of their sizes), as :func:`coplanarity_times` finds them."""
    k = len(scale)
    # roots of f'(t) = 3 c3 t² + 2 c2 t + c1
    qa, qb, qc = 3.0 * c[3], 2.0 * c[2], c[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = qb * qb - 4.0 * qa * qc
        sq = np.sqrt(np.maximum(disc, 0.0))
        quad = np.abs(qa) > 1e-12 * scale
        r1 = np.where(quad, (-qb - sq) / (2.0 * qa), np.where(np.abs(qb) > 0, -qc / qb, np.nan))
        r2 = np.where(quad, (-qb + sq) / (2.0 * qa), np.nan)
        r1 = np.where(quad & (disc < 0), np.nan, r1)
        r2 = np.where(quad & (disc < 0), np.nan, r2)
    crit = np.stack([r1, r2], axis=1)
    crit = np.where((crit > 0.0) & (crit < 1.0), crit, 1.0)  # outside: a zero-length piece
    # 0, the two roots in order (both in (0, 1]), 1: the sorted break points
    brk = np.empty((k, 4))
    brk[:, 0], brk[:, 3] = 0.0, 1.0
    brk[:, 1], brk[:, 2] = np.minimum(crit[:, 0], crit[:, 1]), np.maximum(crit[:, 0], crit[:, 1])
    lo, hi = brk[:, :3], brk[:, 1:]
    cb = tuple(ci[:, None] for ci in c)
    flo, fhi = _cubic(cb, lo), _cubic(cb, hi)
    tol = 1e-12 * scale[:, None]
    at_lo = np.abs(flo) <= tol
    has = (hi >= lo) & ((flo * fhi <= 0) | at_lo | (np.abs(fhi) <= tol))
    out = np.full((k, 3), np.nan)
    rows, piece = np.nonzero(has)
    if len(rows) == 0:
        return out
    cs = tuple(ci[rows] for ci in c)
    lo, hi, flo, at_lo = lo[rows, piece], hi[rows, piece], flo[rows, piece], at_lo[rows, piece]
    t_lo = lo.copy()
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        fm = _cubic(cs, mid)
        left = flo * fm <= 0
        hi = np.where(left, mid, hi)
        lo = np.where(left, lo, mid)
        flo = np.where(left, flo, fm)
    out[rows, piece] = np.where(at_lo, t_lo, 0.5 * (lo + hi))
    return out


def first_coplanar_time(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """Earliest time ``(k,)`` in ``[0, 1]`` at which four linearly moving points
    ``(k, 4, 3)`` (at the start and end of the step) are coplanar, ``nan`` where never
    (see :func:`coplanarity_times`)."""
    t = coplanarity_times(p0, p1)
    first = np.argmax(np.isfinite(t), axis=1)
    return t[np.arange(len(t)), first]


# -- closest points ----------------------------------------------------------------------


def segment_parameters(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray,
                       q1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parameters of the closest points of segments ``p0p1`` and ``q0q1``, row by row.

    Vectorised form of Ericson 2004, "Real-Time Collision Detection", §5.1.9; parallel
    and degenerate (point) segments are handled.

    Parameters
    ----------
    p0, p1, q0, q1 : numpy.ndarray
        Shape ``(k, 3)``, m.

    Returns
    -------
    s, u : numpy.ndarray
        Shape ``(k,)`` each, in ``[0, 1]``: the closest points are ``p0 + s (p1 − p0)``
        and ``q0 + u (q1 − q0)``.
    """
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a, e, f = dot(d1, d1), dot(d2, d2), dot(d2, r)
    c, b = dot(d1, r), dot(d1, d2)
    tiny = 1e-300
    den = a * e - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(den > 1e-12 * a * e + tiny, np.clip((b * f - c * e) / den, 0.0, 1.0), 0.0)
        u = np.where(e > tiny, (b * s + f) / e, 0.0)
        s_lo = np.where(a > tiny, np.clip(-c / a, 0.0, 1.0), 0.0)
        s_hi = np.where(a > tiny, np.clip((b - c) / a, 0.0, 1.0), 0.0)
    s = np.where(u < 0.0, s_lo, np.where(u > 1.0, s_hi, s))
    s = np.where(e > tiny, s, s_lo)  # q a point: p's point nearest it (u is 0)
    return np.nan_to_num(s), np.clip(np.nan_to_num(u), 0.0, 1.0)


def barycentric(p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Barycentric weights ``(k, 3)`` of ``p`` projected onto the planes of triangles
    ``(a, b, c)`` (all ``(k, 3)``); not clamped (a negative weight: outside that side).
    A degenerate (zero-area) triangle gives ``(1/3, 1/3, 1/3)``."""
    v0, v1, v2 = b - a, c - a, p - a
    d00, d01, d11 = dot(v0, v0), dot(v0, v1), dot(v1, v1)
    d20, d21 = dot(v2, v0), dot(v2, v1)
    den = d00 * d11 - d01 * d01
    ok = den > 1e-14 * d00 * d11 + 1e-300
    with np.errstate(divide="ignore", invalid="ignore"):
        wb = np.where(ok, (d11 * d20 - d01 * d21) / den, 1.0 / 3.0)
        wc = np.where(ok, (d00 * d21 - d01 * d20) / den, 1.0 / 3.0)
    return np.stack([1.0 - wb - wc, wb, wc], axis=1)


def closest_points_on_triangles(p: np.ndarray, a: np.ndarray, b: np.ndarray,
                                c: np.ndarray) -> np.ndarray:
    """Closest point on triangle ``(a, b, c)`` to ``p``, row by row: the compiled kernel
    (``sinew_closest_points``, the Voronoi-region test of Ericson 2004, "Real-Time Collision
    Detection", §5.1.5; a collapsed triangle gives the nearest point of its edges).

    Parameters
    ----------
    p, a, b, c : numpy.ndarray
        Shape ``(k, 3)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(k, 3)``.
    """
    p, a, b, c = (np.ascontiguousarray(v, dtype=np.float64) for v in (p, a, b, c))
    q, bary = np.empty_like(p), np.empty_like(p)
    kernels.check_status(kernels.library().sinew_closest_points(
        len(p), p.ctypes.data, a.ctypes.data, b.ctypes.data, c.ctypes.data, q.ctypes.data,
        bary.ctypes.data), "closest points")
    return q
