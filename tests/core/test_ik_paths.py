"""The plain-float single-problem paths agree with the vectorised batch paths."""

from __future__ import annotations

import numpy as np
import pytest

from core import quat
from core.ik import SOLVERS, Chain, JointLimits, SolveSettings
from core.ik.base import recover_rotations, solve_batch
from core.ik.chain import _fk


def make(seed, limits=False):
    rng = np.random.default_rng(seed)
    n = 5
    lim = None
    if limits:
        lim = JointLimits(rng.random((n, 3)) < 0.2, np.ones((n, 3), bool), -rng.uniform(.1, 1, (n, 3)), rng.uniform(.1, 1, (n, 3)))
    c = Chain.from_rest_matrices(rng.normal(size=(n, 3)), quat.to_matrix(quat.normalize(rng.normal(size=(n, 4)))),
                                 rng.uniform(.2, 1, n), lim)
    b = 4
    q = quat.from_rotvec(rng.normal(scale=.5, size=(b, n, 3)))
    rr = quat.normalize(rng.normal(size=(b, 4)))
    rp = rng.normal(size=(b, 3))
    return c, q, rr, rp, rng


def test_fk_and_recovery_paths_agree():
    c, q, rr, rp, rng = make(0)
    pb, gb = _fk(c, q, rr, rp)
    desired = rng.normal(size=(4, 6, 3))
    qb, xb = recover_rotations(c, q, desired, rr, rp)
    for k in range(4):
        p1, g1 = _fk(c, q[k:k + 1], rr[k:k + 1], rp[k:k + 1])
        np.testing.assert_allclose(p1[0], pb[k], atol=1e-12)
        np.testing.assert_allclose(g1[0], gb[k], atol=1e-12)
        q1, x1 = recover_rotations(c, q[k:k + 1], desired[k:k + 1], rr[k:k + 1], rp[k:k + 1])
        np.testing.assert_allclose(q1[0], qb[k], atol=1e-12)
        np.testing.assert_allclose(x1[0], xb[k], atol=1e-12)


@pytest.mark.parametrize("name", ["CCD", "FABRIK", "DLS"])
@pytest.mark.parametrize("limits", [False, True])
def test_solver_batch_equals_one_at_a_time(name, limits):
    c, q, rr, rp, rng = make(1, limits)
    targets = rng.normal(size=(4, 3))
    s = SolveSettings(40, 1e-6)
    kern = SOLVERS[name].kernel
    qb, ib, eb = solve_batch(kern, c, targets, q, s, None, rr, rp)
    for k in range(4):
        sl = slice(k, k + 1)
        q1, i1, e1 = solve_batch(kern, c, targets[sl], q[sl], s, None, rr[sl], rp[sl])
        assert i1[0] == ib[k]
        np.testing.assert_allclose(e1[0], eb[k], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(quat.angle_between(q1[0], qb[k]), 0, atol=1e-6)
