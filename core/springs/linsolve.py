"""Sparse symmetric positive-definite solves shared by the implicit integrators."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

__all__ = ["factor_spd"]


def factor_spd(matrix: sp.spmatrix) -> Callable[[np.ndarray], np.ndarray]:
    """Factor a sparse SPD matrix once; return ``solve(b)``.

    SuperLU with a symmetric minimum-degree ordering on ``A + Aᵀ`` and no
    pivoting off the diagonal (``SymmetricMode``), which for an SPD matrix is
    a stable sparse LDLᵀ-like factorisation.

    Parameters
    ----------
    matrix : scipy.sparse matrix
        Shape ``(N, N)``, symmetric positive definite.

    Returns
    -------
    callable
        ``solve(b)`` for ``b`` of shape ``(N,)`` or ``(N, k)``.
    """
    n = matrix.shape[0]
    if n == 0:
        return lambda b: np.zeros_like(b)
    lu = splu(sp.csc_matrix(matrix), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
              options={"SymmetricMode": True})
    return lu.solve
