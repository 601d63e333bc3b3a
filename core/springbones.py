"""Spring bones: bone chains that follow their animated pose with inertia.

A spring chain is a serial bone chain (:class:`~.ik.chain.Chain`: tip bone and its
``chain_length − 1`` parents) whose animation is given per frame as each bone's local
pose rotation and the root frame its parent carries it in. Its joints (the bones' heads,
then the tip's tail, :func:`animated_joints`) become a mass-spring rope of the existing
spring solver (:mod:`.springs`: one :class:`~.springs.model.Model`, the IMPLICIT
integrator, its colliders and divergence checks; no solver of its own):

* joint 0 (the first head) is a hard pin carried exactly by the animated parent;
* every other joint is a point of mass ``mᵢ = ρ (Lᵢ + Lᵢ₊₁)/2`` (half of each segment it
  ends, ``ρ`` = 1 kg/m: every setting is per unit mass, so ``ρ`` cancels) pulled toward
  its animated position by a soft pin of stiffness ``stiffness · mᵢ`` (N/m, so
  ``stiffness`` is an acceleration per metre of offset, 1/s²: a lone joint would swing
  about its animated place at ``√stiffness`` rad/s);
* consecutive joints are joined by a structural spring (the bone), stiff enough to hold
  its length (axial frequency :data:`AXIAL_OMEGA_FRAMES` × fps), and by the solver's strain
  limit (Goldenthal 2007 fast projection) at ``stretch`` (:data:`RIGID_STRETCH` for 0);
  with ``stretch`` > 0 the bone's axial spring is softened so that it stretches by
  ``stretch/2`` under its own weight (:func:`axial_rate`); after every frame a follow-the-
  leader projection puts back any bone shorter or longer than ``stretch`` plus
  :data:`LENGTH_TOLERANCE` allows (the strain limit bounds lengths from above only);
* ``damping`` (1/s) damps the motion *relative to the animation*, the force
  ``−damping · m (v − v_anim)``: it is the model's air drag (implicit) plus an external
  force ``damping · m · v_anim`` held over each frame (the animated joints move linearly
  within a frame, as the pins do), so a chain carried at constant speed is not slowed;
* ``drag`` (1/s) is air drag ``−drag · m v`` against still air;
* ``gravity`` scales the scene's gravity (m/s²);
* ``radius`` (m) is the thickness every collider keeps from the joints and from the bones
  between them (each chain's first bone left out: its root usually sits inside the body it
  hangs from), :attr:`~.springs.model.Model.edge_contact`.

Rotations are recovered from the simulated joints by :func:`~.ik.chain.pose_from_joints`
(the IK solvers' one implementation) as each bone's minimal swing from its *animated*
rotation: the animation's twist is kept and none is added.

Chains of equal ``pre_roll`` without colliders are simulated together (:class:`_Group`; their
ropes are disconnected; a chain with colliders has a model of its own), each on its own
``substeps``: the ``k``-th call of a frame takes the ``k``-th step of every chain that has one, over
a model of those chains (:class:`_Part`) in which each chain is scaled in time onto the call's step
(:func:`_build`). So one solve per call serves them all: stiffness, axial springs, air drag and the
strain limit are per vertex or spring, the chains' gravity where it differs from the model's is an
external force, and the strain limit projects each rope on its own
(:class:`~.springs.strainlimit._Pieces`), so a chain moves as it would baked alone, to round-off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import quat
from .errors import BakeCancelled, SinewError
from .ik.chain import Chain, RootTransform, forward_kinematics_batch, pose_from_joints
from .springs import LinearImplicitEuler, Model, Plane, Simulator, Sphere, State, TriangleMesh

__all__ = ["SpringSettings", "SpringChain", "SpringResult", "SpringBake", "animated_joints",
           "bake_spring_chains", "axial_rate", "AXIAL_OMEGA_FRAMES", "RIGID_STRETCH", "INTEGRATOR",
           "LENGTH_TOLERANCE"]

#: The spring solver's integrator for spring bones: linearised implicit Euler, stable at any
#: stiffness and step (without its residual measure: nothing reads it).
INTEGRATOR = LinearImplicitEuler.name
#: Axial frequency of a rigid bone's spring, rad/s per frame per second: ``ω = 10 fps`` is
#: far beyond anything the frames can show (implicit Euler damps that mode within a frame);
#: stiffer, the linearised step turned more of a swing into that mode's damped energy (a free
#: pendulum kept 48 % of its swing after a second at 20 fps·rad, 93 % at 10).
AXIAL_OMEGA_FRAMES = 10.0
#: Strain limit used for ``stretch`` = 0 (the projection needs a bound above 0).
RIGID_STRETCH = 1e-4
#: Relative length error beyond ``stretch`` that the per-frame length projection removes
#: (:meth:`_Group._keep_lengths`): half the 0.1 % a rigid bone is allowed.
LENGTH_TOLERANCE = 5e-4
#: Linear density of the rope, kg/m (every setting is per unit mass, so it cancels).
_DENSITY = 1.0


def _number(value: Any, name: str, low: float = 0.0) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise SinewError(f"spring bones: {name} must be a number, got {value!r}") from None
    if not np.isfinite(f) or f < low:
        raise SinewError(f"spring bones: {name} must be finite and >= {low:g}, got {value!r}")
    return f


@dataclass(frozen=True)
class SpringSettings:
    """One spring chain's settings (CONTRACT.md, ``pose_bone.sinew_spring``).

    Attributes
    ----------
    stiffness : float
        1/s²: pull toward the animated pose per unit mass and metre of offset.
    damping : float
        1/s: damping of the motion relative to the animation.
    drag : float
        1/s: air drag on each joint's velocity.
    gravity : float
        Factor of the scene's gravity.
    stretch : float
        Fraction a bone may stretch (0 = keeps its length).
    radius : float
        m, kept between the joints and every collider.
    substeps : int
        Time steps per frame, >= 1.
    pre_roll : int
        Frames simulated before the first written frame, >= 0.
    """

    stiffness: float = 0.0
    damping: float = 0.0
    drag: float = 0.0
    gravity: float = 1.0
    stretch: float = 0.0
    radius: float = 0.0
    substeps: int = 2
    pre_roll: int = 0

    def __post_init__(self) -> None:
        for name in ("stiffness", "damping", "drag", "gravity", "stretch", "radius"):
            object.__setattr__(self, name, _number(getattr(self, name), name))
        if self.stretch > 1.0:
            raise SinewError(f"spring bones: stretch must be at most 1 (100 %), got {self.stretch!r}")
        for name, low in (("substeps", 1), ("pre_roll", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or int(_number(value, name, low)) != value:
                raise SinewError(f"spring bones: {name} must be a whole number >= {low}, got {value!r}")
            object.__setattr__(self, name, int(value))


@dataclass(frozen=True)
class SpringChain:
    """A spring chain and its animation over ``T`` frames (pre-roll frames first).

    Attributes
    ----------
    chain : Chain
        Rest geometry, in the units and space of the simulation (e.g. world metres).
    rotations : numpy.ndarray
        Shape ``(T, n, 4)``: each bone's animated local pose rotation per frame.
    root_rotation : numpy.ndarray
        Shape ``(T, 4)``: the root frame's (the parent's) rotation per frame.
    root_position : numpy.ndarray
        Shape ``(T, 3)``, m.
    settings : SpringSettings
    name : str
        For messages (the tip bone's name).
    colliders : tuple of int, optional
        Indices into each frame's collider list (:class:`SpringBake`) this chain collides
        with; ``None`` (the default) means all of them.
    """

    chain: Chain
    rotations: np.ndarray
    root_rotation: np.ndarray
    root_position: np.ndarray
    settings: SpringSettings
    name: str = "chain"
    colliders: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        q = np.asarray(self.rotations, dtype=np.float64)
        rr = np.asarray(self.root_rotation, dtype=np.float64)
        rp = np.asarray(self.root_position, dtype=np.float64)
        n = self.chain.n
        if q.ndim != 3 or q.shape[1:] != (n, 4) or len(q) < 1:
            raise SinewError(f"spring chain {self.name!r}: rotations must have shape (T, {n}, 4), "
                             f"got {q.shape}")
        if rr.shape != (len(q), 4) or rp.shape != (len(q), 3):
            raise SinewError(f"spring chain {self.name!r}: root rotation/position must have shapes "
                             f"({len(q)}, 4)/({len(q)}, 3), got {rr.shape}/{rp.shape}")
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(rr)) and np.all(np.isfinite(rp))):
            raise SinewError(f"spring chain {self.name!r}: its animation is not finite")
        object.__setattr__(self, "rotations", quat.normalize(q))
        object.__setattr__(self, "root_rotation", quat.normalize(rr))
        object.__setattr__(self, "root_position", rp)
        if self.colliders is not None:
            object.__setattr__(self, "colliders", tuple(sorted({int(i) for i in self.colliders})))

    @property
    def frames(self) -> int:
        """``T``."""
        return int(len(self.rotations))


def animated_joints(spring: SpringChain) -> np.ndarray:
    """The chain's animated joints (heads, then the tip), shape ``(T, n+1, 3)``, m."""
    return forward_kinematics_batch(spring.chain, spring.rotations,
                                    RootTransform(spring.root_rotation, spring.root_position))


@dataclass
class SpringResult:
    """One chain's bake over the written frames ``F`` (pre-roll dropped).

    Attributes
    ----------
    rotations : numpy.ndarray
        Shape ``(F, n, 4)``, local pose rotations, sign-continuous over frames.
    joints : numpy.ndarray
        Shape ``(F, n+1, 3)``, the simulated joints, m.
    animated : numpy.ndarray
        Shape ``(F, n+1, 3)``, the animated joints, m.
    length_error : float
        Largest ``|ℓ/L − 1|`` of the chain's segments over the frames (simulated joints).
    penetration : float
        m, the deepest a joint (but the root) or a bone (but the first) of ``pose`` is inside
        a collider's surface plus the chain's radius over the frames (0 is the goal).
    pose : numpy.ndarray
        Shape ``(F, n+1, 3)``: the joints of the written pose (forward kinematics of
        ``rotations`` with the bones' own lengths: what Blender evaluates), m.
    """

    rotations: np.ndarray
    joints: np.ndarray
    animated: np.ndarray
    length_error: float
    penetration: float
    pose: np.ndarray


def axial_rate(settings: SpringSettings, fps: float, length: np.ndarray, gravity: float) -> np.ndarray:
    """A bone's axial spring per unit mass, ``k/m`` (1/s²), shape of ``length``.

    Rigid (``stretch`` 0): ``(AXIAL_OMEGA_FRAMES · fps)²``, the same at any ``substeps`` (an
    axial frequency tied to the substep made the swing's numerical damping jump with them: a
    free pendulum kept 93 % of its swing after a second at 2 substeps, 70 % at 3). Otherwise
    soft enough that the bone stretches by ``stretch/2`` under its own weight plus its
    stiffness's pull over a bone length, ``k/m = 2 (|g| + stiffness L) / (stretch L)``, but
    never stiffer than rigid.
    """
    rigid = (AXIAL_OMEGA_FRAMES * fps) ** 2
    if settings.stretch <= 0:
        return np.full(np.shape(length), rigid)
    soft = 2.0 * (max(gravity, 1.0) + settings.stiffness * length) / (settings.stretch * length)
    return np.minimum(soft, rigid)


def _build(group: Sequence[SpringChain], joints0: Sequence[np.ndarray], gravity: np.ndarray,
           fps: float, scale: np.ndarray, base: float) -> tuple[Model, np.ndarray, np.ndarray]:
    """One model for chains of equal ``pre_roll`` (:meth:`SpringBake._key`): ``(model, offsets
    (c+1,), rest lengths (s,))``; chain ``c``'s joints are vertices ``offsets[c]:offsets[c+1]``.
    Stiffness, axial springs and air drag are per chain (per vertex or spring, the strain limit per
    spring: ``Model.spring_stretch`` where the chains' differ); the model's gravity is ``base``
    times ``gravity``, the chains' own is an external force (:attr:`_Group.external`).

    Chain ``c`` is scaled in time by ``scale[c]`` (``s``, shape ``(c,)``): a step of ``H`` of the
    model is a step of ``s H`` of the chain, its velocities held as ``s v`` (:class:`_Group`). In
    implicit Euler ``M (v₁ − v₀) = h f`` and ``x₁ = x₀ + h v₁``, so with ``h = s H`` and ``u = s v``
    the chain's forces scale by ``s²`` (stiffness, anchors, gravity and external forces) and its
    drag by ``s``; the strain limit's ``Δx / H`` is ``s Δx / h``, its own velocity change scaled."""
    counts = [c.chain.n + 1 for c in group]
    offsets = np.concatenate(([0], np.cumsum(counts)))
    x = np.concatenate(joints0)
    seg = np.concatenate([c.chain.segment_lengths for c in group])
    if np.any(seg <= 1e-9):
        raise SinewError("spring bones: a bone of a spring chain has zero length")
    springs = np.concatenate([np.stack((np.arange(a, b - 1), np.arange(a + 1, b)), axis=1)
                              for a, b in zip(offsets[:-1], offsets[1:])])
    masses = np.zeros(len(x))
    np.add.at(masses, springs[:, 0], 0.5 * _DENSITY * seg)
    np.add.at(masses, springs[:, 1], 0.5 * _DENSITY * seg)
    pinned = np.zeros(len(x), dtype=bool)
    pinned[offsets[:-1]] = True
    g = float(np.linalg.norm(gravity))
    pair = np.minimum(masses[springs[:, 0]], masses[springs[:, 1]])
    square = scale * scale
    rate = np.concatenate([axial_rate(c.settings, fps, c.chain.segment_lengths, g * c.settings.gravity) * q
                           for c, q in zip(group, square)])
    per_vertex = np.repeat(np.arange(len(group)), counts)
    anchors = (np.array([c.settings.stiffness for c in group]) * square)[per_vertex] * masses
    anchors[pinned] = 0.0
    drag = (np.array([c.settings.drag + c.settings.damping for c in group]) * scale)[per_vertex]
    limit = np.repeat([c.settings.stretch if c.settings.stretch > 0 else RIGID_STRETCH for c in group],
                      [c.chain.n for c in group])
    bones = np.ones(len(springs), bool)  # the bones that collide as segments: not a chain's first
    bones[offsets[:-1] - np.arange(len(group))] = False
    model = Model(
        rest_positions=x, springs=springs, rest_lengths=seg.copy(), stiffness=pair * rate,
        damping=np.zeros(len(springs)), masses=masses, pinned=pinned,
        air_drag=drag if np.ptp(drag) > 0 else float(drag[0]), gravity=gravity * base,
        wind=np.zeros(3), anchors=anchors, max_stretch=float(limit.max()),
        spring_stretch=limit if np.ptp(limit) > 0 else np.zeros(0), edge_contact=bones)
    return model, offsets, seg


def _thick(colliders: Sequence[Any], radius: float) -> list[Any]:
    """The colliders with ``radius`` as their thickness."""
    out = []
    for c in colliders:
        if not isinstance(c, (Plane, Sphere, TriangleMesh)):
            raise SinewError(f"spring bones: unknown collider {type(c).__name__}")
        if c.thickness == radius:
            out.append(c)
        elif isinstance(c, TriangleMesh):
            out.append(c.with_thickness(radius))  # its ridges and tree are not built again
        else:
            out.append(dataclasses.replace(c, thickness=radius))
    return out


class _Part:
    """The chains of a :class:`_Group` that take the ``k``-th steps of a frame for the ``k`` of one
    run (those with at least that many ``substeps``): the group's chains from vertex ``first``,
    structural spring ``spring`` and pin target ``target`` on, with a model and a
    :class:`~.springs.Simulator` of their own, and the fractions of the frame at which each of
    their targets starts and ends the run (``(t, 1)`` each)."""

    def __init__(self, first: int, spring: int, target: int, model: Model, sim: Simulator,
                 start: np.ndarray, end: np.ndarray) -> None:
        self.first, self.spring, self.target, self.model, self.sim = first, spring, target, model, sim
        self.start, self.end = start[:, None], end[:, None]


class _Group:
    """Chains simulated together from frame index ``start`` (:meth:`SpringBake._key`): equal
    ``pre_roll``, no colliders (or a chain alone); their ropes are disconnected.

    Each chain takes its own ``substeps`` (its step ``h = 1 / (fps · substeps)``), and a call
    steps every chain that has a step left in the frame: the ``k``-th call of a frame takes the
    ``k``-th step of every chain of at least ``k`` substeps, each over its own part of the frame
    (its pins at its own fractions of it), so chains of 2, 4 and 6 substeps take 6 calls a frame,
    not 12. The chains are sorted by ``substeps``; the chains stepped by a call are then the
    group's last ones, a :class:`_Part` (its own model over them and its own
    :class:`~.springs.Simulator`, whose steps are ``H = 1 / (fps · n₁)`` for the fewest
    ``substeps`` ``n₁``): each chain is scaled in time by ``s = n₁ / substeps`` (:func:`_build`)
    and its velocities are held as ``s v``. The strain limit's memory of each chain's last active
    set (where its next projection starts) is carried between the parts, so a chain moves as it
    would baked alone, to round-off."""

    def __init__(self, chains: list[SpringChain], index: list[int], start: int, gravity: np.ndarray,
                 fps: float) -> None:
        order = sorted(range(len(chains)), key=lambda i: chains[i].settings.substeps)
        chains, index = [chains[i] for i in order], [index[i] for i in order]
        self.chains, self.index, self.start = chains, index, start
        self.settings = chains[0].settings
        self.mask = chains[0].colliders
        self.animated = [animated_joints(c) for c in chains]
        substeps = np.array([c.settings.substeps for c in chains])
        scale = substeps[0] / substeps
        base = self.settings.gravity
        joints0 = [a[start] for a in self.animated]
        model, self.offsets, self.rest = _build(chains, joints0, gravity, fps, scale, base)
        # the bounds of _keep_lengths (m, per bone), and its levels: the k-th bones of the chains
        # that have one, (heads, tails, shortest, longest)
        stretch = np.repeat([c.settings.stretch for c in chains], [c.chain.n for c in chains])
        self.shortest = (1.0 - stretch - LENGTH_TOLERANCE) * self.rest
        self.longest = (1.0 + stretch + LENGTH_TOLERANCE) * self.rest
        first = self.offsets[:-1]
        n = np.diff(self.offsets) - 1
        spring0 = first - np.arange(len(first))  # each chain's first bone
        self.levels = [(first[n > k] + k, first[n > k] + k + 1, self.shortest[spring0[n > k] + k],
                        self.longest[spring0[n > k] + k]) for k in range(int(n.max()))]
        anim = np.concatenate(self.animated, axis=1)  # (T, N, 3)
        self.targets = anim[:, model.target_index]
        t = len(anim)
        per_vertex = np.repeat(np.arange(len(chains)), np.diff(self.offsets))
        speed = scale[per_vertex][:, None]  # velocities are held as s v
        v0 = (anim[min(start + 1, t - 1)] - anim[start]) * fps * speed
        # per frame (constant over its substeps): the damping force's animated part, and the
        # chains' gravity where it differs from the model's (both scaled by s²)
        square = (scale * scale)[per_vertex]
        damping = np.array([c.settings.damping for c in chains])[per_vertex] * square
        lift = np.array([c.settings.gravity for c in chains])[per_vertex] * square - base
        self.external = None
        if np.any(damping > 0) or np.any(lift != 0):
            vel = np.zeros_like(anim)
            vel[1:] = (anim[1:] - anim[:-1]) * fps
            self.external = (damping * model.masses)[None, :, None] * vel + (lift * model.masses)[:, None] * gravity
        self.parts: list[_Part] = []
        done = 0  # the steps of a frame taken by the parts before
        for k in np.unique(substeps):
            c = int(np.searchsorted(substeps, k))  # the first chain with at least k substeps
            a = int(self.offsets[c])
            part = model if c == 0 else _build(chains[c:], joints0[c:], gravity, fps, scale[c:], base)[0]
            target = int(np.searchsorted(model.target_index, a))
            if not np.array_equal(part.target_index, model.target_index[target:] - a):
                raise SinewError("spring bones: a part's pins differ from its group's")  # never: same chains
            steps = int(k) - done
            own = substeps[per_vertex[model.target_index[target:]]]
            # the first part's simulator checks the energy of every chain of the group each frame
            sim = Simulator(part, LinearImplicitEuler(residual=False), fps=fps * (substeps[0] / steps),
                            substeps=steps, frame_start=start, state=State(anim[start, a:].copy(), v0[a:]),
                            energy_check=c == 0)
            self.parts.append(_Part(a, a - c, target, part, sim, done / own, k / own))
            done = int(k)
        self.model = model
        self.active = np.zeros(model.structural_count, dtype=bool)  # the strain limit's, between parts
        self.positions = np.empty_like(anim)
        self.positions[start] = anim[start]

    @property
    def sim(self) -> Simulator:
        """The simulator of the group's first part (all its chains): its state is the group's."""
        return self.parts[0].sim

    def advance(self, f: int, colliders: Sequence[Any]) -> None:
        """Simulate into frame index ``f``."""
        ext = None if self.external is None else self.external[f]
        if self.mask is not None:
            colliders = [colliders[i] for i in self.mask if i < len(colliders)]
        if len(self.parts) == 1:
            self.sim.advance(self.targets[f], _thick(colliders, self.settings.radius), external=ext)
        else:
            self._advance_parts(f, ext)
        self._keep_lengths(self.sim.state.x)
        self.positions[f] = self.sim.state.x

    def _advance_parts(self, f: int, ext: np.ndarray | None) -> None:
        """One frame of every part in turn (no colliders: a chain with colliders is a group of its
        own), each over its chains' own fractions of the frame, on the first part's state."""
        before, after = self.targets[f - 1], self.targets[f]
        for part in self.parts:
            a, sim = part.first, part.sim
            whole = self.sim.state  # a new State after each advance of the first part
            if a:
                sim.state.x[...] = whole.x[a:]
                sim.state.v[...] = whole.v[a:]
            memory = sim.integrator.strain_memory.of(part.model)
            memory.active = self.active[part.spring:].copy()
            p, q = before[part.target:], after[part.target:]
            span = q - p
            end = np.where(part.end == 1.0, q, p + span * part.end)
            sim.advance(end, (), external=None if ext is None else ext[a:], pins_from=p + span * part.start)
            if memory.active is not None:
                self.active[part.spring:] = memory.active
            if a:
                whole.x[a:] = sim.state.x
                whole.v[a:] = sim.state.v

    def _keep_lengths(self, x: np.ndarray) -> None:
        """Follow the leader (Müller et al. 2012), in place on ``x`` ``(N, 3)``: from each root
        outwards, a joint whose bone is out of ``[(1 − stretch − τ) L, (1 + stretch + τ) L]``
        (τ = :data:`LENGTH_TOLERANCE`) is put back on that bound along the bone's current
        direction. The strain limit bounds bones from above only, and its projection of one bone
        can shorten the next (a whipped tail showed 1 % for a frame); this bounds them from both
        sides. Velocities are left as the step made them; bones within the bounds (all of them
        on calm frames) are not touched, so the projection adds no energy where it is not needed
        (projecting every frame onto exact lengths lifts a hanging chain by its springs' sag and
        made an undamped swing gain 0.03 % of its energy on some frames)."""
        springs = self.model.springs
        d = x[springs[:, 1]] - x[springs[:, 0]]
        length = np.sqrt(np.einsum("ij,ij->i", d, d))
        if np.all(length >= self.shortest) and np.all(length <= self.longest):
            return  # every bone within its bounds: nothing to put back
        for a, b, lo, hi in self.levels:
            d = x[b] - x[a]
            length = np.sqrt(np.einsum("ij,ij->i", d, d))
            want = np.clip(length, lo, hi)
            x[b] = x[a] + d * (want / np.maximum(length, 1e-300))[:, None]


def _depth(collider: Any, joints: np.ndarray, radius: float) -> float:
    """How far a chain's joints ``(n+1, 3)`` (the root left out) and bones (the first left out:
    its root sits inside the body it hangs from) are inside ``collider``'s surface plus
    ``radius``, m (0 if none). Along a bone of a mesh collider the distance is sampled every
    ``radius / 4`` beside its exact distance to the mesh's ridges
    (:meth:`~.springs.colliders.TriangleMesh.segment_distance`: exact outside, within
    ``radius / 8`` inside)."""
    depth = np.max(radius - collider.signed_distance(joints[1:]))
    if len(joints) > 2:
        spacing = radius / 4 if radius > 0 else float(np.linalg.norm(joints[-1] - joints[0])) / 64 + 1e-9
        depth = max(depth, np.max(radius - collider.segment_distance(joints[1:-1], joints[2:], spacing)))
    return float(max(0.0, depth))


class SpringBake:
    """A spring-bone bake, one frame per :meth:`step` (for modal operators).

    Parameters
    ----------
    chains : sequence of SpringChain
        All with the same number of frames ``T`` = ``lead + F``.
    fps : float
        Frames per second.
    gravity : array_like
        Shape ``(3,)``, the scene's gravity in the simulation's space, m/s².
    frames : int
        ``F``, the frames written (the last ``F`` of ``T``); each chain starts
        ``settings.pre_roll`` frames before them (at most ``T − F``).
    colliders : callable, optional
        ``colliders(t)`` → the colliders (:class:`~.springs.colliders.Plane`, ``Sphere``,
        ``TriangleMesh`` with ``previous`` when moving) for the step into frame index ``t``,
        in the simulation's space; their thickness is replaced by each chain's ``radius``.
    """

    def __init__(self, chains: Sequence[SpringChain], *, fps: float, gravity: Any, frames: int,
                 colliders: Callable[[int], Sequence[Any]] | None = None) -> None:
        if not chains:
            raise SinewError("spring bones: no spring chain to bake")
        if not (np.isfinite(fps) and fps > 0):
            raise SinewError("spring bones: fps must be > 0")
        g = np.asarray(gravity, dtype=np.float64).reshape(-1)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise SinewError("spring bones: gravity must be 3 finite numbers (m/s²)")
        t = chains[0].frames
        if any(c.frames != t for c in chains):
            raise SinewError("spring bones: every chain needs the same frames")
        frames = int(frames)
        if not 1 <= frames <= t:
            raise SinewError(f"spring bones: frames must be in [1, {t}], got {frames}")
        self.lead = t - frames
        self.frames, self.total_frames, self.fps = frames, t, float(fps)
        self.chains = list(chains)
        self.colliders = colliders
        groups: dict[tuple, list[int]] = {}
        for i, c in enumerate(self.chains):
            if c.settings.pre_roll > self.lead:
                raise SinewError(f"spring chain {c.name!r}: pre_roll {c.settings.pre_roll} needs "
                                 f"{c.settings.pre_roll} frames before the range, {self.lead} given")
            groups.setdefault(self._key(i, c), []).append(i)
        self.groups = [_Group([self.chains[i] for i in idx], idx, self.lead - self.chains[idx[0]].settings.pre_roll,
                              g, self.fps) for idx in groups.values()]
        self.t = min(grp.start for grp in self.groups)

    def _key(self, i: int, chain: SpringChain) -> tuple:
        """Chains with equal keys share a :class:`_Group`: equal ``pre_roll`` (one start), no
        colliders (each on its own substeps). A chain with colliders has a model of its own:
        the contact stage's rounds and passes run over a whole model (two chains sharing one
        moved up to 0.1 mm apart from their bakes alone)."""
        if self.colliders is not None and chain.colliders != ():
            return ("own", i)
        return ("shared", chain.settings.pre_roll)

    @property
    def done(self) -> int:
        """Frame indices simulated so far (progress)."""
        return self.t - min(grp.start for grp in self.groups)

    @property
    def total(self) -> int:
        """Frame indices to simulate in all."""
        return self.total_frames - 1 - min(grp.start for grp in self.groups)

    def _penetration(self, grp: _Group, pose: np.ndarray) -> float:
        """The deepest any joint or bone of ``pose`` ``(F, n+1, 3)`` (the written frames) is
        inside a collider's surface plus the chain's radius (:func:`_depth`), m."""
        if self.colliders is None:
            return 0.0
        deepest = 0.0
        for f in range(self.frames):
            cols = self.colliders(self.lead + f)
            if grp.mask is not None:
                cols = [cols[i] for i in grp.mask if i < len(cols)]
            for col in cols:
                deepest = max(deepest, _depth(col, pose[f], grp.settings.radius))  # one per group
        return deepest

    def step(self) -> bool:
        """Simulate one frame index for every group that has started; True when finished."""
        if self.t >= self.total_frames - 1:
            return True
        f = self.t + 1
        cols = self.colliders(f) if self.colliders is not None else ()
        for grp in self.groups:
            if f > grp.start:
                grp.advance(f, cols)
        self.t = f
        return self.t >= self.total_frames - 1

    def results(self) -> list[SpringResult]:
        """Per chain (in the order given), the written frames' rotations and measures.

        The measures are taken on the pose the rotations give (forward kinematics with the
        bones' own lengths, what Blender evaluates from the keys), not on the rope: ``pose``,
        and ``penetration`` of each collider's radius by its joints."""
        if self.t < self.total_frames - 1:
            raise SinewError("spring bones: the bake has not finished")
        out: list[SpringResult | None] = [None] * len(self.chains)
        lead = self.lead
        for grp in self.groups:
            for k, (c, i) in enumerate(zip(grp.chains, grp.index)):
                a, b = grp.offsets[k], grp.offsets[k + 1]
                joints = grp.positions[lead:, a:b]
                animated = grp.animated[k][lead:]
                rr, rp = c.root_rotation[lead:], c.root_position[lead:]
                q = pose_from_joints(c.chain, joints, rr, rp, base=c.rotations[lead:])
                if not np.all(np.isfinite(q)):
                    raise SinewError(f"spring chain {c.name!r}: the simulation gave non-finite rotations")
                q = quat.make_continuous(q, axis=0)
                pose = forward_kinematics_batch(c.chain, q, RootTransform(rr, rp))
                length = np.linalg.norm(np.diff(joints, axis=1), axis=2)
                err = float(np.max(np.abs(length / c.chain.segment_lengths - 1.0)))
                out[i] = SpringResult(q, joints.copy(), animated, err, self._penetration(grp, pose), pose)
        return [r for r in out if r is not None]


def bake_spring_chains(chains: Sequence[SpringChain], *, fps: float, gravity: Any, frames: int,
                       colliders: Callable[[int], Sequence[Any]] | None = None,
                       progress: Callable[[int, int], bool | None] | None = None) -> list[SpringResult]:
    """Run a :class:`SpringBake` to the end (same parameters); ``progress(done, total)``
    after each frame, returning ``False`` cancels (:class:`~core.errors.BakeCancelled`)."""
    bake = SpringBake(chains, fps=fps, gravity=gravity, frames=frames, colliders=colliders)
    while not bake.step():
        if progress is not None and progress(bake.done, bake.total) is False:
            raise BakeCancelled("bake cancelled")
    return bake.results()
