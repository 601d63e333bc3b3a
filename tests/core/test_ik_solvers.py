"""CCD, FABRIK and DLS: reach, straightness, limits, locks, poles, degenerate input."""

from __future__ import annotations

import numpy as np
import pytest

from core import quat
from core.errors import ChainError
from core.ik import (
    SOLVERS,
    Chain,
    JointLimits,
    RootTransform,
    SolveSettings,
    forward_kinematics,
    forward_kinematics_full,
    within,
)

NAMES = ["CCD", "FABRIK", "DLS"]


def chain5(limits=None):
    pts = np.array([[0, 0, 0], [0, 0.5, 0.05], [0.05, 1.1, 0.1], [0.0, 1.5, 0.2], [0.0, 2.2, 0.2], [0.1, 2.6, 0.15]])
    return Chain.from_points(pts, limits)


def straight(n, length=0.5):
    pts = np.zeros((n + 1, 3))
    pts[:, 1] = np.arange(n + 1) * length
    return Chain.from_points(pts)


def reachable_targets(chain, k, seed):
    rng = np.random.default_rng(seed)
    qs = quat.from_rotvec(rng.normal(scale=0.6, size=(k, chain.n, 3)))
    return np.array([forward_kinematics(chain, q)[-1] for q in qs])


def test_solver_table():
    assert list(SOLVERS) == ["CCD", "FABRIK", "DLS"]
    for key, cls in SOLVERS.items():
        assert cls.name == key
        assert isinstance(cls.label, str) and cls.label
        assert isinstance(cls.description, str) and "\n" not in cls.description
        assert callable(cls.solve)


@pytest.mark.parametrize("name", NAMES)
def test_fk_of_ik_reaches_reachable_targets(name):
    c = chain5()
    total = float(c.lengths.sum())
    s = SolveSettings(max_iterations=4000 if name == "CCD" else 300, tolerance=1e-7 * total)
    for tgt in reachable_targets(c, 8, seed=10):
        r = SOLVERS[name].solve(c, tgt, None, s)
        tip = forward_kinematics(c, r.rotations)[-1]
        assert np.linalg.norm(tip - tgt) <= 1e-6 * total
        assert r.converged and r.error == pytest.approx(np.linalg.norm(tip - tgt), abs=1e-12)
        np.testing.assert_allclose(np.linalg.norm(r.rotations, axis=1), 1, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_long_chain_follows_a_path_with_finite_unit_poses(name):
    """A 30-bone chain baked along a path: every frame reaches its target by its own forward
    kinematics, with unit rotations. (CCD's rotations drifted off unit length over its sweeps
    and its pose grew to NaN at frame 1.)"""
    from core.ik.bake import bake_chain

    n, length = 30, 0.5
    reach = n * length
    t = np.linspace(0.0, 2.0 * np.pi, 12)
    targets = np.stack([0.45 * reach * np.sin(3 * t), 0.35 * reach * np.sin(2 * t + 0.5),
                        0.55 * reach + 0.25 * reach * np.cos(t)], axis=1)
    pts = np.zeros((n + 1, 3))
    pts[:, 2] = np.arange(n + 1) * length
    res = bake_chain(Chain.from_points(pts), targets, name, SolveSettings(max_iterations=200, tolerance=1e-6))
    np.testing.assert_allclose(np.linalg.norm(res.rotations, axis=-1), 1.0, atol=1e-9)
    tips = np.array([forward_kinematics(Chain.from_points(pts), q)[-1] for q in res.rotations])
    np.testing.assert_array_less(np.linalg.norm(tips - targets, axis=1), 1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_root_transform_is_respected(name):
    c = chain5()
    rng = np.random.default_rng(3)
    root = RootTransform(quat.normalize(rng.normal(size=4)), rng.normal(size=3))
    local = reachable_targets(c, 1, seed=4)[0]
    world = quat.rotate(root.rotation, local) + root.position
    s = SolveSettings(2000, 1e-8)
    r = SOLVERS[name].solve(c, world, None, s, root=root)
    assert np.linalg.norm(forward_kinematics(c, r.rotations, root)[-1] - world) < 1e-6


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [0, 1])
def test_unreachable_targets_give_a_straight_chain(name, seed):
    c = straight(6)
    rng = np.random.default_rng(seed)
    d = rng.normal(size=3)
    d /= np.linalg.norm(d)
    target = d * 5.0
    init = quat.from_rotvec(rng.normal(scale=0.4, size=(6, 3)))
    r = SOLVERS[name].solve(c, target, init, SolveSettings(100, 1e-6))
    pos, glob = forward_kinematics_full(c, r.rotations)
    axes = quat.rotate(glob, [0, 1, 0])
    ang = np.degrees(np.arccos(np.clip(axes @ d, -1, 1)))
    assert np.all(ang < 0.1), ang
    assert not r.converged and r.error == pytest.approx(5.0 - 3.0, abs=1e-9)


def random_limits(n, seed):
    rng = np.random.default_rng(seed)
    lock = rng.random((n, 3)) < 0.15
    use = rng.random((n, 3)) < 0.7
    lo = -rng.uniform(0.05, 1.0, (n, 3))
    hi = rng.uniform(0.05, 1.0, (n, 3))
    return JointLimits(lock, use, lo, hi)


@pytest.mark.parametrize("name", NAMES)
def test_limits_are_never_exceeded(name):
    for seed in range(4):
        lim = random_limits(5, seed)
        c = chain5(lim)
        rng = np.random.default_rng(100 + seed)
        for _k in range(4):
            tgt = rng.normal(size=3) * 1.5
            init = quat.from_rotvec(rng.normal(scale=1.0, size=(5, 3)))
            r = SOLVERS[name].solve(c, tgt, init, SolveSettings(60, 1e-6))
            assert within(r.rotations, lim, tol=1e-9)
            assert np.all(np.isfinite(r.rotations))


@pytest.mark.parametrize("name", NAMES)
def test_locked_axes_stay_at_zero_and_hinge_still_reaches(name):
    # Every joint may only turn about its own X: a planar chain in the bones' YZ plane.
    n = 4
    lock = np.zeros((n, 3), bool)
    lock[:, 1:] = True
    lim = JointLimits(lock, np.zeros((n, 3), bool), np.zeros((n, 3)), np.zeros((n, 3)))
    c = straight(n).with_limits(lim)
    tgt = forward_kinematics(c, quat.from_axis_angle(np.array([1, 0, 0]), np.array([0.3, 0.5, -0.4, 0.6]) ))[-1]
    r = SOLVERS[name].solve(c, tgt, None, SolveSettings(3000, 1e-7))
    rv = quat.to_rotvec(r.rotations)
    np.testing.assert_allclose(rv[:, 1:], 0, atol=1e-9)
    assert r.error < 1e-4


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("side", [1.0, -1.0])
def test_pole_puts_the_middle_joint_on_the_pole_side(name, side):
    c = Chain.from_points(np.array([[0, 0, 0], [0, 1, 0.1], [0, 2, 0]]))
    target = np.array([0.0, 1.4, 0.0])
    pole = np.array([side * 2.0, 0.7, 0.5])
    # Blender's semantics: pole_angle names the first bone's axis that faces the pole; this
    # chain bends toward its first bone's +Z, so pole_angle = 90 degrees puts the bend there.
    r = SOLVERS[name].solve(c, target, None, SolveSettings(500, 1e-7), pole=pole, pole_angle=np.pi / 2)
    pos = forward_kinematics(c, r.rotations)
    assert np.linalg.norm(pos[-1] - target) < 1e-5
    u = target / np.linalg.norm(target)
    mid = pos[1] - (pos[1] @ u) * u
    pp = pole - (pole @ u) * u
    cos = mid @ pp / np.linalg.norm(mid) / np.linalg.norm(pp)
    assert cos > 0.999  # in the root-target-pole plane, on the pole's side


@pytest.mark.parametrize("name", NAMES)
def test_straight_chain_toward_nearer_target_bends_instead_of_folding(name):
    c = straight(4)
    r = SOLVERS[name].solve(c, [0, 1.2, 0], None, SolveSettings(500, 1e-7))
    pos = forward_kinematics(c, r.rotations)
    assert np.linalg.norm(pos[-1] - [0, 1.2, 0]) < 1e-5
    # No bone reverses against its parent (a folded chain would have 180 degree joints).
    assert np.all(quat.angle(r.rotations) < np.pi * 0.9)


@pytest.mark.parametrize("name", NAMES)
def test_degenerate_inputs(name):
    solve = SOLVERS[name].solve
    s = SolveSettings(50, 1e-6)
    c = chain5()
    # Target exactly on the root: a finite pose.
    r = solve(c, [0, 0, 0], None, s)
    assert np.all(np.isfinite(r.rotations)) and np.isfinite(r.error)
    # One-bone chain: points at the target (reachable only at distance L).
    one = Chain.from_points(np.array([[0, 0, 0], [0, 1, 0]]))
    r = solve(one, [3, 0, 0], None, s)
    np.testing.assert_allclose(forward_kinematics(one, r.rotations)[-1], [1, 0, 0], atol=1e-6)
    r = solve(one, [0, -1, 0], None, s)
    np.testing.assert_allclose(forward_kinematics(one, r.rotations)[-1], [0, -1, 0], atol=1e-6)
    for bad in ([np.nan, 0, 0], [0, 0], [[0, 0, 1]] * 2):
        with pytest.raises(ChainError):
            solve(c, bad, None, s)
    with pytest.raises(ChainError):
        solve(c, [1, 0, 0], quat.identity(3), s)
    with pytest.raises(ChainError):
        SolveSettings(max_iterations=-1)


@pytest.mark.parametrize("name", NAMES)
def test_non_connected_and_coincident_joints(name):
    rng = np.random.default_rng(7)
    mats = quat.to_matrix(quat.normalize(rng.normal(size=(4, 4))))
    heads = np.array([[0, 0, 0], [0.2, 0.6, 0.1], [0.2, 0.6, 0.1], [0.5, 1.3, 0.0]])  # bones 1, 2 share a head
    c = Chain.from_rest_matrices(heads, mats, np.array([0.5, 0.3, 0.7, 0.6]))
    for tgt in reachable_targets(c, 3, seed=8):
        r = SOLVERS[name].solve(c, tgt, None, SolveSettings(3000, 1e-8))
        assert np.all(np.isfinite(r.rotations))
        assert np.linalg.norm(forward_kinematics(c, r.rotations)[-1] - tgt) < 1e-6


def test_fabrik_iteration_counts_from_rest():
    """Seed observation, measured: FABRIK from rest needs <= 10 iterations on average."""
    c = straight(10)
    rng = np.random.default_rng(11)
    its = []
    for _ in range(30):
        d = rng.normal(size=3)
        tgt = d / np.linalg.norm(d) * rng.uniform(1.0, 4.5)
        r = SOLVERS["FABRIK"].solve(c, tgt, None, SolveSettings(200, 1e-4))
        assert r.converged
        its.append(r.iterations)
    assert np.mean(its) <= 10, np.mean(its)
