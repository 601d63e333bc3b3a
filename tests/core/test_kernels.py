"""The compiled kernels (core/kernels/src) against brute-force numpy references.

Every expected value here comes from numpy code in this file (dense sampling, exact
point-triangle distances by another method, an independent energy and its finite
differences, brute-force segment-triangle crossings, analytic equilibria), never from the
kernels' own output. Only numpy, pytest and hypothesis: the asan tier runs this file in
Debian's python3 against the AddressSanitizer + UBSan build of the library.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import kernels
from core.errors import SinewError
from core.springs.colliders import Plane, Sphere, TriangleMesh
from core.springs.detection import CONTACT_SLOTS, GUARD_FRACTION, ColliderSoup, Contacts
from core.springs.shapes import box, triangulate, tube

# deterministic across the four tiers; no example database; no deadline (ASan is slower)
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SEEDS = st.integers(0, 2**32 - 1)


@pytest.fixture(scope="module")
def lib():
    return kernels.library()


def P(a):
    """The data address of a C-contiguous array."""
    assert a.flags.c_contiguous
    return a.ctypes.data


def c64(a):
    return np.ascontiguousarray(a, dtype=np.float64)


def i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


# --------------------------------------------------------------------------- numpy references


def seg_point_distance(p, a, b):
    """Distance from points p to segments a-b (broadcast over leading axes)."""
    d = b - a
    dd = np.sum(d * d, axis=-1)
    t = np.sum((p - a) * d, axis=-1) / np.where(dd > 0, dd, 1.0)
    t = np.clip(np.where(dd > 0, t, 0.0), 0.0, 1.0)
    return np.linalg.norm(p - (a + t[..., None] * d), axis=-1)


def point_triangle_distance(p, a, b, c):
    """Exact unsigned distance from points to triangles by another method than the kernel's
    (the plane projection when it falls inside, else the nearest of the three edges); any
    broadcastable leading shapes."""
    n = np.cross(b - a, c - a)
    nn = np.sum(n * n, axis=-1)
    scale = np.maximum.reduce([np.sum((b - a) ** 2, -1), np.sum((c - b) ** 2, -1),
                               np.sum((a - c) ** 2, -1)])
    flat = nn > 1e-20 * scale * scale
    s = np.sum((p - a) * n, axis=-1) / np.where(flat, nn, 1.0)
    proj = p - s[..., None] * n
    inside = np.broadcast_to(flat, s.shape).copy()
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= np.sum(np.cross(v - u, proj - u) * n, axis=-1) >= 0.0
    d = np.minimum.reduce([seg_point_distance(p, a, b), seg_point_distance(p, b, c),
                           seg_point_distance(p, c, a)])
    face = np.abs(s) * np.sqrt(nn)
    return np.where(inside, np.minimum(d, face), d)


def nearest_on_triangle(p, a, b, c):
    """(q, face) for one point and triangle: the nearest point of the triangle, and whether
    it is the plane projection strictly inside the face (else on an edge or a corner); by
    projection and edge clamping, as point_triangle_distance."""
    n = np.cross(b - a, c - a)
    nn = float(n @ n)
    if nn > 1e-24:
        q = p - ((p - a) @ n) / nn * n
        if all(np.cross(v - u, q - u) @ n > 1e-12 * nn for u, v in ((a, b), (b, c), (c, a))):
            return q, True
    best = None
    for u, v in ((a, b), (b, c), (c, a)):
        d = v - u
        t = 0.0 if d @ d == 0 else float(np.clip((p - u) @ d / (d @ d), 0.0, 1.0))
        q = u + t * d
        if best is None or np.linalg.norm(p - q) < np.linalg.norm(p - best):
            best = q
    return best, False


def surface_contacts(p, cv, tris, ids, radius):
    """The contacts of point p with the listed triangles of an open mesh as the VBD kernels
    count them, one per feature of the surface: (distance, unit direction from the surface to
    p, triangle) for each triangle within its radius whose nearest point is inside its face,
    or on a border when no face contact is as near and no border contact counted before
    has the same nearest point."""
    found = []
    for t in ids:
        q, face = nearest_on_triangle(p, *cv[tris[t]])
        d = float(np.linalg.norm(p - q))
        if 0 < d < radius[t]:
            found.append((d, (p - q) / d, t, q, face))
    nearest_face = min((d for d, _, _, _, face in found if face), default=np.inf)
    out, seen = [], []
    for d, u, t, q, face in found:
        if not face:
            if nearest_face <= d or any(np.linalg.norm(q - q0) <= 1e-9 for q0 in seen):
                continue
            seen.append(q)
        out.append((d, u, t))
    return out


def sampled_distance(p, a, b, c, m=48):
    """Distance from each point p[i] to triangle i by dense barycentric sampling (an upper
    bound of the true distance, within the sample spacing)."""
    i, j = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
    keep = i + j <= m
    u, v = i[keep] / m, j[keep] / m
    w = 1.0 - u - v
    pts = (w[None, :, None] * a[:, None] + u[None, :, None] * b[:, None]
           + v[None, :, None] * c[:, None])
    return np.min(np.linalg.norm(pts - p[:, None], axis=-1), axis=1)


def segment_crosses(p0, p1, a, b, c):
    """(n, t) bool: segment p0[i] -> p1[i] meets triangle (a[j], b[j], c[j]) (touching counts;
    a segment in the triangle's plane or a zero-area triangle never does)."""
    p0, p1 = p0[:, None], p1[:, None]
    n = np.cross(b - a, c - a)[None]
    nl = np.linalg.norm(n, axis=-1)
    s0 = np.sum((p0 - a[None]) * n, axis=-1)
    s1 = np.sum((p1 - a[None]) * n, axis=-1)
    span = (s0 <= 0) & (s1 >= 0) | (s0 >= 0) & (s1 <= 0)
    span &= s0 != s1
    t = s0 / np.where(s0 != s1, s0 - s1, 1.0)
    X = p0 + t[..., None] * (p1 - p0)
    inside = span & (nl > 1e-12)
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= np.sum(np.cross((v - u)[None], X - u[None]) * n, axis=-1) >= -1e-9 * nl
    return inside


def segment_enters_sphere(p0, p1, centre, R):
    """(n,) bool: segment p0 -> p1 comes closer than R to centre."""
    return seg_point_distance(centre, p0, p1) < R


def adjacency(n, springs):
    """CSR of the springs at each vertex (offsets, spring ids, other ends)."""
    sp = np.asarray(springs, np.int64).reshape(-1, 2)
    off = [0]
    sid, oth = [], []
    for i in range(n):
        for s, (a, b) in enumerate(sp):
            if a == i:
                sid.append(s)
                oth.append(b)
            elif b == i:
                sid.append(s)
                oth.append(a)
        off.append(len(sid))
    return i64(off), i64(sid), i64(oth)


def leaving(pb, cluster):
    """The SpringRows of the springs at each vertex whose other end is in another cluster (or
    pinned, -1), one by one, each vertex's row in its own order, the rows in vertex order."""
    sp = pb.springs
    off, keep = [0], []
    for i in range(pb.struct.n):
        r = sp.entries(i)
        keep += [e for e in range(r.start, r.stop) if cluster[sp.other[e]] != cluster[i]]
        off.append(len(keep))
    keep = np.asarray(keep, np.int64)
    return kernels.SpringRows(pb.struct.n, off, np.arange(pb.struct.n), sp.other[keep], sp.k[keep],
                              sp.rest[keep], sp.kd[keep], sp.rest_dir[keep], sp.limit[keep])


def vbd_problem(x_prev, springs, *, h=0.05, w=None, y=None, k=None, rest=None, kd=None,
                rest_dir=None, limit=None, k_limit=0.0, cv=None, cdisp=None, tris=None, closed=None,
                tri_radius=None, tri_mu=None, prim_type=(), prim=None, c_id=None, c_count=None,
                kc=None, eps_u=1e-4, anchor=None, bound=None):
    """A VbdProblem with every array set (defaults: no damping, no limit, no colliders,
    unguarded)."""
    x_prev = c64(x_prev)
    n = len(x_prev)
    springs = np.asarray(springs, np.int64).reshape(-1, 2)
    off, sid, oth = adjacency(n, springs)
    # the rows in reverse vertex order (the solver lays them out in its visiting order)
    rows = np.arange(n)[::-1]
    entry = np.concatenate([np.arange(off[i], off[i + 1]) for i in rows] + [np.zeros(0, np.int64)])
    off = i64(np.r_[0, np.cumsum(np.diff(off)[rows])])
    sid, oth = i64(sid[entry]), i64(oth[entry])
    row = np.empty(n, np.int64)
    row[rows] = np.arange(n)
    pb = kernels.VbdProblem(n, h)
    nt = 0 if tris is None else len(tris)

    def entries(per_spring, shape):  # the kernels read a spring's values per adjacency entry
        return np.zeros((len(sid),) + shape) if per_spring is None else np.asarray(per_spring)[sid]

    pb.set(x_prev=x_prev, w=np.ones(n) if w is None else w, y=x_prev if y is None else y,
           springs=kernels.SpringRows(n, off, row, oth, entries(k, ()), entries(rest, ()), entries(kd, ()),
                                      entries(rest_dir, (3,)), entries(limit, ())),
           k_limit=k_limit,
           cv=np.zeros((0, 3)) if cv is None else cv, cdisp=cdisp,
           tris=np.zeros((0, 3), np.int64) if tris is None else tris,
           closed_tri=np.zeros(nt, np.uint8) if closed is None else closed,
           tri_radius=np.zeros(nt) if tri_radius is None else tri_radius,
           tri_mu=np.zeros(nt) if tri_mu is None else tri_mu,
           prim_type=np.asarray(prim_type, np.int32),
           prim=np.zeros((len(prim_type), 8)) if prim is None else prim,
           c_id=np.zeros((n, CONTACT_SLOTS), np.int64) if c_id is None else c_id,
           c_count=np.zeros(n, np.int64) if c_count is None else c_count,
           kc=np.zeros(n) if kc is None else kc, eps_u=eps_u,
           anchor=x_prev if anchor is None else anchor,
           bound=np.full(n, np.inf) if bound is None else bound)
    return pb


def barrier(d, r, kc):
    """vbd.c's contact energy kc r (r ln(r/d) - (r - d)) for 0 < d < r, else 0."""
    if d >= r:
        return 0.0
    return kc * r * (r * np.log(r / d) - (r - d))


def energy(x, pb):
    """The VBD objective (frictionless) in numpy, from the problem's own arrays."""
    g = pb.get
    x = x.reshape(-1, 3)
    xp, w, y = g("x_prev"), g("w"), g("y")
    E = 0.5 * np.sum(w * np.sum((x - y) ** 2, axis=1))
    sp = pb.springs
    h, k_lim = pb.struct.h, pb.struct.k_limit
    for i in range(len(x)):
        r = sp.entries(i)
        for e in range(r.start, r.stop):
            o = int(sp.other[e])
            if o < i:  # (each spring once: from its lower end)
                continue
            l = np.linalg.norm(x[i] - x[o])
            E += 0.5 * sp.k[e] * (l - sp.rest[e]) ** 2  # (per adjacency entry)
            lim = sp.limit[e]
            if lim > 0 and l > lim:
                E += 0.5 * k_lim * (l - lim) ** 2
            rel = (x[i] - xp[i]) - (x[o] - xp[o])
            # along the spring at the step's start, its rest direction where its ends met
            d0 = xp[i] - xp[o]
            l0 = np.linalg.norm(d0)
            u0 = d0 / l0 if l0 > 1e-12 else sp.rest_dir[e]
            E += 0.5 / h * sp.kd[e] * float(u0 @ rel) ** 2
    cv, tris, rad = g("cv"), g("tris"), g("tri_radius")
    cid, cnt, kc = g("c_id"), g("c_count"), g("kc")
    for i in range(len(x)):
        for d, _, t in surface_contacts(x[i], cv, tris, cid[i, :cnt[i]], rad):
            E += barrier(d, rad[t], kc[i])
        for pt, pr in zip(g("prim_type"), g("prim")):
            d = (x[i] - pr[:3]) @ pr[3:6] if pt == 0 else np.linalg.norm(x[i] - pr[:3]) - pr[3]
            E += barrier(d, pr[6], kc[i])
    return E


def kernel_forces(lib, pb, x, vertices=None):
    vertices = i64(np.arange(pb.struct.n) if vertices is None else vertices)
    x = c64(x)
    f = np.zeros((len(vertices), 3))
    cf = np.zeros((len(vertices), 3))
    assert lib.sinew_vbd_forces(pb.struct, len(vertices), P(vertices), P(x), P(f), P(cf)) == 0
    return f, cf


def sweep(lib, pb, x, colors):
    """One sweep over colour lists (a list of vertex lists), in place; returns clipped."""
    off = i64(np.cumsum([0] + [len(c) for c in colors]))
    verts = i64(np.concatenate([np.asarray(c, np.int64) for c in colors]) if colors else [])
    clipped = np.zeros(1, np.int64)
    assert lib.sinew_vbd_sweep(pb.struct, len(colors), P(off), P(verts), P(x), P(clipped)) == 0
    return int(clipped[0])


# --------------------------------------------------------------------------- 1 closest points


def _triangles(rng, count, far):
    a = rng.uniform(-2, 2, (count, 3))
    b = a + rng.normal(0, 1, (count, 3))
    c = a + rng.normal(0, 1, (count, 3))
    kind = rng.integers(0, 7, count)
    t = rng.uniform(-0.5, 1.5, count)[:, None]
    b = np.where((kind == 1)[:, None], a, b)                       # two corners equal
    c = np.where((kind == 2)[:, None], a + t * (b - a), c)          # collinear
    b = np.where((kind == 3)[:, None], a, b)
    c = np.where((kind == 3)[:, None], a, c)                        # all three equal
    c = np.where((kind == 4)[:, None], a + t * (b - a) + 1e-9 * rng.normal(size=(count, 3)), c)
    c = np.where((kind == 5)[:, None], b, c)                        # b == c
    cen = (a + b + c) / 3
    p = cen + rng.normal(0, 1, (count, 3)) * np.where(far, 1e3, 1.0)[:, None]
    on = rng.random(count) < 0.1                                    # points in the plane / on it
    p = np.where(on[:, None], a + 0.3 * (b - a) + 0.3 * (c - a), p)
    return c64(p), c64(a), c64(b), c64(c)


@FUZZ
@given(seed=SEEDS, count=st.integers(0, 60))
def test_closest_points_against_dense_sampling(lib, seed, count):
    rng = np.random.default_rng(seed)
    far = rng.random(count) < 0.3
    p, a, b, c = _triangles(rng, count, far)
    q = np.full((count, 3), np.nan)
    bary = np.full((count, 3), np.nan)
    assert lib.sinew_closest_points(count, P(p), P(a), P(b), P(c), P(q), P(bary)) == 0
    if count == 0:
        return
    scale = 1.0 + np.abs(np.stack([a, b, c, p], 1)).max(axis=(1, 2))
    # the returned point lies on the triangle
    assert np.all(bary >= -1e-12) and np.allclose(bary.sum(1), 1.0, atol=1e-12)
    on = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
    assert np.all(np.linalg.norm(q - on, axis=1) <= 1e-12 * scale)
    dist = np.linalg.norm(p - q, axis=1)
    # no farther than the nearest of a dense sample of the triangle, and the exact distance
    # (plane projection or edges; a 1e-9 sliver counts as its edges: within its width)
    assert np.all(dist <= sampled_distance(p, a, b, c) + 1e-8 * scale)
    assert np.allclose(dist, point_triangle_distance(p, a, b, c), rtol=1e-9, atol=1e-8 * scale)


def test_closest_points_known_cases(lib):
    a, b, c = np.zeros((1, 3)), np.array([[1.0, 0, 0]]), np.array([[0, 1.0, 0]])
    cases = {(0.2, 0.2, 1.0): (0.2, 0.2, 0.0), (-1.0, -1.0, 0.0): (0, 0, 0),
             (2.0, 0.0, -3.0): (1, 0, 0), (1.0, 1.0, 0.0): (0.5, 0.5, 0.0),
             (0.5, -2.0, 0.0): (0.5, 0.0, 0.0)}
    for pt, want in cases.items():
        p, q, bary = c64([pt]), np.zeros((1, 3)), np.zeros((1, 3))
        lib.sinew_closest_points(1, P(p), P(a), P(b), P(c), P(q), P(bary))
        assert np.allclose(q[0], want, atol=1e-15)


# --------------------------------------------------------------------------- 2 collider query


def _soup(rng, count, closed=False):
    """A random triangle soup: small, huge (the big list), collapsed and duplicated ones."""
    a = rng.uniform(-1.5, 1.5, (count, 3))
    b = a + rng.normal(0, 0.3, (count, 3))
    c = a + rng.normal(0, 0.3, (count, 3))
    kind = rng.integers(0, 8, count)
    b = np.where((kind == 1)[:, None], a, b)
    c = np.where((kind == 2)[:, None], 0.5 * (a + b), c)
    huge = kind == 3
    a[huge] = rng.uniform(-1, 1, (huge.sum(), 3))
    b[huge] = a[huge] + rng.normal(0, 60, (huge.sum(), 3))
    c[huge] = a[huge] + rng.normal(0, 60, (huge.sum(), 3))
    verts = np.stack([a, b, c], 1).reshape(-1, 3)
    tris = np.arange(3 * count).reshape(-1, 3)
    dup = rng.random(count) < 0.15
    if dup.any():
        tris = np.concatenate([tris, tris[dup]])                 # the same triangle twice
    return verts, tris


def _check_query(c, x, radius, A, B, C, prim_d=None, inside=None):
    """The contacts record against brute force: D (n, t) the exact distances."""
    K = CONTACT_SLOTS
    D = point_triangle_distance(x[:, None], A[None], B[None], C[None]) if len(A) else np.zeros((len(x), 0))
    for i in range(len(x)):
        r = radius[i]
        cnt = int(c.count[i])
        ids = c.ids[i, :cnt]
        sd = c.slot_distance[i, :cnt]
        assert len(set(ids.tolist())) == cnt, "a triangle twice in the slots"
        assert np.all(np.diff(sd) >= 0), "slots not in ascending order"
        assert np.allclose(sd, D[i, ids], rtol=1e-9, atol=1e-12)
        assert np.all(sd < r)
        within = np.sort(D[i][D[i] < r])
        sure = np.flatnonzero(D[i] < r * (1 - 1e-9))
        if len(within) < K:
            assert cnt == len(within) or cnt == len(sure)
            assert set(sure.tolist()) <= set(ids.tolist())
        else:
            assert cnt == K
            # the K nearest (ties between duplicates: compare the distances)
            assert np.allclose(sd, within[:K], rtol=1e-9, atol=1e-12)
        if inside is None or not inside[i]:
            want = min(r, D[i].min(initial=np.inf))
            if prim_d is not None and len(prim_d[i]):
                want = min(want, prim_d[i].min())
            assert np.isclose(c.distance[i], want, rtol=1e-9, atol=1e-12)
            if cnt == K:
                assert np.isclose(c.bound[i], GUARD_FRACTION * sd[-1])
            elif c.distance[i] >= 0:
                assert np.isclose(c.bound[i], GUARD_FRACTION * r)


@FUZZ
@given(seed=SEEDS, count=st.integers(1, 40), npts=st.integers(0, 30))
def test_collider_query_against_brute_force(seed, count, npts):
    rng = np.random.default_rng(seed)
    verts, tris = _soup(rng, count)
    soup = ColliderSoup([TriangleMesh(verts, tris)])
    x = c64(rng.uniform(-2.5, 2.5, (npts, 3)))
    radius = c64(rng.choice([0.05, 0.3, 1.0, 5.0], npts) * rng.uniform(0.5, 1.5, npts))
    c = soup.detect(x, radius)
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    _check_query(c, x, radius, A, B, C)
    assert np.array_equal(c.anchor, x)


def test_collider_query_full_slots_and_big_triangles():
    """More triangles than slots within the radius (a stack of parallel plates), and a
    ground far larger than the grid's cells (the big list)."""
    rng = np.random.default_rng(7)
    plates = []
    for z in np.linspace(0.05, 0.6, 12):
        plates.append(np.array([[-1, -1, z], [1, -1, z], [0, 1, z]]))
    ground = np.array([[-500, -500, -0.2], [500, -500, -0.2], [0, 500, -0.2]])
    verts = np.concatenate(plates + [ground] + [plates[3]])    # and a duplicate plate
    tris = np.arange(len(verts)).reshape(-1, 3)
    soup = ColliderSoup([TriangleMesh(verts, tris)])
    x = c64(np.c_[rng.uniform(-0.3, 0.3, (40, 2)), rng.uniform(-0.1, 0.7, 40)])
    radius = c64(rng.uniform(0.05, 2.0, 40))
    c = soup.detect(x, radius)
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    _check_query(c, x, radius, A, B, C)
    assert np.any(c.count == CONTACT_SLOTS)
    assert len(soup._grid[4]) == 1   # the ground is in the big list


@FUZZ
@given(seed=SEEDS)
def test_collider_query_inside_a_closed_box(seed):
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-1, 0, 3)
    hi = lo + rng.uniform(0.3, 2, 3)
    v, t = box(lo, hi)
    soup = ColliderSoup([TriangleMesh(v, t)])
    x = rng.uniform(lo - 0.5, hi + 0.5, (30, 3))
    x[:3] = 0.5 * (lo + hi)                    # the centre: behind two triangles' shared edge
    x[3] = [0.5 * (lo[0] + hi[0]), 0.5 * (lo[1] + hi[1]), lo[2] + 0.1 * (hi[2] - lo[2])]
    x = c64(x)
    radius = np.full(len(x), 3.0)
    c = soup.detect(x, radius)
    inside = np.all((x > lo) & (x < hi), axis=1)
    depth = np.min(np.minimum(x - lo, hi - x), axis=1)
    assert np.allclose(c.distance[inside], -depth[inside], rtol=1e-9, atol=1e-12)
    assert np.all(np.isinf(c.bound[inside]))
    outside_d = np.linalg.norm(x - np.clip(x, lo, hi), axis=1)
    assert np.allclose(c.distance[~inside], np.minimum(outside_d[~inside], 3.0))
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    _check_query(c, x, radius, A, B, C, inside=inside)


@FUZZ
@given(seed=SEEDS)
def test_collider_query_planes_and_spheres(seed):
    rng = np.random.default_rng(seed)
    nrm = rng.normal(size=3)
    plane = Plane(rng.normal(size=3) * 0.3, nrm, thickness=0.01)
    sphere = Sphere(rng.normal(size=3) * 0.5, float(rng.uniform(0.2, 1.0)), thickness=0.02)
    v, t = _soup(rng, 5)
    soup = ColliderSoup([plane, sphere, TriangleMesh(v, t)])
    x = c64(rng.uniform(-2, 2, (60, 3)))
    radius = c64(rng.uniform(0.1, 3.0, 60))
    c = soup.detect(x, radius)
    sp = (x - plane.point) @ plane.normal
    ss = np.linalg.norm(x - sphere.center, axis=1) - sphere.radius
    prim = np.stack([sp, ss], 1)
    in_prim = np.any(prim < 0, axis=1)
    depth = np.max(np.where(prim < 0, -prim, 0.0), axis=1)
    assert np.allclose(c.distance[in_prim], -depth[in_prim])
    assert np.all(np.isinf(c.bound[in_prim]))
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    pd = [row[row < r] for row, r in zip(prim, radius)]
    _check_query(c, x, radius, A, B, C, prim_d=pd, inside=in_prim)
    # in blocks on three threads (of at least 7 vertices here): the same record, bit for bit
    import core.springs.detection as detection

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(detection, "QUERY_PART", 7)
        soup.workers = kernels.Workers(3)
        split = soup.detect(x, radius)
        soup.workers.close()
    for name in ("ids", "count", "distance", "slot_distance", "anchor", "bound"):
        a, b = getattr(c, name), getattr(split, name)
        if name in ("ids", "slot_distance"):  # (only the listed slots are written)
            listed = np.arange(a.shape[1])[None, :] < c.count[:, None]
            a, b = a[listed], b[listed]
        assert np.array_equal(a, b), name


def _carry_reference(soup, x0):
    """A moving collider's push on each vertex, written out in numpy (what
    ``VertexBlockDescent._carry`` asks of ``sinew_vbd_carry``)."""
    from core.springs.detection import unit_normals

    out = np.zeros_like(x0)
    moved = np.linalg.norm(soup.cdisp, axis=1)
    radius = np.full(len(x0), 2.0 * soup.max_radius + float(moved.max()) + 1e-6)
    before = soup.at_start(radius)
    near = before.detect(x0, radius)
    vert, slot = np.nonzero(np.arange(near.ids.shape[1])[None, :] < near.count[:, None])
    if len(vert) == 0:
        return out, 0
    ids = near.ids[vert, slot]
    tri = soup.tris[ids]
    a, b, c = (before.cv[tri[:, k]] for k in range(3))
    p = x0[vert]
    q = np.array([nearest_on_triangle(p_, a_, b_, c_)[0] for p_, a_, b_, c_ in zip(p, a, b, c)])
    vw = [np.linalg.lstsq(np.c_[b_ - a_, c_ - a_], q_ - a_, rcond=None)[0] for q_, a_, b_, c_ in zip(q, a, b, c)]
    bary = np.array([[1.0 - v_ - w_, v_, w_] for v_, w_ in vw])
    disp = np.einsum("ik,ikj->ij", bary, soup.cdisp[tri])
    gap = np.where(slot == 0, near.distance[vert], near.slot_distance[vert, slot])
    away = p - q
    length = np.linalg.norm(away, axis=1)
    normal = unit_normals(before.cv, soup.tris[ids])
    side = np.where(soup.closed[ids] > 0, 1.0, np.where(np.einsum("ij,ij->i", away, normal) < 0, -1.0, 1.0))
    clear = (length > 1e-9) & (gap > 0)
    outward = np.where(clear[:, None], away / np.where(clear, length, 1.0)[:, None], side[:, None] * normal)
    advance = np.einsum("ij,ij->i", disp, outward) - np.maximum(gap - soup.radius[ids], 0.0)
    order = np.lexsort((-advance, vert))
    first = order[np.r_[True, vert[order][1:] != vert[order][:-1]]]
    hit = first[advance[first] > 0]
    out[vert[hit]] = advance[hit, None] * outward[hit]
    return out, len(hit)


@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(seed=SEEDS)
def test_carry_is_the_largest_approach_of_the_moving_surfaces(seed):
    """sinew_vbd_carry (through VertexBlockDescent._carry) against numpy: each vertex near a
    moving mesh (open or closed, some vertices inside its thickness or a closed one, one on its
    surface) is
    pushed along the outward direction of the slot whose surface approaches it most beyond
    the gap to its thickness, by that much, and not at all where none does."""
    from core.springs.contact import MeshWindow
    from core.springs.shapes import uv_sphere
    from core.springs.vbd import VertexBlockDescent

    rng = np.random.default_rng(seed)
    v, t = uv_sphere(0.5, 8, 8)
    closed = bool(seed % 2)
    if not closed:
        t = t[: len(t) // 2]
    c0 = v + rng.normal(0, 0.1, 3)
    c1 = c0 + rng.normal(0, 0.03, 3) + rng.normal(0, 0.005, c0.shape)
    win = MeshWindow(c0, c1, t, None, 0.02, 0.3, closed)
    soup = ColliderSoup([win])
    x0 = c64(c0[rng.integers(0, len(c0), 30)] * rng.uniform(0.9, 1.15, (30, 1))
             + rng.normal(0, 0.01, (30, 3)) + (c0.mean(axis=0) * (1 - rng.uniform(0.9, 1.15, (30, 1)))))
    if closed:  # on the surface (its side is the closed mesh's outside; on an open one, round-off's)
        x0[0] = c0[t[0]].mean(axis=0)
    want, pushed = _carry_reference(soup, x0)
    got = VertexBlockDescent._carry(soup, x0, 1 / 24)
    assert pushed > 0
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_swept_elements_meet_against_numpy(lib, seed):
    """sinew_swept_elements_meet against numpy: an element is kept when the box of its corners
    at the start and at the end, grown by the margin, meets the region; triangles and edges
    (and sinew_element_boxes gives those boxes); a corner out of range or a negative margin
    is refused."""
    from core.springs.detection import element_boxes

    rng = np.random.default_rng(seed)
    nv = 60
    x0 = c64(rng.uniform(-1, 1, (nv, 3)))
    x1 = c64(x0 + rng.normal(0, 0.3, (nv, 3)))
    lo = c64(rng.uniform(-0.8, 0.2, 3))
    hi = c64(lo + rng.uniform(0.1, 0.8, 3))
    grow = 0.05
    for k in (3, 2):
        elems = i64(rng.integers(0, nv, (80, k)))
        both = np.concatenate([x0[elems], x1[elems]], axis=1)
        want = np.all(both.min(axis=1) - grow <= hi, axis=1) & np.all(both.max(axis=1) + grow >= lo, axis=1)
        keep = np.full(80, 7, np.uint8)
        kept = lib.sinew_swept_elements_meet(80, k, P(elems), nv, P(x0), P(x1), grow, P(lo), P(hi), P(keep))
        assert kept == want.sum() and np.array_equal(keep.astype(bool), want) and 0 < kept < 80
        lo_, hi_ = element_boxes(x0, elems, x1)  # (the same boxes, from the boxes' kernel)
        assert np.array_equal(lo_, both.min(axis=1)) and np.array_equal(hi_, both.max(axis=1))
    bad = elems.copy()
    bad[5, 0] = nv
    assert lib.sinew_swept_elements_meet(80, 2, P(bad), nv, P(x0), P(x1), grow, P(lo), P(hi), P(keep)) == -1
    assert lib.sinew_swept_elements_meet(80, 2, P(elems), nv, P(x0), P(x1), -1.0, P(lo), P(hi), P(keep)) == -1


def test_carry_refuses_bad_indices(lib):
    """sinew_vbd_carry refuses a slot, a count or a triangle corner out of range."""
    cv = c64([[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    tris, x0 = i64([[0, 1, 2]]), c64([[0.2, 0.2, 0.01]])
    out = np.zeros((1, 3))
    disp, closed, radius = c64([[0, 0, 0.02]] * 3), np.ones(1, np.uint8), c64([0.02])

    def call(ids, count, tris):
        return lib.sinew_vbd_carry(1, P(x0), 2, P(ids), P(count), P(c64([0.01])), P(c64([[0.01, 0.0]])),
                                   3, P(cv), P(disp), len(tris), P(tris), P(closed), P(radius), P(out))

    assert call(i64([[0, 0]]), i64([1]), tris) == 0 and out[0, 2] > 0.0  # (pushed up by the rising face)
    assert call(i64([[1, 0]]), i64([1]), tris) == -1
    assert call(i64([[0, 0]]), i64([3]), tris) == -1
    assert call(i64([[0, 0]]), i64([1]), i64([[0, 1, 3]])) == -1


@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(seed=SEEDS)
def test_moving_mesh_left_out_of_the_region_is_beyond_every_bound(seed):
    """A moving mesh of many triangles with a region: the soup keeps the triangles whose
    sweep (with the thickness) meets the region, and no triangle it left out, at the end of
    the step, lies within any vertex's bound (by brute force)."""
    from core.springs.contact import MeshWindow
    from core.springs.shapes import uv_sphere

    rng = np.random.default_rng(seed)
    v, t = uv_sphere(1.0, 12, 12)  # (264 triangles: more than CULL_TRIANGLES)
    c0 = v + rng.normal(0, 0.5, 3)
    c1 = c0 + rng.normal(0, 0.05, 3)
    win = MeshWindow(c0, c1, t, None, 0.02, 0.3, True)
    lo = rng.uniform(-1.5, 0.5, 3)
    region = (lo, lo + rng.uniform(0.3, 1.0, 3))
    soup = ColliderSoup([win], region)
    assert len(soup.tris) < len(t) and soup.region is not None
    x = c64(rng.uniform(region[0], region[1], (12, 3)))
    c = soup.detect(x, np.full(12, 0.3))
    kept = {tuple(sorted(r)) for r in soup.tris.tolist()}
    out = np.array([r for r in t if tuple(sorted(r)) not in kept])
    for p_, b in zip(x, c.bound):
        if np.isfinite(b):
            d = min(point_triangle_distance(p_, *c1[tri]) for tri in out)
            assert d >= b


def test_collider_query_raw_refuses_bad_indices(lib):
    x, r = c64([[0, 0, 0]]), c64([1.0])
    cv = c64([[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    tris = i64([[0, 1, 3]])                   # 3 is out of range
    closed = np.zeros(1, np.uint8)
    off, ent, big = i64([0, 1]), i64([0]), i64([0])
    ids, dist, cnt, dmin = np.zeros((1, 4), np.int64), np.zeros((1, 4)), np.zeros(1, np.int64), np.zeros(1)
    pt, pr = np.zeros(0, np.int32), np.zeros((0, 8))
    def args(tr, e, k=4, cell=1.0):
        return (1, P(x), P(r), 3, P(cv), 1, P(tr), P(closed), cell, 1, P(off), P(e), 0, P(big),
                None, None, 0, P(pt), P(pr), k, P(ids), P(dist), P(cnt), P(dmin))

    assert lib.sinew_collider_query(*args(tris, ent)) == -1
    assert lib.sinew_collider_query(*args(i64([[0, 1, 2]]), i64([5]))) == -1   # grid entry
    assert lib.sinew_collider_query(*args(i64([[0, 1, 2]]), ent, k=0)) == -1
    assert lib.sinew_collider_query(*args(i64([[0, 1, 2]]), ent, cell=0.0)) == -1
    assert lib.sinew_collider_query(*args(i64([[0, 1, 2]]), ent)) == 0
    assert cnt[0] == 1 and ids[0, 0] == 0 and dist[0, 0] == 0.0


# --------------------------------------------------------------------------- 3 forces


def _fd_problem(rng, mu=0.0, n=4):
    """A small problem: a chain with an extra diagonal spring, damping, a strain limit past
    the rest length, inertia, a plane, a sphere and a collider triangle near vertex 0."""
    x = rng.uniform(-0.4, 0.4, (n, 3)) + [0, 0, 2.5]       # clear of every collider
    x[0] = [0.1, 0.05, 0.0]
    springs = np.array([(i, i + 1) for i in range(n - 1)] + [(0, n - 1)])
    s = len(springs)
    L = np.linalg.norm(x[springs[:, 0]] - x[springs[:, 1]], axis=1)
    rest = L * rng.uniform(0.6, 1.4, s)
    limit = np.where(rng.random(s) < 0.6, L * rng.uniform(0.6, 0.9, s), 0.0)  # some active
    rest_dir = rng.normal(size=(s, 3))
    rest_dir /= np.linalg.norm(rest_dir, axis=1)[:, None]
    x_prev = x + rng.normal(0, 0.05, (n, 3))
    x_prev[n - 1] = x_prev[0]  # the spring (0, n - 1) starts at zero length: its rest direction
    # collider triangle under vertex 0 at height r/2, plane and sphere within their thickness
    r = 0.1
    cv = c64([[-1, -1, -0.05], [1, -1, -0.05], [0, 1.5, -0.05]])
    tris = i64([[0, 1, 2]])
    c_id = np.zeros((n, CONTACT_SLOTS), np.int64)
    c_count = np.zeros(n, np.int64)
    c_count[0] = 1
    prim = np.zeros((2, 8))
    prim[0, :3], prim[0, 3:6], prim[0, 6], prim[0, 7] = [0, 0, -0.03], [0.0, 0.0, 1.0], 0.1, mu
    prim[1, :3], prim[1, 3], prim[1, 6], prim[1, 7] = [0.1, 0.05, 0.8], 0.75, 0.12, mu
    pb = vbd_problem(x_prev, springs, h=0.04, w=rng.uniform(1, 20, n), y=x + rng.normal(0, 0.1, (n, 3)),
                     k=rng.uniform(10, 100, s), rest=rest, kd=rng.uniform(0, 2, s), rest_dir=rest_dir,
                     limit=limit, k_limit=75.0, cv=cv, tris=tris, closed=np.zeros(1, np.uint8),
                     tri_radius=c64([r]), tri_mu=c64([mu]), prim_type=[0, 1], prim=prim,
                     c_id=c_id, c_count=c_count, kc=rng.uniform(100, 1000, n), eps_u=1e-3)
    return pb, x


@FUZZ
@given(seed=SEEDS)
def test_forces_are_minus_the_energy_gradient(lib, seed):
    rng = np.random.default_rng(seed)
    pb, x = _fd_problem(rng)
    f, cf = kernel_forces(lib, pb, x)
    eps = 1e-6
    grad = np.zeros_like(x)
    for i in range(len(x)):
        for a in range(3):
            xp, xm = x.copy(), x.copy()
            xp[i, a] += eps
            xm[i, a] -= eps
            grad[i, a] = (energy(xp, pb) - energy(xm, pb)) / (2 * eps)
    scale = np.abs(grad).max()
    assert np.allclose(f, -grad, rtol=1e-5, atol=1e-6 * scale)
    # vertex 0 is in contact with all three colliders (plane d = .03, sphere d = .05,
    # triangle d = .05): the normal force is the barrier's alone
    d = (0.03, 0.05, 0.05)
    r = (0.1, 0.12, 0.1)
    lam = [pb.get("kc")[0] * rr * (rr - dd) / dd for dd, rr in zip(d, r)]
    assert np.allclose(cf[0], [0, 0, lam[0] + lam[2] - lam[1]], rtol=1e-9)
    assert np.allclose(cf[1:], 0.0)


def _surface_problem(points, cv, tris, r=0.05, kc=300.0):
    """Frictionless, springless vertices at points, every triangle of (cv, tris) in each one's
    slots (open mesh, thickness r)."""
    n, nt = len(points), len(tris)
    c_id = np.zeros((n, max(CONTACT_SLOTS, nt)), np.int64)  # (a box's 12: within kernels.MAX_SLOTS)
    c_id[:, :nt] = np.arange(nt)
    return vbd_problem(c64(points), np.zeros((0, 2)), w=np.zeros(n), cv=c64(cv), tris=i64(tris),
                       tri_radius=np.full(nt, r), c_id=c_id, c_count=np.full(n, nt, np.int64),
                       kc=np.full(n, kc))


def test_contact_counts_each_feature_of_the_surface_once(lib):
    """A vertex pressed into a flat mesh near (or over) an edge two triangles share feels the
    one barrier of its distance straight up, nothing along the surface; beyond a convex rim
    it feels the rim once; in a concave corner it feels both faces."""
    r, kc = 0.05, 300.0
    lam = lambda d: kc * r * (r - d) / d  # noqa: E731

    flat = c64([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]])  # a square, diagonal 0-2
    for pt in ([0.52, 0.5, 0.02], [0.5, 0.5, 0.02], [0.7, 0.69, 0.01]):
        pb = _surface_problem([pt], flat, [[0, 1, 2], [0, 2, 3]], r, kc)
        _, cf = kernel_forces(lib, pb, c64([pt]))
        assert np.allclose(cf[0], [0, 0, lam(pt[2])], rtol=1e-12, atol=1e-12)
    # a rim: top face z = 0 for y < 0.5, side face y = 0.5 going down; the vertex beyond it
    rim = c64([[0, 0, 0], [1, 0, 0], [1, 0.5, 0], [0, 0.5, 0], [0, 0.5, -1], [1, 0.5, -1]])
    tris = [[0, 1, 2], [0, 2, 3], [3, 2, 5], [3, 5, 4]]
    pt = c64([0.4, 0.52, 0.015])
    pb = _surface_problem([pt], rim, tris, r, kc)
    _, cf = kernel_forces(lib, pb, c64([pt]))
    d = np.hypot(0.02, 0.015)
    assert np.allclose(cf[0], lam(d) * np.array([0, 0.02, 0.015]) / d, rtol=1e-12)
    # a concave corner: floor z = 0 and wall y = 0.5 going up
    corner = c64([[0, 0, 0], [1, 0, 0], [1, 0.5, 0], [0, 0.5, 0], [0, 0.5, 1], [1, 0.5, 1]])
    pt = c64([0.4, 0.47, 0.02])
    pb = _surface_problem([pt], corner, tris, r, kc)
    _, cf = kernel_forces(lib, pb, c64([pt]))
    assert np.allclose(cf[0], [0, -lam(0.03), lam(0.02)], rtol=1e-12)


@FUZZ
@given(seed=SEEDS)
def test_contact_forces_on_a_box_against_the_reference(lib, seed):
    """Points around and inside the thickness of a box's triangles (shared edges, rims,
    corners): the kernel's collider force is the sum of the reference's one-per-feature
    contacts, each ``λ(d) = k_c r (r - d)/d`` along its direction (``d`` at least ``r/100``
    in the divisor)."""
    rng = np.random.default_rng(seed)
    cv, tris = box((-0.5, -0.5, -0.5), (0.5, 0.5, 0.5))
    m = 12
    # near a random face, edge or corner of the box, within the thickness, outside the box
    pts = rng.uniform(-0.55, 0.55, (m, 3))
    out = np.abs(pts).max(axis=1) >= 0.5
    pts = pts[out]
    r, kc = 0.08, 300.0
    pb = _surface_problem(pts, cv, tris, r, kc)
    _, cf = kernel_forces(lib, pb, pts)
    for p, got in zip(pts, cf):
        want = sum((kc * r * (r - d) / max(d, 0.01 * r) * u for d, u, _ in surface_contacts(p, c64(cv), i64(tris),
                                                                          range(len(tris)), np.full(len(tris), r))),
                   np.zeros(3))
        assert np.allclose(got, want, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(want).max()))


def test_forces_on_listed_vertices_only_and_refuses_bad_index(lib):
    rng = np.random.default_rng(3)
    pb, x = _fd_problem(rng)
    f_all, _ = kernel_forces(lib, pb, x)
    f_some, _ = kernel_forces(lib, pb, x, [2, 0])
    assert np.array_equal(f_some, f_all[[2, 0]])
    v = i64([0, 9])
    out = np.zeros((2, 3))
    assert lib.sinew_vbd_forces(pb.struct, 2, P(v), P(c64(x)), P(out), P(out.copy())) == -1


@FUZZ
@given(seed=SEEDS, slide=st.floats(1e-5, 1.0), mu=st.floats(0.05, 2.0))
def test_friction_opposes_the_sliding_and_is_at_most_mu_lambda(lib, seed, slide, mu):
    rng = np.random.default_rng(seed)
    pb0, x = _fd_problem(rng, mu=0.0)
    pb1, _ = _fd_problem(np.random.default_rng(seed), mu=mu)
    # vertex 0 slides along the ground relative to its start of step
    tang = rng.normal(size=3)
    tang[2] = 0.0
    tang *= slide / np.linalg.norm(tang)
    xp = pb1.get("x_prev").copy()
    xp[0] = x[0] - tang + [0, 0, rng.normal(0, 0.01)]
    pb0.set(x_prev=xp)
    pb1.set(x_prev=xp)
    f0, cf0 = kernel_forces(lib, pb0, x, [0])
    f1, cf1 = kernel_forces(lib, pb1, x, [0])
    assert np.allclose(cf0, cf1)
    ff = (f1 - f0)[0]
    # every collider's normal here is +-z except the sphere's; the lagged normal forces
    lam = np.linalg.norm(cf1[0])
    u = x[0] - xp[0]
    assert ff @ u < 0, "friction must oppose the sliding"
    # bounded by mu times the sum of the contacts' normal forces
    d = (0.03, 0.05, 0.05)
    r = (0.1, 0.12, 0.1)
    lam_sum = sum(pb1.get("kc")[0] * rr * (rr - dd) / dd for dd, rr in zip(d, r))
    assert np.linalg.norm(ff) <= mu * lam_sum * (1 + 1e-9)
    assert lam <= lam_sum * (1 + 1e-12)


def test_friction_of_one_plane_exact(lib):
    """One plane: the friction force is -mu lam ut/|ut| once sliding (|ut| >= eps_u), a
    smaller one below; none when the vertex moves with a moving collider triangle."""
    x = c64([[0.0, 0.0, 0.05]])
    for slide, full in ((0.3, True), (1e-3, True), (2e-4, False)):
        xp = c64([[-slide, 0.0, 0.02]])
        prim = np.zeros((1, 8))
        prim[0, 3:6] = [0, 0, 1]
        prim[0, 6], prim[0, 7] = 0.1, 0.5
        pb = vbd_problem(xp, np.zeros((0, 2)), w=c64([0.0]), y=x, prim_type=[0], prim=prim,
                         kc=c64([200.0]), eps_u=1e-3)
        f, cf = kernel_forces(lib, pb, x)
        lam = 200.0 * 0.1 * (0.1 - 0.05) / 0.05
        assert np.allclose(cf[0], [0, 0, lam])
        fr = f[0] - cf[0]
        assert fr[0] < 0 and abs(fr[1]) < 1e-12 and abs(fr[2]) < 1e-9
        if full:
            assert np.isclose(-fr[0], 0.5 * lam, rtol=1e-12)
        else:
            assert -fr[0] < 0.5 * lam
    # a collider triangle displaced by exactly the vertex's motion: no friction
    cv = c64([[-1, -1, 0], [1, -1, 0], [0, 1, 0]])
    disp = np.tile([0.2, 0.1, 0.0], (3, 1))
    xp = x - [[0.2, 0.1, 0.0]]
    pb = vbd_problem(xp, np.zeros((0, 2)), w=c64([0.0]), y=x, cv=cv, cdisp=c64(disp),
                     tris=i64([[0, 1, 2]]), tri_radius=c64([0.1]), tri_mu=c64([0.8]),
                     c_id=np.zeros((1, CONTACT_SLOTS), np.int64), c_count=i64([1]),
                     kc=c64([200.0]))
    f, cf = kernel_forces(lib, pb, x)
    assert np.allclose(f, cf, atol=1e-9) and cf[0, 2] > 0


@FUZZ
@given(seed=SEEDS)
def test_newton_step_uses_the_finite_difference_hessian(lib, seed):
    """One sweep over one free vertex (no colliders) is one Newton step: dx = H^-1 f with H
    the Hessian of the energy (exact while its springs are stretched: the projection only
    drops the compressive part)."""
    rng = np.random.default_rng(seed)
    n = 4
    x = rng.normal(0, 0.5, (n, 3))
    springs = np.array([(0, 1), (0, 2), (0, 3)])
    L = np.linalg.norm(x[1:] - x[0], axis=1)
    rest_dir = rng.normal(size=(3, 3))
    rest_dir /= np.linalg.norm(rest_dir, axis=1)[:, None]
    pb = vbd_problem(x + rng.normal(0, 0.05, (n, 3)), springs, h=0.05, w=rng.uniform(0.5, 5, n),
                     y=x + rng.normal(0, 0.2, (n, 3)), k=rng.uniform(10, 50, 3),
                     rest=L * rng.uniform(0.5, 0.9, 3), kd=rng.uniform(0, 1, 3), rest_dir=rest_dir,
                     limit=L * c64([0.8, 2.0, 0.0]), k_limit=40.0)
    x = c64(x)
    eps = 1e-4

    def grad(z):
        g = np.zeros(3)
        for a in range(3):
            zp, zm = x.copy(), x.copy()
            zp[0] = z
            zm[0] = z
            zp[0, a] += eps
            zm[0, a] -= eps
            g[a] = (energy(zp, pb) - energy(zm, pb)) / (2 * eps)
        return g

    g0 = grad(x[0])
    H = np.zeros((3, 3))
    for a in range(3):
        e = np.zeros(3)
        e[a] = eps
        H[:, a] = (grad(x[0] + e) - grad(x[0] - e)) / (2 * eps)
    H = 0.5 * (H + H.T)
    want = x[0] - np.linalg.solve(H, g0)
    got = x.copy()
    sweep(lib, pb, got, [[0]])
    assert np.allclose(got[0], want, rtol=1e-5, atol=1e-6 * (1 + np.abs(want - x[0]).max()))
    assert np.array_equal(got[1:], x[1:])


# --------------------------------------------------------------------------- 4 sweeps


def test_sweeps_reach_the_hanging_equilibrium(lib):
    """One free vertex on one spring under a pinned vertex, w tiny (a long step): the sweeps
    converge to pin - (L + m g / k) z (exactly: L + m g / (k + w) with the inertia of a
    step that started at the rest length)."""
    m, g, k, L, h = 0.3, 9.81, 40.0, 0.5, 30.0
    pin = np.array([0.2, -0.1, 1.0])
    x_prev = c64([pin, pin - [0, 0, L]])
    w = m / h**2
    y = x_prev.copy()
    y[1] += h * h * np.array([0, 0, -g])          # x0 + h v0 + h^2 g with v0 = 0
    pb = vbd_problem(x_prev, [(0, 1)], h=h, w=c64([w, w]), y=y, k=c64([k]), rest=c64([L]))
    x = x_prev + [[0, 0, 0], [0.3, 0.1, -0.2]]
    for _ in range(100):
        sweep(lib, pb, x, [[1]])
    assert np.array_equal(x[0], pin)
    assert np.allclose(x[1], pin - [0, 0, L + m * g / (k + w)], rtol=0, atol=1e-12)
    assert np.allclose(x[1], pin - [0, 0, L + m * g / k], rtol=0, atol=m * g / k * w / k)


@FUZZ
@given(seed=SEEDS, n=st.integers(2, 5))
def test_sweeps_reach_a_hanging_chain(lib, seed, n):
    """A chain of n free vertices under a pin: spring j carries the weight below it, so
    l_j = L + (n - j) m g / k; the inertial target is set so that this is the exact
    minimiser (y = x_eq + m g / w)."""
    rng = np.random.default_rng(seed)
    m, g, k, L = 0.1, 9.81, float(rng.uniform(20, 80)), 0.2
    l = L + (n - np.arange(n)) * m * g / k
    x_eq = np.zeros((n + 1, 3))
    x_eq[1:, 2] = -np.cumsum(l)
    w = np.full(n + 1, 1e-2 * k)
    y = x_eq + (m * np.array([0, 0, -g]) / w[0])
    x = x_eq + np.r_[np.zeros((1, 3)), rng.normal(0, 0.05, (n, 3))]
    springs = [(j, j + 1) for j in range(n)]
    pb = vbd_problem(x.copy(), springs, h=0.05, w=w, y=y, k=np.full(n, k), rest=np.full(n, L))
    colors = [list(range(1, n + 1, 2)), list(range(2, n + 1, 2))]
    colors = [c for c in colors if c]
    for _ in range(3000):
        before = x.copy()
        sweep(lib, pb, x, colors)
        if np.abs(x - before).max() < 1e-13:
            break
    assert np.allclose(x, x_eq, atol=1e-9)


@FUZZ
@given(seed=SEEDS)
def test_sweep_energy_never_increases(lib, seed):
    """A small sheet under gravity falling onto a frictionless plane (guarded): the
    objective (numpy) does not rise from sweep to sweep."""
    rng = np.random.default_rng(seed)
    nx = 3
    gi, gj = np.meshgrid(np.arange(nx), np.arange(nx))
    x0 = np.c_[gi.ravel() * 0.2, gj.ravel() * 0.2, np.full(nx * nx, 0.15)]
    idx = np.arange(nx * nx).reshape(nx, nx)
    springs = np.concatenate([np.c_[idx[:, :-1].ravel(), idx[:, 1:].ravel()],
                              np.c_[idx[:-1].ravel(), idx[1:].ravel()],
                              np.c_[idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()]])
    s = len(springs)
    rest = np.linalg.norm(x0[springs[:, 0]] - x0[springs[:, 1]], axis=1)
    h, m = 1 / 30, 0.05
    v0 = np.array([0, 0, -3.0]) + rng.normal(0, 0.3, (nx * nx, 3))
    y = x0 + h * v0 + h * h * np.array([0, 0, -9.81])
    w = np.full(nx * nx, m / h**2)
    prim = np.zeros((1, 8))
    prim[0, 3:6] = [0, 0, 1]
    prim[0, 6] = 0.05
    x = c64(x0 + rng.normal(0, 0.01, x0.shape))
    pb = vbd_problem(x0, springs, h=h, w=w, y=y, k=rng.uniform(50, 300, s), rest=rest,
                     limit=1.05 * rest, k_limit=200.0, prim_type=[0], prim=prim,
                     kc=w + 300.0, anchor=x.copy(), bound=np.full(nx * nx, 10.0))
    assert np.all(x[:, 2] > 0.05)
    E = [energy(x, pb)]
    order = [list(range(nx * nx))]
    for _ in range(25):
        sweep(lib, pb, x, order)
        E.append(energy(x, pb))
    E = np.array(E)
    assert np.all(np.diff(E) <= 1e-9 * np.abs(E[:-1]) + 1e-12), E
    assert np.all(x[:, 2] > 0.0)


# --------------------------------------------------------------------------- 5 the guard


def _guard_case(rng, soup, anchors, targets, radius):
    """Detection at the anchors, the guard from there to the targets; returns the results
    and the contacts."""
    c = soup.detect(anchors, radius)
    n = len(anchors)
    pb = vbd_problem(anchors, np.zeros((0, 2)), cv=soup.cv, tris=soup.tris, closed=soup.closed,
                     tri_radius=soup.radius, tri_mu=soup.mu, prim_type=soup.prim_type,
                     prim=soup.prim, c_id=c.ids, c_count=c.count, kc=np.ones(n),
                     anchor=c.anchor, bound=c.bound)
    x = c64(anchors).copy()
    held = np.zeros(1, np.int64)
    assert kernels.library().sinew_vbd_guard(pb.struct, P(x), P(c64(targets)), P(held)) == 0
    moved = np.linalg.norm(x - anchors, axis=1)
    assert np.all(moved <= np.where(np.isfinite(c.bound), c.bound, np.inf) * (1 + 1e-12))
    ball = np.linalg.norm(targets - anchors, axis=1) > c.bound
    assert held[0] == np.count_nonzero(ball)
    return x, c, pb


def _clear_anchors(rng, count, A, B, C, lo=-2.0, hi=2.0, gap=1e-3):
    x = rng.uniform(lo, hi, (4 * count, 3))
    d = point_triangle_distance(x[:, None], A[None], B[None], C[None]).min(axis=1)
    return c64(x[d > gap][:count])


@FUZZ
@given(seed=SEEDS, count=st.integers(1, 40))
def test_guard_lets_no_vertex_cross_a_triangle(seed, count):
    rng = np.random.default_rng(seed)
    verts, tris = _soup(rng, count)
    soup = ColliderSoup([TriangleMesh(verts, tris)])
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    anchors = _clear_anchors(rng, 40, A, B, C)
    # fast vertices: targets far away, through the soup
    targets = anchors + rng.normal(0, 1, anchors.shape) * rng.choice([0.1, 1.0, 10.0], (len(anchors), 1))
    radius = c64(rng.choice([0.05, 0.5, 3.0, 30.0], len(anchors)))
    x, c, _ = _guard_case(rng, soup, anchors, targets, radius)
    assert not np.any(segment_crosses(anchors, x, A, B, C))


def test_guard_with_full_slots_shrinks_to_the_farthest_slot():
    """Twelve stacked plates above the vertices: 8 slots hold the nearest, the bound is the
    8th's distance, and a move straight up stops before the first plate."""
    rng = np.random.default_rng(11)
    plates = [np.array([[-1, -1, z], [1, -1, z], [0, 1.5, z]]) for z in np.linspace(0.1, 0.45, 12)]
    plates += [np.array([[-1, -1, z], [1, -1, z], [0, 1.5, z]]) for z in (0.5, 0.9)]
    plates += [np.array([[1.2, -3, -3], [1.2, 3, -3], [1.2, 0, 3]])]        # a wall, farther
    verts = np.concatenate(plates)
    soup = ColliderSoup([TriangleMesh(verts, np.arange(len(verts)).reshape(-1, 3))])
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    anchors = c64(np.c_[rng.uniform(-0.2, 0.2, (30, 2)), rng.uniform(-0.3, 0.05, 30)])
    anchors[:10, 2] = rng.uniform(0.13, 0.42, 10)          # between plates
    anchors = anchors[point_triangle_distance(anchors[:, None], A[None], B[None], C[None]).min(1) > 1e-3]
    targets = anchors + np.c_[rng.normal(0, 0.3, (len(anchors), 2)), rng.uniform(0.5, 3, len(anchors))]
    targets[::2] = anchors[::2] + [3.0, 0.0, 0.0]                    # sideways, through the wall
    x, c, pb = _guard_case(rng, soup, anchors, targets, np.full(len(anchors), 5.0))
    assert np.all(c.count == CONTACT_SLOTS)
    assert np.allclose(c.bound, GUARD_FRACTION * c.slot_distance[:, -1])
    assert not np.any(segment_crosses(anchors, x, A, B, C))
    # a guard that ignored the bound (unbounded) with these slots would cross the wall
    pb.set(bound=np.full(len(anchors), 1e9))
    y = c64(anchors).copy()
    kernels.library().sinew_vbd_guard(pb.struct, P(y), P(c64(targets)), P(np.zeros(1, np.int64)))
    assert np.any(segment_crosses(anchors, y, A, B, C))


@FUZZ
@given(seed=SEEDS)
def test_guard_planes_and_spheres(seed):
    rng = np.random.default_rng(seed)
    plane = Plane(rng.normal(0, 0.3, 3), rng.normal(size=3))
    sphere = Sphere(rng.normal(0, 0.5, 3), float(rng.uniform(0.2, 0.8)))
    soup = ColliderSoup([plane, sphere])
    a = rng.uniform(-2, 2, (200, 3))
    sp = (a - plane.point) @ plane.normal
    ss = np.linalg.norm(a - sphere.center, axis=1) - sphere.radius
    anchors = c64(a[(sp > 1e-3) & (ss > 1e-3)][:50])
    targets = anchors + rng.normal(0, 1, anchors.shape) * rng.choice([0.1, 1, 10], (len(anchors), 1))
    x, c, _ = _guard_case(rng, soup, anchors, targets, c64(rng.uniform(0.1, 20, len(anchors))))
    assert np.all((x - plane.point) @ plane.normal > 0)
    assert not np.any(segment_enters_sphere(anchors, x, sphere.center, sphere.radius))


@FUZZ
@given(seed=SEEDS)
def test_sweeps_of_fast_vertices_cross_nothing(lib, seed):
    """Vertices pulled hard through a soup and a sphere in one substep: the sweep's moves go
    through the guard."""
    rng = np.random.default_rng(seed)
    verts, tris = _soup(rng, 20)
    sphere = Sphere([0.0, 0.0, 0.0], 0.4)
    soup = ColliderSoup([TriangleMesh(verts, tris, thickness=0.01), sphere])
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    anchors = _clear_anchors(rng, 20, A, B, C)
    anchors = anchors[np.linalg.norm(anchors, axis=1) > 0.41]
    n = len(anchors)
    c = soup.detect(anchors, np.full(n, 1.0))
    y = anchors + rng.normal(0, 5, (n, 3))
    pb = vbd_problem(anchors, np.zeros((0, 2)), w=np.full(n, 100.0), y=y, cv=soup.cv,
                     tris=soup.tris, closed=soup.closed, tri_radius=soup.radius, tri_mu=soup.mu,
                     prim_type=soup.prim_type, prim=soup.prim, c_id=c.ids, c_count=c.count,
                     kc=np.full(n, 1e3), anchor=c.anchor, bound=c.bound)
    x = anchors.copy()
    for _ in range(3):
        sweep(lib, pb, x, [list(range(n))])
        assert not np.any(segment_crosses(anchors, x, A, B, C))
        assert not np.any(segment_enters_sphere(anchors, x, sphere.center, sphere.radius))


@FUZZ
@given(seed=SEEDS)
def test_push_out_leaves_the_thickness(lib, seed):
    """Listed vertices within a plane's, a sphere's or a triangle's thickness end on its outer
    side (distance = thickness); unlisted ones stay."""
    rng = np.random.default_rng(seed)
    n = 12
    prim = np.zeros((2, 8))
    prim[0, 3:6] = [0, 0, 1]
    prim[0, 6] = 0.05
    prim[1, :3], prim[1, 3], prim[1, 6] = [3.0, 0, 0], 0.5, 0.07
    cv = c64([[-10, -10, 0], [10, -10, 0], [0, 10, 0]]) + [0, 0, 5.0]
    x = np.zeros((n, 3))
    x[:4] = np.c_[rng.uniform(-1, 1, (4, 2)), rng.uniform(0.001, 0.049, 4)]       # plane
    dirs = rng.normal(size=(4, 3))
    dirs /= np.linalg.norm(dirs, axis=1)[:, None]
    x[4:8] = [3.0, 0, 0] + dirs * rng.uniform(0.51, 0.56, (4, 1))                  # sphere
    x[8:] = np.c_[rng.uniform(-1, 1, (4, 2)), 5.0 + rng.uniform(0.01, 0.09, 4)]    # triangle
    x[8:, 2] = np.where(np.arange(4) % 2, x[8:, 2], 10.0 - x[8:, 2])               # both sides
    x = c64(x)
    c_id = np.zeros((n, CONTACT_SLOTS), np.int64)
    c_count = np.zeros(n, np.int64)
    c_count[8:] = 1
    pb = vbd_problem(x, np.zeros((0, 2)), cv=cv, tris=i64([[0, 1, 2]]), tri_radius=c64([0.1]),
                     prim_type=[0, 1], prim=prim, c_id=c_id, c_count=c_count)
    listed = i64(np.arange(0, n, 1)[rng.random(n) < 0.7])
    y = x.copy()
    assert lib.sinew_vbd_push_out(pb.struct, len(listed), P(listed), P(y)) == 0
    rest = np.setdiff1d(np.arange(n), listed)
    assert np.array_equal(y[rest], x[rest])
    for i in listed:
        if i < 4:
            assert np.isclose(y[i, 2], 0.05) and np.allclose(y[i, :2], x[i, :2])
        elif i < 8:
            assert np.isclose(np.linalg.norm(y[i] - [3.0, 0, 0]), 0.57)
        else:
            assert np.isclose(abs(y[i, 2] - 5.0), 0.1) and np.sign(y[i, 2] - 5) == np.sign(x[i, 2] - 5)
    bad = i64([n])
    assert lib.sinew_vbd_push_out(pb.struct, 1, P(bad), P(y)) == -1


@FUZZ
@given(seed=SEEDS)
def test_shift_is_the_clusters_newton_translation(lib, seed):
    """A cluster's rigid step: springs inside it cancel; inertia and a spring to a vertex
    outside it give delta = (sum H)^-1 sum f, here along one line for a check by hand. The
    sums of a cluster's parts add up to its sums; a part translated by a shared row moves as
    the whole cluster does."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(1, 5, 3)
    x = c64([[0, 0, 0], [0.3, 0, 0], [1.0, 0, 0]])
    y = x + np.c_[rng.normal(0, 0.2, 3), np.zeros(3), np.zeros(3)]
    k = rng.uniform(10, 50, 2)
    pb = vbd_problem(x, [(0, 1), (1, 2)], w=w, y=y, k=k, rest=c64([0.3, 0.5]))
    cluster = i64([0, 0, -1])
    leave = leaving(pb, cluster)
    sums = np.full((1, 9), np.nan)
    assert lib.sinew_vbd_cluster_sums(pb.struct, 1, P(i64([0, 2])), P(i64([0, 1])), P(cluster),
                                      ctypes.addressof(leave.struct), P(x), P(sums)) == 0
    # along x: f = sum w (y - x) + k1 (l - L) (spring 1-2 stretched 0.7 > 0.5); H = sum w + k1
    F = np.sum(w[:2] * (y[:2, 0] - x[:2, 0])) + k[1] * (0.7 - 0.5)
    Hs = w[0] + w[1] + k[1]
    side = w[0] + w[1] + k[1] * (1 - 0.5 / 0.7)  # the stretched spring's projected Hessian
    assert np.allclose(sums[0], [F, 0, 0, Hs, side, side, 0, 0, 0], atol=1e-12)
    parts = np.full((2, 9), np.nan)
    assert lib.sinew_vbd_cluster_sums(pb.struct, 2, P(i64([0, 1, 2])), P(i64([0, 1])), P(cluster),
                                      ctypes.addressof(leave.struct), P(x), P(parts)) == 0
    assert np.allclose(parts.sum(axis=0), sums[0], atol=1e-12)
    xs = x.copy()
    held = np.zeros(1, np.int64)
    assert lib.sinew_vbd_translate(pb.struct, 1, P(i64([0, 2])), P(i64([0, 1])), P(sums), None,
                                   P(xs), P(held)) == 0
    assert np.allclose(xs[:2] - x[:2], [[F / Hs, 0, 0]] * 2, atol=1e-12)
    assert np.array_equal(xs[2], x[2]) and held[0] == 0
    xp = x.copy()                # the two vertices as two parts sharing row 0
    assert lib.sinew_vbd_translate(pb.struct, 2, P(i64([0, 1, 2])), P(i64([0, 1])), P(sums),
                                   P(i64([0, 0])), P(xp), P(held)) == 0
    assert np.array_equal(xp, xs)
    bad = i64([0, 2])            # vertex 2 is pinned (cluster -1)
    assert lib.sinew_vbd_cluster_sums(pb.struct, 1, P(i64([0, 2])), P(bad), P(cluster),
                                      ctypes.addressof(leave.struct), P(x), P(sums)) == -1
    assert lib.sinew_vbd_translate(pb.struct, 1, P(i64([0, 1])), P(i64([3])), P(sums), None,
                                   P(xs), P(held)) == -1


def _chain_iteration(n=13, seed=0):
    """A hanging chain of n vertices (0 pinned) with inertia pulling it aside, cut into four
    slabs of consecutive vertices (no spring joins two slabs of one parity), and the coarse
    correction's stages: the whole chain in three parts, then clusters of three vertices,
    every other one per stage. Returns (problem, phase_off, sweeps, stages, keep)."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 3))
    x[:, 2] = -0.1 * np.arange(n)
    springs = [(j, j + 1) for j in range(n - 1)]
    w = np.r_[0.0, np.full(n - 1, 2.0)]
    y = x + np.r_[np.zeros((1, 3)), rng.normal(0, 0.05, (n - 1, 3))]
    pb = vbd_problem(x, springs, w=w, y=y, k=np.full(n - 1, 300.0), rest=np.full(n - 1, 0.1))
    keep = []

    def keep_(a):
        keep.append(a)
        return a.ctypes.data

    free = np.arange(1, n)
    slabs = np.array_split(free, 4)
    visit = [slabs[0], slabs[2], slabs[1], slabs[3]]
    sweeps = []
    for sl in visit:
        colours = [sl[sl % 2 == 0], sl[sl % 2 == 1]]
        verts = i64(np.concatenate(colours))
        sweeps.append(kernels.VbdSweep(2, keep_(i64([0, len(colours[0]), len(verts)])), keep_(verts)))
    sweeps = (kernels.VbdSweep * 4)(*sweeps)
    whole = i64(np.r_[-1, np.zeros(n - 1, np.int64)])
    cells = i64(np.r_[-1, (free - 1) // 3])
    leave_whole, leave_cells = leaving(pb, whole), leaving(pb, cells)
    keep += [leave_whole, leave_cells]
    stages = [kernels.VbdStage(3, keep_(i64([0, 4, 8, 12])), keep_(i64(free)), keep_(whole),
                               ctypes.addressof(leave_whole.struct), keep_(np.zeros((3, 9))), 1,
                               keep_(np.zeros((12, 9))))]
    for first in (0, 1):
        ids = np.arange(first, 4, 2)
        verts = i64(np.concatenate([free[3 * c:3 * c + 3] for c in ids]))
        stages.append(kernels.VbdStage(len(ids), keep_(i64(3 * np.arange(len(ids) + 1))), keep_(verts),
                                       keep_(cells), ctypes.addressof(leave_cells.struct),
                                       keep_(np.zeros((len(ids), 9))), 0, None))
    stages = (kernels.VbdStage * 3)(*stages)
    return pb, i64([0, 2, 4]), sweeps, stages, keep


def _iteration_by_hand(lib, pb, sweeps, stages, x):
    """One of sinew_vbd_iterate's iterations on x in place, by the single calls in turn: the
    slabs' sweeps, then each stage's cluster sums (a whole chain's parts added in order) and
    translations."""
    held = np.zeros(1, np.int64)
    for k in range(len(sweeps)):
        sw = sweeps[k]
        assert lib.sinew_vbd_sweep(pb.struct, sw.ncolors, sw.color_off, sw.color_vertices, P(x), P(held)) == 0
    for st_ in stages:
        sums = np.zeros((st_.groups, 9))
        assert lib.sinew_vbd_cluster_sums(pb.struct, st_.groups, st_.off, st_.vertices, st_.cluster,
                                          st_.leave, P(x), P(sums)) == 0
        rows = sums
        if st_.whole:   # (in the kernel's order: part 0, then 1, then 2)
            rows = c64([sums[0] + sums[1] + sums[2]])
        every = np.zeros(st_.groups, np.int64)  # (a whole chain's parts: each moves by the total)
        assert lib.sinew_vbd_translate(pb.struct, st_.groups, st_.off, st_.vertices, P(rows),
                                       P(every) if st_.whole else None, P(x), P(held)) == 0


def test_team_iterations_are_the_stages_in_order_at_any_thread_count(lib):
    """sinew_vbd_iterate on a team of one does what the single calls do in turn (the slabs'
    sweeps, then each stage's cluster sums, the whole chain's parts added in order, and
    translations); on teams of two, three and four, the same positions bit for bit."""
    pb, phase_off, sweeps, stages, keep = _chain_iteration()
    x0 = pb.get("x_prev") + [0.01, 0.0, 0.0]
    x0[0] = pb.get("x_prev")[0]
    # by hand: four iterations of the single calls
    want = c64(x0.copy())
    for _ in range(4):
        _iteration_by_hand(lib, pb, sweeps, stages, want)
    assert not np.array_equal(want, x0)
    for threads in (1, 2, 3, 4):
        x = c64(x0.copy())
        clipped = np.zeros(threads, np.int64)
        workers = kernels.Workers(threads)
        done = workers.team(lambda team, t, x=x, clipped=clipped: lib.sinew_vbd_iterate(
            pb.struct, team, t, 2, P(phase_off), ctypes.addressof(sweeps), 3, ctypes.addressof(stages), None,
            4, P(x), clipped.ctypes.data + 8 * t), threads, "VBD iterations")
        workers.close()
        assert done == 4 and np.all(clipped == 0)
        assert np.array_equal(x, want), threads


@pytest.mark.parametrize("memory", [1, 3])
def test_team_iterations_with_anderson_are_its_steps_through_the_guard(lib, memory):
    """sinew_vbd_iterate with an Anderson history: each iteration is the map G (the single
    calls in turn), then Anderson's step written out in numpy (γ from the regularised normal
    equations over the last ``memory`` differences of f = G(x) − x; the history restarts
    where |f| grew) taken through the guard (sinew_vbd_guard); the same at every thread
    count, bit for bit; a hard pin outside its ball left at its target; refused with a
    history of another size, and with self-contact on more than one thread."""
    pb, phase_off, sweeps, stages, keep = _chain_iteration()
    n = len(pb.get("x_prev"))
    x0 = pb.get("x_prev") + [0.01, 0.0, 0.0]
    x0[0] = pb.get("x_prev")[0]
    want = c64(x0.copy())
    fs, gs, last, restarts = [], [], np.inf, 0
    for _ in range(6):
        before = want.copy()
        _iteration_by_hand(lib, pb, sweeps, stages, want)
        f = (want - before).ravel()
        size = np.sqrt(f @ f)
        if size > last or not fs:
            restarts += bool(fs)
            fs, gs = [f], [want.ravel().copy()]
        else:
            fs, gs = (fs + [f])[-memory - 1:], (gs + [want.ravel().copy()])[-memory - 1:]
            d_f, d_g = np.diff(fs, axis=0), np.diff(gs, axis=0)
            gram = d_f @ d_f.T
            gram += (1e-10 * np.trace(gram) + 1e-300) * np.eye(len(d_f))
            target = c64((gs[-1] - np.linalg.solve(gram, d_f @ fs[-1]) @ d_g).reshape(n, 3))
            held = np.zeros(1, np.int64)
            assert lib.sinew_vbd_guard(pb.struct, P(want), P(target), P(held)) == 0 and held[0] == 0
        last = size
    results = []
    for threads in (1, 2, 3):
        x = c64(x0.copy())
        aa = kernels.Anderson(memory, x.shape)
        clipped = np.zeros(threads, np.int64)
        workers = kernels.Workers(threads)
        done = workers.team(lambda team, t, x=x, clipped=clipped, aa=aa: lib.sinew_vbd_iterate(
            pb.struct, team, t, 2, P(phase_off), ctypes.addressof(sweeps), 3, ctypes.addressof(stages),
            ctypes.addressof(aa.struct), 6, P(x), clipped.ctypes.data + 8 * t), threads, "VBD iterations")
        workers.close()
        assert done == 6 and np.all(clipped == 0)
        assert np.abs(x - want).max() <= 1e-12 * np.abs(want).max()
        results.append(x)
    assert all(np.array_equal(r, results[0]) for r in results)
    assert not np.allclose(results[0], _plain_iterations(lib, pb, sweeps, stages, x0, 6), atol=1e-12)
    # a hard pin (no sweep moves it) whose target lies outside its ball stays at its target
    anchor = c64(pb.get("x_prev").copy())
    anchor[0] += [1.0, 0.0, 0.0]
    bound = np.full(n, np.inf)
    bound[0] = 1e-3
    pb.set(anchor=anchor, bound=bound)
    x = c64(x0.copy())
    aa = kernels.Anderson(memory, x.shape)
    workers = kernels.Workers(1)
    workers.team(lambda team, t: lib.sinew_vbd_iterate(
        pb.struct, team, t, 2, P(phase_off), ctypes.addressof(sweeps), 3, ctypes.addressof(stages),
        ctypes.addressof(aa.struct), 6, P(x), clipped.ctypes.data), 1, "VBD iterations")
    workers.close()
    assert np.array_equal(x[0], x0[0]) and np.array_equal(x, results[0])
    for bad, selfish in ((kernels.Anderson(memory, (n + 1, 3)), False), (kernels.Anderson(memory, (n, 3)), True)):
        if selfish:  # (self-contact's guard reads the other vertices' moves: one thread only)
            pb.set(self_r=0.01)
        x = c64(x0.copy())
        workers = kernels.Workers(2 if selfish else 1)
        clipped = np.zeros(2, np.int64)
        with pytest.raises(SinewError, match="index out of range"):
            workers.team(lambda team, t, x=x, bad=bad, clipped=clipped: lib.sinew_vbd_iterate(
                pb.struct, team, t, 2, P(phase_off), ctypes.addressof(sweeps), 3, ctypes.addressof(stages),
                ctypes.addressof(bad.struct), 1, P(x), clipped.ctypes.data + 8 * t), 2 if selfish else 1,
                "VBD iterations")
        workers.close()
        assert np.array_equal(x, x0)


def _plain_iterations(lib, pb, sweeps, stages, x0, count):
    x = c64(x0.copy())
    for _ in range(count):
        _iteration_by_hand(lib, pb, sweeps, stages, x)
    return x


def test_team_found_contended_runs_on_one_thread_for_a_while(lib, monkeypatch):
    """A team whose thread 0 waits at a barrier far longer than a time slice (thread 1 starts
    late, as a thread without a core would) is marked contended: Workers then gives the calls
    of the next SOLO_SECONDS one thread, with the same positions bit for bit, and the threads
    again after them; found contended again at once, twice as long; a run that meets at once
    shortens the next spell by SOLO_DECAY. A team that meets at once is not marked. (A clock
    of the test's: each call on one thread lasts an eighth of a spell.)"""
    import time

    monkeypatch.setattr(kernels, "SOLO_SECONDS", 1.0)
    monkeypatch.setattr(kernels, "SOLO_SECONDS_MAX", 8.0)
    monkeypatch.setattr(kernels, "SOLO_DECAY", 0.25)
    reads = [0]

    def clock():  # each call on one thread reads it before and after: 0.125 s a call
        reads[0] += 1
        return 0.125 * reads[0]

    monkeypatch.setattr(kernels, "_clock", clock)
    pb, phase_off, sweeps, stages, keep = _chain_iteration()
    x0 = c64(pb.get("x_prev") + [0.01, 0.0, 0.0])

    def run(workers, threads, late=0.0):
        x = c64(x0.copy())
        clipped = np.zeros(2, np.int64)

        def call(team, t):
            if t == 1 and late:
                time.sleep(late)
            return lib.sinew_vbd_iterate(pb.struct, team, t, 2, P(phase_off), ctypes.addressof(sweeps), 3,
                                         ctypes.addressof(stages), None, 4, P(x), clipped.ctypes.data + 8 * t)

        assert workers.team(call, threads, "VBD iterations") == 4
        return x

    alone = run(kernels.Workers(1), 1)
    workers = kernels.Workers(2)
    assert np.array_equal(run(workers, 2), alone) and workers.contended == 0 and workers.now(2) == 2

    def solo_spell(calls):
        for _ in range(calls):
            assert workers.now(2) == 1 and workers.parts(1000, 1) == 1
            assert np.array_equal(run(workers, 2), alone)
        assert workers.now(2) == 2 and workers.parts(1000, 1) == 2

    assert np.array_equal(run(workers, 2, late=0.1), alone)
    assert workers.contended == 1
    solo_spell(8)  # 1 s of calls of 0.125 s
    assert np.array_equal(run(workers, 2, late=0.1), alone)  # contended again at once
    assert workers.contended == 2
    solo_spell(16)
    assert np.array_equal(run(workers, 2), alone) and workers.contended == 2  # met at once
    assert np.array_equal(run(workers, 2, late=0.1), alone)
    assert workers.contended == 3
    solo_spell(30)  # 4 s less the decay of 0.25 s
    workers.close()
    team = np.zeros(int(lib.sinew_team_size()) // 8 + 1, np.int64)
    assert lib.sinew_team_init(team.ctypes.data, 2) == 0 and lib.sinew_team_contended(team.ctypes.data) == 0


def test_team_stops_together_on_a_bad_index_and_on_cancel(lib):
    """A vertex index out of range in one thread's slab: every thread of the team leaves
    with the error (none waits forever at a barrier) and Workers.team raises. A team
    cancelled while its thread 0 waits at a barrier for a thread that never started:
    thread 0 leaves with SINEW_E_CANCELLED."""
    import threading

    pb, phase_off, sweeps, stages, keep = _chain_iteration()
    bad = i64([0, 1, 2])
    bad_verts = i64([5, 99])
    keep += [bad, bad_verts]
    sweeps[3] = kernels.VbdSweep(2, bad.ctypes.data, bad_verts.ctypes.data)  # the last slab, thread 1's
    x = c64(pb.get("x_prev").copy())
    workers = kernels.Workers(2)
    clipped = np.zeros(2, np.int64)
    with pytest.raises(SinewError, match="index out of range"):
        workers.team(lambda team, t: lib.sinew_vbd_iterate(
            pb.struct, team, t, 2, P(phase_off), ctypes.addressof(sweeps), 3, ctypes.addressof(stages), None,
            3, P(x), clipped.ctypes.data + 8 * t), 2, "VBD iterations")
    workers.close()
    # a thread that raises before its call (a Python error in it) cancels the others: thread 0
    # leaves its barrier, and the error comes out
    workers = kernels.Workers(2)

    def broken(team, t):
        if t == 1:
            raise ValueError("thread 1 never calls")
        return lib.sinew_vbd_iterate(pb.struct, team, t, 2, P(phase_off), ctypes.addressof(sweeps), 3,
                                     ctypes.addressof(stages), None, 3, P(x), clipped.ctypes.data)

    with pytest.raises(ValueError, match="never calls"):
        workers.team(broken, 2, "VBD iterations")
    workers.close()
    team = np.zeros(int(lib.sinew_team_size()) // 8 + 1, np.int64)
    assert lib.sinew_team_init(team.ctypes.data, 0) == -1
    assert lib.sinew_team_init(team.ctypes.data, 2) == 0
    assert lib.sinew_vbd_iterate(pb.struct, team.ctypes.data, 2, 2, P(phase_off), ctypes.addressof(sweeps),
                                 3, ctypes.addressof(stages), None, 1, P(x), P(clipped)) == -1  # no thread 2 of 2
    assert lib.sinew_team_init(team.ctypes.data, 2) == 0
    result = []
    held = np.zeros(1, np.int64)
    alone = threading.Thread(target=lambda: result.append(lib.sinew_vbd_iterate(
        pb.struct, team.ctypes.data, 0, 2, P(phase_off), ctypes.addressof(sweeps), 3,
        ctypes.addressof(stages), None, 1, P(x), P(held))))
    alone.start()
    lib.sinew_team_cancel(team.ctypes.data)
    alone.join(timeout=120)
    assert not alone.is_alive() and result == [-3]


# --------------------------------------------------------------------------- 6 strain limit


def strain_project(lib, x, springs, limit, inv, rounds, tol, guard=None, slab_off=None, team=None, thread=0):
    """sinew_strain_project on ``x`` in place (one slab and a team of one unless given)."""
    off = i64([0, len(springs)]) if slab_off is None else slab_off
    return lib.sinew_strain_project(team, thread, len(x), len(springs), P(springs), P(limit), P(inv),
                                    len(off) - 1, P(off), rounds, tol, guard, P(x))


def _strain_net(rng, kind):
    if kind == "chain":
        n = int(rng.integers(2, 12))
        rest = np.c_[np.arange(n) * 0.1, np.zeros(n), np.zeros(n)]
        springs = np.c_[np.arange(n - 1), np.arange(1, n)]
    else:
        m = int(rng.integers(2, 5))
        gi, gj = np.meshgrid(np.arange(m), np.arange(m))
        rest = np.c_[gi.ravel() * 0.1, gj.ravel() * 0.1, np.zeros(m * m)]
        idx = np.arange(m * m).reshape(m, m)
        springs = np.concatenate([np.c_[idx[:, :-1].ravel(), idx[:, 1:].ravel()],
                                  np.c_[idx[:-1].ravel(), idx[1:].ravel()]])
        n = m * m
    rest = rest + rng.normal(0, 0.01, rest.shape)
    L = np.linalg.norm(rest[springs[:, 0]] - rest[springs[:, 1]], axis=1)
    limit = (1 + rng.uniform(0.0, 0.2, len(L))) * L
    limit[rng.random(len(L)) < 0.1] = 0.0                        # no limit
    inv = rng.uniform(0.5, 5, n)
    pinned = rng.random(n) < 0.25
    inv[pinned] = 0.0
    # stretched: pinned vertices where the rest shape has them (a feasible set exists)
    x = rest * rng.uniform(1.0, 2.5) + rng.normal(0, 0.05, rest.shape)
    x[pinned] = rest[pinned]
    return c64(x), i64(springs), c64(limit), c64(inv), pinned


@FUZZ
@given(seed=SEEDS, kind=st.sampled_from(["chain", "grid"]))
def test_strain_projection_meets_the_limit(lib, seed, kind):
    rng = np.random.default_rng(seed)
    x, springs, limit, inv, pinned = _strain_net(rng, kind)
    before = x.copy()
    tol = 1e-3
    over = strain_project(lib, x, springs, limit, inv, 5000, tol)
    l = np.linalg.norm(x[springs[:, 0]] - x[springs[:, 1]], axis=1)
    has = limit > 0
    assert over == 0
    assert np.all(l[has] <= limit[has] * (1 + tol) + 1e-12)
    assert np.array_equal(x[pinned], before[pinned])
    # springs within their limits: nothing moves
    y = x.copy()
    assert strain_project(lib, y, springs, c64(np.full(len(springs), 1e3)), inv, 5, tol) == 0
    assert np.array_equal(y, x)


@FUZZ
@given(seed=SEEDS)
def test_strain_projection_through_the_guard(lib, seed):
    """A chain draped across a sphere and through a wall triangle, stretched: the projection
    pulls its ends together but no vertex enters the sphere, crosses the wall or the plane."""
    rng = np.random.default_rng(seed)
    n = 9
    t = np.linspace(-1, 1, n)
    x = c64(np.c_[1.6 * t, rng.normal(0, 0.05, n), 0.5 + 0.3 * np.cos(t * np.pi / 2)])
    x[n // 2, 2] = 0.75                                              # over the sphere's top
    springs = i64(np.c_[np.arange(n - 1), np.arange(1, n)])
    limit = np.full(n - 1, 0.05)
    inv = np.ones(n)
    plane = Plane([0, 0, 0.0], [0, 0, 1.0])
    sphere = Sphere([0.0, 0.0, 0.3], 0.4)
    wall = np.array([[0.9, -1.0, -0.5], [0.9, 1.0, -0.5], [0.9, 0.0, 2.0]])
    soup = ColliderSoup([plane, sphere, TriangleMesh(wall, [[0, 1, 2]])])
    anchors = x.copy()
    assert not np.any(segment_enters_sphere(anchors, anchors, sphere.center, sphere.radius))
    c = soup.detect(anchors, np.full(n, 5.0))
    pb = vbd_problem(anchors, np.zeros((0, 2)), cv=soup.cv, tris=soup.tris, closed=soup.closed,
                     tri_radius=soup.radius, tri_mu=soup.mu, prim_type=soup.prim_type,
                     prim=soup.prim, c_id=c.ids, c_count=c.count, kc=np.ones(n),
                     anchor=c.anchor, bound=c.bound)
    over = strain_project(lib, x, springs, limit, inv, 200, 1e-3, pb.struct)
    assert over > 0                                       # held back: it cannot shrink through
    assert np.all(x[:, 2] > 0)
    assert not np.any(segment_enters_sphere(anchors, x, sphere.center, sphere.radius))
    A, B, C = (soup.cv[soup.tris[:, k]] for k in range(3))
    assert not np.any(segment_crosses(anchors, x, A, B, C))
    assert np.all(np.linalg.norm(x - anchors, axis=1) <= c.bound * (1 + 1e-12))


def test_strain_projection_refuses_bad_indices_and_slabs(lib):
    x = c64(np.zeros((2, 3)) + [[0, 0, 0], [1, 0, 0]])
    before = x.copy()
    limit, inv = c64([0.5]), c64([1, 1])
    for bad in ([0, -1], [0, 2]):
        assert strain_project(lib, x, i64([bad]), limit, inv, 10, 1e-3) == -1
    # a stretched spring before the bad one: refused before it moves anything
    assert strain_project(lib, x, i64([[0, 1], [1, 2]]), c64([0.5, 0.5]), inv, 10, 1e-3) == -1
    springs = i64([[0, 1]])
    for off in ([0, 0], [1, 1], [0, 1, 0]):  # the slabs must cover the springs in order
        assert strain_project(lib, x, springs, limit, inv, 10, 1e-3, slab_off=i64(off)) == -1
    assert np.array_equal(x, before)
    # a guard with self-contact pairs on a team of two: refused (a move's test reads others)
    pb = vbd_problem(x, np.zeros((0, 2)))
    pb.set(self_r=0.01, inc_off=i64([0, 0, 0]))
    team = np.zeros(int(lib.sinew_team_size()) // 8 + 1, np.int64)
    assert lib.sinew_team_init(team.ctypes.data, 2) == 0
    assert strain_project(lib, x, springs, limit, inv, 10, 1e-3, pb.struct, team=team.ctypes.data) == -1
    assert np.array_equal(x, before)


def _strain_sheet(rng, m, slabs):
    """An m × m sheet shaken past its limits, a quarter of its edge row pinned, its
    structural springs in ``slabs`` slabs of rows as vbd._Layout orders them (a spring joining
    two slabs with the lower one); returns (x, springs, limit, inv, slab_off, pinned)."""
    gi, gj = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    rest = np.c_[gi.ravel() * 0.1, gj.ravel() * 0.1, np.zeros(m * m)]
    idx = np.arange(m * m).reshape(m, m)
    springs = np.concatenate([np.c_[idx[:, :-1].ravel(), idx[:, 1:].ravel()],
                              np.c_[idx[:-1].ravel(), idx[1:].ravel()]])
    row_slab = np.arange(m) * slabs // m
    inv = rng.uniform(0.5, 2.0, m * m)
    pinned = np.zeros(m * m, bool)
    pinned[idx[0, : m // 4]] = True
    inv[pinned] = 0.0
    home = np.minimum(row_slab[springs[:, 0] // m], row_slab[springs[:, 1] // m])
    order = np.argsort(home, kind="stable")
    springs, home = springs[order], home[order]
    L = np.linalg.norm(rest[springs[:, 0]] - rest[springs[:, 1]], axis=1)
    limit = 1.05 * L
    x = rest * rng.uniform(1.0, 1.05) + rng.normal(0, 0.01, rest.shape)
    x[pinned] = rest[pinned]
    return (c64(x), i64(springs), c64(limit), c64(inv), i64(np.searchsorted(home, np.arange(slabs + 1))),
            pinned)


@FUZZ
@given(seed=SEEDS, slabs=st.sampled_from([2, 3, 4, 8]))
def test_strain_projection_in_slabs_is_the_same_at_any_thread_count(lib, seed, slabs):
    """A sheet's projection slab by slab (the even slabs, then the odd ones) meets the limit,
    leaves the pins where they are, and gives the same positions bit for bit on teams of one
    to four threads as called alone."""
    rng = np.random.default_rng(seed)
    x0, springs, limit, inv, off, pinned = _strain_sheet(rng, 16, slabs)
    want = x0.copy()
    tol = 1e-3
    assert strain_project(lib, want, springs, limit, inv, 5000, tol, slab_off=off) == 0
    l = np.linalg.norm(want[springs[:, 0]] - want[springs[:, 1]], axis=1)
    assert np.all(l <= limit * (1 + tol) + 1e-12)
    assert np.array_equal(want[pinned], x0[pinned])
    for threads in (1, 2, 3, 4):
        x = x0.copy()
        workers = kernels.Workers(threads)
        over = workers.team(lambda team, t, x=x: strain_project(lib, x, springs, limit, inv, 5000, tol,
                                                                slab_off=off, team=team, thread=t),
                            threads, "strain limit")
        workers.close()
        assert over == 0 and np.array_equal(x, want), threads


# --------------------------------------------------------------------------- 7 colouring


@FUZZ
@given(seed=SEEDS, n=st.integers(0, 40), density=st.floats(0.0, 0.5))
def test_colouring_is_proper(lib, seed, n, density):
    rng = np.random.default_rng(seed)
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < density],
                     np.int64).reshape(-1, 2)
    off, _, oth = adjacency(n, pairs)
    active = (rng.random(n) < 0.8).astype(np.uint8)
    color = np.full(max(n, 1), 99, np.int64)
    deg = int(np.diff(off).max(initial=0))
    scratch = np.zeros(deg + 2, np.uint8)
    nc = lib.sinew_color_greedy(n, P(off), P(oth), P(active), P(color), P(scratch), len(scratch))
    color = color[:n]
    assert nc >= 0
    act = active.astype(bool)
    assert np.all(color[~act] == -1)
    assert np.all((color[act] >= 0) & (color[act] < nc))
    assert nc == (color.max(initial=-1) + 1)
    assert nc <= deg + 1
    for a, b in pairs:
        if act[a] and act[b]:
            assert color[a] != color[b]


def test_colouring_capacity_and_bad_index(lib):
    # a triangle needs 3 colours: 2 bytes of scratch are too few
    off, _, oth = adjacency(3, [(0, 1), (1, 2), (0, 2)])
    act = np.ones(3, np.uint8)
    color = np.zeros(3, np.int64)
    assert lib.sinew_color_greedy(3, P(off), P(oth), P(act), P(color), P(np.zeros(2, np.uint8)), 2) == -2
    assert lib.sinew_color_greedy(3, P(off), P(oth), P(act), P(color), P(np.zeros(4, np.uint8)), 4) == 3
    bad = oth.copy()
    bad[0] = 7
    assert lib.sinew_color_greedy(3, P(off), P(bad), P(act), P(color), P(np.zeros(4, np.uint8)), 4) == -1


# --------------------------------------------------------------------------- 8 input checks


@st.composite
def _shapes(draw):
    ndim = draw(st.integers(0, 3))
    return tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(shape=_shapes(), spec=st.lists(st.sampled_from([-1, 0, 1, 2, 3]), min_size=1, max_size=3),
       bad=st.sampled_from([None, np.nan, np.inf, -np.inf]))
def test_array_refuses_wrong_shapes_and_non_finite(shape, spec, bad):
    value = np.ones(shape)
    if bad is not None and value.size:
        value.flat[value.size // 2] = bad
    fits = len(shape) == len(spec) and all(s in (-1, d) for s, d in zip(spec, shape))
    should = fits and (bad is None or value.size == 0)
    if should:
        a = kernels.array(value, np.float64, tuple(spec), "v")
        assert a.flags.c_contiguous and a.dtype == np.float64 and a.shape == shape
    else:
        with pytest.raises(SinewError):
            kernels.array(value, np.float64, tuple(spec), "v")
    if fits:   # non-finite values pass where finite=False (bound: inf means unguarded)
        assert kernels.array(value, np.float64, tuple(spec), "v", finite=False).shape == shape


def test_array_returns_the_same_array_when_it_fits():
    a = np.zeros((4, 3))
    assert kernels.array(a, np.float64, (-1, 3), "a") is a
    b = np.zeros((3, 4)).T            # not C-contiguous: copied
    assert kernels.array(b, np.float64, (4, 3), "b").flags.c_contiguous
    with pytest.raises(SinewError):
        kernels.address(b)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(sorted({**kernels.VbdProblem._FLOAT, **kernels.VbdProblem._INT}) + ["bogus", "xprev"]),
       shape=_shapes(), bad=st.booleans())
def test_vbd_problem_set_refuses_before_any_c(name, shape, bad):
    pb = vbd_problem(np.zeros((2, 3)), [(0, 1)])
    rows = kernels.VbdProblem._ROWS
    table = {**kernels.VbdProblem._FLOAT, **kernels.VbdProblem._INT}
    def fields():
        return {f: getattr(pb.struct, f) for f, _ in pb.struct._fields_ if f != "springs"}

    before = fields()
    value = np.ones(shape)
    if bad and value.size and name in kernels.VbdProblem._FLOAT:
        value.flat[0] = np.nan
    spec = table.get(name)
    fits = spec is not None and len(spec) == len(shape) and all(s in (-1, d) for s, d in zip(spec, shape))
    fits = fits and (name not in rows or shape[0] == 2 + rows[name])   # one row per vertex
    nonfinite = bad and value.size and name in kernels.VbdProblem._FLOAT and name != "bound"
    if fits and not nonfinite:
        pb.set(**{name: value})
        assert pb.get(name).shape == shape
    else:
        with pytest.raises(SinewError):
            pb.set(**{name: value})
        # nothing changed in the struct the kernels read
        assert fields() == before


def test_vbd_problem_scalars_and_clearing():
    pb = vbd_problem(np.zeros((2, 3)), [(0, 1)])
    for name in ("h", "k_limit", "eps_u"):
        with pytest.raises(SinewError):
            pb.set(**{name: float("nan")})
    pb.set(k_limit=3.0)
    assert pb.struct.k_limit == 3.0
    pb.set(cdisp=None)
    assert pb.struct.cdisp is None
    pb.set(c_id=np.zeros((2, 5), np.int64), prim_type=np.zeros(3, np.int32))
    assert pb.struct.kslots == 5 and pb.struct.np == 3


def test_spring_rows_are_checked_before_any_c_runs():
    """SpringRows refuses offsets that do not rise from 0, rows or other ends out of range,
    arrays of the wrong length and NaN; a problem takes rows for its own vertex count only."""
    def rows(**change):
        a = dict(off=[0, 1, 2], row=[1, 0], other=[0, 1], k=[1.0, 1.0], rest=[1.0, 1.0],
                 kd=[0.0, 0.0], rest_dir=[[1.0, 0, 0], [-1.0, 0, 0]], limit=[0.0, 0.0])
        a.update(change)
        return kernels.SpringRows(2, **a)

    rows()
    for bad in (dict(off=[1, 1, 2]), dict(off=[0, 2, 1]), dict(row=[0, 2]), dict(row=[-1, 0]),
                dict(other=[0, 2]), dict(k=[1.0]), dict(rest=[1.0, np.nan]), dict(rest_dir=[[1.0, 0, 0]]),
                dict(row=[0, 1, 1])):
        with pytest.raises(SinewError):
            rows(**bad)
    pb = vbd_problem(np.zeros((3, 3)), [(0, 1)])
    with pytest.raises(SinewError):
        pb.set(springs=rows())


def test_vbd_problem_copy_keeps_the_arrays_and_takes_its_own_step():
    """A copy holds the same arrays (the struct points at them) and its own time step; setting
    an array on the copy leaves the original as it was."""
    pb = vbd_problem(np.zeros((2, 3)), [(0, 1)], h=0.05)
    out = pb.copy(0.01)
    assert out.struct.h == 0.01 and pb.struct.h == 0.05
    def fields(st):
        return {f: getattr(st, f) for f, _ in st._fields_ if f not in ("h", "springs")}

    assert fields(out.struct) == fields(pb.struct)
    assert fields(out.struct.springs) == fields(pb.struct.springs)
    assert out.springs is pb.springs and out.get("x_prev") is pb.get("x_prev")
    out.set(w=np.full(2, 3.0))
    assert np.array_equal(pb.get("w"), np.ones(2)) and pb.struct.w != out.struct.w
    with pytest.raises(SinewError):
        pb.copy(float("nan"))


@pytest.mark.parametrize("memory,shape", [(4, (17, 3)), (1, (5, 1)), (3, (700, 3))])
def test_anderson_against_its_formula(memory, shape):
    """sinew_anderson (kernels.Anderson) against Anderson's type-II step written out in
    numpy (Walker & Ni 2011) on random iterates: the weights γ solve the regularised normal
    equations (ΔFᵀΔF + εI) γ = ΔFᵀ fₖ over the last ``memory`` differences (the ring wraps
    around; 700 × 3 entries span three blocks of the dot products), and the iterate and the
    second vector are G(xₖ) − Σ γᵢ ΔGᵢ and S G(xₖ) − Σ γᵢ S ΔGᵢ; the first call, and the
    first after clear(), return G(xₖ) itself; the history starts again from there."""
    rng = np.random.default_rng(memory)
    aa = kernels.Anderson(memory, shape)
    gs, fs, ss = [], [], []
    for k in range(9):
        if k == 5:
            aa.clear()
            gs, fs, ss = [], [], []
        g = np.asfortranarray(rng.standard_normal(shape))
        f = np.asfortranarray(rng.standard_normal(shape))
        sg = np.asfortranarray(rng.standard_normal(shape))
        gs.append(g.ravel(order="F"))
        fs.append(f.ravel(order="F"))
        ss.append(sg.ravel(order="F"))
        x, sx = aa.extrapolate(g, f, sg)
        if len(gs) == 1:
            assert x is g and sx is sg
            continue
        n = len(gs) - 1
        q = min(n, memory)
        d_f = np.array([fs[i + 1] - fs[i] for i in range(n - q, n)])
        d_g = np.array([gs[i + 1] - gs[i] for i in range(n - q, n)])
        d_s = np.array([ss[i + 1] - ss[i] for i in range(n - q, n)])
        gram = d_f @ d_f.T
        gram += (1e-10 * np.trace(gram) + 1e-300) * np.eye(q)
        gam = np.linalg.solve(gram, d_f @ fs[-1])
        want_x = (gs[-1] - gam @ d_g).reshape(shape, order="F")
        want_s = (ss[-1] - gam @ d_s).reshape(shape, order="F")
        assert np.abs(x - want_x).max() <= 1e-9 * np.abs(want_x).max()
        assert np.abs(sx - want_s).max() <= 1e-9 * np.abs(want_s).max()
    # without the second vector, and the same iterates taken as one flat column
    flat = kernels.Anderson(memory, (g.size, 1))
    for gv, fv in zip(gs, fs):
        x, none = flat.extrapolate(gv.reshape(-1, 1), fv.reshape(-1, 1), None)
        assert none is None
    assert np.abs(x.ravel() - want_x.ravel(order="F")).max() <= 1e-9 * np.abs(want_x).max()


def test_anderson_refuses_what_does_not_fit(lib):
    """A memory out of 1 .. ANDERSON_MEMORY, iterates of another shape or dtype are refused
    before any C runs; the kernel itself refuses a second vector without its output and a
    history out of range (nothing written)."""
    with pytest.raises(ValueError):
        kernels.Anderson(0, (4, 3))
    with pytest.raises(ValueError):
        kernels.Anderson(kernels.ANDERSON_MEMORY + 1, (4, 3))
    aa = kernels.Anderson(3, (4, 3))
    with pytest.raises(SinewError):
        aa.extrapolate(np.zeros((5, 3)), np.zeros((4, 3)), None)
    with pytest.raises(SinewError):
        aa.extrapolate(np.zeros((4, 3), np.float32), np.zeros((4, 3)), None)
    g = np.ones(12)
    out = np.full(12, 7.0)
    ptr = ctypes.addressof(aa.struct)
    assert lib.sinew_anderson(ptr, P(g), P(g), P(g), P(out), None) == -1
    aa.struct.memory = kernels.ANDERSON_MEMORY + 1
    assert lib.sinew_anderson(ptr, P(g), P(g), None, P(out), None) == -1
    aa.struct.memory = 3
    aa.state[1] = -1
    assert lib.sinew_anderson(ptr, P(g), P(g), None, P(out), None) == -1
    assert np.all(out == 7.0) and aa.state[0] == 0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("damped", [False, True])
def test_fast_local_step_against_numpy(lib, seed, damped):
    """sinew_fast_local against the local step written out in numpy: each spring's vector
    d = x_a − x_b (a pinned end's part given in dpin), per = k L d/|d| (k L times the rest
    direction for a spring of zero length) + k_d/h (d − (d·u0) u0), summed onto the free
    ends with the spring's sign, and the energy ½ Σ k (|d| − L)² + ½ Σ k_d/h (u0·d − proj0)²;
    an end out of range, or damping without its directions, is refused."""
    rng = np.random.default_rng(seed)
    n, f = 14, 10
    free = rng.permutation(n)[:f]  # the free vertices, in the solver's order
    column = np.full(n, -1, np.int64)
    column[free] = np.arange(f)
    springs = np.unique(np.sort(rng.integers(0, n, (40, 2)), axis=1), axis=0)
    springs = springs[springs[:, 0] != springs[:, 1]]
    x = rng.normal(size=(n, 3))
    x[springs[0, 1]] = x[springs[0, 0]]  # a spring of zero length
    s = len(springs)
    ends = i64(column[springs])
    d = x[springs[:, 0]] - x[springs[:, 1]]
    dpin = np.zeros((s, 3))
    dpin += np.where(ends[:, :1] < 0, x[springs[:, 0]], 0.0) - np.where(ends[:, 1:] < 0, x[springs[:, 1]], 0.0)
    k, rest = rng.uniform(10, 100, s), rng.uniform(0.1, 1.0, s)
    rest_dir = c64(rng.normal(size=(s, 3)))
    length = np.linalg.norm(d, axis=1)
    per = np.where(length[:, None] > 1e-12, (k * rest / np.where(length > 1e-12, length, 1.0))[:, None] * d,
                   (k * rest)[:, None] * rest_dir)
    energy = 0.5 * np.sum(k * (length - rest) ** 2)
    kd_h = u0 = proj0 = None
    if damped:
        kd_h = rng.uniform(0.1, 5.0, s)
        u0 = rng.normal(size=(s, 3))
        u0 /= np.linalg.norm(u0, axis=1)[:, None]
        proj0 = rng.normal(size=s)
        proj = np.einsum("sk,sk->s", d, u0)
        per += kd_h[:, None] * (d - proj[:, None] * u0)
        energy += 0.5 * np.sum(kd_h * (proj - proj0) ** 2)
    want = np.zeros((n, 3))
    np.add.at(want, springs[:, 0], per)
    np.add.at(want, springs[:, 1], -per)
    out = np.full((3, f), 9.0)
    e = np.zeros(1)
    xf = c64(x[free].T)
    keep = [c64(dpin.T), c64(k), c64(rest)] + ([c64(kd_h), c64(u0.T), c64(proj0)] if damped else [None] * 3)
    args = tuple(None if a is None else P(a) for a in keep) + (P(rest_dir),)
    assert lib.sinew_fast_local(s, f, P(ends), P(xf), *args, P(out), P(e)) == 0
    np.testing.assert_allclose(out.T, want[free], rtol=1e-12, atol=1e-10)
    assert abs(e[0] - energy) <= 1e-12 * energy
    bad = ends.copy()
    bad[3, 1] = f
    assert lib.sinew_fast_local(s, f, P(bad), P(xf), *args, P(out), P(e)) == -1
    if damped:
        assert lib.sinew_fast_local(s, f, P(ends), P(xf), args[0], args[1], args[2], args[3], None, None,
                                    args[6], P(out), P(e)) == -1


def test_collider_soup_refuses_bad_colliders():
    with pytest.raises(SinewError):
        ColliderSoup([object()])
    with pytest.raises(SinewError):
        ColliderSoup([Plane([0, 0, 0], [0, 0, 0])])
    with pytest.raises(SinewError):
        Sphere([0, 0, 0], -1.0)
    with pytest.raises(SinewError):
        TriangleMesh([[0, 0, 0], [1, 0, np.nan], [0, 1, 0]], [[0, 1, 2]])
    with pytest.raises(SinewError):
        TriangleMesh([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 3]])


def test_empty_inputs(lib):
    z3, zi = np.zeros((0, 3)), np.zeros(0, np.int64)
    # no colliders, no vertices
    c = ColliderSoup([]).detect(z3, np.zeros(0))
    assert c.count.shape == (0,)
    c = ColliderSoup([]).detect(c64([[0, 0, 0]]), c64([1.0]))
    assert c.count[0] == 0 and np.isinf(c.distance[0]) and np.isinf(c.bound[0])
    # a mesh with no triangles beside a plane; no vertices against a mesh
    soup = ColliderSoup([Plane([0, 0, 0], [0, 0, 1]), TriangleMesh(np.zeros((0, 3)), np.zeros((0, 3)))])
    c = soup.detect(c64([[0, 0, 0.5], [0, 0, -0.25]]), c64([1.0, 1.0]))
    assert np.allclose(c.distance, [0.5, -0.25]) and np.all(c.count == 0)
    v, t = box([0, 0, 0], [1, 1, 1])
    assert ColliderSoup([TriangleMesh(v, t)]).detect(z3, np.zeros(0)).count.shape == (0,)
    # every entry point with nothing to do
    assert lib.sinew_closest_points(0, P(z3), P(z3), P(z3), P(z3), P(z3), P(z3)) == 0
    off = i64([0])
    assert lib.sinew_color_greedy(0, P(off), P(zi), P(np.zeros(0, np.uint8)), P(zi),
                                  P(np.zeros(1, np.uint8)), 1) == 0
    assert strain_project(lib, z3.copy(), np.zeros((0, 2), np.int64), c64(np.zeros(0)), c64(np.zeros(0)), 10,
                          1e-3) == 0
    pb = vbd_problem(z3, np.zeros((0, 2)))
    x = z3.copy()
    assert sweep(lib, pb, x, []) == 0
    assert kernel_forces(lib, pb, x)[0].shape == (0, 3)
    held = np.zeros(1, np.int64)
    assert lib.sinew_vbd_guard(pb.struct, P(x), P(x.copy()), P(held)) == 0 and held[0] == 0
    assert lib.sinew_vbd_push_out(pb.struct, 0, P(zi), P(x)) == 0
    assert Contacts.empty(0).inside.shape == (0,)


# --------------------------------------------------------------------------- 9 the loader


def test_fast_without_the_library_is_one_clear_message(tmp_path, monkeypatch):
    """FAST's local step is a kernel: without the library a FAST step raises the loader's
    message (a SinewError, which the add-on reports), and the state is left as it was; NEWTON
    still steps."""
    from core.springs import LocalGlobal, NewtonImplicitEuler, State, build_model
    from core.springs.shapes import grid, springs_of

    g = grid(5, 1.0)
    pin = np.zeros(len(g.positions), bool)
    pin[[0, 5]] = True
    model = build_model(g.positions, springs_of(g), stiffness=200.0, shear_stiffness=50.0,
                        bending_stiffness=10.0, damping=0.2, total_mass=0.3, pinned=pin)
    saved = dict(kernels._LOADED)
    try:
        kernels._LOADED.clear()
        monkeypatch.setenv("SINEW_KERNELS_LIB", str(tmp_path / "nowhere" / "sinew_kernels-test.so"))
        state = State(model.rest_positions.copy(), np.zeros_like(model.rest_positions))
        before = state.x.copy()
        with pytest.raises(kernels.KernelsMissing, match="missing"):
            LocalGlobal().step(model, state, 1 / 24)
        assert np.array_equal(state.x, before)
        NewtonImplicitEuler().step(model, state, 1 / 24)
        assert not np.array_equal(state.x, before)
    finally:
        kernels._LOADED.clear()
        kernels._LOADED.update(saved)
    monkeypatch.undo()


def test_loader_missing_library_and_platform_tag(tmp_path, monkeypatch):
    assert kernels.platform_tag() in {"linux_x64", "windows_x64", "macos_arm64", "macos_x64"}
    env = os.environ.get("SINEW_KERNELS_LIB")
    saved = dict(kernels._LOADED)
    try:
        kernels._LOADED.clear()
        missing = tmp_path / "nowhere" / "sinew_kernels-test.so"
        monkeypatch.setenv("SINEW_KERNELS_LIB", str(missing))
        assert kernels.library_path() == missing
        with pytest.raises(kernels.KernelsMissing) as err:
            kernels.library()
        msg = str(err.value)
        assert "missing" in msg and missing.name in msg and "build.py" in msg
        assert isinstance(err.value, SinewError)
        # a file that is not a library
        junk = tmp_path / "junk.so"
        junk.write_bytes(b"not an ELF file")
        monkeypatch.setenv("SINEW_KERNELS_LIB", str(junk))
        with pytest.raises(kernels.KernelsMissing, match="could not be loaded"):
            kernels.library()
        assert not kernels._LOADED
    finally:
        kernels._LOADED.clear()
        kernels._LOADED.update(saved)
    monkeypatch.undo()
    assert kernels.library().sinew_abi_version() == kernels.ABI_VERSION
    assert os.environ.get("SINEW_KERNELS_LIB") == env


@FUZZ
@given(seed=SEEDS, count=st.integers(1, 40), npts=st.integers(1, 30))
def test_collider_query_boxes_skip_only_what_changes_nothing(seed, count, npts):
    """The query with the triangles' boxes (a triangle whose box is farther than the radius
    and than the nearest surface met is not tested) gives what it gives testing every
    triangle its cells list, to the bit: slots, distances, counts and the nearest surface
    (inside a closed box too)."""
    rng = np.random.default_rng(seed)
    verts, tris = _soup(rng, count)
    bv, bt = box(rng.uniform(-1, 0, 3), rng.uniform(0.1, 1, 3))
    soup = ColliderSoup([TriangleMesh(verts, tris), TriangleMesh(bv, bt)])
    x = c64(rng.uniform(-2.5, 2.5, (npts, 3)))
    radius = c64(rng.choice([0.05, 0.3, 1.0, 5.0], npts) * rng.uniform(0.5, 1.5, npts))
    soup.detect(x, radius)  # builds the grid
    cell, table, offsets, entries, big, lo, hi = soup._grid
    lib = soup._lib
    outs = []
    for boxes in ((P(lo), P(hi)), (None, None)):
        ids, dist = np.zeros((npts, CONTACT_SLOTS), np.int64), np.zeros((npts, CONTACT_SLOTS))
        cnt, dmin = np.zeros(npts, np.int64), np.zeros(npts)
        assert lib.sinew_collider_query(
            npts, P(x), P(radius), len(soup.cv), P(soup.cv), len(soup.tris), P(soup.tris),
            P(soup.closed), cell, table, P(offsets), P(entries), len(big), P(big), *boxes,
            0, P(soup.prim_type), P(soup.prim), CONTACT_SLOTS, P(ids), P(dist), P(cnt), P(dmin)) == 0
        outs.append((ids, dist, cnt, dmin))
    (i1, d1, c1, m1), (i2, d2, c2, m2) = outs
    assert np.array_equal(c1, c2) and np.array_equal(m1, m2)
    for i in range(npts):
        assert np.array_equal(i1[i, :c1[i]], i2[i, :c2[i]]) and np.array_equal(d1[i, :c1[i]], d2[i, :c2[i]])


def test_thread_count_defaults_to_the_cpus_and_obeys_the_environment(monkeypatch):
    """The kernels' threads: the machine's CPUs (at most MAX_THREADS, one when unknown) unless
    SINEW_THREADS is a positive integer."""
    monkeypatch.delenv("SINEW_THREADS", raising=False)
    for cpus, want in ((4, 4), (64, kernels.MAX_THREADS), (None, 1), (1, 1)):
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        assert kernels.thread_count() == want
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    for env, want in (("1", 1), ("3", 3), ("12", 12), ("0", 4), ("two", 4), ("", 4)):
        monkeypatch.setenv("SINEW_THREADS", env)
        assert kernels.thread_count() == want


@FUZZ
@given(seed=SEEDS)
def test_grid_files_every_box_under_every_cell_it_spans(seed):
    """sinew_element_boxes and sinew_grid_build against brute force: each element's box is
    its corners' extent; each box not too big is listed once under the bucket of every cell it
    spans, each bucket in ascending order, the too big ones in the big list."""
    from core.springs.detection import element_boxes, hashed_grid

    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, (40, 3)) * rng.uniform(0.1, 3.0)
    tris = i64(rng.integers(0, 40, (30, 3)))
    lo, hi = element_boxes(c64(x), tris)
    np.testing.assert_array_equal(lo, x[tris].min(axis=1))
    np.testing.assert_array_equal(hi, x[tris].max(axis=1))
    cell, big_cells = rng.uniform(0.2, 1.5), int(rng.integers(1, 30))
    table, offsets, entries, big = hashed_grid(lo, hi, cell, big_cells=big_cells, table=int(rng.integers(1, 64)))
    lo_c, hi_c = np.floor(lo / cell).astype(np.int64), np.floor(hi / cell).astype(np.int64)
    spans = np.prod(hi_c - lo_c + 1, axis=1)
    np.testing.assert_array_equal(big, np.flatnonzero(spans > big_cells))
    assert offsets[0] == 0 and offsets[-1] == spans[spans <= big_cells].sum()
    want: dict[int, list[int]] = {}
    for j in np.flatnonzero(spans <= big_cells):
        for ix in range(lo_c[j, 0], hi_c[j, 0] + 1):
            for iy in range(lo_c[j, 1], hi_c[j, 1] + 1):
                for iz in range(lo_c[j, 2], hi_c[j, 2] + 1):
                    h = ((ix * 73856093) ^ (iy * 19349663) ^ (iz * 83492791)) % 2**64 % table
                    want.setdefault(int(h), []).append(int(j))
    for b in range(table):
        assert entries[offsets[b]:offsets[b + 1]].tolist() == sorted(want.get(b, []))


def _raw_query(lib, x, radius, v, t, cell, table, k=CONTACT_SLOTS):
    """The collider query on ``x`` against the closed mesh ``(v, t)`` through a grid of
    ``cell`` m and ``table`` buckets: ``(count, distance)``."""
    from core.springs.detection import element_boxes, hashed_grid

    blo, bhi = element_boxes(v, t)
    table, offsets, entries, big = hashed_grid(blo, bhi, cell, table=table, big_cells=10**9)
    n = len(x)
    ids, dist, cnt, dmin = np.zeros((n, k), np.int64), np.zeros((n, k)), np.zeros(n, np.int64), np.zeros(n)
    closed = np.ones(len(t), np.uint8)
    assert lib.sinew_collider_query(
        n, P(x), P(radius), len(v), P(v), len(t), P(t), P(closed), cell, table, P(offsets), P(entries),
        len(big), P(big), P(blo), P(bhi), 0, P(np.zeros(0, np.int32)), P(np.zeros((0, 8))), k, P(ids),
        P(dist), P(cnt), P(dmin)) == 0
    return cnt, dmin


@pytest.mark.parametrize("table,point", [(77, (0.3, 0.3, -0.2)), (82, (0.3, 0.3, -0.2)),
                                         (93, (0.3, 0.3, -0.2)), (109, (0.7, 0.4, 1.3))])
def test_collider_query_beside_a_closed_box_is_outside_whatever_its_buckets_hold(lib, table, point):
    """A point 0.2-0.3 m from a unit box, queried within 3 cm through a grid of 25 cm cells
    whose hash bucket for the point's cells also holds the box's far face (the hash's
    collisions at these table sizes) and none of its near ones: the query called the point
    inside, as deep as that far face is away (1.2-1.3 m), since it lies behind it. (The
    bench's dress reported a 0.47 m penetration this way, its hem vertex beside the body.)
    The nearest surface is 0.2-0.3 m away: outside, beyond the radius."""
    v, t = box((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    v, t = c64(v), i64(t)
    cnt, dmin = _raw_query(lib, c64([point]), c64([0.03]), v, t, 0.25, table)
    assert cnt[0] == 0 and dmin[0] == 0.03


@FUZZ
@given(seed=SEEDS)
def test_collider_query_inside_and_beside_a_closed_tube_through_small_tables(lib, seed):
    """A closed convex tube (16 sides, its caps outward) through grids of few buckets (many
    cells share one), queried within 1-10 cm: a point outside is never called inside and has
    its distance to the surface (or the radius); a point called inside is, at its depth. A
    point inside deeper than the radius may be called outside (its nearest triangle met may
    not say it is behind it: docs/CONTACT.md, *Detection's inside test*)."""
    rng = np.random.default_rng(seed)
    rings = int(rng.integers(2, 12))
    body = tube([0.2] * rings, np.linspace(0.6, -0.6, rings), 16, closed=True)
    v, t = c64(body.positions), i64(triangulate(body))
    x = c64(rng.uniform(-0.7, 0.7, (200, 3)))
    radius = c64(rng.uniform(0.01, 0.1, 200))
    cnt, dmin = _raw_query(lib, x, radius, v, t, float(rng.uniform(0.03, 0.2)), int(rng.integers(2, 64)))
    A, B, C = (v[t[:, k]] for k in range(3))
    normal = np.cross(B - A, C - A)
    normal /= np.linalg.norm(normal, axis=1)[:, None]
    inside = np.all(np.einsum("ptk,tk->pt", x[:, None] - A[None], normal) < 0.0, axis=1)
    D = point_triangle_distance(x[:, None], A[None], B[None], C[None]).min(axis=1)
    assert not np.any(~inside & (dmin < 0.0))
    assert np.allclose(dmin[~inside], np.minimum(D, radius)[~inside], rtol=1e-9, atol=1e-12)
    claimed = inside & (dmin < 0.0)
    assert np.allclose(dmin[claimed], -D[claimed], rtol=1e-9, atol=1e-12)
    assert np.all(D[inside & (dmin >= 0.0)] > radius[inside & (dmin >= 0.0)])


def test_closed_tube_faces_one_way():
    """``shapes.tube(closed=True)``: every face of the closed tube, its caps too, faces out (or
    in, with ``outward=False``): each face's plane has the tube's axis behind it (in front),
    and the enclosed volume is the prism's (negative inward)."""
    for outward in (True, False):
        body = tube([0.2, 0.25, 0.2], [0.5, 0.0, -0.5], 16, closed=True, outward=outward)
        v, t = body.positions, triangulate(body)
        A, B, C = (v[t[:, k]] for k in range(3))
        normal = np.cross(B - A, C - A)
        centre = (A + B + C) / 3.0
        axis = np.c_[np.zeros((len(t), 2)), np.clip(centre[:, 2], -0.49, 0.49)]
        facing = np.einsum("tk,tk->t", centre - axis, normal)
        assert np.all(facing > 0) if outward else np.all(facing < 0)
        volume = np.einsum("tk,tk->", A, np.cross(B, C)) / 6.0
        assert (volume > 0) == outward and 0.12 < abs(volume) < 0.2
