"""Spring bones (core/springbones.py): physics and geometry of chains baked on the spring solver."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from core import quat
from core.errors import SinewError
from core.ik.chain import Chain, forward_kinematics_batch, pose_from_joints
from core.springbones import SpringBake, SpringChain, SpringSettings, animated_joints, bake_spring_chains
from core.springs import Sphere, TriangleMesh

FPS = 24.0
G = np.array([0.0, 0.0, -9.81])


def straight(n: int, length: float, direction=(1.0, 0.0, 0.0)) -> Chain:
    """A straight chain of ``n`` bones of ``length`` m from the origin along ``direction``."""
    d = np.asarray(direction, dtype=np.float64)
    return Chain.from_points(np.arange(n + 1)[:, None] * length * d / np.linalg.norm(d))


def still(chain: Chain, frames: int, settings: SpringSettings, rotations=None, root_rot=None,
          root_pos=None, name="chain") -> SpringChain:
    rot = np.tile(quat.identity(()), (frames, chain.n, 1)) if rotations is None else rotations
    rr = np.tile(quat.identity(()), (frames, 1)) if root_rot is None else root_rot
    rp = np.zeros((frames, 3)) if root_pos is None else root_pos
    return SpringChain(chain, rot, rr, rp, settings, name)


def lengths(joints: np.ndarray) -> np.ndarray:
    return np.linalg.norm(np.diff(joints, axis=-2), axis=-1)


def swing_angles(joint: np.ndarray) -> np.ndarray:
    """Angle (rad) of a hanging joint from -Z in the YZ plane."""
    return np.arctan2(joint[:, 1], -joint[:, 2])


def bone_distances(joints: np.ndarray, center: np.ndarray, samples: int = 2001) -> np.ndarray:
    """Brute force: the least distance from ``center`` over each bone of ``joints`` ``(F, n+1, 3)``,
    sampled at ``samples`` points a bone (ends included), shape ``(F, n)``."""
    f = np.linspace(0.0, 1.0, samples)[:, None, None, None]
    a, b = joints[:, :-1], joints[:, 1:]
    return np.linalg.norm(a + f * (b - a) - center, axis=-1).min(axis=0)


def crossings(t: np.ndarray, a: np.ndarray) -> np.ndarray:
    s = np.flatnonzero(np.sign(a[1:]) != np.sign(a[:-1]))
    return t[s] - a[s] * (t[s + 1] - t[s]) / (a[s + 1] - a[s])


def released(chain: Chain, degrees: float, frames: int, settings: SpringSettings):
    """A still chain hanging along -Z whose joints start swung ``degrees`` about X; returns the bake
    (not run)."""
    bake = SpringBake([still(chain, frames, settings)], fps=FPS, gravity=G, frames=frames)
    grp = bake.groups[0]
    turn = quat.from_axis_angle(np.array([1.0, 0.0, 0.0]), np.radians(degrees))
    grp.sim.state.x[...] = quat.rotate(turn, grp.sim.state.x)
    grp.positions[0] = grp.sim.state.x
    return bake


def test_still_parent_without_gravity_stays_exactly_on_pose_for_1000_frames():
    chain = Chain.from_points([[0, 0, 0], [0.1, 0, 0.02], [0.18, 0.05, 0.0], [0.25, 0.05, -0.05]])
    rng = np.random.default_rng(3)
    q = quat.normalize(np.array([1.0, 0, 0, 0]) + 0.2 * rng.normal(size=(3, 4)))
    frames = 1000
    rot = np.tile(q, (frames, 1, 1))
    root_rot = np.tile(quat.from_axis_angle(np.array([0.0, 0, 1]), 0.4), (frames, 1))
    root_pos = np.tile([0.3, -0.2, 1.0], (frames, 1))
    s = SpringSettings(stiffness=40.0, damping=2.0, drag=0.5, gravity=0.0, substeps=2)
    sc = still(chain, frames, s, rot, root_rot, root_pos)
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)
    assert np.max(np.abs(r.joints - r.animated)) < 1e-9
    assert np.max(quat.angle_between(r.rotations, rot)) < 1e-6


def test_still_parent_with_gravity_sags_to_the_analytic_balance_and_does_not_drift():
    """One horizontal bone: the tip's pull ``k m L (1 - cos θ, sin θ)`` toward its animated place
    and its weight balance along the circle at ``tan θ = g / (k L)``."""
    length, k = 0.25, 60.0
    chain = straight(1, length)
    frames = 1000
    s = SpringSettings(stiffness=k, damping=4.0, gravity=1.0, substeps=2)
    (r,) = bake_spring_chains([still(chain, frames, s)], fps=FPS, gravity=G, frames=frames)
    tip = r.joints[:, 1]
    sag = np.arctan2(-tip[:, 2], tip[:, 0])
    expected = np.arctan(9.81 / (k * length))
    assert abs(sag[-1] - expected) < 1e-3 * expected
    assert np.ptp(sag[500:]) < 1e-9  # settled: no drift


def test_three_bone_sag_matches_the_minimum_of_the_potential_energy():
    """Independent check: rigid segments, the equilibrium minimises Σ m g z + ½ k m |x − a|²."""
    seg, k = 0.1, 80.0
    chain = straight(3, seg)
    frames = 600
    s = SpringSettings(stiffness=k, damping=6.0, gravity=1.0, substeps=2)
    (r,) = bake_spring_chains([still(chain, frames, s)], fps=FPS, gravity=G, frames=frames)
    m = np.array([seg, seg, 0.5 * seg])  # lumped: half of each segment a joint ends
    a = np.arange(1, 4)[:, None] * np.array([seg, 0.0])

    def energy(th):
        pts = np.cumsum(seg * np.stack((np.cos(th), -np.sin(th)), axis=1), axis=0)
        return float(np.sum(m * 9.81 * pts[:, 1]) + 0.5 * k * np.sum(m * np.sum((pts - a) ** 2, axis=1)))

    best = minimize(energy, np.full(3, 0.1), method="BFGS", options={"gtol": 1e-12})
    pts = np.cumsum(seg * np.stack((np.cos(best.x), -np.sin(best.x)), axis=1), axis=0)
    got = r.joints[-1, 1:][:, [0, 2]]
    np.testing.assert_allclose(got, pts, atol=1e-3 * seg)  # the bones hold their lengths to 0.01 %
    assert np.all(np.abs(r.joints[-1, :, 1]) < 1e-12)


def test_free_pendulum_has_the_small_angle_period_of_its_model():
    """stiffness 0, no damping: one bone of length L with its mass at the tip, released from
    10°, swings with T = 2π √(L/g) (the small-angle period; at 10° it is 0.19 % longer)."""
    length, frames = 0.2, 24 * 6 + 1
    s = SpringSettings(stiffness=0.0, gravity=1.0, substeps=8)
    bake = released(straight(1, length, (0, 0, -1)), 10.0, frames, s)
    while not bake.step():
        pass
    (r,) = bake.results()
    t = np.arange(frames) / FPS
    tc = crossings(t, swing_angles(r.joints[:, 1]))
    period = 2.0 * float(np.mean(np.diff(tc)))
    analytic = 2.0 * np.pi * np.sqrt(length / 9.81)
    assert abs(period / analytic - 1.0) < 0.01
    assert r.length_error < 1e-3


@pytest.mark.parametrize("damping, drag", [(1.5, 0.0), (0.0, 1.0), (3.0, 2.0)])
def test_released_chain_with_damping_never_gains_energy(damping, drag):
    frames = 24 * 4
    s = SpringSettings(stiffness=0.0, damping=damping, drag=drag, gravity=1.0, substeps=4)
    bake = released(straight(3, 0.1, (0, 0, -1)), 30.0, frames, s)
    sim = bake.groups[0].sim
    energy = [sim.mechanical_energy()]
    while not bake.step():
        energy.append(sim.mechanical_energy())
    energy.append(sim.mechanical_energy())
    e = np.array(energy)
    assert np.all(np.diff(e) <= 1e-9 * abs(e[0]) + 1e-12)
    assert e[-1] < e[0]


def test_undamped_chain_never_exceeds_its_initial_energy():
    """No damping: implicit Euler still loses energy overall (it is dissipative), and nothing
    (strain limit, length projection) lifts the energy above where the chain was released."""
    frames = 1000
    s = SpringSettings(stiffness=0.0, gravity=1.0, substeps=2)
    bake = released(straight(3, 0.1, (0, 0, -1)), 60.0, frames, s)
    sim = bake.groups[0].sim
    energy = [sim.mechanical_energy()]
    while not bake.step():
        energy.append(sim.mechanical_energy())
    e = np.array(energy)
    assert e.max() <= e[0] + 1e-9 * abs(e[0])
    drop = e[0] - e.min()
    assert e[-1] < e[0] - 0.9 * drop  # it came to rest, hanging


def test_a_parent_that_moves_and_stops_lets_the_chain_settle_back():
    frames = 24 * 5
    move = 24
    x = np.clip(np.arange(frames) / move, 0, 1)
    root_pos = np.c_[0.5 * (3 * x**2 - 2 * x**3), np.zeros(frames), np.zeros(frames)]
    chain = straight(3, 0.1, (0, 0, -1))
    s = SpringSettings(stiffness=30.0, damping=3.0, gravity=1.0, substeps=2)
    (r,) = bake_spring_chains([still(chain, frames, s, root_pos=root_pos)], fps=FPS, gravity=G, frames=frames)
    off = np.linalg.norm(r.joints - r.animated, axis=2)
    assert off[move].max() > 0.01  # it lagged while carried
    assert off[-1].max() < 1e-3  # hanging along the animated direction: no sag across it
    assert off[-1].max() < 0.05 * off[move].max()


def whipped(frames: int, settings: SpringSettings, plane_axis=(1.0, 0.0, 0.0)):
    """A 4-bone chain hanging along -Z whose parent swings ±60° about ``plane_axis`` at 1.5 Hz."""
    t = np.arange(frames) / FPS
    angle = np.radians(60.0) * np.sin(2 * np.pi * 1.5 * t)
    root_rot = quat.from_axis_angle(np.tile(plane_axis, (frames, 1)), angle)
    chain = straight(4, 0.08, (0, 0, -1))
    return still(chain, frames, settings, root_rot=root_rot, root_pos=np.tile([0.0, 0.0, 1.0], (frames, 1)))


def test_bone_lengths_are_kept_within_0_1_percent_with_stretch_0():
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, stretch=0.0, substeps=2)
    (r,) = bake_spring_chains([whipped(96, s)], fps=FPS, gravity=G, frames=96)
    assert np.max(np.linalg.norm(r.joints - r.animated, axis=2)) > 0.05  # it really swings
    assert r.length_error < 1e-3


def test_rigid_bones_take_the_substeps_asked_for(monkeypatch):
    """A rigid chain (strain limit 1e-4, below the projection's own 5e-4 tolerance) is stepped
    exactly ``substeps`` times a frame: a step the strain limit accepted is not taken again in
    halves as if it had gone wrong (9 % of the bench's antenna steps were), and its bones stay
    within 0.1 %."""
    from core.springs import Simulator

    taken = []
    advance = Simulator.advance

    def counting(self, *args, **kwargs):
        d = advance(self, *args, **kwargs)
        taken.append(d.substeps)
        return d

    monkeypatch.setattr(Simulator, "advance", counting)
    # an antenna (the preset's settings): 4 bones of 5 cm pointing up from a parent that swings
    # 35 degrees at 0.83 Hz while it travels (46 of these 119 frames took extra steps before)
    frames = 120
    t = np.arange(frames) / FPS
    angle = np.radians(35.0) * np.sin(2 * np.pi * 0.83 * t + 0.3)
    root_rot = quat.from_axis_angle(np.tile([np.cos(0.3), np.sin(0.3), 0.0], (frames, 1)), angle)
    root_pos = np.c_[0.8 * t, 0.1 * np.sin(4 * t + 0.3), 1.0 + 0.05 * np.abs(np.sin(6 * t))]
    s = SpringSettings(stiffness=400.0, damping=2.0, drag=0.1, gravity=0.05, stretch=0.0, substeps=6)
    antenna = still(straight(4, 0.05, (0, 0, 1)), frames, s, root_rot=root_rot, root_pos=root_pos)
    (r,) = bake_spring_chains([antenna], fps=FPS, gravity=G, frames=frames)
    assert np.max(np.linalg.norm(r.joints - r.animated, axis=2)) > 0.01  # it really swings
    assert len(taken) == frames - 1 and set(taken) == {6}, sorted(set(taken))
    assert r.length_error < 1e-3


def test_stretch_lets_bones_stretch_up_to_their_limit():
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, stretch=0.2, substeps=2)
    (r,) = bake_spring_chains([whipped(96, s)], fps=FPS, gravity=G, frames=96)
    ratio = lengths(r.joints) / 0.08
    assert ratio.max() > 1.02
    assert ratio.max() <= 1.2 * (1 + 1e-3)  # the strain limit's projection tolerance


def test_a_planar_swing_adds_no_twist():
    frames = 96
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, substeps=2)
    sc = whipped(frames, s)
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)
    assert np.max(np.abs(r.joints[..., 0])) < 1e-9  # stays in the YZ plane
    rel = quat.multiply(quat.conjugate(sc.rotations), r.rotations)
    assert np.max(quat.angle(rel)) > np.radians(5)  # swung away from the animation
    assert np.max(np.abs(quat.twist_angle(rel))) < np.radians(2.0)


def test_rotations_reproduce_the_simulated_joints():
    frames = 60
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, substeps=2)
    sc = whipped(frames, s, plane_axis=(0.6, 0.8, 0.0))
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)
    from core.ik.chain import RootTransform

    fk = forward_kinematics_batch(sc.chain, r.rotations, RootTransform(sc.root_rotation, sc.root_position))
    # directions match exactly; positions within the (tiny) length error along the chain
    np.testing.assert_allclose(fk, r.joints, atol=4 * 0.08 * 1e-3)
    np.testing.assert_allclose(r.pose, fk, atol=1e-12)  # the written pose, as reported
    assert np.all(np.einsum("fij,fij->fi", r.rotations[1:], r.rotations[:-1]) >= 0)  # continuous


def test_tail_swinging_into_a_sphere_stays_outside_by_its_radius():
    frames = 72
    radius = 0.02
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, radius=radius, substeps=4)
    sc = whipped(frames, s)
    ball = Sphere(np.array([0.0, 0.24 * np.sin(np.radians(50)), 1.0 - 0.24 * np.cos(np.radians(50))]), 0.05)
    free = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)[0]
    d_free = np.linalg.norm(free.joints[:, 1:] - ball.center, axis=2)
    assert d_free.min() < ball.radius  # without it the tail goes through the ball
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [ball])
    d = np.linalg.norm(r.joints[:, 1:] - ball.center, axis=2)
    assert d.min() >= ball.radius + radius * (1 - 1e-3)
    assert r.penetration <= 1e-3 * radius
    assert r.length_error < 1e-3


def test_a_sphere_smaller_than_a_bone_cannot_pass_between_its_joints():
    """A 1 cm ball in the swing's path halfway along the third bone, 4 cm from the joints on
    either side: without the bones colliding it passes between them (the joints never come
    near it). With them, every bone but the first stays the chain's radius outside it at every
    frame (brute force along the bones), and the report's penetration is the written pose's."""
    frames, radius = 72, 0.01
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, radius=radius, substeps=4)
    sc = whipped(frames, s)
    a = np.radians(40.0)
    ball = Sphere(np.array([0.0, 0.20 * np.sin(a), 1.0 - 0.20 * np.cos(a)]), 0.01)
    free = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)[0]
    assert bone_distances(free.joints, ball.center)[:, 2].min() < ball.radius  # a bone goes through
    assert np.linalg.norm(free.joints - ball.center, axis=2).min() > ball.radius + radius  # no joint near
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [ball])
    keep = ball.radius + radius
    gap = bone_distances(r.joints, ball.center)[:, 1:]
    assert gap.min() >= keep * (1 - 1e-6), gap.min()
    assert gap.min() <= keep * (1 + 1e-3)  # it meets the ball
    # the written pose (the bones at their own lengths) is off the rope by its length error
    slack = np.max(np.linalg.norm(r.pose - r.joints, axis=2))
    pose_gap = bone_distances(r.pose, ball.center)[:, 1:]
    assert pose_gap.min() >= keep - slack - 1e-12
    assert r.penetration == pytest.approx(max(0.0, keep - pose_gap.min()), abs=1e-7)  # sampling: ~1e-8
    assert r.length_error < 1e-3


def box_signed_distance(p: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Exact signed distance of points ``p`` ``(..., 3)`` to the axis-aligned box ``[lo, hi]``."""
    outside = np.linalg.norm(np.maximum(np.maximum(lo - p, p - hi), 0.0), axis=-1)
    inside = np.minimum(p - lo, hi - p).min(axis=-1)
    return np.where(np.all((p > lo) & (p < hi), axis=-1), -inside, outside)


def test_a_thin_bar_cannot_pass_between_the_joints():
    """A 1 cm bar (a closed box mesh: a body's edge) across the swing halfway along the third
    bone: without the bones colliding it passes between the joints; with them every bone but the
    first keeps the chain's radius from it at every frame (brute force: the box's exact signed
    distance sampled along the bones), and the report's penetration is the written pose's."""
    from core.springs.shapes import box

    frames, radius = 72, 0.01
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, radius=radius, substeps=4)
    sc = whipped(frames, s)
    a = np.radians(40.0)
    c = np.array([0.0, 0.20 * np.sin(a), 1.0 - 0.20 * np.cos(a)])
    lo, hi = c - [0.1, 0.005, 0.005], c + [0.1, 0.005, 0.005]
    bar = TriangleMesh(*box(lo, hi))

    def gaps(joints):
        f = np.linspace(0.0, 1.0, 2001)[:, None, None, None]
        return box_signed_distance(joints[:, :-1] + f * np.diff(joints, axis=1), lo, hi).min(axis=0)

    free = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)[0]
    assert gaps(free.joints)[:, 2].min() < 0  # a bone goes through
    assert box_signed_distance(free.joints, lo, hi).min() > radius  # no joint near
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [bar])
    gap = gaps(r.joints)[:, 1:]
    assert radius * (1 - 1e-6) <= gap.min() <= radius * (1 + 1e-3), gap.min()
    slack = np.max(np.linalg.norm(r.pose - r.joints, axis=2))
    pose_gap = gaps(r.pose)[:, 1:]
    assert pose_gap.min() >= radius - slack - 1e-12
    assert r.penetration == pytest.approx(max(0.0, radius - pose_gap.min()), abs=1e-7)
    assert r.length_error < 1e-3


def test_a_bar_sweeping_through_a_tail_without_gravity_pushes_it_aside():
    """A 2 cm bar (a moving mesh) sweeps at up to 0.6 m/s through the middle of a still tail's
    second bone (gravity 0): the tail is pushed aside, every bone but the first keeping the radius
    from the bar at every frame (its exact box distance sampled along the bones), and the energy
    the bar gives is not taken for a divergence (a chain without gravity and with still pins had
    no room for it in the Simulator's energy check)."""
    from core.springs.shapes import box

    frames, radius = 24, 0.02
    s = SpringSettings(stiffness=50.0, damping=5.0, gravity=0.0, radius=radius, substeps=4)
    sc = still(straight(3, 0.2, (0, 0, -1)), frames, s, root_pos=np.tile([0.0, 0.0, 1.0], (frames, 1)))
    ys = 0.3 - 0.6 * np.arange(frames) / (frames - 1)
    half = np.array([0.2, 0.01, 0.01])
    v, t = box(-half, half)
    meshes = [TriangleMesh(v + [0, ys[f], 0.7], t, previous=v + [0, ys[f - 1], 0.7] if f else None)
              for f in range(frames)]
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [meshes[f]])
    f = np.linspace(0.0, 1.0, 2001)[:, None, None]
    for joints, slack in ((r.joints, 1e-4 * radius), (r.pose, np.max(np.linalg.norm(r.pose - r.joints, axis=2)))):
        gap = min(box_signed_distance(joints[k, 1:-1] + f * np.diff(joints[k, 1:], axis=0),
                                      [0, ys[k], 0.7] - half, [0, ys[k], 0.7] + half).min() for k in range(frames))
        assert gap >= radius - slack - 1e-12, gap
    assert np.max(np.linalg.norm(r.joints - r.animated, axis=2)) > 0.2  # pushed aside
    assert r.length_error < 1e-3


def test_tail_meets_a_moving_deforming_body_and_stays_outside_by_its_radius():
    """A body (a closed mesh, as an armature-deformed character's) travels into a hanging tail
    while it breathes (scaled ±15 % along X): every frame the tail's joints are outside its
    surface by the chain's radius (the mesh's own signed distance)."""
    from core.springs.shapes import uv_sphere

    frames, radius = 48, 0.02
    verts, tris = uv_sphere(0.1)
    t = np.arange(frames) / FPS
    travel = np.clip(t / 1.5, 0.0, 1.0)
    centers = np.c_[np.zeros(frames), 0.45 - 0.45 * travel, np.full(frames, 0.78)]
    breath = 1.0 + 0.15 * np.sin(2 * np.pi * t)
    bodies = [verts * np.array([breath[f], 1.0, 1.0]) + centers[f] for f in range(frames)]
    meshes = [TriangleMesh(bodies[f], tris, previous=bodies[f - 1] if f else None) for f in range(frames)]
    s = SpringSettings(stiffness=10.0, damping=2.0, gravity=1.0, radius=radius, substeps=4)
    sc = still(straight(4, 0.08, (0, 0, -1)), frames, s, root_pos=np.tile([0.0, 0.0, 1.0], (frames, 1)))
    free = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)[0]
    assert min(meshes[f].signed_distance(free.joints[f, 1:]).min() for f in range(frames)) < -0.05
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [meshes[f]])
    gap = np.array([meshes[f].signed_distance(r.joints[f, 1:]).min() for f in range(frames)])
    assert gap.min() >= radius * (1 - 1e-4), gap.min()
    # the bones but the first, sampled every 0.4 mm (the bones are pushed off the body's
    # corners and ridges between their joints too)
    f = np.linspace(0.0, 1.0, 201)[:, None]
    along = [meshes[k].signed_distance((r.joints[k, 1:-1, None] + f * np.diff(r.joints[k, 1:], axis=0)[:, None])
                                       .reshape(-1, 3)).min() for k in range(frames)]
    assert min(along) >= radius * (1 - 1e-4), min(along)
    assert np.max(np.linalg.norm(r.joints - r.animated, axis=2)) > 0.05  # pushed aside
    assert r.length_error < 1e-3


def test_a_chain_collides_only_with_its_own_colliders():
    frames = 72
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, radius=0.02, substeps=4)
    ball = Sphere(np.array([0.0, 0.24 * np.sin(np.radians(50)), 1.0 - 0.24 * np.cos(np.radians(50))]), 0.05)
    sc = whipped(frames, s)
    free = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)[0]
    masked = SpringChain(sc.chain, sc.rotations, sc.root_rotation, sc.root_position, s, colliders=())
    (r,) = bake_spring_chains([masked], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [ball])
    np.testing.assert_allclose(r.joints, free.joints, atol=1e-12)
    own = SpringChain(sc.chain, sc.rotations, sc.root_rotation, sc.root_position, s, colliders=(0,))
    (r,) = bake_spring_chains([own], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [ball])
    assert np.linalg.norm(r.joints[:, 1:] - ball.center, axis=2).min() >= ball.radius + 0.02 * (1 - 1e-3)


def _one_group_moving_as_alone(chains, frames, swing, rotations=False):
    """``chains`` baked together are one group, and each chain (swinging more than ``swing`` m
    off its animation) moves as baked alone: joints within 1e-9 m (and, with ``rotations``, its
    rotations within 1e-8)."""
    together = SpringBake(chains, fps=FPS, gravity=G, frames=frames)
    assert len(together.groups) == 1
    while not together.step():
        pass
    for chain, r in zip(chains, together.results()):
        (alone,) = bake_spring_chains([chain], fps=FPS, gravity=G, frames=frames)
        assert np.max(np.linalg.norm(alone.joints - alone.animated, axis=2)) > swing  # it swings
        np.testing.assert_allclose(r.joints, alone.joints, rtol=0, atol=1e-9)
        if rotations:
            np.testing.assert_allclose(r.rotations, alone.rotations, rtol=0, atol=1e-8)


def test_chains_of_equal_substeps_share_a_model_and_match_separate_bakes():
    """Chains of other stiffness, damping, drag and gravity but equal substeps and stretch are one
    model (per-vertex drag, their gravity's difference as a force), and each moves as it does
    baked alone, to round-off: the strain limit projects each chain on its own."""
    frames = 48
    settings = [SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, substeps=2),
                SpringSettings(stiffness=25.0, damping=3.0, drag=0.5, gravity=0.5, substeps=2),
                SpringSettings(stiffness=4.0, damping=1.6, drag=2.0, gravity=1.0, substeps=2)]
    chains = [whipped(frames, settings[0]), whipped(frames, settings[1], plane_axis=(0.0, 1.0, 0.0)),
              whipped(frames, settings[2], plane_axis=(1.0, 1.0, 0.0))]
    _one_group_moving_as_alone(chains, frames, swing=0.02)


def test_chains_of_other_substeps_share_a_group_and_each_moves_as_baked_alone():
    """Chains of 2, 3 and 6 substeps (and other stiffness, damping, drag, gravity and stretch) are one
    group: each call of a frame steps every chain that has a step left, each over its own part of
    the frame, time-scaled onto the group's step (6 calls a frame, not 11), and each chain moves
    as it does baked alone, to round-off."""
    frames = 48
    settings = [SpringSettings(stiffness=25.0, damping=3.0, drag=0.5, gravity=0.5, substeps=3),
                SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, stretch=0.1, substeps=2),
                SpringSettings(stiffness=400.0, damping=2.0, drag=0.1, gravity=0.05, substeps=6),
                SpringSettings(stiffness=4.0, damping=1.6, drag=2.0, gravity=1.0, substeps=2)]
    chains = [whipped(frames, settings[0]), whipped(frames, settings[1], plane_axis=(0.0, 1.0, 0.0)),
              whipped(frames, settings[2], plane_axis=(1.0, 1.0, 0.0)), whipped(frames, settings[3])]
    _one_group_moving_as_alone(chains, frames, swing=0.01, rotations=True)


def test_chains_against_colliders_move_as_baked_alone():
    """Two chains of equal substeps swinging into spheres each have a model of their own (the
    contact stage works over a whole model) and move exactly as baked alone; a chain that
    collides with nothing still shares a model."""
    frames = 72
    s = SpringSettings(stiffness=5.0, damping=0.5, gravity=1.0, radius=0.02, substeps=4)
    t = SpringSettings(stiffness=20.0, damping=1.5, drag=0.5, gravity=1.0, radius=0.02, substeps=4)
    lift = 1.0 - 0.24 * np.cos(np.radians(50))
    balls = [Sphere(np.array([0.0, 0.24 * np.sin(np.radians(50)), lift]), 0.05),
             Sphere(np.array([0.01 - 0.24 * np.sin(np.radians(50)), 0.0, lift]), 0.05)]
    a = whipped(frames, s)
    b = whipped(frames, t, plane_axis=(0.0, 1.0, 0.0))
    b = SpringChain(b.chain, b.rotations, b.root_rotation, b.root_position + [0.01, 0.0, 0.0], t)
    c = SpringChain(a.chain, a.rotations, a.root_rotation, a.root_position + [0.5, 0.0, 0.0], s, colliders=())
    d = SpringChain(b.chain, b.rotations, b.root_rotation, b.root_position + [0.5, 0.0, 0.0], t, colliders=())
    together = SpringBake([a, b, c, d], fps=FPS, gravity=G, frames=frames, colliders=lambda f: balls)
    assert len(together.groups) == 3
    while not together.step():
        pass
    for chain, r in zip((a, b), together.results()[:2]):
        (alone,) = bake_spring_chains([chain], fps=FPS, gravity=G, frames=frames, colliders=lambda f: balls)
        gap = min(bone_distances(alone.joints, ball.center)[:, 1:].min() - ball.radius for ball in balls)
        assert gap == pytest.approx(0.02, abs=1e-3)  # a bone meets a ball at its radius
        np.testing.assert_allclose(r.joints, alone.joints, rtol=0, atol=1e-9)


def test_pre_roll_frames_are_simulated_but_not_returned():
    frames, lead = 24, 48
    s = SpringSettings(stiffness=30.0, damping=8.0, gravity=1.0, substeps=2, pre_roll=lead)
    sc = still(straight(2, 0.1), frames + lead, s)
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames)
    assert r.joints.shape == (frames, 3, 3)
    # settled by the pre-roll: the written frames barely move
    assert np.max(np.abs(np.diff(r.joints, axis=0))) < 1e-4
    assert np.max(np.abs(r.joints - r.animated)) > 1e-3  # sagging under gravity
    s0 = SpringSettings(stiffness=30.0, damping=8.0, gravity=1.0, substeps=2, pre_roll=0)
    (r0,) = bake_spring_chains([still(straight(2, 0.1), frames + lead, s0)], fps=FPS, gravity=G,
                               frames=frames)
    assert np.max(np.abs(np.diff(r0.joints, axis=0))) > 1e-3  # without it the chain starts falling


def test_pose_from_joints_with_an_identity_base_is_the_rest_swing():
    chain = Chain.from_points([[0, 0, 0], [0.1, 0, 0.02], [0.18, 0.05, 0.0]])
    rng = np.random.default_rng(1)
    joints = np.cumsum(rng.normal(size=(5, 3, 3)), axis=1)
    rr, rp = quat.identity((5,)), np.zeros((5, 3))
    plain = pose_from_joints(chain, joints, rr, rp)
    based = pose_from_joints(chain, joints, rr, rp, base=quat.identity((5, 2)))
    np.testing.assert_allclose(based, plain, atol=1e-12)


def test_animated_joints_follow_the_root():
    chain = straight(2, 0.1)
    sc = still(chain, 3, SpringSettings(), root_pos=np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0.0]]))
    j = animated_joints(sc)
    np.testing.assert_allclose(j[:, 0], sc.root_position)
    np.testing.assert_allclose(j[2, 2], [1.2, 1.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("kwargs", [
    {"stiffness": -1.0}, {"damping": float("nan")}, {"drag": "x"}, {"gravity": float("inf")},
    {"stretch": -0.1}, {"stretch": 2.0}, {"radius": -0.01}, {"substeps": 0}, {"substeps": 1.5},
    {"pre_roll": -1},
])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(SinewError):
        SpringSettings(**kwargs)


def test_bad_input_is_refused_with_clear_messages():
    chain = straight(2, 0.1)
    s = SpringSettings()
    with pytest.raises(SinewError, match="rotations must have shape"):
        SpringChain(chain, np.zeros((3, 3, 4)), quat.identity((3,)), np.zeros((3, 3)), s)
    bad = np.tile(quat.identity(()), (3, 2, 1))
    bad[1, 0, 0] = np.nan
    with pytest.raises(SinewError, match="not finite"):
        SpringChain(chain, bad, quat.identity((3,)), np.zeros((3, 3)), s)
    long = SpringSettings(pre_roll=5)
    with pytest.raises(SinewError, match="pre_roll"):
        SpringBake([still(chain, 10, long)], fps=FPS, gravity=G, frames=8)
    with pytest.raises(SinewError, match="no spring chain"):
        SpringBake([], fps=FPS, gravity=G, frames=1)
    with pytest.raises(SinewError, match="gravity"):
        SpringBake([still(chain, 4, s)], fps=FPS, gravity=[0, 0], frames=4)


def test_a_tail_rooted_inside_the_body_it_hangs_from_bakes_and_its_joints_stay_out():
    """A tail's root usually sits inside the body (a collider): only the joints collide, so the
    first bone may start inside; every joint but the root stays outside by the radius (it
    diverged at its first frame when the bones collided as edges too)."""
    from core.springs.shapes import uv_sphere

    frames, radius = 24, 0.03
    verts, tris = uv_sphere(0.15)
    body = TriangleMesh(verts + [0.0, 0.0, 1.0], tris)
    s = SpringSettings(stiffness=10.0, damping=2.0, gravity=1.0, radius=radius, substeps=4)
    sc = still(straight(5, 0.06, (0, 1, -1)), frames, s,
               root_pos=np.tile([0.0, 0.14, 1.0], (frames, 1)))  # 1 cm inside the 0.15 m body
    assert body.signed_distance(sc.root_position[:1])[0] < 0
    (r,) = bake_spring_chains([sc], fps=FPS, gravity=G, frames=frames, colliders=lambda f: [body])
    assert np.all(np.isfinite(r.joints))
    gap = np.array([body.signed_distance(r.joints[f, 1:]).min() for f in range(frames)])
    assert gap.min() >= radius * (1 - 1e-3), gap.min()
    assert r.length_error < 1e-3


def test_an_edge_contact_mask_of_the_wrong_shape_is_refused():
    """``Model.edge_contact`` as a mask: one bool per structural spring, else one clear message;
    the springs it names are the ones that collide as edges."""
    from core.springs import Model

    x = np.c_[np.zeros(4), np.zeros(4), -0.1 * np.arange(4)]
    kw = dict(rest_positions=x, springs=np.array([[0, 1], [1, 2], [2, 3]]), rest_lengths=np.full(3, 0.1),
              stiffness=np.full(3, 100.0), damping=np.zeros(3), masses=np.full(4, 0.1),
              pinned=np.array([True, False, False, False]))
    m = Model(**kw, edge_contact=np.array([False, True, True]))
    np.testing.assert_array_equal(m.contact_edges, [[1, 2], [2, 3]])
    assert len(Model(**kw, edge_contact=False).contact_edges) == 0
    assert len(Model(**kw).contact_edges) == 3
    for bad in (np.array([True, False]), np.array([1, 0, 1])):
        with pytest.raises(SinewError, match="edge_contact must be a bool or a bool array of shape"):
            Model(**kw, edge_contact=bad)
