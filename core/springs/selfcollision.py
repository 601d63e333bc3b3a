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
    Axis-aligned boxes around each primitive's sweep ``x₀ → x₁``, grown by ``distance``,
    paired by :func:`.proximity.box_pairs` (the broad phase collider contact uses too).

Narrow phase
    Proximity: closest points at ``x₀`` and ``x₁`` (Ericson 2004, "Real-Time Collision
    Detection", §5.1.5 and §5.1.9). Continuous: the four points of a pair move linearly
    over the step; they are coplanar where the cubic ``det[x₁−x₀, x₂−x₀, x₃−x₀](t)``
    vanishes (Provot 1997, "Collision and self-collision handling in cloth model
    dedicated to design garments"; Bridson, Fedkiw & Anderson 2002, "Robust treatment of
    collisions, contact and friction for cloth animation"); its roots in ``[0, 1]`` come
    from :func:`.proximity.coplanarity_times`, and at each root the pair collides when
    its distance is below ``1e-6`` m. The kernels are :mod:`.proximity`'s, shared with
    collider contact.

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

Failsafe (impact zones)
    If continuous detection still finds a collision after the iterations, the vertices of
    the colliding pairs, joined through shared vertices, form impact zones (Provot 1997;
    Bridson et al. 2002), each moved rigidly: here by one translation over the step, the
    zone's mass-weighted mean displacement, with its mean velocity (momentum kept, kinetic
    energy only lost). A translated zone keeps the relative positions it had at ``x₀``,
    which cross nothing, so its own pairs cannot collide whatever order the pairs come in;
    a zone that meets other vertices takes them in, and detection runs again until nothing
    collides. A zone holding an immovable vertex (a pin, a vertex resting on a collider) or
    a vertex a collider holds (a translation could carry it in), or one that stops growing
    while it still collides, goes back to its start-of-step positions with zero velocity (a
    state known to be crossing-free). If a zone still collides then, its vertices that
    were immovable only for the response (resting on a collider) go back too. The one case
    this cannot fix is hard-pinned vertices driven through the mesh.

Colliders
    The stage runs after collider contact and does not know the colliders: its
    projection can press the lowest layer of a heap into a collider, from where the next
    step's collider contact lifts it out again (a collider that projects to its nearest
    surface may push a vertex pressed deep into a small body out of its far side).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .. import kernels
from ..errors import SinewError
from .detection import element_boxes as _element_boxes
from .detection import hashed_grid
from .proximity import (
    BoxTree,
    barycentric,
    box_pairs,
    boxes_meet,
    closest_points_on_triangles,
    coplanarity_times,
    element_boxes,
    overlapping,
    segment_parameters,
    unit,
)
from .proximity import dot as _dot

__all__ = ["SelfCollision", "StepPairs", "SelfCollisionReport", "crossing_pairs", "count_crossings", "mesh_edges"]

#: m: distance at the time of coplanarity below which a pair collides.
CCD_TOLERANCE = 1e-6
#: Fraction of the distance a projected gap may fall short of it (and still count as
#: touching above it).
_SLACK = 0.02
#: Fraction of the distance a pair closer than it at the start of a step regains per step.
_RECOVERY = 0.1
#: A triangle whose box covers more grid cells than this is met against every triangle
#: by :func:`crossing_pairs` instead of being gridded.
_BIG_CELLS = 512
#: Crossing pairs :func:`crossing_pairs` first makes room for at least (as many as the
#: triangles if more; it calls the kernel again with room for all when there are more).
_CROSSING_ROOM = 64


def mesh_edges(triangles: np.ndarray) -> np.ndarray:
    """Unique edges ``(e, 2)`` (rows ``i < j``) of triangles ``(t, 3)``."""
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    e = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    e = np.sort(e, axis=1)
    return np.unique(e, axis=0) if len(e) else np.zeros((0, 2), dtype=np.int64)


# -- narrow phase -------------------------------------------------------------------


def _closest(pts: np.ndarray, is_vf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest-point coefficients ``α`` ``(k, 4)`` and separation ``Σ αₖ xₖ`` ``(k, 3)``.

    ``pts`` ``(k, 4, 3)``: VF rows ``(p, a, b, c)``, EE rows ``(p1, q1, p2, q2)``.
    """
    alpha = np.empty(pts.shape[:2])
    vf, ee = np.flatnonzero(is_vf), np.flatnonzero(~is_vf)
    if len(vf):
        p = pts[vf]
        q = closest_points_on_triangles(p[:, 0], p[:, 1], p[:, 2], p[:, 3])
        w = np.clip(barycentric(q, p[:, 1], p[:, 2], p[:, 3]), 0.0, 1.0)  # q is on the triangle
        w /= w.sum(axis=1, keepdims=True)
        alpha[vf, 0] = 1.0
        alpha[vf, 1:] = -w
    if len(ee):
        p = pts[ee]
        s, u = segment_parameters(p[:, 0], p[:, 1], p[:, 2], p[:, 3])
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
    """Unit vectors along ``v`` ``(k, 3)``, along ``fallback`` where ``v`` is about zero,
    ``+z`` where both are."""
    u, ln = unit(v)
    f, fl = unit(fallback)
    out = np.where((ln > 1e-12)[:, None], u, f)
    out[(ln <= 1e-12) & ~(fl > 0)] = (0.0, 0.0, 1.0)
    return out


# -- crossings ---------------------------------------------------------------------------


def crossing_pairs(x: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Pairs of triangles that share no vertex and intersect.

    Two triangles in general position intersect exactly when an edge of one passes
    through the other; an edge ``PQ`` passes through ``ABC`` when ``P`` and ``Q`` lie
    strictly on opposite sides of its plane and ``PQ`` turns the same way around all three
    sides (signs of orientation determinants, a volume below ``1e-12 · size³`` counting as
    zero, ``size`` the pair's largest extent along an axis). Coplanar overlaps and mere
    touching are not reported. The compiled kernel ``sinew_crossing_pairs``
    (``kernels/src/crossing.c``) meets the triangles through a hashed grid over their boxes
    (:func:`.detection.hashed_grid`, cells 1.5 times the median box's largest side).

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(n, 3)``, vertex positions, m (finite).
    triangles : numpy.ndarray
        Shape ``(t, 3)``, vertex indices.

    Returns
    -------
    numpy.ndarray
        Shape ``(c, 2)``, int64 triangle indices ``(i, j)``, ``i < j``, sorted by ``i`` then
        ``j``.

    Raises
    ------
    SinewError
        Wrong shapes, positions not finite, or a vertex index out of range.
    """
    x = kernels.array(x, np.float64, (-1, 3), "crossing positions")
    tri = kernels.array(triangles, np.int64, (-1, 3), "crossing triangles")
    nt = len(tri)
    if nt and (int(tri.min()) < 0 or int(tri.max()) >= len(x)):
        raise SinewError(f"crossing triangles index vertices outside 0..{len(x) - 1}")
    if nt < 2:
        return np.zeros((0, 2), dtype=np.int64)
    lo, hi = _element_boxes(x, tri)
    size = hi - lo
    extent = np.maximum(np.maximum(size[:, 0], size[:, 1]), size[:, 2])
    # 1.5 times the median triangle's box: on a folded strip 15 % faster than 1 time, the
    # same on crumpled grids
    cell = 1.5 * float(np.median(extent))
    if not cell > 0.0:  # most triangles collapsed to points
        cell = float(extent.max()) or 1.0
    # cells no finer than round-off at the mesh's distance from the origin (cell indices
    # stay far inside int64)
    cell = min(max(cell, 1e-12 * float(np.abs(x).max())), np.finfo(np.float64).max)
    # buckets: about twice the triangles (a triangle about the median covers a few cells)
    table = 1 << max(6, int(np.ceil(np.log2(2 * nt))))
    table, offsets, entries, big = hashed_grid(lo, hi, cell, big_cells=_BIG_CELLS, table=table)
    stamp = np.empty(nt, dtype=np.int64)
    lib = kernels.library()
    room = max(nt, _CROSSING_ROOM)
    while True:
        pairs = np.empty((room, 2), dtype=np.int64)
        count = kernels.check_status(lib.sinew_crossing_pairs(
            len(x), x.ctypes.data, nt, tri.ctypes.data, cell, table, offsets.ctypes.data,
            entries.ctypes.data, len(big), big.ctypes.data, lo.ctypes.data, hi.ctypes.data,
            stamp.ctypes.data, room, pairs.ctypes.data), "crossing pairs")
        if count <= room:
            break
        room = count
    pairs = pairs[:count]
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def count_crossings(x: np.ndarray, triangles: np.ndarray) -> int:
    """Number of intersecting triangle pairs that share no vertex (see :func:`crossing_pairs`)."""
    return int(len(crossing_pairs(x, triangles)))


def _relative_motion(x0: np.ndarray, x1: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Largest displacement over the step of a stencil's vertices relative to its first,
    ``(k,)`` m; two points of the pair approach each other by at most twice this."""
    dx = x1 - x0
    first = dx[idx[:, 0]]
    most = np.zeros(len(idx))
    for c in (1, 2, 3):  # column by column: a max over a short axis is slow in numpy
        rel = dx[idx[:, c]] - first
        most = np.maximum(most, _dot(rel, rel))
    return np.sqrt(most)


def _sweeps_overlap(x0: np.ndarray, x1: np.ndarray, idx: np.ndarray, is_vf: np.ndarray,
                    grow: float) -> np.ndarray:
    """Whether the boxes around the sweeps ``x0 → x1`` of a pair's two parts (VF: the vertex
    and the triangle; EE: both edges), grown by ``grow`` m, overlap, ``(k,)``. A pair whose
    parts come within ``grow`` of each other at some time of the step overlaps: each part
    stays inside the box of its corners' sweeps."""
    low, high = np.minimum(x0, x1).T, np.maximum(x0, x1).T  # axis first (proximity.boxes_meet)
    first = np.where(is_vf, idx[:, 0], idx[:, 1])  # a VF pair's vertex twice
    other = np.where(is_vf, idx[:, 1], idx[:, 2])
    a_lo = np.minimum(low[:, idx[:, 0]], low[:, first])
    a_hi = np.maximum(high[:, idx[:, 0]], high[:, first])
    b_lo = np.minimum(np.minimum(low[:, idx[:, 2]], low[:, idx[:, 3]]), low[:, other])
    b_hi = np.maximum(np.maximum(high[:, idx[:, 2]], high[:, idx[:, 3]]), high[:, other])
    return boxes_meet(a_lo, a_hi, b_lo, b_hi, grow)


def _share_vertex(a: np.ndarray, ia: np.ndarray, b: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Whether element ``a[ia[j]]`` and element ``b[ib[j]]`` (rows of vertex indices, e.g.
    triangles ``(t, 3)``, edges ``(e, 2)``) have a vertex in common, ``(k,)``; column by
    column (a broadcast ``(k, p, q)`` comparison reduced with ``numpy.any`` is ~5× slower)."""
    ca = [a[ia, r] for r in range(a.shape[1])]
    cb = [b[ib, r] for r in range(b.shape[1])]
    out = np.zeros(len(ia), dtype=bool)
    for u in ca:
        for w in cb:
            out |= u == w
    return out


def _member(keys: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` ``(k,)`` is in the sorted ``table`` (binary search)."""
    if len(table) == 0 or len(keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    pos = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return table[pos] == keys


# -- the stage -------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfCollisionReport:
    """What one call of :meth:`SelfCollision.resolve` did.

    Attributes
    ----------
    contacts : int
        Pairs (VF and EE) in contact or colliding during the step.
    reverted : int
        Vertices sent back to their start-of-step positions by the failsafe (impact zones
        with an immovable vertex, or that could not be resolved by moving rigidly).
    unresolved : int
        Colliding pairs left (only when pinned vertices are driven through the mesh).
    constraints : tuple of numpy.ndarray, optional
        The pairs in contact as the response's constraints ``n·Σₖ αₖ xₖ ≥ target``:
        ``(idx (k, 4), α (k, 4), n (k, 3), target (k,))`` (module docstring), for a later
        projection that must keep them (:meth:`.simulate.Simulator.advance`'s strain
        limit after self-collision).
    reverted_vertices : numpy.ndarray, optional
        Shape ``(n,)``, bool: the vertices of the failsafe's impact zones, moved rigidly
        or sent back (``None``: none).
    zoned : int
        Vertices in the failsafe's impact zones (``reverted`` of them sent back).
    """

    contacts: int
    reverted: int
    unresolved: int
    constraints: tuple | None = None
    reverted_vertices: np.ndarray | None = None
    zoned: int = 0


#: How far (a multiple of ``distance``) :class:`StepPairs` grows each vertex's sweep box
#: for the candidates it keeps: room for the later passes of the step to move it.
_CACHE_GROW = 1.0


class StepPairs:
    """The candidate pairs of one step, kept over the passes that resolve it.

    A step is resolved several times over (:meth:`.simulate.Simulator._self_collide`:
    after the solve, after each round of the strain limit, after colliders see held
    vertices again), always from the same start ``x₀`` and with end positions that the
    passes only move a little. The broad phase is run once, over each vertex's sweep box
    grown by :data:`_CACHE_GROW` ``· distance`` (room for that motion), and the closest
    points at ``x₀`` of each pair once, when a query first returns it. A later query whose
    sweep boxes all lie inside the grown ones is answered from that set by the exact box
    test alone (every pair it would find is in the set). The vertices that left their
    grown boxes (a few, usually: the strain limit or an impact zone moved them) get boxes
    grown around both, and only the pairs with a part holding one of them are looked for
    again and added. A vertex sent back to ``x₀`` stays inside its box.

    The boxes are those of the sweeps seen from a frame moving by one translation ``u``
    over the step, ``x₀ → x − u`` (``u``: the median displacement, per axis, of the first
    query). Two points that meet at time ``t`` of their linear sweeps are at ``p(t) − t·u``
    and ``q(t) − t·u`` in that frame, as close as in the world and on their moving-frame
    sweeps, so every pair that can meet in the world overlaps there too, while cloth
    falling as a whole sweeps small boxes.

    Parameters
    ----------
    sc : SelfCollision
    x0 : numpy.ndarray
        Shape ``(n, 3)``, positions at the start of the step, m.
    """

    def __init__(self, sc: SelfCollision, x0: np.ndarray) -> None:
        self.sc = sc
        self.x0 = x0
        self.glo = self.ghi = None
        self.shift = np.zeros(3)
        self.builds = 0

    def _sweeps(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each vertex's sweep box ``x₀ → x − u`` in the moving frame, ``(n, 3)`` twice."""
        y = x - self.shift
        return np.minimum(self.x0, y), np.maximum(self.x0, y)

    def _add(self, stale: np.ndarray | None) -> None:
        """Look for the pairs of the grown boxes (only those with a part holding a vertex of
        ``stale`` ``(n,)``, if given) and add the new ones."""
        sc = self.sc
        self.builds += 1
        idx, is_vf, keys = sc._candidates(self.glo, self.ghi, stale=stale)
        keys = 2 * keys + ~is_vf  # VF and EE keys apart
        if stale is not None:
            if self.sorted_keys is None:
                self.sorted_keys = np.sort(self.keys)
            new = ~_member(keys, self.sorted_keys)
            idx, is_vf, keys = idx[new], is_vf[new], keys[new]
            add = np.sort(keys)
            self.sorted_keys = np.insert(self.sorted_keys, np.searchsorted(self.sorted_keys, add), add)
        n_v, n_t = len(self.x0), len(sc.triangles)
        n_e = max(len(sc.edges), 1)
        half = keys // 2
        # each pair as two boxes of one table: [vertices; triangles; edges]
        first = np.where(is_vf, half // n_t, n_v + n_t + half // n_e)
        second = np.where(is_vf, n_v + half % n_t, n_v + n_t + half % n_e)
        k = len(idx)
        if stale is None:
            self.idx, self.is_vf, self.keys = idx, is_vf, keys
            self.first, self.second = first, second
            self.alpha0, self.sep0 = np.empty((k, 4)), np.empty((k, 3))
            self.dist0 = np.full(k, np.nan)  # nan: not computed yet
            self.sorted_keys = None  # sorted when first needed
        else:
            self.idx = np.concatenate([self.idx, idx])
            self.is_vf = np.concatenate([self.is_vf, is_vf])
            self.keys = np.concatenate([self.keys, keys])
            self.first = np.concatenate([self.first, first])
            self.second = np.concatenate([self.second, second])
            self.alpha0 = np.concatenate([self.alpha0, np.empty((k, 4))])
            self.sep0 = np.concatenate([self.sep0, np.empty((k, 3))])
            self.dist0 = np.concatenate([self.dist0, np.full(k, np.nan)])

    def get(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        """The pairs whose sweep boxes ``x₀ → x`` (grown by ``distance``, edges by half of it
        each; in the moving frame) overlap, as :meth:`SelfCollision._candidates` finds them.

        Returns
        -------
        idx : numpy.ndarray
            Shape ``(k, 4)``, int64 stencils.
        is_vf : numpy.ndarray
            Shape ``(k,)``, bool.
        alpha0, sep0, dist0 : numpy.ndarray
            The closest points at ``x₀`` (as :func:`_closest`): ``(k, 4)``, ``(k, 3)``, ``(k,)``.
        """
        sc = self.sc
        m = _CACHE_GROW * sc.distance
        if self.glo is None:
            self.shift = np.median(x - self.x0, axis=0)
            lo, hi = self._sweeps(x)
            self.glo, self.ghi = lo - m, hi + m
            self._add(None)
        else:
            lo, hi = self._sweeps(x)
            out = np.any((lo < self.glo) | (hi > self.ghi), axis=1)
            if np.any(out):  # grown around the old and the new box: old pairs stay valid
                self.glo[out] = np.minimum(self.glo[out], lo[out] - m)
                self.ghi[out] = np.maximum(self.ghi[out], hi[out] + m)
                self._add(out)
        g = sc.distance
        t_lo, t_hi = element_boxes(lo, hi, sc.triangles)
        e_lo, e_hi = element_boxes(lo, hi, sc.edges)
        box_lo = np.concatenate([lo - g, t_lo, e_lo - 0.5 * g])
        box_hi = np.concatenate([hi + g, t_hi, e_hi + 0.5 * g])
        ok = np.flatnonzero(overlapping(box_lo, box_hi, self.first, box_lo, box_hi, self.second))
        new = ok[np.isnan(self.dist0[ok])]
        if len(new):  # closest points at x₀ of the pairs met for the first time
            self.alpha0[new], self.sep0[new] = _closest(self.x0[self.idx[new]], self.is_vf[new])
            self.dist0[new] = np.linalg.norm(self.sep0[new], axis=1)
        return self.idx[ok], self.is_vf[ok], self.alpha0[ok], self.sep0[ok], self.dist0[ok]


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
        if len(tri) == 0:
            return base
        # the neighbours: every pair closer than 2 d at rest (the self query with no ball
        # lists those within its radius: a hair under 2 d)
        from .detection import SelfDetection

        near = SelfDetection(cls(tri, base.edges, 2.0 * d * (1.0 - 1e-9))).detect(x, np.zeros(len(x)))
        vf, ee = near.pair[:near.vf], near.pair[near.vf:]
        vf_keys = np.sort(vf[:, 0] * np.int64(len(tri)) + vf[:, 1])
        ee_keys = np.sort(ee[:, 0] * np.int64(len(base.edges)) + ee[:, 1])
        return cls(tri, base.edges, d, int(iterations), vf_keys, ee_keys)

    # -- detection -------------------------------------------------------------------

    def _candidates(self, lo: np.ndarray, hi: np.ndarray, *, exclude: bool = True,
                    grow: float | None = None,
                    stale: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pairs whose vertex boxes ``lo, hi`` ``(n, 3)`` (e.g. of the sweeps ``x₀ → x₁``),
        grown by ``grow`` (default ``distance``), overlap; with ``stale`` ``(n,)`` bool, only
        the pairs with a part (vertex, triangle, edge) that has a ``stale`` vertex.

        Returns the stencils ``(k, 4)`` (VF: vertex, triangle corners; EE: both edges),
        ``is_vf`` ``(k,)`` and the pair keys ``(k,)``, each pair once.
        """
        g = self.distance if grow is None else grow
        tri, edges = self.triangles, self.edges
        t_lo, t_hi = element_boxes(lo, hi, tri)
        e_lo, e_hi = element_boxes(lo, hi, edges)
        e_lo, e_hi = e_lo - 0.5 * g, e_hi + 0.5 * g
        if stale is None:
            iv, it = box_pairs(lo - g, hi + g, t_lo, t_hi)
            ea, eb = box_pairs(e_lo, e_hi)
        else:  # stale vertices against every triangle, every vertex against stale triangles
            st = np.flatnonzero(stale[tri].any(axis=1))
            iv, it = BoxTree(t_lo, t_hi).pairs(lo - g, hi + g, np.flatnonzero(stale))
            iv2, it2 = BoxTree(t_lo[st], t_hi[st]).pairs(lo - g, hi + g)
            iv, it = np.concatenate([iv, iv2]), np.concatenate([it, st[it2]])
            _, first = np.unique(iv * np.int64(len(tri)) + it, return_index=True)
            iv, it = iv[first], it[first]
            se = np.flatnonzero(stale[edges].any(axis=1))
            ea, eb = BoxTree(e_lo, e_hi).pairs(e_lo, e_hi, se)
            ea, eb = np.minimum(ea, eb), np.maximum(ea, eb)
            _, first = np.unique(ea * np.int64(len(edges)) + eb, return_index=True)
            ea, eb = ea[first], eb[first]
            ok = ea < eb
            ea, eb = ea[ok], eb[ok]
        ok = ~_share_vertex(iv[:, None], np.arange(len(iv)), tri, it)
        iv, it = iv[ok], it[ok]
        vf_keys = iv * np.int64(len(tri)) + it
        ok = ~_share_vertex(edges, ea, edges, eb)
        ea, eb = ea[ok], eb[ok]
        ee_keys = ea * np.int64(len(edges)) + eb
        if exclude:
            keep = ~_member(vf_keys, self.excluded_vf)
            iv, it, vf_keys = iv[keep], it[keep], vf_keys[keep]
            keep = ~_member(ee_keys, self.excluded_ee)
            ea, eb, ee_keys = ea[keep], eb[keep], ee_keys[keep]
        idx = np.concatenate([np.concatenate([iv[:, None], tri[it]], axis=1),
                              np.concatenate([edges[ea], edges[eb]], axis=1)]).astype(np.int64)
        is_vf = np.zeros(len(idx), dtype=bool)
        is_vf[:len(iv)] = True
        return idx, is_vf, np.concatenate([vf_keys, ee_keys])

    def pairs(self, x0: np.ndarray) -> StepPairs:
        """A candidate cache for the passes of one step starting at ``x0`` ``(n, 3)`` (see
        :class:`StepPairs`), to hand to each :meth:`resolve` of that step."""
        return StepPairs(self, np.asarray(x0, dtype=np.float64))

    @staticmethod
    def _impacts(x0: np.ndarray, x1: np.ndarray, idx: np.ndarray, is_vf: np.ndarray,
                 dist0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Continuous detection over ``x0 → x1`` for the stencils ``idx`` ``(k, 4)``.

        ``dist0`` ``(k,)`` are the pairs' distances at ``x0``: a pair whose vertices all
        move, relative to its first vertex, less than half of that cannot meet and is
        skipped, as is one whose two parts' sweep boxes do not overlap (on the fold of the
        contact bench the boxes leave ~40 % of the first test's pairs, and half of the
        pairs with a time of coplanarity). Returns ``hit`` ``(k,)``
        and, for hit rows, ``α`` ``(k, 4)`` and the unit normal ``(k, 3)`` at the first
        time of impact, turned to the side the pair started on.
        """
        k = len(idx)
        alpha, normal = np.zeros((k, 4)), np.zeros((k, 3))
        hit = np.zeros(k, dtype=bool)
        test = np.flatnonzero(dist0 <= 2.0 * _relative_motion(x0, x1, idx) + CCD_TOLERANCE)
        test = test[_sweeps_overlap(x0, x1, idx[test], is_vf[test], 2.0 * CCD_TOLERANCE)]
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

        k = len(idx)
        rows = np.repeat(np.arange(k), 4)
        slot = np.where(moving, idx, n_v)  # n_v: a vertex that does not move, counted once
        # vertex × pair incidence of the moving corners, and the pairs' corners by column
        incidence = sp.csr_matrix((np.ones(4 * k), (slot.reshape(-1), rows)), shape=(n_v + 1, k))
        corners = [slot[:, c] for c in range(4)]

        def share(rows: np.ndarray) -> np.ndarray:
            """1 / (most pairs in ``rows`` any vertex of each pair is in), ``(k,)``."""
            count = incidence @ rows.astype(np.float64)
            count[n_v] = 1.0
            most = np.maximum(np.maximum(count[corners[0]], count[corners[1]]),
                              np.maximum(count[corners[2]], count[corners[3]]))
            return 1.0 / np.maximum(most, 1.0)

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
                pinned: np.ndarray, pairs: StepPairs | None = None,
                anchored: np.ndarray | None = None,
                hard: np.ndarray | None = None) -> SelfCollisionReport:
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
        pairs : StepPairs, optional
            The step's candidate cache (:meth:`pairs` of ``x0``), shared by the passes of
            one step; default: a fresh one.
        anchored : numpy.ndarray, optional
            Shape ``(n,)``, bool: vertices a collider holds. A failsafe zone holding one
            goes back to ``x₀`` instead of moving rigidly (a translation does not know the
            collider and could carry it in).
        hard : numpy.ndarray, optional
            Shape ``(n,)``, bool: the vertices of ``pinned`` that may not move at all (hard
            pins). The others (e.g. vertices resting on a collider, immovable for the
            response) go back to ``x₀`` when the failsafe cannot resolve a zone without
            them. Default: all of ``pinned``.

        Returns
        -------
        SelfCollisionReport
        """
        inv_mass = np.where(pinned, 0.0, 1.0 / masses)
        if pairs is None:
            pairs = self.pairs(x0)
        idx, is_vf, alpha, sep0, dist0 = pairs.get(x)
        if len(idx) == 0:
            return SelfCollisionReport(0, 0, 0)
        d = self.distance
        x_solved = x.copy()
        # pairs that stay 2·d apart at both ends and cannot meet on the way are done. The
        # gap changes by at most twice the relative motion: a pair further than that from
        # 2·d at x₀ is one of them without its closest points at x
        motion = 2.0 * _relative_motion(x0, x, idx)
        rows = np.flatnonzero(dist0 - motion < 2.0 * d)
        idx, is_vf, alpha, sep0, dist0 = idx[rows], is_vf[rows], alpha[rows], sep0[rows], dist0[rows]
        every = (idx, is_vf, dist0)
        a1, sep1 = _closest(x[idx], is_vf)
        dist1 = np.linalg.norm(sep1, axis=1)
        keep = (dist0 < 2.0 * d) | (dist1 < 2.0 * d) | (dist0 <= motion[rows])
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
        rows = np.flatnonzero(active)
        constraints = (idx[rows], alpha[rows], normal[rows], target[rows]) if len(rows) else None
        # failsafe: impact zones for whatever still collides. While no vertex moved more
        # than d/4 in the projection, the pairs kept above hold every pair that can meet
        # (the others' relative motion grew by at most d/2, and they were 2·d plus twice
        # it apart at x₀); else the pairs of the sweeps x₀ → x now
        idx, is_vf, dist0 = every
        if np.max(_dot(x - x_solved, x - x_solved)) > (0.25 * d) ** 2:
            idx, is_vf, _, _, dist0 = pairs.get(x)
        hit = self._impacts(x0, x, idx, is_vf, dist0)[0]
        zone, reverted = np.zeros(len(x), dtype=bool), np.zeros(len(x), dtype=bool)
        left = 0
        if np.any(hit):
            still = inv_mass == 0 if anchored is None else (inv_mass == 0) | anchored
            left = self._impact_zones(x0, x, v, masses, inv_mass, still, pairs, idx[hit], zone,
                                      reverted, pinned if hard is None else hard)
        return SelfCollisionReport(contacts, int(reverted.sum()), left, constraints,
                                   zone if np.any(zone) else None, int(zone.sum()))

    def _impact_zones(self, x0: np.ndarray, x: np.ndarray, v: np.ndarray, masses: np.ndarray,
                      inv_mass: np.ndarray, still: np.ndarray, pairs: StepPairs,
                      stencils: np.ndarray, zone: np.ndarray, reverted: np.ndarray,
                      hard: np.ndarray) -> int:
        """The failsafe: impact zones moved rigidly, in place (module docstring).

        ``stencils`` ``(k, 4)`` are the pairs still colliding. The vertices of colliding
        pairs, joined through shared vertices, form zones; each zone moves over the step by
        one translation, its mass-weighted mean displacement, and takes its mass-weighted
        mean velocity (momentum kept, kinetic energy only lost). Its vertices then keep
        their relative positions at ``x₀``, which cross nothing, so no two of them can
        collide during the step; a zone colliding with other vertices takes them in and
        moves again. A zone holding a vertex of ``still`` ``(n,)`` (immovable, or held by
        a collider) goes back to ``x₀`` with zero velocity (its free vertices), as does one
        that stops growing while it still collides; if that is not enough, its vertices
        that are immovable but not ``hard`` ``(n,)`` go back too (a vertex resting on a
        collider that slid through another layer: both ends of the step are outside the
        collider, and ``x₀`` crosses nothing). Marks ``zone``
        (all the vertices of zones) and ``reverted`` (those sent back) ``(n,)`` and returns
        the colliding pairs left (only with hard-pinned vertices driven through the mesh).
        """
        n = len(x)
        links = np.zeros((0, 2), dtype=np.int64)
        count = n
        while len(stencils):
            # the vertices of a pair join one zone: links from the first to the others
            links = np.concatenate([links, np.stack([np.repeat(stencils[:, 0], 3),
                                                     stencils[:, 1:].reshape(-1)], axis=1)])
            size = int(zone.sum())
            zone[stencils.reshape(-1)] = True
            graph = sp.coo_matrix((np.ones(len(links)), (links[:, 0], links[:, 1])), shape=(n, n))
            before, (count, label) = count, connected_components(graph, directed=False)
            stuck = int(zone.sum()) == size and count == before
            fixed = np.bincount(label, weights=zone & still, minlength=count) > 0
            if stuck:  # no zone grew or merged: those that collide go back to x₀
                fixed[label[stencils.reshape(-1)]] = True
            back = zone & fixed[label] & (inv_mass > 0) & ~reverted
            if stuck and not np.any(back):
                back = zone & fixed[label] & ~hard & ~reverted
                if not np.any(back):
                    break
            reverted |= back
            x[back], v[back] = x0[back], 0.0
            rigid = np.flatnonzero(zone & ~fixed[label])
            if len(rigid):
                lab, m = label[rigid], masses[rigid]
                weight = np.bincount(lab, weights=m, minlength=count)
                for c in range(3):
                    shift = np.bincount(lab, weights=m * (x[rigid, c] - x0[rigid, c]), minlength=count)
                    speed = np.bincount(lab, weights=m * v[rigid, c], minlength=count)
                    x[rigid, c] = x0[rigid, c] + shift[lab] / weight[lab]
                    v[rigid, c] = speed[lab] / weight[lab]
            idx, is_vf, _, _, dist0 = pairs.get(x)
            hit = self._impacts(x0, x, idx, is_vf, dist0)[0]
            stencils = idx[hit]
        return len(stencils)

    def count_crossings(self, x: np.ndarray) -> int:
        """Crossing triangle pairs of this mesh at ``x`` ``(n, 3)`` (see :func:`count_crossings`)."""
        return count_crossings(x, self.triangles)
