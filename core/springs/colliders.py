"""Colliders: half-spaces, spheres and (moving, deforming) triangle meshes.

After each solve the contact stage (:func:`resolve`, called by every integrator
between the solve and the exact pins) makes the end of the step collision-free.

:class:`Plane` and :class:`Sphere` are analytic and static: every vertex closer than
``thickness`` (or inside) is projected to the surface plus ``thickness``; a vertex whose
step passes through the sphere is caught where the segment enters it. For a model without
faces (a rope, spring bones' bones) the sphere keeps the edges out too
(:meth:`Sphere.resolve_edges`: a sphere smaller than an edge cannot pass between its ends; a
plane's point nearest an edge is one of its ends).

:class:`TriangleMesh` holds a collider's world-space vertices at the end of a frame and,
when it moves or deforms, at the start of the frame (``previous``); every substep sees
the corners interpolated linearly inside the frame (:meth:`TriangleMesh.window`), and
:mod:`.contact` handles it continuously (vertex–face and edge–edge over the step, so a
thin or fast collider is caught at one substep), with Coulomb friction relative to the
collider's own motion. Meshes are one-sided: counter-clockwise corners seen from
outside, as Blender stores closed meshes, so the outside is where the face normals
point; a vertex crossing a face from behind is let through (cloth that starts inside a
collider comes out).

In all cases the normal response is fully inelastic (no bounce, as in Blender's Cloth,
whose collision response has no restitution and does not read the Collision modifier's
``damping``: that one is Soft Body's) and the tangential
velocity relative to the collider is reduced by Coulomb friction,
``|Δv_t| ≤ friction · |Δv_n|`` (0 is frictionless; a large value sticks). Colliders are
resolved one after another in the order given; then a vertex that several of them hold
goes to one point outside all of them (the nearest, each surface linearised at the
vertex), and where two shells overlap (the crease between a ball and the ground) both
thicknesses are first scaled down to what fits there (:func:`room`), so that their pushes
do not walk the vertex along the crease.

Self-collision (cloth against itself) is a separate stage after this one:
:mod:`.selfcollision`; both use the geometry kernels of :mod:`.proximity`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from scipy.spatial import cKDTree

from ..errors import SinewError
from .contact import (
    _BAND,
    ContactStats,
    MeshWindow,
    Support,
    coulomb_velocity,
    nearest_on_triangles,
    push_edges,
    resolve_mesh,
    revert_crossings,
    surface_near,
)
from .proximity import closest_points_on_triangles, dot, points_box, segment_parameters, unit

__all__ = ["Plane", "Sphere", "TriangleMesh", "StepColliders", "HeldVertices", "resolve", "resolve_again", "room",
           "closest_points_on_triangles", "canonical_triangles"]


def _apply_contact(x: np.ndarray, v: np.ndarray, idx: np.ndarray, target: np.ndarray,
                   normal: np.ndarray, friction: float) -> None:
    """Move ``x[idx]`` to ``target`` and fix velocities for outward ``normal`` (k, 3)."""
    if len(idx) == 0:
        return
    x[idx] = target
    v[idx] = coulomb_velocity(v[idx], 0.0, normal, friction)


@dataclass
class Plane:
    """Half-space ``(x − point)·normal ≥ 0`` is outside (e.g. the ground).

    Parameters
    ----------
    point : array_like
        Shape ``(3,)``, a point on the plane, m.
    normal : array_like
        Shape ``(3,)``, outward normal (normalised here).
    thickness : float
        m, kept between vertices and the surface.
    friction : float
        Coulomb coefficient, >= 0.
    """

    point: np.ndarray
    normal: np.ndarray
    thickness: float = 0.0
    friction: float = 0.0

    def __post_init__(self) -> None:
        self.point = np.asarray(self.point, dtype=np.float64).reshape(3)
        n = np.asarray(self.normal, dtype=np.float64).reshape(3)
        ln = np.linalg.norm(n)
        if not np.isfinite(ln) or ln == 0:
            raise SinewError("plane normal must be a finite non-zero vector")
        self.normal = n / ln

    def signed_distance(self, x: np.ndarray) -> np.ndarray:
        """Distance above the plane, shape ``(n,)``, m (negative inside)."""
        return (x - self.point) @ self.normal

    def normal_at(self, x: np.ndarray) -> np.ndarray:
        """Outward unit normals ``(k, 3)`` at (near) surface points ``x`` ``(k, 3)``."""
        return np.broadcast_to(self.normal, x.shape).copy()

    def segment_distance(self, a: np.ndarray, b: np.ndarray, spacing: float = 0.0) -> np.ndarray:
        """Least signed distance over each segment ``a → b`` (``(k, 3)`` each), shape ``(k,)``,
        m: the nearer end's (``spacing`` is not needed: the distance is linear along it)."""
        return np.minimum(self.signed_distance(a), self.signed_distance(b))

    def resolve(self, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray,
                stats: ContactStats | None = None, scale: np.ndarray | None = None) -> None:
        """Project and fix velocities in place (see module docstring); ``scale`` ``(n,)``:
        the share of the thickness each vertex keeps (see :func:`room`)."""
        s = self.signed_distance(x)
        th = self.thickness if scale is None else self.thickness * scale
        idx = np.flatnonzero(s < th)
        if stats is not None:
            stats.add(len(idx), 0.0, max(0.0, -float(s.min())) if len(s) else 0.0)
        if len(idx):
            th = np.broadcast_to(th, s.shape)[idx]
            target = x[idx] + (th - s[idx])[:, None] * self.normal
            _apply_contact(x, v, idx, target, np.broadcast_to(self.normal, (len(idx), 3)),
                           self.friction)


@dataclass
class Sphere:
    """Solid sphere.

    Parameters
    ----------
    center : array_like
        Shape ``(3,)``, m.
    radius : float
        m, > 0.
    thickness, friction : float
        As for :class:`Plane`.
    """

    center: np.ndarray
    radius: float
    thickness: float = 0.0
    friction: float = 0.0

    def __post_init__(self) -> None:
        self.center = np.asarray(self.center, dtype=np.float64).reshape(3)
        if not (np.isfinite(self.radius) and self.radius > 0):
            raise SinewError("sphere radius must be > 0")

    def signed_distance(self, x: np.ndarray) -> np.ndarray:
        """Distance from the surface, shape ``(n,)``, m (negative inside)."""
        return np.linalg.norm(x - self.center, axis=1) - self.radius

    def normal_at(self, x: np.ndarray) -> np.ndarray:
        """Outward unit normals ``(k, 3)`` at (near) surface points ``x`` ``(k, 3)``."""
        d = x - self.center
        r = np.linalg.norm(d, axis=1)
        return np.where((r > 1e-12)[:, None], d / np.where(r > 1e-12, r, 1.0)[:, None],
                        np.array([0.0, 0.0, 1.0]))

    def resolve(self, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray,
                stats: ContactStats | None = None, scale: np.ndarray | None = None) -> None:
        """Project and fix velocities in place (see module docstring); ``scale`` as for
        :meth:`Plane.resolve`."""
        th = np.full(len(x), self.thickness) if scale is None else self.thickness * scale
        # a step that passes through the sphere: stop it where the segment enters
        seg = x - x_prev
        a = np.einsum("ij,ij->i", seg, seg)
        rel = x_prev - self.center
        b = np.einsum("ij,ij->i", seg, rel)
        r_out = self.radius + th
        c = np.einsum("ij,ij->i", rel, rel) - r_out * r_out
        with np.errstate(divide="ignore", invalid="ignore"):
            t_in = (-b - np.sqrt(np.maximum(b * b - a * c, 0.0))) / a
        through = (c >= 0) & (b < 0) & (b * b - a * c > 0) & (t_in >= 0) & (t_in <= 1)
        x[through] = x_prev[through] + t_in[through, None] * seg[through]
        d = x - self.center
        r = np.sqrt(np.einsum("ij,ij->i", d, d))
        if stats is not None and len(r):
            stats.add(int(np.count_nonzero(r - self.radius < th)), 0.0,
                      max(0.0, self.radius - float(r.min())))
        idx = np.flatnonzero((r - self.radius < th) | through)
        if len(idx):
            ri = r[idx]
            up = np.array([0.0, 0.0, 1.0])
            normal = np.where((ri > 1e-12)[:, None], d[idx] / np.where(ri > 1e-12, ri, 1.0)[:, None], up)
            target = self.center + (self.radius + th[idx, None]) * normal
            _apply_contact(x, v, idx, target, normal, self.friction)

    def _nearest_on(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each segment's parameter of its point nearest the centre ``(k,)`` and the offset
        from the centre to that point ``(k, 3)``, for segments ``a → b`` ``(k, 3)`` each."""
        c = np.broadcast_to(self.center, a.shape)
        t = segment_parameters(a, b, c, c)[0]
        return t, a + t[:, None] * (b - a) - self.center

    def segment_distance(self, a: np.ndarray, b: np.ndarray, spacing: float = 0.0) -> np.ndarray:
        """Least signed distance over each segment ``a → b`` (``(k, 3)`` each), shape ``(k,)``,
        m (exact; ``spacing`` is not needed)."""
        d = self._nearest_on(a, b)[1]
        return np.sqrt(dot(d, d)) - self.radius

    def resolve_edges(self, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray, edges: np.ndarray,
                      movable: np.ndarray, stats: ContactStats | None = None,
                      scale: np.ndarray | None = None, passes: int = 8) -> tuple[np.ndarray, np.ndarray]:
        """Keep the segments ``edges`` ``(e, 2)`` between vertices (spring bones' bones) the
        thickness outside the sphere, in place on ``x`` and ``v`` ``(n, 3)``, after
        :meth:`resolve` has done the vertices.

        The point of a segment nearest the centre, closer than radius plus thickness (its ends'
        smaller share of it, ``scale`` ``(n,)`` as for :meth:`resolve`), is moved out along the
        normal by moving the segment's ``movable`` ``(n,)`` ends in proportion to their weights
        at that point (the mesh's edges against ridges do the same,
        :func:`.contact._edge_edge`); a segment that the centre crossed during the step (the
        offset from the centre to the segment's nearest point, inside both ends at the start
        and at the end of the step, turned over) is put back on the side it came from, so a
        sphere smaller than a bone cannot pass between two joints. A vertex that two segments
        push gets the mean of their moves: repeated while a pass moved something, at most
        ``passes`` times. The moved vertices' velocities lose their speed into the sphere and
        are rubbed by friction as a vertex's are. Returns the vertices moved ``(n,)`` (bool)
        and their outward normals ``(n, 3)``."""
        n = len(x)
        pushed, normals = np.zeros(n, bool), np.zeros((n, 3))
        weights = movable[edges].astype(np.float64) if len(edges) else np.zeros((0, 2))
        live = np.flatnonzero(weights.any(axis=1))
        if len(live) == 0:
            return pushed, normals
        e, weights = edges[live], weights[live]
        th = np.full(n, float(self.thickness)) if scale is None else float(self.thickness) * scale
        keep = self.radius + np.minimum(th[e[:, 0]], th[e[:, 1]])
        t0, d0 = self._nearest_on(x_prev[e[:, 0]], x_prev[e[:, 1]])
        n0, l0 = unit(d0)
        inner0 = (t0 > 0.0) & (t0 < 1.0)
        total = np.zeros((n, 3))
        for it in range(passes):
            t, d = self._nearest_on(x[e[:, 0]], x[e[:, 1]])
            nrm, r = unit(d)
            crossed = inner0 & (t > 0.0) & (t < 1.0) & (dot(d, d0) < 0.0) & (l0 > 0.0)
            nrm = np.where((crossed | (r <= 1e-12 * self.radius))[:, None], n0, nrm)
            sep = np.where(crossed, dot(d, n0), r)
            need = keep - sep
            wa, wb = (1.0 - t) * weights[:, 0], t * weights[:, 1]
            den = wa * wa + wb * wb
            act = np.flatnonzero((need > 1e-12 * keep) & (den > 0.0) & (dot(nrm, nrm) > 0.0))
            if it == 0 and stats is not None:
                stats.add(len(act), 0.0, max(0.0, -float(np.min(sep - self.radius))))
            if len(act) == 0:
                break
            lam = need[act] / den[act]
            pushed[push_edges(x, e[act], wa[act], wb[act], lam, nrm[act])] = True
            for end, w in ((e[act, 0], wa[act]), (e[act, 1], wb[act])):
                np.add.at(total, end, (lam * w)[:, None] * nrm[act])
        at = np.flatnonzero(pushed)
        if len(at):
            normals[at] = unit(total[at])[0]
            v[at] = coulomb_velocity(v[at], 0.0, normals[at], self.friction)
        return pushed, normals


#: Relative depth (of an edge's length) below which two faces count as coplanar: the
#: edge between them is no ridge.
_FLAT = 1e-5


def canonical_triangles(t: np.ndarray) -> np.ndarray:
    """The triangles ``t`` ``(k, 3)`` in one order that does not depend on how they were
    listed: each rotated (orientation kept) to start at its smallest vertex index, then
    sorted by their three indices. Returns an int64 ``(k, 3)`` array.

    The contact stage meets a collider's triangles in their order, and its response
    depends on that order (:mod:`.contact`), so a collider listed in two orders gives two
    bakes. Blender's ``calc_loop_triangles`` was seen to list the same mesh's triangles (same
    faces, same edges) in a different order from one session to the next, which made the
    same bake differ between two Blender sessions; reading colliders through this makes it
    reproducible.
    """
    t = np.asarray(t, dtype=np.int64).reshape(-1, 3)
    if len(t) == 0:
        return t.copy()
    first = np.argmin(t, axis=1)
    t = np.take_along_axis(t, (first[:, None] + np.arange(3)) % 3, axis=1)
    return t[np.lexsort((t[:, 2], t[:, 1], t[:, 0]))]


def _edge_topology(t: np.ndarray) -> tuple:
    """A triangle mesh's unique edges ``(e, 2)`` with, per edge, its first face, second face
    (the first again on a boundary), the second face's corner off the edge, whether it has
    two faces, and whether every edge has exactly two (closed). Depends on ``t`` ``(t, 3)``
    only, so a moving collider computes it once."""
    if len(t) == 0:
        empty = np.zeros(0, np.int64)
        return np.zeros((0, 2), np.int64), empty, empty, empty, np.zeros(0, bool), False
    half = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
    face = np.tile(np.arange(len(t)), 3)
    opposite = np.concatenate([t[:, 2], t[:, 0], t[:, 1]])
    lo, hi = np.minimum(half[:, 0], half[:, 1]), np.maximum(half[:, 0], half[:, 1])
    width = np.int64(hi.max()) + 1  # one int64 per edge, ordered as its (lo, hi) row
    keys, inv, count = np.unique(lo * width + hi, return_inverse=True, return_counts=True)
    uniq = np.stack([keys // width, keys % width], axis=1)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(len(uniq)))
    f1 = face[order][starts]
    second = np.minimum(starts + 1, len(order) - 1)
    has2 = count >= 2
    f2 = np.where(has2, face[order][second], f1)
    opp2 = opposite[order][second]
    return uniq, f1, f2, opp2, has2, bool(np.all(count == 2))


@dataclass
class TriangleMesh:
    """A triangle-mesh collider in world space for one frame (see module docstring).

    Parameters
    ----------
    vertices : array_like
        Shape ``(m, 3)``, m, at the end of the frame.
    triangles : array_like
        Shape ``(t, 3)``, vertex indices, counter-clockwise seen from outside.
    thickness, friction : float
        As for :class:`Plane`.
    previous : array_like, optional
        Shape ``(m, 3)``, the same vertices at the start of the frame (a moving or
        deforming collider); ``None`` for a static one.
    k : int
        Candidate triangles per point for :meth:`nearest` (nearest centroids).
    max_depth : float
        m; for :meth:`signed_distance` queries only: points further than this behind
        the surface count as outside.

    Attributes
    ----------
    closed : bool
        Every edge is shared by exactly two triangles.
    """

    vertices: np.ndarray
    triangles: np.ndarray
    thickness: float = 0.0
    friction: float = 0.0
    previous: np.ndarray | None = None
    k: int = 8
    max_depth: float = np.inf
    _topology: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.vertices = np.asarray(self.vertices, dtype=np.float64).reshape(-1, 3)
        self.triangles = np.asarray(self.triangles, dtype=np.int64).reshape(-1, 3)
        if not np.all(np.isfinite(self.vertices)):
            raise SinewError("collider vertices contain NaN or infinite values")
        if len(self.triangles) and (self.triangles.min() < 0
                                    or self.triangles.max() >= len(self.vertices)):
            raise SinewError("collider triangle index out of range")
        if self.previous is not None:
            self.previous = np.asarray(self.previous, dtype=np.float64).reshape(-1, 3)
            if self.previous.shape != self.vertices.shape or not np.all(np.isfinite(self.previous)):
                raise SinewError("collider 'previous' vertices must be finite and match 'vertices'")
        if not (np.isfinite(self.thickness) and self.thickness >= 0):
            raise SinewError("collider thickness must be >= 0")
        if not (np.isfinite(self.friction) and self.friction >= 0):
            raise SinewError("collider friction must be >= 0")
        self._tree_built = False
        self._static: MeshWindow | None = None  # the window of a static collider, kept
        if self._topology is None:
            self._topology = _edge_topology(self.triangles)
        self.closed = bool(self._topology[5])
        # corners and unit normals of the triangles, and the ridges: derived on first use
        # (Vertex Block Descent reads neither: a body read every frame skips them)
        self._faces: tuple | None = None
        self._ridge_arrays: tuple | None = None

    def _face_data(self) -> tuple:
        """``(a, b, c, normal)`` ``(t, 3)`` each: the triangles' corners and unit normals."""
        if self._faces is None:
            p = self.vertices[self.triangles]
            a, b, c = p[:, 0], p[:, 1], p[:, 2]
            nrm = np.cross(b - a, c - a)
            ln = np.linalg.norm(nrm, axis=1)
            self._faces = (a, b, c, nrm / np.where(ln > 0, ln, 1.0)[:, None])
        return self._faces

    @property
    def _a(self) -> np.ndarray:
        return self._face_data()[0]

    @property
    def _b(self) -> np.ndarray:
        return self._face_data()[1]

    @property
    def _c(self) -> np.ndarray:
        return self._face_data()[2]

    @property
    def _normal(self) -> np.ndarray:
        return self._face_data()[3]

    @property
    def _edges(self) -> np.ndarray:
        return self._ridges()[0]

    @property
    def _edge_faces(self) -> np.ndarray:
        return self._ridges()[1]

    def moved_to(self, vertices: np.ndarray, previous: np.ndarray | None = None) -> TriangleMesh:
        """The same collider (triangles, thickness, friction) at new ``vertices`` ``(m, 3)``
        (moving from ``previous`` within the frame, or static): the mesh's edge topology is
        reused, and a static collider that has not moved at all is returned itself, with
        the broad-phase structures it has already built (built once per bake)."""
        vertices = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
        if vertices.shape != self.vertices.shape:
            raise SinewError("a collider keeps its vertex count from frame to frame")
        if previous is not None and np.array_equal(previous, vertices):
            previous = None  # still over the frame: the same window as a static one
        if self.previous is None and previous is None and np.array_equal(vertices, self.vertices):
            return self
        return TriangleMesh(vertices, self.triangles, self.thickness, self.friction, previous, self.k,
                            self.max_depth, _topology=self._topology)

    def with_thickness(self, thickness: float) -> TriangleMesh:
        """The same collider with another ``thickness`` (m, >= 0), sharing everything derived
        from its vertices (normals, ridges, topology, the nearest-triangle tree once built):
        spring bones give every collider their chains' radius each frame, and building the
        collider anew (``dataclasses.replace``) recomputed its normals and ridges every time
        (2.3 ms a frame on a 9,000-triangle body, against 7 µs)."""
        thickness = float(thickness)
        if not (np.isfinite(thickness) and thickness >= 0):
            raise SinewError("collider thickness must be >= 0")
        if thickness == self.thickness:
            return self
        out = copy.copy(self)
        out.thickness = thickness
        out._static = None  # a static window carries the thickness
        return out

    def _ridges(self) -> tuple[np.ndarray, np.ndarray]:
        """The ridge (convex or boundary) edges ``(e, 2)`` and their faces ``(e, 2)``,
        derived on first use."""
        if self._ridge_arrays is None:
            self._ridge_arrays = self._find_ridges()
        return self._ridge_arrays

    def _find_ridges(self) -> tuple[np.ndarray, np.ndarray]:
        uniq, f1, f2, opp2, has2, _ = self._topology
        if len(uniq) == 0:
            return np.zeros((0, 2), np.int64), np.zeros((0, 2), np.int64)
        # convex: the second face's far corner lies behind the first face's plane, by more
        # than round-off (_FLAT of the edge's length): the diagonal of a flat quad is no
        # ridge; left to the sign of a round-off error, the diagonals of a symmetric body
        # (a UV sphere's quads) were ridges on one side and not on the other, and a cloth
        # landing on it was pushed to one side
        length = np.linalg.norm(self.vertices[uniq[:, 1]] - self.vertices[uniq[:, 0]], axis=1)
        depth = np.einsum("ij,ij->i", self.vertices[opp2] - self._a[f1], self._normal[f1])
        behind = depth < -_FLAT * length
        ridge = ~has2 | behind
        return uniq[ridge], np.stack([f1[ridge], f2[ridge]], 1)

    @property
    def _tree(self) -> cKDTree | None:
        """Triangle centroids indexed for :meth:`nearest`, built on first use."""
        if not self._tree_built:
            self._tree_obj = (cKDTree(self.vertices[self.triangles].mean(axis=1))
                              if len(self.triangles) else None)
            self._tree_built = True
        return self._tree_obj

    def window(self, a0: float, a1: float) -> MeshWindow:
        """The collider over the part ``[a0, a1]`` of the frame (fractions, 0 = start).

        A static collider gives the same window every time, so the broad-phase structures
        :mod:`.contact` keeps on it (:attr:`MeshWindow.cache`) live as long as it does."""
        if self.previous is None:
            if self._static is None:
                self._static = MeshWindow(self.vertices, self.vertices, self.triangles, self._ridges,
                                          float(self.thickness), float(self.friction), self.closed)
            return self._static
        d = self.vertices - self.previous
        c0, c1 = self.previous + a0 * d, self.previous + a1 * d
        return MeshWindow(c0, c1, self.triangles, self._ridges, float(self.thickness),
                          float(self.friction), self.closed)

    def nearest(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nearest surface points ``(n, 3)``, signed distances ``(n,)`` (m, negative behind the
        surface; of an open mesh only straight behind a face) and the outward directions
        ``(n, 3)`` there (at the end of the frame), among the :attr:`k` triangles with the
        nearest centroids (:func:`~.contact.nearest_on_triangles`)."""
        kq = min(self.k, len(self.triangles))
        _, cand = self._tree.query(x, k=kq)
        flat = np.asarray(cand).reshape(-1)
        keys = np.repeat(np.arange(len(x)), kq)
        _, q, _, sd, out_dir, interior = nearest_on_triangles(
            np.repeat(x, kq, axis=0), self.vertices, self.triangles, self._normal, keys, flat, len(x))
        if not self.closed:  # open: only straight behind a face is inside
            sd = np.where(interior, sd, np.abs(sd))
        return q, sd, out_dir

    def signed_distance(self, x: np.ndarray) -> np.ndarray:
        """Signed distance to the surface at the end of the frame, shape ``(n,)``, m
        (negative inside; deeper than ``max_depth`` counts as outside)."""
        if self._tree is None:
            return np.full(len(x), np.inf)
        s = self.nearest(x)[1]
        return np.where(s < -self.max_depth, -s, s)

    def segment_distance(self, a: np.ndarray, b: np.ndarray, spacing: float) -> np.ndarray:
        """Least signed distance over each segment ``a → b`` (``(k, 3)`` each) to the surface at
        the end of the frame, shape ``(k,)``, m.

        Points along each segment at most ``spacing`` (m, > 0) apart, its ends included, give
        the signed distance (:meth:`signed_distance`; the least of them is within
        ``spacing / 2`` of the deepest point of a segment inside, the distance changing by at
        most the length moved along it), and the segments' exact distances to the mesh's
        ridges (convex and boundary edges with their end vertices) make it exact outside: the
        point of a closed mesh nearest a segment outside it is a face's against an end of the
        segment, or a ridge's."""
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if not (np.isfinite(spacing) and spacing > 0):
            raise SinewError("segment_distance: spacing must be > 0")
        if len(a) == 0 or len(self.triangles) == 0:
            return np.full(len(a), np.inf)
        length = np.sqrt(dot(b - a, b - a))
        count = np.maximum(2, np.ceil(length / spacing).astype(np.int64) + 1)
        which = np.repeat(np.arange(len(a)), count)
        f = (np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)) / (count[which] - 1)
        sd = self.signed_distance(a[which] + f[:, None] * (b - a)[which])
        out = np.full(len(a), np.inf)
        np.minimum.at(out, which, sd)
        edges = self._edges
        if len(edges):
            p, q = self.vertices[edges[:, 0]], self.vertices[edges[:, 1]]
            lo, hi = np.minimum(p, q), np.maximum(p, q)
            slo, shi = np.minimum(a, b), np.maximum(a, b)
            reach = np.maximum(out, 0.0)  # only ridges nearer than the samples matter
            near = np.all((lo[None] <= (shi + reach[:, None])[:, None])
                          & (hi[None] >= (slo - reach[:, None])[:, None]), axis=2)  # (k, r)
            iseg, iridge = np.nonzero(near)
            if len(iseg):
                u, w = segment_parameters(a[iseg], b[iseg], p[iridge], q[iridge])
                gap = (a[iseg] + u[:, None] * (b - a)[iseg]) - (p[iridge] + w[:, None] * (q - p)[iridge])
                np.minimum.at(out, iseg, np.where(out[iseg] > 0, np.sqrt(dot(gap, gap)), np.inf))
        return out

    def resolve(self, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray,
                stats: ContactStats | None = None, *, h: float = 1.0,
                edges: np.ndarray | None = None, movable: np.ndarray | None = None) -> None:
        """Resolve contact over a whole frame in one step (static use; see :func:`resolve`)."""
        resolve_mesh(self.window(0.0, 1.0), x, v, x_prev, h,
                     np.zeros((0, 2), np.int64) if edges is None else edges,
                     np.ones(len(x), bool) if movable is None else movable, stats)


@dataclass
class HeldVertices:
    """What the contact stage (:func:`resolve`) found at the end of a step, for the stages
    after it (friction, the strain limit's rounds, self-collision).

    Attributes
    ----------
    mask : numpy.ndarray
        Shape ``(n,)``, bool: the vertices a collider holds (in contact or resting on it).
    normals : numpy.ndarray
        Shape ``(n, 3)``: their outward contact normals (zero elsewhere).
    velocities : numpy.ndarray
        Shape ``(n, 3)``, m/s: the velocities of the collider points they touch.
    frictions : numpy.ndarray
        Shape ``(n,)``: their colliders' friction coefficients.
    others : numpy.ndarray
        Shape ``(n, 3)``: a second collider's outward normal where two hold a vertex (zero
        elsewhere).
    """

    mask: np.ndarray
    normals: np.ndarray
    velocities: np.ndarray
    frictions: np.ndarray
    others: np.ndarray

    @classmethod
    def none(cls, n: int) -> HeldVertices:
        """No vertex held, for ``n`` vertices."""
        return cls(np.zeros(n, bool), np.zeros((n, 3)), np.zeros((n, 3)), np.zeros(n), np.zeros((n, 3)))


@dataclass
class StepColliders:
    """The colliders of one step and the contact record its stages share: the typed record
    the simulator hands the integrator (``step(..., colliders=...)``) and reads back.

    It is a sequence of its colliders (``len``, iteration) for the integrators that only
    need them (VBD's detection); the rest is explicit.

    Attributes
    ----------
    items : list
        :class:`Plane`, :class:`Sphere`, :class:`TriangleMesh` or
        :class:`~.contact.MeshWindow` (a mesh over one substep).
    stats : ContactStats, optional
        Accumulates what the contact stages did (``None``: not counted).
    support : Support, optional
        The contact force carried between steps (:class:`~.contact.Support`), kept by the
        simulator.
    triangles : numpy.ndarray, optional
        Shape ``(f, 3)``, the cloth's triangles, for collider points against the cloth's
        faces (``None``: that stage is skipped).
    room : numpy.ndarray, optional
        Shape ``(n,)``, the step's share of the thickness (:func:`room`), set by :func:`resolve`.
    found : HeldVertices, optional
        Set by :func:`resolve` (updated by :func:`resolve_again`).
    ends_frame : bool
        The step ends a frame. VBD, whose guard keeps every step's penetration at 0, checks
        that with a detection of its own at the end of a frame's last step only.
    """

    items: list = field(default_factory=list)
    stats: ContactStats | None = None
    support: Support | None = None
    triangles: np.ndarray | None = None
    room: np.ndarray | None = None
    found: HeldVertices | None = None
    ends_frame: bool = True

    @classmethod
    def of(cls, colliders: Sequence[object]) -> StepColliders:
        """``colliders`` itself if it is a record, else a record of them (nothing counted)."""
        return colliders if isinstance(colliders, StepColliders) else cls(list(colliders))

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[object]:
        return iter(self.items)


def _surfaces(cols: list, x: np.ndarray, x_old: np.ndarray, idx: np.ndarray,
              end: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every collider's signed distance ``(c, k)`` (m; ``inf`` beyond its contact band) and
    outward normal ``(c, k, 3)`` at the vertices ``idx`` ``(k,)``: of ``x`` against the
    colliders at the end of the step with ``end``, else of ``x_old`` against their start;
    and the thicknesses ``(c,)``, m."""
    c, k = len(cols), len(idx)
    sd, nrm, th = np.full((c, k), np.inf), np.zeros((c, k, 3)), np.zeros(c)
    p = x[idx] if end else x_old[idx]
    for i, col in enumerate(cols):
        th[i] = float(col.thickness)
        if isinstance(col, MeshWindow):
            sd[i], nrm[i] = surface_near(col, x, x_old, idx, end)
        else:  # analytic colliders are static
            d = col.signed_distance(p)
            near = np.flatnonzero(d <= th[i] * (1.0 + _BAND) + 1e-9)
            sd[i, near], nrm[i, near] = d[near], col.normal_at(p[near])
    return sd, nrm, th


def _reach(col: object, p: np.ndarray) -> np.ndarray:
    """Whether the points ``p`` ``(k, 3)`` may lie within the contact band of ``col`` at
    some time of the step, ``(k,)`` bool (a box test for meshes; exact for the others)."""
    band = float(col.thickness) * (1.0 + _BAND) + 1e-9
    if isinstance(col, MeshWindow):
        if len(col.triangles) == 0:
            return np.zeros(len(p), bool)
        lo, hi = points_box(col.c0, col.c1)
        lo, hi = lo - band, hi + band
        return np.all((p >= lo) & (p <= hi), axis=1)
    return col.signed_distance(p) <= band


def room(colliders: Sequence[object], x: np.ndarray, x_old: np.ndarray,
         movable: np.ndarray) -> np.ndarray:
    """The share of its thickness each collider keeps from each vertex this step, ``(n,)``
    in ``[0, 1]`` (1 almost everywhere).

    Two colliders whose outward normals at a vertex oppose (``nᵢ·nⱼ < 0``: the crease
    between a ball and the ground, a cloth pressed between two bodies) squeeze it where
    the gap between their surfaces is narrower than their two thicknesses: each one's push
    out of its own shell goes into the other's, and in turn they walk the vertex along the
    crease to where both fit, however far that is (a ball of radius ``R`` on the ground
    with thickness ``t`` leaves no room within ``2 √(R t)`` of where it touches), stretching
    the cloth. There the thicknesses are scaled to what fits: ``s = (dᵢ + dⱼ)/(tᵢ + tⱼ)``
    for the distances ``d`` from the two surfaces and thicknesses ``t``, the least over such
    pairs, taken at the start of the step (``x_old`` against the colliders' start; a
    vertex that ends its step at ``s tᵢ`` and ``s tⱼ`` starts the next one with the same
    ``s``, so it neither creeps along the crease nor sinks into it). Moving across the gap,
    along ``nᵢ − nⱼ``, leaves ``dᵢ + dⱼ`` unchanged: ``s`` measures the room at the vertex's
    place along the crease. Nothing is ever put inside a surface (``s ≥ 0``).
    """
    cols = [c.window(0.0, 1.0) if isinstance(c, TriangleMesh) else c for c in colliders]
    out = np.ones(len(x))
    if len(cols) < 2 or len(x) == 0:
        return out
    near = np.zeros(len(x), np.int64)
    for col in cols:
        near += _reach(col, x_old)
    idx = np.flatnonzero((near >= 2) & movable)
    if len(idx) == 0:
        return out
    sd, nrm, th = _surfaces(cols, x, x_old, idx, end=False)
    share = np.ones(len(idx))
    for i in range(len(cols)):
        for j in range(i + 1, len(cols)):
            both = np.isfinite(sd[i]) & np.isfinite(sd[j])
            both &= np.einsum("ij,ij->i", nrm[i], nrm[j]) < 0.0
            if np.any(both) and th[i] + th[j] > 0:
                fit = (sd[i, both] + sd[j, both]) / (th[i] + th[j])
                share[both] = np.minimum(share[both], fit)
    out[idx] = np.clip(share, 0.0, 1.0)
    return out


def _halfspaces(nrm: np.ndarray, need: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The shortest moves ``d`` ``(k, 3)`` with ``nᵣ·d ≥ needᵣ`` for the ``rows`` ``(k, r)``
    (bool; ``r ≤ 3``) of normals ``nrm`` ``(k, r, 3)`` and needs ``need`` ``(k, r)``, m: the
    projection onto an intersection of half-spaces, by its active set (every subset of the
    rows solved as equalities, kept where its multipliers are ≥ 0 and every row holds; the
    shortest such move). Zero where no subset holds (the rows contradict each other)."""
    k, r = need.shape
    tol = 1e-12 + 1e-9 * np.max(np.abs(np.where(rows, need, 0.0)), initial=0.0)
    best = np.zeros((k, 3))
    length = np.where(np.all(~rows | (need <= tol), axis=1), 0.0, np.inf)
    for size in range(1, r + 1):
        for sub in combinations(range(r), size):
            sub = list(sub)
            use = np.all(rows[:, sub], axis=1) & (length > 0)
            if not np.any(use):
                continue
            ns = nrm[use][:, sub]  # (u, s, 3)
            gram = np.einsum("usi,uti->ust", ns, ns) + 1e-12 * np.eye(size)
            lam = np.linalg.solve(gram, need[use][:, sub, None])[..., 0]
            d = np.einsum("us,usi->ui", lam, ns)
            holds = np.all(lam >= -tol, axis=1)
            holds &= np.all(~rows[use] | (np.einsum("uri,ui->ur", nrm[use], d) >= need[use] - tol), axis=1)
            sq = np.einsum("ui,ui->u", d, d)
            better = holds & (sq < length[use])
            at = np.flatnonzero(use)[better]
            best[at], length[at] = d[better], sq[better]
    return best


def _joint(cols: list, x: np.ndarray, x_old: np.ndarray, idx: np.ndarray,
           share: np.ndarray) -> np.ndarray:
    """The vertices ``idx`` ``(k,)`` that several colliders hold, moved to one point that
    respects all of them: the nearest point outside every collider's (scaled, ``share``
    ``(n,)``) thickness, each surface linearised at the vertex (its nearest point and
    normal), as :func:`_halfspaces` (the colliders, one after another, leave the vertex in
    whichever shell came first). Returns the second normal of a vertex that two colliders
    hold at the end, ``(k, 3)`` (zero where fewer than two)."""
    sd, nrm, th = _surfaces(cols, x, x_old, idx, end=True)
    need = share[idx][None, :] * th[:, None] - sd  # (c, k)
    rows = np.isfinite(sd)
    order = np.argsort(-np.where(rows, need, -np.inf), axis=0, kind="stable")[:3]  # the most needing
    n3 = np.take_along_axis(nrm, order[..., None], 0).transpose(1, 0, 2)
    b3 = np.take_along_axis(need, order, 0).T
    r3 = np.take_along_axis(rows, order, 0).T
    d = _halfspaces(n3, b3, r3)
    x[idx] += d
    # the rows that hold the vertex at the end (within the thickness's rounding)
    tight = r3 & (np.einsum("kri,ki->kr", n3, d) <= b3 + 1e-6 * th.max())
    second = np.zeros((len(idx), 3))
    two = np.count_nonzero(tight, axis=1) >= 2
    if np.any(two):
        rank = np.cumsum(tight, axis=1)
        pick = np.argmax(tight & (rank == 2), axis=1)
        second[two] = n3[np.flatnonzero(two), pick[two]]
    return second


def resolve(colliders: Sequence[object], x: np.ndarray, v: np.ndarray,
            x_prev: np.ndarray, h: float = 1.0, model: object | None = None,
            only: np.ndarray | None = None) -> np.ndarray:
    """Resolve every collider in turn, in place (the contact stage of a step).

    Parameters
    ----------
    colliders : sequence of Plane, Sphere, TriangleMesh or MeshWindow
        A :class:`StepColliders` record also collects contact statistics and receives what
        the stage found (:attr:`StepColliders.found`).
    x : numpy.ndarray
        Shape ``(n, 3)``, positions after the solve, m (modified).
    v : numpy.ndarray
        Shape ``(n, 3)``, velocities, m/s (modified).
    x_prev : numpy.ndarray
        Shape ``(n, 3)``, positions at the start of the step, m.
    h : float
        Step, s (for velocities relative to moving colliders).
    model : Model, optional
        Gives the cloth's mesh edges (edge–edge contact) and pinned vertices (never
        moved here); without it vertices alone are handled.
    only : numpy.ndarray, optional
        Shape ``(n,)``, bool: mesh colliders examine only these vertices (and the edges
        and faces touching them), e.g. the ones self-collision moved after this stage.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``, bool: the vertices a collider holds (in contact or resting on
        it); also :attr:`HeldVertices.mask` of the record's ``found``. Self-collision treats
        them as immovable, so that it never pushes a layer into a collider.
    """
    step = StepColliders.of(colliders)
    stats, support, triangles = step.stats, step.support, step.triangles
    n = len(x)
    if model is not None:
        edges = model.contact_edges
        movable = ~np.asarray(model.pinned, dtype=bool)
    else:
        edges, movable = np.zeros((0, 2), np.int64), np.ones(n, bool)
    cols = [c.window(0.0, 1.0) if isinstance(c, TriangleMesh) else c for c in step]
    # the share of the thickness each vertex keeps (see room()): once per step
    kept = step.room
    share = kept if kept is not None and only is not None else room(cols, x, x_prev, movable)
    if only is None:
        step.room = share
    found = HeldVertices.none(n)
    holds, after = _each_collider(cols, x, v, x_prev, h, edges, movable, step, share, only, found)
    meshes = [i for i, c in enumerate(cols) if isinstance(c, MeshWindow)]
    moved_any, again = _meshes_again(cols, meshes, after, holds, x, v, x_prev, h, edges, movable,
                                     triangles, share)
    if len(cols) > 1:
        _several(cols, holds, x, x_prev, movable, share, found, moved_any)
    if len(meshes) > 1:
        if np.any(moved_any):  # where two colliders still disagree, the start of the step wins
            for i in meshes:
                revert_crossings(cols[i], x, v, x_prev, h, movable & moved_any)
        if stats is not None:
            stats.add(0, again.max_penetration)
    if support is not None:
        support.settle()
    step.found = found
    return found.mask


def _each_collider(cols: list, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray, h: float,
                   edges: np.ndarray, movable: np.ndarray, step: StepColliders, share: np.ndarray,
                   only: np.ndarray | None, found: HeldVertices) -> tuple[list, list]:
    """Every collider in turn (:func:`.contact.resolve_mesh` for meshes, their own
    ``resolve`` for the analytic ones, and :meth:`Sphere.resolve_edges` for the ``edges`` of a
    model without faces), filling ``found`` (mask, normals, velocities, frictions); returns
    which vertices each one holds and the positions right after each."""
    n = len(x)
    holds, after = [], []
    # a sphere keeps the edges out only of a model without faces (ropes, spring bones' bones):
    # a cloth's faces would need it too, and its edges alone fought the vertices' pushes
    ropes = step.triangles is None or len(step.triangles) == 0
    for col in cols:
        if isinstance(col, MeshWindow):
            hit = resolve_mesh(col, x, v, x_prev, h, edges, movable, step.stats, step.support, only=only,
                               triangles=step.triangles, normals=found.normals,
                               velocities=found.velocities, scale=share)
        else:
            sel = np.arange(n) if only is None else np.flatnonzero(only & movable)
            # analytic colliders are cheap; ``only`` keeps them off the other vertices
            xs, vs = x[sel], v[sel]
            col.resolve(xs, vs, x_prev[sel], step.stats, share[sel])
            hit = np.zeros(n, bool)
            hit[sel] = np.any(xs != x[sel], axis=1)
            found.normals[hit] = col.normal_at(xs[hit[sel]])
            x[sel], v[sel] = xs, vs
            if isinstance(col, Sphere) and len(edges) and ropes:  # a plane's nearest point is an end
                ends = edges if only is None else edges[only[edges[:, 0]] | only[edges[:, 1]]]
                pushed, nrm = col.resolve_edges(x, v, x_prev, ends, movable, step.stats, share)
                hit |= pushed
                found.normals[pushed] = nrm[pushed]
        found.mask |= hit
        found.frictions[hit] = col.friction
        holds.append(hit)
        after.append(x.copy())
    return holds, after


def _meshes_again(cols: list, meshes: list, after: list, holds: list, x: np.ndarray, v: np.ndarray,
                  x_prev: np.ndarray, h: float, edges: np.ndarray, movable: np.ndarray,
                  triangles: np.ndarray | None, share: np.ndarray) -> tuple[np.ndarray, ContactStats]:
    """One collider's push can move a vertex into a mesh resolved before it (a cloth in the
    crease between a ball and the ground): with several meshes, a second round of each over
    the vertices moved since it (``holds`` updated). Returns the vertices moved since any
    mesh and the round's statistics (only its deepest penetration counts)."""
    moved_any = np.zeros(len(x), bool)
    again = ContactStats()
    if len(meshes) > 1:
        for i in meshes:
            moved = np.any(x != after[i], axis=1)
            if np.any(moved):
                moved_any |= moved
                holds[i] |= resolve_mesh(cols[i], x, v, x_prev, h, edges, movable, again, None,
                                         only=moved, triangles=triangles, scale=share)
    return moved_any, again


def _several(cols: list, holds: list, x: np.ndarray, x_prev: np.ndarray, movable: np.ndarray,
             share: np.ndarray, found: HeldVertices, moved_any: np.ndarray) -> None:
    """A vertex that several colliders hold (or one whose shell is squeezed, ``share`` < 1)
    goes to one point outside all of them (:func:`_joint`; the colliders one after another
    leave it in whichever one's shell came first); ``found.others`` gets the second normal
    and ``moved_any`` the vertices it moved."""
    both = np.flatnonzero(((np.sum(holds, axis=0) >= 2) | (found.mask & (share < 1.0))) & movable)
    if len(both):
        before = x[both].copy()
        found.others[both] = _joint(cols, x, x_prev, both, share)
        moved_any[both] |= np.any(x[both] != before, axis=1)


def resolve_again(colliders: Sequence[object], x: np.ndarray, v: np.ndarray, x_prev: np.ndarray,
                  h: float, model: object, only: np.ndarray, carry: bool = False) -> np.ndarray:
    """A second contact pass over the vertices ``only`` ``(n,)`` that a later stage of the
    step moved (the strain limit, self-collision), as :func:`resolve` but without counting
    contacts twice: it adds only the deepest penetration it leaves to the statistics. With
    ``carry`` the carried push
    (:class:`~.contact.Support`) learns from it too: what the strain limit pulls into a
    collider is load the collider must carry in the next solve. Returns the held vertices."""
    step = StepColliders.of(colliders)
    again = StepColliders(step.items, ContactStats(), step.support if carry else None, step.triangles,
                          room=step.room)
    held = resolve(again, x, v, x_prev, h, model, only=only)
    found, new = step.found, again.found
    if found is not None and new is not None:  # the contacts it found, for the stages after it
        found.normals[held] = new.normals[held]
        found.velocities[held] = new.velocities[held]
        found.frictions[held] = new.frictions[held]
        found.others[only] = new.others[only]
    if step.stats is not None:
        step.stats.add(0, again.stats.max_penetration)
    return held
