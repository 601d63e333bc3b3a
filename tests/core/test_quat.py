"""Quaternion helpers against rotation-matrix ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from core import quat


def rand_q(rng, n):
    return quat.normalize(rng.normal(size=(n, 4)))


def rodrigues(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def test_axis_angle_matches_rodrigues():
    rng = np.random.default_rng(1)
    for _ in range(20):
        ax = rng.normal(size=3)
        ang = rng.uniform(-3, 3)
        np.testing.assert_allclose(quat.to_matrix(quat.from_axis_angle(ax, ang)), rodrigues(ax, ang), atol=1e-12)


def test_blender_convention_90_about_z_takes_x_to_y():
    q = quat.from_axis_angle([0, 0, 1], np.pi / 2)
    np.testing.assert_allclose(q, [np.sqrt(0.5), 0, 0, np.sqrt(0.5)], atol=1e-15)
    np.testing.assert_allclose(quat.rotate(q, [1, 0, 0]), [0, 1, 0], atol=1e-15)


def test_multiply_is_matrix_product_and_rotate_is_matrix_vector():
    rng = np.random.default_rng(2)
    a, b = rand_q(rng, 50), rand_q(rng, 50)
    v = rng.normal(size=(50, 3))
    np.testing.assert_allclose(quat.to_matrix(quat.multiply(a, b)), quat.to_matrix(a) @ quat.to_matrix(b), atol=1e-12)
    np.testing.assert_allclose(quat.rotate(a, v), np.einsum("nij,nj->ni", quat.to_matrix(a), v), atol=1e-12)
    np.testing.assert_allclose(quat.to_matrix(quat.conjugate(a)), np.swapaxes(quat.to_matrix(a), 1, 2), atol=1e-12)
    np.testing.assert_allclose(quat.multiply(a, quat.inverse(a)), quat.identity(50), atol=1e-12)


def test_matrix_round_trip_and_scale_removed():
    rng = np.random.default_rng(3)
    q = quat.canonical(rand_q(rng, 100))
    m = quat.to_matrix(q)
    np.testing.assert_allclose(quat.from_matrix(m), q, atol=1e-12)
    np.testing.assert_allclose(quat.from_matrix(m * 2.5), q, atol=1e-12)
    # Half turns (trace -1) are the hard case for naive conversions.
    for ax in np.eye(3):
        q = quat.from_axis_angle(ax, np.pi)
        np.testing.assert_allclose(quat.to_matrix(quat.from_matrix(quat.to_matrix(q))), quat.to_matrix(q), atol=1e-12)


def test_rotvec_round_trip_and_small_angles():
    rng = np.random.default_rng(4)
    rv = rng.normal(size=(100, 3))
    rv *= (rng.uniform(0, np.pi - 1e-6, 100) / np.linalg.norm(rv, axis=1))[:, None]
    np.testing.assert_allclose(quat.to_rotvec(quat.from_rotvec(rv)), rv, atol=1e-9)
    tiny = np.array([1e-12, -2e-12, 3e-13])
    np.testing.assert_allclose(quat.to_rotvec(quat.from_rotvec(tiny)), tiny, rtol=1e-6, atol=1e-20)
    np.testing.assert_allclose(quat.to_matrix(quat.from_rotvec(rv)),
                               np.array([rodrigues(r, np.linalg.norm(r)) for r in rv]), atol=1e-12)


@pytest.mark.parametrize("u,v", [
    ([1, 0, 0], [0, 1, 0]), ([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [-1, -2, -3]),
    ([0, 0, 1], [0, 0, -5]), ([0.3, -2, 0.1], [4, 1, -1]),
])
def test_between_maps_u_onto_v(u, v):
    q = quat.between(u, v)
    assert abs(np.linalg.norm(q) - 1) < 1e-12
    got = quat.rotate(q, np.asarray(u, float) / np.linalg.norm(u))
    np.testing.assert_allclose(got, np.asarray(v, float) / np.linalg.norm(v), atol=1e-12)


def test_between_is_shortest_arc_and_zero_vector_is_identity():
    rng = np.random.default_rng(5)
    u, v = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    cosang = np.einsum("ni,ni->n", u, v) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    np.testing.assert_allclose(quat.angle(quat.between(u, v)), np.arccos(np.clip(cosang, -1, 1)), atol=1e-9)
    np.testing.assert_allclose(quat.between([0, 0, 0], [1, 0, 0]), [1, 0, 0, 0])
    q = quat.between([1, 0, 0], [-1, 0, 0], fallback_axis=[0, 0, 1])
    np.testing.assert_allclose(np.abs(q), [0, 0, 0, 1], atol=1e-12)


def test_angle_between_and_slerp():
    rng = np.random.default_rng(6)
    a, b = rand_q(rng, 30), rand_q(rng, 30)
    total = quat.angle_between(a, b)
    np.testing.assert_allclose(quat.angle_between(a, -b), total, atol=1e-9)
    for s in (0.0, 0.25, 0.5, 1.0):
        m = quat.slerp(a, b, s)
        np.testing.assert_allclose(quat.angle_between(a, m), s * total, atol=1e-7)
        np.testing.assert_allclose(quat.angle_between(m, b), (1 - s) * total, atol=1e-7)


def test_swing_twist_recomposes_and_axes_are_right():
    rng = np.random.default_rng(7)
    q = rand_q(rng, 200)
    sw, tw = quat.swing_twist(q)
    np.testing.assert_allclose(quat.to_matrix(quat.multiply(sw, tw)), quat.to_matrix(q), atol=1e-12)
    np.testing.assert_allclose(sw[:, 2], 0, atol=1e-12)          # swing has no Y component
    np.testing.assert_allclose(tw[:, [1, 3]], 0, atol=1e-12)     # twist only about Y
    ang = 0.7
    q = quat.multiply(quat.from_axis_angle([1, 0, 0], 0.3), quat.from_axis_angle([0, 1, 0], ang))
    np.testing.assert_allclose(quat.twist_angle(q), ang, atol=1e-12)


def test_make_continuous():
    rng = np.random.default_rng(8)
    base = quat.slerp(quat.identity(()), quat.from_axis_angle([0, 0, 1], 3.0), np.linspace(0, 1, 40))
    base = np.stack([base, base], axis=1)                      # (F, 2, 4)
    flipped = base * np.where(rng.random((40, 2, 1)) < 0.5, -1, 1)
    out = quat.make_continuous(flipped, axis=0)
    assert np.all(np.einsum("fbi,fbi->fb", out[1:], out[:-1]) >= 0)
    np.testing.assert_allclose(np.abs(np.einsum("fbi,fbi->fb", out, flipped)), 1, atol=1e-12)


def test_normalize_zero_is_identity():
    np.testing.assert_allclose(quat.normalize(np.zeros((2, 4))), quat.identity(2))
