"""Cloth self-collision: proximity and continuous detection, impulses, a failsafe.

The stage runs after every step, once collider contact and pins are done (see
:meth:`.simulate.Simulator.advance`). It sees the positions at the start of the step
``x₀`` (free of crossings), the solver's end positions ``x₁`` and velocities ``v₁``, and
changes ``x₁`` and ``v₁`` in place so that no two non-neighbouring triangles cross at the
end of the step. It only needs positions and velocities, so it applies in the same way
after every integrator, EXPLICIT and SYMPLECTIC included (their steps end with the same
``x₁, v₁``; their large velocities at few substeps just mean longer sweeps and more work
for the failsafe).

Primitives and neighbours
    Pairs are vertex–triangle (VF) and edge–edge (EE) over the fan triangles of the
    mesh's polygons. A pair is *neighbouring*, and never tested, when it shares a vertex
    or when its two parts are closer than ``2 · distance`` in the rest shape (so a fine
    mesh does not push its own flat neighbourhood apart).

Broad phase
    Axis-aligned boxes around each primitive's sweep ``x₀ → x₁``, grown by ``distance``;
    box pairs come from ``scipy.spatial.cKDTree`` over the box centres
    (:func:`box_pairs`), with the few unusually large (fast) boxes tested against all.

Narrow phase
    Proximity: closest points at ``x₀`` and ``x₁`` (Ericson 2004, "Real-Time Collision
    Detection", §5.1.5 and §5.1.9). Continuous: the four points of a pair move linearly
    over the step; they are coplanar where the cubic ``det[x₁−x₀, x₂−x₀, x₃−x₀](t)``
    vanishes (Provot 1997, "Collision and self-collision handling in cloth model
    dedicated to design garments"; Bridson, Fedkiw & Anderson 2002, "Robust treatment of
    collisions, contact and friction for cloth animation"). Its roots in ``[0, 1]`` are
    bracketed between the roots of its derivative and found by bisection (no closed-form
    cubic, so no cancellation); at each root the pair collides when its distance is below
    ``1e-6`` m.

Response (Bridson et al. 2002)
    Every pair closer than ``distance`` at the start or at the end of the step, or
    colliding during it, becomes a constraint ``n · Σₖ αₖ xₖ ≥ target`` on its four
    vertices: ``α`` are ``(1, −w_a, −w_b, −w_c)`` for VF and ``(1−s, s, −(1−u), −u)``
    for EE (barycentric weights and edge parameters), ``n`` the direction between the
    closest points (at the end of the step when the pair did not collide on the way, so
    its sides are known; else at ``x₀``) or, for a collision, the normal at the time of
    impact turned to the side the pair started on (for nearly parallel edges, the
    direction they started apart in). The target is ``distance``, but never more than the
    pair's own gap along ``n`` at the start of the step plus a tenth of ``distance``: the
    projection takes back this step's approach and lets a squeezed pair recover over a few
    steps, instead of pushing it apart at once (which would store energy in the springs).
    Violated constraints are projected with mass-weighted corrections
    ``Δxₖ = λ αₖ n / mₖ`` (Jacobi; each pair's share divided by the most violated pairs any
    of its vertices is in), which leave the centre of mass where it was; pinned vertices
    have infinite mass. In contact, the approaching normal velocity is removed by the same
    kind of impulse (inelastic); the velocity change is scaled down if it would add
    kinetic energy, so the impulses never add energy. Up to three rounds of detection and
    projection run per step.

Failsafe
    If continuous detection still finds a collision after the iterations, the free
    vertices of the offending pairs go back to their start-of-step positions with zero
    velocity (a state known to be crossing-free), repeated until no collision is left. A
    simple alternative to rigid impact zones (Provot 1997): it cannot fail, at the price of
    momentum in those vertices. The one case it cannot fix is pinned vertices driven
    through the mesh (pins are hard).

Colliders
    The stage runs after collider contact and does not know the colliders: its
    projection can press the lowest layer of a heap into a collider, from where the next
    step's collider contact lifts it out again (a collider that projects to its nearest
    surface may push a vertex pressed deep into a small body out of its far side).
    Resolving colliders once more after the projection was tried: it flattens stacked
    layers into the collider's surface.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from ..errors import SinewError
from .colliders import closest_points_on_triangles

__all__ = ["SelfCollision", "SelfCollisionReport", "box_pairs", "closest_params_on_segments",
           "coplanarity_times", "triangles_intersect", "crossing_pairs", "count_crossings",
           "mesh_edges"]

#: m: distance at the time of coplanarity below which a pair collides.
CCD_TOLERANCE = 1e-6
#: Fraction of the distance a projected gap may fall short of it (and still count as
#: touching above it).
_SLACK = 0.02
#: Fraction of the distance a pair closer than it at the start of a step regains per step.
_RECOVERY = 0.1
#: Bisection steps for the coplanarity roots (2⁻³² of the step).
_BISECTIONS = 32
#: Inverse Vandermonde matrix of the nodes t = 0, 1/3, 2/3, 1: values → cubic coefficients.
_VINV = np.linalg.inv(np.vander(np.array([0.0, 1 / 3, 2 / 3, 1.0]), 4, increasing=True))


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...j,...j->...", a, b)


def mesh_edges(triangles: np.ndarray) -> np.ndarray:
    """Unique edges ``(e, 2)`` (rows ``i < j``) of triangles ``(t, 3)``."""
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    e = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    e = np.sort(e, axis=1)
    return np.unique(e, axis=0) if len(e) else np.zeros((0, 2), dtype=np.int64)


# -- broad phase ----------------------------------------------------------------------


def box_pairs(lo_a: np.ndarray, hi_a: np.ndarray, lo_b: np.ndarray | None = None,
              hi_b: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs of overlapping axis-aligned boxes.

    Box centres go into a ``cKDTree``; two boxes can only overlap when their centres are
    closer than the sum of their half-diagonals, so the boxes no larger than 3 times the
    median are paired by one fixed-radius tree query, and the few larger ones (fast
    primitives) are tested against every box. The candidates are then filtered by
    the exact overlap test.

    Parameters
    ----------
    lo_a, hi_a : numpy.ndarray
        Shape ``(a, 3)``, box corners, m.
    lo_b, hi_b : numpy.ndarray, optional
        Shape ``(b, 3)``; omitted: pairs within the first set, ``i < j``.

    Returns
    -------
    ia, ib : numpy.ndarray
        Shape ``(k,)`` each, int64: box ``ia[r]`` of the first set overlaps box ``ib[r]``;
        every pair once.
    """
    same = lo_b is None or hi_b is None
    if lo_b is None or hi_b is None:
        lo_b, hi_b = lo_a, hi_a
    empty = np.zeros(0, dtype=np.int64)
    if len(lo_a) == 0 or len(lo_b) == 0:
        return empty, empty
    ra = 0.5 * np.linalg.norm(hi_a - lo_a, axis=1)
    rb = ra if same else 0.5 * np.linalg.norm(hi_b - lo_b, axis=1)
    r_all = np.concatenate([ra, rb])
    thr = min(float(r_all.max()), 3.0 * float(np.median(r_all))) + 1e-12
    sa, sb = np.flatnonzero(ra <= thr), np.flatnonzero(rb <= thr)
    parts_a, parts_b = [], []
    if len(sa) and len(sb):
        radius = float(ra[sa].max() + rb[sb].max()) * (1 + 1e-9)
        ta = cKDTree(0.5 * (lo_a[sa] + hi_a[sa]))
        if same:
            pr = ta.query_pairs(radius, output_type="ndarray")
            parts_a.append(sa[pr[:, 0]])
            parts_b.append(sa[pr[:, 1]])
        else:
            tb = cKDTree(0.5 * (lo_b[sb] + hi_b[sb]))
            pr = ta.sparse_distance_matrix(tb, radius, output_type="ndarray")
            parts_a.append(sa[pr["i"].astype(np.int64)])
            parts_b.append(sb[pr["j"].astype(np.int64)])
    big_a, big_b = np.flatnonzero(ra > thr), np.flatnonzero(rb > thr)
    if len(big_a):  # big boxes of the first set against the whole second set
        hit = np.all((lo_a[big_a, None, :] <= hi_b[None]) & (lo_b[None] <= hi_a[big_a, None, :]),
                     axis=2)
        if same:  # each pair once: big-small both ways round, big-big with i < j
            other_big = rb[None, :] > thr
            hit &= ~other_big | (big_a[:, None] < np.arange(len(lo_b))[None, :])
        r, c = np.nonzero(hit)
        parts_a.append(big_a[r])
        parts_b.append(c)
    if len(big_b) and not same:  # big boxes of the second set against the small first set
        hit = np.all((lo_b[big_b, None, :] <= hi_a[None, sa]) & (lo_a[None, sa] <= hi_b[big_b, None, :]),
                     axis=2)
        r, c = np.nonzero(hit)
        parts_a.append(sa[c])
        parts_b.append(big_b[r])
    if not parts_a:
        return empty, empty
    ia = np.concatenate(parts_a).astype(np.int64)
    ib = np.concatenate(parts_b).astype(np.int64)
    if same:
        ia, ib = np.minimum(ia, ib), np.maximum(ia, ib)
    ok = np.all((lo_a[ia] <= hi_b[ib]) & (lo_b[ib] <= hi_a[ia]), axis=1)
    return ia[ok], ib[ok]


# -- narrow-phase kernels ------------------------------------------------------------


def closest_params_on_segments(p1: np.ndarray, q1: np.ndarray, p2: np.ndarray,
                               q2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parameters of the closest points of segments ``p1q1`` and ``p2q2``, row by row.

    Vectorised form of Ericson 2004, "Real-Time Collision Detection", §5.1.9; parallel
    and degenerate segments are handled.

    Parameters
    ----------
    p1, q1, p2, q2 : numpy.ndarray
        Shape ``(k, 3)``, m.

    Returns
    -------
    s, u : numpy.ndarray
        Shape ``(k,)`` each, in ``[0, 1]``: the closest points are ``p1 + s (q1 − p1)``
        and ``p2 + u (q2 − p2)``.
    """
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, f = _dot(d1, d1), _dot(d2, d2), _dot(d2, r)
    c, b = _dot(d1, r), _dot(d1, d2)
    tiny = 1e-300
    denom = a * e - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(denom > 1e-12 * a * e + tiny, np.clip((b * f - c * e) / denom, 0.0, 1.0), 0.0)
        u = np.where(e > tiny, (b * s + f) / e, 0.0)
        s_lo = np.where(a > tiny, np.clip(-c / a, 0.0, 1.0), 0.0)
        s_hi = np.where(a > tiny, np.clip((b - c) / a, 0.0, 1.0), 0.0)
    s = np.where(u < 0.0, s_lo, np.where(u > 1.0, s_hi, s))
    u = np.clip(u, 0.0, 1.0)
    return s, u


def _barycentric(q: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Barycentric weights ``(k, 3)`` of points ``q`` on triangles ``(a, b, c)`` (each ``(k, 3)``)."""
    v0, v1, v2 = b - a, c - a, q - a
    d00, d01, d11 = _dot(v0, v0), _dot(v0, v1), _dot(v1, v1)
    d20, d21 = _dot(v2, v0), _dot(v2, v1)
    den = d00 * d11 - d01 * d01
    ok = den > 1e-14 * d00 * d11 + 1e-300
    with np.errstate(divide="ignore", invalid="ignore"):
        wb = np.where(ok, (d11 * d20 - d01 * d21) / den, 1 / 3)
        wc = np.where(ok, (d00 * d21 - d01 * d20) / den, 1 / 3)
    w = np.clip(np.stack([1.0 - wb - wc, wb, wc], axis=1), 0.0, 1.0)
    return w / w.sum(axis=1, keepdims=True)


def _triple(p: np.ndarray) -> np.ndarray:
    """``det[p₁−p₀, p₂−p₀, p₃−p₀]`` of ``(..., 4, 3)`` point sets, shape ``(...)``."""
    return _dot(np.cross(p[..., 1, :] - p[..., 0, :], p[..., 2, :] - p[..., 0, :]),
                p[..., 3, :] - p[..., 0, :])


def _poly(c: np.ndarray, t: np.ndarray) -> np.ndarray:
    return ((c[..., 3] * t + c[..., 2]) * t + c[..., 1]) * t + c[..., 0]


def coplanarity_times(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """Times in ``[0, 1]`` at which four linearly moving points are coplanar.

    The volume ``det[x₁−x₀, x₂−x₀, x₃−x₀](t)`` of ``x(t) = p0 + t (p1 − p0)`` is a cubic
    in ``t`` (Provot 1997). It is sampled at four nodes, split into monotone pieces at the
    roots of its derivative, and every piece whose ends differ in sign (or touch zero) is
    bisected.

    Parameters
    ----------
    p0, p1 : numpy.ndarray
        Shape ``(k, 4, 3)``, the points at the start and the end of the step, m.

    Returns
    -------
    numpy.ndarray
        Shape ``(k, 3)``, up to three times in ``[0, 1]`` per row, ``nan`` where none.
    """
    k = len(p0)
    dp = p1 - p0
    vals = np.stack([_triple(p0 + t * dp) for t in (0.0, 1 / 3, 2 / 3, 1.0)], axis=1)
    c = vals @ _VINV.T  # (k, 4) coefficients c0..c3
    # derivative c1 + 2 c2 t + 3 c3 t² = 0
    qa, qb, qc = 3.0 * c[:, 3], 2.0 * c[:, 2], c[:, 1]
    scale = np.abs(c).max(axis=1) + 1e-300
    disc = qb * qb - 4.0 * qa * qc
    with np.errstate(divide="ignore", invalid="ignore"):
        quad = np.abs(qa) > 1e-12 * scale
        sq = np.sqrt(np.maximum(disc, 0.0))
        r1 = np.where(quad, (-qb - sq) / (2.0 * qa), np.where(np.abs(qb) > 0, -qc / qb, np.nan))
        r2 = np.where(quad, (-qb + sq) / (2.0 * qa), np.nan)
        r1 = np.where(quad & (disc < 0), np.nan, r1)
        r2 = np.where(quad & (disc < 0), np.nan, r2)
    crit = np.stack([r1, r2], axis=1)
    crit = np.where((crit > 0.0) & (crit < 1.0), crit, 1.0)  # outside: a zero-length piece
    brk = np.sort(np.concatenate([np.zeros((k, 1)), crit, np.ones((k, 1))], axis=1), axis=1)
    lo, hi = brk[:, :3], brk[:, 1:]
    flo, fhi = _poly(c[:, None, :], lo), _poly(c[:, None, :], hi)
    has = (np.sign(flo) * np.sign(fhi) <= 0) & ((hi > lo) | (flo == 0))
    out = np.full((k, 3), np.nan)
    rows, piece = np.nonzero(has)
    if len(rows) == 0:
        return out
    cc, lo, hi, flo = c[rows], lo[rows, piece], hi[rows, piece], flo[rows, piece]
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        fm = _poly(cc, mid)
        left = np.sign(fm) == np.sign(flo)
        lo = np.where(left, mid, lo)
        flo = np.where(left, fm, flo)
        hi = np.where(left, hi, mid)
    out[rows, piece] = 0.5 * (lo + hi)
    return out


def _closest(pts: np.ndarray, is_vf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest-point coefficients ``α`` ``(k, 4)`` and separation ``Σ αₖ xₖ`` ``(k, 3)``.

    ``pts`` ``(k, 4, 3)``: VF rows ``(p, a, b, c)``, EE rows ``(p1, q1, p2, q2)``.
    """
    alpha = np.empty(pts.shape[:2])
    vf, ee = np.flatnonzero(is_vf), np.flatnonzero(~is_vf)
    if len(vf):
        p = pts[vf]
        q = closest_points_on_triangles(p[:, 0], p[:, 1], p[:, 2], p[:, 3])
        w = _barycentric(q, p[:, 1], p[:, 2], p[:, 3])
        alpha[vf, 0] = 1.0
        alpha[vf, 1:] = -w
    if len(ee):
        p = pts[ee]
        s, u = closest_params_on_segments(p[:, 0], p[:, 1], p[:, 2], p[:, 3])
        alpha[ee] = np.stack([1.0 - s, s, u - 1.0, -u], axis=1)
    return alpha, np.einsum("ki,kij->kj", alpha, pts)


def _plane_normal(pts: np.ndarray, is_vf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised normal of the triangle (VF) or of both edges (EE), ``(k, 3)``, and the
    sine of the angle it is made from ``(k,)`` (near 0: nearly parallel edges, no normal)."""
    u = np.where(is_vf[:, None], pts[:, 2] - pts[:, 1], pts[:, 1] - pts[:, 0])
    w = np.where(is_vf[:, None], pts[:, 3] - pts[:, 1], pts[:, 3] - pts[:, 2])
    n = np.cross(u, w)
    with np.errstate(divide="ignore", invalid="ignore"):
        sine = np.linalg.norm(n, axis=1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(w, axis=1))
    return n, np.nan_to_num(sine)


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    ln = np.linalg.norm(v, axis=1)
    fl = np.linalg.norm(fallback, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((ln > 1e-12)[:, None], v / ln[:, None], fallback / fl[:, None])
    bad = ~np.all(np.isfinite(out), axis=1)
    out[bad] = (0.0, 0.0, 1.0)
    return out


# -- triangle–triangle intersection ---------------------------------------------------


def _orient(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    return _dot(np.cross(b - a, c - a), d - a)


def triangles_intersect(t1: np.ndarray, t2: np.ndarray) -> np.ndarray:
    """Whether triangles ``t1[k]`` and ``t2[k]`` intersect, row by row.

    Two triangles in general position intersect exactly when an edge of one passes
    through the other; an edge ``PQ`` passes through ``ABC`` when ``P`` and ``Q`` lie on
    opposite sides of its plane and ``PQ`` turns the same way around all three sides
    (signs of orientation determinants, a volume below ``1e-12 · size³`` counting as
    zero). Coplanar overlaps and mere touching are not reported.

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


def crossing_pairs(x: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Pairs of triangles that share no vertex and intersect.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(n, 3)``, vertex positions, m.
    triangles : numpy.ndarray
        Shape ``(t, 3)``, vertex indices.

    Returns
    -------
    numpy.ndarray
        Shape ``(c, 2)``, int64 triangle indices ``(i, j)``, ``i < j``.
    """
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    x = np.asarray(x, dtype=np.float64)
    p = x[tri]
    i, j = box_pairs(p.min(axis=1), p.max(axis=1))
    share = np.any(tri[i][:, :, None] == tri[j][:, None, :], axis=(1, 2))
    i, j = i[~share], j[~share]
    hit = triangles_intersect(p[i], p[j])
    return np.stack([i[hit], j[hit]], axis=1)


def count_crossings(x: np.ndarray, triangles: np.ndarray) -> int:
    """Number of intersecting triangle pairs that share no vertex (see :func:`crossing_pairs`)."""
    return int(len(crossing_pairs(x, triangles)))


def _relative_motion(x0: np.ndarray, x1: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Largest displacement over the step of a stencil's vertices relative to its first,
    ``(k,)`` m; two points of the pair approach each other by at most twice this."""
    dx = (x1 - x0)[idx]  # (k, 4, 3)
    rel = dx - dx[:, :1]
    return np.sqrt(np.max(np.einsum("kij,kij->ki", rel, rel), axis=1))


# -- the stage -------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfCollisionReport:
    """What one call of :meth:`SelfCollision.resolve` did.

    Attributes
    ----------
    contacts : int
        Pairs (VF and EE) in contact or colliding during the step.
    reverted : int
        Vertices sent back to their start-of-step positions by the failsafe.
    unresolved : int
        Colliding pairs left (only when pinned vertices are driven through the mesh).
    """

    contacts: int
    reverted: int
    unresolved: int


@dataclass(frozen=True, eq=False)
class SelfCollision:
    """Self-collision of one mesh (see the module docstring).

    Build it with :meth:`build`.

    Attributes
    ----------
    triangles : numpy.ndarray
        Shape ``(t, 3)``, int64 vertex indices.
    edges : numpy.ndarray
        Shape ``(e, 2)``, int64, the triangles' unique edges.
    distance : float
        m, > 0: the gap kept between non-neighbouring parts.
    iterations : int
        Projection sweeps per pass.
    excluded_vf, excluded_ee : numpy.ndarray
        Sorted int64 keys ``vertex·t + triangle`` and ``edge·e + edge`` of the pairs closer
        than ``2 · distance`` in the rest shape (neighbours, never tested).
    """

    triangles: np.ndarray
    edges: np.ndarray
    distance: float
    iterations: int = 20
    excluded_vf: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64),
                                    repr=False)
    excluded_ee: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64),
                                    repr=False)

    @classmethod
    def build(cls, rest_positions: np.ndarray, triangles: np.ndarray, distance: float,
              iterations: int = 20) -> SelfCollision:
        """Self-collision for a mesh.

        Parameters
        ----------
        rest_positions : numpy.ndarray
            Shape ``(n, 3)``, m: the rest shape that decides which parts are neighbours.
        triangles : numpy.ndarray
            Shape ``(t, 3)``, vertex indices (e.g. :func:`.shapes.triangulate`).
        distance : float
            m, > 0.
        iterations : int
            Projection sweeps per pass, >= 1.
        """
        d = float(distance)
        if not (np.isfinite(d) and d > 0):
            raise SinewError(f"self_distance must be > 0 m, got {distance!r}")
        if int(iterations) < 1:
            raise SinewError("self-collision iterations must be >= 1")
        x = np.asarray(rest_positions, dtype=np.float64).reshape(-1, 3)
        tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        if len(tri) and (tri.min() < 0 or tri.max() >= len(x)):
            raise SinewError("self-collision triangle index out of range")
        base = cls(tri, mesh_edges(tri), d, int(iterations))
        idx, is_vf, keys = base._candidates(x, x, exclude=False, grow=2.0 * d)
        if len(idx) == 0:
            return base
        _, sep = _closest(x[idx], is_vf)
        near = np.linalg.norm(sep, axis=1) < 2.0 * d
        vf_keys = np.sort(keys[near & is_vf])
        ee_keys = np.sort(keys[near & ~is_vf])
        return cls(tri, base.edges, d, int(iterations), vf_keys, ee_keys)

    # -- detection -------------------------------------------------------------------

    def _candidates(self, x0: np.ndarray, x1: np.ndarray, *, exclude: bool = True,
                    grow: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pairs whose swept boxes (grown by ``grow``, default ``distance``) overlap.

        Returns the stencils ``(k, 4)`` (VF: vertex, triangle corners; EE: both edges),
        ``is_vf`` ``(k,)`` and the pair keys ``(k,)``.
        """
        g = self.distance if grow is None else grow
        lo, hi = np.minimum(x0, x1), np.maximum(x0, x1)
        tri, edges = self.triangles, self.edges
        t_lo, t_hi = lo[tri].min(axis=1), hi[tri].max(axis=1)
        iv, it = box_pairs(lo - g, hi + g, t_lo, t_hi)
        ok = ~np.any(tri[it] == iv[:, None], axis=1)
        iv, it = iv[ok], it[ok]
        vf_keys = iv * np.int64(len(tri)) + it
        e_lo, e_hi = lo[edges].min(axis=1) - 0.5 * g, hi[edges].max(axis=1) + 0.5 * g
        ea, eb = box_pairs(e_lo, e_hi)
        ok = ~np.any(edges[ea][:, :, None] == edges[eb][:, None, :], axis=(1, 2))
        ea, eb = ea[ok], eb[ok]
        ee_keys = ea * np.int64(len(edges)) + eb
        if exclude:
            if len(self.excluded_vf):
                keep = ~np.isin(vf_keys, self.excluded_vf, assume_unique=False)
                iv, it, vf_keys = iv[keep], it[keep], vf_keys[keep]
            if len(self.excluded_ee):
                keep = ~np.isin(ee_keys, self.excluded_ee, assume_unique=False)
                ea, eb, ee_keys = ea[keep], eb[keep], ee_keys[keep]
        idx = np.concatenate([np.concatenate([iv[:, None], tri[it]], axis=1),
                              np.concatenate([edges[ea], edges[eb]], axis=1)]).astype(np.int64)
        is_vf = np.zeros(len(idx), dtype=bool)
        is_vf[:len(iv)] = True
        return idx, is_vf, np.concatenate([vf_keys, ee_keys])

    @staticmethod
    def _impacts(x0: np.ndarray, x1: np.ndarray, idx: np.ndarray, is_vf: np.ndarray,
                 dist0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Continuous detection over ``x0 → x1`` for the stencils ``idx`` ``(k, 4)``.

        ``dist0`` ``(k,)`` are the pairs' distances at ``x0``: a pair whose vertices all
        move, relative to its first vertex, less than half of that cannot meet and is
        skipped. Returns ``hit`` ``(k,)``
        and, for hit rows, ``α`` ``(k, 4)`` and the unit normal ``(k, 3)`` at the first
        time of impact, turned to the side the pair started on.
        """
        k = len(idx)
        alpha, normal = np.zeros((k, 4)), np.zeros((k, 3))
        hit = np.zeros(k, dtype=bool)
        test = np.flatnonzero(dist0 <= 2.0 * _relative_motion(x0, x1, idx) + CCD_TOLERANCE)
        if len(test) == 0:
            return hit, alpha, normal
        p0, p1 = x0[idx[test]], x1[idx[test]]
        times = coplanarity_times(p0, p1)  # (k', 3)
        rows, cols = np.nonzero(np.isfinite(times))
        t = times[rows, cols]
        pt = p0[rows] + t[:, None, None] * (p1[rows] - p0[rows])
        vf_rows = is_vf[test[rows]]
        a_t, sep_t = _closest(pt, vf_rows)
        close = np.linalg.norm(sep_t, axis=1) < CCD_TOLERANCE
        rows, t, pt, a_t = rows[close], t[close], pt[close], a_t[close]
        if len(rows) == 0:
            return hit, alpha, normal
        first = np.lexsort((t, rows))  # by row, then time
        rows, pt, a_t = rows[first], pt[first], a_t[first]
        lead = np.r_[True, rows[1:] != rows[:-1]]
        rows, pt, a_t = rows[lead], pt[lead], a_t[lead]
        vf_rows = is_vf[test[rows]]
        _, sep0 = _closest(p0[rows], vf_rows)
        motion = np.einsum("ki,kij->kj", a_t, p1[rows] - p0[rows])
        plane, sine = _plane_normal(pt, vf_rows)
        # nearly parallel edges have no plane: use the direction they started apart in
        n = _unit(np.where((sine > 0.05)[:, None], plane, sep0), plane)
        side = _dot(np.einsum("ki,kij->kj", a_t, p0[rows]), n)
        side = np.where(np.abs(side) > 1e-15, side, -_dot(motion, n))
        n *= np.where(side < 0, -1.0, 1.0)[:, None]
        out = test[rows]
        hit[out] = True
        alpha[out], normal[out] = a_t, n
        return hit, alpha, normal

    # -- response --------------------------------------------------------------------

    def _project(self, x: np.ndarray, v: np.ndarray, idx: np.ndarray, alpha: np.ndarray,
                 normal: np.ndarray, target: np.ndarray, inv_mass: np.ndarray) -> None:
        """Jacobi projection of ``n·Σ αₖ xₖ ≥ target``, then inelastic normal impulses."""
        n_v = len(x)
        w = inv_mass[idx] * (alpha != 0)  # (k, 4)
        denom = np.einsum("ki,ki->k", alpha * alpha, w)
        live = denom > 0
        idx, alpha, normal, w, denom = idx[live], alpha[live], normal[live], w[live], denom[live]
        target = target[live]
        if len(idx) == 0:
            return
        moving = w > 0  # (k, 4)

        def share(rows: np.ndarray) -> np.ndarray:
            """1 / (most pairs in ``rows`` any vertex of each pair is in), ``(k,)``."""
            count = np.bincount(idx[rows[:, None] & moving], minlength=n_v)
            return 1.0 / np.maximum(np.max(np.where(moving, count[idx], 1), axis=1), 1)

        k = len(idx)
        rows = np.repeat(np.arange(k), 4)
        gather = sp.csr_matrix((alpha.reshape(-1), (rows, idx.reshape(-1))), shape=(k, n_v))
        spread = sp.csr_matrix(((alpha * w).reshape(-1), (idx.reshape(-1), rows)), shape=(n_v, k))
        d = self.distance
        # no vertex moves more than twice the pair's violation (a pair that can only move
        # through a vertex of tiny weight, the others pinned, would fling it away)
        reach = 2.0 / np.max(np.abs(alpha) * w, axis=1)
        for _ in range(self.iterations):
            short = target - _dot(gather @ x, normal)
            if not np.any(short > _SLACK * d):
                break
            lam = np.maximum(short, 0.0) * np.minimum(1.0 / denom, reach) * share(short > 0)
            x += spread @ (lam[:, None] * normal)
        touching = _dot(gather @ x, normal) < target + _SLACK * d
        if not np.any(touching):
            return
        v_start = v.copy()
        vn = _dot(gather @ v, normal)
        tol = 0.01 * float(np.max(np.where(touching, -vn, 0.0)))
        for _ in range(self.iterations):
            approach = np.where(touching, -vn, 0.0)
            if not np.any(approach > tol):
                break
            lam = np.maximum(approach, 0.0) * np.minimum(1.0 / denom, reach) * share(approach > 0)
            v += spread @ (lam[:, None] * normal)
            vn = _dot(gather @ v, normal)
        # never add kinetic energy: scale the (momentum-conserving) change back if needed
        dv = v - v_start
        m = np.where(inv_mass > 0, 1.0 / np.where(inv_mass > 0, inv_mass, 1.0), 0.0)
        lin = float(np.einsum("i,ij,ij->", m, dv, v_start))
        quad = float(np.einsum("i,ij,ij->", m, dv, dv))
        if quad > 0 and 2.0 * lin + quad > 0:
            s = max(0.0, min(1.0, -2.0 * lin / quad))
            v[...] = v_start + s * dv

    def resolve(self, x0: np.ndarray, x: np.ndarray, v: np.ndarray, masses: np.ndarray,
                pinned: np.ndarray) -> SelfCollisionReport:
        """Remove self-contact and crossings from the end of a step, in place.

        Parameters
        ----------
        x0 : numpy.ndarray
            Shape ``(n, 3)``, positions at the start of the step (crossing-free), m.
        x : numpy.ndarray
            Shape ``(n, 3)``, positions at the end of the step, m (modified).
        v : numpy.ndarray
            Shape ``(n, 3)``, velocities at the end of the step, m/s (modified).
        masses : numpy.ndarray
            Shape ``(n,)``, kg.
        pinned : numpy.ndarray
            Shape ``(n,)``, bool: these vertices do not move (infinite mass).

        Returns
        -------
        SelfCollisionReport
        """
        inv_mass = np.where(pinned, 0.0, 1.0 / masses)
        idx, is_vf, _ = self._candidates(x0, x)
        if len(idx) == 0:
            return SelfCollisionReport(0, 0, 0)
        d = self.distance
        alpha, sep0 = _closest(x0[idx], is_vf)
        dist0 = np.linalg.norm(sep0, axis=1)
        a1, sep1 = _closest(x[idx], is_vf)
        dist1 = np.linalg.norm(sep1, axis=1)
        x_solved = x.copy()
        every = (idx, is_vf, dist0)
        # pairs that stay 2·d apart at both ends and cannot meet on the way are done
        keep = (dist0 < 2.0 * d) | (dist1 < 2.0 * d) | (dist0 <= 2.0 * _relative_motion(x0, x, idx))
        idx, is_vf, alpha, sep0 = idx[keep], is_vf[keep], alpha[keep], sep0[keep]
        dist0, a1, sep1 = dist0[keep], a1[keep], sep1[keep]
        normal = _unit(sep0, _plane_normal(x0[idx], is_vf)[0])
        active = dist0 < d
        for sweep in range(3):
            hit, a_hit, n_hit = self._impacts(x0, x, idx, is_vf, dist0)
            a_now, sep_now = _closest(x[idx], is_vf) if sweep else (a1, sep1)
            dist_now = np.linalg.norm(sep_now, axis=1)
            # close without colliding on the way: the current closest points are on the
            # right sides, so they give the direction (Bridson et al. 2002's proximity)
            near = (dist_now < d) & ~hit & (dist_now > 1e-12)
            alpha[near] = a_now[near]
            normal[near] = sep_now[near] / dist_now[near, None]
            alpha[hit], normal[hit] = a_hit[hit], n_hit[hit]
            active |= hit | near
            gap = _dot(np.einsum("ki,kij->kj", alpha, x[idx]), normal)
            # never push a pair further apart than it was at the start (plus a tenth of d
            # of recovery): the projection only takes back this step's approach
            gap0 = _dot(np.einsum("ki,kij->kj", alpha, x0[idx]), normal)
            target = np.minimum(d, np.maximum(gap0, 0.0) + _RECOVERY * d)
            if not np.any(hit | (active & (gap < target - _SLACK * d))):
                break
            rows = np.flatnonzero(active)
            self._project(x, v, idx[rows], alpha[rows], normal[rows], target[rows], inv_mass)
        contacts = int(active.sum())
        # failsafe: back to the crossing-free start for whatever still collides. While no
        # vertex moved more than d/2 in the projection, the candidate boxes (grown by d)
        # still hold every pair that can meet; else a fresh broad phase over x₀ → x
        idx, is_vf, dist0 = every
        if np.max(np.abs(x - x_solved)) > 0.25 * d:
            idx, is_vf, _ = self._candidates(x0, x)
            dist0 = np.linalg.norm(_closest(x0[idx], is_vf)[1], axis=1)
        hit = self._impacts(x0, x, idx, is_vf, dist0)[0]
        reverted = np.zeros(len(x), dtype=bool)
        while np.any(hit):
            verts = np.unique(idx[hit])
            verts = verts[(inv_mass[verts] > 0) & ~reverted[verts]]
            if len(verts) == 0:
                break
            reverted[verts] = True
            x[verts] = x0[verts]
            v[verts] = 0.0
            hit = self._impacts(x0, x, idx, is_vf, dist0)[0]
        return SelfCollisionReport(contacts, int(reverted.sum()), int(hit.sum()))

    def count_crossings(self, x: np.ndarray) -> int:
        """Crossing triangle pairs of this mesh at ``x`` ``(n, 3)`` (see :func:`count_crossings`)."""
        return count_crossings(x, self.triangles)
