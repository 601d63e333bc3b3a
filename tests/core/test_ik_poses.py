"""Poses a rigger accepts: path independence, no spurious twist, hinges, knees, spines, joint
solving, orientation goals, stiffness and Blender's pole_angle (geometry and invariants)."""

from __future__ import annotations

import numpy as np
import pytest

from core import quat
from core.ik import SOLVERS, Chain, JointLimits, SolveSettings, forward_kinematics, forward_kinematics_full
from core.ik.bake import bake_chain
from core.ik.group import GroupMember, bake_group
from core.ik.limits import limit_angles

NAMES = ["CCD", "FABRIK", "DLS"]


def arm(limits=None):
    """A 3-bone arm in a T-pose along +X, elbow slightly bent back (-Y), like Rigify's."""
    pts = np.array([[0.0, 0, 0], [0.3, -0.03, 0], [0.6, 0, 0], [0.7, 0, 0]])
    return Chain.from_points(pts, limits)


def hinge_limits(n, hinge_bones):
    lock = np.zeros((n, 3), bool)
    for i in hinge_bones:
        lock[i] = (False, True, True)  # Rigify's forearm/shin: lock_ik_y + lock_ik_z
    return JointLimits(lock, np.zeros((n, 3), bool), np.zeros((n, 3)), np.zeros((n, 3)))


def box_limits(n, seed):
    rng = np.random.default_rng(seed)
    return JointLimits(np.zeros((n, 3), bool), np.ones((n, 3), bool), -rng.uniform(0.4, 1.2, (n, 3)),
                       rng.uniform(0.4, 1.2, (n, 3)))


def closed_path(frames, seed, centre, radius):
    """A smooth random closed path (random Fourier coefficients), first frame == last frame."""
    rng = np.random.default_rng(seed)
    s = np.linspace(0.0, 2.0 * np.pi, frames)
    out = np.tile(np.asarray(centre, float), (frames, 1))
    for k in (1, 2, 3):
        a, b = rng.normal(scale=radius / k, size=(2, 3))
        out += np.outer(np.cos(k * s), a) + np.outer(np.sin(k * s), b)
    return out


def reachable(chain, k, seed, scale=0.7):
    """Targets a pose within the chain's limits reaches (FK of clamped random poses)."""
    from core.ik.limits import clamp
    rng = np.random.default_rng(seed)
    qs = clamp(quat.from_rotvec(rng.normal(scale=scale, size=(k, chain.n, 3))), chain.limits)
    return np.array([forward_kinematics(chain, q)[-1] for q in qs]), qs


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("limited", [False, True])
def test_closed_paths_return_to_the_same_pose(name, limited):
    c = arm(box_limits(3, 3) if limited else None)
    for seed in range(3):
        tg = closed_path(80, seed, (0.35, -0.1, 0.1), 0.12)
        res = bake_chain(c, tg, name, SolveSettings(200, 1e-5))
        gap = np.degrees(quat.angle_between(res.rotations[0], res.rotations[-1]).max())
        assert gap < 1.0, (seed, gap)


@pytest.mark.parametrize("name", NAMES)
def test_position_goals_give_no_twist(name):
    c = arm()
    tg = closed_path(120, 7, (0.3, -0.1, 0.1), 0.2)
    res = bake_chain(c, tg, name, SolveSettings(200, 1e-5))
    assert np.all(res.converged)
    twist = np.degrees(np.abs(limit_angles(res.rotations)[..., 1]))
    assert twist.max() < 2.0, twist.max()


@pytest.mark.parametrize("name", NAMES)
def test_hinge_chains_reach_reachable_targets(name):
    c = arm(hinge_limits(3, [1]))
    tg, _ = reachable(c, 40, seed=2, scale=0.6)
    res = bake_chain(c, tg, name, SolveSettings(300, 1e-5))
    assert res.errors.max() < 1e-4, res.errors.max()
    ang = limit_angles(res.rotations)
    np.testing.assert_allclose(ang[:, 1, 1:], 0.0, atol=1e-9)  # the elbow only bends about X


def leg(limits=None):
    """Hip at the origin, thigh down (-Z) with the knee a little forward (-Y), shin down."""
    return Chain.from_points(np.array([[0.0, 0, 0], [0, -0.04, -0.45], [0, 0, -0.9]]), limits)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("hinge", [False, True])
def test_knee_keeps_bending_the_rest_way(name, hinge):
    c = leg(hinge_limits(2, [1]) if hinge else None)
    rng = np.random.default_rng(11)
    d = rng.normal(size=(200, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    d = d[d[:, 2] < 0.3]  # all around the hip, up to a little above it
    tg = d * rng.uniform(0.35, 0.85, (d.shape[0], 1)) * c.reach
    res = bake_chain(c, tg, name, SolveSettings(300, 1e-5))
    assert res.errors.max() < 1e-4
    p0, g0 = forward_kinematics_full(c, quat.identity(2))
    rest_axis = quat.rotate(quat.conjugate(g0[0]), np.cross(p0[1] - p0[0], p0[2] - p0[1]))
    for q in res.rotations:
        p, g = forward_kinematics_full(c, q)
        axis = quat.rotate(quat.conjugate(g[0]), np.cross(p[1] - p[0], p[2] - p[1]))
        assert axis @ rest_axis > 0.0  # the knee's bend axis, in the thigh's frame, as at rest


@pytest.mark.parametrize("name", NAMES)
def test_long_vertical_chain_spreads_the_bend(name):
    pts = np.zeros((8, 3))
    pts[:, 2] = np.arange(8) * 0.1
    c = Chain.from_points(pts)
    for tgt in ([0.25, -0.2, 0.5], [0.0, -0.4, 0.45], [-0.3, 0.1, 0.55]):
        r = SOLVERS[name].solve(c, tgt, None, SolveSettings(500, 1e-6))
        assert r.converged
        # Bend of each joint: the angle between consecutive bones' directions (bone 0 vs up).
        p = forward_kinematics(c, r.rotations)
        d = np.diff(p, axis=0)
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        prev = np.vstack(([0, 0, 1.0], d[:-1]))
        bend = np.arccos(np.clip(np.einsum("ij,ij->i", prev, d), -1, 1))
        assert np.all(bend > 0.02 * bend.sum()), np.degrees(bend)
        assert bend.max() <= 0.5 * bend.sum(), np.degrees(bend)


def test_two_chains_sharing_a_root_segment_both_reach():
    trunk = np.array([[0, 0, 0], [0, 0.5, 0], [0, 1.0, 0]])
    a = Chain.from_points(np.concatenate((trunk, [[0.4, 1.4, 0], [0.8, 1.8, 0]])))
    b = Chain.from_points(np.concatenate((trunk, [[-0.4, 1.4, 0], [-0.8, 1.8, 0]])))
    rng = np.random.default_rng(4)
    # Targets reachable together: FK of random poses of the shared tree.
    qa = quat.from_rotvec(rng.normal(scale=0.4, size=(30, 4, 3)))
    qb = qa.copy()
    qb[:, 2:] = quat.from_rotvec(rng.normal(scale=0.4, size=(30, 2, 3)))
    ta = np.array([forward_kinematics(a, q)[-1] for q in qa])
    tb = np.array([forward_kinematics(b, q)[-1] for q in qb])
    s = SolveSettings(200, 1e-6)
    res = bake_group([GroupMember(a, ("t0", "t1", "a0", "a1"), None, ta, "DLS", s),
                      GroupMember(b, ("t0", "t1", "b0", "b1"), None, tb, "FABRIK", s)])
    for m, chain, tg, bones in zip(res.members, (a, b), (ta, tb), (("t0", "t1", "a0", "a1"), ("t0", "t1", "b0", "b1"))):
        q = np.stack([res.rotations[x] for x in bones], axis=1)
        tips = np.array([forward_kinematics(chain, qq)[-1] for qq in q])
        err = np.linalg.norm(tips - tg, axis=1)
        np.testing.assert_allclose(err, m.errors, atol=1e-12)
        assert err.max() < 1e-5 and np.all(m.converged)


def test_a_group_of_one_is_bake_chain():
    c = arm()
    tg = closed_path(30, 1, (0.35, -0.1, 0.1), 0.1)
    s = SolveSettings(100, 1e-5)
    g = bake_group([GroupMember(c, ("u", "f", "h"), None, tg, "FABRIK", s)])
    r = bake_chain(c, tg, "FABRIK", s)
    np.testing.assert_array_equal(g.members[0].rotations, r.rotations)
    np.testing.assert_array_equal(g.rotations["f"], r.rotations[:, 1])


@pytest.mark.parametrize("name", NAMES)
def test_orientation_goals_are_met_when_reachable(name):
    c = arm()
    tg, qs = reachable(c, 25, seed=5, scale=0.5)
    ori = np.array([forward_kinematics_full(c, q)[1][-1] for q in qs])
    res = bake_chain(c, tg, name, SolveSettings(300, 1e-6), orientations=ori, rotation_weight=1.0)
    got = np.array([forward_kinematics_full(c, q)[1][-1] for q in res.rotations])
    assert np.degrees(quat.angle_between(got, ori).max()) < 1.0
    assert res.errors.max() < 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_a_stiffer_joint_takes_less_of_the_bend(name):
    pts = np.zeros((4, 3))
    pts[:, 1] = np.arange(4) * 0.5
    tgt = np.array([0.6, 0.9, 0.2])
    bends = []
    for st in (0.0, 0.8):
        stiff = np.zeros((3, 3))
        stiff[1] = st
        lim = JointLimits(np.zeros((3, 3), bool), np.zeros((3, 3), bool), np.zeros((3, 3)), np.zeros((3, 3)), stiff)
        r = SOLVERS[name].solve(Chain.from_points(pts, lim), tgt, None, SolveSettings(500, 1e-6))
        assert r.converged
        bends.append(float(quat.angle(r.rotations[1])))
    assert bends[1] < 0.8 * bends[0], bends


def _pole_alignment(p, g0, pole, pole_angle, line_end):
    """cos of the angle between the first bone's ``x cos(a) + z sin(a)`` axis and head -> pole, both
    made perpendicular to head -> ``line_end`` (Blender's ConstrainPoleVector condition)."""
    u = (line_end - p[0]) / np.linalg.norm(line_end - p[0])
    ax = quat.to_matrix(g0)
    up = ax[:, 0] * np.cos(pole_angle) + ax[:, 2] * np.sin(pole_angle)
    up -= (up @ u) * u
    pp = pole - p[0] - ((pole - p[0]) @ u) * u
    return up @ pp / np.linalg.norm(up) / np.linalg.norm(pp)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("pole_angle", [0.0, -np.pi / 2, 2.0])
def test_pole_turns_the_start_as_blenders_constrain_pole_vector(name, pole_angle):
    """Blender turns the chain for its pole *before* solving (``IK_QJacobianSolver::Solve`` calls
    ``ConstrainPoleVector`` once): the start's head -> tip line onto head -> target, the first bone's
    ``x cos(a) + z sin(a)`` axis across it toward the pole; the solve bends from there. So the
    turned start meets the condition exactly, and the solved arm, whose rest bend lies in that
    axis's plane for pole angles 0 and -pi/2, keeps its bend plane within 1 degree of the pole's."""
    from core.ik.base import canonical_start, pole_turn
    from core.ik.limits import from_angles

    c = arm()
    rng = np.random.default_rng(8)
    for _ in range(5):
        tgt = np.array([0.35, -0.15, 0.1]) + rng.normal(scale=0.08, size=3)
        pole = rng.normal(size=3)
        start = from_angles(canonical_start(c, 1))[0]
        p, g = forward_kinematics_full(c, start)
        r = pole_turn(p[:1], p[-1:], g[:1], tgt[None], pole[None], pole_angle)[0]
        turned = quat.rotate(r, p - p[0]) + p[0]
        assert _pole_alignment(turned, quat.multiply(r, g[0]), pole, pole_angle, tgt) > 1 - 1e-12
        u = (turned[-1] - p[0]) / np.linalg.norm(turned[-1] - p[0])
        assert u @ (tgt - p[0]) / np.linalg.norm(tgt - p[0]) > 1 - 1e-12
        res = SOLVERS[name].solve(c, tgt, None, SolveSettings(300, 1e-6), pole=pole, pole_angle=pole_angle)
        p, g = forward_kinematics_full(c, res.rotations)
        assert np.linalg.norm(p[-1] - tgt) < 1e-5
        if pole_angle != 2.0:
            assert _pole_alignment(p, g[0], pole, pole_angle, p[-1]) > np.cos(np.radians(1.0))



def test_sdls_step_is_the_pseudoinverse_step_for_small_errors_and_never_turns_past_pi_over_4():
    """Blender's selectively damped least squares (Buss & Kim 2005, intern/iksolver's constants):
    for a small error no singular direction is damped and the step is 0.8 of the pseudo-inverse
    step; for a large one no joint turns by more than pi/4 in one step."""
    from core.ik.least_squares import _sdls_step

    rng = np.random.default_rng(4)
    jac = rng.normal(size=(5, 6, 9))
    w = np.ones(9)
    beta = 1e-4 * rng.normal(size=(5, 6))
    ref = 0.8 * np.einsum("bcr,br->bc", np.linalg.pinv(jac), beta)
    assert np.abs(_sdls_step(jac, beta, w) - ref).max() < 1e-12
    big = _sdls_step(jac, 10.0 * rng.normal(size=(5, 6)), w)
    assert np.abs(big).max() <= np.pi / 4 + 1e-12
    # A locked coordinate (weight 0) never moves; a stiff one moves less.
    w2 = w.copy()
    w2[[1, 4]] = 0.0, 0.5
    d = _sdls_step(jac * np.sqrt(w2), beta, w2)
    assert np.all(d[:, 1] == 0.0)


@pytest.mark.parametrize("name", NAMES)
def test_a_pole_with_an_orientation_goal_reaches_both_and_frames_are_independent(name):
    """Chains with a pole take Blender's iteration (every bone a spherical joint) and then the
    damped least squares finish: the tip reaches a reachable target and its orientation, and a
    frame solved alone equals it solved in a batch."""
    c = arm()
    tg, qs = reachable(c, 8, seed=5, scale=0.5)
    ori = np.array([forward_kinematics_full(c, q)[1][-1] for q in qs])
    poles = np.array([0.3, -0.5, 0.2]) + np.random.default_rng(2).normal(scale=0.1, size=(8, 3))
    st = SolveSettings(300, 1e-7)
    res = bake_chain(c, tg, name, st, poles=poles, pole_angle=-np.pi / 2, orientations=ori, rotation_weight=1.0)
    for f in range(8):
        p, g = forward_kinematics_full(c, res.rotations[f])
        assert np.linalg.norm(p[-1] - tg[f]) < 1e-6
        assert quat.angle_between(g[-1], ori[f]) < 1e-5
        one = SOLVERS[name].solve(c, tg[f], None, st, pole=poles[f], pole_angle=-np.pi / 2, orientation=ori[f],
                                  rotation_weight=1.0)
        assert quat.angle_between(one.rotations, res.rotations[f]).max() < 1e-5

def test_a_pole_turns_the_elbow_toward_it_with_the_matching_pole_angle():
    """For an arm whose elbow bends about its bones' X axis toward -Z... the bend side follows
    the pole: pole_angle picks which bone axis faces it, the elbow ends on the pole's side."""
    c = arm()
    tgt = np.array([0.45, 0.0, 0.0])
    p0, g0 = forward_kinematics_full(c, quat.identity(3))
    # The rest elbow bends toward -Y; the upper arm's axis pointing there is -Z or +Z of its frame.
    side = p0[1] - p0[0] - ((p0[1] - p0[0]) @ [1, 0, 0]) * np.array([1.0, 0, 0])
    ax0 = quat.to_matrix(g0[0])
    a = np.arctan2(side @ ax0[:, 2], side @ ax0[:, 0])  # angle of the bend side in the bone's XZ
    for pole in ([0.3, 0.0, 1.0], [0.3, 0.0, -1.0], [0.3, 1.0, 0.0]):
        r = SOLVERS["DLS"].solve(c, tgt, None, SolveSettings(300, 1e-7), pole=np.array(pole), pole_angle=a)
        p = forward_kinematics(c, r.rotations)
        u = (p[-1] - p[0]) / np.linalg.norm(p[-1] - p[0])
        elbow = p[1] - p[0] - ((p[1] - p[0]) @ u) * u
        pp = np.array(pole) - ((np.array(pole) - p[0]) @ u) * u - p[0]
        assert elbow @ pp > 0.9 * np.linalg.norm(elbow) * np.linalg.norm(pp)


@pytest.mark.parametrize("name", NAMES)
def test_single_solve_equals_the_batched_bake(name):
    c = arm(box_limits(3, 1))
    tg, _ = reachable(c, 12, seed=3)
    res = bake_chain(c, tg, name, SolveSettings(200, 1e-6))
    # One kernel: a single solve is a batch of one. Batched linear algebra rounds differently,
    # so iterates agree to round-off amplified by the stopping test, far inside the tolerance.
    for f, t in enumerate(tg):
        r = SOLVERS[name].solve(c, t, None, SolveSettings(200, 1e-6))
        assert quat.angle_between(r.rotations, res.rotations[f]).max() < 1e-5


def test_unconverged_frames_are_reported():
    c = arm(hinge_limits(3, [0, 1, 2]))  # three hinges about parallel axes: a planar arm
    tg = np.array([[0.3, -0.1, 0.3], [0.3, 0.2, 0.0]])  # out of the plane / in it
    res = bake_chain(c, tg, "DLS", SolveSettings(100, 1e-5))
    tips = np.array([forward_kinematics(c, q)[-1] for q in res.rotations])
    np.testing.assert_allclose(np.linalg.norm(tips - tg, axis=1), res.errors, atol=1e-12)
    assert not res.converged[0] and res.errors[0] > 1e-3


def test_a_chain_hanging_from_another_chains_bone_is_solved_with_it():
    """A finger (2 bones) whose parent is the last bone of an arm (2 bones): one tree; with
    targets both can reach together, both are reached, measured through the joint FK."""
    from core.ik import RootTransform
    arm_ = Chain.from_points(np.array([[0, 0, 0], [0, 0.5, 0], [0, 1.0, 0]]))
    _, g_rest = forward_kinematics_full(arm_, quat.identity(2))
    parent_rot, parent_head = g_rest[1], np.array([0, 0.5, 0])
    finger_world = np.array([[0, 1.0, 0], [0.2, 1.25, 0], [0.35, 1.45, 0.05]])
    fw = Chain.from_points(finger_world)
    _, g_f = forward_kinematics_full(fw, quat.identity(2))
    inv = quat.conjugate(parent_rot)
    finger = Chain.from_rest_matrices(quat.rotate(inv, finger_world[:2] - parent_head),
                                      quat.to_matrix(quat.multiply(inv, g_f)), fw.lengths)
    rng = np.random.default_rng(12)
    qa = quat.from_rotvec(rng.normal(scale=0.4, size=(25, 2, 3)))
    qf = quat.from_rotvec(rng.normal(scale=0.4, size=(25, 2, 3)))
    ta, tf = [], []
    for a_, f_ in zip(qa, qf):
        p, g = forward_kinematics_full(arm_, a_)
        ta.append(p[-1])
        tf.append(forward_kinematics(finger, f_, RootTransform(g[1], p[1]))[-1])
    ta, tf = np.array(ta), np.array(tf)
    s = SolveSettings(200, 1e-6)
    res = bake_group([GroupMember(arm_, ("upper", "fore"), None, ta, "DLS", s),
                      GroupMember(finger, ("f1", "f2"), "fore", tf, "CCD", s)])
    qa_out = np.stack([res.rotations["upper"], res.rotations["fore"]], axis=1)
    qf_out = np.stack([res.rotations["f1"], res.rotations["f2"]], axis=1)
    for f in range(25):
        p, g = forward_kinematics_full(arm_, qa_out[f])
        tip_f = forward_kinematics(finger, qf_out[f], RootTransform(g[1], p[1]))[-1]
        assert np.linalg.norm(p[-1] - ta[f]) < 1e-5 and np.linalg.norm(tip_f - tf[f]) < 1e-5
        assert abs(np.linalg.norm(tip_f - tf[f]) - res.members[1].errors[f]) < 1e-9


def test_group_input_errors():
    from core.errors import ChainError
    a = Chain.from_points(np.array([[0, 0, 0], [0, 0.5, 0], [0, 1.0, 0]]))
    b = Chain.from_points(np.array([[0, 0, 0], [0, 0.6, 0], [0, 1.0, 0]]))  # "t0" with another length
    s = SolveSettings(20, 1e-5)
    tg = np.zeros((3, 3)) + [0, 0.8, 0.2]
    with pytest.raises(ChainError, match="different"):
        bake_group([GroupMember(a, ("t0", "x"), None, tg, "DLS", s), GroupMember(b, ("t0", "y"), None, tg, "DLS", s)])
    with pytest.raises(ChainError, match="frames"):
        bake_group([GroupMember(a, ("t0", "x"), None, tg, "DLS", s), GroupMember(a, ("u0", "y"), None, tg[:2], "DLS", s)])
    with pytest.raises(ChainError, match="bone names"):
        bake_group([GroupMember(a, ("t0",), None, tg, "DLS", s)])
