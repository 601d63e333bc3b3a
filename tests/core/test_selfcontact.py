"""Self-contact inside the VBD solve: the self query against brute force, the barrier's forces
against finite differences of its energy, the guard's continuous test of one vertex's move,
and cloth folding onto itself with no crossing at any step (physics and geometry)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from core import kernels
from core.errors import SinewError
from core.springs import Plane, Simulator, TriangleMesh, build_model, count_crossings, detection
from core.springs.detection import SelfDetection
from core.springs.selfcollision import SelfCollision, mesh_edges
from core.springs.shapes import MeshArrays, box, grid, springs_of, triangulate
from tests.core.test_kernels import FUZZ, SEEDS, P, c64, point_triangle_distance, seg_point_distance, vbd_problem


def segment_distance(p0, p1, q0, q1):
    """Distance between segments, row by row, by another method than the kernel's: the four
    end-to-segment distances, and the interior stationary point when it lies inside both."""
    ends = np.minimum.reduce([seg_point_distance(p0, q0, q1), seg_point_distance(p1, q0, q1),
                              seg_point_distance(q0, p0, p1), seg_point_distance(q1, p0, p1)])
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a, e, b = np.sum(d1 * d1, -1), np.sum(d2 * d2, -1), np.sum(d1 * d2, -1)
    c, f = np.sum(d1 * r, -1), np.sum(d2 * r, -1)
    den = a * e - b * b
    ok = den > 1e-12 * np.maximum(a * e, 1e-300)
    s = np.where(ok, (b * f - c * e) / np.where(ok, den, 1.0), -1.0)
    t = np.where(ok, (a * f - b * c) / np.where(ok, den, 1.0), -1.0)
    inside = ok & (s >= 0) & (s <= 1) & (t >= 0) & (t <= 1)
    mid = np.linalg.norm((p0 + s[:, None] * d1) - (q0 + t[:, None] * d2), axis=1)
    return np.where(inside, np.minimum(mid, ends), ends)


def crumpled(rng, n=5):
    """A small grid crumpled at random: its triangles, edges and positions."""
    g = grid(n, 0.5, plane="XY")
    tris = triangulate(g)
    x = g.positions + rng.normal(0.0, 0.06, g.positions.shape)
    return x, tris, mesh_edges(tris)


def brute_pairs(x, tris, edges, bound, r, skip_vf=(), skip_ee=()):
    """Every (vertex, face) and (edge, edge) pair the query should list."""
    nf, ne = len(tris), len(edges)
    vi, fi = (a.reshape(-1) for a in np.meshgrid(np.arange(len(x)), np.arange(nf), indexing="ij"))
    keep = ~np.any(tris[fi] == vi[:, None], axis=1)
    vi, fi = vi[keep], fi[keep]
    d = point_triangle_distance(x[vi], x[tris[fi, 0]], x[tris[fi, 1]], x[tris[fi, 2]])
    lim = r + bound[vi] + bound[tris[fi]].max(axis=1)
    vf = {(int(a), int(b)): (float(dd), float(ll)) for a, b, dd, ll in zip(vi, fi, d, lim)
          if a * nf + b not in set(skip_vf)}
    ea, eb = np.triu_indices(ne, 1)
    share = np.any(edges[ea][:, :, None] == edges[eb][:, None, :], axis=(1, 2))
    ea, eb = ea[~share], eb[~share]
    d = segment_distance(x[edges[ea, 0]], x[edges[ea, 1]], x[edges[eb, 0]], x[edges[eb, 1]])
    lim = r + bound[edges[ea]].max(axis=1) + bound[edges[eb]].max(axis=1)
    ee = {(int(a), int(b)): (float(dd), float(ll)) for a, b, dd, ll in zip(ea, eb, d, lim)
          if a * ne + b not in set(skip_ee)}
    return vf, ee


class _Mesh:
    """What SelfDetection reads of a SelfCollision."""

    def __init__(self, tris, edges, distance, skip_vf=(), skip_ee=()):
        self.triangles, self.edges, self.distance = tris, edges, distance
        self.excluded_vf = np.asarray(sorted(skip_vf), np.int64)
        self.excluded_ee = np.asarray(sorted(skip_ee), np.int64)


@FUZZ
@given(seed=SEEDS)
def test_self_query_lists_what_brute_force_lists(seed):
    rng = np.random.default_rng(seed)
    x, tris, edges = crumpled(rng)
    r = rng.uniform(0.005, 0.05)
    bound = rng.uniform(0.0, 0.04, len(x))
    nf, ne = len(tris), len(edges)
    skip_vf = set(rng.integers(0, len(x) * nf, 20).tolist())
    skip_ee = set(rng.integers(0, ne * ne, 20).tolist())
    found = SelfDetection(_Mesh(tris, edges, r, skip_vf, skip_ee)).detect(x, bound)
    # in blocks on three threads (of at least 5 vertices here): the same pairs, in the same order
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(detection, "SELF_PART", 5)
        workers = kernels.Workers(3)
        split = SelfDetection(_Mesh(tris, edges, r, skip_vf, skip_ee)).detect(x, bound, workers)
        workers.close()
    assert split.vf == found.vf and np.array_equal(split.pair, found.pair)
    assert np.array_equal(split.distance, found.distance) and np.array_equal(split.inc, found.inc)
    vf, ee = brute_pairs(x, tris, edges, bound, r, skip_vf, skip_ee)
    got_vf = {tuple(p): d for p, d in zip(found.pair[:found.vf].tolist(), found.distance[:found.vf])}
    got_ee = {tuple(p): d for p, d in zip(found.pair[found.vf:].tolist(), found.distance[found.vf:])}
    for want, got in ((vf, got_vf), (ee, got_ee)):
        for key, (d, lim) in want.items():
            if d <= lim - 1e-9:
                assert key in got
                assert got[key] == pytest.approx(d, abs=1e-9)
            elif d > lim + 1e-9:
                assert key not in got
        assert set(got) <= set(want)
    # each vertex's incidences: exactly the pairs it is one of the four vertices of
    verts = np.concatenate([np.c_[found.pair[:found.vf, 0], tris[found.pair[:found.vf, 1]]],
                            np.c_[edges[found.pair[found.vf:, 0]], edges[found.pair[found.vf:, 1]]]])
    for i in range(len(x)):
        mine = found.inc[found.inc_off[i]:found.inc_off[i + 1]]
        assert sorted(mine.tolist()) == sorted(np.flatnonzero(np.any(verts == i, axis=1)).tolist())


def test_self_query_refuses_skip_lists_out_of_range():
    """The query stamps each vertex's and edge's skipped faces and edges into its scratch: a
    skipped face or edge out of range, or offsets that run backward, are refused before any
    walk (and the same lists in range give the pairs)."""
    rng = np.random.default_rng(3)
    x, tris, edges = crumpled(rng)
    bound = np.full(len(x), 0.01)
    det = SelfDetection(_Mesh(tris, edges, 0.02, {5}, {7}))
    assert det.detect(x, bound).pair.shape[1] == 2
    for name, bad in (("skip_vf", len(tris)), ("skip_ee", len(edges)), ("skip_vf", -1)):
        det = SelfDetection(_Mesh(tris, edges, 0.02, {5}, {7}))
        getattr(det, name)[0] = bad
        with pytest.raises(SinewError):
            det.detect(x, bound)
    det = SelfDetection(_Mesh(tris, edges, 0.02, {5}, {7}))
    det.skip_ee_off[1:] = 0  # (edge 0's list ends before it starts)
    det.skip_ee_off[0] = 1
    with pytest.raises(SinewError):
        det.detect(x, bound)


def self_problem(x, tris, edges, r, k, bound=None, w=1.0):
    """A VBD problem of the loose triangles at x with self-contact only (no springs)."""
    n = len(x)
    det = SelfDetection(_Mesh(tris, edges, r))
    bound = np.full(n, 0.05) if bound is None else bound
    found = det.detect(x, bound)
    pb = vbd_problem(x, np.zeros((0, 2)), w=np.full(n, w), y=x.copy())
    moved = np.zeros(n)
    pb.set(self_r=r, self_k=k, faces=det.faces, edges=det.edges, self_vf=found.vf,
           pair=found.pair if len(found.pair) else np.zeros((1, 2), np.int64),
           pair_dist=found.distance if len(found.pair) else np.zeros(1), inc_off=found.inc_off,
           inc=found.inc if len(found.inc) else np.zeros(1, np.int64), self_anchor=found.anchor,
           self_bound=found.bound, self_moved=moved)
    return pb, found


def barrier_energy(x, tris, edges, found, r, k):
    """The listed pairs' barrier energy at x, distances by brute force, each constraint once:
    the pairs whose closest features (the vertices of nonzero weight on either side: a point,
    an edge, a face) are the same two count once (a point over the edge two faces share)."""
    from core.springs.selfcollision import _closest

    e = 0.0
    seen = set()
    for j, (a, b) in enumerate(found.pair.tolist()):
        if j < found.vf:
            t = tris[b]
            d = float(point_triangle_distance(x[a], x[t[0]], x[t[1]], x[t[2]]))
            verts = [a, *t]
        else:
            d = float(segment_distance(x[edges[a, 0]][None], x[edges[a, 1]][None],
                                       x[edges[b, 0]][None], x[edges[b, 1]][None])[0])
            verts = [*edges[a], *edges[b]]
        if d >= r:
            continue
        alpha = _closest(x[verts][None], np.array([j < found.vf]))[0][0]
        split = 1 if j < found.vf else 2
        sides = (frozenset(v for v, w in zip(verts[:split], alpha[:split]) if abs(w) > 1e-9),
                 frozenset(v for v, w in zip(verts[split:], alpha[split:]) if abs(w) > 1e-9))
        key = frozenset(sides)
        if key in seen:
            continue
        seen.add(key)
        e += k * r * (r * np.log(r / d) - (r - d))
    return e


@FUZZ
@given(seed=SEEDS)
def test_self_barrier_forces_are_minus_the_energy_gradient(seed):
    """Two triangles closer than r in general position: the kernel's force on each vertex is
    minus the finite-difference gradient of ½ w |x − y|² plus the listed pairs' barriers."""
    rng = np.random.default_rng(seed)
    r, k = 0.05, 300.0
    a = rng.normal(0.0, 0.1, (3, 3))
    nrm = np.cross(a[1] - a[0], a[2] - a[0])
    nrm /= np.linalg.norm(nrm)
    b = a.mean(axis=0) + rng.normal(0.0, 0.08, (3, 3)) * [1, 1, 0.2] + nrm * rng.uniform(0.02, 0.04)
    x = c64(np.concatenate([a, b]))
    tris = np.array([[0, 1, 2], [3, 4, 5]], np.int64)
    edges = mesh_edges(tris)
    if count_crossings(x, tris):
        return
    pb, found = self_problem(x, tris, edges, r, k)
    y = x + rng.normal(0.0, 0.01, x.shape)
    pb.set(y=y)
    verts = np.arange(6, dtype=np.int64)
    force, cforce = np.zeros((6, 3)), np.zeros((6, 3))
    assert kernels.library().sinew_vbd_forces(pb.struct, 6, P(verts), P(x), P(force), P(cforce)) == 0

    def energy(z):
        return 0.5 * np.sum((z - y) ** 2) + barrier_energy(z, tris, edges, found, r, k)

    if energy(x) - 0.5 * np.sum((x - y) ** 2) == 0.0:
        return  # no pair within r
    grad = np.zeros_like(x)
    eps = 1e-7
    for i in range(6):
        for c in range(3):
            hi, lo = x.copy(), x.copy()
            hi[i, c] += eps
            lo[i, c] -= eps
            grad[i, c] = (energy(hi) - energy(lo)) / (2 * eps)
    np.testing.assert_allclose(force, -grad, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(grad).max()))


@FUZZ
@given(seed=SEEDS)
def test_guard_moves_no_vertex_through_the_cloth(seed):
    """Two sheets a few mm apart, every vertex of the top one sent far through the bottom
    one, one after the other: through the guard no triangle pair crosses; without its
    self-contact part they do."""
    rng = np.random.default_rng(seed)
    g = grid(4, 0.4, plane="XY")
    t1 = triangulate(g)
    top = g.positions + [0.013, 0.017, rng.uniform(0.004, 0.02)]
    x0 = c64(np.concatenate([g.positions, top]))
    tris = np.concatenate([t1, t1 + len(g.positions)])
    edges = mesh_edges(tris)
    assert count_crossings(x0, tris) == 0
    target = x0.copy()
    target[len(g.positions):, 2] -= rng.uniform(0.02, 0.08, len(g.positions))
    target += rng.normal(0.0, 0.01, target.shape)
    pb, found = self_problem(x0, tris, edges, 0.003, 100.0, bound=np.full(len(x0), 0.1))
    x = x0.copy()
    held = np.zeros(1, np.int64)
    assert kernels.library().sinew_vbd_guard(pb.struct, P(x), P(c64(target)), P(held)) == 0
    nb = len(g.positions)
    assert count_crossings(x, tris) == 0
    assert np.all(height_over(x[nb:], x, t1) > 0.0)
    assert np.all(np.linalg.norm(x - x0, axis=1) <= 0.1 * (1 + 1e-12))
    pb.set(self_r=0.0)
    y = x0.copy()
    kernels.library().sinew_vbd_guard(pb.struct, P(y), P(c64(target)), P(held))
    assert count_crossings(y, tris) > 0 or np.any(height_over(y[nb:], y, t1) < 0.0)


def height_over(p, x, tris):
    """How far above the triangles (a sheet lying roughly flat) each point is, straight up
    (nan where no triangle is under it)."""
    a, b, c = x[tris[:, 0]], x[tris[:, 1]], x[tris[:, 2]]
    out = np.full(len(p), np.nan)
    for j, q in enumerate(p):
        v0, v1, v2 = b[:, :2] - a[:, :2], c[:, :2] - a[:, :2], q[None, :2] - a[:, :2]
        den = v0[:, 0] * v1[:, 1] - v1[:, 0] * v0[:, 1]
        u = (v2[:, 0] * v1[:, 1] - v1[:, 0] * v2[:, 1]) / den
        w = (v0[:, 0] * v2[:, 1] - v2[:, 0] * v0[:, 1]) / den
        inside = (u >= 0) & (w >= 0) & (u + w <= 1)
        if inside.any():
            k = np.flatnonzero(inside)[0]
            z = a[k, 2] + u[k] * (b[k, 2] - a[k, 2]) + w[k] * (c[k, 2] - a[k, 2])
            out[j] = q[2] - z
    return out[~np.isnan(out)]


def strip(nx, ny, width, length, bottom, tilt=0.05):
    """A strip of nx × ny quads standing on its end, leaning tilt rad (the bench's fold)."""
    w = nx + 1
    j, i = np.divmod(np.arange((ny + 1) * w), w)
    verts = np.stack([(i / nx - 0.5) * width, length * j / ny * np.sin(tilt),
                      bottom + length * j / ny * np.cos(tilt)], axis=1)
    quads = np.array([(b * w + a, b * w + a + 1, (b + 1) * w + a + 1, (b + 1) * w + a)
                      for b in range(ny) for a in range(nx)])
    return MeshArrays(verts, np.zeros((0, 2), int), np.arange(len(quads)) * 4, np.full(len(quads), 4),
                      quads.reshape(-1))


def test_strip_folding_over_a_box_never_crosses_itself():
    """The bench's fold, smaller: a COTTON strip falls on a box and folds over itself at 3
    substeps of VBD with self-contact inside the solve. At every frame: no crossing pair of
    non-adjacent triangles, no vertex inside the box, the strain within the limit's bound;
    and the layers did come within the self distance of each other."""
    mesh = strip(6, 30, 0.3, 1.5, 0.45)
    tris = triangulate(mesh)
    m = build_model(mesh.positions, springs_of(mesh), stiffness=2000.0, shear_stiffness=200.0,
                    bending_stiffness=2.0, damping=1.0, density=0.15, stiffness_mode="MATERIAL",
                    triangles=tris, air_drag=0.5, max_stretch=0.03)
    bv, bt = box((-0.2, -0.2, 0.0), (0.2, 0.2, 0.4))
    col = TriangleMesh(bv, bt, thickness=0.02, friction=0.05)
    sc = SelfCollision.build(mesh.positions, tris, 0.015)
    sim = Simulator(m, "VBD", fps=24, substeps=3, iterations=10, self_collision=sc)
    e = m.structural_count
    touched = 0
    for _ in range(60):
        d = sim.advance(colliders=[col])
        x = sim.state.x
        assert count_crossings(x, tris) == 0
        assert d.self_crossings == 0
        assert np.all(col.signed_distance(x) > 0)
        stretch = np.linalg.norm(x[m.springs[:e, 0]] - x[m.springs[:e, 1]], axis=1) / m.rest_lengths[:e]
        assert stretch.max() <= 1.03 + 0.005
        touched = max(touched, d.self_contacts)
    assert touched > 0


def test_sheet_dropped_on_a_sheet_rests_on_it():
    """A small sheet dropped flat onto a larger one lying on the ground comes to rest on it,
    never through it, about the self distance above it."""
    lower, upper = grid(8, 0.8, plane="XY"), grid(5, 0.4, plane="XY")
    nl = len(lower.positions)
    pos = np.concatenate([lower.positions + [0, 0, 0.011], upper.positions + [0.01, 0.02, 0.15]])
    both = MeshArrays(pos, np.concatenate([lower.edges, upper.edges + nl]),
                      np.concatenate([lower.loop_starts, upper.loop_starts + len(lower.loop_vertices)]),
                      np.concatenate([lower.loop_totals, upper.loop_totals]),
                      np.concatenate([lower.loop_vertices, upper.loop_vertices + nl]))
    tris = triangulate(both)
    m = build_model(pos, springs_of(both), stiffness=2000.0, shear_stiffness=200.0, bending_stiffness=2.0,
                    damping=1.0, density=0.15, stiffness_mode="MATERIAL", triangles=tris,
                    air_drag=0.5, max_stretch=0.03)
    ground = Plane((0, 0, 0), (0, 0, 1), thickness=0.01, friction=0.3)
    r = 0.01
    sc = SelfCollision.build(pos, tris, r)
    sim = Simulator(m, "VBD", fps=24, substeps=3, iterations=10, self_collision=sc)
    speeds = []
    for _ in range(48):
        sim.advance(colliders=[ground])
        x = sim.state.x
        assert count_crossings(x, tris) == 0
        speeds.append(float(np.linalg.norm(sim.state.v, axis=1).mean()))
    gap = x[nl:, 2] - x[:nl, 2].max()
    assert np.all(x[nl:, 2] > x[:nl, 2].min())
    assert np.median(x[nl:, 2] - 0.011) == pytest.approx(r, abs=0.6 * r)
    assert max(speeds[-24:]) < 0.05
    assert gap.max() < 0.05


def test_self_contact_never_carries_cloth_through_a_thin_plate():
    """A sheet with self-collision thrown at 20 m/s at a thin plate (open, two triangles)
    that only half of it lands on, one substep: the half that falls on past the plate's edge
    does not drag the landing half through the plate (no vertex's path crosses it in any
    step), and the sheet never crosses itself."""
    from tests.core.test_kernels import segment_crosses
    from tests.core.test_springs_vbd import cotton

    plate_v = np.array([[-1, -1, 0.0], [0.05, -1, 0.0], [0.05, 1, 0.0], [-1, 1, 0.0]])
    plate_t = np.array([[0, 1, 2], [0, 2, 3]])
    plate = TriangleMesh(plate_v, plate_t, thickness=0.005, friction=0.2)
    m = cotton(8, 0.6, 0.3)
    tris = triangulate(grid(8, 0.6, plane="XY"))
    sc = SelfCollision.build(m.rest_positions, tris, 0.01)
    sim = Simulator(m, "VBD", fps=24, substeps=1, iterations=8, self_collision=sc)
    sim.state.v[:, 2] = -20.0
    a, b, c = (plate_v[plate_t[:, k]] for k in range(3))
    for f in range(16):
        before = sim.state.x.copy()
        d = sim.advance(colliders=[plate])
        assert not np.any(segment_crosses(before, sim.state.x, a, b, c)), f"frame {f}"
        assert d.self_crossings == 0 and count_crossings(sim.state.x, tris) == 0
    assert sim.state.x[:, 2].min() < -0.1  # the overhanging half hangs past the edge


def test_guard_counts_the_moves_of_both_ends_of_each_feature():
    """An edge-edge pair whose features have both moved since detection: the guard may skip
    a pair only when the distance at detection exceeds how far each feature's farthest-moved
    vertex has gone, summed over both features. Here the far end of the moving vertex's edge
    and the other edge moved first, then a short move of the near end would take its edge
    through the other: stopped short of crossing."""
    d, delta = 0.015, 0.01
    x0 = c64([[1, 0, 0], [-0.9, -1, d], [-0.9, 1, d], [-1, 0, 0], [0, 0, -2], [-0.9, 0, 2]])
    tris = np.array([[3, 0, 4], [1, 2, 5]], np.int64)  # an upright triangle under another
    edges = mesh_edges(tris)
    assert count_crossings(x0, tris) == 0
    target = x0.copy()
    target[0, 2] += delta          # the far end of the lower edge up
    target[1:3, 2] -= delta        # the upper edge down
    target[3, 2] += 0.49 * delta   # then the near end up: through the upper edge without a guard
    moved = x0.copy()
    moved[:4] = target[:4]
    assert count_crossings(moved, tris) > 0
    pb, found = self_problem(x0, tris, edges, 0.001, 100.0, bound=np.full(6, 0.012))
    assert found.vf < len(found.pair)  # the edge pair is listed
    x = x0.copy()
    held = np.zeros(1, np.int64)
    assert kernels.library().sinew_vbd_guard(pb.struct, P(x), P(c64(target)), P(held)) == 0
    assert count_crossings(x, tris) == 0
    np.testing.assert_array_equal(x[:3], target[:3])  # the first moves cross nothing


@pytest.mark.parametrize("far", [0.0, 1e5])
def test_messy_cloth_with_self_collision_bakes(far):
    """Geometry production meshes hold: two vertices on one spot (collapsed triangles), a
    loose vertex in no face lying on another, a scene 100 km from the origin. The bake runs
    with self-collision inside VBD, stays finite and never crosses itself."""
    g = grid(12, 0.6, plane="XY")
    pos = g.positions.copy()
    pos[14] = pos[13]
    pos = np.vstack([pos, pos[40]])
    mesh = MeshArrays(pos, g.edges, g.loop_starts, g.loop_totals, g.loop_vertices)
    tris = triangulate(mesh)
    off = np.array([far, -far, 0.0])
    m = build_model(pos + off + [0, 0, 0.3], springs_of(mesh), stiffness=2000.0, shear_stiffness=200.0,
                    bending_stiffness=2.0, damping=1.0, density=0.15, stiffness_mode="MATERIAL",
                    triangles=tris, air_drag=0.5, max_stretch=0.03)
    sim = Simulator(m, "VBD", fps=24, substeps=3, iterations=10,
                    self_collision=SelfCollision.build(pos + off, tris, 0.015))
    ground = Plane(off, (0, 0, 1), thickness=0.01, friction=0.3)
    for _ in range(24):
        d = sim.advance(colliders=[ground])
        assert np.isfinite(sim.state.x).all() and d.self_crossings == 0
    assert sim.state.x[:, 2].min() > 0.0
