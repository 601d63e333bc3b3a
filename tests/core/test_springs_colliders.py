"""Colliders: nothing ends inside a collider by more than its thickness."""

import numpy as np
import pytest

from core.springs import Plane, Simulator, Sphere, TriangleMesh, build_model, build_springs
from core.springs.colliders import closest_points_on_triangles
from core.springs.shapes import grid, triangulate


def flat_cloth(n=10, size=1.0, z=0.5):
    g = grid(n, size, plane="XY")
    ss = build_springs(len(g.positions), g.edges, g.loop_starts, g.loop_totals, g.loop_vertices)
    pos = g.positions + [0.0, 0.0, z]
    return build_model(pos, ss, stiffness=200.0, shear_stiffness=50.0, bending_stiffness=2.0,
                       damping=0.1, total_mass=0.3, triangles=triangulate(g), air_drag=0.1)


def uv_sphere(radius, rings=16, segments=32):
    th = np.linspace(0, np.pi, rings + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    T, P = np.meshgrid(th, ph, indexing="ij")
    verts = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1).reshape(-1, 3)
    verts = np.vstack([verts, [[0, 0, 1]], [[0, 0, -1]]]) * radius
    top, bot = len(verts) - 2, len(verts) - 1
    idx = np.arange((rings - 1) * segments).reshape(rings - 1, segments)
    nx = np.roll(idx, -1, axis=1)
    tris = [np.stack([np.full(segments, top), idx[0], nx[0]], 1),
            np.stack([np.full(segments, bot), nx[-1], idx[-1]], 1)]
    a, b, c, d = idx[:-1], nx[:-1], nx[1:], idx[1:]
    tris += [np.stack([a, d, c], -1).reshape(-1, 3), np.stack([a, c, b], -1).reshape(-1, 3)]
    return verts, np.concatenate(tris)


@pytest.mark.parametrize("solver", ["FAST", "NEWTON", "IMPLICIT", "SYMPLECTIC"])
def test_cloth_on_ground_plane(solver):
    m = flat_cloth(z=0.3)
    ground = Plane((0, 0, 0), (0, 0, 1), thickness=0.01, friction=0.5)
    sim = Simulator(m, solver, fps=24, substeps=20 if solver == "SYMPLECTIC" else 2, iterations=10)
    for _ in range(30):
        sim.advance(colliders=[ground])
        assert ground.signed_distance(sim.state.x).min() >= 0.01 - 1e-9
    assert np.abs(sim.state.x[:, 2] - 0.01).max() < 1e-3  # lying on the ground
    assert np.abs(sim.state.v).max() < 0.05  # friction and contact stopped it


def test_cloth_dropped_on_sphere_and_sphere_mesh():
    verts, tris = uv_sphere(0.3)
    mesh = TriangleMesh(verts, tris, thickness=0.01, friction=0.3)
    ball = Sphere((0, 0, 0), 0.3, thickness=0.01, friction=0.3)
    for col, sd in ((ball, ball.signed_distance), (mesh, mesh.signed_distance)):
        m = flat_cloth(n=12, size=1.2, z=0.4)
        sim = Simulator(m, "FAST", fps=24, substeps=2, iterations=10)
        for _ in range(36):
            sim.advance(colliders=[col])
            assert sd(sim.state.x).min() >= 0.01 - 1e-9
        centre = sim.state.x[len(sim.state.x) // 2]
        assert 0.29 < centre[2] < 0.33  # draped over the top, not through it
        assert sim.state.x[:, 2].min() < 0.2  # corners hang down


def test_sphere_mesh_signed_distance_matches_sphere():
    verts, tris = uv_sphere(1.0, rings=32, segments=64)
    mesh = TriangleMesh(verts, tris)
    rng = np.random.default_rng(0)
    d = rng.standard_normal((200, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    r = rng.uniform(0.7, 1.3, 200)
    pts = d * r[:, None]
    sd = mesh.signed_distance(pts)
    assert np.all(np.sign(sd[np.abs(r - 1) > 0.02]) == np.sign(r - 1)[np.abs(r - 1) > 0.02])
    assert np.abs(sd - (r - 1)).max() < 0.01


def test_closest_point_on_triangle_against_brute_force():
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((3, 300, 3))
    p = 2 * rng.standard_normal((300, 3))
    q = closest_points_on_triangles(p, a, b, c)
    # dense barycentric sampling
    s = np.linspace(0, 1, 81)
    u, v = np.meshgrid(s, s)
    keep = (u + v) <= 1
    u, v = u[keep], v[keep]
    samples = a[:, None] + u[None, :, None] * (b - a)[:, None] + v[None, :, None] * (c - a)[:, None]
    brute = np.linalg.norm(samples - p[:, None], axis=2).min(axis=1)
    got = np.linalg.norm(q - p, axis=1)
    assert np.all(got <= brute + 1e-12)
    assert np.all(brute - got < 0.05)


def test_contact_removes_inward_velocity_and_applies_friction():
    ground = Plane((0, 0, 0), (0, 0, 1), friction=0.5)
    x = np.array([[0.0, 0, -0.1], [0.0, 0, 1.0]])
    v = np.array([[1.0, 0, -1.0], [1.0, 0, -1.0]])
    ground.resolve(x, v, x.copy())
    assert np.allclose(x[0], [0, 0, 0]) and np.allclose(x[1], [0, 0, 1])
    assert np.allclose(v[0], [0.5, 0, 0])  # |Δv_t| = μ |Δv_n|
    assert np.allclose(v[1], [1.0, 0, -1.0])  # untouched
