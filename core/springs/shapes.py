"""Small test and benchmark meshes in the layout :func:`~.topology.build_springs`
takes (Blender's vertices / edges / polygon loops)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .topology import SpringSet, build_springs

__all__ = ["MeshArrays", "grid", "rope", "tube", "triangulate", "springs_of", "box", "uv_sphere"]


class MeshArrays(NamedTuple):
    """Mesh arrays: ``positions (n, 3)`` m, ``edges (e, 2)``, ``loop_starts (p,)``,
    ``loop_totals (p,)``, ``loop_vertices (l,)``."""

    positions: np.ndarray
    edges: np.ndarray
    loop_starts: np.ndarray
    loop_totals: np.ndarray
    loop_vertices: np.ndarray


def grid(n: int, size: float = 2.0, *, plane: str = "XZ") -> MeshArrays:
    """A quad grid of ``n × n`` faces, ``(n+1)²`` vertices, ``size`` m wide.

    Vertex ``(i, j)`` (column ``i``, row ``j``) has index ``j (n+1) + i``.
    In the ``"XZ"`` plane row 0 is the top edge (z = 0) and rows go down to
    z = −size, centred on x = 0; in ``"XY"`` it lies flat at z = 0.
    """
    m = n + 1
    i, j = np.meshgrid(np.arange(m), np.arange(m))
    u = (i.reshape(-1) / n - 0.5) * size
    w = j.reshape(-1) / n * size
    if plane == "XZ":
        pos = np.stack([u, np.zeros_like(u), -w], axis=1)
    else:
        pos = np.stack([u, w - 0.5 * size, np.zeros_like(u)], axis=1)
    idx = np.arange(m * m).reshape(m, m)
    h = np.stack([idx[:, :-1].reshape(-1), idx[:, 1:].reshape(-1)], axis=1)
    v = np.stack([idx[:-1, :].reshape(-1), idx[1:, :].reshape(-1)], axis=1)
    quads = np.stack([idx[:-1, :-1], idx[:-1, 1:], idx[1:, 1:], idx[1:, :-1]], axis=-1).reshape(-1, 4)
    return MeshArrays(pos.astype(np.float64), np.concatenate([h, v]),
                      np.arange(len(quads)) * 4, np.full(len(quads), 4), quads.reshape(-1))


def tube(radii, heights, around: int, *, closed: bool = False, outward: bool = True) -> MeshArrays:
    """A tube about the Z axis: ``around`` vertices per ring at the given ``radii`` and
    ``heights`` (m, rings from the top; vertex ``r · around + i`` is ring ``r``'s ``i``-th, at
    angle ``2π i / around`` from +X), quads between the rings facing outward (``outward``) or
    inward; ``closed`` caps both ends with fans around a centre vertex each (the last two:
    top, bottom), facing the same way, a closed solid's surface."""
    radii, heights = np.asarray(radii, dtype=np.float64), np.asarray(heights, dtype=np.float64)
    rings = len(heights)
    ang = np.linspace(0.0, 2.0 * np.pi, around, endpoint=False)
    pos = np.stack([np.repeat(radii, around) * np.tile(np.cos(ang), rings),
                    np.repeat(radii, around) * np.tile(np.sin(ang), rings),
                    np.repeat(heights, around)], axis=1)
    r, i = np.meshgrid(np.arange(rings - 1), np.arange(around), indexing="ij")
    r, i = r.reshape(-1), i.reshape(-1)
    nxt = (i + 1) % around
    quads = np.stack([r * around + i, (r + 1) * around + i, (r + 1) * around + nxt, r * around + nxt], 1)
    if not outward:
        quads = quads[:, [0, 3, 2, 1]]
    polys = [quads]
    if closed:
        top, bottom = len(pos), len(pos) + 1
        pos = np.vstack([pos, [[0.0, 0.0, heights[0]], [0.0, 0.0, heights[-1]]]])
        ring = np.arange(around)
        last = (rings - 1) * around
        caps = [np.stack([np.full(around, top), ring, (ring + 1) % around], 1),
                np.stack([np.full(around, bottom), last + (ring + 1) % around, last + ring], 1)]
        polys += caps if outward else [c[:, ::-1] for c in caps]
    totals = np.concatenate([np.full(len(p), p.shape[1]) for p in polys])
    loops = np.concatenate([p.reshape(-1) for p in polys])
    starts = np.concatenate([[0], np.cumsum(totals)[:-1]])
    edges = np.concatenate([np.stack([p, np.roll(p, -1, axis=1)], -1).reshape(-1, 2) for p in polys])
    edges = np.unique(np.sort(edges, axis=1), axis=0)
    return MeshArrays(pos, edges.astype(np.int64), starts.astype(np.int64), totals.astype(np.int64),
                      loops.astype(np.int64))


def rope(n: int, length: float = 1.0) -> MeshArrays:
    """A vertical polyline of ``n + 1`` vertices from z = 0 down to z = −length."""
    z = -np.linspace(0.0, length, n + 1)
    pos = np.stack([np.zeros_like(z), np.zeros_like(z), z], axis=1)
    edges = np.stack([np.arange(n), np.arange(1, n + 1)], axis=1)
    empty = np.zeros(0, dtype=np.int64)
    return MeshArrays(pos, edges, empty, empty, empty)


def triangulate(mesh: MeshArrays) -> np.ndarray:
    """Fan triangles ``(t, 3)`` of every polygon."""
    starts, totals, loops = mesh.loop_starts, mesh.loop_totals, mesh.loop_vertices
    tri_count = totals - 2
    poly = np.repeat(np.arange(len(totals)), tri_count)
    k = np.arange(len(poly)) - np.repeat(np.cumsum(tri_count) - tri_count, tri_count)
    base = starts[poly]
    return np.stack([loops[base], loops[base + k + 1], loops[base + k + 2]], axis=1)


def springs_of(mesh: MeshArrays, **kw) -> SpringSet:
    """:func:`~.topology.build_springs` of ``mesh`` (``kw``: its ``shear`` and ``bending``)."""
    return build_springs(len(mesh.positions), mesh.edges, mesh.loop_starts, mesh.loop_totals,
                         mesh.loop_vertices, **kw)


def box(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """A closed axis-aligned box from corner ``lo`` to ``hi`` (m): vertices ``(8, 3)`` and
    triangles ``(12, 3)``, counter-clockwise seen from outside."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    bits = np.arange(8)[:, None] >> np.arange(3) & 1
    verts = np.where(bits == 1, hi, lo)
    quads = np.array([(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2),
                      (1, 3, 7, 5)])
    tris = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])
    return verts, tris


def uv_sphere(radius: float, rings: int = 16, segments: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """A closed UV sphere of ``radius`` (m) centred on the origin: vertices ``(v, 3)`` and
    triangles ``(t, 3)``, counter-clockwise seen from outside."""
    th = np.linspace(0, np.pi, rings + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    t, p = np.meshgrid(th, ph, indexing="ij")
    verts = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], -1).reshape(-1, 3)
    verts = np.vstack([verts, [[0, 0, 1]], [[0, 0, -1]]]) * radius
    top, bot = len(verts) - 2, len(verts) - 1
    idx = np.arange((rings - 1) * segments).reshape(rings - 1, segments)
    nx = np.roll(idx, -1, axis=1)
    tris = [np.stack([np.full(segments, top), idx[0], nx[0]], 1),
            np.stack([np.full(segments, bot), nx[-1], idx[-1]], 1)]
    a, b, c, d = idx[:-1], nx[:-1], nx[1:], idx[1:]
    tris += [np.stack([a, d, c], -1).reshape(-1, 3), np.stack([a, c, b], -1).reshape(-1, 3)]
    return verts, np.concatenate(tris)
