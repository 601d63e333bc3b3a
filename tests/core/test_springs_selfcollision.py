"""Self-collision of spring meshes (core/springs/selfcollision.py).

Geometry kernels are checked against hand-made configurations and independent brute
force (linear programming for triangle intersection, dense sampling for segment
distance); the stage against physics: nothing crosses, fast motion is caught at one
substep, the response keeps momentum and never adds kinetic energy.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from core.springs import (
    INTEGRATORS,
    Plane,
    SelfCollision,
    Simulator,
    State,
    build_model,
    build_springs,
    count_crossings,
    simulate,
)
from core.springs.proximity import box_pairs, closest_points_on_triangles, coplanarity_times, segment_parameters
from core.springs.selfcollision import crossing_pairs
from core.springs.shapes import MeshArrays, grid, springs_of, triangulate
from tests.core.crossing_reference import triangles_intersect


def tri(*pts) -> np.ndarray:
    return np.array(pts, dtype=np.float64)[None]


def lp_intersect(t1: np.ndarray, t2: np.ndarray) -> bool:
    """Do two triangles share a point? Feasibility of Σaᵢ Aᵢ = Σbⱼ Bⱼ, a, b ≥ 0, Σa = Σb = 1."""
    a_eq = np.zeros((5, 6))
    a_eq[:3, :3] = t1.T
    a_eq[:3, 3:] = -t2.T
    a_eq[3, :3] = 1.0
    a_eq[4, 3:] = 1.0
    res = linprog(np.zeros(6), A_eq=a_eq, b_eq=[0, 0, 0, 1, 1], bounds=[(0, None)] * 6,
                  method="highs")
    return res.status == 0


def brute_force_crossings(x: np.ndarray, triangles: np.ndarray) -> set[tuple[int, int]]:
    out = set()
    for i, j in itertools.combinations(range(len(triangles)), 2):
        if set(triangles[i]) & set(triangles[j]):
            continue
        if lp_intersect(x[triangles[i]], x[triangles[j]]):
            out.add((i, j))
    return out


def strip(nx: int, ny: int, width: float, length: float, tilt: float, z0: float) -> MeshArrays:
    """A quad strip standing on its short side, leaning ``tilt`` rad towards +y."""
    i, j = np.meshgrid(np.arange(nx + 1), np.arange(ny + 1))
    u = (i.reshape(-1) / nx - 0.5) * width
    s = j.reshape(-1) / ny * length
    pos = np.stack([u, s * np.sin(tilt), z0 + s * np.cos(tilt)], axis=1)
    idx = np.arange((ny + 1) * (nx + 1)).reshape(ny + 1, nx + 1)
    h = np.stack([idx[:, :-1].reshape(-1), idx[:, 1:].reshape(-1)], axis=1)
    v = np.stack([idx[:-1].reshape(-1), idx[1:].reshape(-1)], axis=1)
    quads = np.stack([idx[:-1, :-1], idx[:-1, 1:], idx[1:, 1:], idx[1:, :-1]], axis=-1).reshape(-1, 4)
    return MeshArrays(pos, np.concatenate([h, v]), np.arange(len(quads)) * 4,
                      np.full(len(quads), 4), quads.reshape(-1))


def model_of(mesh: MeshArrays, **kw):
    springs = springs_of(mesh)
    args = dict(stiffness=2000.0, shear_stiffness=500.0, bending_stiffness=0.5, damping=0.5,
                vertex_mass=0.3 / len(mesh.positions), air_drag=0.1)
    args.update(kw)
    return build_model(mesh.positions, springs, **args)


def soup(*triangles) -> MeshArrays:
    """Separate triangles as one mesh."""
    pos = np.concatenate([np.asarray(t, dtype=np.float64) for t in triangles])
    loops = np.arange(len(pos))
    edges = np.stack([loops, loops.reshape(-1, 3)[:, [1, 2, 0]].reshape(-1)], axis=1)
    return MeshArrays(pos, edges, np.arange(0, len(pos), 3), np.full(len(triangles), 3), loops)


# -- geometry kernels -------------------------------------------------------------------


def test_triangle_intersection_hand_made() -> None:
    base = tri((0, 0, 0), (1, 0, 0), (0, 1, 0))
    pierce = tri((0.2, 0.2, -0.5), (0.3, 0.2, 0.5), (0.2, 0.4, 0.5))
    cases = [
        (pierce, True),                                           # vertex-side through the face
        (pierce + [0, 0, 1.0], False),                            # same, lifted clear
        (pierce + [2.0, 0, 0], False),                            # beside it
        (tri((0.5, -0.2, -0.5), (0.5, -0.2, 0.5), (0.5, 0.3, 0)), True),   # crosses an edge
        (tri((0.5, -0.2, -0.5), (0.5, -0.2, 0.5), (0.5, -0.1, 0)), False),  # stops short of it
        (tri((0.1, 0.1, 0.3), (0.6, 0.1, 0.3), (0.1, 0.6, 0.3)), False),   # parallel above
        (tri((-1, -1, 0.3), (3, -1, 0.3), (-1, 3, -0.5)), True),  # big tilted one through it
    ]
    for other, expect in cases:
        assert bool(triangles_intersect(base, other)[0]) is expect, other
        assert bool(triangles_intersect(other, base)[0]) is expect, other
        assert lp_intersect(base[0], other[0]) is expect, other  # the brute force agrees


def test_crossing_pairs_against_brute_force_on_a_crumpled_mesh() -> None:
    rng = np.random.default_rng(7)
    mesh = strip(3, 6, 1.0, 2.0, 0.0, 0.0)
    tris = triangulate(mesh)
    x = mesh.positions + rng.normal(scale=0.35, size=mesh.positions.shape)
    fast = {tuple(p) for p in crossing_pairs(x, tris).tolist()}
    slow = brute_force_crossings(x, tris)
    assert len(slow) > 5  # the mesh really is tangled
    assert fast == slow
    assert count_crossings(mesh.positions, tris) == 0


def test_box_pairs_finds_every_overlap() -> None:
    rng = np.random.default_rng(3)
    lo = rng.uniform(0, 1, (200, 3))
    hi = lo + rng.uniform(0, 0.08, (200, 3)) ** 2 * np.where(rng.random((200, 1)) < 0.05, 40, 1)
    lo_b = rng.uniform(0, 1, (150, 3))
    hi_b = lo_b + rng.uniform(0, 0.1, (150, 3))
    ov = np.all((lo[:, None] <= hi_b[None]) & (lo_b[None] <= hi[:, None]), axis=2)
    ia, ib = box_pairs(lo, hi, lo_b, hi_b)
    assert sorted(zip(ia.tolist(), ib.tolist())) == sorted(zip(*np.nonzero(ov)))
    ov_same = np.triu(np.all((lo[:, None] <= hi[None]) & (lo[None] <= hi[:, None]), axis=2), 1)
    ia, ib = box_pairs(lo, hi)
    assert sorted(zip(ia.tolist(), ib.tolist())) == sorted(zip(*np.nonzero(ov_same)))


def test_segment_closest_points_against_sampling() -> None:
    rng = np.random.default_rng(1)
    p1, q1, p2, q2 = (rng.normal(size=(40, 3)) for _ in range(4))
    q2[:5] = p2[:5] + 2.0 * (q1[:5] - p1[:5])  # parallel pairs
    q1[5:8] = p1[5:8]  # a point against a segment
    q2[8:11] = p2[8:11]  # a segment against a point (spring bones' bones against a sphere's centre)
    s, u = segment_parameters(p1, q1, p2, q2)
    d = np.linalg.norm(p1 + s[:, None] * (q1 - p1) - p2 - u[:, None] * (q2 - p2), axis=1)
    t = np.linspace(0, 1, 401)
    a = p1[:, None] + t[None, :, None] * (q1 - p1)[:, None]
    b = p2[:, None] + t[None, :, None] * (q2 - p2)[:, None]
    brute = np.linalg.norm(a[:, :, None] - b[:, None, :], axis=3).min(axis=(1, 2))
    assert np.all(d <= brute + 1e-12)
    step = (np.linalg.norm(q1 - p1, axis=1) + np.linalg.norm(q2 - p2, axis=1)) / 400
    assert np.all(d >= brute - step - 1e-12)


def test_coplanarity_times_of_a_vertex_through_a_triangle() -> None:
    p0 = np.array([[[0.2, 0.2, 0.3], [0, 0, 0], [1, 0, 0], [0, 1, 0]]], dtype=np.float64)
    p1 = p0.copy()
    p1[0, 0, 2] = -0.7  # z goes 0.3 → -0.7: through z = 0 at t = 0.3
    t = coplanarity_times(p0, p1)[0]
    assert np.sum(np.isfinite(t)) == 1
    assert t[np.isfinite(t)][0] == pytest.approx(0.3, abs=1e-9)
    # a triangle spinning about the x axis while the point waits at height 0.1: the triple
    # product is cubic and vanishes where the triangle's plane sweeps through the point
    ang0, ang1 = 0.0, np.pi * 0.9
    base = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float64)
    def rot(a):
        return base @ np.array([[1, 0, 0], [0, np.cos(a), np.sin(a)], [0, -np.sin(a), np.cos(a)]])
    q = np.array([[0.3, 0.5, 0.1]])
    p0 = np.concatenate([q, rot(ang0)])[None]
    p1 = np.concatenate([q, rot(ang1)])[None]
    t = coplanarity_times(p0, p1)[0]
    t = t[np.isfinite(t)]
    assert len(t) >= 1
    for tt in t:  # each root really is coplanar
        pts = p0[0] + tt * (p1[0] - p0[0])
        vol = np.dot(np.cross(pts[2] - pts[1], pts[3] - pts[1]), pts[0] - pts[1])
        assert abs(vol) < 1e-9


def test_continuous_detection_drops_no_pair_by_its_sweep_boxes(monkeypatch) -> None:
    """Continuous detection skips pairs whose parts' sweep boxes do not overlap; on random
    sweeps (many passing through each other, some grazing) it finds the same impacts as
    without that filter, and the filter drops pairs (it is not a no-op)."""
    import core.springs.selfcollision as scm

    rng = np.random.default_rng(3)
    k = 3000
    x0 = rng.uniform(-0.5, 0.5, (4 * k, 3))
    x1 = x0 + rng.normal(0.0, 0.4, (4 * k, 3))
    # grazing: the vertex of some VF pairs ends exactly on its triangle's plane corner box
    x1[4 * np.arange(0, k, 7)] = x1[4 * np.arange(0, k, 7) + 1]
    idx = np.arange(4 * k).reshape(k, 4)
    is_vf = np.arange(k) % 2 == 0
    dist0 = np.zeros(k)  # every pair goes to the narrow phase
    hit, alpha, normal = SelfCollision._impacts(x0, x1, idx, is_vf, dist0)
    kept = scm._sweeps_overlap(x0, x1, idx, is_vf, 2.0 * scm.CCD_TOLERANCE)
    monkeypatch.setattr(scm, "_sweeps_overlap", lambda x0, x1, idx, is_vf, grow: np.ones(len(idx), bool))
    hit_all, alpha_all, normal_all = SelfCollision._impacts(x0, x1, idx, is_vf, dist0)
    assert hit.sum() > 100 and (~kept).sum() > 100
    np.testing.assert_array_equal(hit, hit_all)
    np.testing.assert_array_equal(alpha[hit], alpha_all[hit])
    np.testing.assert_array_equal(normal[hit], normal_all[hit])


# -- the response ---------------------------------------------------------------------


# EXPLICIT refuses these undamped springs (unstable at any step: core/springs/simulate.py)
@pytest.mark.parametrize("solver", [s for s in INTEGRATORS if s != "EXPLICIT"])
def test_fast_vertex_through_a_triangle_is_caught_at_one_substep(solver: str) -> None:
    big = [(-1, -1, 0), (1, -1, 0), (0, 1.5, 0)]
    small = [(0, 0, 0.05), (0.3, 0, 0.4), (0, 0.3, 0.4)]  # a corner points down at the big one
    mesh = soup(big, small)
    model = model_of(mesh, stiffness=50.0, shear_stiffness=0.0, bending_stiffness=0.0,
                     damping=0.0, air_drag=0.0, vertex_mass=0.1, gravity=(0, 0, 0))
    v = np.zeros((6, 3))
    v[3:] = (0.0, 0.0, -30.0)  # 1.25 m in one 1/24 s step: far through the big triangle
    state = State(mesh.positions.copy(), v)
    tris = triangulate(mesh)
    off = Simulator(model, solver, fps=24, substeps=1, state=state)
    off.advance()
    assert off.state.x[3, 2] < off.state.x[0, 2] - 0.5  # without it, it passes straight through
    sc = SelfCollision.build(mesh.positions, tris, 0.01)
    sim = Simulator(model, solver, fps=24, substeps=1, state=state, self_collision=sc)
    diag = sim.advance()
    x = sim.state.x
    normal = np.cross(x[1] - x[0], x[2] - x[0])
    normal /= np.linalg.norm(normal)
    assert normal[2] > 0.9
    if sim.integrator.contact_inside_for(model):
        # a barrier inside the solve (VBD's): caught on its own side, within the distance (the
        # barrier's force at 0.35 mm is what stops 30 m/s in one step)
        assert (x[3] - x[0]) @ normal > 0
    else:  # the post-solve stage projects the gap
        assert (x[3] - x[0]) @ normal >= 0.01 * 0.98  # caught on its own side, the gap kept
    assert np.all((x[3:] - x[0]) @ normal > 0)
    assert diag.self_crossings == 0 and diag.self_contacts >= 1
    # momentum: the impulse pushes the big triangle down as much as it slows the small one
    p_before = model.masses @ v
    p_after = model.masses @ sim.state.v
    assert p_after[2] == pytest.approx(p_before[2], abs=1e-9)
    assert sim.state.v[3, 2] > -29.0 and sim.state.v[:3, 2].mean() < -1.0


def test_edge_sweeping_through_a_triangle_is_caught() -> None:
    flat = [(0, 0, 0), (1, 0, 0), (0.5, 1, 0)]
    blade = [(0.5, -1, 0.1), (0.5, 2, 0.1), (0.5, 0.5, 1.0)]  # its lower edge spans the other
    mesh = soup(flat, blade)
    tris = triangulate(mesh)
    x0 = mesh.positions.copy()
    x1 = x0.copy()
    x1[3:, 2] -= 0.3  # no vertex passes through a face: only edges cross edges
    assert count_crossings(x1, tris) == 1
    masses = np.full(6, 0.1)
    v = (x1 - x0) * 24
    sc = SelfCollision.build(x0, tris, 0.01)
    rep = sc.resolve(x0, x1, v, masses, np.zeros(6, dtype=bool))
    assert count_crossings(x1, tris) == 0
    assert rep.contacts >= 1
    normal = np.cross(x1[1] - x1[0], x1[2] - x1[0])
    middle = 0.5 * (x1[3] + x1[4])  # the blade edge's point over the flat triangle
    assert (middle - x1[0]) @ normal > 0  # the blade's edge stays above


def min_vertex_face_distance(x: np.ndarray, tris: np.ndarray, verts: np.ndarray | None = None,
                             faces: np.ndarray | None = None) -> float:
    """Brute force: the smallest distance of a vertex to a triangle it is not a corner of."""
    verts = np.arange(len(x)) if verts is None else verts
    faces = np.arange(len(tris)) if faces is None else faces
    vi, fi = (a.reshape(-1) for a in np.meshgrid(verts, faces, indexing="ij"))
    keep = ~np.any(tris[fi] == vi[:, None], axis=1)
    vi, fi = vi[keep], fi[keep]
    p = x[tris[fi]]
    q = closest_points_on_triangles(x[vi], p[:, 0], p[:, 1], p[:, 2])
    return float(np.linalg.norm(x[vi] - q, axis=1).min())


def two_sheets(gap: float, speed: float):
    """Two 5×5 grids stacked ``gap`` apart, the top one moving down at ``speed`` m/s."""
    i, j = np.meshgrid(np.arange(5), np.arange(5))
    flat = np.stack([i.reshape(-1) * 0.1, j.reshape(-1) * 0.1, np.zeros(25)], axis=1)
    idx = np.arange(25).reshape(5, 5)
    quads = np.stack([idx[:-1, :-1], idx[:-1, 1:], idx[1:, 1:], idx[1:, :-1]], axis=-1).reshape(-1, 4)
    quads = np.concatenate([quads, quads + 25])
    pos = np.concatenate([flat, flat + (0.03, 0.02, gap)])
    tris = triangulate(MeshArrays(pos, np.zeros((0, 2), int), np.arange(len(quads)) * 4,
                                  np.full(len(quads), 4), quads.reshape(-1)))
    v = np.zeros_like(pos)
    v[25:, 2] = -speed
    v[:25, 0] = 0.3  # the bottom sheet slides sideways
    return pos, v, tris


@pytest.mark.parametrize("speed", [0.5, 5.0, 40.0])
def test_response_conserves_momentum_and_never_adds_kinetic_energy(speed: float) -> None:
    rng = np.random.default_rng(11)
    x0, v, tris = two_sheets(0.02, speed)
    masses = rng.uniform(0.01, 0.05, len(x0))
    h = 1 / 48
    x1 = x0 + h * v
    v1 = v.copy()
    sc = SelfCollision.build(two_sheets(0.5, 0.0)[0], tris, 0.015)  # rest: far apart
    rep = sc.resolve(x0, x1, v1, masses, np.zeros(len(x0), dtype=bool))
    assert rep.contacts > 0
    assert count_crossings(x1, tris) == 0
    if rep.reverted == 0:  # the top sheet's vertices keep the distance from the bottom sheet
        gap = min_vertex_face_distance(x1, tris, np.arange(25, 50), np.arange(32))
        assert gap >= 0.015 * (0.9 if speed < 10 else 0.5)
    def ke(u):
        return 0.5 * float(masses @ np.einsum("ij,ij->i", u, u))
    assert ke(v1) <= ke(v) * (1 + 1e-12)
    if rep.reverted == 0:  # impulses only: momentum and the centre of mass are kept
        np.testing.assert_allclose(masses @ v1, masses @ v, atol=1e-12)
        np.testing.assert_allclose(masses @ x1, masses @ (x0 + h * v), atol=1e-12)


@pytest.mark.parametrize("speed", [5.0, 200.0])
@pytest.mark.parametrize("order", [1, -1])
def test_impact_zones_stop_what_the_projection_leaves(speed: float, order: int) -> None:
    """One projection sweep leaves collisions: the failsafe's impact zones (rigid
    translations, Provot 1997) end them without sending anything back, in either order
    of the triangles (so of the pairs), keeping momentum and the centre of mass."""
    rng = np.random.default_rng(3)
    x0, v, tris = two_sheets(0.02, speed)
    tris = tris[::order].copy()
    masses = rng.uniform(0.01, 0.05, len(x0))
    h = 1 / 48
    x1, v1 = x0 + h * v, v.copy()
    sc = SelfCollision.build(two_sheets(0.5, 0.0)[0], tris, 0.015, iterations=1)
    rep = sc.resolve(x0, x1, v1, masses, np.zeros(len(x0), dtype=bool))
    assert rep.zoned > 0 and rep.reverted == 0 and rep.unresolved == 0
    assert count_crossings(x1, tris) == 0
    np.testing.assert_allclose(masses @ v1, masses @ v, atol=1e-12)
    np.testing.assert_allclose(masses @ x1, masses @ (x0 + h * v), atol=1e-12)
    assert 0.5 * masses @ np.einsum("ij,ij->i", v1, v1) <= 0.5 * masses @ np.einsum("ij,ij->i", v, v)


def test_pinned_vertices_do_not_move() -> None:
    x0, v, tris = two_sheets(0.03, 3.0)
    pinned = np.zeros(len(x0), dtype=bool)
    pinned[:25] = True  # the bottom sheet is pinned
    v[:25] = 0.0
    x1 = x0 + v / 24
    sc = SelfCollision.build(two_sheets(0.5, 0.0)[0], tris, 0.015)
    sc.resolve(x0, x1, v, np.full(len(x0), 0.02), pinned)
    np.testing.assert_array_equal(x1[:25], x0[:25])
    over = np.flatnonzero((x1[:, 0] < 0.4) & (x1[:, 1] < 0.4))
    over = over[over >= 25]  # top vertices over the bottom sheet
    assert len(over) == 16 and x1[over, 2].min() >= 0.015 * 0.9
    assert count_crossings(x1, tris) == 0


@pytest.mark.parametrize("hard", [True, False])
def test_a_vertex_immovable_only_for_the_response_goes_back_when_nothing_else_helps(hard: bool) -> None:
    """A vertex the response may not move (resting on a collider) driven through a
    hard-pinned layer: the failsafe sends it back to the start of the step too, and nothing
    crosses. A hard pin stays where it is, and the report says what is left colliding."""
    x0, _, tris = two_sheets(0.02, 0.0)
    x1, v1 = x0.copy(), np.zeros_like(x0)
    k = 25 + 12  # the top sheet's middle vertex, pushed 5 cm down through the bottom sheet
    x1[k, 2] -= 0.05
    v1[k, 2] = -0.05 * 48
    pins = np.zeros(len(x0), dtype=bool)
    pins[:25] = True  # the bottom sheet is pinned
    immovable = pins.copy()
    immovable[k] = True
    sc = SelfCollision.build(two_sheets(0.5, 0.0)[0], tris, 0.015)
    rep = sc.resolve(x0, x1, v1, np.full(len(x0), 0.02), immovable,
                     hard=immovable if hard else pins)
    np.testing.assert_array_equal(x1[:25], x0[:25])
    if hard:
        assert rep.unresolved > 0 and x1[k, 2] == x0[k, 2] - 0.05
    else:
        assert rep.unresolved == 0 and rep.reverted_vertices[k]
        np.testing.assert_array_equal(x1[k], x0[k])
        assert count_crossings(x1, tris) == 0


def test_rest_neighbours_are_not_pushed_apart() -> None:
    # a fine flat sheet whose vertices are closer than 2·distance: nothing may move
    x0, v, tris = two_sheets(0.5, 0.0)
    sc = SelfCollision.build(x0, tris, 0.08)  # more than the 0.1 m grid spacing / 2
    x1 = x0.copy()
    v1 = np.zeros_like(x0)
    rep = sc.resolve(x0, x1, v1, np.full(len(x0), 0.02), np.zeros(len(x0), dtype=bool))
    assert rep.contacts == 0
    np.testing.assert_array_equal(x1, x0)


def test_bad_distance_is_refused() -> None:
    from core.errors import SinewError

    x0, _, tris = two_sheets(0.1, 0.0)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(SinewError, match="self_distance"):
            SelfCollision.build(x0, tris, bad)


# -- a stack of folds -------------------------------------------------------------------


def fold(solver: str, frames: int, substeps: int, self_collision: bool, nx: int = 4, ny: int = 24):
    mesh = strip(nx, ny, 0.4, 2.4, 0.02, 0.05)
    tris = triangulate(mesh)
    model = model_of(mesh)
    sc = SelfCollision.build(mesh.positions, tris, 0.015) if self_collision else None
    ground = Plane((0, 0, 0), (0, 0, 1), thickness=0.01)
    pos, diags = simulate(model, solver, frames, fps=24, substeps=substeps,
                          colliders_per_frame=[[ground]] * frames, self_collision=sc)
    return pos, diags, tris


def test_a_strip_folding_onto_itself_never_crosses() -> None:
    """A 2.4 m strip dropped on its end buckles into a heap of folds on the ground."""
    pos, diags, tris = fold("FAST", 100, 2, True)  # 198 steps
    crossings = [count_crossings(x, tris) for x in pos]
    assert max(crossings) == 0
    assert [d.self_crossings for d in diags] == crossings
    assert sum(d.self_contacts for d in diags) > 1000  # it really piled up on itself
    assert pos[-1][:, 2].max() < 0.1  # a heap on the ground ...
    assert min_vertex_face_distance(pos[-1], tris) > 0.5 * 0.015  # ... of separate layers
    off, _, _ = fold("FAST", 100, 2, False)
    # without it the layers pass into each other (the ground presses them into one plane)
    assert max(count_crossings(x, tris) for x in off) > 0 or min_vertex_face_distance(off[-1], tris) < 1e-3


def test_small_fold_against_brute_force() -> None:
    pos, _, tris = fold("FAST", 60, 2, True, nx=2, ny=12)
    for f in (20, 40, 59):
        assert brute_force_crossings(pos[f], tris) == set()
    assert min_vertex_face_distance(pos[-1], tris) > 0.5 * 0.015


@pytest.mark.parametrize("solver,substeps", [("IMPLICIT", 2), ("NEWTON", 2), ("FAST", 1),
                                             ("SYMPLECTIC", 40)])
def test_every_solver_folds_without_crossing(solver: str, substeps: int) -> None:
    # EXPLICIT (forward Euler) diverges on these stiff springs at any affordable step; the
    # same stage runs after it (see the fast-vertex test above).
    pos, diags, tris = fold(solver, 30 if solver == "SYMPLECTIC" else 40, substeps, True,
                            nx=2, ny=12)
    assert max(count_crossings(x, tris) for x in pos) == 0
    assert sum(d.self_contacts for d in diags) > 0


@pytest.mark.parametrize("solver", ["IMPLICIT", "NEWTON", "FAST"])
def test_sheets_thrown_together_gain_no_energy(solver: str) -> None:
    """Two sheets thrown at each other (no gravity): the total energy (kinetic + spring)
    never rises above its start, the sheets never cross, and they stay apart."""
    x0, v, tris = two_sheets(0.1, 3.0)
    v[:25] = (0.0, 0.0, 1.0)
    quads = tris.reshape(-1, 2, 3)
    mesh = MeshArrays(x0, np.zeros((0, 2), dtype=np.int64), np.arange(len(quads)) * 4,
                      np.full(len(quads), 4), np.concatenate([quads[:, 0], quads[:, 1, 1:2]],
                                                             axis=1).reshape(-1))
    model = model_of(mesh, gravity=(0, 0, 0), air_drag=0.0, stiffness=500.0,
                     shear_stiffness=100.0, bending_stiffness=1.0, vertex_mass=0.01)
    sc = SelfCollision.build(two_sheets(0.5, 0.0)[0], tris, 0.015)
    sim = Simulator(model, solver, fps=48, substeps=1, state=State(x0, v), self_collision=sc)
    e0 = sim.mechanical_energy()
    contacts = 0
    for _ in range(48):
        d = sim.advance()
        contacts += d.self_contacts
        assert d.self_crossings == 0
        assert sim.mechanical_energy() <= e0 * (1 + 1e-9)
    assert contacts > 0
    assert min_vertex_face_distance(sim.state.x, tris, np.arange(25, 50), np.arange(32)) > 0.9 * 0.015


#: The shipped COTTON preset's material (blender_addon/springs/preset_table.py).
COTTON = dict(density=0.15, stiffness=2000.0, shear_stiffness=200.0, bending_stiffness=2.0,
              damping=1.0, air_drag=0.5, max_stretch=0.03, stiffness_mode="MATERIAL")


def test_cotton_strip_heaping_on_a_box_at_one_substep() -> None:
    """The COTTON preset as shipped (FAST, 1 substep, 3 % strain limit) with self-collision:
    a strip dropped on its end onto a box heaps up on it (bench/selfcollision_blender's
    scene, coarser). The contact stage stops each row on the box while the next is still
    falling, and self-collision then separates the layers; both used to store their pushes
    in the stiff springs (270 % strain and 25 crossing pairs by frame 24; at the bench's
    resolution the energy ran away at frame 21). Nothing ends a frame inside the box's
    thickness: self-collision's push is checked against the box again (before, vertices it
    pushed ended frames up to 8 cm inside the box while the report said no penetration)."""
    from core.springs import TriangleMesh
    from core.springs.contact import _SLACK

    mesh = strip(4, 24, 0.4, 2.4, 0.05, 0.65)
    tris = triangulate(mesh)
    springs = springs_of(mesh)
    model = build_model(mesh.positions, springs, triangles=tris, **COTTON)
    v = np.array([[x, y, z] for x in (-0.3, 0.3) for y in (-0.3, 0.3) for z in (0.0, 0.6)])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    t = np.array([f for a, b, c, d in quads for f in ((a, b, c), (a, c, d))])
    nrm = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
    inward = np.einsum("ij,ij->i", nrm, v[t].mean(1) - v.mean(0)) < 0
    t[inward] = t[inward][:, ::-1]  # counter-clockwise seen from outside
    box = TriangleMesh(v, t, thickness=0.02, friction=0.05)
    sim = Simulator(model, "FAST", fps=24, substeps=1, iterations=20, triangles=tris,
                    self_collision=SelfCollision.build(mesh.positions, tris, 0.015))
    contacts = 0
    for _ in range(24):
        d = sim.advance(colliders=[box])
        assert d.self_crossings == 0 and count_crossings(sim.state.x, tris) == 0, d.frame
        assert d.max_strain < 0.25, d.frame  # Blender's Cloth: 29 % on the bench's strip
        assert d.max_penetration == 0.0
        # nothing in the box, nor closer than the contact stage's margin (contact._SLACK)
        assert box.signed_distance(sim.state.x).min() >= 0.02 * (1 - _SLACK), d.frame
        contacts += d.self_contacts
    assert contacts > 100  # it really heaped up on itself
    assert box.signed_distance(sim.state.x).min() >= 0.02 * (1 - 1e-6)  # at rest on it: outside


def _pair_keys(got) -> set[tuple]:
    idx, is_vf = got[0], got[1]
    return {(bool(f),) + tuple(int(i) for i in row) for row, f in zip(idx, is_vf)}


def test_candidates_of_a_sheet_falling_as_a_whole_are_those_at_rest() -> None:
    """Self-collision's candidate pairs depend only on the relative motion of the parts: two
    sheets falling 1 m in one step (as a whole) give the pairs they give at rest, not every
    pair the long sweeps overlap (the broad phase sees the sweeps from a frame moving with
    the cloth)."""
    pos, _, tris = two_sheets(0.05, 0.0)
    sc = SelfCollision.build(pos, tris, 0.015)
    still = _pair_keys(sc.pairs(pos).get(pos))
    fall = _pair_keys(sc.pairs(pos).get(pos + (0.25, -0.125, -1.0)))
    assert fall == still
    through = pos.copy()
    through[25:, 2] -= 1.0  # the top sheet falls through the bottom one: every pair counts
    assert len(_pair_keys(sc.pairs(pos).get(through))) > 2 * len(still)


def _closest_over_sweep(x0: np.ndarray, x1: np.ndarray, idx: np.ndarray, is_vf: np.ndarray,
                        samples: int = 101) -> np.ndarray:
    """Brute force: the smallest distance of each pair ``(k,)`` at ``samples`` times of the
    linear sweep ``x0 → x1``."""
    best = np.full(len(idx), np.inf)
    for t in np.linspace(0.0, 1.0, samples):
        p = (x0 + t * (x1 - x0))[idx]
        vf = np.flatnonzero(is_vf)
        q = closest_points_on_triangles(p[vf, 0], p[vf, 1], p[vf, 2], p[vf, 3])
        best[vf] = np.minimum(best[vf], np.linalg.norm(p[vf, 0] - q, axis=1))
        ee = np.flatnonzero(~is_vf)
        s, u = segment_parameters(p[ee, 0], p[ee, 1], p[ee, 2], p[ee, 3])
        a = p[ee, 0] + s[:, None] * (p[ee, 1] - p[ee, 0])
        b = p[ee, 2] + u[:, None] * (p[ee, 3] - p[ee, 2])
        best[ee] = np.minimum(best[ee], np.linalg.norm(a - b, axis=1))
    return best


def test_step_pairs_hold_every_pair_that_comes_close_over_later_passes() -> None:
    """A step's candidate set, queried again after later passes moved some vertices far out
    of their boxes, still holds every non-neighbouring pair that comes within ``distance``
    somewhere on the sweep (brute force over all pairs, sampled in time)."""
    rng = np.random.default_rng(7)
    pos, _, tris = two_sheets(0.05, 0.0)
    d = 0.015
    sc = SelfCollision.build(pos, tris, d)
    x0 = pos + 0.002 * rng.standard_normal(pos.shape)
    x1 = x0 + (0.0, 0.0, -0.3) + 0.01 * rng.standard_normal(pos.shape)
    x1[25:, 2] -= 0.03  # the top sheet comes down onto the bottom one
    pairs = sc.pairs(x0)
    pairs.get(x1)
    x2 = x1.copy()
    moved = rng.choice(len(pos), 8, replace=False)
    x2[moved] += rng.uniform(-0.1, 0.1, (8, 3))  # far out of their grown boxes
    got = _pair_keys(pairs.get(x2))
    assert pairs.builds == 2  # the second query looked again (for the moved vertices only)
    everything = sc._candidates(np.full_like(pos, -10.0), np.full_like(pos, 10.0))
    close = _closest_over_sweep(x0, x2, everything[0], everything[1]) < d
    assert close.sum() > 0
    assert _pair_keys((everything[0][close], everything[1][close])) <= got


@pytest.mark.parametrize("seed", range(4))
def test_spreading_a_self_collision_push_meets_every_constraint(seed: int) -> None:
    """What :meth:`Simulator._spread` hands the strain limit after a layer lands on
    another: self-collision's pair rows (four vertices each, several over the same
    vertices: linearly dependent, and with their own normals and targets not quite
    consistent), the spring bounds of a layer stretched 30 % from a column of stopped
    vertices, the lower layer's edge fixed. With the plain fast projection its Newton
    steps overshoot (λ ~ C/ε on the near-null space) and it gives up unconverged on
    every seed; with the spread's compliance it ends on the constraints in a few steps:
    every spring with a movable end within its bound, every row with a movable vertex
    met, the fixed vertices where they were, velocities changed by Δx/h."""
    import importlib

    from core.springs.strainlimit import TOLERANCE, LinearRows, limit_strain

    # the module (``core.springs.simulate`` is also the name of its function)
    compliance = importlib.import_module("core.springs.simulate")._SPREAD_COMPLIANCE
    n, size, d, h = 8, 0.4, 0.015, 1 / 24
    g = grid(n, size, plane="XY")
    k = len(g.positions)
    pos = np.concatenate([g.positions, g.positions + [0.5 * size / n, 0.5 * size / n, 0.02]])
    topo = MeshArrays(pos, np.concatenate([g.edges, g.edges + k]),
                      np.concatenate([g.loop_starts, g.loop_starts + len(g.loop_vertices)]),
                      np.concatenate([g.loop_totals, g.loop_totals]),
                      np.concatenate([g.loop_vertices, g.loop_vertices + k]))
    tris = triangulate(topo)
    m = build_model(pos, build_springs(2 * k, topo.edges, topo.loop_starts, topo.loop_totals,
                                       topo.loop_vertices),
                    triangles=tris, density=0.15, stiffness=2000.0, shear_stiffness=200.0,
                    bending_stiffness=2.0, damping=1.0, stiffness_mode="MATERIAL", max_stretch=0.03)
    rng = np.random.default_rng(seed)
    top = np.arange(k, 2 * k)
    x = pos.copy()
    left = x[top, 0].min()
    x[top, 0] = left + (x[top, 0] - left) * 1.3  # stretched 30 % along x from its left column
    x[top, 2] = 0.003 * rng.standard_normal(k)  # landed on the lower layer (z = 0)
    x[top, :2] += rng.normal(scale=0.002, size=(k, 2))
    x0 = pos.copy()
    x0[top, 0] = x[top, 0]  # it came straight down
    v = (x - x0) / h
    fixed = np.zeros(2 * k, bool)
    fixed[:k] = np.isclose(pos[:k, 0], pos[:k, 0].min())
    fixed[top] = np.isclose(pos[top, 0], pos[top, 0].min())
    sc = SelfCollision.build(pos, tris, d)
    idx, alpha, normal, target = sc.resolve(x0, x, v, m.masses, fixed).constraints
    rows = LinearRows(idx, alpha, normal, target - 0.02 * d, np.full(len(idx), d))
    e = m.structural_count
    sp_, bound = m.springs[:e], 1.03 * m.rest_lengths[:e]
    movable = ~fixed
    free_spring = movable[sp_[:, 0]] | movable[sp_[:, 1]]
    free_row = np.any((alpha != 0) & movable[idx], axis=1)
    assert np.max(np.linalg.norm(x[sp_[:, 0]] - x[sp_[:, 1]], axis=1)[free_spring]
                  / bound[free_spring]) > 1.2
    x_in, v_in = x.copy(), v.copy()
    info = limit_strain(m, x, v, h, fixed=fixed, rows=rows, compliance=compliance)
    assert info.converged and 0 < info.iterations <= 20
    length = np.linalg.norm(x[sp_[:, 0]] - x[sp_[:, 1]], axis=1)
    assert np.all(length[free_spring] <= bound[free_spring] * (1 + 1.01 * TOLERANCE))
    assert np.all(rows.shortfall(x)[free_row] <= 1.01 * TOLERANCE * d)
    np.testing.assert_array_equal(x[fixed], x_in[fixed])
    np.testing.assert_allclose(v, v_in + (x - x_in) / h, atol=1e-9)
    # the input is the hard case: the plain projection (compliance 0) stops short on it
    x, v = x_in.copy(), v_in.copy()
    assert not limit_strain(m, x, v, h, fixed=fixed, rows=rows).converged
