"""Frame-by-frame simulation with pins, colliders, diagnostics and divergence
detection.

Divergence. After every substep positions and velocities must be finite.
After every frame the mechanical energy ``E = KE + E_spring + E_gravity``
is compared with its initial value: every integrator here except EXPLICIT is
dissipative or (SYMPLECTIC, undamped) keeps a bounded modified energy, and
only pins, wind, external forces (force fields) and collider projection can add
energy. So ``E − E₀ > 100 · S`` flags runaway energy, where the energy scale ``S``
is the initial kinetic plus spring energy, plus ``M|g|`` times the rest-mesh
extent plus 1 m, plus ``½ M ‖wind‖²``, plus ``M (u² + |g| δ)`` summed over frames
for the pins' speed ``u`` and travel ``δ`` (``M`` total mass), plus the bound
``Σ ‖fᵢ‖ ‖Δxᵢ‖`` on the work of the external forces, summed over substeps. A divergence raises
:class:`~core.errors.DivergenceError` naming the frame and a remedy, and the
simulator is left at the last good frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from ..errors import BakeCancelled, DivergenceError, SinewError, StabilityError
from . import forces as F
from .base import Integrator, checked_pins
from .colliders import StepColliders, TriangleMesh, resolve_again
from .contact import ContactStats, Support
from .model import Model, State
from .selfcollision import SelfCollision
from .strainlimit import TOLERANCE as STRAIN_TOLERANCE
from .strainlimit import LinearRows, limit_strain

__all__ = ["FrameDiagnostics", "Simulator", "simulate", "unconverged_summary", "MAX_AUTO_SUBSTEPS",
           "MAX_SPLITS"]

#: Self-collision's pair constraints enter the strain limit after it this much (a fraction
#: of ``self_distance``) below their targets: its own projection stops within that.
_SC_SLACK = 0.02
#: Rounds of strain limit and self-collision after self-collision (:meth:`Simulator._spread`).
_SPREAD_ROUNDS = 3
#: The compliance of :meth:`Simulator._spread`'s projection (:func:`~.strainlimit.limit_strain`):
#: Levenberg–Marquardt damping of its redundant pair rows. On the fold of the contact bench
#: (core replays, the start as captured and perturbed by 10⁻⁹ m: 11 runs) 0 left 356 of
#: 2174 projections without a step and split 450 steps, 10⁻³ 47 of 1605 and 160 (CPU −13 %,
#: max strain 0.09–0.61 → 0.11–0.15, no crossings either way); 10⁻² split more.
_SPREAD_COMPLIANCE = 1e-3
#: Relative excess over the strain limit that starts such a round.
_STRETCH_TOLERANCE = 1e-2
#: Rounds of colliders-then-self-collision after self-collision's first pass
#: (:meth:`Simulator._self_collide`).
_AGAIN_ROUNDS = 3

#: How often a step that went wrong is halved (:meth:`Simulator._span`): at most
#: ``2**MAX_SPLITS`` steps in place of one.
MAX_SPLITS = 4
#: A strain-limited cloth stretched past this multiple of the strain its limit accepts
#: (``max_stretch`` and the projection's tolerance, :data:`.strainlimit.TOLERANCE`) after a
#: step takes it again in halves. (Multiplying ``max_stretch`` alone split steps the strain
#: limit had accepted when ``max_stretch`` is below its tolerance: spring bones' rigid bones,
#: 1e-4 against 5e-4, split 9 % of their antennae's steps for nothing.)
_SPLIT_STRAIN = 5.0

#: Most substeps per frame an explicit integrator is given automatically for stability.
MAX_AUTO_SUBSTEPS = 1000


@dataclass(frozen=True)
class FrameDiagnostics:
    """Per-frame numbers for the UI and the benchmark.

    Attributes
    ----------
    frame : int
        Frame number (caller's numbering).
    iterations : int
        Solver iterations, summed over substeps.
    residual : float
        ``‖∇g‖`` (N) after the last substep, ``nan`` where not defined.
    kinetic_energy : float
        J.
    potential_energy : float
        Spring plus gravitational energy, J.
    max_strain : float
        Largest stretch of the mesh's edges, ``max(ℓ/L − 1, 0)`` (dimensionless; see
        :func:`.forces.edge_strain`).
    contacts : int
        Collider contacts over the frame's substeps (cloth vertices in contact, summed).
    max_penetration : float
        m, the deepest a vertex ends inside a collider after a substep's contact stage,
        over the frame (0 is the goal); VBD, whose guard keeps it at 0 in every step,
        checks it at the end of the frame.
    self_contacts : int
        Self-collision: contact or colliding pairs, summed over substeps (0 when off).
    self_crossings : int
        Self-collision: crossing triangle pairs at the end of the frame (0 is the goal;
        0 when off, and when the positions are not finite).
    converged : bool
        Every substep's solve met its tolerance and its strain limit
        (:attr:`.base.StepInfo.converged`).
    max_residual : float
        Largest ``‖∇g‖`` (N) over the substeps, ``nan`` where not defined.
    max_relative_residual : float
        Largest residual over the force scale it is judged against, over the substeps
        (:attr:`.base.StepInfo.relative`; what the tolerance is compared with), ``nan``
        where not defined.
    strain_held : bool
        Every substep reached its strain limit (a frame can fail to converge by its
        residual, by its strain limit or by both).
    substeps : int
        Substeps taken (more than asked when an explicit integrator needs them to be
        stable: :attr:`Simulator.substeps`).
    """

    frame: int
    iterations: int
    residual: float
    kinetic_energy: float
    potential_energy: float
    max_strain: float
    contacts: int = 0
    max_penetration: float = 0.0
    self_contacts: int = 0
    self_crossings: int = 0
    converged: bool = True
    max_residual: float = float("nan")
    substeps: int = 1
    max_relative_residual: float = float("nan")
    strain_held: bool = True


@dataclass
class _Tally:
    """What the steps of one frame did (see :class:`FrameDiagnostics`)."""

    iterations: int = 0
    residual: float = float("nan")
    max_residual: float = float("nan")
    max_relative: float = float("nan")
    converged: bool = True
    strain_held: bool = True
    ext_work: float = 0.0
    self_contacts: int = 0
    steps: int = 0
    stats: ContactStats = field(default_factory=ContactStats)

    def add(self, info: Any, stats: ContactStats, self_contacts: int) -> None:
        """Count one accepted step: its :class:`~.base.StepInfo`, contact statistics and
        self-contacts."""
        self.iterations += info.iterations
        self.residual = info.residual
        self.converged = self.converged and info.converged
        self.strain_held = self.strain_held and info.strain_held
        if not np.isnan(info.relative):
            self.max_relative = (info.relative if np.isnan(self.max_relative)
                                 else max(self.max_relative, info.relative))
        if not np.isnan(info.residual):
            self.max_residual = (info.residual if np.isnan(self.max_residual)
                                 else max(self.max_residual, info.residual))
        self.stats.add(stats.contacts, stats.max_penetration, stats.deepest_caught)
        self.self_contacts += self_contacts
        self.steps += 1


@dataclass
class _Carried:
    """What the contact stages carry from one step to the next, owned by the simulator."""

    support: Support | None = None  # the colliders' push, applied in the next solve
    held: np.ndarray | None = None  # (n,) bool: vertices resting on a collider in the last step

    def save(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Copies of what a step changes, for :meth:`restore`."""
        return (None if self.support is None else self.support.force.copy(),
                None if self.held is None else self.held.copy())

    def restore(self, saved: tuple[np.ndarray | None, np.ndarray | None]) -> None:
        """Back to what :meth:`save` returned (a step taken again in halves)."""
        force, self.held = saved
        if force is not None:
            self.support.force[...] = force


@dataclass
class _SelfStep:
    """Self-collision over one step: its start, its candidate pairs
    (:class:`~.selfcollision.StepPairs`, shared by the step's passes), the vertices a collider
    holds (``(n,)`` bool, or ``None``) and how many vertices its failsafe handled."""

    x_start: np.ndarray
    pairs: Any
    anchored: np.ndarray | None
    trouble: int = 0


def _make_integrator(integrator: Union[str, Integrator]) -> Integrator:
    if isinstance(integrator, Integrator):
        return integrator
    from . import INTEGRATORS  # late import: the table lives in the package root

    try:
        return INTEGRATORS[str(integrator)]()
    except KeyError:
        raise SinewError(
            f"unknown solver {integrator!r}; expected one of {', '.join(INTEGRATORS)}") from None


def _collider_travel(colliders: Sequence[Any] | None) -> float:
    """The farthest a vertex of a moving collider goes over the frame, m (0 for none)."""
    out = 0.0
    for c in colliders or ():
        if isinstance(c, TriangleMesh) and c.previous is not None:
            d = c.vertices - c.previous
            out = max(out, float(np.sqrt(np.max(np.einsum("ij,ij->i", d, d), initial=0.0))))
    return out


class Simulator:
    """Advance a :class:`~.model.Model` frame by frame.

    Parameters
    ----------
    model : Model
    integrator : str or Integrator
        A key of ``INTEGRATORS`` (``'EXPLICIT'``, ``'SYMPLECTIC'``,
        ``'IMPLICIT'``, ``'NEWTON'``, ``'FAST'``) or an integrator instance.
    fps : float
        Frames per second; a frame lasts ``1/fps`` s.
    substeps : int
        Time steps per frame, >= 1. EXPLICIT and SYMPLECTIC take more when their
        stability bound (:meth:`.base.Integrator.stable_step`) asks for it, up to
        :data:`MAX_AUTO_SUBSTEPS`; beyond that :meth:`advance` refuses to step
        (:class:`~core.errors.StabilityError`, a :class:`~core.errors.DivergenceError`
        saying how many substeps are needed) unless ``substeps`` is at least that.
    iterations : int
        Solver iterations per step (NEWTON, FAST), >= 1.
    frame_start : int
        Number of the initial frame.
    state : State, optional
        Initial state (copied); default: rest positions, zero velocity.
    self_collision : SelfCollision, optional
        Resolved after every step (after colliders and pins; see :mod:`.selfcollision`).
    triangles : numpy.ndarray, optional
        Shape ``(f, 3)``, the cloth's triangles: collider corners are then kept out of the
        cloth's faces too (:mod:`.contact`, step 4). Default: the self-collision's, if any.
    tolerance : float, optional
        The relative residual at which the implicit integrators stop (``step(...,
        tolerance=...)``, :meth:`.base.Integrator.step`); ``None``: each one's own.
    energy_check : bool
        After each frame, measure the energies and strain and check for runaway energy (the
        module docstring); ``False`` leaves that to the caller (positions and velocities are
        still checked after every step) and :class:`FrameDiagnostics` reports ``nan`` energies
        and strain: spring bones' later parts of a frame, whose chains the first part's
        simulator checks every frame.

    Attributes
    ----------
    state : State
        The current state (owned by the simulator).
    frame : int
        The frame ``state`` belongs to.
    substeps : int
        Substeps per frame actually taken; ``requested_substeps`` the ones asked for.
    """

    def __init__(self, model: Model, integrator: Union[str, Integrator], *, fps: float,
                 substeps: int = 1, iterations: int = 10, frame_start: int = 0,
                 state: State | None = None, self_collision: SelfCollision | None = None,
                 triangles: np.ndarray | None = None, tolerance: float | None = None,
                 energy_check: bool = True) -> None:
        if not (np.isfinite(fps) and fps > 0):
            raise SinewError("fps must be > 0")
        if int(substeps) < 1 or int(iterations) < 1:
            raise SinewError("substeps and iterations must be >= 1")
        if tolerance is not None and not (np.isfinite(tolerance) and 0.0 < tolerance < 1.0):
            raise SinewError("tolerance must be a fraction between 0 and 1")
        self.tolerance = None if tolerance is None else float(tolerance)
        self.energy_check = bool(energy_check)
        self.model = model
        self.integrator = _make_integrator(integrator)
        if len(model.spring_stretch) and getattr(self.integrator, "contact_inside", False):
            raise SinewError(f"{self.integrator.name} takes one strain limit for all springs (max_stretch); "
                             f"this model has one per spring (spring_stretch)")
        self.fps = float(fps)
        self.substeps = int(substeps)
        self.iterations = int(iterations)
        self.frame = int(frame_start)
        self.h = 1.0 / (self.fps * self.substeps)
        self.requested_substeps = self.substeps
        self._stabilise()
        self.self_collision = self_collision
        if triangles is None and self_collision is not None:
            triangles = self_collision.triangles
        self.triangles = None if triangles is None else np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        self._targets = model.rest_positions[model.target_index].copy()
        if state is None:
            self.state = model.initial_state()
        else:
            x = np.array(state.x, dtype=np.float64)
            v = np.array(state.v, dtype=np.float64)
            if x.shape != model.rest_positions.shape or v.shape != x.shape:
                raise SinewError(f"state must have shape {model.rest_positions.shape}")
            if not (np.all(np.isfinite(x)) and np.all(np.isfinite(v))):
                raise SinewError("initial state contains NaN or infinite values")
            self.state = State(x, v)
        self._targets = self.state.x[model.target_index].copy()
        m_tot = model.total_mass
        g = float(np.linalg.norm(model.gravity))
        x0 = self.state.x
        extent = float(np.linalg.norm(np.ptp(x0, axis=0))) if len(x0) else 0.0
        self._carried = _Carried()  # what the contact stages carry from one step to the next
        self._energy0 = self.mechanical_energy()
        self._scale = (F.kinetic_energy(model, self.state.v) + F.spring_energy(model, x0)
                       + m_tot * g * (extent + 1.0)
                       + 0.5 * m_tot * float(np.dot(model.wind, model.wind)) + 1e-12)

    def _stabilise(self) -> None:
        """Raise :attr:`substeps` to the integrator's stability bound, or note why the
        simulation cannot run (raised by the first :meth:`advance`, see the class
        docstring)."""
        self._refusal: tuple[str, str] | None = None
        h_max = self.integrator.stable_step(self.model)
        if self.h <= h_max:
            return
        name = self.integrator.name
        if h_max <= 0.0:
            self._refusal = (
                f"{name} is unstable at any step on this cloth: nothing damps some of its "
                "vibrations, and forward Euler adds energy to them every step",
                "give the cloth air drag, or use SYMPLECTIC, IMPLICIT, NEWTON or FAST")
            return
        need = int(np.ceil(1.0 / (self.fps * h_max) * (1.0 - 1e-12)))
        if need > max(MAX_AUTO_SUBSTEPS, self.requested_substeps):
            self._refusal = (
                f"{name} needs {need} substeps per frame to stay stable on this cloth "
                f"(steps of at most {h_max:.3g} s for its stiffest springs on its lightest "
                f"vertices; at most {MAX_AUTO_SUBSTEPS} are taken automatically)",
                f"use FAST, NEWTON or IMPLICIT (or {need} substeps)")
            return
        self.substeps = need
        self.h = 1.0 / (self.fps * need)

    def mechanical_energy(self) -> float:
        """Kinetic + spring + gravitational energy of :attr:`state`, J."""
        return (F.kinetic_energy(self.model, self.state.v)
                + F.potential_energy(self.model, self.state.x))

    def set_pins(self, pins: np.ndarray) -> None:
        """Move the pinned vertices (``model.target_index``: hard and soft pins) to
        ``pins`` ``(t, 3)`` now (no velocity change); soft pins' targets start there."""
        t = self._check_pins(pins)
        self.state.x[self.model.target_index] = t
        self._targets = t.copy()

    def _check_pins(self, pins: np.ndarray | None) -> np.ndarray:
        """The pins' targets for the end of a frame, checked (the current ones if ``None``)."""
        return self._targets.copy() if pins is None else checked_pins(self.model, pins, copy=True)

    def pre_roll(self, frames: int, colliders: Sequence[Any] = (), external: Any = None) -> None:
        """Simulate ``frames`` frames with the pins and ``colliders`` held still, so a
        bake starts settled; :attr:`frame` does not change (the frames are not part of
        the range). ``external`` (as for :meth:`advance`, e.g. the force fields of the
        first frame) acts throughout.

        Raises
        ------
        SinewError
            ``frames`` < 0.
        DivergenceError
            As :meth:`advance` (the frame named is counted back from the start).
        """
        frames = int(frames)
        if frames < 0:
            raise SinewError("pre_roll must be >= 0")
        start = self.frame
        self.frame = start - frames
        try:
            for _ in range(frames):
                self.advance(None, colliders, external=external)
        finally:
            self.frame = start

    def _remedy(self) -> str:
        if self.integrator.implicit:
            return "Lower the stiffness, add substeps or slow the pinned vertices down"
        return "Use more substeps or the NEWTON or FAST solver"

    def _external(self, external: Any, state: State, t: float, frame: int,
                  h: float) -> np.ndarray | None:
        """The external force ``(n, 3)`` for the step of ``h`` s around frame fraction
        ``t``, or None."""
        if external is None:
            return None
        f = external(state.x, state.v, t, h) if callable(external) else external
        if f is None:
            return None
        f = np.asarray(f, dtype=np.float64)
        if f.shape != state.x.shape:
            raise SinewError(f"external forces must have shape {state.x.shape}, got {f.shape}")
        if not np.all(np.isfinite(f)):
            raise DivergenceError(frame, "the external forces (force fields) became NaN or infinite",
                                  self._remedy())
        return f

    def advance(self, pins_next: np.ndarray | None = None,
                colliders: Sequence[Any] = (), *,
                external: np.ndarray | Callable[..., np.ndarray | None] | None = None,
                pins_from: np.ndarray | None = None) -> FrameDiagnostics:
        """Advance one frame.

        Parameters
        ----------
        pins_next : numpy.ndarray, optional
            Shape ``(t, 3)``: targets of the pinned vertices (``model.target_index``,
            hard and soft pins, ascending vertex order) at the end of the frame;
            substeps interpolate linearly from the current ones. ``None`` keeps
            the pins still.
        colliders : sequence
            Colliders for this frame (world space). A :class:`~.colliders.TriangleMesh`
            with ``previous`` vertices moves linearly from them over the frame: each
            substep sees its own part of that motion.
        external : numpy.ndarray or callable, optional
            External forces (N) on the vertices: an ``(n, 3)`` array held for the
            whole frame, or ``external(x, v, t, h) -> (n, 3) or None`` called at
            the start of every substep with the current positions and velocities
            ``(n, 3)``, the substep's midpoint ``t`` as a fraction of the frame
            and the step ``h`` (s) (e.g. :meth:`.fields.FieldForces.for_frame`).
            The integrators hold them constant over the substep.
        pins_from : numpy.ndarray, optional
            Shape ``(t, 3)``: the pins' targets at the start of the frame, where they are not
            the last frame's ``pins_next`` (spring bones' parts of a frame, whose chains each
            start a call at their own fraction of the frame); ``None``: the last ones.

        Returns
        -------
        FrameDiagnostics

        Raises
        ------
        DivergenceError
            Non-finite values or runaway energy; the simulator stays at the
            previous frame.
        """
        model = self.model
        frame = self.frame + 1
        if self._refusal is not None:
            raise StabilityError(frame, *self._refusal)
        prev = self._targets if pins_from is None else checked_pins(model, pins_from, copy=False)
        nxt = self._check_pins(pins_next)
        work = self.state.copy()
        if colliders and self._carried.support is None:
            self._carried.support = Support.zeros(model.masses)
        acc = _Tally()
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(self.substeps):
                self._span(work, k / self.substeps, (k + 1) / self.substeps, prev, nxt, colliders,
                           external, frame, acc, 0)
            ke = pe = strain = float("nan")
            if self.energy_check:
                ke = F.kinetic_energy(model, work.v)
                e_spring, strain = F.spring_energy_and_strain(model, work.x)
                pe = e_spring + F.gravity_energy(model, work.x)
            sc, crossings = self.self_collision, 0
            if sc is not None and np.all(np.isfinite(work.x)):
                crossings = sc.count_crossings(work.x)
        stats = acc.stats
        # what the pins and moving colliders can give the cloth this frame (a tail without
        # gravity, hit by a moving body, gains the body's speed)
        travel = max(float(np.max(np.linalg.norm(nxt - prev, axis=1))) if len(prev) else 0.0,
                     _collider_travel(colliders)) if self.energy_check else 0.0
        if np.isfinite(acc.ext_work):
            self._scale += acc.ext_work
        if travel > 0.0:
            self._scale += model.total_mass * ((travel * self.fps) ** 2
                                               + float(np.linalg.norm(model.gravity)) * travel)
        if self.energy_check and (not np.isfinite(ke + pe) or (ke + pe) - self._energy0 > 100.0 * self._scale):
            raise DivergenceError(
                frame, f"the energy ran away (kinetic energy {ke:.3g} J)", self._remedy())
        self.state = work
        self.frame = frame
        self._targets = nxt
        return FrameDiagnostics(frame, acc.iterations, acc.residual, ke, pe, strain,
                                contacts=stats.contacts, max_penetration=stats.max_penetration,
                                self_contacts=acc.self_contacts, self_crossings=crossings,
                                converged=acc.converged, max_residual=acc.max_residual,
                                substeps=acc.steps, max_relative_residual=acc.max_relative,
                                strain_held=acc.strain_held)

    def _span(self, work: State, a0: float, a1: float, prev: np.ndarray, nxt: np.ndarray,
              colliders: Sequence[Any], external: Any, frame: int, acc: _Tally,
              depth: int) -> None:
        """One step over the part ``[a0, a1]`` of the frame (fractions), in place on
        ``work``; a step that went wrong is taken again as two halves (up to
        :data:`MAX_SPLITS` times over).

        Wrong: positions or velocities not finite, a strain-limited cloth stretched far
        past its limit (:data:`_SPLIT_STRAIN`), or self-collision's failsafe sending
        vertices back to the start of the step (its impact zones moved rigidly do not
        count: they leave the springs as they were at the start). All three come from a
        step too long for what happened in it; half the step leaves the post-solve stages
        half as much to undo.
        """
        h = (a1 - a0) / self.fps
        split = depth < MAX_SPLITS
        start, carried = (work.copy(), self._carried.save()) if split else (None, None)
        step = StepColliders([c.window(a0, a1) if isinstance(c, TriangleMesh) else c for c in colliders],
                             ContactStats(), self._carried.support if colliders else None, self.triangles,
                             ends_frame=a1 >= 1.0)
        ext = self._external(external, work, 0.5 * (a0 + a1), frame, h)
        x_start = work.x.copy()
        self._push(work, step, ext, h)
        info = self._solve(work, step, prev + (nxt - prev) * a1, ext, h)
        self_contacts, trouble = self._self_collide(step, x_start, work, h, split)
        finite = bool(np.isfinite(work.x).all() and np.isfinite(work.v).all())
        # a step whose strain limit held with nothing after it is within what the limit
        # accepts, not stretched past the split's bound: VBD's own limit comes last in its
        # step (contact and self-contact are inside it); the shared post-solve limit of the
        # others only without colliders and self-collision, whose stages follow it
        inside = self.integrator.contact_inside_for(self.model)
        within = info.strain_held and (inside or (not colliders and self.self_collision is None))
        if split and (not finite or (not within and self._went_wrong(work, trouble))):
            work.x[...], work.v[...] = start.x, start.v
            self._carried.restore(carried)
            mid = 0.5 * (a0 + a1)
            self._span(work, a0, mid, prev, nxt, colliders, external, frame, acc, depth + 1)
            self._span(work, mid, a1, prev, nxt, colliders, external, frame, acc, depth + 1)
            return
        if not finite:
            raise DivergenceError(frame, "positions or velocities became NaN or infinite",
                                  self._remedy())
        if ext is not None and self.energy_check:  # the energy check's bound on their work
            acc.ext_work += F.dot(F.row_norms(ext), F.row_norms(work.x - x_start))
        acc.add(info, step.stats, self_contacts)

    def _push(self, work: State, step: StepColliders, ext: np.ndarray | None, h: float) -> None:
        """The colliders' push from the last step acts in this solve (:meth:`.contact.Support.kick`),
        for the integrators whose contact is a post-solve stage."""
        if not len(step) or self.integrator.contact_inside_for(self.model):
            return
        model = self.model
        load = model.masses[:, None] * model.gravity - F.spring_gradient(model, work.x)
        if ext is not None:
            load += ext
        weight = model.masses * float(np.linalg.norm(model.gravity))
        step.support.kick(work.v, h, ~np.asarray(model.pinned, dtype=bool), load, weight)

    def _solve(self, work: State, step: StepColliders, target: np.ndarray,
               ext: np.ndarray | None, h: float) -> Any:
        """The integrator's step (its solve and, but for VBD, the post-solve contact stages);
        returns its :class:`~.base.StepInfo`."""
        kw: dict[str, Any] = {} if ext is None else {"external": ext}
        if self.tolerance is not None:
            kw["tolerance"] = self.tolerance
        if self.self_collision is not None and self.integrator.contact_inside_for(self.model):
            kw["self_collision"] = self.self_collision
        return self.integrator.step(self.model, work, h, pins=target, iterations=self.iterations,
                                    colliders=step, **kw)

    def _went_wrong(self, work: State, trouble: int) -> bool:
        """Whether the step that ended at ``work`` is taken again in halves (finite
        positions; :meth:`_span`): self-collision's failsafe sent vertices back (``trouble``
        of them), or the strain-limited cloth is stretched past :data:`_SPLIT_STRAIN` times
        its limit."""
        model = self.model
        if trouble:
            return True
        if model.max_stretch <= 0:
            return False
        if not len(model.spring_stretch):
            accepted = (1.0 + model.max_stretch) * (1.0 + STRAIN_TOLERANCE) - 1.0
            return bool(F.max_strain(model, work.x) > _SPLIT_STRAIN * accepted)
        e = model.structural_count  # each spring against its own limit
        sp, rest = model.springs[:e], model.rest_lengths[:e]
        accepted = (1.0 + model.stretch_limits) * (1.0 + STRAIN_TOLERANCE) - 1.0
        length = np.linalg.norm(work.x[sp[:, 0]] - work.x[sp[:, 1]], axis=1)
        return bool(np.any(length - rest > _SPLIT_STRAIN * accepted * rest))

    def _sc_resolve(self, sc: SelfCollision, ss: _SelfStep, work: State, pinned: np.ndarray) -> Any:
        """``sc.resolve`` on ``work`` with the step's candidate pairs, counting what its
        failsafe had to do in ``ss``."""
        report = sc.resolve(ss.x_start, work.x, work.v, self.model.masses, pinned, ss.pairs,
                            ss.anchored, hard=np.asarray(self.model.pinned, dtype=bool))
        ss.trouble += report.reverted + report.unresolved
        return report

    def _spread(self, sc: SelfCollision, step: StepColliders, ss: _SelfStep, work: State,
                pinned: np.ndarray, report: Any, h: float) -> int:
        """Pass self-collision's push on to the cloth around it; returns the self-contacts
        of the extra passes.

        Self-collision moves the vertices of the pairs it separates and nothing else: its
        push stretches the springs around them (its failsafe's zones more so), and left for
        the next solve that energy pulls the layers back together. So, a few rounds while
        the strain limit is exceeded: the strain limit together with the pairs' constraints
        and the held vertices on their colliders (:class:`~.strainlimit.LinearRows`, damped
        by :data:`_SPREAD_COMPLIANCE`: the pairs' rows are redundant), the vertices of the
        failsafe's zones fixed where they are, then self-collision once more on the result
        (it has the last word: no crossings).
        """
        model = self.model
        e = model.structural_count
        sp, bound = model.springs[:e], (1.0 + model.stretch_limits) * model.rest_lengths[:e]
        contacts = 0
        stopped = np.zeros(len(work.x), bool)
        found = step.found
        for _ in range(_SPREAD_ROUNDS):
            if not np.all(np.isfinite(work.x)):
                break
            if report.reverted_vertices is not None:
                stopped |= report.reverted_vertices
            length = np.linalg.norm(work.x[sp[:, 0]] - work.x[sp[:, 1]], axis=1)
            if not np.any(length > bound * (1.0 + _STRETCH_TOLERANCE)):
                break
            rows = None
            if report.constraints is not None:
                idx, alpha, normal, target = report.constraints
                d = sc.distance
                rows = LinearRows(idx, alpha, normal, target - _SC_SLACK * d, np.full(len(idx), d))
            if found is not None:
                held = np.flatnonzero(found.mask & ~pinned & ~stopped)
                rows = LinearRows.join(rows, LinearRows.points(
                    held, found.normals[held], work.x[held], float(np.median(model.rest_lengths))))
            before = work.x.copy()
            limit_strain(model, work.x, work.v, h, fixed=pinned | stopped, rows=rows,
                         compliance=_SPREAD_COMPLIANCE, memory=self.integrator.strain_memory)
            if np.array_equal(work.x, before):
                break
            report = self._sc_resolve(sc, ss, work, pinned | stopped)
            contacts += report.contacts
        return contacts

    def _inside_contacts(self) -> int:
        """The self-contact pairs in force at the end of the last step of an integrator with
        self-contact inside its solve (its own count; 0 when it keeps none)."""
        solver = self.integrator
        if not hasattr(solver, "self_contacts"):  # the contact solver that finished its step
            solver = solver.contact_solver
        return int(solver.self_contacts)

    def _self_collide(self, step: StepColliders, x_start: np.ndarray, work: State, h: float,
                      split: bool = False) -> tuple[int, int]:
        """Self-collision after the collider stage, without undoing it; returns the
        self-contacts and how many vertices its failsafe handled (0 without self-collision).

        Vertices resting on a collider (held by one in this step, and in the one before
        without self-collision moving them off it) count as immovable in the response, so a
        layer pressed onto a body is pushed away from it, never into it; a vertex that only
        reached a collider in this step stays movable. Every vertex self-collision moved then
        sees the colliders once more (:func:`~.colliders.resolve_again`, continuous from the
        start of the step); where that put some back, self-collision runs once more with them
        immovable too, and the colliders see what that pass moved, up to
        :data:`_AGAIN_ROUNDS` times.

        With ``split`` (a step that went wrong is taken again in halves: :meth:`_span`), it
        stops as soon as that is known: after the first pass if the failsafe sent vertices
        back, after the strain limit's rounds if the cloth is stretched past the split's
        bound.
        """
        sc = self.self_collision
        if sc is None or not np.all(np.isfinite(work.x)):
            return 0, 0
        if self.integrator.contact_inside_for(self.model):
            return self._inside_contacts(), 0
        model = self.model
        found = step.found
        pinned = np.asarray(model.pinned, dtype=bool)
        # the failsafe does not move the vertices a collider holds rigidly
        ss = _SelfStep(x_start, sc.pairs(x_start), None if found is None else found.mask)
        last_held = self._carried.held
        if found is not None and last_held is not None:
            pinned = pinned | (found.mask & last_held)
        before = work.x.copy()
        report = self._sc_resolve(sc, ss, work, pinned)
        contacts = report.contacts
        if split and ss.trouble:
            return contacts, ss.trouble  # taken again in halves
        if model.max_stretch > 0:
            contacts += self._spread(sc, step, ss, work, pinned, report, h)
        if split and (not np.all(np.isfinite(work.x)) or self._went_wrong(work, ss.trouble)):
            return contacts, ss.trouble  # taken again in halves
        back = np.zeros(len(work.x), bool)
        last = before
        for _ in range(_AGAIN_ROUNDS):
            moved = np.any(work.x != last, axis=1)
            if not (len(step) and np.any(moved) and np.all(np.isfinite(work.x))):
                break
            put = resolve_again(step, work.x, work.v, x_start, h, model, moved)
            if not np.any(put):
                break
            # what it put back is immovable now: self-collision once more (which may push
            # another vertex in: the colliders see what that pass moved, and so on; the
            # immovable set only grows)
            back |= put
            last = work.x.copy()
            contacts += self._sc_resolve(sc, ss, work, pinned | back).contacts
        moved = np.any(work.x != before, axis=1)
        # resting on a collider: held by it, and not moved off it by another layer
        self._carried.held = None if found is None else found.mask & (~moved | back)
        return contacts, ss.trouble


def simulate(model: Model, integrator: Union[str, Integrator], frames: int, *, fps: float,
             substeps: int = 1, iterations: int = 10,
             pin_trajectory: np.ndarray | None = None,
             colliders_per_frame: Sequence[Sequence[Any]] | None = None,
             external_per_frame: Sequence[Any] | None = None,
             progress: Callable[[int, int], bool | None] | None = None,
             self_collision: SelfCollision | None = None,
             pre_roll: int = 0,
             ) -> tuple[np.ndarray, list[FrameDiagnostics]]:
    """Simulate ``frames`` frames from the model's rest pose.

    Parameters
    ----------
    model : Model
    integrator : str or Integrator
        Key of ``INTEGRATORS`` or an instance.
    frames : int
        Number of frames ``F`` returned, including the initial frame 0.
    fps : float
        Frames per second.
    substeps, iterations : int
        As for :class:`Simulator`.
    pin_trajectory : numpy.ndarray, optional
        Shape ``(F, t, 3)``, targets of the pinned vertices (``model.target_index``:
        hard and soft pins) per frame (frame 0 sets the initial pin positions).
    colliders_per_frame : sequence, optional
        Length ``F``; entry ``f`` is the colliders for the step into frame ``f``.
    external_per_frame : sequence, optional
        Length ``F``; entry ``f`` is the ``external`` argument of
        :meth:`Simulator.advance` for the step into frame ``f`` (an ``(n, 3)``
        array, a callable or ``None``).
    progress : callable, optional
        ``progress(done, total)`` after each frame; returning ``False``
        raises :class:`~core.errors.BakeCancelled`.
    self_collision : SelfCollision, optional
        As for :class:`Simulator`.
    pre_roll : int
        Frames simulated before frame 0 with the pins at ``pin_trajectory[0]``
        and the colliders and ``external_per_frame[0]`` of frame 0 held still
        (:meth:`Simulator.pre_roll`); they are not returned, ``positions[0]`` is
        the state after them.

    Returns
    -------
    positions : numpy.ndarray
        Shape ``(F, n, 3)``, m; ``positions[0]`` is the initial state.
    diagnostics : list of FrameDiagnostics
        Length ``F`` (frame 0 has 0 iterations).
    """
    frames = int(frames)
    if frames < 1:
        raise SinewError("frames must be >= 1")
    p = len(model.target_index)
    traj = None
    if pin_trajectory is not None:
        traj = np.asarray(pin_trajectory, dtype=np.float64)
        if traj.shape != (frames, p, 3):
            raise SinewError(f"pin_trajectory must have shape ({frames}, {p}, 3), got {traj.shape}")
    if colliders_per_frame is not None and len(colliders_per_frame) != frames:
        raise SinewError(f"colliders_per_frame must have {frames} entries")
    if external_per_frame is not None and len(external_per_frame) != frames:
        raise SinewError(f"external_per_frame must have {frames} entries")
    sim = Simulator(model, integrator, fps=fps, substeps=substeps, iterations=iterations,
                    self_collision=self_collision)
    if traj is not None:
        sim.set_pins(traj[0])
    sim.pre_roll(pre_roll, colliders_per_frame[0] if colliders_per_frame is not None else (),
                 external_per_frame[0] if external_per_frame is not None else None)
    out = np.empty((frames,) + model.rest_positions.shape)
    out[0] = sim.state.x
    diags = [FrameDiagnostics(sim.frame, 0, float("nan"), F.kinetic_energy(model, sim.state.v),
                              F.potential_energy(model, sim.state.x),
                              F.max_strain(model, sim.state.x), 0,
                              0 if self_collision is None
                              else self_collision.count_crossings(sim.state.x))]
    for f in range(1, frames):
        cols = colliders_per_frame[f] if colliders_per_frame is not None else ()
        ext = external_per_frame[f] if external_per_frame is not None else None
        diags.append(sim.advance(None if traj is None else traj[f], cols, external=ext))
        out[f] = sim.state.x
        if progress is not None and progress(f, frames - 1) is False:
            raise BakeCancelled("bake cancelled")
    return out, diags


def _frame_ranges(frames: Sequence[int], most: int = 6) -> str:
    """``3–8, 40, 97–101``: consecutive frames joined, at most ``most`` runs (then "…")."""
    runs: list[list[int]] = []
    for f in sorted(frames):
        if runs and f == runs[-1][1] + 1:
            runs[-1][1] = f
        else:
            runs.append([f, f])
    text = ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs[:most])
    return text + (", …" if len(runs) > most else "")


def unconverged_summary(diagnostics: Sequence[FrameDiagnostics], tolerance: float,
                        iterations: int) -> str:
    """Which frames did not converge and why, in a sentence for a bake's report ("" when
    every frame converged): the frames whose solve stopped at its ``iterations`` with the
    relative residual above ``tolerance`` (and how far above), and the frames whose strain
    limit was not reached."""
    bad = [d for d in diagnostics if not d.converged]
    if not bad:
        return ""
    parts = []
    solve = [d for d in bad if not (d.max_relative_residual <= tolerance)]
    if solve:
        rel = np.array([d.max_relative_residual for d in solve])
        known = rel[np.isfinite(rel)]
        at = (f" with the residual at {100 * known.min():.2g}–{100 * known.max():.2g} % of its "
              f"force scale (tolerance {100 * tolerance:.2g} %)") if len(known) else ""
        parts.append(f"frames {_frame_ranges([d.frame for d in solve])}: the solve stopped at "
                     f"{iterations} iterations{at}; more iterations or substeps lower it")
    strain = [d for d in bad if not d.strain_held]
    if strain:
        parts.append(f"frames {_frame_ranges([d.frame for d in strain])}: the strain limit was "
                     f"not reached")
    return f"{len(bad)} of {len(diagnostics)} frames not converged ({'; '.join(parts)})"
