"""The shared contact geometry kernels (core/springs/proximity.py).

Collider contact and self-collision each had their own variant of these kernels; the
tests below check properties on the inputs where those variants disagreed.
"""

from __future__ import annotations

import numpy as np

from core.springs.proximity import (
    BoxTree,
    PairCache,
    barycentric,
    box_pairs,
    closest_points_on_triangles,
    coplanarity_times,
    first_coplanar_time,
)


def _triple(p: np.ndarray) -> np.ndarray:
    return np.einsum("kj,kj->k", np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), p[:, 3] - p[:, 0])


def _moving_triangles(seed: int, k: int, spread: float) -> tuple:
    """A generator, ``k`` random triangles at the start and end of a step ``(k, 3, 3)``
    (moved by ``spread`` times a normal sample) and random barycentric weights ``(k, 3)``."""
    rng = np.random.default_rng(seed)
    tri0 = rng.normal(size=(k, 3, 3))
    tri1 = tri0 + spread * rng.normal(size=(k, 3, 3))
    return rng, tri0, tri1, rng.dirichlet(np.ones(3), size=k)


def test_contact_at_the_end_of_the_step_is_found_despite_rounding() -> None:
    # A vertex that ends the step exactly on a triangle's plane (an affine combination of
    # the end corners): its triple product at t = 1 is zero up to rounding, of either
    # sign. The old self-collision variant needed an exact sign change and missed some of
    # these; every one is a contact and must be reported at t = 1.
    k = 2000
    rng, tri0, tri1, w = _moving_triangles(7, k, 0.3)
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


def test_rows_answered_early_have_no_root_in_the_full_search() -> None:
    # coplanarity_times answers rows whose Bernstein coefficients share a sign without the
    # root search; on rows built to sit at the edge of that test (touching the plane at
    # the start, at the end, grazing it mid-step, coplanar throughout, far apart) the
    # answers must be the full search's, row by row.
    from core.springs.proximity import _cubic_roots, dot

    k = 4000
    rng, tri0, tri1, w = _moving_triangles(5, k, 0.2)
    on0, on1 = np.einsum("ki,kij->kj", w, tri0), np.einsum("ki,kij->kj", w, tri1)
    n0 = np.cross(tri0[:, 1] - tri0[:, 0], tri0[:, 2] - tri0[:, 0])
    kind = np.arange(k) % 5
    lift = np.where(kind[:, None] == 4, 10.0 * n0, 1e-13 * rng.normal(size=(k, 1)) * n0)
    start = np.where((kind == 0)[:, None], on0 + lift, on0 + 0.5 * n0)
    end = np.where((kind == 1)[:, None], on1 + lift, on1 + 0.5 * n0)
    start = np.where((kind == 2)[:, None], on0, start)  # coplanar all step (static triangle)
    end = np.where((kind == 2)[:, None], on0, end)
    tri1[kind == 2] = tri0[kind == 2]
    p0 = np.concatenate([tri0, start[:, None]], axis=1)
    p1 = np.concatenate([tri1, end[:, None]], axis=1)
    p1[kind == 3, 3] += 0.5 * rng.normal(size=(np.count_nonzero(kind == 3), 3))  # grazing or not
    dp = p1 - p0
    u0, v0, w0 = (p0[:, i] - p0[:, 0] for i in (1, 2, 3))
    du, dv, dw = (dp[:, i] - dp[:, 0] for i in (1, 2, 3))
    uv0, mix, duv = np.cross(u0, v0), np.cross(du, v0) + np.cross(u0, dv), np.cross(du, dv)
    c = (dot(uv0, w0), dot(mix, w0) + dot(uv0, dw), dot(duv, w0) + dot(mix, dw), dot(duv, dw))
    full = _cubic_roots(c, np.abs(c[0]) + np.abs(c[1]) + np.abs(c[2]) + np.abs(c[3]))
    got = coplanarity_times(p0, p1)
    assert np.array_equal(np.isnan(got), np.isnan(full))
    assert np.array_equal(got[np.isfinite(got)], full[np.isfinite(full)])
    assert np.count_nonzero(np.isfinite(got).any(axis=1)) > k // 4  # the edge cases are there
    assert np.count_nonzero(~np.isfinite(got).any(axis=1)) > k // 4  # and rows answered early


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


def test_pair_cache_answers_every_query_as_a_fresh_tree_query_does() -> None:
    """Query boxes that move a little (kept candidates), a lot (queried again) or are only a
    subset: the cached pairs are exactly the overlapping ones, every time."""
    rng = np.random.default_rng(5)
    blo = rng.normal(size=(300, 3))
    bhi = blo + rng.exponential(0.15, (300, 3))
    tree = BoxTree(blo, bhi)
    cache = PairCache(tree, 200)
    lo = rng.normal(size=(200, 3))
    requeried = 0
    for step in range(12):
        lo = lo + rng.normal(scale=0.02, size=lo.shape) * (1 + 20 * (rng.random((200, 1)) < 0.1))
        hi = lo + rng.exponential(0.05, (200, 3))
        sub = np.flatnonzero(rng.random(200) < (1.0 if step % 3 == 0 else 0.4))
        before = cache.glo.copy()
        ia, ib = cache.pairs(lo, hi, sub, 0.05)
        requeried += int(np.count_nonzero(np.any(cache.glo != before, axis=1)))
        ov = np.all((lo[sub, None] <= bhi[None]) & (blo[None] <= hi[sub, None]), axis=2)
        expect = sorted((int(sub[i]), int(j)) for i, j in zip(*np.nonzero(ov)))
        assert sorted(zip(ia.tolist(), ib.tolist())) == expect, step
    assert 200 < requeried < 12 * 200 * 0.7  # it did keep candidates, and did query again


def test_element_boxes_bound_every_vertex_of_their_element() -> None:
    from core.springs.proximity import element_boxes

    rng = np.random.default_rng(9)
    x0, x1 = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    lo, hi = np.minimum(x0, x1), np.maximum(x0, x1)
    for width in (2, 3):
        el = rng.integers(0, 50, size=(200, width))
        blo, bhi = element_boxes(lo, hi, el)
        assert np.array_equal(blo, lo[el].min(axis=1)) and np.array_equal(bhi, hi[el].max(axis=1))
    assert np.array_equal(lo, x0.clip(max=x1))  # the inputs are left as they were
