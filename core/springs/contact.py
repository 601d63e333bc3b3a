"""Continuous contact between the cloth and moving triangle-mesh colliders.

One step moves every cloth vertex from ``x₀`` to ``x₁`` (the solver's result) while
each collider vertex moves linearly from ``C₀`` to ``C₁`` (its positions at the start
and end of the step). :func:`resolve_mesh` then makes the end of the step
collision-free, in passes until nothing changes (at most :data:`PASSES`):

1. **Vertex–face, continuous.** A vertex that crosses a triangle from its front
   (the side its normal points to) during the step is found as the earliest root in
   ``[0, 1]`` of the cubic ``det[b(t) − a(t), c(t) − a(t), x(t) − a(t)] = 0`` of
   linearly moving points (Provot 1997, "Collision and self-collision handling in
   cloth model dedicated to design garments"; Bridson, Fedkiw & Anderson 2002,
   "Robust treatment of collisions, contact and friction for cloth animation"), with
   the point inside the triangle at that time. It is put back in front of the
   triangle's end position, ``thickness`` above its plane.
2. **Vertex–face, proximity.** A vertex closer than ``thickness`` to the end surface
   (or behind it, not deeper than the mesh allows, see :class:`~.colliders.TriangleMesh`)
   is moved to the nearest surface point plus ``thickness`` along the outward normal.
3. **Edge–edge.** A cloth edge against a convex collider edge (one whose two faces
   make a ridge, or a boundary edge): crossing during the step (the same cubic for
   the four end points, with the two segments meeting at that time) or ending closer
   than ``thickness`` on the body's side of the ridge is a contact, and (when crossed or
   closer than the thickness less a 5 % margin, :data:`_SLACK`, with the cloth's triangles
   given; without them, spring bones' bones, closer than the thickness) pushes the edge's two
   vertices along the common normal, weighted by where the edge is hit so that the
   hit point moves by the needed amount (Bridson et al. 2002, §7.2). A model without faces
   (spring bones' bones) has its edges kept off the ridges' end points the same way
   (:func:`_edge_corners`: a body's convex corner between two joints), which step 4 does
   for cloth.
4. **Collider point–cloth face.** A collider vertex on a ridge (a sphere's pole, a
   box's corner) against the cloth's triangles (given as ``triangles``): crossing a
   triangle during the step (the same cubic, the point inside the triangle at that
   time) or ending closer than ``thickness`` to a triangle's inside, on the side its
   outward normal points to, is a contact and (crossed, or closer than the thickness less
   :data:`_SLACK`) pushes the triangle's three vertices along the triangle's
   normal, away from the point, weighted by the barycentric weights of the point so
   that the hit point of the cloth moves by the needed amount (the vertex–face case of
   Bridson et al. 2002, §7.2, with the roles swapped). Without it a corner or a pole
   between the cloth's vertices pokes through its faces unseen.

A vertex still crossing a triangle after the last pass is put back where it started,
carried by the collider (``x₀ + q₁ − q₀`` for the nearest collider point ``q``): that
position was outside, so nothing ends inside whatever the step size.

**Friction** (Coulomb, coefficient ``μ``) acts on the motion relative to the collider
point in contact, ``(x₁ − x₀) − (q₁ − q₀)``: its tangential part is shortened by
``μ`` times the normal correction, so a vertex sticks where ``|tangential| ≤ μ |normal|``
(for cloth resting on a slope: ``tan θ ≤ μ``) and is carried along by a moving
collider. Velocities of vertices in contact are then set relative to the collider's
velocity ``(q₁ − q₀)/h``: the inward normal part is removed (fully inelastic, no
bounce), the outward part kept, and the tangential part shortened by ``μ`` times the
removed normal speed (Bridson et al. 2002, §7.2). Nothing adds energy in the
collider's frame.

The broad phase (:class:`.proximity.BoxTree`, shared with self-collision) finds
overlapping axis-aligned boxes of the swept vertices/edges and swept triangles/edges;
the narrow phase is numpy over the candidate pairs, with :mod:`.proximity`'s kernels.
Before the exact tests, pairs that provably cannot act are dropped by cheaper ones (the
result is the same, bit for bit): continuous tests only where the primitives' own boxes
over the step meet (:func:`_meet`), and the proximity stage's nearest triangle first
among the candidates within the band, then only for vertices behind a candidate's plane
(:func:`_nearest_within`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .proximity import (
    BoxTree,
    PairCache,
    boxes_meet,
    closest_points_on_triangles,
    element_boxes,
    first_coplanar_time,
    overlapping,
    points_box,
    segment_parameters,
)
from .proximity import barycentric as _barycentric
from .proximity import dot as _dot
from .proximity import unit as _unit

__all__ = ["ContactStats", "Support", "MeshWindow", "revert_crossings", "coulomb_velocity", "resolve_mesh",
           "step_friction", "carried", "surface_near", "nearest_on_triangles"]

#: Detection/response passes per step; then the fail-safe.
PASSES = 4
_EPS_BARY = 1e-6
#: A continuous hit this close (barycentric weight) to a triangle's edge or corner takes
#: the surface's interpolated vertex normal instead of the face's.
_RIM = 0.05
#: Edge–edge and point–face pairs within the thickness are contacts (friction, the contact
#: frame), but push only when crossed or closer than ``(1 − _SLACK)`` thickness (then out
#: to the full thickness). The two stages push along different normals (the edges' common
#: normal, the cloth face's normal); pushing on every shortfall they moved each other's
#: vertices by ~1 mm in every pass on a draped sphere and the passes always ran out (then
#: the fail-safe). With this margin they end within two or three passes.
_SLACK = 0.05
#: Models without faces with at most this many edges (spring bones' bones) test them against every ridge's
#: box of a collider (one dense test a pass) instead of building a box tree of the ridges for
#: each step's window: a tree over a deforming body's 13,000 ridges took half of a 6-bone tail's
#: contact stage.
_FEW_EDGES = 64
#: A pass moved a vertex when it moved it more than this (relative to the thickness);
#: round-off in the re-projection of resting vertices is not a move.
_STILL = 1e-6


@dataclass
class ContactStats:
    """What the contact stage did (accumulated over steps).

    Attributes
    ----------
    contacts : int
        Cloth vertices in contact with a collider, summed over steps (a vertex touching
        one collider in several passes of a step counts once).
    max_penetration : float
        m, the deepest a cloth vertex ends behind a collider surface after the contact
        stage (0 is the goal), checked on the vertices near each collider.
    deepest_caught : float
        m, the deepest the solver put a vertex behind a surface before the response
        undid it (how much the contact stage had to do).
    """

    contacts: int = 0
    max_penetration: float = 0.0
    deepest_caught: float = 0.0

    def add(self, contacts: int, penetration: float, caught: float = 0.0) -> None:
        self.contacts += int(contacts)
        self.max_penetration = max(self.max_penetration, float(penetration))
        self.deepest_caught = max(self.deepest_caught, float(caught))


@dataclass
class MeshWindow:
    """A triangle-mesh collider over one step: corners at the start and end of the step.

    Attributes
    ----------
    c0, c1 : numpy.ndarray
        Shape ``(m, 3)``, collider vertices at the start and end of the step, m.
    triangles : numpy.ndarray
        Shape ``(t, 3)``, counter-clockwise seen from outside.
    ridges : tuple or callable
        ``(edges, edge_faces)``, or a function that gives them when first needed (a
        :class:`~.colliders.TriangleMesh`'s, derived on demand).
    edges : numpy.ndarray
        Shape ``(e, 2)``, the collider's ridge edges (convex or boundary): the ones a
        cloth edge can catch on (a property, from ``ridges``).
    edge_faces : numpy.ndarray
        Shape ``(e, 2)``, the triangles on each side of ``edges`` (the same twice for a
        boundary edge).
    thickness, friction : float
        m; Coulomb coefficient.
    closed : bool
        Every edge has two triangles: behind the surface is inside at any depth. For open
        meshes only points straight behind a face (the nearest point inside it) count.
    cache : WindowCache
        Broad-phase structures built from this window's geometry by :func:`resolve_mesh`
        (box trees of its triangles, ridges and ridge points, and the candidate pairs found
        so far): every contact pass of the step reuses them, and a static collider's
        window, kept by its :class:`~.colliders.TriangleMesh`, the whole bake.
    """

    c0: np.ndarray
    c1: np.ndarray
    triangles: np.ndarray
    ridges: tuple[np.ndarray, np.ndarray] | Callable[[], tuple[np.ndarray, np.ndarray]]
    thickness: float
    friction: float
    closed: bool
    cache: WindowCache = field(default_factory=lambda: WindowCache(), repr=False, compare=False)

    @property
    def edges(self) -> np.ndarray:
        return self._ridge_pair()[0]

    @property
    def edge_faces(self) -> np.ndarray:
        return self._ridge_pair()[1]

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: the collider's bounding box over the step (kept in the cache)."""
        if self.cache.box is None:
            self.cache.box = points_box(self.c0, self.c1)
        return self.cache.box

    def _ridge_pair(self) -> tuple[np.ndarray, np.ndarray]:
        if callable(self.ridges):  # derived on first use (its collider's ridges)
            self.ridges = self.ridges()
        return self.ridges


@dataclass
class WindowCache:
    """What :mod:`.contact` computes once per :class:`MeshWindow` (each ``None`` until first
    needed): its box over the step (``box``: lo, hi), the part near the cloth it was last cut
    to (``near``: the cloth's box it was cut for and the part), its vertex and face normals
    (``vertex_normals``; ``normals_start``, ``normals_end``), its triangles swept over the
    step (``triangles``: a box tree of their boxes grown by the band, and the boxes) with
    the continuous test's box slack (``meet``, m), its ridges (``ridges``: a box tree and
    their normals) and ridge points (``points``: the points, their normals, a box tree and
    their boxes), and the candidate pairs found so far (``pairs``: cloth ``"vertices"``,
    ``"edges"`` and ``"faces"`` against those trees)."""

    box: tuple | None = None
    near: tuple | None = None
    vertex_normals: np.ndarray | None = None
    normals_start: np.ndarray | None = None
    normals_end: np.ndarray | None = None
    triangles: tuple | None = None
    meet: float = 0.0
    ridges: tuple | None = None
    points: tuple | None = None
    pairs: dict[str, PairCache] = field(default_factory=dict)


def _apart(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, grow: float) -> bool:
    """Whether the collider's bounding box over the step, grown by ``grow`` (m), misses
    the cloth's ``x_old → x`` (then neither vertices, edges nor faces can touch it)."""
    lo, hi = win.box()
    xlo, xhi = points_box(x, x_old)
    return not bool(np.all((xlo <= hi + grow) & (lo - grow <= xhi)))


#: A moving collider with more triangles than this is cut, per step, to the part near the
#: cloth (:func:`_near_part`) before any broad-phase structure is built.
_CUT = 256


def _near_part(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, grow: float) -> MeshWindow:
    """The part of a moving window that can touch the cloth this step: the triangles and
    ridges whose boxes over the step come within ``2 grow`` (m) of the cloth's box over the
    step ``x_old → x``, plus every triangle on a kept ridge's sides (its normal) and around
    a kept ridge point (the point's normal), as a window of its own. Kept in ``win.cache``
    and reused by the later calls of the step while the cloth's box, grown by ``grow``,
    stays inside the one it was cut for; a deforming body of thousands of triangles then
    costs broad-phase structures over the few near the cloth, not over all of them."""
    clo, chi = points_box(x, x_old)
    clo, chi = clo - grow, chi + grow
    done = win.cache.near
    if done is not None and np.all(clo >= done[0]) and np.all(chi <= done[1]):
        return done[2]
    lo, hi = clo - grow, chi + grow
    vlo, vhi = np.minimum(win.c0, win.c1), np.maximum(win.c0, win.c1)
    t, e = win.triangles, win.edges
    keep_t = np.ones(len(t), bool)
    col = [t[:, j] for j in range(3)]
    for k in range(3):  # the triangle's box over the step against the cloth's
        tlo = np.minimum(np.minimum(vlo[col[0], k], vlo[col[1], k]), vlo[col[2], k])
        thi = np.maximum(np.maximum(vhi[col[0], k], vhi[col[1], k]), vhi[col[2], k])
        keep_t &= (tlo <= hi[k]) & (thi >= lo[k])
    keep_e = np.ones(len(e), bool)
    for k in range(3):
        keep_e &= ((np.minimum(vlo[e[:, 0], k], vlo[e[:, 1], k]) <= hi[k])
                   & (np.maximum(vhi[e[:, 0], k], vhi[e[:, 1], k]) >= lo[k]))
    ke = np.flatnonzero(keep_e)
    keep_t[win.edge_faces[ke].reshape(-1)] = True
    point = np.zeros(len(vlo), bool)
    point[e[ke].reshape(-1)] = True
    keep_t |= point[t[:, 0]] | point[t[:, 1]] | point[t[:, 2]]
    kt = np.flatnonzero(keep_t)
    renum = np.full(len(t), -1, dtype=np.int64)
    renum[kt] = np.arange(len(kt))
    part = MeshWindow(win.c0, win.c1, t[kt], (e[ke], renum[win.edge_faces[ke]]), win.thickness,
                      win.friction, win.closed)
    win.cache.near = (lo, hi, part)
    return part


def _normals(c: np.ndarray, tris: np.ndarray) -> np.ndarray:
    return _unit(np.cross(c[tris[:, 1]] - c[tris[:, 0]], c[tris[:, 2]] - c[tris[:, 0]]))[0]


def _friction(x: np.ndarray, rel_start: np.ndarray, n: np.ndarray, push: np.ndarray,
              mu: float) -> np.ndarray:
    """Shorten the tangential part of ``x − rel_start`` by ``μ · push`` (positions ``(k, 3)``)."""
    d = x - rel_start
    dt = d - _dot(d, n)[:, None] * n
    ln = np.sqrt(_dot(dt, dt))
    cut = np.minimum(ln, mu * np.maximum(push, 0.0))
    return x - dt * (cut / np.where(ln > 0, ln, 1.0))[:, None]


def _vertex_normals(win: MeshWindow) -> np.ndarray:
    """Unit normals ``(m, 3)`` of the window's vertices at the end of the step, the
    area-weighted mean of their faces' normals, computed once per window."""
    if win.cache.vertex_normals is None:
        c, t = win.c1, win.triangles
        area = np.cross(c[t[:, 1]] - c[t[:, 0]], c[t[:, 2]] - c[t[:, 0]])
        acc = np.zeros((len(c), 3))
        for k in range(3):
            np.add.at(acc, t[:, k], area)
        win.cache.vertex_normals = _unit(acc)[0]
    return win.cache.vertex_normals


def _face_normals(win: MeshWindow, end: bool) -> np.ndarray:
    """Unit normals ``(t, 3)`` of the window's triangles at the end (or the start) of the
    step, computed once per window (kept in ``win.cache``)."""
    cache = win.cache
    if end or win.c0 is win.c1:
        if cache.normals_end is None:
            cache.normals_end = _normals(win.c1, win.triangles)
        return cache.normals_end
    if cache.normals_start is None:
        cache.normals_start = _normals(win.c0, win.triangles)
    return cache.normals_start


def nearest_on_triangles(p: np.ndarray, corners: np.ndarray, triangles: np.ndarray,
                         normals: np.ndarray, keys: np.ndarray, tri_idx: np.ndarray,
                         n: int) -> tuple[np.ndarray, ...]:
    """The nearest surface point of each point among its candidate triangles: the one
    nearest-surface query of the contact stage and of :meth:`.colliders.TriangleMesh.nearest`.

    Pair ``j`` is the point ``p[j]`` (``(k, 3)``, the point numbered ``keys[j]`` below ``n``)
    and the triangle ``triangles[tri_idx[j]]`` of ``corners`` ``(m, 3)`` with unit normal
    ``normals[tri_idx[j]]``. Only the distance is computed for every pair; the rest for the
    nearest ones.

    Returns
    -------
    best : numpy.ndarray
        Shape ``(k',)``, the nearest pair of each point, in increasing key order (the first
        on a tie).
    q, bary : numpy.ndarray
        Shape ``(k', 3)``, the nearest point on its triangle and its barycentric weights.
    sd : numpy.ndarray
        Shape ``(k',)``, m, the distance, negative behind the triangle's face.
    out_dir : numpy.ndarray
        Shape ``(k', 3)``, the outward direction from ``q`` (the face's normal where ``q`` is
        inside the face, or the point on it).
    interior : numpy.ndarray
        Shape ``(k',)``, bool: ``q`` is inside the face (the point straight in front of or
        behind it).
    """
    t = triangles[tri_idx]
    a, b, c = corners[t[:, 0]], corners[t[:, 1]], corners[t[:, 2]]
    q = closest_points_on_triangles(p, a, b, c)
    diff = p - q
    dist = np.sqrt(_dot(diff, diff))
    best = _group_min(keys, dist, n)
    q, diff, dist = q[best], diff[best], dist[best]
    nrm = normals[tri_idx[best]]
    side = _dot(diff, nrm)
    sign = np.where(side < 0, -1.0, 1.0)
    interior = np.abs(side) >= (1.0 - 1e-9) * dist
    out_dir = np.where((dist > 1e-12)[:, None], sign[:, None] * diff / np.where(dist > 1e-12, dist, 1)[:, None],
                       nrm)
    out_dir = np.where(interior[:, None], nrm, out_dir)
    bary = _barycentric(q, a[best], b[best], c[best])
    return best, q, bary, sign * dist, out_dir, interior


def _nearest(win: MeshWindow, x: np.ndarray, verts: np.ndarray, tris_idx: np.ndarray,
             n: int, end: bool = True) -> tuple[np.ndarray, ...]:
    """:func:`nearest_on_triangles` of the vertices ``verts`` of ``x`` among their candidate
    triangles ``tris_idx`` of the window (vertices below ``n``), at the end of the step (at
    its start without ``end``)."""
    return nearest_on_triangles(x[verts], win.c1 if end else win.c0, win.triangles,
                                _face_normals(win, end), verts, tris_idx, n)


def _nearest_within(win: MeshWindow, x: np.ndarray, sub: np.ndarray, band: float, vpairs: PairCache,
                    grow: np.ndarray) -> tuple[np.ndarray, ...]:
    """The nearest triangle of each vertex ``sub`` among its candidates, the triangles whose
    box (grown by ``band`` in the tree) overlaps the vertex's box grown by ``band`` (m), for
    the vertices the proximity stage can act on (closer than ``band``, or inside): those
    vertices in increasing order, their nearest triangles and what :func:`_nearest` gives
    for them. A vertex left out is further than ``band`` from all of them and in front of
    the nearest: the proximity stage does nothing with it.

    In two rounds: first among the triangles whose box comes within ``band`` of the vertex
    itself; a vertex found there no further than ``band`` from one has its nearest among
    them (every other candidate's box, and so the triangle, is further). The others are
    further than ``band`` from every candidate, so only the ones inside matter: among
    them, the vertices behind the plane of some candidate (see :func:`_behind`) look at
    all their candidates."""
    n = len(x)
    m = 1e-6 * band + 1e-12  # the boxes' rounding; the query box is inside the full one
    iv, it_ = vpairs.pairs(x - m, x + m, sub, grow)
    found = np.zeros(n, bool)
    parts = []
    if len(iv):
        best, q, bary, sd, out_dir, interior = _nearest(win, x, iv, it_, n)
        close = np.abs(sd) <= band
        iv, it_ = iv[best], it_[best]
        found[iv[close]] = True
        parts.append((iv[close], it_[close], q[close], bary[close], sd[close], out_dir[close], interior[close]))
    rest = sub[~found[sub]]
    iv, it_ = vpairs.pairs(x - band, x + band, rest, grow)
    if len(iv):  # further than ``band``: only a vertex inside can act, see _behind
        keep = _behind(win, x, iv, it_)
        iv, it_ = iv[keep], it_[keep]
    if len(iv):
        best, q, bary, sd, out_dir, interior = _nearest(win, x, iv, it_, n)
        parts.append((iv[best], it_[best], q, bary, sd, out_dir, interior))
    if not parts:
        return (_EMPTY_INT, _EMPTY_INT, np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros((0, 3)),
                np.zeros(0, bool))
    if len(parts) == 1:
        return parts[0]
    out = tuple(np.concatenate(c) for c in zip(*parts))
    order = np.argsort(out[0], kind="stable")
    return tuple(c[order] for c in out)


_EMPTY_INT = np.zeros(0, dtype=np.int64)


def surface_near(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, idx: np.ndarray,
                 end: bool) -> tuple[np.ndarray, np.ndarray]:
    """Signed distances and outward normals of the collider's surface for the vertices
    ``idx`` ``(k,)`` within its contact band (``thickness (1 + _BAND)``): of ``x`` against
    the surface at the end of the step with ``end``, else of ``x_old`` against its start.

    Returns
    -------
    sd : numpy.ndarray
        Shape ``(k,)``, m (negative inside; ``inf`` for a vertex further than the band, or
        behind an open mesh but not straight behind a face).
    normal : numpy.ndarray
        Shape ``(k, 3)``, the outward direction from the nearest surface point (the face's
        normal where that point is inside the face).
    """
    k = len(idx)
    sd, nrm = np.full(k, np.inf), np.zeros((k, 3))
    band = float(win.thickness) * (1.0 + _BAND) + 1e-9
    if k == 0 or len(win.triangles) == 0 or _apart(win, x, x_old, band):
        return sd, nrm
    if win.c0 is not win.c1 and len(win.triangles) > _CUT:
        win = _near_part(win, x, x_old, band + float(win.thickness))
    p = x if end else x_old
    m = 1e-6 * band + 1e-12  # a point query: the triangles' boxes are grown by the band
    iv, it_ = _triangle_tree(win)[0].pairs(p - m, p + m, idx)
    if len(iv) == 0:
        return sd, nrm
    n = len(x)
    best, _, _, d, out_dir, interior = _nearest(win, p, iv, it_, n, end)
    vi = iv[best]
    ok = (np.abs(d) <= band) & ((d >= 0) | win.closed | interior)
    where = np.full(n, -1)
    where[idx] = np.arange(k)
    sd[where[vi[ok]]], nrm[where[vi[ok]]] = d[ok], out_dir[ok]
    return sd, nrm


def _behind(win: MeshWindow, x: np.ndarray, iv: np.ndarray, it_: np.ndarray) -> np.ndarray:
    """The pairs ``(iv, it_)`` of the vertices that lie behind (or within 1 nm in front of)
    the end plane of at least one of their triangles in the pairs, ``(k,)`` bool. A vertex
    in front of all of them is in front of its nearest one, whichever it is: the nearest
    point's offset along the face normal is the plane distance, so its signed distance is
    positive."""
    plane = _dot(x[iv] - win.c1[win.triangles[it_, 0]], _face_normals(win, True)[it_])
    behind = np.zeros(len(x), bool)
    behind[iv[plane < 1e-9]] = True
    return behind[iv]


def _deepest(win: MeshWindow, x: np.ndarray, iv: np.ndarray, it_: np.ndarray) -> float:
    """How deep (m, 0 if none) the deepest vertex lies inside the collider at the end of the
    step, judged by its nearest candidate triangle (pairs ``iv, it_``). Only a vertex behind
    the plane of one of its candidates can be inside its nearest one: the others are
    dropped before the nearest points are computed."""
    plane = _dot(x[iv] - win.c1[win.triangles[it_, 0]], _face_normals(win, True)[it_])
    behind = np.zeros(len(x), bool)
    behind[iv[plane < 1e-9]] = True
    keep = np.flatnonzero(behind[iv])
    if len(keep) == 0:
        return 0.0
    sd, interior = _nearest(win, x, iv[keep], it_[keep], len(x))[3::2]
    inside = (sd < 0) & (win.closed | interior)
    return float(-sd[inside].min()) if np.any(inside) else 0.0


def _may_cross(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, iv: np.ndarray,
               it_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vertex–triangle pairs ``(iv, it_)`` the continuous test can accept: a vertex that
    starts behind the triangle's plane is rejected by that test anyway, and against a
    still triangle the coplanarity cubic is linear, so a vertex in front of its plane by
    more than a rounding margin at both ends of the step has no root. Both are dropped
    before the cubic."""
    d0 = _dot(x_old[iv] - win.c0[win.triangles[it_, 0]], _face_normals(win, False)[it_])
    if win.c0 is not win.c1:
        keep = np.flatnonzero(d0 >= -1e-9)
        return iv[keep], it_[keep]
    d1 = _dot(x[iv] - win.c1[win.triangles[it_, 0]], _face_normals(win, True)[it_])
    slack = 1e-6 * np.abs(d1 - d0) + 1e-9
    keep = np.flatnonzero((d0 >= -1e-9) & ((d0 <= slack) | (d1 <= slack)))
    return iv[keep], it_[keep]


def _triangle_tree(win: MeshWindow) -> tuple[BoxTree, np.ndarray, np.ndarray]:
    """The window's triangles swept over the step: their boxes grown by the contact band
    indexed (:class:`.proximity.BoxTree`), and the boxes themselves ``(t, 3)`` (kept in
    ``win.cache``)."""
    if win.cache.triangles is None:
        band = float(win.thickness) * (1.0 + _BAND) + 1e-9
        t0c, t1c = win.c0[win.triangles], win.c1[win.triangles]
        lo, hi = np.minimum(t0c.min(1), t1c.min(1)), np.maximum(t0c.max(1), t1c.max(1))
        win.cache.triangles = (BoxTree(lo - band, hi + band), lo, hi)
        win.cache.meet = _MEET * float(np.max(hi - lo)) + 1e-9 if len(lo) else 1e-9
    return win.cache.triangles


#: Relative slack (of the boxes' sides) of the box test that keeps a pair for the exact
#: continuous test (:func:`_meet`): a pair the cubic accepts has its point inside the
#: triangle at the time they meet, to within the barycentric tolerance (``_EPS_BARY`` of
#: the triangle, ``1e-6``) and the root's bisection (``2⁻⁴⁰`` of the step), far inside this.
_MEET = 1e-4


def _row_max(a: np.ndarray) -> np.ndarray:
    """Largest entry of each row of ``a`` ``(k, 3)``, ``(k,)`` (``numpy.max(axis=1)`` reduces
    over a short axis, several times slower)."""
    return np.maximum(np.maximum(a[:, 0], a[:, 1]), a[:, 2])


def _meet(alo: np.ndarray, ahi: np.ndarray, blo: np.ndarray, bhi: np.ndarray,
          within: float = 0.0, rel: float = _MEET) -> np.ndarray:
    """Whether the boxes ``alo, ahi`` and ``blo, bhi`` (rows of pairs, ``(k, 3)``) come within
    ``within`` (m) of each other along every axis, with ``rel`` of their largest sides as
    slack, ``(k,)`` bool. Two moving primitives can only touch at a time when both lie in
    their own box over the step, so a pair whose boxes do not meet cannot pass the
    continuous test; it is dropped before the cubic."""
    slack = within + rel * (_row_max(ahi - alo) + _row_max(bhi - blo)) + 1e-12
    return boxes_meet(alo.T, ahi.T, blo.T, bhi.T, slack)


def _pair_cache(cache: WindowCache, key: str, tree: BoxTree, rows: int) -> PairCache:
    """The :class:`.proximity.PairCache` ``key`` of ``rows`` query boxes against ``tree`` in
    ``cache``."""
    pc = cache.pairs.get(key)
    if pc is None or pc.rows != rows or pc.tree is not tree:
        pc = cache.pairs[key] = PairCache(tree, rows)
    return pc


def _group_min(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Index (into ``keys``, ``(k,)`` ints below ``n``) of the smallest ``values`` per key,
    the first one on a tie (``nan`` counts as largest); in increasing key order. Two
    unbuffered scatters of length ``k``, no sort."""
    k = len(keys)
    low = np.full(n, np.nan)
    np.fmin.at(low, keys, values)
    low = low[keys]
    hit = np.flatnonzero((values == low) | np.isnan(low))
    first = np.full(n, k)
    np.minimum.at(first, keys[hit], hit)
    return first[first < k]


def _paths(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, iv: np.ndarray,
           tr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of :func:`_vertex_face_times` for the cloth vertices ``iv`` ``(k,)`` against the
    window's triangles ``tr`` ``(k, 3)``: the triangle's corners then the vertex, at the start
    and at the end of the step, ``(k, 4, 3)`` each."""
    p = np.stack([win.c0[tr[:, 0]], win.c0[tr[:, 1]], win.c0[tr[:, 2]], x_old[iv]], 1)
    p1 = np.stack([win.c1[tr[:, 0]], win.c1[tr[:, 1]], win.c1[tr[:, 2]], x[iv]], 1)
    return p, p1


def _vertex_face_times(p: np.ndarray, p1: np.ndarray) -> tuple[np.ndarray, ...]:
    """The continuous vertex–face test: rows of a triangle's three corners and a point,
    ``p`` ``(k, 4, 3)`` at the start of the step moving linearly to ``p1`` at its end
    (module docstring, step 1). Returns the rows ``sel`` ``(s,)`` that become coplanar within
    the step, the earliest such time ``t`` ``(s,)`` (a fraction of the step), the four
    points then ``(s, 4, 3)`` and the point's barycentric weights on the triangle then
    ``(s, 3)``; whether the point is inside the triangle (every weight ≥ ``−_EPS_BARY``) and
    which side it comes from is the caller's test."""
    tc = first_coplanar_time(p, p1)
    sel = np.flatnonzero(np.isfinite(tc))
    t = tc[sel]
    pt = p[sel] + t[:, None, None] * (p1[sel] - p[sel])
    return sel, t, pt, _barycentric(pt[:, 3], pt[:, 0], pt[:, 1], pt[:, 2])


@dataclass
class Support:
    """The collider's push on each vertex, carried from one step to the next.

    Post-solve projection alone lets the solver pull a resting vertex into the collider
    every step (it does not know the collider is there) and the projection then stores
    that pull back in the springs: energy grows. So the normal force each collider
    exerts is estimated and applied in the next solve, like gravity: a dual-ascent
    estimate of the contact force (the constraint's Lagrange multiplier, updated from
    the constraint error as in augmented-Lagrangian methods), per vertex
    ``λ ← max(0, λ + m (thickness − s)/h²)`` with ``s`` the solver's distance from the
    surface. Applied as the velocity change ``h λ/m`` before the solve (the same as an
    external force ``λ`` over the step in every integrator here). Once ``λ`` balances
    the load, the solve lands on the surface and the projection has nothing left to do.
    The gain is a fraction of ``m/h²``, the vertex's inertia alone; a larger one (the
    full ``m/h²``, or adding its springs' stiffness, the diagonal of the implicit
    system) overshoots, because neighbouring vertices are pushed at once and the cloth
    is thrown off. So a very light cloth on
    very stiff springs at one substep takes a few steps to be held, and its springs can
    store the projection's work meanwhile: more substeps cure that.

    On stiff cloth pressed onto a curved body by its own tension this update converges
    slowly at one substep (a Richardson iteration on the contact's Schur complement);
    docs/CONTACT.md has the measurements and what was tried instead.

    Attributes
    ----------
    force : numpy.ndarray
        Shape ``(n, 3)``, N, the push of the colliders for the next step.
    masses : numpy.ndarray
        Shape ``(n,)``, kg.
    touched : numpy.ndarray
        Shape ``(n,)``, bool, vertices near a collider in the current step.
    """

    force: np.ndarray
    masses: np.ndarray
    touched: np.ndarray
    @classmethod
    def zeros(cls, masses: np.ndarray) -> Support:
        n = len(masses)
        return cls(np.zeros((n, 3)), np.asarray(masses, dtype=np.float64), np.zeros(n, bool))

    def gain(self, idx: np.ndarray, h: float) -> np.ndarray:
        """``m/h²`` of vertices ``idx``, N/m."""
        return self.masses[idx] / (h * h)

    def kick(self, v: np.ndarray, h: float, movable: np.ndarray,
             load: np.ndarray | None = None, weight: np.ndarray | float = 0.0) -> None:
        """Apply the carried push to the velocities ``(n, 3)`` before a solve; reset ``touched``.

        ``load`` ``(n, 3)``, N: the other forces on the vertices now (gravity, springs,
        fields). A collider can only push back what presses a vertex onto it, so the push
        is capped by the load's inward part along the push plus ``weight`` (N, ``(n,)``
        or scalar: a margin for what the load does not show, e.g. another layer of cloth
        lying on this one); without the cap the estimate (which lags the load by a few
        steps) throws a light cloth off when the load drops, e.g. when the cloth slides or
        its springs relax.
        """
        if load is not None:
            lam = np.sqrt(np.einsum("ij,ij->i", self.force, self.force))
            nrm = self.force / np.where(lam > 0, lam, 1.0)[:, None]
            inward = np.maximum(-np.einsum("ij,ij->i", load, nrm), 0.0) + weight
            self.force *= (np.minimum(lam, inward) / np.where(lam > 0, lam, 1.0))[:, None]
        v[movable] += (h / self.masses[movable])[:, None] * self.force[movable]
        self.touched[:] = False

    def settle(self) -> None:
        """After all colliders: vertices no collider was near any more lose their push."""
        self.force[~self.touched] = 0.0


#: Fraction of the deadbeat gain ``m/h²`` used in the support update: the full gain would
#: settle a lone vertex in one step, but neighbours pushed at once overshoot and the cloth
#: jitters on the collider; 0.3 settles both a heavy drape and a light one (measured).
_SUPPORT_GAIN = 0.3

#: Band above the thickness (fraction of it) in which resting vertices keep their support.
_BAND = 0.5


def resolve_mesh(win: MeshWindow, x: np.ndarray, v: np.ndarray, x_old: np.ndarray, h: float,
                 edges: np.ndarray, movable: np.ndarray, stats: ContactStats | None = None,
                 support: Support | None = None, only: np.ndarray | None = None,
                 triangles: np.ndarray | None = None,
                 normals: np.ndarray | None = None,
                 velocities: np.ndarray | None = None,
                 scale: np.ndarray | None = None) -> np.ndarray:
    """Make the end of one step collision-free against one collider (module docstring).

    Parameters
    ----------
    win : MeshWindow
    x : numpy.ndarray
        Shape ``(n, 3)``, cloth positions at the end of the step, m (modified).
    v : numpy.ndarray
        Shape ``(n, 3)``, velocities, m/s (modified).
    x_old : numpy.ndarray
        Shape ``(n, 3)``, positions at the start of the step (collision-free), m.
    h : float
        Step, s.
    edges : numpy.ndarray
        Shape ``(e, 2)``, the cloth's mesh edges.
    movable : numpy.ndarray
        Shape ``(n,)``, bool: False for pinned vertices (set afterwards, never moved here).
    stats : ContactStats, optional
        Accumulates contacts and the deepest penetration.
    support : Support, optional
        The carried contact force: read (it acted in this solve) and updated.
    only : numpy.ndarray, optional
        Shape ``(n,)``, bool: examine only these vertices (and edges touching them).
    triangles : numpy.ndarray, optional
        Shape ``(f, 3)``, the cloth's triangles, for the collider points against them
        (module docstring, step 4); without them that stage is skipped.
    normals : numpy.ndarray, optional
        Shape ``(n, 3)``: receives the outward contact normal of every vertex this
        collider holds (other rows untouched).
    velocities : numpy.ndarray, optional
        Shape ``(n, 3)``: receives the velocity of the collider point each of them
        touches, m/s (other rows untouched).
    scale : numpy.ndarray, optional
        Shape ``(n,)``, in ``[0, 1]``: the share of the thickness each vertex keeps from
        this collider (below 1 where another collider's shell overlaps this one's, see
        :func:`.colliders.room`; a cloth edge or face takes its vertices' smallest); the
        band the contacts are searched in stays the full thickness's.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``, bool: the movable vertices this collider holds (pushed by it, or
        resting on it: the solver left them within 1.1 thickness of it).
    """
    n = len(x)
    th = float(win.thickness)
    if len(win.triangles) == 0 or n == 0:
        return np.zeros(n, bool)
    band = th * (1.0 + _BAND) + 1e-9
    if _apart(win, x, x_old, band):
        return np.zeros(n, bool)
    if win.c0 is not win.c1 and len(win.triangles) > _CUT:
        win = _near_part(win, x, x_old, band + th)
    vpairs = _pair_cache(win.cache, "vertices", _triangle_tree(win)[0], n)
    st = _Pass(win, x_old, h, band, np.full(n, th) if scale is None else th * scale, support, vpairs)
    touch = _Touch.empty(n)
    active = movable.copy() if only is None else movable & only  # then those just moved
    for it in range(PASSES):
        x_pass = x.copy()
        sub = np.flatnonzero(active)
        vlo, vhi = np.minimum(x_old, x), np.maximum(x_old, x)
        grow = band + (vhi - vlo)  # room for the later passes and, kept, the next step
        _crossing_vertices(st, x, sub, vlo, vhi, grow, touch, first=it == 0)
        _near_vertices(st, x, sub, grow, touch, first=it == 0)
        if len(win.edges) and len(edges):
            # the margin only where the collider points push the cloth's faces too (their
            # normals and the edges' fight); spring bones' bones alone keep the full thickness
            faces = triangles is not None and len(triangles) > 0
            _edge_edge(win, x, x_old, edges, movable, active, touch, win.cache, scale,
                       _SLACK if faces else 0.0, corners=not faces)
        if triangles is not None and len(triangles) and len(win.edges):
            _points_faces(win, x, x_old, triangles, movable, active, touch, win.cache, scale)
        active = _row_max(np.abs(x - x_pass)) > _STILL * th
        if not np.any(active):
            break
    else:
        _fail_safe(win, x, x_old, movable, touch)
    near = np.flatnonzero(np.isfinite(touch.deficit) & movable)
    _update_support(support, touch, near, h)
    _contact_velocities(v, touch, near, movable, float(win.friction), support, h)
    if stats is not None:
        _count(stats, st, x, touch, near, movable)
    touching = np.zeros(n, bool)
    touching[near] = touch.deficit[near] >= -0.1 * th  # resting at the thickness, not just near
    held = (touch.in_contact | touching) & movable
    if normals is not None:
        normals[held] = touch.normal[held]
    if velocities is not None:
        velocities[held] = (touch.q1[held] - touch.q0[held]) / h
    return held


@dataclass
class _Pass:
    """What every contact pass of one collider over one step works with."""

    win: MeshWindow
    x_old: np.ndarray  # (n, 3), the start of the step
    h: float  # s
    band: float  # m, the contact band: thickness (1 + _BAND)
    thv: np.ndarray  # (n,), m, the thickness each vertex keeps from this collider
    support: Support | None
    vpairs: PairCache  # the vertices' candidate triangles


@dataclass
class _Touch:
    """The contacts one collider's passes find over one step, per cloth vertex: whether it
    was pushed (``in_contact``), its contact frame (outward ``normal`` and the collider point
    at the start and end of the step, ``q0``, ``q1``; ``(n, 3)`` each), the first pass's
    shortfall of the thickness (``deficit``, m, ``nan`` where not near), whether the carried
    push's friction was spent (``rubbed``, once per step) and the deepest penetration seen."""

    in_contact: np.ndarray
    normal: np.ndarray
    q0: np.ndarray
    q1: np.ndarray
    deficit: np.ndarray
    rubbed: np.ndarray
    penetration: float = 0.0

    @classmethod
    def empty(cls, n: int) -> _Touch:
        return cls(np.zeros(n, bool), np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3)),
                   np.full(n, np.nan), np.zeros(n, bool))

    def hold(self, vi: np.ndarray, normal: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> None:
        """The vertices ``vi`` are in contact, with this frame."""
        self.in_contact[vi] = True
        self.normal[vi], self.q0[vi], self.q1[vi] = normal, q0, q1

    def deeper(self, depth: float) -> None:
        self.penetration = max(self.penetration, float(depth))


def _crossing_vertices(st: _Pass, x: np.ndarray, sub: np.ndarray, vlo: np.ndarray, vhi: np.ndarray,
                       grow: np.ndarray, touch: _Touch, first: bool) -> None:
    """Stage 1 (module docstring): the vertices ``sub`` whose step crosses a triangle from its
    front go back in front of it, ``thickness`` above its end position, with friction."""
    win, x_old, band, thv = st.win, st.x_old, st.band, st.thv
    n, tris = len(x), win.triangles
    # only the triangles whose own box over the step (not grown by the band) meets the
    # vertex's can be crossed (see _meet): the tree's boxes are grown by ``band``, so
    # the query box is shrunk by it (it may turn inside out; the overlap test is the
    # same), less a slack; its candidates are kept grown as far as before
    slack = (win.cache.meet + _MEET * _row_max(vhi - vlo))[:, None]
    iv, it_ = st.vpairs.pairs(vlo + (band - slack), vhi - (band - slack), sub, grow + band)
    if len(iv):
        iv, it_ = _may_cross(win, x, x_old, iv, it_)
    if len(iv) == 0:
        return
    tr = tris[it_]
    p, p1 = _paths(win, x, x_old, iv, tr)
    sel, tt, pt, bary = _vertex_face_times(p, p1)
    if len(sel) == 0:
        return
    nt = _unit(np.cross(pt[:, 1] - pt[:, 0], pt[:, 2] - pt[:, 0]))[0]
    rel = (p1[sel, 3] - p[sel, 3]) - np.einsum("ki,kij->kj", bary, p1[sel, :3] - p[sel, :3])
    # crossing into the front face, inside the triangle, and starting in front
    start_side = _dot(p[sel, 3] - p[sel, 0], _face_normals(win, False)[it_[sel]])
    ok = (np.all(bary >= -_EPS_BARY, 1) & (_dot(rel, nt) < 0) & (start_side >= -1e-9))
    sel, bary, tt = sel[ok], bary[ok], tt[ok]
    if len(sel) == 0:
        return
    best = _group_min(iv[sel], tt, n)
    sel, bary = sel[best], bary[best]
    vi = iv[sel]
    q0 = np.einsum("ki,kij->kj", bary, p[sel, :3])
    q1 = np.einsum("ki,kij->kj", bary, p1[sel, :3])
    n1 = _face_normals(win, True)[it_[sel]]
    # a hit on a corner or an edge of the triangle (a ball's pole, a ridge) is pushed along
    # the surface's normal there, not one face's
    rim = np.min(bary, axis=1) < _RIM
    if np.any(rim):
        vn = _vertex_normals(win)[tr[sel[rim]]]
        n1[rim] = _unit(np.einsum("ki,kij->kj", bary[rim], vn))[0]
    s_end = _dot(x[vi] - q1, n1)
    touch.deeper(np.max(np.maximum(-s_end, 0.0)))
    push = thv[vi] - s_end
    if first:
        touch.deficit[vi] = push
    xn = x[vi] + push[:, None] * n1
    xn = _friction(xn, x_old[vi] + (q1 - q0), n1,
                   push + ~touch.rubbed[vi] * carried(st.support, vi, n1, st.h), float(win.friction))
    touch.rubbed[vi] = True
    x[vi] = xn
    touch.hold(vi, n1, q0, q1)


def _near_vertices(st: _Pass, x: np.ndarray, sub: np.ndarray, grow: np.ndarray, touch: _Touch,
                   first: bool) -> None:
    """Stage 2 (module docstring): the vertices ``sub`` closer than ``thickness`` to the end
    surface, or behind it, go to the nearest surface point plus ``thickness``; those resting
    within the band keep their support and get friction."""
    win, x_old, band, thv = st.win, st.x_old, st.band, st.thv
    iv, it_, q, bary, sd, out_dir, interior = _nearest_within(win, x, sub, band, st.vpairs, grow)
    if len(iv) == 0:
        return
    valid = (sd >= 0) | win.closed | interior
    if first:  # resting vertices inside the band keep (and adjust) their support
        rest = valid & (sd < band) & np.isnan(touch.deficit[iv])
        touch.deficit[iv[rest]] = thv[iv[rest]] - sd[rest]
        touch.normal[iv[rest]] = out_dir[rest]
        tr = win.triangles[it_[rest]]
        touch.q0[iv[rest]] = np.einsum("ki,kij->kj", bary[rest], win.c0[tr])
        touch.q1[iv[rest]] = q[rest]
    pushed = valid & (sd < thv[iv] * (1.0 - 1e-9))
    act = valid & (sd < band)  # pushed out, or resting: friction either way
    if not np.any(act):
        return
    pushed = pushed[act]
    iv, it_, q, bary, sd, out_dir = iv[act], it_[act], q[act], bary[act], sd[act], out_dir[act]
    touch.deeper(np.max(np.maximum(-sd, 0.0)))
    q0 = np.einsum("ki,kij->kj", bary, win.c0[win.triangles[it_]])
    push = np.maximum(thv[iv] - sd, 0.0)
    xn = np.where(pushed[:, None], q + thv[iv, None] * out_dir, x[iv])
    xn = _friction(xn, x_old[iv] + (q - q0), out_dir,
                   push + ~touch.rubbed[iv] * carried(st.support, iv, out_dir, st.h), float(win.friction))
    touch.rubbed[iv] = True
    x[iv] = xn
    touch.hold(iv[pushed], out_dir[pushed], q0[pushed], q[pushed])


def _update_support(support: Support | None, touch: _Touch, near: np.ndarray, h: float) -> None:
    """The carried push of the vertices ``near`` the collider: dual ascent on the contact
    force along the current normal (:class:`Support`)."""
    if support is None or len(near) == 0:
        return
    nrm = touch.normal[near]
    lam = np.einsum("ij,ij->i", support.force[near], nrm)
    lam = np.maximum(0.0, lam + _SUPPORT_GAIN * support.gain(near, h) * touch.deficit[near])
    support.force[near] = lam[:, None] * nrm
    support.touched[near] = True


def _contact_velocities(v: np.ndarray, touch: _Touch, near: np.ndarray, movable: np.ndarray,
                        mu: float, support: Support | None, h: float) -> None:
    """Velocities of the vertices in contact or resting, relative to the collider point:
    inelastic, with Coulomb friction (:func:`coulomb_velocity`)."""
    resting = np.zeros(len(v), bool)
    resting[near] = True
    idx = np.flatnonzero((touch.in_contact | resting) & movable)
    if len(idx):
        nrm = touch.normal[idx]
        v[idx] = coulomb_velocity(v[idx], (touch.q1[idx] - touch.q0[idx]) / h, nrm, mu,
                                  touch.in_contact[idx], carried(support, idx, nrm, h) / h)


def _count(stats: ContactStats, st: _Pass, x: np.ndarray, touch: _Touch, near: np.ndarray,
           movable: np.ndarray) -> None:
    """The step's statistics: vertices in contact or resting, the deepest one left inside
    (checked on them) and the deepest the passes caught."""
    resting = np.zeros(len(x), bool)
    resting[near] = True
    final = 0.0
    check = np.flatnonzero((touch.in_contact | resting) & movable)
    iv, it_ = st.vpairs.pairs(x - st.band, x + st.band, check, st.band + np.abs(x - st.x_old))
    if len(iv):
        final = _deepest(st.win, x, iv, it_)
    stats.add(int(np.count_nonzero(touch.in_contact | resting)), final, touch.penetration)


def coulomb_velocity(v: np.ndarray, vc: np.ndarray | float, nrm: np.ndarray, mu: float,
                     stop: np.ndarray | bool = True, pressed: np.ndarray | float = 0.0) -> np.ndarray:
    """Velocities ``(k, 3)`` after an inelastic contact with Coulomb friction.

    Relative to the collider's velocity ``vc``: where ``stop``, the inward normal part is
    removed (the outward part kept); the tangential part shrinks by ``μ`` times the normal
    speed removed plus ``pressed`` (m/s, the normal speed a carried push took away),
    never reversing (Bridson et al. 2002, §7.2).
    """
    vr = v - vc
    vn = _dot(vr, nrm)
    dvn = np.where(stop, np.maximum(-vn, 0.0), 0.0) + pressed
    vn_new = np.where(stop, np.maximum(vn, 0.0), vn)
    vt = vr - vn[:, None] * nrm
    ln = np.sqrt(_dot(vt, vt))
    scale = np.maximum(0.0, 1.0 - mu * dvn / np.where(ln > 0, ln, 1.0))
    return vc + vt * scale[:, None] + vn_new[:, None] * nrm


def step_friction(x: np.ndarray, x_old: np.ndarray, x_solved: np.ndarray, idx: np.ndarray,
                  nrm: np.ndarray, vc: np.ndarray, mu: np.ndarray | float, h: float,
                  pressed: np.ndarray | float = 0.0) -> np.ndarray:
    """Coulomb friction on the whole step of the vertices ``idx`` ``(k,)`` a collider holds,
    for every normal correction they were given (position-based friction, Macklin et al.
    2014, "Unified particle physics for real-time applications", §6.1). Returns which of
    them stick, ``(k,)`` bool.

    The step's motion relative to the collider point, ``u = (x − x₀) − h v_c`` (its
    tangential part ``u_t`` about the contact normal ``n``), is cut by ``μ d`` with
    ``d = ((x − x_solved)·n)⁺ + pressed`` the normal correction since ``x_solved`` (the
    solver's result, or the positions before a later stage such as the post-contact
    projection; ``pressed``, m: the normal displacement the carried push gave in the
    solve), less what was rubbed off since (how much shorter ``u_t`` is now than at
    ``x_solved``: :func:`resolve_mesh` rubs per pass): the vertex sticks (keeps the collider's motion)
    where ``|u_t|`` is within that, and slides, ``u_t`` shortened by it, otherwise. Only
    relative motion is cut, so no energy is added in the collider's frame.

    Parameters
    ----------
    x : numpy.ndarray
        Shape ``(n, 3)``, m, positions now (rows ``idx`` modified).
    x_old, x_solved : numpy.ndarray
        Shape ``(n, 3)``, m: the start of the step and the positions the correction is
        measured from.
    idx : numpy.ndarray
        Shape ``(k,)``, the held vertices.
    nrm, vc : numpy.ndarray
        Shape ``(k, 3)``: their outward contact normals and the collider points' velocities,
        m/s.
    mu : numpy.ndarray or float
        Shape ``(k,)`` or scalar, the friction coefficient.
    h : float
        Step, s.
    pressed : numpy.ndarray or float
        Shape ``(k,)`` or scalar, m.
    """
    base = x_old[idx] + h * vc

    def across(d: np.ndarray) -> np.ndarray:
        return d - _dot(d, nrm)[:, None] * nrm

    ut, us = across(x[idx] - base), across(x_solved[idx] - base)
    lt = np.sqrt(_dot(ut, ut))
    rubbed = np.maximum(np.sqrt(_dot(us, us)) - lt, 0.0)
    d = np.maximum(_dot(x[idx] - x_solved[idx], nrm), 0.0) + pressed
    budget = np.maximum(mu * d - rubbed, 0.0)
    x[idx] -= ut * np.minimum(1.0, budget / np.where(lt > 0, lt, 1.0))[:, None]
    return lt <= budget


def carried(support: Support | None, idx: np.ndarray, nrm: np.ndarray, h: float,
            force: np.ndarray | None = None) -> np.ndarray:
    """Normal displacement ``h² λ/m`` the carried push gave vertices ``idx`` ``(k,)``
    this step, m, ``(k,)``; ``λ`` is the push ``force`` ``(n, 3)`` (N; default the
    support's force now) along ``nrm`` ``(k, 3)``, at least 0."""
    if support is None:
        return np.zeros(len(idx))
    f = support.force if force is None else force
    lam = np.maximum(np.einsum("ij,ij->i", f[idx], nrm), 0.0)
    return h * h * lam / support.masses[idx]


def _edge_edge(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, edges: np.ndarray,
               movable: np.ndarray, active: np.ndarray, touch: _Touch,
               cache: WindowCache, scale: np.ndarray | None = None, slack: float = _SLACK,
               corners: bool = False) -> None:
    """Cloth edges (with an ``active`` end) against the collider's ridge edges (module
    docstring, step 3). ``cache`` keeps the ridge boxes' tree between passes; ``scale``
    ``(n,)`` as for :func:`resolve_mesh` (an edge keeps its ends' smaller share); ``slack``:
    the margin of the thickness within which a contact does not push (:data:`_SLACK`);
    ``corners``: the edges against the ridges' end points too (:func:`_edge_corners`, for a
    model without faces, whose faces would otherwise meet them)."""
    th = float(win.thickness)
    ce = win.edges
    sub = np.flatnonzero(active[edges[:, 0]] | active[edges[:, 1]])
    if len(sub) == 0:
        return
    # the boxes over the step of the edges asked about (rows ``sub`` of full-size arrays)
    elo, ehi, grow = (np.empty((len(edges), 3)) for _ in range(3))
    d = np.abs(x - x_old)
    es = edges[sub]
    elo[sub], ehi[sub] = element_boxes(np.minimum(x_old, x), np.maximum(x_old, x), es)
    grow[sub] = th + np.maximum(d[es[:, 0]], d[es[:, 1]])
    ef = win.edge_faces
    if cache.ridges is None:
        c0, d0, c1, d1 = win.c0[ce[:, 0]], win.c0[ce[:, 1]], win.c1[ce[:, 0]], win.c1[ce[:, 1]]
        clo = np.minimum(np.minimum(c0, d0), np.minimum(c1, d1)) - th
        chi = np.maximum(np.maximum(c0, d0), np.maximum(c1, d1)) + th
        if corners and len(edges) <= _FEW_EDGES:  # a few bones: every ridge box tested, no tree
            cache.ridges = (None, None, np.ascontiguousarray(clo.T), np.ascontiguousarray(chi.T))
        else:
            n_ridge = _unit(_normals(win.c1, win.triangles[ef[:, 0]])
                            + _normals(win.c1, win.triangles[ef[:, 1]]))[0]
            cache.ridges = (BoxTree(clo, chi), n_ridge, None, None)
    tree, n_ridge_all, clo_t, chi_t = cache.ridges
    if tree is None:
        r, ic = np.nonzero(boxes_meet(elo[sub].T[:, :, None], ehi[sub].T[:, :, None],
                                      clo_t[:, None, :], chi_t[:, None, :]))
        ie = sub[r]
    else:
        ie, ic = _pair_cache(cache, "edges", tree, len(edges)).pairs(elo, ehi, sub, grow)
    if len(ie) == 0:
        return
    if n_ridge_all is None:  # the pairs' ridges' normals only
        n_pair = _unit(_normals(win.c1, win.triangles[ef[ic, 0]]) + _normals(win.c1, win.triangles[ef[ic, 1]]))[0]
    else:
        n_pair = n_ridge_all[ic]
    e, k = edges[ie], ce[ic]
    pa1, pb1 = x[e[:, 0]], x[e[:, 1]]
    qc1, qd1 = win.c1[k[:, 0]], win.c1[k[:, 1]]
    # end-of-step closest points, inside both segments (else the pair is not usable)
    s, u = segment_parameters(pa1, pb1, qc1, qd1)
    inside_s, inside_u = (s > 1e-6) & (s < 1 - 1e-6), (u > 1e-6) & (u < 1 - 1e-6)
    if corners and np.any(inside_s & ~inside_u):
        at = np.flatnonzero(inside_s & ~inside_u)
        _edge_corners(win, x, x_old, ie[at], np.where(u[at] < 0.5, k[at, 0], k[at, 1]), n_pair[at],
                      edges, movable, touch, scale)
        pa1, pb1 = x[e[:, 0]], x[e[:, 1]]  # as the corners left them
        s, u = segment_parameters(pa1, pb1, qc1, qd1)
        inside_s, inside_u = (s > 1e-6) & (s < 1 - 1e-6), (u > 1e-6) & (u < 1 - 1e-6)
    inner = np.flatnonzero(inside_s & inside_u)
    if len(inner) == 0:
        return
    e, k, ic, s, u = e[inner], k[inner], ic[inner], s[inner], u[inner]
    pa1, pb1, qc1, qd1 = pa1[inner], pb1[inner], qc1[inner], qd1[inner]
    pa0, pb0 = x_old[e[:, 0]], x_old[e[:, 1]]
    qc0, qd0 = (qc1, qd1) if win.c0 is win.c1 else (win.c0[k[:, 0]], win.c0[k[:, 1]])
    n_ridge = n_pair[inner]
    # the common normal, pointing out of the ridge
    dp, dq = pb1 - pa1, qd1 - qc1
    nn, ln = _unit(np.cross(dp, dq))
    l1 = (np.sqrt(dp[:, 0] * dp[:, 0] + dp[:, 1] * dp[:, 1] + dp[:, 2] * dp[:, 2])
          * np.sqrt(dq[:, 0] * dq[:, 0] + dq[:, 1] * dq[:, 1] + dq[:, 2] * dq[:, 2]))
    usable = ln > 1e-6 * l1
    nn = nn * np.where(_dot(nn, n_ridge) < 0, -1.0, 1.0)[:, None]
    sep = _dot(pa1 + s[:, None] * dp - (qc1 + u[:, None] * dq), nn)
    sep0 = _dot(pa0 + s[:, None] * (pb0 - pa0) - (qc0 + u[:, None] * (qd0 - qc0)), nn)
    the = th if scale is None else th * np.minimum(scale[e[:, 0]], scale[e[:, 1]])  # per pair
    near = (sep < the - 1e-12) & (sep > -th)
    flip = usable & (sep0 > 0) & (sep <= -th)
    crossed = np.zeros(len(e), bool)
    if np.any(flip):  # passed the ridge during the step: confirm the edges met (cubic)
        f = np.flatnonzero(flip)
        p = np.stack([pa0[f], pb0[f], qc0[f], qd0[f]], 1)
        p1 = np.stack([pa1[f], pb1[f], qc1[f], qd1[f]], 1)
        crossed[f] = np.isfinite(first_coplanar_time(p, p1))
    act = usable & (crossed | near) & (movable[e[:, 0]] | movable[e[:, 1]])
    if not np.any(act):
        return
    # every such pair is a contact (friction, the contact frame); it pushes only when
    # crossed or closer than the margin (``slack``)
    the = np.broadcast_to(the, sep.shape)[act]
    push = (crossed[act] | (sep[act] < the * (1.0 - slack))).astype(float)
    e, s, nn, sep, u, k = e[act], s[act], nn[act], sep[act], u[act], k[act]
    need = the - sep
    wa, wb = (1.0 - s) * movable[e[:, 0]] * push, s * movable[e[:, 1]] * push
    den = wa * wa + wb * wb
    push_edges(x, e, wa, wb, need / np.where(den > 0, den, 1.0), nn)
    # contact frame for the velocity update: the ridge point's motion
    q1 = win.c1[k[:, 0]] + u[:, None] * (win.c1[k[:, 1]] - win.c1[k[:, 0]])
    q0 = win.c0[k[:, 0]] + u[:, None] * (win.c0[k[:, 1]] - win.c0[k[:, 0]])
    near_a, near_b = need * (1.0 - s) * movable[e[:, 0]], need * s * movable[e[:, 1]]  # pushing or not
    _record(e.T.ravel(), np.concatenate([near_a, near_b]), np.concatenate([nn, nn]),
            np.concatenate([q0, q0]), np.concatenate([q1, q1]), touch)


def push_edges(x: np.ndarray, e: np.ndarray, wa: np.ndarray, wb: np.ndarray, lam: np.ndarray,
               nrm: np.ndarray) -> np.ndarray:
    """Push the edges ``e`` ``(k, 2)`` along ``nrm`` ``(k, 3)``, in place on ``x`` ``(n, 3)``: each
    end by ``lam · w · nrm`` for its weight ``wa``, ``wb`` ``(k,)`` (with ``lam = need / (wa² +
    wb²)`` the edge's point of weights ``(wa, wb)`` moves by ``need``; Bridson et al. 2002, §7.2),
    a vertex that several edges push by the mean of their pushes. Returns the moved vertices."""
    dx, cnt = np.zeros((len(x), 3)), np.zeros(len(x))
    np.add.at(dx, e[:, 0], (lam * wa)[:, None] * nrm)
    np.add.at(dx, e[:, 1], (lam * wb)[:, None] * nrm)
    np.add.at(cnt, e[:, 0], wa > 0)
    np.add.at(cnt, e[:, 1], wb > 0)
    moved = np.flatnonzero(cnt > 0)
    x[moved] += dx[moved] / cnt[moved, None]
    return moved


def _edge_corners(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, ie: np.ndarray, iv: np.ndarray,
                  n_ridge: np.ndarray, edges: np.ndarray, movable: np.ndarray, touch: _Touch,
                  scale: np.ndarray | None = None) -> None:
    """Edges ``edges[ie]`` against the collider's ridge points ``iv`` (``(k,)`` each, pairs
    whose ridge edge, of normal ``n_ridge`` ``(k, 3)``, is nearest an edge at its end point: a
    convex corner of the body between two of a bone's joints), for a model without faces (spring
    bones' bones; a cloth's faces meet the points, step 4). The corner's normal is the mean of
    its ridges' among the pairs (whatever their order). The pair is a contact when the edge's
    point nearest the corner, inside the edge, ends closer than the thickness (``scale`` as for
    :func:`_edge_edge`) in front of it (along the corner's normal), or behind it by less than
    the thickness, or
    when the offset from the corner to that point turned over during the step from the front
    (the corner passed between the joints); it pushes the edge's ends along that offset (its
    start's, when it turned over; the vertex normal, behind) as :func:`_edge_edge` does."""
    th = float(win.thickness)
    m = len(win.c1)
    key, which = np.unique(ie * m + iv, return_inverse=True)  # a point ends several ridges
    e, v = edges[key // m], key % m
    nv = np.zeros((len(key), 3))
    np.add.at(nv, which.reshape(-1), n_ridge)
    nv = _unit(nv)[0]
    q0, q1 = win.c0[v], win.c1[v]
    pa0, pb0, pa1, pb1 = x_old[e[:, 0]], x_old[e[:, 1]], x[e[:, 0]], x[e[:, 1]]
    s0 = segment_parameters(pa0, pb0, q0, q0)[0]
    s1 = segment_parameters(pa1, pb1, q1, q1)[0]
    d0 = pa0 + s0[:, None] * (pb0 - pa0) - q0
    d1 = pa1 + s1[:, None] * (pb1 - pa1) - q1
    n0, n1 = _unit(d0)[0], _unit(d1)[0]
    inner = (s0 > 1e-6) & (s0 < 1 - 1e-6) & (s1 > 1e-6) & (s1 < 1 - 1e-6)
    crossed = inner & (_dot(d0, nv) > 0) & (_dot(d1, n0) < 0)
    behind = ~crossed & (_dot(d1, nv) <= 0)
    nrm = np.where(crossed[:, None], n0, np.where(behind[:, None], nv, n1))
    sep = _dot(d1, nrm)
    the = th if scale is None else th * np.minimum(scale[e[:, 0]], scale[e[:, 1]])
    the = np.broadcast_to(the, sep.shape)
    wa, wb = (1.0 - s1) * movable[e[:, 0]], s1 * movable[e[:, 1]]
    den = wa * wa + wb * wb
    act = np.flatnonzero((s1 > 1e-6) & (s1 < 1 - 1e-6) & (den > 0) & (sep < the - 1e-12)
                         & (crossed | (sep > -th)) & (_dot(nrm, nrm) > 0))
    if len(act) == 0:
        return
    e, s1, nrm, need, wa, wb = e[act], s1[act], nrm[act], the[act] - sep[act], wa[act], wb[act]
    push_edges(x, e, wa, wb, need / den[act], nrm)
    q0, q1 = q0[act], q1[act]
    _record(e.T.ravel(), np.concatenate([need * (1.0 - s1) * movable[e[:, 0]], need * s1 * movable[e[:, 1]]]),
            np.concatenate([nrm, nrm]), np.concatenate([q0, q0]), np.concatenate([q1, q1]), touch)


def _record(verts: np.ndarray, weights: np.ndarray, nrm: np.ndarray, q0: np.ndarray, q1: np.ndarray,
            touch: _Touch) -> None:
    """The contact frame of vertices in contact through several pairs at once (``verts``
    ``(m,)``, repeated): the frame (normal and collider points ``nrm, q0, q1`` ``(m, 3)``)
    of the pair with the largest ``weights`` ``(m,)`` (the pair's shortfall of the
    thickness at the vertex, > 0 where the pair is a contact for it). Taking the last
    listed pair's frame would depend on the pairs' order and tilt the contact of mirrored
    vertices differently; a mean of the pairs' normals is no contact normal (pairs on the
    two sides of a ridge) and lets friction slide the vertex into the body."""
    keep = np.flatnonzero(weights > 0)
    if len(keep) == 0:
        return
    best = keep[_group_min(verts[keep], -weights[keep], len(touch.in_contact))]
    touch.hold(verts[best], nrm[best], q0[best], q1[best])


def _points_faces(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, triangles: np.ndarray,
                  movable: np.ndarray, active: np.ndarray, touch: _Touch,
                  cache: WindowCache, scale: np.ndarray | None = None) -> None:
    """The collider's ridge vertices against cloth triangles with an ``active`` corner
    (module docstring, step 4); the deepest a cloth face ended behind a point goes to
    ``touch``. ``scale`` ``(n,)`` as for :func:`resolve_mesh` (a face keeps its corners'
    smallest share)."""
    th = float(win.thickness)
    if cache.points is None:
        pts = np.unique(win.edges)
        c0, c1 = win.c0[pts], win.c1[pts]
        plo, phi = np.minimum(c0, c1), np.maximum(c0, c1)
        cache.points = (pts, _vertex_normals(win)[pts], BoxTree(plo - th, phi + th), plo, phi)
    pts, vn, tree, plo, phi = cache.points
    t0, t1, t2 = triangles[:, 0], triangles[:, 1], triangles[:, 2]
    sub = np.flatnonzero((active[t0] | active[t1] | active[t2]) & (movable[t0] | movable[t1] | movable[t2]))
    if len(sub) == 0 or len(pts) == 0:
        return
    # the boxes over the step of the faces asked about (rows ``sub`` of full-size arrays)
    flo, fhi, grow = (np.empty((len(triangles), 3)) for _ in range(3))
    d = np.abs(x - x_old)
    flo[sub], fhi[sub] = element_boxes(np.minimum(x_old, x), np.maximum(x_old, x), triangles[sub])
    grow[sub] = th + element_boxes(d, d, triangles[sub])[1]
    it, ip = _pair_cache(cache, "faces", tree, len(triangles)).pairs(flo, fhi, sub, grow)
    if len(it) == 0:
        return
    tri = triangles[it]
    t0, t1 = x_old[tri], x[tri]  # (k, 3, 3)
    c0, c1 = win.c0[pts[ip]], win.c1[pts[ip]]
    # continuous: the point meets the moving triangle inside it during the step (only
    # where their boxes over the step meet, see _meet)
    tc, b_hit = np.full(len(it), np.nan), np.zeros((len(it), 3))
    m = np.flatnonzero(_meet(flo[it], fhi[it], plo[ip], phi[ip]))
    if len(m):
        sel, t_hit, _, b = _vertex_face_times(np.concatenate([t0[m], c0[m, None]], 1),
                                              np.concatenate([t1[m], c1[m, None]], 1))
        tc[m[sel]], b_hit[m[sel]] = t_hit, b
    crossed = np.isfinite(tc)
    n1 = _unit(np.cross(t1[:, 1] - t1[:, 0], t1[:, 2] - t1[:, 0]))[0]
    plane = _dot(c1 - t1[:, 0], n1)
    # a pair that neither crossed nor ends within the thickness of the face's plane (with
    # room for rounding) cannot act: dropped before the barycentrics
    keep = np.flatnonzero(crossed | (np.abs(plane) < th * (1.0 + 1e-6)))
    if len(keep) == 0:
        return
    ip, tri, t0, t1, c0, c1 = ip[keep], tri[keep], t0[keep], t1[keep], c0[keep], c1[keep]
    b_hit, crossed, n1, plane = b_hit[keep], crossed[keep], n1[keep], plane[keep]
    pv, nv = pts[ip], vn[ip]
    n0 = _unit(np.cross(t0[:, 1] - t0[:, 0], t0[:, 2] - t0[:, 0]))[0]
    bary = _barycentric(c1, t1[:, 0], t1[:, 1], t1[:, 2])  # end of step, for proximity
    side = np.sign(plane)
    if np.any(crossed):
        f = np.flatnonzero(crossed)
        b = b_hit[f]
        ok = np.all(b >= -_EPS_BARY, 1)
        start = np.sign(_dot(c0[f] - t0[f, :, 0], n0[f]))
        ok &= start != 0
        crossed[f[~ok]] = False
        bary[f[ok]] = b[ok]
        side[f[ok]] = start[ok]  # the side of the cloth the point came from
    inside = (bary[:, 0] >= -_EPS_BARY) & (bary[:, 1] >= -_EPS_BARY) & (bary[:, 2] >= -_EPS_BARY)
    n_dir = -side[:, None] * n1  # the cloth moves away from the point, to its own side
    q1 = np.einsum("ki,kij->kj", bary, t1)
    sep = _dot(q1 - c1, n_dir)
    thf = np.full(len(tri), th) if scale is None else th * scale[tri].min(axis=1)  # per pair
    act = (inside & (side != 0) & (_dot(n_dir, nv) > 0)
           & (crossed | ((sep > -th) & (sep < thf * (1.0 - 1e-9)))))
    if not np.any(act):
        return
    # every such pair is a contact; it pushes only when crossed or closer than the margin
    push = (crossed[act] | (sep[act] < thf[act] * (1.0 - _SLACK))).astype(float)
    tri, bary, n_dir, sep, pv = tri[act], np.clip(bary[act], 0.0, 1.0), n_dir[act], sep[act], pv[act]
    w = bary * movable[tri]
    den = np.einsum("ij,ij->i", w, w)
    lam = (thf[act] - sep) / np.where(den > 0, den, 1.0)
    n = len(x)
    dx, cnt = np.zeros((n, 3)), np.zeros(n)
    for k in range(3):
        np.add.at(dx, tri[:, k], (push * lam * w[:, k])[:, None] * n_dir)
        np.add.at(cnt, tri[:, k], (w[:, k] > 0) & (push > 0))
    moved = np.flatnonzero(cnt > 0)
    x[moved] += dx[moved] / cnt[moved, None]
    _record(tri.ravel(), (lam[:, None] * w).ravel(), np.repeat(n_dir, 3, axis=0),
            np.repeat(win.c0[pv], 3, axis=0), np.repeat(win.c1[pv], 3, axis=0), touch)
    touch.deeper(np.max(np.maximum(-sep, 0.0)))


def _fail_safe(win: MeshWindow, x: np.ndarray, x_old: np.ndarray, movable: np.ndarray,
               touch: _Touch) -> None:
    """Vertices still crossing after the passes go back to their start, carried by the
    collider point they are in contact with."""
    vlo, vhi = np.minimum(x_old, x), np.maximum(x_old, x)
    tris = win.triangles
    tree, tlo, thi = _triangle_tree(win)
    band = float(win.thickness) * (1.0 + _BAND) + 1e-9
    iv, it_ = _pair_cache(win.cache, "vertices", tree, len(x)).pairs(
        vlo, vhi, np.flatnonzero(movable), band + (vhi - vlo))
    keep = overlapping(vlo, vhi, iv, tlo, thi, it_)  # the triangles' own boxes, not grown
    iv, it_ = iv[keep], it_[keep]
    if len(iv) == 0:
        return
    tr = tris[it_]
    p, p1 = _paths(win, x, x_old, iv, tr)
    sel, _, pt, bary = _vertex_face_times(p, p1)
    if len(sel) == 0:
        return
    start_side = _dot(p[sel, 3] - p[sel, 0], _normals(win.c0, tr[sel]))
    ok = np.all(bary >= -_EPS_BARY, 1) & (start_side >= -1e-9) & (_dot(p1[sel, 3] - p1[sel, 0],
                                                                        _normals(win.c1, tr[sel])) < 0)
    vi = iv[sel[ok]]
    if len(vi) == 0:
        return
    q0 = np.einsum("ki,kij->kj", bary[ok], p[sel[ok], :3])
    q1 = np.einsum("ki,kij->kj", bary[ok], p1[sel[ok], :3])
    x[vi] = x_old[vi] + (q1 - q0)
    touch.hold(vi, _normals(win.c1, tr[sel[ok]]), q0, q1)


def revert_crossings(win: MeshWindow, x: np.ndarray, v: np.ndarray, x_old: np.ndarray, h: float,
                     movable: np.ndarray) -> int:
    """The last word after every collider has been resolved: vertices whose step still
    crosses a face of ``win`` into it (another collider pushed them there) go back to
    where they started, carried by this collider, and take its velocity.

    Returns
    -------
    int
        How many vertices were put back.
    """
    touch = _Touch.empty(len(x))
    _fail_safe(win, x, x_old, movable, touch)
    idx = np.flatnonzero(touch.in_contact)
    v[idx] = (touch.q1[idx] - touch.q0[idx]) / h
    return len(idx)
