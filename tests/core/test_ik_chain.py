"""Chain model and forward kinematics."""

from __future__ import annotations

import numpy as np
import pytest

from core import quat
from core.errors import ChainError
from core.ik import (
    Chain,
    JointLimits,
    RootTransform,
    forward_kinematics,
    forward_kinematics_batch,
    forward_kinematics_full,
)


def zigzag(n=4, length=0.5):
    pts = np.zeros((n + 1, 3))
    pts[:, 1] = np.arange(n + 1) * length
    pts[1::2, 0] = 0.1
    return pts


def test_from_points_rest_pose_reproduces_points():
    pts = zigzag(5)
    c = Chain.from_points(pts)
    np.testing.assert_allclose(forward_kinematics(c, quat.identity(5)), pts, atol=1e-12)
    np.testing.assert_allclose(c.lengths, np.linalg.norm(np.diff(pts, axis=0), axis=1))
    # Connected: each child head sits at the parent's tail (0, L, 0).
    np.testing.assert_allclose(c.rest_offsets[1:], np.c_[np.zeros(4), c.lengths[:-1], np.zeros(4)], atol=1e-12)


def test_fk_matches_explicit_matrix_chain():
    rng = np.random.default_rng(0)
    pts = zigzag(4)
    c = Chain.from_points(pts)
    q = quat.normalize(rng.normal(size=(4, 4)))
    root = RootTransform(quat.normalize(rng.normal(size=4)), rng.normal(size=3))
    pos, glob = forward_kinematics_full(c, q, root)
    m = np.eye(4)
    m[:3, :3] = quat.to_matrix(root.rotation)
    m[:3, 3] = root.position
    for i in range(4):
        t = np.eye(4)
        t[:3, 3] = c.rest_offsets[i]
        r = np.eye(4)
        r[:3, :3] = quat.to_matrix(c.rest_rotations[i]) @ quat.to_matrix(q[i])
        m = m @ t @ r
        np.testing.assert_allclose(pos[i], m[:3, 3], atol=1e-12)
        np.testing.assert_allclose(quat.to_matrix(glob[i]), m[:3, :3], atol=1e-12)
    np.testing.assert_allclose(pos[4], m[:3, :3] @ [0, c.lengths[-1], 0] + m[:3, 3], atol=1e-12)
    # A 4x4 root matrix is the same root.
    np.testing.assert_allclose(forward_kinematics(c, q, np.block([[quat.to_matrix(root.rotation), root.position[:, None]], [np.zeros((1, 3)), np.ones((1, 1))]])), pos, atol=1e-12)


def test_batch_fk_equals_single_fk_with_per_frame_roots():
    rng = np.random.default_rng(1)
    c = Chain.from_points(zigzag(6))
    q = quat.normalize(rng.normal(size=(9, 6, 4)))
    roots = RootTransform(quat.normalize(rng.normal(size=(9, 4))), rng.normal(size=(9, 3)))
    batch = forward_kinematics_batch(c, q, roots)
    assert batch.shape == (9, 7, 3)
    for f in range(9):
        single = forward_kinematics(c, q[f], RootTransform(roots.rotation[f], roots.position[f]))
        np.testing.assert_allclose(batch[f], single, atol=1e-12)


def test_from_rest_matrices_non_connected_bones():
    rng = np.random.default_rng(2)
    n = 4
    mats = quat.to_matrix(quat.normalize(rng.normal(size=(n, 4))))
    heads = rng.normal(size=(n, 3))
    lengths = rng.uniform(0.2, 1.0, n)
    c = Chain.from_rest_matrices(heads, mats, lengths)
    pos, glob = forward_kinematics_full(c, quat.identity(n))
    np.testing.assert_allclose(pos[:n], heads, atol=1e-12)
    np.testing.assert_allclose(quat.to_matrix(glob), mats, atol=1e-12)
    np.testing.assert_allclose(pos[n], heads[-1] + mats[-1] @ [0, lengths[-1], 0], atol=1e-12)
    # Rotating bone 1 moves bone 2's head rigidly with it (offset fixed in bone 1's frame).
    q = quat.identity(n)
    q[1] = quat.from_axis_angle([1, 0, 0], 0.7)
    pos2 = forward_kinematics(c, q)
    r = mats[1] @ quat.to_matrix(q[1]) @ mats[1].T
    np.testing.assert_allclose(pos2[2] - pos2[1], r @ (heads[2] - heads[1]), atol=1e-12)
    # 4x4 matrices are accepted too.
    m4 = np.tile(np.eye(4), (n, 1, 1))
    m4[:, :3, :3] = mats
    c4 = Chain.from_rest_matrices(heads, m4, lengths)
    np.testing.assert_allclose(c4.rest_rotations, c.rest_rotations, atol=1e-12)


@pytest.mark.parametrize("bad", [
    lambda: Chain.from_points(np.array([[0, 0, 0], [0, 1, 0], [0, 1, 0]])),
    lambda: Chain(quat.identity(2), np.zeros((2, 3)), np.array([1.0, 0.0])),
    lambda: Chain(quat.identity(2), np.zeros((2, 3)), np.array([1.0, np.nan])),
    lambda: Chain(quat.identity(3), np.zeros((2, 3)), np.array([1.0, 1.0])),
    lambda: Chain(quat.identity(0), np.zeros((0, 3)), np.zeros(0)),
    lambda: Chain.from_points(np.zeros((1, 3))),
    lambda: Chain.from_points(zigzag(3), limits=JointLimits.free(2)),
    lambda: forward_kinematics(Chain.from_points(zigzag(3)), quat.identity(2)),
    lambda: forward_kinematics(Chain.from_points(zigzag(3)), np.full((3, 4), np.nan)),
    lambda: JointLimits(np.zeros((2, 3), bool), np.ones((2, 3), bool), np.ones((2, 3)), np.zeros((2, 3))),
])
def test_bad_chains_raise_chain_error(bad):
    with pytest.raises(ChainError):
        bad()


def test_chain_is_immutable():
    c = Chain.from_points(zigzag(2))
    with pytest.raises(ValueError):
        c.lengths[0] = 3.0
    with pytest.raises(AttributeError):
        c.lengths = np.ones(2)  # type: ignore[misc]
