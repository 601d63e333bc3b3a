"""Sparse symmetric positive-definite solves shared by the implicit integrators.

One prefactorisation and one preconditioned conjugate-gradient loop serve
IMPLICIT, NEWTON and FAST:

* :func:`factor_spd` factors a sparse SPD matrix once;
* :class:`SpringLaplacian` is the matrix of Liu et al. 2013 "Fast
  Simulation of Mass-Spring Systems", ``diag(a) + A K Aᵀ`` over the free
  vertices (``A`` the spring incidence, ``K`` per-spring weights), factored
  once per (model, weights), with the incidence blocks the matrix-free
  products need. FAST uses it as its global-step matrix; IMPLICIT and NEWTON
  as the preconditioner of :func:`pcg` (with weights ``k h² + k_d h`` it
  bounds the projected spring Hessian from above, so the preconditioned
  spectrum lies in ``(0, 1]``);
* :func:`pcg` is the preconditioned conjugate-gradient loop (Hestenes &
  Stiefel 1952; Shewchuk 1994 "An Introduction to the Conjugate Gradient
  Method Without the Agonizing Pain", B2) on ``(f, 3)`` blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack
from scipy.sparse.csgraph import reverse_cuthill_mckee
from scipy.sparse.linalg import splu

from .model import Model

try:  # scipy's own CSR product kernels (scipy.sparse._sparsetools, in every scipy since 1.8)
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # pragma: no cover - a scipy without them: the public product
    _csr_matvec = _csr_matvecs = None

__all__ = ["dot", "dot_for", "norm", "factor_spd", "factor_spd_entries", "solve_spd_entries",
           "solve_dense", "matvec_add", "product", "NarrowBand", "SpringLaplacian", "FactorCache", "PCGResult",
           "pcg"]


#: Longest vector :func:`dot` gives BLAS: OpenBLAS's ``ddot`` runs in one thread up to
#: 10,000 entries (beyond, its threads wait on each other when the cores are busy).
_BLAS_DOT = 8192


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """``Σ aᵢ bᵢ`` over all entries of two same-shape arrays.

    ``numpy.dot`` and ``numpy.linalg.norm`` call multithreaded BLAS for long
    vectors, which costs milliseconds per call on a busy two-core machine;
    ``einsum`` sums in a single thread. Up to :data:`_BLAS_DOT` entries BLAS's
    single-threaded ``ddot`` is used: 1 µs against ``einsum``'s 3 µs at 1,890 entries
    (FAST's residuals and energies on the bench's flag, ~100 a frame).
    """
    if a.shape == b.shape and ((a.flags.c_contiguous and b.flags.c_contiguous)
                               or (a.flags.f_contiguous and b.flags.f_contiguous)):
        av, bv = a.ravel(order="K"), b.ravel(order="K")  # no copies
    else:
        av, bv = a.reshape(-1), b.reshape(-1)
    if av.size <= _BLAS_DOT:
        return float(np.dot(av, bv))
    return float(np.einsum("i,i->", av, bv))


def dot_for(n: int) -> Callable[[np.ndarray, np.ndarray], float]:
    """:func:`dot` for contiguous vectors ``(n,)`` without its checks: BLAS's ``ddot``
    (``numpy.dot``) up to :data:`_BLAS_DOT` entries, ``einsum`` beyond. For a loop that
    knows its vectors (FAST's local step: five energy products a call, where
    :func:`dot`'s checks cost as much as the products)."""
    if n <= _BLAS_DOT:
        return np.dot
    return lambda a, b: np.einsum("i,i->", a, b)


def norm(a: np.ndarray) -> float:
    """Euclidean norm of all entries of ``a`` (see :func:`dot`)."""
    flat = a.ravel(order="K")  # no copy for C- or Fortran-ordered arrays
    if flat.size <= _BLAS_DOT:
        return math.sqrt(np.dot(flat, flat))
    return math.sqrt(np.einsum("i,i->", flat, flat))


def solve_dense(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a⁻¹ b`` for a small dense ``a`` ``(N, N)`` and ``b`` ``(N,)``: LAPACK's ``dgesv``
    (LU with partial pivoting, the routine ``numpy.linalg.solve`` runs) called directly.

    On the strain limit's dense systems (up to 64 × 64) ``numpy.linalg.solve``'s own
    overhead (its generalised-ufunc wrapper, error-state handling) is most of its time: 8
    against 34 µs per call at 5 × 5.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``a`` is singular (as ``numpy.linalg.solve``).
    """
    *_, x, info = _dgesv(a, b)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular matrix (dgesv info {info})")
    return x


_dgesv = lapack.get_lapack_funcs("gesv", dtype=np.float64)


def matvec_add(a: sp.csr_matrix, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out += a @ x`` in place and return ``out``: a CSR ``a`` ``(M, N)`` of float64,
    C-contiguous float64 ``x`` ``(N,)`` or ``(N, k)`` and ``out`` ``(M,)`` or ``(M, k)``.

    scipy's CSR kernels called directly (the ones ``a @ x`` ends in): ``a @ x`` also
    checks its operands, dispatches and allocates a zeroed result (20–30 µs at the
    bench's flag's sizes, more than the product), and FAST's local step (two products, of
    10,944 and 1,890 rows on the bench's 651-vertex flag) runs 26 times a frame. Starting
    ``out`` from what is to be added to the product (the pinned springs' part of ``Aᵀ x``,
    zeros) saves the separate add as well. Falls back to ``a @ x`` where the kernels are
    missing or the operands are not as required.
    """
    if (_csr_matvec is None or a.format != "csr" or a.dtype != np.float64
            or x.dtype != np.float64 or out.dtype != np.float64 or not x.flags.c_contiguous
            or not out.flags.c_contiguous or x.ndim != out.ndim or x.ndim > 2
            or out.shape != (a.shape[0], *x.shape[1:]) or x.shape[0] != a.shape[1]):
        out += a @ x
        return out
    if x.ndim == 1:
        _csr_matvec(a.shape[0], a.shape[1], a.indptr, a.indices, a.data, x, out)
    else:
        _csr_matvecs(a.shape[0], a.shape[1], x.shape[1], a.indptr, a.indices, a.data,
                     x.reshape(-1), out.reshape(-1))
    return out


def product(a: sp.csr_matrix, x: np.ndarray) -> np.ndarray:
    """``a @ x`` for a CSR ``a`` ``(M, N)`` and ``x`` ``(N,)`` or ``(N, k)`` (any layout):
    a new C-ordered array, by :func:`matvec_add`."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    return matvec_add(a, x, np.zeros((a.shape[0], *x.shape[1:])))


def factor_spd(matrix: sp.spmatrix, *, many_solves: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    """Factor a sparse SPD matrix once; return ``solve(b)``.

    A matrix whose band in its own order is at most :data:`_NARROW` wide is factored by
    LAPACK's banded Cholesky as it is (:func:`_narrow_cholesky`: no ordering, none of
    SuperLU's fixed cost). Otherwise SuperLU with a symmetric minimum-degree ordering on
    ``A + Aᵀ`` and no pivoting off the diagonal (``SymmetricMode``), which for an SPD
    matrix is a stable sparse LDLᵀ-like factorisation.

    With ``many_solves`` (a factor kept for many solves, e.g. FAST's global step) the
    matrix is also reordered by reverse Cuthill–McKee (Cuthill & McKee 1969; George 1971)
    and, when its band holds no more entries than SuperLU's factors and is at most
    :data:`_MAX_BAND` wide (small, grid-like meshes: the bench's 31 × 21 flag has a band
    of 51), solved through a banded Cholesky factor instead (:func:`_banded_cholesky`):
    the same solution to round-off, with a solve that streams the band (0.7–0.9×
    SuperLU's time per solve of three right-hand sides there; 12 % fewer instructions per
    frame of the flag in wind). Larger meshes keep SuperLU (minimum degree fills far less
    than the band; at 128² the band took 1.7× SuperLU's time).

    Parameters
    ----------
    matrix : scipy.sparse matrix
        Shape ``(N, N)``, symmetric positive definite.
    many_solves : bool
        Consider the banded Cholesky factor (above).

    Returns
    -------
    callable
        ``solve(b)`` for ``b`` of shape ``(N,)`` or ``(N, k)``.
    """
    n = matrix.shape[0]
    if n == 0:
        return lambda b: np.zeros_like(b)
    matrix = sp.csc_matrix(matrix)
    narrow = _narrow_cholesky(matrix)
    if narrow is not None:
        return narrow
    return _superlu(matrix, many_solves)


def _superlu(matrix: sp.csc_matrix, many_solves: bool) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`factor_spd` past its narrow band: SuperLU, or a banded factor in reverse
    Cuthill–McKee order for ``many_solves``."""
    lu = splu(matrix, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
              options={"SymmetricMode": True})
    if many_solves:
        banded = _banded_cholesky(sp.csr_matrix(matrix), lu.L.nnz + lu.U.nnz)
        if banded is not None:
            return banded
    return lu.solve


#: Widest band (in the matrix's own order) :func:`_narrow_cholesky` factors: LAPACK's
#: ``dpbtrf`` is unblocked up to here (measured: with both cores busy, a 600 × 600 band of
#: 16 took 0.2 ms, one of 17 up to 137 ms, its blocked BLAS-3 calls waiting on OpenBLAS's
#: threads).
_NARROW = 16


def _narrow_cholesky(matrix: sp.csc_matrix) -> Callable[[np.ndarray], np.ndarray] | None:
    """``solve(b)`` by LAPACK's banded Cholesky (``dpbtrf``, ``dpbtrs``) of the SPD
    ``matrix`` ``(N, N)`` in its own order if its band is at most :data:`_NARROW` wide, else
    ``None`` (also when it is not positive definite: SuperLU then decides).

    The strain limit's systems are often this narrow as they come (the springs of a taut
    flag are chains along its rows: tridiagonal in spring order), and SuperLU's fixed cost
    (ordering, supernodes: 0.2–0.3 ms at 600 unknowns whatever the fill) was most of their
    solve; the band needs no ordering, and at this width it costs 0.03–0.2 ms.
    """
    n = matrix.shape[0]
    cols = np.repeat(np.arange(n), np.diff(matrix.indptr))
    return _narrow_entries(n, matrix.indices, cols, matrix.data)


def _narrow_entries(n: int, rows: np.ndarray, cols: np.ndarray,
                    vals: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
    """:func:`_narrow_cholesky` of the ``(n, n)`` matrix with entries ``vals`` at
    ``(rows, cols)`` (duplicates summed)."""
    band = NarrowBand.of(n, rows, cols)
    return None if band is None else band.factor(vals)


@dataclass(frozen=True)
class NarrowBand:
    """Where the entries of a fixed sparsity pattern go in LAPACK's upper band storage,
    for a pattern at most :data:`_NARROW` wide in its own order (:meth:`of`); :meth:`factor`
    then factors any values on it (``dpbtrf``) without a scipy matrix.

    A model's implicit step assembles the same pattern every step (IMPLICIT's direct
    solve): the layout is worked out once per model, and each step only scatters its
    values (spring bones' chains, 15–100 unknowns: the ``csc_matrix`` round trip cost more
    than LAPACK's factor and solve).

    Attributes
    ----------
    n : int
        The matrix is ``(n, n)``.
    kd : int
        Superdiagonals in the band.
    upper : numpy.ndarray
        Shape ``(u,)``, int: the entries (positions in the ``vals`` given to :meth:`factor`)
        in the upper triangle, ``row ≤ col``.
    slots : numpy.ndarray
        Shape ``(u,)``, int: their flat positions in the band, entry ``(i, j)`` at
        ``[kd + i − j, j]`` of the Fortran-ordered ``(kd + 1, n)`` band.
    """

    n: int
    kd: int
    upper: np.ndarray
    slots: np.ndarray

    @classmethod
    def of(cls, n: int, rows: np.ndarray, cols: np.ndarray) -> NarrowBand | None:
        """The layout of entries at ``(rows, cols)`` (both ``(m,)``, both triangles,
        duplicates allowed) of an ``(n, n)`` matrix; ``None`` if wider than :data:`_NARROW`."""
        offset = np.asarray(cols) - np.asarray(rows)  # column − row: ≥ 0 in the upper triangle
        if len(offset) and max(int(offset.max()), -int(offset.min())) > _NARROW:
            return None
        kd = max(int(offset.max(initial=0)), 0)
        upper = np.flatnonzero(offset >= 0)
        return cls(int(n), kd, upper, kd - offset[upper] + (kd + 1) * np.asarray(cols)[upper])

    def factor(self, vals: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        """``solve(b)`` for the matrix with entries ``vals`` ``(m,)`` on this layout
        (duplicates summed), by LAPACK's banded Cholesky; ``None`` if it is not positive
        definite."""
        kd, n = self.kd, self.n
        band = np.bincount(self.slots, vals[self.upper], minlength=(kd + 1) * n).reshape(n, kd + 1).T
        factor, info = lapack.dpbtrf(band, lower=0)
        if info != 0:
            return None

        def solve(b: np.ndarray) -> np.ndarray:
            x, info = lapack.dpbtrs(factor, b, lower=0)
            if info != 0:
                raise np.linalg.LinAlgError(f"dpbtrs failed ({info})")
            return x

        return solve


def solve_spd_entries(n: int, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray,
                      b: np.ndarray, *, dense_max: int) -> np.ndarray:
    """``A⁻¹ b`` for the ``(n, n)`` SPD matrix with entries ``vals`` at ``(rows, cols)``
    (both triangles; duplicates summed), solved once: densely by :func:`solve_dense` up to
    ``dense_max`` unknowns (one small LU costs less than any sparse set-up), else by
    :func:`factor_spd_entries`. The strain limit's systems (:mod:`.strainlimit`)."""
    if n == 0:
        return np.zeros(0)
    if n <= dense_max:
        return solve_dense(np.bincount(cols * n + rows, vals, minlength=n * n).reshape(n, n), b)
    return factor_spd_entries(n, rows, cols, vals)(b)


def factor_spd_entries(n: int, rows: np.ndarray, cols: np.ndarray,
                       vals: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`factor_spd` of the ``(n, n)`` SPD matrix with entries ``vals`` at
    ``(rows, cols)`` (both triangles; duplicates summed).

    For systems assembled as entries and solved once (the strain limit's active-set
    rounds, several per step): a narrow band goes to LAPACK without building a scipy
    matrix first, whose construction and checks cost more than the factorisation there
    (a tridiagonal 600 × 600: 90 µs through ``csc_matrix`` and :func:`factor_spd`,
    of which LAPACK's factor and solve 27 µs).
    """
    if n == 0:
        return lambda b: np.zeros_like(b)
    narrow = _narrow_entries(n, rows, cols, vals)
    if narrow is not None:
        return narrow
    # compressed columns directly (duplicates summed): cheaper than scipy's COO route
    key = cols * n + rows
    order = np.argsort(key, kind="stable")
    key = key[order]
    first_of = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    key = key[first_of]
    indptr = np.concatenate(([0], np.cumsum(np.bincount(key // n, minlength=n))))
    return _superlu(sp.csc_matrix((np.add.reduceat(vals[order], first_of), key % n, indptr),
                                  shape=(n, n)), False)


#: Widest band :func:`_banded_cholesky` factors: beyond it the band's fill is no longer
#: worth streaming (a 41² sheet's band of 81 holds 1.3× SuperLU's entries).
_MAX_BAND = 64


def _banded_cholesky(matrix: sp.csr_matrix, budget: int) -> Callable[[np.ndarray], np.ndarray] | None:
    """``solve(b)`` by a banded Cholesky factor of the SPD ``matrix`` ``(N, N)`` in
    reverse Cuthill–McKee order, or ``None`` if the band would hold more than ``budget``
    entries or be wider than :data:`_MAX_BAND` (or the matrix is not positive definite).

    The factor is SuperLU's in the natural order of the reordered matrix without
    pivoting (``A = L D Lᵀ`` with ``U = D Lᵀ``; the fill stays inside the band), rescaled
    to ``R = D^{-1/2} U`` in LAPACK's upper band storage; solves by ``dpbtrs`` (two
    banded triangular solves). Not LAPACK's ``dpbtrf``: beyond a band of 16 it is
    blocked and its BLAS-3 calls run on OpenBLAS's threads, which on a machine whose
    cores are busy with other work wait for each other at every block: a 441-vertex
    sheet's factor took 1–3.4 s instead of 1 ms (two other processes on the two cores;
    the time is spent spinning, so it shows as this process's CPU time too).
    """
    n = matrix.shape[0]
    perm = reverse_cuthill_mckee(matrix, symmetric_mode=True).astype(np.intp)
    reordered = matrix[perm][:, perm].tocsc()
    pattern = reordered.tocoo()
    band = int((pattern.col - pattern.row).max(initial=0))
    if n * (band + 1) > budget or band > _MAX_BAND:
        return None
    lu = splu(reordered, permc_spec="NATURAL", diag_pivot_thresh=0.0,
              options={"SymmetricMode": True})
    ident = np.arange(n)
    diag = lu.U.diagonal()
    if not (np.array_equal(lu.perm_r, ident) and np.array_equal(lu.perm_c, ident)
            and np.all(diag > 0.0)):
        return None  # pivoted, or not positive definite
    upper = lu.U.tocoo()
    if int((upper.col - upper.row).max(initial=0)) > band:
        return None  # filled outside the band (cannot happen without pivoting)
    factor = np.zeros((band + 1, n), order="F")  # LAPACK's upper band storage of R
    factor[band + upper.row - upper.col, upper.col] = upper.data / np.sqrt(diag[upper.row])

    return _BandedSolve(factor, perm)


class _BandedSolve:
    """``solve(b)`` of :func:`_banded_cholesky`: LAPACK's ``dpbtrs`` on the band ``factor``
    in the order ``perm``. Calling it permutes ``b`` and the solution; :meth:`ordered` solves
    a ``b`` already in that order (a caller that keeps its vectors in it, FAST's global step,
    saves the two permuted copies per solve)."""

    def __init__(self, factor: np.ndarray, perm: np.ndarray) -> None:
        self.factor = factor
        #: The order of the factor: row ``i`` of an ordered vector is row ``perm[i]``.
        self.perm = perm
        self.inverse = np.empty_like(perm)
        self.inverse[perm] = np.arange(len(perm))

    def ordered(self, b: np.ndarray) -> np.ndarray:
        """``A⁻¹ b`` for ``b`` ``(N,)`` or ``(N, k)`` and the result in the order :attr:`perm`."""
        x, info = lapack.dpbtrs(self.factor, b, lower=0)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpbtrs failed ({info})")
        return x

    def __call__(self, b: np.ndarray) -> np.ndarray:
        # permuted copies by ``take`` along the rows of the transposes: Fortran-ordered
        # columns, as dpbtrs wants them, with no further copy (``b[perm]`` is C-ordered)
        perm, inverse = self.perm, self.inverse
        if b.ndim == 1:
            x, info = lapack.dpbtrs(self.factor, b.take(perm), lower=0, overwrite_b=1)
            out = x.take(inverse)
        else:
            x, info = lapack.dpbtrs(self.factor, b.T.take(perm, axis=1).T, lower=0, overwrite_b=1)
            out = x.T.take(inverse, axis=1).T
        if info != 0:
            raise np.linalg.LinAlgError(f"dpbtrs failed ({info})")
        return out


class SpringLaplacian:
    """``S = diag(a_free) + (A K Aᵀ)_free`` factored, with its incidence blocks.

    Parameters
    ----------
    model : Model
    vertex_diag : numpy.ndarray
        Shape ``(n,)``, the diagonal ``a`` per vertex (e.g. ``m/h² + c m/h``
        plus soft-pin stiffness).
    spring_weights : numpy.ndarray
        Shape ``(s,)``, ``K`` per spring (e.g. ``k + k_d/h``).

    Attributes
    ----------
    matrix : scipy.sparse.csc_matrix
        ``(f, f)`` over the free vertices; ``matrix_csr`` the same in CSR.
    solve : callable
        ``solve(b)`` for ``b`` ``(f,)`` or ``(f, 3)``.
    coupling : scipy.sparse.csr_matrix
        ``(f, p)``: free-pinned block of ``A K Aᵀ``.
    inc_free, inc_pinned : scipy.sparse.csr_matrix
        ``(s, f)``, ``(s, p)``: columns of the incidence matrix.
    inc_t_free : scipy.sparse.csr_matrix
        ``(f, s)``.
    pin_springs : numpy.ndarray
        Indices of the springs that touch a pinned vertex; ``inc_pin_springs``
        their rows of ``inc_pinned``.
    """

    def __init__(self, model: Model, vertex_diag: np.ndarray, spring_weights: np.ndarray) -> None:
        free, pinned = model.free_index, model.pinned_index
        inc, inc_t = model.incidence, model.incidence_t
        lap = (inc_t @ sp.diags(np.asarray(spring_weights, dtype=np.float64)) @ inc).tocsr()
        lap_free = lap[free]
        self.matrix = (sp.diags(np.asarray(vertex_diag, dtype=np.float64)[free])
                       + lap_free[:, free]).tocsc()
        self.matrix_csr = self.matrix.tocsr()
        self.solve = factor_spd(self.matrix, many_solves=True)
        self.coupling = lap_free[:, pinned].tocsr()
        inc_csc = inc.tocsc()
        self.inc_free = inc_csc[:, free].tocsr()
        self.inc_pinned = inc_csc[:, pinned].tocsr()
        self.pin_springs = np.flatnonzero(np.diff(self.inc_pinned.indptr))
        self.inc_pin_springs = self.inc_pinned[self.pin_springs]
        self.inc_t_free = inc_t.tocsr()[free]


_T = TypeVar("_T")


class FactorCache(Generic[_T]):
    """The last ``size`` factorisations by key (e.g. ``(model.uid, h)``), least recently
    used dropped first.

    A step split in halves (:meth:`.simulate.Simulator._span`) solves with ``h/2`` (and
    maybe ``h/4``) and then with ``h`` again: with a single entry every change of ``h``
    refactored, and lost what was measured on the factorisation (FAST's Chebyshev ``ρ``).
    """

    def __init__(self, size: int = 4) -> None:
        self.size = max(int(size), 1)
        self._items: dict[Hashable, _T] = {}

    def get(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """The entry for ``key``, made by ``build()`` if it is not cached."""
        item = self._items.pop(key, None)
        if item is None:
            item = build()
            while len(self._items) >= self.size:
                del self._items[next(iter(self._items))]  # the least recently used
        self._items[key] = item  # (re)inserted last: the most recently used
        return item

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class PCGResult:
    """Outcome of :func:`pcg`.

    Attributes
    ----------
    x : numpy.ndarray
        The solution estimate, same shape as ``b``.
    iterations : int
        CG iterations run.
    converged : bool
        ``‖b − A x‖ ≤ rtol ‖b‖`` reached.
    residual : float
        ``‖b − A x‖`` (recurrence value).
    """

    x: np.ndarray
    iterations: int
    converged: bool
    residual: float


def pcg(apply: Callable[[np.ndarray, np.ndarray], np.ndarray], b: np.ndarray,
        precondition: Callable[[np.ndarray], np.ndarray], *, x0: np.ndarray | None = None,
        rtol: float = 1e-10, max_iterations: int = 200) -> PCGResult:
    """Preconditioned conjugate gradients for an SPD operator.

    Parameters
    ----------
    apply : callable
        ``apply(u, out)`` writes ``A u`` into ``out`` and returns it; ``u``,
        ``out`` have the shape of ``b``.
    b : numpy.ndarray
        Right-hand side, e.g. shape ``(f, 3)`` (Fortran order preferred: the
        sparse factor solves columns).
    precondition : callable
        ``z = P⁻¹ r`` for an SPD ``P``.
    x0 : numpy.ndarray, optional
        Starting guess; ``None`` starts from 0 (then every iterate is a
        descent direction of ``½ xᵀAx − bᵀx``, which truncated Newton relies
        on). A guess with a larger residual than 0 is replaced by 0.
    rtol : float
        Relative residual ``‖b − A x‖ ≤ rtol ‖b‖`` at which to stop.
    max_iterations : int
        Iteration cap; the result then says ``converged=False``.

    Returns
    -------
    PCGResult
    """
    b_norm = float(np.sqrt(dot(b, b)))
    tol = rtol * b_norm
    ap = np.empty_like(b)
    if x0 is None:
        x = np.zeros_like(b)
        r = b.copy(order="K")
    else:
        x = np.array(x0, dtype=np.float64, order="K", copy=True)
        r = b - apply(x, ap)
        if dot(r, r) > b_norm * b_norm:
            x[...] = 0.0
            r = b.copy(order="K")
    r_norm = float(np.sqrt(dot(r, r)))
    if r_norm <= tol:
        return PCGResult(x, 0, True, r_norm)
    z = precondition(r)
    p = z.copy()
    rz = dot(r, z)
    tmp = np.empty_like(b)
    its = 0
    while its < max_iterations:
        its += 1
        apply(p, ap)
        pap = dot(p, ap)
        if not pap > 0.0:
            break  # breakdown (p = 0 to round-off): x is as good as it gets
        alpha = rz / pap
        x += np.multiply(p, alpha, out=tmp)
        r -= np.multiply(ap, alpha, out=tmp)
        r_norm = float(np.sqrt(dot(r, r)))
        if r_norm <= tol:
            return PCGResult(x, its, True, r_norm)
        if its >= max_iterations:
            break  # no next direction needed (truncated Newton runs one iteration)
        z = precondition(r)
        rz_new = dot(r, z)
        p *= rz_new / rz
        p += z
        rz = rz_new
    return PCGResult(x, its, r_norm <= tol, r_norm)
