"""The shared contact geometry kernels (core/springs/proximity.py).

Collider contact and self-collision each had their own variant of these kernels; the
tests below check properties on the inputs where those variants disagreed.
"""

from __future__ import annotations

import numpy as np

from core.springs.proximity import (
    BoxTree,
    barycentric,
    box_pairs,
    closest_points_on_triangles,
    coplanarity_times,
    first_coplanar_time,
)


def _triple(p: np.ndarray) -> np.ndarray:
    return np.einsum("kj,kj->k", np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), p[:, 3] - p[:, 0])


def test_contact_at_the_end_of_the_step_is_found_despite_rounding() -> None:
    # A vertex that ends the step exactly on a triangle's plane (an affine combination of
    # the end corners): its triple product at t = 1 is zero up to rounding, of either
    # sign. The old self-collision variant needed an exact sign change and missed some of
    # these; every one is a contact and must be reported at t = 1.
    rng = np.random.default_rng(7)
    k = 2000
    tri0 = rng.normal(size=(k, 3, 3))
    tri1 = tri0 + 0.3 * rng.normal(size=(k, 3, 3))
    w = rng.dirichlet(np.ones(3), size=k)
    end = np.einsum("ki,kij->kj", w, tri1)
    start = end + rng.normal(size=(k, 3))
    p0 = np.concatenate([tri0, start[:, None]], axis=1)
    p1 = np.concatenate([tri1, end[:, None]], axis=1)
    t = coplanarity_times(p0, p1)
    last = np.nanmax(t, axis=1)
    assert np.all(np.isfinite(last))
    assert np.all(np.abs(last - 1.0) < 1e-9)


def test_coplanarity_roots_are_roots_and_none_is_missed() -> None:
    rng = np.random.default_rng(11)
    k = 3000
    p0 = rng.normal(size=(k, 4, 3))
    p1 = p0 + 1.5 * rng.normal(size=(k, 4, 3))
    t = coplanarity_times(p0, p1)
    ts = np.linspace(0.0, 1.0, 2001)
    f = np.stack([_triple(p0 + s * (p1 - p0)) for s in ts], axis=1)
    changes = np.count_nonzero(np.sign(f[:, 1:]) * np.sign(f[:, :-1]) < 0, axis=1)
    found = np.count_nonzero(np.isfinite(t), axis=1)
    assert np.all(found >= changes)  # every sign change of the volume has its root
    rows, cols = np.nonzero(np.isfinite(t))
    tt = t[rows, cols]
    pt = p0[rows] + tt[:, None, None] * (p1[rows] - p0[rows])
    size = np.max(np.abs(f[rows]), axis=1)
    assert np.all(np.abs(_triple(pt)) <= 1e-9 * size + 1e-12)
    assert np.all((tt >= 0) & (tt <= 1))
    fin = np.isfinite(t)
    running = np.maximum.accumulate(np.where(fin, t, -np.inf), axis=1)
    assert np.all(t[fin] == running[fin])  # in increasing order
    first = first_coplanar_time(p0, p1)
    has = found > 0
    assert np.allclose(first[has], np.nanmin(t[has], axis=1))
    assert np.all(np.isnan(first[~has]))


def test_barycentric_rebuilds_the_projected_point_and_survives_degenerate_triangles() -> None:
    rng = np.random.default_rng(5)
    a, b, c, p = (rng.normal(size=(500, 3)) for _ in range(4))
    w = barycentric(p, a, b, c)
    q = w[:, :1] * a + w[:, 1:2] * b + w[:, 2:] * c
    n = np.cross(b - a, c - a)
    # q is p moved along the normal only, and lies in the plane
    off = np.cross(p - q, n)
    assert np.allclose(off, 0.0, atol=1e-9 * np.max(np.abs(n)))
    assert np.allclose(np.einsum("kj,kj->k", q - a, n), 0.0, atol=1e-9)
    assert np.allclose(w.sum(axis=1), 1.0)
    # the closest point of a triangle has weights in [0, 1]
    wq = barycentric(closest_points_on_triangles(p, a, b, c), a, b, c)
    assert np.all(wq > -1e-9) and np.all(wq < 1 + 1e-9)
    # zero-area triangles (a point, a segment): finite weights that still sum to 1 (one old
    # variant divided by an infinite denominator, the other by zero)
    for deg in ((a, a, a), (a, b, a + 2.0 * (b - a))):
        wd = barycentric(p, *deg)
        assert np.all(np.isfinite(wd))
        assert np.allclose(wd.sum(axis=1), 1.0)


def test_box_tree_queries_match_brute_force_with_big_boxes_on_both_sides() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        na, nb = rng.integers(1, 250, 2)
        alo = rng.normal(size=(na, 3))
        ahi = alo + rng.exponential(0.1, (na, 3)) + rng.exponential(2.0, (na, 3)) * (rng.random((na, 1)) < 0.05)
        blo = rng.normal(size=(nb, 3))
        bhi = blo + rng.exponential(0.2, (nb, 3)) + 5.0 * (rng.random((nb, 1)) < 0.05)
        ov = np.all((alo[:, None] <= bhi[None]) & (blo[None] <= ahi[:, None]), axis=2)
        tree = BoxTree(blo, bhi)
        ia, ib = tree.pairs(alo, ahi)
        assert sorted(zip(ia.tolist(), ib.tolist())) == sorted(zip(*np.nonzero(ov)))
        sub = np.flatnonzero(rng.random(na) < 0.5)
        ia, ib = tree.pairs(alo, ahi, sub)
        expect = sorted((int(sub[i]), int(j)) for i, j in zip(*np.nonzero(ov[sub])))
        assert sorted(zip(ia.tolist(), ib.tolist())) == expect
        same = np.triu(np.all((alo[:, None] <= ahi[None]) & (alo[None] <= ahi[:, None]), axis=2), 1)
        ia, ib = box_pairs(alo, ahi)
        assert sorted(zip(ia.tolist(), ib.tolist())) == sorted(zip(*np.nonzero(same)))
