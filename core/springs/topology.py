"""Springs from mesh topology: structural, shear and bending.

The rules follow the usual cloth mass-spring construction (Choi & Ko 2002
"Stable but Responsive Cloth"; the lecture notes of seed 004):

structural
    Every mesh edge, plus every polygon side (so a polygon list without an edge
    list still works).
shear
    For every polygon with four or more corners, each corner is joined to the
    corner two steps further round the polygon ("skip-one diagonals"). For a
    quad these are its two diagonals; for a pentagon all five diagonals; for a
    hexagon the six short diagonals (the three long ones through the middle are
    not added). Triangles have no shear springs.
bending
    For each mesh edge ``(a, b)`` shared by two faces ``F1``, ``F2``: let
    ``p_F(a)`` be the neighbour of ``a`` in face ``F`` other than ``b`` (and
    likewise ``p_F(b)``). The springs are ``p_F1(a)–p_F2(a)`` and
    ``p_F1(b)–p_F2(b)``. On two triangles both are the spring between the two
    vertices opposite the shared edge; on a quad grid they are the usual
    skip-one springs along grid lines (``(i-1, j)–(i+1, j)``). An edge shared by
    three or more faces (non-manifold) gets springs between consecutive faces
    in the order the faces appear.
    Along loose edges (edges in no face: ropes, hair) every vertex joins its
    loose-edge neighbours pairwise, so a chain ``a-b-c`` gets the spring
    ``a-c``; at a branch vertex every pair of its loose neighbours is joined.

Every spring is stored once as a row ``(i, j)`` with ``i < j``; a pair that
is already structural is not also shear or bending, and one that is shear is
not also bending. Springs joining a vertex to itself are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TopologyError

__all__ = ["SpringSet", "build_springs"]


@dataclass(frozen=True, eq=False)
class SpringSet:
    """Springs of a mesh, by kind.

    Attributes
    ----------
    vertex_count : int
        Number of vertices ``n`` the indices refer to.
    structural : numpy.ndarray
        Shape ``(a, 2)``, int64, rows ``(i, j)`` with ``i < j``.
    shear : numpy.ndarray
        Shape ``(b, 2)``, int64.
    bending : numpy.ndarray
        Shape ``(c, 2)``, int64.
    """

    vertex_count: int
    structural: np.ndarray
    shear: np.ndarray
    bending: np.ndarray

    @property
    def count(self) -> int:
        """Total number of springs ``a + b + c``."""
        return int(len(self.structural) + len(self.shear) + len(self.bending))


def _as_index_array(a: object, name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(a if a is not None else [])
    if ndim == 2 and arr.ndim == 2 and arr.shape[1] != 2:
        raise TopologyError(f"{name} must have shape (e, 2), got {arr.shape}")
    if arr.size == 0:
        return np.zeros((0, 2) if ndim == 2 else (0,), dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise TopologyError(f"{name} must hold integer indices")
    arr = arr.astype(np.int64)
    if ndim == 2 and (arr.ndim != 2 or arr.shape[1] != 2):
        raise TopologyError(f"{name} must have shape (e, 2), got {arr.shape}")
    if ndim == 1 and arr.ndim != 1:
        raise TopologyError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _unique_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    """Sort each row, drop self pairs and duplicates; return keys ``i*n + j``."""
    if len(pairs) == 0:
        return np.zeros(0, dtype=np.int64)
    lo = np.minimum(pairs[:, 0], pairs[:, 1])
    hi = np.maximum(pairs[:, 0], pairs[:, 1])
    keep = lo != hi
    return np.unique(lo[keep] * np.int64(n) + hi[keep])


def _keys_to_pairs(keys: np.ndarray, n: int) -> np.ndarray:
    if len(keys) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    return np.stack([keys // n, keys % n], axis=1).astype(np.int64)


def _pairs_within_groups(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All index pairs ``(p, q)``, ``p < q``, of a sorted group-label array.

    Parameters
    ----------
    group : numpy.ndarray
        Shape ``(m,)``, sorted labels.

    Returns
    -------
    first, second : numpy.ndarray
        Positions into ``group`` of each pair's members.
    """
    m = len(group)
    if m == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[starts, m])
    start_of = np.repeat(starts, sizes)
    rank = np.arange(m) - start_of
    after = np.repeat(sizes, sizes) - rank - 1  # partners later in the same group
    first = np.repeat(np.arange(m), after)
    # offset of each partner: 1, 2, ..., after[p]
    run_start = np.repeat(np.cumsum(after) - after, after)
    second = first + 1 + (np.arange(len(first)) - run_start)
    return first, second


def build_springs(
    vertex_count: int,
    edges: np.ndarray,
    loop_starts: np.ndarray,
    loop_totals: np.ndarray,
    loop_vertices: np.ndarray,
    *,
    shear: bool = True,
    bending: bool = True,
) -> SpringSet:
    """Build structural, shear and bending springs from mesh topology.

    The rules are in the module docstring.

    Parameters
    ----------
    vertex_count : int
        Number of vertices ``n``.
    edges : numpy.ndarray
        Shape ``(e, 2)``, vertex indices of the mesh edges (Blender
        ``MeshEdge.vertices``).
    loop_starts : numpy.ndarray
        Shape ``(p,)``, first loop of each polygon (``MeshPolygon.loop_start``).
    loop_totals : numpy.ndarray
        Shape ``(p,)``, corner count of each polygon (``loop_total``), each >= 3.
    loop_vertices : numpy.ndarray
        Shape ``(l,)``, vertex index of each loop (``MeshLoop.vertex_index``).
    shear, bending : bool
        Whether to build those kinds at all.

    Returns
    -------
    SpringSet
        Springs by kind, each row ``(i, j)`` with ``i < j``.

    Raises
    ------
    TopologyError
        On malformed arrays or indices out of range.
    """
    n = int(vertex_count)
    if n < 0:
        raise TopologyError("vertex_count must be >= 0")
    edges = _as_index_array(edges, "edges", 2)
    starts = _as_index_array(loop_starts, "loop_starts", 1)
    totals = _as_index_array(loop_totals, "loop_totals", 1)
    loops = _as_index_array(loop_vertices, "loop_vertices", 1)
    if len(starts) != len(totals):
        raise TopologyError("loop_starts and loop_totals must have the same length")
    if len(edges) and (edges.min() < 0 or edges.max() >= n):
        raise TopologyError(f"edge vertex index out of range [0, {n})")
    if len(loops) and (loops.min() < 0 or loops.max() >= n):
        raise TopologyError(f"loop vertex index out of range [0, {n})")
    if len(totals):
        if totals.min() < 3:
            raise TopologyError("every polygon needs at least 3 corners")
        if starts.min() < 0 or (starts + totals).max() > len(loops):
            raise TopologyError("polygon loops run past the end of loop_vertices")

    # Per loop: polygon, position k in polygon, and vertices at k-1, k+1, k+2.
    p_count = len(totals)
    poly_of_loop = np.repeat(np.arange(p_count), totals)
    base = np.repeat(starts, totals)
    size = np.repeat(totals, totals)
    k = np.arange(len(poly_of_loop)) - np.repeat(np.cumsum(totals) - totals, totals)
    v0 = loops[base + k]
    v_prev = loops[base + (k - 1) % size]
    v_next = loops[base + (k + 1) % size]
    v_next2 = loops[base + (k + 2) % size]

    side_pairs = np.stack([v0, v_next], axis=1)
    struct_keys = _unique_pairs(np.concatenate([edges, side_pairs]), n)
    face_edge_keys = _unique_pairs(side_pairs, n)

    shear_keys = np.zeros(0, dtype=np.int64)
    if shear:
        big = size >= 4
        shear_keys = _unique_pairs(np.stack([v0[big], v_next2[big]], axis=1), n)
        shear_keys = shear_keys[~np.isin(shear_keys, struct_keys)]

    bend_keys = np.zeros(0, dtype=np.int64)
    if bending:
        parts = []
        # Face-edge (a, b) = (v0, v_next); p(a) = v_prev, p(b) = v_next2.
        if len(v0):
            a, b = v0, v_next
            swap = a > b
            key = np.minimum(a, b) * np.int64(n) + np.maximum(a, b)
            p_lo = np.where(swap, v_next2, v_prev)
            p_hi = np.where(swap, v_prev, v_next2)
            ok = a != b
            key, p_lo, p_hi = key[ok], p_lo[ok], p_hi[ok]
            order = np.argsort(key, kind="stable")
            key, p_lo, p_hi = key[order], p_lo[order], p_hi[order]
            same = np.flatnonzero(key[1:] == key[:-1])  # consecutive faces on one edge
            parts.append(np.stack([p_lo[same], p_lo[same + 1]], axis=1))
            parts.append(np.stack([p_hi[same], p_hi[same + 1]], axis=1))
        # Loose edges: edges in no face.
        e_keys = _unique_pairs(edges, n)
        loose = e_keys[~np.isin(e_keys, face_edge_keys)]
        if len(loose):
            lp = _keys_to_pairs(loose, n)
            src = np.concatenate([lp[:, 0], lp[:, 1]])
            dst = np.concatenate([lp[:, 1], lp[:, 0]])
            order = np.argsort(src, kind="stable")
            src, dst = src[order], dst[order]
            f, s = _pairs_within_groups(src)
            parts.append(np.stack([dst[f], dst[s]], axis=1))
        if parts:
            bend_keys = _unique_pairs(np.concatenate(parts), n)
            bend_keys = bend_keys[~np.isin(bend_keys, struct_keys)]
            bend_keys = bend_keys[~np.isin(bend_keys, shear_keys)]

    return SpringSet(
        vertex_count=n,
        structural=_keys_to_pairs(struct_keys, n),
        shear=_keys_to_pairs(shear_keys, n),
        bending=_keys_to_pairs(bend_keys, n),
    )
