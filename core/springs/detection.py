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

__all__ = ["ColliderSoup", "Contacts", "GUARD_FRACTION", "CONTACT_SLOTS"]

#: A vertex moves at most this fraction of the radius around it that holds no collider
#: triangle but those detection gave it, between two detections (below 1: round-off).
GUARD_FRACTION = 0.99
#: Collider triangles kept per vertex (the nearest within its query radius).
CONTACT_SLOTS = 8
#: A triangle whose box covers more grid cells than this is tested against every vertex
#: instead of being gridded (a ground plane of two triangles under a fine cloth).
_BIG_CELLS = 512


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


def _unit_normals(cv: np.ndarray, tris: np.ndarray) -> np.ndarray:
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

    def __init__(self, colliders: Sequence[Any]) -> None:
        verts, disps, tris, closed, radius, mu = [], [], [], [], [], []
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
                moving = moving or bool(np.any(d))
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
        self.normals = _unit_normals(self.cv, self.tris)
        self.primitives = [col for col in colliders if isinstance(col, (Plane, Sphere))]
        self.prim_type = np.asarray(ptype, dtype=np.int32)
        self.prim = kernels.array(np.array(prims) if prims else np.zeros((0, 8)), np.float64,
                                  (-1, 8), "collider primitives")
        self.max_radius = float(max(self.radius.max(initial=0.0), self.prim[:, 6].max(initial=0.0)))
        self._grid: tuple | None = None
        self._lib = kernels.library()

    def __len__(self) -> int:
        return len(self.tris) + len(self.prim_type)

    def at_start(self) -> ColliderSoup:
        """The same colliders at the start of the step (static: ``cdisp`` ``None``), with a
        grid of their own."""
        out = object.__new__(ColliderSoup)
        out.__dict__.update(self.__dict__)
        if self.cdisp is not None:
            out.cv = np.ascontiguousarray(self.cv - self.cdisp)
            out.normals = _unit_normals(out.cv, self.tris)
        out.cdisp = None
        out._grid = None
        return out

    def _build_grid(self, cell: float) -> tuple:
        """The hashed grid over the triangles' boxes at the end of the step."""
        lib = self._lib
        t = len(self.tris)
        corners = self.cv[self.tris] if t else np.zeros((0, 3, 3))
        lo = np.ascontiguousarray(corners.min(axis=1))
        hi = np.ascontiguousarray(corners.max(axis=1))
        cells = np.prod(np.floor(hi / cell) - np.floor(lo / cell) + 1.0, axis=1) if t else np.zeros(0)
        small = np.ascontiguousarray(np.flatnonzero(cells <= _BIG_CELLS), dtype=np.int64)
        big = np.ascontiguousarray(np.flatnonzero(cells > _BIG_CELLS), dtype=np.int64)
        table = 1 << max(10, int(np.ceil(np.log2(max(2 * float(cells[small].sum()) if t else 1.0, 1.0)))))
        count = np.zeros(table + 1, np.int64)
        total = kernels.check_status(lib.sinew_grid_count(
            len(small), small.ctypes.data, lo.ctypes.data, hi.ctypes.data, cell, table,
            count[1:].ctypes.data), "grid count")
        offsets = np.cumsum(count)
        entries = np.empty(max(total, 1), np.int64)
        cursor = offsets[:-1].copy()
        kernels.check_status(lib.sinew_grid_fill(
            len(small), small.ctypes.data, lo.ctypes.data, hi.ctypes.data, cell, table,
            cursor.ctypes.data, entries.ctypes.data), "grid fill")
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
            out.bound[...] = np.inf
            return out
        if self._grid is None:
            span = np.median(radius) if n else 0.0
            if len(self.tris):
                edges = self.cv[self.tris[:, 1]] - self.cv[self.tris[:, 0]]
                span = max(span, float(np.median(np.linalg.norm(edges, axis=1))))
            self._grid = self._build_grid(max(span, 1e-6))
        cell, table, offsets, entries, big, lo, hi = self._grid
        radius = np.ascontiguousarray(radius, dtype=np.float64)
        kernels.check_status(self._lib.sinew_collider_query(
            n, out.anchor.ctypes.data, radius.ctypes.data, len(self.cv), self.cv.ctypes.data,
            len(self.tris), self.tris.ctypes.data, self.closed.ctypes.data, cell, table,
            offsets.ctypes.data, entries.ctypes.data, len(big), big.ctypes.data, lo.ctypes.data,
            hi.ctypes.data, len(self.prim_type), self.prim_type.ctypes.data, self.prim.ctypes.data,
            CONTACT_SLOTS, out.ids.ctypes.data, out.slot_distance.ctypes.data,
            out.count.ctypes.data, out.distance.ctypes.data), "collider query")
        # no triangle but the slots' lies within the query radius, or, when the slots are
        # full, within the farthest slot's distance; inside a closed collider: unguarded
        full = out.count == CONTACT_SLOTS
        ball = np.where(full, out.slot_distance[:, -1], radius)
        out.bound[...] = np.where(out.distance < 0.0, np.inf, GUARD_FRACTION * ball)
        return out

