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

Material scaling (``stiffness_mode='MATERIAL'``; docs/MATERIAL.md)
    A cloth is a membrane: its stretch stiffness is a modulus ``E`` in N/m (the
    force per metre of width that stretches it by a strain of 1; for a sheet of
    thickness ``t`` and Young's modulus ``Y``, ``E = Y t``), its mass a density
    ``ρ`` in kg/m². Per-spring N/m and per-vertex kg depend on how finely the
    surface is cut; ``E`` and ``ρ`` do not. Each vertex owns the rest area
    ``aᵢ`` of a third of every triangle around it (seed 004's lumped mass:
    ``mᵢ = ρ aᵢ``). A spring of one kind at vertex ``i`` gets the share
    ``2 aᵢ / degᵢ`` of that area (``degᵢ`` = springs of that kind at ``i``), so
    ``Aₛ = 2 aᵢ/degᵢ + 2 aⱼ/degⱼ`` and

    ``kₛ = E Aₛ / Lₛ²``.

    Derivation: a spring of rest length ``L`` strained by ``ε`` stores
    ``½ kₛ (εL)² = ½ E ε² Aₛ`` — the membrane energy density ``½ E ε²`` over the
    area the spring stands for. Check on a grid of ``a × b`` rectangles
    (``aᵢ = ab``, 4 edges per vertex, so ``Aₛ = ab``) under uniform tension
    ``T`` (N/m) along the ``a`` edges: each edge carries ``T b`` (its strip of
    width ``b``) and stretches by ``T b / kₛ = T b a² /(E a b) = (T/E) a``, a
    strain ``T/E`` whatever ``a`` and ``b`` are: the same sheet strains the
    same at 20², 40² or 80² and with any aspect ratio. The factor 2 is the
    dimension: on the square grid half of the edges run along any one
    direction. Shear (face diagonals) and bending (skip-one) springs use the
    same rule with their own ``deg``, so on a square grid of spacing ``a`` a
    diagonal gets ``kₛ = G a² /(2a²) = G/2`` and a skip-one spring
    ``kₛ = B a²/(4a²) = B/4``, again independent of ``a``: their in-plane
    response (and so the shear and compression resistance that keeps a
    hanging sheet from wrinkling) is resolution-independent. (A skip-one
    spring resists a fold only through the shortening ``≈ a θ²/4`` of its
    ends' distance, quartic in the fold angle; no per-spring scale makes that
    match a plate's ``½ D κ²`` exactly, which is why ``bending_stiffness`` is
    a soft "fold resistance" rather than a plate modulus.)

    Vertices in no face (ropes, hair: loose edges) have no area; there a
    spring uses the length measure ``ℓᵢ`` (half of each structural edge at
    ``i``) times 1 m, without the factor 2, so along a rope of segments ``L``
    ``kₛ = E/L``: ``E`` is then the rope's axial stiffness in N (force per unit
    strain) and the density kg per metre.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TopologyError

__all__ = ["SpringSet", "build_springs", "vertex_areas", "vertex_measures", "material_scale"]


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


def vertex_areas(positions: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Area lumped at each vertex: a third of every triangle's area to each corner (seed 004).

    Parameters
    ----------
    positions : numpy.ndarray
        Shape ``(n, 3)``, m.
    triangles : numpy.ndarray
        Shape ``(t, 3)``, vertex indices.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``, m²; 0 for a vertex in no triangle.

    Raises
    ------
    TopologyError
        A triangle index outside ``[0, n)``.
    """
    x = np.asarray(positions, dtype=np.float64)
    n = len(x)
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    if len(tri) and (tri.min() < 0 or tri.max() >= n):
        raise TopologyError(f"triangle vertex index out of range [0, {n})")
    if not len(tri):
        return np.zeros(n)
    p = x[tri]
    ta = 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)
    return np.bincount(tri.reshape(-1), weights=np.repeat(ta / 3.0, 3), minlength=n)


def vertex_measures(positions: np.ndarray, triangles: np.ndarray,
                    structural: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rest measure owned by each vertex and its dimension (module docstring).

    Parameters
    ----------
    positions : numpy.ndarray
        Shape ``(n, 3)``, m (rest pose).
    triangles : numpy.ndarray
        Shape ``(t, 3)``, vertex indices (fan triangles of the polygons).
    structural : numpy.ndarray
        Shape ``(e, 2)``, structural springs (for vertices in no face).

    Returns
    -------
    measure : numpy.ndarray
        Shape ``(n,)``: m² (a third of each adjacent triangle's area) for vertices
        in a face; otherwise m·(1 m), half the length of each structural spring
        at the vertex; 0 for an isolated vertex.
    dimension : numpy.ndarray
        Shape ``(n,)``: 2 where the measure is an area, 1 where it is a length.
    """
    x = np.asarray(positions, dtype=np.float64)
    n = len(x)
    area = vertex_areas(x, triangles)
    st = np.asarray(structural, dtype=np.int64).reshape(-1, 2)
    length = np.zeros(n)
    if len(st):
        el = np.linalg.norm(x[st[:, 0]] - x[st[:, 1]], axis=1)
        length = np.bincount(st.reshape(-1), weights=np.repeat(0.5 * el, 2), minlength=n)
    has_area = area > 0
    return np.where(has_area, area, length), np.where(has_area, 2.0, 1.0)


def material_scale(springs: np.ndarray, rest_lengths: np.ndarray, measure: np.ndarray,
                   dimension: np.ndarray) -> np.ndarray:
    """Per-spring factor ``Aₛ / Lₛ²`` that turns a material modulus into N/m.

    Parameters
    ----------
    springs : numpy.ndarray
        Shape ``(s, 2)``, springs of ONE kind (the share is split among the
        springs of that kind at each vertex).
    rest_lengths : numpy.ndarray
        Shape ``(s,)``, m.
    measure, dimension : numpy.ndarray
        From :func:`vertex_measures`, shape ``(n,)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(s,)``, dimensionless (``kₛ = modulus × factor``); 0 for springs
        of zero rest length.
    """
    s = np.asarray(springs, dtype=np.int64).reshape(-1, 2)
    if len(s) == 0:
        return np.zeros(0)
    n = len(measure)
    deg = np.bincount(s.reshape(-1), minlength=n).astype(np.float64)
    share = dimension * measure / np.maximum(deg, 1.0)
    a_s = share[s[:, 0]] + share[s[:, 1]]
    L = np.asarray(rest_lengths, dtype=np.float64)
    ok = L > 1e-12
    return np.where(ok, a_s / np.where(ok, L * L, 1.0), 0.0)
