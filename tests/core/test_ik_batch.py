"""Batched FABRIK bake (all frames at once from one start pose, jumps repaired sequentially)."""

from __future__ import annotations

import numpy as np
import pytest

from core import quat
from core.errors import BakeCancelled, ChainError
from core.ik import Chain, JointLimits, RootTransform, SolveSettings, batch, forward_kinematics_batch
from core.ik.bake import bake_chain, iter_bake, uses_batched

BATCHED = ["FABRIK", "DLS"]


def straight(n, length=0.5):
    pts = np.zeros((n + 1, 3))
    pts[:, 1] = np.arange(n + 1) * length
    return Chain.from_points(pts)


def lissajous(frames):
    s = np.linspace(0.0, 2.0 * np.pi, frames, endpoint=False)
    return np.stack((2.2 * np.sin(3 * s + 0.5), 3.0 + 1.2 * np.sin(2 * s), 1.8 * np.sin(5 * s)), axis=1)


def circle(frames, radius=1.2, height=1.5, turns=1.0):
    s = np.linspace(0, 2 * np.pi * turns, frames)
    return np.stack((radius * np.cos(s), height + 0.3 * np.sin(2 * s), radius * np.sin(s)), axis=1)


def step_angles(rot, start=None):
    if start is not None:
        rot = np.concatenate((start[None], rot), axis=0)
    return quat.angle_between(rot[:-1], rot[1:]).max(axis=1)


def raw_batched(chain, targets, settings):
    f = targets.shape[0]
    return batch.fabrik_all_frames(chain, targets, quat.identity(chain.n), settings, quat.identity((f,)),
                                   np.zeros((f, 3)))


def test_strategy_selection():
    c = straight(3)
    assert uses_batched(c, "FABRIK", None) and uses_batched(c, "FABRIK", None, "batched")
    assert not uses_batched(c, "FABRIK", None, "sequential")
    # DLS is batched only on request: warm-started DLS is far smoother (0.7 vs 11 degrees).
    assert uses_batched(c, "DLS", None, "batched") and not uses_batched(c, "DLS", None)
    assert not uses_batched(c, "CCD", None) and not uses_batched(c, "CCD", None, "batched")
    assert not uses_batched(c, "FABRIK", np.zeros((4, 3)))
    lim = JointLimits(np.zeros((3, 3), bool), np.ones((3, 3), bool), -np.ones((3, 3)), np.ones((3, 3)))
    assert not uses_batched(c.with_limits(lim), "FABRIK", None)
    with pytest.raises(ChainError):
        bake_chain(c, np.ones((4, 3)), "FABRIK", SolveSettings(), strategy="parallel")


@pytest.mark.parametrize("name", BATCHED)
def test_batched_reaches_every_frame_and_is_sign_continuous(name):
    c = straight(10)
    tg = lissajous(200)
    s = SolveSettings(200, 1e-6)
    res = bake_chain(c, tg, name, s, strategy="batched")
    tips = forward_kinematics_batch(c, res.rotations)[:, -1]
    err = np.linalg.norm(tips - tg, axis=1)
    np.testing.assert_allclose(err, res.errors, atol=1e-12)
    assert np.all(res.converged) and err.max() <= 1e-6
    np.testing.assert_allclose(np.linalg.norm(res.rotations, axis=2), 1.0, atol=1e-12)
    assert np.all(np.einsum("fbi,fbi->fb", res.rotations[1:], res.rotations[:-1]) >= 0)
    assert np.all(res.rotations[0, :, 0] >= 0)  # continuous with the identity start pose too


@pytest.mark.parametrize("name", BATCHED)
@pytest.mark.parametrize("case", ["lissajous", "circle", "fast", "crossing_line", "crossing_root"])
def test_batched_agrees_with_sequential_where_both_converge(case, name):
    """Tips agree to within the tolerance (poses may differ in the null space)."""
    c = straight(10 if case == "lissajous" else 4 if case != "circle" else 5)
    tg = {"lissajous": lissajous(120), "circle": circle(60), "fast": circle(40, 1.0, 0.8, 3.0),
          "crossing_line": np.stack((np.linspace(-0.5, 0.5, 41), np.full(41, 1.0), np.zeros(41)), 1),
          "crossing_root": np.stack((np.zeros(50), np.linspace(2.5, -2.5, 50), np.zeros(50)), axis=1)}[case]
    s = SolveSettings(300, 1e-6)
    a = bake_chain(c, tg, name, s, strategy="batched")
    b = bake_chain(c, tg, name, s, strategy="sequential")
    both = a.converged & b.converged
    assert both.mean() > 0.5
    ta = forward_kinematics_batch(c, a.rotations)[:, -1]
    tb = forward_kinematics_batch(c, b.rotations)[:, -1]
    assert np.max(np.linalg.norm(ta - tb, axis=1)[both]) <= 2e-6
    # Frames the cold start leaves short are re-solved warm, so about as many converge.
    assert a.converged.sum() >= b.converged.sum() - max(1, tg.shape[0] // 20)


def test_batched_repairs_branch_jumps():
    """The target crosses the straight start pose's line: solved from the start pose, the chain
    flips to the other side (~180 degrees); the repaired bake moves smoothly."""
    c = straight(4)
    tg = np.stack((np.linspace(-0.5, 0.5, 41), np.full(41, 1.0), np.zeros(41)), axis=1)
    s = SolveSettings(100, 1e-6)
    raw, _, _ = raw_batched(c, tg, s)
    assert step_angles(raw).max() > np.radians(90)
    res = bake_chain(c, tg, "FABRIK", s, strategy="batched")
    assert step_angles(res.rotations).max() < np.radians(15)
    seq = bake_chain(c, tg, "FABRIK", s, strategy="sequential")
    assert res.converged.sum() >= seq.converged.sum() - 2


@pytest.mark.parametrize("name", BATCHED)
@pytest.mark.parametrize("case", ["fast", "crossing_root", "straight_chain"])
def test_batched_continuity(case, name):
    if case == "fast":  # ~27 degrees of orbit per frame
        c, tg = straight(4), circle(40, radius=1.0, height=0.8, turns=3.0)
    elif case == "crossing_root":  # along the chain's own line, through the root
        c, tg = straight(4), np.stack((np.zeros(50), np.linspace(2.5, -2.5, 50), np.zeros(50)), axis=1)
    else:  # target slides along the straight chain's line and sideways off it
        c = straight(6)
        u = np.linspace(0, 1, 60)
        tg = np.stack((0.2 * np.sin(6 * u), 2.9 - 1.5 * u, 0.05 * np.cos(4 * u)), axis=1)
    s = SolveSettings(100, 1e-5)
    res = bake_chain(c, tg, name, s, strategy="batched")
    assert np.all(np.isfinite(res.rotations))
    steps = step_angles(res.rotations)
    assert steps.max() < np.radians(60), np.degrees(steps.max())  # no flip (~180 degrees)
    if case != "crossing_root":
        # Reachable motion: within what the target motion implies (batch._WHIP times the
        # continuity limit; near a straight start pose the cold solution turns faster than the
        # warm-started one, so the sequential bake can be smoother there).
        f = tg.shape[0]
        lim = batch.continuity_limits(c, tg, quat.identity((f,)), np.zeros((f, 3)))
        assert np.all(steps <= batch._WHIP * lim[1:])


@pytest.mark.parametrize("name", BATCHED)
def test_batched_max_step_angle_is_exact(name):
    c = straight(4)
    tg = circle(40, radius=1.0, height=0.8, turns=3.0)
    cap = np.radians(4.0)
    init = quat.from_rotvec(np.tile([0.05, 0.0, 0.02], (4, 1)))
    res = bake_chain(c, tg, name, SolveSettings(200, 1e-6), max_step_angle=cap, initial=init,
                     strategy="batched")
    assert step_angles(res.rotations, init).max() <= cap + 1e-9
    tips = forward_kinematics_batch(c, res.rotations)[:, -1]
    np.testing.assert_allclose(np.linalg.norm(tips - tg, axis=1), res.errors, atol=1e-12)
    assert not np.all(res.converged)
    # A loose cap changes nothing where it is never reached.
    free = bake_chain(c, circle(60), name, SolveSettings(200, 1e-6), strategy="batched")
    loose = bake_chain(c, circle(60), name, SolveSettings(200, 1e-6), max_step_angle=np.pi,
                       strategy="batched")
    np.testing.assert_array_equal(free.rotations, loose.rotations)


def test_batched_cap_catches_up_after_a_capped_run():
    c = straight(3)
    tg = np.concatenate((np.tile([[1.0, 1.0, 0.0]], (10, 1)), np.tile([[-1.0, 1.0, 0.0]], (30, 1))))
    cap = np.radians(10.0)
    res = bake_chain(c, tg, "FABRIK", SolveSettings(200, 1e-7), max_step_angle=cap, strategy="batched")
    assert step_angles(res.rotations, quat.identity(3)).max() <= cap + 1e-9
    assert not res.converged[10] and np.all(res.converged[-5:])


@pytest.mark.parametrize("name", BATCHED)
def test_batched_unreachable_targets_give_a_straight_chain(name):
    c = straight(5)
    s = np.linspace(0, 2 * np.pi, 30)
    tg = np.stack((4 * np.cos(s), 1.0 + np.sin(s), 4 * np.sin(s)), axis=1)  # 4.1+ m, reach 2.5 m
    res = bake_chain(c, tg, name, SolveSettings(50, 1e-6), strategy="batched")
    pos = forward_kinematics_batch(c, res.rotations)
    u = tg - pos[:, :1].squeeze(1)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    bones = np.diff(pos, axis=1)
    cosang = np.einsum("fbi,fi->fb", bones, u) / np.linalg.norm(bones, axis=2)
    assert np.degrees(np.arccos(np.clip(cosang, -1, 1))).max() < 0.1


@pytest.mark.parametrize("name", BATCHED)
def test_batched_per_frame_roots(name):
    c = straight(3)
    f = 30
    ang = np.linspace(0, 1.5, f)
    roots = RootTransform(quat.from_axis_angle(np.array([0, 0, 1.0]), ang), np.stack((ang, 0 * ang, 0 * ang), 1))
    local = np.stack((0.4 * np.cos(3 * ang), 1.0 + 0 * ang, 0.3 * np.sin(3 * ang)), axis=1)
    tg = quat.rotate(roots.rotation, local) + roots.position
    res = bake_chain(c, tg, name, SolveSettings(200, 1e-7), roots=roots, strategy="batched")
    tips = forward_kinematics_batch(c, res.rotations, roots)[:, -1]
    assert np.max(np.linalg.norm(tips - tg, axis=1)) < 1e-6
    assert step_angles(res.rotations).max() < np.radians(20)


def test_batched_progress_and_cancel():
    c = straight(3)
    tg = circle(50)
    seen = []
    res = bake_chain(c, tg, "FABRIK", SolveSettings(), progress=lambda d, t: seen.append((d, t)), chunk=16,
                     strategy="batched")
    assert seen == [(16, 50), (32, 50), (48, 50), (50, 50)] and res.rotations.shape[0] == 50
    with pytest.raises(BakeCancelled):
        bake_chain(c, tg, "FABRIK", SolveSettings(), progress=lambda d, t: d < 20, chunk=10, strategy="batched")
    gen = iter_bake(c, tg, "FABRIK", SolveSettings(), chunk=7)
    first = next(gen)
    assert first.done == 7 and first.result is None
    gen.close()
    with pytest.raises(StopIteration):
        next(gen)


@pytest.mark.parametrize("name", BATCHED)
def test_batched_degenerate_inputs(name):
    c = straight(3)
    for tg in (np.zeros((3, 3)), np.array([[0, 1.5, 0.0]] * 3), np.array([[0, 0.7, 0.0], [0, 0.7, 0.0]])):
        res = bake_chain(c, tg, name, SolveSettings(), strategy="batched")
        assert np.all(np.isfinite(res.rotations))
    one = bake_chain(Chain.from_points([[0, 0, 0], [0, 1, 0]]), circle(10), name, SolveSettings(),
                     strategy="batched")
    assert np.all(np.isfinite(one.rotations))
    none = bake_chain(c, circle(5), name, SolveSettings(max_iterations=0), strategy="batched")
    np.testing.assert_array_equal(none.iterations, 0)


def test_recover_all_matches_recover_rotations():
    from core.ik.base import recover_rotations
    rng = np.random.default_rng(1)
    c = Chain.from_points(np.cumsum(rng.normal(size=(8, 3)), axis=0))
    f = 60
    q_old = quat.from_rotvec(rng.normal(size=(f, 7, 3)))
    rr = quat.normalize(rng.normal(size=(f, 4)))
    rp = rng.normal(size=(f, 3))
    des = rng.normal(size=(f, 8, 3)) * 2
    des[:5, 3] = des[:5, 2]  # zero desired segment: keeps the twist source's direction
    # Antiparallel: the desired next joint exactly behind the current segment.
    pos = forward_kinematics_batch(c, q_old, RootTransform(rr, rp))
    des[5:10, 1] = 2 * pos[5:10, 0] - pos[5:10, 1]
    a = recover_rotations(c, q_old, des, rr, rp)
    b = batch.recover_all(c, q_old, des, rr, rp)
    np.testing.assert_allclose(quat.canonical(a[0]), quat.canonical(b[0]), atol=1e-12)
    np.testing.assert_allclose(a[1], b[1], atol=1e-12)


def test_batched_no_half_turn_in_a_frame_on_a_very_fast_target():
    """35 cm of target motion per frame: the start-pose solution swings a joint by ~135 degrees
    in one frame (continuously, but too fast); that stretch is re-solved sequentially."""
    c = straight(10)
    tg = lissajous(200)
    s = SolveSettings(100, 1e-4)
    raw, _, _ = raw_batched(c, tg, s)
    assert step_angles(raw).max() > np.radians(120)
    res = bake_chain(c, tg, "FABRIK", s, strategy="batched")
    assert np.all(res.converged)
    assert step_angles(res.rotations).max() < np.radians(90)


def line_path(frames, p0, p1):
    u = np.linspace(0.0, 1.0, frames)[:, None]
    return (1.0 - u) * np.asarray(p0) + u * np.asarray(p1)


def ring_xy(frames, radius, turns, wobble):
    """A target circling the root in the plane of the rest line (+Y) and X: bones pass -Y."""
    s = np.linspace(0.0, 2.0 * np.pi * turns, frames)
    return np.stack((radius * np.sin(s), radius * np.cos(s), wobble * np.sin(3 * s)), axis=1)


def _transport_reference(c, start, des, rr, rp):
    from core.ik._scalar import recover_one
    out, pos, q = [], [], start
    for f in range(des.shape[0]):
        q, p = recover_one(c, q, des[f], rr[f], rp[f])
        out.append(q)
        pos.append(p)
    return np.array(out), np.array(pos)


def test_transport_all_is_the_sequential_recovery():
    """Frame-after-frame recovery (what the sequential bake does) via the prefix scan."""
    rng = np.random.default_rng(3)
    c = Chain.from_points(np.cumsum(rng.normal(size=(8, 3)), axis=0))
    f = 300
    q = quat.from_rotvec(np.cumsum(rng.normal(size=(f, 7, 3)) * 0.08, axis=0))
    rr = quat.normalize(np.cumsum(rng.normal(size=(f, 4)) * 0.02, axis=0) + [1.0, 0, 0, 0])
    rp = np.cumsum(rng.normal(size=(f, 3)) * 0.01, axis=0)
    des = forward_kinematics_batch(c, q, RootTransform(rr, rp))
    des[40:45, 3] = des[40:45, 2]  # zero desired segments keep the previous rotation
    rr[100:102], rp[100:102] = rr[100], rp[100]
    des[101, 1] = 2 * des[101, 0] - des[100, 1]  # bone 0 turns exactly antiparallel
    start = quat.from_rotvec(rng.normal(size=(7, 3)))
    a, pa = batch.transport_all(c, start, des, rr, rp)
    b, pb = _transport_reference(c, start, des, rr, rp)
    np.testing.assert_allclose(quat.canonical(a), quat.canonical(b), atol=1e-11)
    np.testing.assert_allclose(pa, pb, atol=1e-11)
    # Independent sequences along a second axis.
    a2, p2 = batch.transport_all(c, np.stack((start, quat.identity(7))), np.stack((des, des), 1),
                                 np.stack((rr, rr), 1), np.stack((rp, rp), 1))
    np.testing.assert_allclose(a2[:, 0], a, atol=1e-15)
    np.testing.assert_allclose(quat.canonical(a2[:, 1]),
                               quat.canonical(_transport_reference(c, quat.identity(7), des, rr, rp)[0]),
                               atol=1e-11)


@pytest.mark.parametrize("case", ["lissajous", "crossing_line"])
def test_batched_output_twist_follows_the_previous_frame(case):
    """Every output frame is the sequential recovery of its own joints from the previous output
    frame (also through repairs: crossing_line is repaired, its raw batched solve flips)."""
    c = straight(10 if case == "lissajous" else 4)
    tg = lissajous(300) if case == "lissajous" else line_path(41, [-0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    res = bake_chain(c, tg, "FABRIK", SolveSettings(100, 1e-6), strategy="batched")
    f = tg.shape[0]
    pos = forward_kinematics_batch(c, res.rotations)
    ref, _ = _transport_reference(c, quat.identity(c.n), pos, quat.identity((f,)), np.zeros((f, 3)))
    np.testing.assert_allclose(quat.canonical(res.rotations), quat.canonical(ref), atol=1e-9)


SMOOTH_CASES = {
    # (chain bones, targets, tolerance); old batched / sequential largest-step ratio in the comment
    "bench_lissajous": (10, lambda: lissajous(1000), 1e-4),  # 2.81 (twist)
    "fast_lissajous": (10, lambda: lissajous(400), 1e-5),  # 2.36 (twist)
    "small_fast_lissajous": (6, lambda: 0.6 * lissajous(300), 1e-5),  # 1.62 (position whip)
    "around_root": (4, lambda: ring_xy(120, 1.2, 1.0, 0.2), 1e-5),  # 1.95 (twist)
    "around_root_twice": (6, lambda: ring_xy(200, 2.0, 2.0, 0.5), 1e-5),  # 1.56 (twist)
    "crossing_rest_line": (4, lambda: line_path(60, [-1.0, 1.2, 0.3], [1.0, 1.2, -0.3]), 1e-5),  # 0.99
}


@pytest.mark.parametrize("case", sorted(SMOOTH_CASES))
def test_auto_fabrik_bake_is_about_as_smooth_as_sequential(case):
    """The batched FABRIK bake (what 'auto' picks) turns no joint by more than 1.5x the
    sequential bake's largest step in a frame."""
    n, make, tol = SMOOTH_CASES[case]
    c, tg = straight(n), make()
    s = SolveSettings(100, tol)
    assert uses_batched(c, "FABRIK", None, "auto")
    auto = bake_chain(c, tg, "FABRIK", s)
    seq = bake_chain(c, tg, "FABRIK", s, strategy="sequential")
    a, b = step_angles(auto.rotations).max(), step_angles(seq.rotations).max()
    assert a <= 1.5 * b, (np.degrees(a), np.degrees(b))
    assert np.all(auto.converged == seq.converged) or auto.converged.sum() >= seq.converged.sum()


def test_long_batched_bake_reports_progress_in_blocks_and_equals_one_call(monkeypatch):
    """A long range is solved block by block (cancellable between blocks) with the same result."""
    from core.ik import bake as B
    from core.ik.chain import Chain

    chain = Chain.from_points(np.array([(0.0, 0.0, 0.5 * i) for i in range(7)]))
    t = np.linspace(0.0, 4 * np.pi, 600)
    targets = np.stack([1.2 * np.sin(t), 0.8 * np.cos(1.5 * t), 1.6 + 0.5 * np.sin(2 * t)], axis=1)
    settings = B.SolveSettings(max_iterations=100, tolerance=1e-6)
    whole = B.bake_chain(chain, targets, "FABRIK", settings, strategy="batched")
    monkeypatch.setattr(B, "_SOLVE_BLOCK", 128)
    steps = list(B.iter_bake(chain, targets, "FABRIK", settings, strategy="batched", chunk=64))
    dones = [s.done for s in steps]
    assert dones == sorted(dones) and dones[-1] == len(targets)
    assert sum(1 for d in dones if d <= len(targets) // 2) >= 600 // 128  # one report per solved block
    blocked = steps[-1].result
    # The same frames, each solved from the same start: equal up to where each stopped
    # iterating inside the tolerance (which frames finish in the scalar loop differs).
    np.testing.assert_allclose(blocked.rotations, whole.rotations, atol=1e-4)
    assert np.all(blocked.errors <= settings.tolerance) and np.all(whole.errors <= settings.tolerance)
    # Closing the generator after the first block stops the bake.
    gen = B.iter_bake(chain, targets, "FABRIK", settings, strategy="batched", chunk=64)
    first = next(gen)
    assert first.result is None
    gen.close()
