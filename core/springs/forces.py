"""Spring energy, gradient, Hessian blocks, damping, drag and gravity.

For a spring between ``i`` and ``j`` with ``d = xᵢ − xⱼ``, ``ℓ = ‖d‖``,
``û = d/ℓ``, rest length ``L`` and stiffness ``k``:

* energy ``E = ½ k (ℓ − L)²``;
* gradient ``∇ᵢE = k (ℓ − L) û = −∇ⱼE``;
* Hessian block ``Hᵢᵢ = k [ûûᵀ + (1 − L/ℓ)(I − ûûᵀ)]`` (``Hⱼⱼ = Hᵢᵢ``,
  ``Hᵢⱼ = Hⱼᵢ = −Hᵢᵢ``).

The transverse eigenvalue ``k(1 − L/ℓ)`` is negative for a compressed spring;
the *projected* block clamps it at 0, which is exactly the "drop the
compressive term" rule of the seed-004 lecture notes (Choi & Ko 2002
"Stable but Responsive Cloth") and also the eigenvalue clamp of the 3×3
block, so every block is positive semi-definite.

A spring of zero current length uses its rest direction for ``û`` (so
coincident vertices are pushed apart along the rest pose); a spring whose
rest length is also zero has ``E = ½ k ℓ²`` and block ``k I``. Nothing here
divides by a zero length.

Damping along a spring (seed 003) is ``fᵢ = −k_d ((vᵢ − vⱼ)·û) û``; air drag
is ``−c m (v − wind)``; gravity is ``m g``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .linsolve import NarrowBand, dot, matvec_add, norm, product
from .model import Model

__all__ = [
    "spring_geometry", "spring_geometry_soa", "spring_energy", "spring_gradient", "spring_hessian_blocks",
    "damping_forces", "damping_blocks", "external_forces", "gravity_energy",
    "potential_energy", "kinetic_energy", "max_strain", "edge_strain", "spring_energy_and_strain",
    "dot", "norm", "row_norms",
    "HessianAssembler",
]

_TINY = 1e-12


def row_norms(a: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows of ``a`` ``(n, 3)``, ``(n,)``: half the time of
    ``numpy.linalg.norm(a, axis=1)`` (which squares into a temporary and sums it)."""
    return np.sqrt(np.einsum("ij,ij->i", a, a))


def spring_geometry(model: Model, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spring vectors, lengths and unit directions.

    Parameters
    ----------
    model : Model
    x : numpy.ndarray
        Shape ``(n, 3)``, m.

    Returns
    -------
    d : numpy.ndarray
        Shape ``(s, 3)``, ``xᵢ − xⱼ``, m.
    length : numpy.ndarray
        Shape ``(s,)``, m.
    unit : numpy.ndarray
        Shape ``(s, 3)``; the rest direction where ``length`` is ~0.
    """
    d = product(model.incidence, x)
    length = np.sqrt(np.einsum("ij,ij->i", d, d))
    if length.min(initial=np.inf) > _TINY:
        return d, length, d / length[:, None]
    ok = length > _TINY
    safe = np.where(ok, length, 1.0)
    unit = np.where(ok[:, None], d / safe[:, None], model.rest_directions)
    return d, length, unit


def _vectors_soa(model: Model, x: np.ndarray) -> np.ndarray:
    """Spring vectors ``xᵢ − xⱼ`` ``(3, s)`` of positions ``x`` ``(n, 3)``: the incidence
    product coordinate by coordinate, straight into contiguous rows."""
    xt = np.ascontiguousarray(x.T, dtype=np.float64)
    d = np.zeros((3, model.spring_count))
    for k in range(3):
        matvec_add(model.incidence, xt[k], d[k])
    return d


def spring_geometry_soa(model: Model, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`spring_geometry` in structure-of-arrays layout.

    Returns ``d`` ``(3, s)``, ``length`` ``(s,)`` and ``unit`` ``(3, s)``
    (contiguous rows: faster elementwise work than ``(s, 3)``).
    """
    d = _vectors_soa(model, x)
    length = d[0] * d[0]
    length += d[1] * d[1]
    length += d[2] * d[2]
    np.sqrt(length, out=length)
    if length.min(initial=np.inf) > _TINY:
        return d, length, d / length
    ok = length > _TINY
    unit = np.where(ok, d / np.where(ok, length, 1.0), model.rest_directions.T)
    return d, length, unit


def spring_energy(model: Model, x: np.ndarray) -> float:
    """Elastic energy ``Σ ½ k (ℓ − L)²`` in J for positions ``x`` ``(n, 3)``."""
    if model.spring_count == 0:
        return 0.0
    _, length, _ = spring_geometry(model, x)
    return 0.5 * dot(model.stiffness, (length - model.rest_lengths) ** 2)


def spring_gradient(model: Model, x: np.ndarray) -> np.ndarray:
    """Gradient ``∇E`` of the spring energy, shape ``(n, 3)``, N (= −force)."""
    if model.spring_count == 0:
        return np.zeros_like(x)
    _, length, unit = spring_geometry(model, x)
    per = (model.stiffness * (length - model.rest_lengths))[:, None] * unit
    return model.incidence_t @ per


def spring_hessian_blocks(model: Model, x: np.ndarray, *, project: bool = True) -> np.ndarray:
    """Per-spring 3×3 Hessian blocks ``Hᵢᵢ``, shape ``(s, 3, 3)``, N/m.

    Parameters
    ----------
    model : Model
    x : numpy.ndarray
        Shape ``(n, 3)``, m.
    project : bool
        Clamp the transverse eigenvalue ``k(1 − L/ℓ)`` at 0 (positive
        semi-definite blocks). ``False`` gives the exact Hessian (for lengths
        > 0).
    """
    _, length, unit = spring_geometry(model, x)
    L = model.rest_lengths
    ratio = np.divide(L, length, out=np.where(L > 0, np.inf, 0.0), where=length > _TINY)
    b = 1.0 - ratio
    if project:
        b = np.maximum(b, 0.0)
    k = model.stiffness
    uu = unit[:, :, None] * unit[:, None, :]
    blocks = (k * (1.0 - b))[:, None, None] * uu
    idx = np.arange(3)
    blocks[:, idx, idx] += (k * b)[:, None]
    return blocks


def damping_blocks(model: Model, x: np.ndarray) -> np.ndarray:
    """Per-spring damping blocks ``k_d ûûᵀ``, shape ``(s, 3, 3)``, N·s/m."""
    _, _, unit = spring_geometry(model, x)
    return model.damping[:, None, None] * (unit[:, :, None] * unit[:, None, :])


def damping_forces(model: Model, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Spring damping forces ``−k_d ((vᵢ − vⱼ)·û) û``, shape ``(n, 3)``, N."""
    if model.spring_count == 0 or not np.any(model.damping):
        return np.zeros_like(x)
    _, _, unit = spring_geometry(model, x)
    dv = model.incidence @ v
    per = (model.damping * np.einsum("ij,ij->i", dv, unit))[:, None] * unit
    return -(model.incidence_t @ per)


def external_forces(model: Model, v: np.ndarray) -> np.ndarray:
    """Gravity plus air drag, ``m g − c m (v − wind)``, shape ``(n, 3)``, N."""
    m = model.masses[:, None]
    return m * model.gravity - model.vertex_drag[:, None] * m * (v - model.wind)


def gravity_energy(model: Model, x: np.ndarray) -> float:
    """Gravitational potential ``−Σ m g·x`` in J."""
    return -float(np.einsum("i,ij,j->", model.masses, x, model.gravity))


def potential_energy(model: Model, x: np.ndarray) -> float:
    """Spring plus gravitational potential energy in J."""
    return spring_energy(model, x) + gravity_energy(model, x)


def kinetic_energy(model: Model, v: np.ndarray) -> float:
    """``Σ ½ m ‖v‖²`` in J for velocities ``(n, 3)``."""
    return 0.5 * float(np.einsum("i,ij,ij->", model.masses, v, v))


def spring_energy_and_strain(model: Model, x: np.ndarray) -> tuple[float, float]:
    """Elastic energy (J) and :func:`max_strain` from one pass over the springs.

    Parameters
    ----------
    model : Model
    x : numpy.ndarray
        Shape ``(n, 3)``, m.

    Returns
    -------
    energy : float
        ``Σ ½ k (ℓ − L)²``, J.
    strain : float
        :func:`edge_strain` of the same lengths.
    """
    if model.spring_count == 0:
        return 0.0, 0.0
    d = _vectors_soa(model, x)
    length = np.sqrt(np.einsum("ks,ks->s", d, d))
    stretch = length - model.rest_lengths
    energy = 0.5 * dot(model.stiffness, stretch * stretch)
    return energy, edge_strain(model, stretch)


def edge_strain(model: Model, stretch: np.ndarray) -> float:
    """Largest stretch ``max(ℓ/L − 1, 0)`` of the mesh's edges, from ``stretch = ℓ − L`` ``(s,)``.

    Only the edge (structural) springs count, and only stretching: cloth folds and ropes
    coil by shortening shear and bending springs and compressing edges, which is not the
    over-stretch this number warns about. Springs of zero rest length are skipped. A model
    without edge springs reports over all springs.
    """
    e = model.edge_springs if model.edge_springs >= 0 else model.spring_count
    rest = model.rest_lengths[:e]
    st = stretch[:e]
    if e == 0:
        return 0.0
    if rest.min() > _TINY:
        return max(float(np.max(st / rest)), 0.0)
    keep = rest > _TINY
    return max(float(np.max(st[keep] / rest[keep])), 0.0) if np.any(keep) else 0.0


def max_strain(model: Model, x: np.ndarray) -> float:
    """:func:`edge_strain` at positions ``x`` ``(n, 3)``, m."""
    if model.spring_count == 0:
        return 0.0
    d = _vectors_soa(model, x)
    length = np.sqrt(np.einsum("ks,ks->s", d, d))
    return edge_strain(model, length - model.rest_lengths)


class HessianAssembler:
    """Sparse ``(3f, 3f)`` matrices over the free vertices, filled vectorised.

    The sparsity pattern (per-spring blocks at ``(i,i)``, ``(j,j)``, ``(i,j)``,
    ``(j,i)`` plus the diagonal, restricted to free vertices; DOF ``3·slot + r``)
    is computed once; :meth:`assemble` only scatters values with
    ``numpy.bincount``.

    Parameters
    ----------
    model : Model
    """

    def __init__(self, model: Model) -> None:
        f = len(model.free_index)
        self.size = 3 * f
        s = model.spring_count
        slot = model.free_slot
        rows, cols, spring, rc, sign = [], [], [], [], []
        r9 = np.repeat(np.arange(3), 3)
        c9 = np.tile(np.arange(3), 3)
        for a, b, sg in ((0, 0, 1.0), (1, 1, 1.0), (0, 1, -1.0), (1, 0, -1.0)):
            sa, sb = slot[model.springs[:, a]], slot[model.springs[:, b]]
            keep = np.flatnonzero((sa >= 0) & (sb >= 0))
            rows.append((3 * sa[keep])[:, None] + r9)
            cols.append((3 * sb[keep])[:, None] + c9)
            spring.append(np.repeat(keep, 9))
            rc.append(np.tile(np.arange(9), len(keep)))
            sign.append(np.full(9 * len(keep), sg))
        diag = np.arange(self.size)
        all_rows = np.concatenate([r.reshape(-1) for r in rows] + [diag])
        all_cols = np.concatenate([c.reshape(-1) for c in cols] + [diag])
        key = all_rows.astype(np.int64) * max(self.size, 1) + all_cols
        uniq, inv = np.unique(key, return_inverse=True)
        inv = inv.reshape(-1)
        n_blk = len(all_rows) - self.size
        self._gather = (np.concatenate(spring) * 9 + np.concatenate(rc)).astype(np.int64)
        self._sign = np.concatenate(sign)
        self._inv_blk = inv[:n_blk]
        self._inv_diag = inv[n_blk:]
        self.nnz = len(uniq)
        u_rows = uniq // max(self.size, 1)
        self._indices = (uniq % max(self.size, 1)).astype(np.int32)
        self._indptr = np.r_[0, np.cumsum(np.bincount(u_rows, minlength=self.size))].astype(np.int32)
        self._s = s
        self._band: NarrowBand | None | bool = False  # not worked out yet

    def assemble(self, diag: np.ndarray, blocks: np.ndarray) -> sp.csc_matrix:
        """Return ``diag(diag) + Σ_springs blocks`` over the free DOFs.

        Parameters
        ----------
        diag : numpy.ndarray
            Shape ``(3f,)``, diagonal values (e.g. ``m/h²`` repeated 3×).
        blocks : numpy.ndarray
            Shape ``(s, 3, 3)``, symmetric per-spring blocks ``Hᵢᵢ``.

        Returns
        -------
        scipy.sparse.csc_matrix
            Symmetric, shape ``(3f, 3f)`` (CSC and CSR arrays coincide).
        """
        return self.matrix(self.values(diag, blocks))

    def values(self, diag: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        """The non-zeros ``(nnz,)`` of :meth:`assemble` (same parameters), in the order of
        :meth:`matrix` and :attr:`band`."""
        data = np.bincount(self._inv_diag, weights=diag, minlength=self.nnz)
        if self._s and len(self._gather):
            data += np.bincount(self._inv_blk, weights=self._sign * blocks.reshape(-1)[self._gather],
                                minlength=self.nnz)
        return data

    def matrix(self, data: np.ndarray) -> sp.csc_matrix:
        """The ``(3f, 3f)`` matrix with the non-zeros ``data`` ``(nnz,)`` of :meth:`values`."""
        return sp.csc_matrix((data, self._indices, self._indptr), shape=(self.size, self.size))

    @property
    def band(self) -> NarrowBand | None:
        """The pattern's :class:`~.linsolve.NarrowBand` layout (for :meth:`values`), or
        ``None`` when the pattern is too wide in its own order; worked out on first use."""
        if self._band is False:
            rows = np.repeat(np.arange(self.size), np.diff(self._indptr))
            self._band = NarrowBand.of(self.size, rows, self._indices.astype(np.int64))
        return self._band
