"""Shared pieces of the integrators: :class:`StepInfo`, the :class:`Integrator`
base class, pin handling and the backward-Euler objective.

Implicit Euler as optimisation (Liu et al. 2013 "Fast Simulation of
Mass-Spring Systems"; seed 004). With ``x₀, v₀`` the state at the start of a
step of length ``h``, ``Δx = x − x₀`` and ``v = Δx/h``, the new positions
minimise

``g(x) = ½ Σᵢ Wᵢ ‖xᵢ − ŷᵢ‖² + E(x) + (1/2h) Σ_s k_d (û⁰_s·(Δxᵢ − Δxⱼ))²``

where ``Wᵢ = mᵢ (1/h² + c/h)`` and
``ŷ = (x₀/h² + v₀/h + g + c (x₀/h + wind) + f_ext/m) / (1/h² + c/h)``
gather inertia, gravity, external forces ``f_ext`` held over the step (force
fields) and air drag ``−c m (v − wind)`` (treated implicitly), and the last term is spring damping ``−k_d ((vᵢ − vⱼ)·û) û``
with directions ``û⁰`` frozen at the start of the step, so that

``∇g = W (x − ŷ) + ∇E(x) + (1/h) D (x − x₀)``

is exactly ``M (v − v₀)/h − f(x, v)``: the backward-Euler equations with all
forces evaluated at the end of the step. NEWTON and FAST minimise the same
``g`` and reach the same minimiser.

Pins are eliminated from the unknowns: pinned vertices sit at their targets
for the end of the step and only the free vertices are solved for; pinned
velocities are ``(target − x₀)/h``.

Soft pins (``Model.anchors``) are zero-rest-length springs
``½ kₐ ‖xᵢ − tᵢ‖²`` to the target at the end of the step. Being quadratic
they merge into the inertia term: ``Wᵢ ← Wᵢ + kₐ`` and
``ŷᵢ ← (Wᵢ ŷᵢ + kₐ tᵢ)/(Wᵢ + kₐ)`` (the objective changes by a constant), so
NEWTON and FAST need nothing else; the explicit integrators add the force
``−kₐ (xᵢ − tᵢ)``.

After the solve, :meth:`Integrator._finish` ends the step: for the explicit integrators
with colliders or self-collision, VBD's contact solve with their step as its inertial
target (:meth:`Integrator.contact_inside_for`); otherwise the post-solve stages: strain
limit (:mod:`.strainlimit`) → colliders (:meth:`Integrator._contact`) → exact pins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SinewError
from . import forces as F
from .colliders import HeldVertices, StepColliders, TriangleMesh, resolve, resolve_again
from .contact import carried, step_friction
from .model import Model, State
from .proximity import points_box
from .strainlimit import LinearRows, StrainMemory, limit_strain

__all__ = ["StepInfo", "Integrator", "Objective", "block_apply", "pin_targets", "checked_pins", "split_targets",
           "anchor_forces", "CONVERGENCE_RTOL", "converged", "force_scale"]

#: A step counts as converged when ``‖∇g‖ ≤ CONVERGENCE_RTOL · max(‖∇g(x_start)‖, ‖M g‖)``:
#: the force imbalance left is at most 1 % of the one the step started from (``x_start`` =
#: ``x₀ + h v₀`` with pins at their targets, :meth:`Objective.start`, shared by NEWTON and
#: FAST) or of the weight.
CONVERGENCE_RTOL = 1e-2

#: After the contact stage the structural springs may be this much (relative) shorter
#: than the solver left them (or their rest length, if shorter) before the push that
#: compresses them is passed on to the vertices beyond (:meth:`Integrator._finish`).
_COMPRESSION = 0.01
#: ... and that projection runs when a spring is this much (relative to its rest length)
#: shorter than that: a contact stage that only flattens the cloth a little onto a surface
#: is left alone.
_COMPRESSION_TRIGGER = 0.1
#: Rounds of strain limit and contact after the contact stage (:func:`_after_contact`),
#: until no spring is longer than its limit by more than ``_ROUND_TOLERANCE`` (relative;
#: at 0.02 a 3 % limit let the last round end at up to 5.06 %, and the cotton-over-a-ball
#: test saw 4.9–5.0 % on some frames; 0.01 costs no extra round on the bench's drape).
_ROUNDS = 4
_ROUND_TOLERANCE = 0.01
#: Iterations of VBD's contact solve that finish a step of the explicit integrators with
#: colliders or self-collision (:meth:`Integrator._finish`): its vertices are coupled only
#: by the strain limit and self-contact (the springs are in the explicit step), and a cloth
#: dropped on a ball at SYMPLECTIC's 84 substeps a frame took 109 ms a frame at 4, 126 at 10
#: (the post-solve stage: 662), with the same strain and rest.
CONTACT_ITERATIONS = 4


@dataclass
class StepInfo:
    """What one step did.

    Attributes
    ----------
    iterations : int
        Solver iterations (Newton or local/global; 1 for one-shot methods).
    residual : float
        ``‖∇g‖`` over the free vertices at the result (N), or ``nan`` where
        not defined (explicit methods).
    converged : bool
        The solve met its tolerance (:data:`CONVERGENCE_RTOL` for NEWTON and
        FAST; the linear solve for IMPLICIT; always for the explicit ones) and
        the strain limit, if any, was reached.
    relative : float
        ``residual`` over the force scale it is judged against (:func:`force_scale`):
        what the tolerance is compared with; ``nan`` where not defined.
    strain_held : bool
        The strain limit, if any, was reached (``converged`` is also False when not).
    """

    iterations: int
    residual: float
    converged: bool = True
    relative: float = float("nan")
    strain_held: bool = True


def force_scale(model: Model, start: float = 0.0) -> float:
    """The force scale a residual is judged against, N: ``max(start, ‖M g‖)`` with
    ``start`` = ``‖∇g(x_start)‖`` and ``‖M g‖`` the weight of the free vertices as a force
    vector."""
    # F.norm: numpy.linalg.norm's threaded BLAS dot costs milliseconds on a busy machine
    weight = F.norm(model.masses[model.free_index]) * F.norm(model.gravity)
    return max(float(start), weight, 1e-300)


def converged(residual: float, start: float, model: Model,
              tolerance: float = CONVERGENCE_RTOL) -> bool:
    """Whether ``residual`` (N) meets the relative ``tolerance`` (default
    :data:`CONVERGENCE_RTOL`, see there); ``start`` is ``‖∇g(x_start)‖`` (N)."""
    return bool(residual <= tolerance * force_scale(model, start))


def pin_targets(model: Model, state: State, pins: np.ndarray | None) -> np.ndarray:
    """Targets ``(t, 3)`` of ``model.target_index`` (hard and soft pins) for the end
    of a step (current positions if ``None``)."""
    if pins is None:
        return state.x[model.target_index].copy()
    return checked_pins(model, pins)


def checked_pins(model: Model, pins: np.ndarray, copy: bool = False) -> np.ndarray:
    """``pins`` as float64 targets ``(t, 3)`` of ``model.target_index`` (a copy with ``copy``);
    a wrong shape or a NaN or infinite value raises :class:`~core.errors.SinewError`."""
    p = len(model.target_index)
    t = np.array(pins, dtype=np.float64) if copy else np.asarray(pins, dtype=np.float64)
    if t.shape != (p, 3):
        raise SinewError(f"pins must have shape ({p}, 3), got {t.shape}")
    if not np.all(np.isfinite(t)):
        raise SinewError("pin targets contain NaN or infinite values")
    return t


def split_targets(model: Model, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Targets ``(t, 3)`` → (hard-pin targets ``(p, 3)``, soft-pin targets ``(q, 3)``)."""
    if len(model.anchor_index) == 0:
        return targets, targets[:0]
    return targets[model.target_hard], targets[model.target_anchor]


def anchor_forces(model: Model, x: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Soft-pin forces ``−kₐ (xᵢ − tᵢ)``, shape ``(n, 3)``, N (``targets`` ``(t, 3)``)."""
    f = np.zeros_like(x)
    ai = model.anchor_index
    if len(ai):
        f[ai] = -model.anchor_stiffness[:, None] * (x[ai] - split_targets(model, targets)[1])
    return f


def block_apply(model: Model, blocks: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Product of the assembled spring matrix with ``u``.

    Parameters
    ----------
    blocks : numpy.ndarray
        Shape ``(s, 3, 3)`` per-spring blocks ``Bₛ`` (placed at ``+B`` on
        ``(i,i)``, ``(j,j)`` and ``−B`` on ``(i,j)``, ``(j,i)``).
    u : numpy.ndarray
        Shape ``(n, 3)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, 3)``, ``Aᵀ (B (A u))``.
    """
    du = model.incidence @ u
    return model.incidence_t @ np.einsum("sij,sj->si", blocks, du)


class Integrator:
    """Base class: one time step of a spring :class:`~.model.Model`.

    Subclasses set ``name`` (the key in ``INTEGRATORS``), ``label`` and
    ``description`` (UI tooltip) and implement :meth:`step`.
    """

    name: str = ""
    label: str = ""
    description: str = ""
    implicit: bool = False
    _strain_memory: StrainMemory | None = None
    _contact_solver: Any = None

    def stable_step(self, model: Model) -> float:
        """The largest step (s) this integrator stays stable at on ``model``
        (``inf``: unconditionally stable; the explicit integrators estimate it)."""
        return float("inf")

    def step(
        self,
        model: Model,
        state: State,
        h: float,
        *,
        pins: np.ndarray | None = None,
        iterations: int = 10,
        colliders: Sequence[Any] = (),
        external: np.ndarray | None = None,
        tolerance: float | None = None,
    ) -> StepInfo:
        """Advance ``state`` in place by ``h`` seconds.

        Parameters
        ----------
        model : Model
        state : State
            Updated in place: ``x`` ``(n, 3)`` m, ``v`` ``(n, 3)`` m/s.
        h : float
            Time step, s.
        pins : numpy.ndarray, optional
            Shape ``(p, 3)``: target positions of the pinned vertices (ascending
            vertex order) at the end of the step; ``None`` keeps them in place.
        iterations : int
            Maximum solver iterations (NEWTON, FAST).
        colliders : sequence
            Colliders (see :mod:`.colliders`), resolved after the solve.
        external : numpy.ndarray, optional
            Shape ``(n, 3)``, N: external forces (force fields, :mod:`.fields`)
            held constant over the step: added to ``f`` by the explicit methods and
            to the right-hand side (``ŷ``) by the implicit ones.
        tolerance : float, optional
            The relative residual ``‖∇g‖ ≤ tolerance · max(‖∇g(x_start)‖, ‖M g‖)`` at which
            the iterative solvers stop and count the step as converged (NEWTON, FAST, VBD;
            IMPLICIT's linear solve stops at the tighter of it and its own); ``None``: the
            integrator's own (:data:`CONVERGENCE_RTOL` for FAST and VBD). The explicit
            integrators ignore it.

        Returns
        -------
        StepInfo
        """
        raise NotImplementedError

    @property
    def strain_memory(self) -> StrainMemory:
        """What the strain limit's projections of this integrator's steps carry from one to the
        next (:class:`~.strainlimit.StrainMemory`: the last active set, what they derive from
        the model)."""
        if self._strain_memory is None:
            self._strain_memory = StrainMemory()
        return self._strain_memory

    def contact_inside_for(self, model: Model) -> bool:
        """Whether contact and self-contact are inside the solve of this integrator's steps on
        ``model``. VBD's always. The explicit integrators (EXPLICIT, SYMPLECTIC) hand their
        step to VBD's contact solve, the springs explicit and contact implicit
        (:meth:`_finish`), but on ropes and spring bones' chains (``Model.segment_contact``:
        their edges collide as segments) and on a model with a strain limit per spring
        (``Model.spring_stretch``). The others, and those, run the post-solve stage
        (:meth:`_contact`): their contact-free solve as the start of VBD's contact iterations
        left a resting cloth jittering (docs/CONTACT.md, *The other integrators' contact as
        VBD's iterations from their own solve*)."""
        return not self.implicit and not len(model.spring_stretch) and not model.segment_contact

    @property
    def contact_solver(self) -> Any:
        """The :class:`~.vbd.VertexBlockDescent` whose contact iterations finish this
        integrator's steps with colliders or self-collision (:meth:`_finish`), built on
        first use."""
        if self._contact_solver is None:
            from .vbd import VertexBlockDescent  # late: vbd builds on this module

            self._contact_solver = VertexBlockDescent(global_start=0)
        return self._contact_solver

    def _finish(self, model: Model, state: State, x_new: np.ndarray, v_new: np.ndarray,
                x_old: np.ndarray, h: float, targets: np.ndarray, colliders: Sequence[Any],
                info: StepInfo, *, external: np.ndarray | None = None,
                tolerance: float | None = None, self_collision: Any = None) -> StepInfo:
        """The end of a step after the solve, which writes ``state`` and returns ``info``
        (the solve's) with the strain limit's outcome, ``targets`` ``(t, 3)`` as from
        :func:`pin_targets`.

        With colliders within the step's reach or ``self_collision``, on a model whose
        contact is inside the solve (:meth:`contact_inside_for`: the explicit integrators'),
        the solve's ``x_new``, ``v_new`` are the inertial target of :data:`CONTACT_ITERATIONS`
        iterations of VBD's contact solve (:attr:`contact_solver`, ``step(start=...,
        explicit=True)``: ``½ Σ mᵢ/h² ‖xᵢ − x_newᵢ‖²`` with contact, friction, self-contact
        and the strain limit in one minimisation, every move through its guard; the
        velocities ``v_new`` plus what it moved over ``h``); ``info`` then counts its
        iterations too, and its residual and convergence are the contact solve's. Otherwise
        the post-solve stages: strain limit, colliders (with friction and the push passed on,
        :func:`_after_contact`), exact pins.
        """
        pi = model.pinned_index
        hard = split_targets(model, targets)[0]
        inside = self.contact_inside_for(model)
        if inside and len(colliders) and self_collision is None and not _within_reach(
                colliders, x_old, x_new, targets):
            colliders = ()  # every collider is far beyond the step: the solve's step stands
        if (len(colliders) or self_collision is not None) and inside:
            x_new[pi] = hard
            v_new[pi] = (hard - x_old[pi]) / h
            kw: dict[str, Any] = {} if self_collision is None else {"self_collision": self_collision}
            done = self.contact_solver.step(model, state, h, pins=targets, iterations=CONTACT_ITERATIONS,
                                            colliders=colliders, external=external, tolerance=tolerance,
                                            start=(x_new, v_new), explicit=not self.implicit, **kw)
            return StepInfo(info.iterations + done.iterations, done.residual, info.converged and done.converged,
                            done.relative, done.strain_held)
        limited = True
        if model.max_stretch > 0:
            if len(pi):
                x_new[pi] = hard
            limited = limit_strain(model, x_new, v_new, h, memory=self.strain_memory).converged
        if colliders:
            limited = self._contact(model, x_new, v_new, x_old, h, hard,
                                    StepColliders.of(colliders)) and limited
        if len(pi):
            x_new[pi] = hard
            v_new[pi] = (hard - x_old[pi]) / h
        state.x[...] = x_new
        state.v[...] = v_new
        return StepInfo(info.iterations, info.residual, info.converged and limited, info.relative, limited)

    def _contact(self, model: Model, x: np.ndarray, v: np.ndarray, x_old: np.ndarray, h: float,
                 hard: np.ndarray, step: StepColliders) -> bool:
        """The colliders' stage (:func:`.colliders.resolve`, filling ``step.found``) and, with a
        strain limit, what follows it for the held vertices: Coulomb friction for the solve's
        carried push and the contact stage's (:func:`.contact.step_friction`; the contact
        stage rubs per pass about its own normals), the push passed on to the cloth
        (:func:`_after_contact`, which rubs for its own projections) and their velocities cut
        to what their step shows. Returns whether the strain limit holds."""
        passing_on = model.max_stretch > 0
        if passing_on:  # the structural springs as the solve left them
            sp = model.springs[:model.structural_count]
            d = x[sp[:, 0]] - x[sp[:, 1]]
            solved = np.linalg.norm(d, axis=1)
            directions = d / np.maximum(solved, 1e-300)[:, None]
        support = step.support
        pressed = None if support is None or not passing_on else support.force.copy()  # as applied
        x_solved = x.copy() if passing_on else None
        held = resolve(step, x, v, x_old, h, model)
        found = step.found
        if not (passing_on and np.any(held) and found is not None):
            return True
        on = np.flatnonzero(held)
        nrm = found.normals[on]
        lift = carried(support, on, nrm, h, pressed)
        unrubbed = x[on]
        step_friction(x, x_old, x_solved, on, nrm, found.velocities[on], found.frictions[on], h, lift)
        rubbed = on[np.any(x[on] != unrubbed, axis=1)]  # friction moved these
        limited = _after_contact(model, x, v, x_old, h, step, held, solved, directions, hard, rubbed,
                                 self.strain_memory)
        _cut_held_velocities(v, x, x_old, h, on, found)
        return limited


def _within_reach(colliders: Sequence[Any], x0: np.ndarray, x1: np.ndarray, targets: np.ndarray) -> bool:
    """Whether any of ``colliders`` may touch the cloth within the step: a plane, a moving
    mesh not cut to the step (a :class:`~.colliders.TriangleMesh` with ``previous``), or a
    collider whose box over the step (thickness included, :func:`~.detection.collider_box`)
    comes within VBD's ``REGION_MARGIN`` plus the longest move of the box of the step's start
    ``x0``, its solve without contact ``x1`` and the pins' ``targets`` (every straight path
    from one to the other lies in that box)."""
    from .detection import collider_box  # late: these modules build on this one
    from .vbd import REGION_MARGIN

    lo, hi = points_box(*([x0, x1] + ([targets] if len(targets) else [])))
    d = x1 - x0
    grow = REGION_MARGIN + float(np.sqrt(np.einsum("ij,ij->i", d, d).max(initial=0.0)))
    lo, hi = lo - grow, hi + grow
    for col in colliders:
        if isinstance(col, TriangleMesh) and col.previous is not None:
            return True
        box = collider_box(col)
        if box is None or (np.all(box[0] <= hi) and np.all(box[1] >= lo)):
            return True
    return False


def _cut_held_velocities(v: np.ndarray, x: np.ndarray, x_old: np.ndarray, h: float, on: np.ndarray,
                         found: HeldVertices) -> None:
    """A held vertex (``on`` ``(k,)``) is given no speed its positions do not show: its speed
    relative to the collider is cut, along the normal and across it, to what its whole step
    shows, ``(x − x₀)/h`` (a vertex the solve moves and the contact stage moves back every
    step would keep the solve's velocity, and never come to rest); cuts only, so no energy
    is added."""
    nrm, vc = found.normals[on], found.velocities[on]
    rel = v[on] - vc
    shown = (x[on] - x_old[on]) / h - vc
    vn, sn = np.einsum("ij,ij->i", rel, nrm), np.einsum("ij,ij->i", shown, nrm)
    vt, st = rel - vn[:, None] * nrm, shown - sn[:, None] * nrm
    lt, ls = np.sqrt(np.einsum("ij,ij->i", vt, vt)), np.sqrt(np.einsum("ij,ij->i", st, st))
    cut = np.minimum(1.0, ls / np.where(lt > 0, lt, 1.0))
    vn = np.clip(vn, 0.0, np.maximum(sn, 0.0))
    v[on] = vc + cut[:, None] * vt + vn[:, None] * nrm


def _after_contact(model: Model, x: np.ndarray, v: np.ndarray, x_old: np.ndarray, h: float,
                   colliders: StepColliders, held: np.ndarray, solved: np.ndarray,
                   directions: np.ndarray, hard: np.ndarray,
                   rubbed: np.ndarray | None = None, memory: StrainMemory | None = None) -> bool:
    """After the contact stage: pass its push on to the cloth; returns whether the strain
    limit (if any) holds.

    The contact stage moves the vertices it pushes out of a collider and nothing else. A
    push along a stiff spring compresses it (a strip landing on its end: each row is
    stopped on the surface while the next one is still falling) and one across a
    curved body stretches the springs around it (a cloth landing on a ball); left for the
    next solve, that is energy the springs give back: the cloth jumps, twitches, slides
    off, and a fold diverges. So projections (:func:`.strainlimit.limit_strain`) of the
    structural springs together with the contacts, each held vertex on the outer side of
    its contact plane: in the first round, when the contact stage crushed springs, one
    onto ``ℓ_along ≥ (1 − c) min(ℓ_solved, L)`` alone (no shorter, along the solve's
    directions, than the solver left them, ``c`` = :data:`_COMPRESSION`), then in every
    round one onto ``ℓ ≤ (1 + s) L`` (the strain limit ``s``): the push travels along the
    springs as it would inside the solve, and the held vertices slide over their
    colliders instead of being pulled in. (Both bounds in one projection stall: a spring
    near its rest length is a candidate of both, two nearly parallel rows, and the line
    search finds no step; docs/CONTACT.md.)
    The held vertices it moves get Coulomb friction for its normal push
    (:func:`.contact.step_friction`: the springs' tension pressing the cloth onto a curved
    body, which it would otherwise let slide over the collider unchecked). The vertices it
    moves change velocity by ``Δx/h``; where a collider holds them, the
    normal speed relative to it is kept between 0 (inelastic) and what the whole step
    shows, ``(x − x₀)/h``; then the colliders once more on what it moved, and in the
    first round also on ``rubbed`` (indices): the vertices the step's friction moved
    before this (:meth:`Integrator._finish`). Friction moves a held vertex across its
    contact normal, and near a faceted body's rim that normal is the interpolated vertex
    normal, not the face's, so the move can go slightly into the thickness: a cotton
    sheet on a 0.3 m ball ended a frame 8 µm inside the ball's 2 cm thickness where no
    projection moved it afterwards.
    """
    pi = model.pinned_index
    if len(pi):
        x[pi] = hard
    e = model.structural_count
    rest = model.rest_lengths[:e]
    found = colliders.found
    normals = found.normals
    scale = float(np.median(rest))
    sp = model.springs[:e]
    bound = (1.0 + model.stretch_limits) * rest * (1.0 + _ROUND_TOLERANCE)
    lower = np.minimum(solved, rest) * (1.0 - _COMPRESSION)
    along = np.einsum("ij,ij->i", x[sp[:, 0]] - x[sp[:, 1]], directions)
    compressed = bool(np.any(along < lower - _COMPRESSION_TRIGGER * rest))
    held = held.copy()
    holds = True
    for k in range(_ROUNDS):
        idx = np.flatnonzero(held)
        contacts = LinearRows.points(idx, normals[idx], x[idx], scale)
        # held by two colliders: outside both planes
        two = idx[np.any(found.others[idx] != 0.0, axis=1)]
        contacts = LinearRows.join(contacts, LinearRows.points(two, found.others[two], x[two], scale))
        before = x.copy()
        if k == 0 and compressed:
            limit_strain(model, x, v, h, stretch=False,
                         rows=LinearRows.join(LinearRows.springs(sp, directions, lower, rest), contacts),
                         memory=memory)
        holds = limit_strain(model, x, v, h, rows=contacts, memory=memory).converged
        moved = np.any(x != before, axis=1)
        seen = moved
        if k == 0 and rubbed is not None and len(rubbed):
            seen = moved.copy()
            seen[rubbed] = True
        if not np.any(seen):
            break
        # the projection changed v by Δx/h; a held vertex it lifted off its collider keeps
        # no more outward speed than its whole step shows, (x − x₀)/h (a row of a falling
        # strip that the contact stage stopped and the projection then lifted back is
        # not thrown up), and no inward speed (inelastic)
        on = np.flatnonzero(moved & held)
        nrm, vc = normals[on], found.velocities[on]
        # friction for the projection's own push (the springs' tension pressing the cloth
        # onto a curved body), which slid the held vertices over their tangent planes
        step_friction(x, x_old, before, on, nrm, vc, found.frictions[on], h)
        vn = np.einsum("ij,ij->i", v[on] - vc, nrm)
        step = np.einsum("ij,ij->i", (x[on] - x_old[on]) / h - vc, nrm)
        v[on] += (np.clip(vn, 0.0, np.maximum(step, 0.0)) - vn)[:, None] * nrm
        # a held vertex slides along the tangent plane of its contact, which on a curved
        # body goes slightly in: the colliders once more on what moved, and another round
        # while that stretched the cloth past its limit again
        held |= resolve_again(colliders, x, v, x_old, h, model, seen, carry=k == 0)
        if pi is not None and len(pi):
            x[pi] = hard
        length = np.linalg.norm(x[sp[:, 0]] - x[sp[:, 1]], axis=1)
        if not np.any(length > bound):
            break
        # the rounds ran out with the colliders' last push stretching the cloth past its
        # limit: the step did not meet it, whatever the last projection said
        holds = False
    return holds or model.max_stretch <= 0


class Objective:
    """The backward-Euler objective ``g`` of one step (see module docstring).

    Parameters
    ----------
    model : Model
    state : State
        Start of the step (not modified).
    h : float
        Time step, s.
    external : numpy.ndarray, optional
        Shape ``(n, 3)``, N: constant external forces over the step; they enter
        ``ŷ`` as ``f_ext/m`` beside gravity.
    targets : numpy.ndarray, optional
        Shape ``(t, 3)``, pin targets (soft pins enter ``w`` and ``y``).
    """

    def __init__(self, model: Model, state: State, h: float,
                 targets: np.ndarray | None = None, external: np.ndarray | None = None) -> None:
        self.model = model
        self.h = h
        c = model.vertex_drag[:, None]
        a = 1.0 / h**2 + c / h  # (n, 1)
        self.w = model.masses * a[:, 0]  # (n,)
        self.x0 = state.x.copy()
        self.v0 = state.v.copy()
        self.y = (state.x / h**2 + state.v / h + model.gravity
                  + c * (state.x / h + model.wind)) / a
        if external is not None:
            self.y += external / self.w[:, None]
        ai = model.anchor_index
        if len(ai):
            if targets is None:
                targets = state.x[model.target_index]
            ka = model.anchor_stiffness
            t_a = split_targets(model, targets)[1]
            w_new = self.w[ai] + ka
            self.y[ai] = (self.w[ai, None] * self.y[ai] + ka[:, None] * t_a) / w_new[:, None]
            self.w[ai] = w_new
        self.has_damping = model.spring_count > 0 and bool(np.any(model.damping))
        self._geometry0: tuple[np.ndarray, np.ndarray] | None = None
        self.length0: np.ndarray | None = None  # (s,), set by geometry0()

    def geometry0(self) -> tuple[np.ndarray, np.ndarray]:
        """Spring vectors ``d⁰`` and directions ``û⁰`` at the start of the step,
        both ``(3, s)`` (structure of arrays), computed once on first use (also
        sets ``length0`` ``(s,)``)."""
        if self._geometry0 is None:
            d0, self.length0, u0 = F.spring_geometry_soa(self.model, self.x0)
            self._geometry0 = (d0, u0)
        return self._geometry0

    @property
    def u0(self) -> np.ndarray | None:
        """``û⁰``, shape ``(s, 3)`` (a view), or ``None`` without spring damping."""
        return self.geometry0()[1].T if self.has_damping else None

    def damping_blocks(self) -> np.ndarray:
        """``k_d û⁰û⁰ᵀ / h`` per spring, shape ``(s, 3, 3)``."""
        u = self.u0
        return (self.model.damping / self.h)[:, None, None] * (u[:, :, None] * u[:, None, :])

    def damping_gradient(self, x: np.ndarray) -> np.ndarray:
        """``(1/h) D (x − x₀)``, shape ``(n, 3)``."""
        if not self.has_damping:
            return np.zeros_like(x)
        du = self.model.incidence @ (x - self.x0)
        per = (self.model.damping / self.h * np.einsum("ij,ij->i", du, self.u0))[:, None] * self.u0
        return self.model.incidence_t @ per

    def value(self, x: np.ndarray) -> float:
        """``g(x)`` in J (up to a constant)."""
        r = x - self.y
        val = 0.5 * float(np.einsum("i,ij,ij->", self.w, r, r))
        val += F.spring_energy(self.model, x)
        if self.has_damping:
            du = self.model.incidence @ (x - self.x0)
            proj = np.einsum("ij,ij->i", du, self.u0)
            val += 0.5 / self.h * F.dot(self.model.damping, proj * proj)
        return val

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """``∇g(x)``, shape ``(n, 3)``, N; pinned rows set to 0."""
        grad = self.w[:, None] * (x - self.y) + F.spring_gradient(self.model, x)
        grad += self.damping_gradient(x)
        grad[self.model.pinned_index] = 0.0
        return grad

    def start(self, targets: np.ndarray) -> np.ndarray:
        """Initial guess ``x_start = x₀ + h v₀`` with hard pins at their targets, shape ``(n, 3)``.

        Not ``ŷ``: ``ŷ`` also moves every free vertex by ``h² g`` but the pins by their own
        motion only, so every spring at a pin would start stretched by ``h² |g|`` and dominate
        the residual :func:`converged` is judged against.
        """
        x = self.x0 + self.h * self.v0
        x[self.model.pinned_index] = split_targets(self.model, targets)[0]
        return x

    def predicted(self, targets: np.ndarray) -> np.ndarray:
        """``ŷ`` with hard pins at their targets, shape ``(n, 3)``: the minimiser of ``g``
        when there are no springs."""
        x = self.y.copy()
        x[self.model.pinned_index] = split_targets(self.model, targets)[0]
        return x
