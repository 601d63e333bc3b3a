"""Contact detection for solvers with contact inside the solve (:mod:`.vbd`).

Detection is apart from response: :class:`ColliderSoup` turns one step's colliders
(planes, spheres and triangle meshes over the step, :class:`~.contact.MeshWindow`) into
flat arrays with a hashed uniform grid over the triangles (the broad phase), and
:meth:`ColliderSoup.detect` runs the compiled narrow phase
(``sinew_collider_query``) for every cloth vertex, filling one typed record,
:class:`Contacts`: each vertex's nearest collider triangles within its query radius, its
distance to the nearest surface, and the displacement bound that keeps it from reaching
any triangle it was not tested against (as Offset Geometric Contact bounds each vertex's
displacement, Chen et al. 2025). The solver
consumes the record; it is rebuilt whenever a vertex reaches its bound. Within the bound
the kernels stop every move short of the first collider triangle or primitive its path
crosses (``src/guard.h``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import kernels
from ..errors import SinewError
from .colliders import Plane, Sphere, TriangleMesh
from .contact import MeshWindow
from .proximity import points_box

__all__ = ["ColliderSoup", "Contacts", "SelfDetection", "SelfPairs", "GUARD_FRACTION", "CONTACT_SLOTS",
           "element_boxes", "hashed_grid", "collider_box", "split_near", "box_distance"]

#: A vertex moves at most this fraction of the radius around it that holds no collider
#: triangle but those detection gave it, between two detections (below 1: round-off).
GUARD_FRACTION = 0.99
#: Collider triangles kept per vertex (the nearest within its query radius).
CONTACT_SLOTS = 8
#: A triangle whose box covers more grid cells than this is tested against every vertex
#: instead of being gridded (a ground plane of two triangles under a fine cloth).
_BIG_CELLS = 512
#: Vertices per block of the self query on a thread of its own, at least (:meth:`SelfDetection.detect`).
SELF_PART = 1024
#: Vertices per block of the collider query on a thread of its own, at least (:meth:`ColliderSoup.detect`).
QUERY_PART = 512
#: A moving mesh collider of more triangles than this keeps only those within the step's
#: region in the step's soup (:class:`ColliderSoup`).
CULL_TRIANGLES = 256


@dataclass
class Contacts:
    """The contacts record one detection fills (shapes for ``n`` cloth vertices).

    Attributes
    ----------
    ids : numpy.ndarray
        ``(n, CONTACT_SLOTS)`` int64, collider triangles (rows of :attr:`ColliderSoup.tris`)
        near each vertex, nearest first; ``count`` ``(n,)`` of them are valid.
    count : numpy.ndarray
        ``(n,)`` int64.
    distance : numpy.ndarray
        ``(n,)`` m: to the nearest collider surface within the query radius (the radius
        when none), or minus the depth of a vertex inside a closed collider.
    anchor : numpy.ndarray
        ``(n, 3)`` m, the positions detection ran at.
    bound : numpy.ndarray
        ``(n,)`` m, how far each vertex may move from ``anchor`` before detection runs
        again: no collider triangle but those of ``ids`` lies closer (``inf`` inside a
        collider: it must get out).
    slot_distance : numpy.ndarray
        ``(n, CONTACT_SLOTS)`` m, the distance to each triangle of ``ids``.
    """

    ids: np.ndarray
    count: np.ndarray
    distance: np.ndarray
    anchor: np.ndarray
    bound: np.ndarray
    slot_distance: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Contacts:
        """A record for ``n`` vertices with no contacts and no bound."""
        return cls(np.zeros((n, CONTACT_SLOTS), np.int64), np.zeros(n, np.int64),
                   np.full(n, np.inf), np.zeros((n, 3)), np.full(n, np.inf),
                   np.zeros((n, CONTACT_SLOTS)))

    @property
    def inside(self) -> np.ndarray:
        """``(n,)`` bool: vertices inside a closed collider at detection."""
        return self.distance < 0.0


def element_boxes(x: np.ndarray, elems: np.ndarray, x1: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The boxes ``(lo, hi)`` ``(m, 3)`` of elements ``elems`` ``(m, k)`` (triangles, edges)
    of vertices ``x`` ``(n, 3)``, or of their sweeps from ``x`` to ``x1`` ``(n, 3)``
    (``sinew_element_boxes``)."""
    m, k = elems.shape
    lo, hi = np.empty((m, 3)), np.empty((m, 3))
    if x1 is not None and (x1.shape != x.shape or not x1.flags.c_contiguous):
        raise SinewError("element boxes: the sweep's end must be C-contiguous and shaped as its start")
    kernels.check_status(kernels.library().sinew_element_boxes(
        m, k, elems.ctypes.data, len(x), x.ctypes.data, None if x1 is None else x1.ctypes.data,
        lo.ctypes.data, hi.ctypes.data), "element boxes")
    return lo, hi


def hashed_grid(lo: np.ndarray, hi: np.ndarray, cell: float, *, big_cells: int | None = None,
                table: int | None = None) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """A hashed uniform grid (cells of ``cell`` m) over the boxes ``lo``, ``hi`` ``(k, 3)``:
    ``(table, offsets (table + 1,), entries, big)``, the boxes of each hash bucket
    ``entries[offsets[b]:offsets[b + 1]]`` in ascending order (``sinew_grid_build``). A box
    over more than ``big_cells`` cells is not filed but listed in ``big`` (tested against
    every query instead). ``table`` (buckets) defaults to a power of two of about four per
    box."""
    lib = kernels.library()
    k = len(lo)
    if table is None:
        table = 1 << max(10, int(np.ceil(np.log2(max(4 * k, 1)))))
    offsets = np.empty(table + 1, np.int64)
    big = np.empty(max(k, 1), np.int64)
    nbig = np.zeros(1, np.int64)
    room = max(8 * k, 1)
    while True:
        entries = np.empty(room, np.int64)
        total = kernels.check_status(lib.sinew_grid_build(
            k, lo.ctypes.data, hi.ctypes.data, cell, table, -1 if big_cells is None else int(big_cells),
            offsets.ctypes.data, room, entries.ctypes.data, big.ctypes.data, nbig.ctypes.data), "grid build")
        if total <= room:
            return table, offsets, entries, big[:int(nbig[0])]
        room = total


@dataclass
class SelfPairs:
    """The record one self detection fills (:meth:`SelfDetection.detect`), for ``n`` cloth
    vertices.

    Attributes
    ----------
    pair : numpy.ndarray
        ``(p, 2)`` int64: the first ``vf`` rows (vertex, triangle), the rest (edge, edge)
        (rows of :attr:`SelfDetection.faces`, :attr:`SelfDetection.edges`).
    vf : int
    distance : numpy.ndarray
        ``(p,)`` m, each pair's distance at detection.
    inc_off, inc : numpy.ndarray
        Each vertex's pairs: ``inc[inc_off[i]:inc_off[i + 1]]``.
    anchor : numpy.ndarray
        ``(n, 3)`` m, the positions detection ran at.
    bound : numpy.ndarray
        ``(n,)`` m: how far each vertex may move from ``anchor`` before detection runs again
        (a pair not listed cannot come within the contact radius while every vertex stays
        within its bound).
    """

    pair: np.ndarray
    vf: int
    distance: np.ndarray
    inc_off: np.ndarray
    inc: np.ndarray
    anchor: np.ndarray
    bound: np.ndarray


class SelfDetection:
    """Detection of a cloth's contacts with itself for the VBD solve: the vertex–face and
    edge–edge pairs of features that share no vertex (nor were neighbours in the rest shape:
    :attr:`~.selfcollision.SelfCollision.excluded_vf`) that may come within the contact
    radius ``distance`` before a vertex leaves its bound (``sinew_self_query``, a hashed grid
    over the triangles and the edges).

    Parameters
    ----------
    self_collision : SelfCollision
        The mesh's triangles, edges, distance and rest-shape neighbours.
    """

    def __init__(self, self_collision: Any) -> None:
        sc = self_collision
        self.faces = kernels.array(sc.triangles, np.int64, (-1, 3), "self-collision triangles")
        self.edges = kernels.array(sc.edges, np.int64, (-1, 2), "self-collision edges")
        n = int(self.faces.max(initial=-1)) + 1
        n = max(n, int(self.edges.max(initial=-1)) + 1)
        # the rest-shape neighbours as lists per vertex (faces) and per edge (edges), ascending
        vf = np.unique(np.asarray(sc.excluded_vf, np.int64))
        ee = np.unique(np.asarray(sc.excluded_ee, np.int64))
        nf, ne = max(len(self.faces), 1), max(len(self.edges), 1)
        if (len(vf) and vf.min() < 0) or (len(ee) and (ee.min() < 0 or ee.max() >= ne * ne)):
            raise SinewError("self-collision neighbour keys out of range")
        if len(vf):  # (a vertex in no face may still lie near one)
            n = max(n, int(vf.max() // nf) + 1)
        self._n = n
        self.skip_vf_off = np.ascontiguousarray(np.searchsorted(vf // nf, np.arange(n + 1)), np.int64)
        self.skip_vf = np.ascontiguousarray(vf % nf, np.int64)
        self.skip_ee_off = np.ascontiguousarray(np.searchsorted(ee // ne, np.arange(len(self.edges) + 1)), np.int64)
        self.skip_ee = np.ascontiguousarray(ee % ne, np.int64)
        self.distance = float(sc.distance)
        self._stamp = np.empty((1, max(len(self.faces), len(self.edges), 1)), np.int64)
        self._room = 1024
        self._size: float | None = None
        self._table = 1 << max(10, int(np.ceil(np.log2(max(4 * max(len(self.faces), len(self.edges)), 1)))))
        self._lib = kernels.library()

    def detect(self, x: np.ndarray, bound: np.ndarray, workers: kernels.Workers | None = None) -> SelfPairs:
        """The pairs at ``x`` ``(n, 3)`` for balls ``bound`` ``(n,)`` (m, finite); with
        ``workers``, the query's vertices and edges in as many blocks on their threads (the
        same pairs in the same order)."""
        x = kernels.array(x, np.float64, (-1, 3), "self detection positions")
        if len(x) < self._n:
            raise SinewError(f"self detection needs {self._n} vertices, got {len(x)}")
        skip_vf_off = self.skip_vf_off
        if len(x) > self._n:  # vertices in no face or edge: nothing to skip
            skip_vf_off = np.concatenate([skip_vf_off, np.full(len(x) - self._n, skip_vf_off[-1])])
        bound = kernels.array(bound, np.float64, (len(x),), "self detection bounds")
        n, r = len(x), self.distance
        bmax = float(bound.max(initial=0.0))
        f_lo, f_hi = element_boxes(x, self.faces)
        e_lo, e_hi = element_boxes(x, self.edges)
        if self._size is None:  # the median edge at the first detection sets the cells
            # (1.5 times it: the fastest measured, docs/CONTACT.md)
            ec = x[self.edges]
            self._size = float(np.median(np.linalg.norm(ec[:, 1] - ec[:, 0], axis=1))) if len(ec) else 0.0
        cell = max(1.5 * self._size, r + 2.0 * bmax, 1e-6)
        table, f_off, f_entries, _ = hashed_grid(f_lo, f_hi, cell, table=self._table)
        _, e_off, e_entries, _ = hashed_grid(e_lo, e_hi, cell, table=table)
        parts = 1 if workers is None else workers.parts(n, SELF_PART)
        if self._stamp.shape[0] < parts:
            self._stamp = np.empty((parts, self._stamp.shape[1]), np.int64)
        counts = np.zeros((parts, 2), np.int64)
        totals = np.zeros(parts, np.int64)
        while True:
            pairs = np.empty((parts, self._room, 2), np.int64)
            dist = np.empty((parts, self._room))

            def query(team: int, part: int, pairs: np.ndarray = pairs, dist: np.ndarray = dist) -> int:
                totals[part] = self._lib.sinew_self_query(
                    n, x.ctypes.data, bound.ctypes.data, r, bmax, len(self.faces), self.faces.ctypes.data,
                    len(self.edges), self.edges.ctypes.data, cell, table, f_off.ctypes.data,
                    f_entries.ctypes.data, e_off.ctypes.data, e_entries.ctypes.data, f_lo.ctypes.data,
                    f_hi.ctypes.data, e_lo.ctypes.data, e_hi.ctypes.data, skip_vf_off.ctypes.data,
                    self.skip_vf.ctypes.data, self.skip_ee_off.ctypes.data, self.skip_ee.ctypes.data,
                    self._stamp[part].ctypes.data, part, parts, self._room, pairs[part].ctypes.data,
                    dist[part].ctypes.data, counts[part].ctypes.data)
                return min(int(totals[part]), 0)

            if parts == 1:
                kernels.check_status(query(0, 0), "self query")
            else:
                workers.team(query, parts, "self query")
            if totals.max() <= self._room:
                break
            self._room = int(1.5 * totals.max()) + 1
        vfs = [slice(0, int(c)) for c in counts[:, 0]]
        ees = [slice(int(c), int(t)) for c, t in zip(counts[:, 0], totals)]
        vf = int(counts[:, 0].sum())
        total = int(totals.sum())
        pairs = np.concatenate([pairs[k, vfs[k]] for k in range(parts)] + [pairs[k, ees[k]] for k in range(parts)])
        dist = np.concatenate([dist[k, vfs[k]] for k in range(parts)] + [dist[k, ees[k]] for k in range(parts)])
        verts = np.concatenate([np.c_[pairs[:vf, 0], self.faces[pairs[:vf, 1]]],
                                np.c_[self.edges[pairs[vf:, 0]], self.edges[pairs[vf:, 1]]]])
        owner = verts.reshape(-1)
        order = np.argsort(owner, kind="stable")
        inc = np.ascontiguousarray(np.repeat(np.arange(total, dtype=np.int64), 4)[order])
        inc_off = np.ascontiguousarray(np.searchsorted(owner[order], np.arange(n + 1)), np.int64)
        return SelfPairs(np.ascontiguousarray(pairs), vf, np.ascontiguousarray(dist), inc_off, inc, x.copy(),
                         bound.copy())


def collider_box(col: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The box a collider's surfaces and thickness occupy over the step ``(lo, hi)``, or
    ``None`` for an unbounded one (a plane)."""
    if isinstance(col, Plane):
        return None
    if isinstance(col, Sphere):
        reach = col.radius + col.thickness
        return np.asarray(col.center, float) - reach, np.asarray(col.center, float) + reach
    if isinstance(col, MeshWindow):
        lo, hi = col.box()  # (a static collider's window keeps it the whole bake)
    elif isinstance(col, TriangleMesh):
        lo, hi = points_box(col.vertices)
    else:
        raise SinewError(f"unknown collider type {type(col).__name__}")
    return lo - col.thickness, hi + col.thickness


def split_near(colliders: Sequence[Any], lo: np.ndarray, hi: np.ndarray) -> tuple[list, np.ndarray]:
    """The colliders whose box (:func:`collider_box`) meets the box ``lo``, ``hi``, and the
    boxes of the others ``(k, 2, 3)``."""
    near, far = [], []
    for col in colliders:
        box = collider_box(col)
        if box is None or (np.all(box[0] <= hi) and np.all(box[1] >= lo)):
            near.append(col)
        else:
            far.append(np.stack(box))
    return near, (np.stack(far) if far else np.zeros((0, 2, 3)))


def box_distance(x: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """``(n,)`` each point's distance to the nearest of the boxes ``(k, 2, 3)`` (inf: none)."""
    out = np.full(len(x), np.inf)
    for lo, hi in boxes:
        gap = np.maximum(np.maximum(lo - x, x - hi), 0.0)
        np.minimum(out, np.sqrt(np.einsum("ij,ij->i", gap, gap)), out=out)
    return out


def unit_normals(cv: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """``(t, 3)`` the triangles' unit normals (the kernels' triangle_normal: zero for a
    collapsed triangle)."""
    corners = cv[tris] if len(tris) else np.zeros((0, 3, 3))
    nrm = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    size = np.linalg.norm(nrm, axis=1)
    return np.ascontiguousarray(
        np.where(size[:, None] > 0, nrm / np.where(size > 0, size, 1.0)[:, None], 0.0))


class ColliderSoup:
    """One step's colliders as flat arrays for the kernels.

    Parameters
    ----------
    colliders : sequence
        :class:`~.colliders.Plane`, :class:`~.colliders.Sphere`,
        :class:`~.colliders.TriangleMesh` (static over the step) or
        :class:`~.contact.MeshWindow` (corners at the start and end of the step).
    region : tuple, optional
        ``(lo, hi)``: the box the cloth may reach within the step. A moving mesh of more than
        :data:`CULL_TRIANGLES` triangles keeps only those whose sweep over the step (with its
        thickness) meets it, and detection keeps every vertex's bound inside it.

    Attributes
    ----------
    cv : numpy.ndarray
        ``(m, 3)`` collider vertices at the end of the step, m.
    cdisp : numpy.ndarray or None
        ``(m, 3)`` their displacement over the step (``None``: all static).
    tris : numpy.ndarray
        ``(t, 3)`` int64.
    closed : numpy.ndarray
        ``(t,)`` uint8: the triangle belongs to a closed mesh (behind it is inside).
    radius, mu : numpy.ndarray
        ``(t,)``: contact radius (the collider's thickness, m) and Coulomb coefficient.
    normals : numpy.ndarray
        ``(t, 3)`` the triangles' unit normals at the end of the step (zero if collapsed).
    prim_type : numpy.ndarray
        ``(p,)`` int32: 0 plane, 1 sphere.
    prim : numpy.ndarray
        ``(p, 8)``: plane ``point, normal, thickness, friction``; sphere
        ``centre, radius, 0, 0, thickness, friction``.
    primitives : list
        The :class:`Plane` and :class:`Sphere` objects of ``prim``, in its order.
    """

    def __init__(self, colliders: Sequence[Any], region: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        verts, disps, tris, closed, radius, mu = [], [], [], [], [], []
        #: ``(lo, hi)`` when triangles out of it were left out (a moving mesh's, ``region``):
        #: detection keeps every vertex's bound inside it
        self.region: tuple[np.ndarray, np.ndarray] | None = None
        prims, ptype = [], []
        offset = 0
        moving = False
        for col in colliders:
            if isinstance(col, Plane):
                ptype.append(0)
                prims.append(np.r_[col.point, col.normal, col.thickness, col.friction])
            elif isinstance(col, Sphere):
                ptype.append(1)
                prims.append(np.r_[col.center, col.radius, 0.0, 0.0, col.thickness, col.friction])
            elif isinstance(col, (MeshWindow, TriangleMesh)):
                if isinstance(col, TriangleMesh):
                    c0 = c1 = col.vertices
                    closed_mesh = col.closed
                else:
                    c0, c1, closed_mesh = col.c0, col.c1, col.closed
                t = np.asarray(col.triangles, dtype=np.int64).reshape(-1, 3)
                verts.append(c1)
                d = c1 - c0
                moves = bool(np.any(d))
                moving = moving or moves
                if moves and region is not None and len(t) > CULL_TRIANGLES:
                    # (a moving mesh's grid and normals are built every step: only for the
                    # triangles whose sweep over the step, with the thickness, meets the region)
                    meets = np.empty(len(t), np.uint8)
                    box = [kernels.array(r, np.float64, (3,), "region") for r in region]
                    kept = kernels.check_status(kernels.library().sinew_swept_elements_meet(
                        len(t), 3, np.ascontiguousarray(t).ctypes.data, len(c0),
                        kernels.array(c0, np.float64, (-1, 3), "collider vertices").ctypes.data,
                        kernels.array(c1, np.float64, (len(c0), 3), "collider vertices").ctypes.data,
                        float(col.thickness), box[0].ctypes.data, box[1].ctypes.data, meets.ctypes.data),
                        "swept boxes")
                    if kept < len(t):
                        t = t[meets.view(bool)]
                        self.region = (box[0], box[1])
                disps.append(d)
                tris.append(t + offset)
                closed.append(np.full(len(t), bool(closed_mesh), np.uint8))
                radius.append(np.full(len(t), float(col.thickness)))
                mu.append(np.full(len(t), float(col.friction)))
                offset += len(c1)
            else:
                raise SinewError(f"unknown collider type {type(col).__name__}")
        self.cv = kernels.array(np.concatenate(verts) if verts else np.zeros((0, 3)),
                                np.float64, (-1, 3), "collider vertices")
        self.cdisp = np.ascontiguousarray(np.concatenate(disps)) if moving else None
        self.tris = kernels.array(np.concatenate(tris) if tris else np.zeros((0, 3), np.int64),
                                  np.int64, (-1, 3), "collider triangles")
        self.closed = np.ascontiguousarray(np.concatenate(closed) if closed else np.zeros(0, np.uint8))
        self.radius = np.ascontiguousarray(np.concatenate(radius) if radius else np.zeros(0))
        self.mu = np.ascontiguousarray(np.concatenate(mu) if mu else np.zeros(0))
        self.normals = unit_normals(self.cv, self.tris)
        self.primitives = [col for col in colliders if isinstance(col, (Plane, Sphere))]
        self.prim_type = np.asarray(ptype, dtype=np.int32)
        self.prim = kernels.array(np.array(prims) if prims else np.zeros((0, 8)), np.float64,
                                  (-1, 8), "collider primitives")
        self.max_radius = float(max(self.radius.max(initial=0.0), self.prim[:, 6].max(initial=0.0)))
        #: ``(k, 2, 3)`` boxes of colliders left out of the arrays as out of reach this step
        #: (:func:`split_near`): detection keeps every vertex's bound short of them.
        self.fence = np.zeros((0, 2, 3))
        #: the threads the query may use, in blocks of :data:`QUERY_PART` vertices or more
        #: (``None``: this one)
        self.workers: kernels.Workers | None = None
        self._grid: tuple | None = None
        self._cv_start: np.ndarray | None = None
        self._lib = kernels.library()

    def __len__(self) -> int:
        return len(self.tris) + len(self.prim_type)

    @property
    def cv_start(self) -> np.ndarray:
        """``(v, 3)`` the collider vertices at the step's start (``cv`` less ``cdisp``; worked
        out once, for the grid's sweeps and :meth:`at_start`)."""
        if self._cv_start is None:
            self._cv_start = np.ascontiguousarray(self.cv - self.cdisp) if self.cdisp is not None else self.cv
        return self._cv_start

    def at_start(self, radius: np.ndarray) -> ColliderSoup:
        """The same colliders at the start of the step (static: ``cdisp`` ``None``), for
        queries of about ``radius`` ``(n,)``. It shares this soup's grid, which covers each
        triangle's sweep over the step (:meth:`_build_grid`), and has no ``normals``
        (``None``: the query needs none, and the carry's kernel takes the normals of the
        triangles it meets)."""
        self._ensure_grid(radius)
        out = object.__new__(ColliderSoup)
        out.__dict__.update(self.__dict__)
        if self.cdisp is not None:
            out.cv = self.cv_start
            out.normals = None
        out.cdisp = None
        return out

    def _ensure_grid(self, radius: np.ndarray) -> None:
        """Builds the grid on first use, its cells sized by the median query radius and the
        median triangle edge."""
        if self._grid is not None:
            return
        span = float(np.median(radius)) if len(radius) else 0.0
        if len(self.tris):
            edges = self.cv[self.tris[:, 1]] - self.cv[self.tris[:, 0]]
            span = max(span, float(np.median(np.linalg.norm(edges, axis=1))))
        self._grid = self._build_grid(max(span, 1e-6))

    def _build_grid(self, cell: float) -> tuple:
        """The hashed grid over the triangles' boxes: over the step's sweep of each (its
        box at the start and at the end) when the colliders move, so a query at the step's
        start (:meth:`at_start`) uses the same grid."""
        lo, hi = element_boxes(self.cv, self.tris, None if self.cdisp is None else self.cv_start)
        table, offsets, entries, big = hashed_grid(lo, hi, cell, big_cells=_BIG_CELLS)
        return cell, table, offsets, entries, big, lo, hi

    def detect_some(self, x: np.ndarray, rows: np.ndarray, radius: np.ndarray,
                    out: Contacts) -> None:
        """Detection again for the vertices ``rows`` (indices) of ``out`` only, at their
        positions in ``x`` ``(n, 3)`` with query radii ``radius`` ``(len(rows),)``."""
        part = self.detect(np.ascontiguousarray(x[rows]), radius)
        out.ids[rows] = part.ids
        out.count[rows] = part.count
        out.distance[rows] = part.distance
        out.anchor[rows] = part.anchor
        out.bound[rows] = part.bound
        out.slot_distance[rows] = part.slot_distance

    def detect(self, x: np.ndarray, radius: np.ndarray, out: Contacts | None = None) -> Contacts:
        """Detection at positions ``x`` ``(n, 3)`` with query radii ``radius`` ``(n,)`` (m):
        fills (or makes) a :class:`Contacts` record."""
        n = len(x)
        if out is None:
            out = Contacts.empty(n)
        out.anchor[...] = x
        if len(self) == 0:
            out.count[...] = 0
            out.distance[...] = np.inf
            out.bound[...] = GUARD_FRACTION * box_distance(out.anchor, self.fence)
            return out
        self._ensure_grid(radius)
        cell, table, offsets, entries, big, lo, hi = self._grid
        radius = np.ascontiguousarray(radius, dtype=np.float64)
        k = CONTACT_SLOTS
        parts = 1 if self.workers is None else self.workers.parts(n, QUERY_PART)

        def query(team: int, part: int) -> int:  # the vertices [a, b): each one's rows alone
            a, b = kernels.block(n, part, parts)
            return self._lib.sinew_collider_query(
                b - a, out.anchor.ctypes.data + 24 * a, radius.ctypes.data + 8 * a, len(self.cv),
                self.cv.ctypes.data, len(self.tris), self.tris.ctypes.data, self.closed.ctypes.data, cell,
                table, offsets.ctypes.data, entries.ctypes.data, len(big), big.ctypes.data, lo.ctypes.data,
                hi.ctypes.data, len(self.prim_type), self.prim_type.ctypes.data, self.prim.ctypes.data, k,
                out.ids.ctypes.data + 8 * k * a, out.slot_distance.ctypes.data + 8 * k * a,
                out.count.ctypes.data + 8 * a, out.distance.ctypes.data + 8 * a)

        if parts == 1:
            kernels.check_status(query(0, 0), "collider query")
        else:
            self.workers.team(query, parts, "collider query")
        # no triangle but the slots' lies within the query radius, or, when the slots are
        # full, within the farthest slot's distance; inside a closed collider: unguarded
        full = out.count == CONTACT_SLOTS
        ball = np.where(full, out.slot_distance[:, -1], radius)
        if len(self.fence):
            ball = np.minimum(ball, box_distance(out.anchor, self.fence))
        if self.region is not None:  # (every triangle left out lies beyond the region's walls)
            inside = np.minimum(out.anchor - self.region[0], self.region[1] - out.anchor).min(axis=1)
            ball = np.minimum(ball, np.maximum(inside, 0.0))
        out.bound[...] = np.where(out.distance < 0.0, np.inf, GUARD_FRACTION * ball)
        return out

