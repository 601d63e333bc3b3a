"""Strain limiting: no structural spring ends a step longer than ``(1 + s) L``.

Provot 1995 "Deformation Constraints in a Mass-Spring Model to Describe Rigid
Cloth Behavior" shortens over-stretched springs after each step. Here the
over-stretched springs become equality constraints
``Cₛ(x) = ‖xᵢ − xⱼ‖ − (1 + s) Lₛ = 0`` and the positions are projected onto them
by *fast projection* (Goldenthal et al. 2007 "Efficient Simulation of
Inextensible Cloth"): the mass-weighted closest point satisfying the active
constraints, found by Newton steps on the constraints,

``(J W Jᵀ + εI) δλ = C(x)``, ``x ← x − W Jᵀ δλ``,

with ``J = ∂C/∂x`` (``+ûₛ`` at ``i``, ``−ûₛ`` at ``j``), ``W = M⁻¹`` (0 for hard
pins), and a tiny ``ε`` for redundant constraints; a step that makes the worst
violation grow is halved (up to 6 times). With a ``compliance`` ``α`` the system is
``(J W Jᵀ + α diag(J W Jᵀ) + εI) δλ = C(x)``: Levenberg–Marquardt damping with
Marquardt's 1963 diagonal scaling ("An Algorithm for Least-Squares Estimation of Nonlinear
Parameters"), the same as XPBD's compliance (Macklin et al. 2016 "XPBD: Position-Based
Simulation of Compliant Constrained Dynamics") set per constraint relative to its own
stiffness. Self-collision's pair rows need it (:meth:`~.simulate.Simulator._spread`):
several rows over the same four vertices, with spring bounds and fixed vertices around
them, are linearly dependent and often contradict each other (on the fold of the contact
bench, 692 of 1132 eigenvalues of ``J W Jᵀ`` below 10⁻⁶ of the largest and 46 % of
``C`` in that near-null space); with ``ε`` alone the step was 10–100 times the largest
violation, no halving helped and 25 of 192 projections returned without a step. The ``|A| × |A|``
system (over the vertices of the active springs only) is assembled entry by entry from the
pairs of constraints that meet at a vertex, and solved by the shared
:func:`~.linsolve.solve_spd_entries` (densely when small: the springs at a pinned corner;
a narrow band by LAPACK; else SuperLU); a constraint with a
single movable vertex (a collider contact, a spring to a pin) is eliminated from it rather
than solved for (:func:`_project`: the same step from a system without the contact rows of
a resting cloth). The strain limit alone (no rows, no compliance) takes a shortcut to the
same step (:class:`_SpringStep`): the entries among a Newton step's springs are computed
once for all its active-set rounds, which then only pick theirs (a flag in the wind: 5.6
rounds a frame, 1.4 Newton steps). The active set holds the violated springs and,
as candidates, those stretched past ``1 + s/2``: without them the projection pulls the
next ring of springs over its bound and the set grows one ring per Newton step (7–8
steps per projection at the corners of a hanging sheet instead of 1–3). Candidates (springs
and rows) a Newton step releases (below) are left out of the later steps' candidates until
they are violated (each release costs a factorisation: a resting cloth released the same
contacts in every step); within a Newton step of the strain limit alone, a released spring
that the step would stretch past its bound (linearised) is held again and the step solved
once more (the springs of a flag's taut edge otherwise came back one per Newton step). After each
Newton step the active set grows by springs that have become too long and
drops those the step left shorter than their bound (the inequality's other
side: cloth may always shorten). It stops when no spring exceeds its bound by
more than ``TOLERANCE`` (relative) or after ``MAX_ITERATIONS`` steps (then the
step reports that the limit was not reached). Only stretching is limited (the
lower end ``L`` of Provot's range is left to the springs: cloth buckles rather
than compresses). Velocities change by ``Δx/h`` so that ``v = (x₁ − x₀)/h``
stays consistent with the positions. A model made of disconnected pieces (spring bones' chains
in one model) has the strain limit alone project each piece on its own (:class:`_Pieces`: its
own Newton steps, damping of the step and stop), so that a piece ends where it would in a model
of its own, to round-off (a whole-model convergence test and step damping moved a chain up to
1.6 mm from its bake alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .linsolve import solve_spd_entries
from .model import Model

__all__ = ["StrainLimitInfo", "StrainMemory", "LinearRows", "limit_strain"]

#: Relative over-length tolerated at the end of the projection.
TOLERANCE = 5e-4
#: Newton steps on the constraints; the info says whether the bound was reached.
MAX_ITERATIONS = 30
#: Active-set rounds per Newton step of the strain limit alone (solve, release the
#: candidates the solve would push apart, take back the released springs the step would
#: stretch past their bound); with contact rows 4 rounds, releases only.
_ROUNDS = 8
#: Active sets up to this size are solved densely (LAPACK) rather than by SuperLU. With the
#: system assembled entry by entry (:func:`_project`), measured on banded SPD systems on this
#: 2-core machine under load: dense 0.08 ms vs sparse 0.19 ms at 60 constraints, but 1.5 vs
#: 0.16 ms at 128 and 32 vs 0.18 ms at 300 (threaded BLAS on a busy machine).
_DENSE = 64
#: Springs stretched beyond ``1 + (1 − _BAND) s`` join the projection as candidates.
_BAND = 0.5
#: Springs within this (relative to their rest length) of their lower bound join the
#: projection as candidates: a push passed on along a chain of springs (a strip landing on
#: its end) reaches its far end in one Newton step instead of one spring per step.
_LOWER_BAND = 0.05
#: Regularisation of ``J W Jᵀ`` (relative to its largest diagonal entry), for
#: redundant constraints.
_EPS = 1e-9


@dataclass
class StrainLimitInfo:
    """What one projection did: ``iterations`` sweeps, ``converged`` (every
    structural spring within ``(1 + s)(1 + TOLERANCE) L``), ``excess`` the
    largest remaining relative over-length (0 when none)."""

    iterations: int
    converged: bool
    excess: float


@dataclass
class StrainMemory:
    """What the projections of one model carry from one call to the next, owned by whoever
    runs the steps (each integrator keeps one: :attr:`.base.Integrator.strain_memory`):

    - the last active set, for the next projection to start from: a load that persists (a
      pinned corner) is then projected in one or two Newton steps instead of growing the set
      ring by ring. It changes how fast the projection converges, not where it ends;
    - what :func:`_bounds` derives from the model and the limit when no vertex is fixed (a
      dozen array operations a call, a tenth of a spring-bone chain's projection);
    - the :class:`_SpringPattern` of all structural springs of a small model
      (:func:`_candidates`);
    - the model's disconnected pieces (:class:`_Pieces`).

    It holds one model at a time (:attr:`uid`); another model starts it afresh.

    Attributes
    ----------
    uid : int
        The :attr:`.model.Model.uid` it belongs to (-1: none yet).
    active : numpy.ndarray, optional
        Shape ``(e,)``, bool, over the structural springs.
    bounds : tuple, optional
        ``(limited, arrays)``: whether the limits took part, and :func:`_bounds`' arrays.
    pattern : _SpringPattern, optional
    pieces : _Pieces, optional
    """

    uid: int = -1
    active: np.ndarray | None = None
    bounds: tuple | None = None
    pattern: _SpringPattern | None = None
    pieces: _Pieces | None = None

    def of(self, model: Model) -> StrainMemory:
        """Itself, emptied first if it held another model."""
        if self.uid != model.uid:
            self.uid, self.active, self.bounds, self.pattern, self.pieces = model.uid, None, None, None, None
        return self

    def start(self, model: Model, e: int) -> np.ndarray:
        """The active set to start a projection of ``model`` from, ``(e,)`` bool."""
        active = self.of(model).active
        return active if active is not None and len(active) == e else np.zeros(e, dtype=bool)

    def keep(self, model: Model, active: np.ndarray) -> None:
        """Remember ``active`` ``(e,)`` for the next projection of ``model``."""
        self.of(model).active = active


@dataclass
class LinearRows:
    """One-sided linear constraints for :func:`limit_strain`, row ``r``:
    ``Σₖ coefs[r, k] (normals[r] · x[verts[r, k]]) ≥ targets[r]``.

    Attributes
    ----------
    verts : numpy.ndarray
        Shape ``(r, m)``, int64 vertex indices (distinct within a row where the
        coefficient is non-zero; ``-1`` pads a row: no vertex).
    coefs : numpy.ndarray
        Shape ``(r, m)``.
    normals : numpy.ndarray
        Shape ``(r, 3)``, unit.
    targets : numpy.ndarray
        Shape ``(r,)``, m.
    scale : numpy.ndarray
        Shape ``(r,)``, m: the length the row's tolerance (:data:`TOLERANCE`) and
        candidate band (:data:`_LOWER_BAND`) are relative to.
    """

    verts: np.ndarray
    coefs: np.ndarray
    normals: np.ndarray
    targets: np.ndarray
    scale: np.ndarray

    @classmethod
    def points(cls, idx: np.ndarray, normals: np.ndarray, points: np.ndarray,
               scale: float) -> LinearRows:
        """Vertices ``idx`` ``(c,)`` on the outer side of the planes through ``points``
        ``(c, 3)`` with outward unit ``normals`` ``(c, 3)`` (a collider's contacts)."""
        idx = np.asarray(idx, dtype=np.int64)
        return cls(idx[:, None], np.ones((len(idx), 1)), normals,
                   np.einsum("ij,ij->i", normals, points), np.full(len(idx), float(scale)))

    @classmethod
    def springs(cls, pairs: np.ndarray, directions: np.ndarray, lower: np.ndarray,
                scale: np.ndarray) -> LinearRows:
        """Springs ``pairs`` ``(e, 2)`` no shorter than ``lower`` ``(e,)`` along the fixed
        unit ``directions`` ``(e, 3)``: ``û·(xᵢ − xⱼ) ≥ lower``."""
        coefs = np.broadcast_to(np.array([1.0, -1.0]), (len(pairs), 2))
        return cls(np.asarray(pairs, dtype=np.int64), coefs, directions, lower, scale)

    @staticmethod
    def join(*parts: LinearRows | None) -> LinearRows | None:
        """The rows of ``parts`` together (``None`` parts skipped; ``None`` if none)."""
        parts = [p for p in parts if p is not None and len(p.targets)]
        if not parts:
            return None
        m = max(p.verts.shape[1] for p in parts)

        def pad(a: np.ndarray, fill: float) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, m - a.shape[1])), constant_values=fill)

        return LinearRows(np.concatenate([pad(p.verts, -1) for p in parts]),
                          np.concatenate([pad(np.asarray(p.coefs, dtype=np.float64), 0.0)
                                          for p in parts]),
                          np.concatenate([p.normals for p in parts]),
                          np.concatenate([p.targets for p in parts]),
                          np.concatenate([p.scale for p in parts]))

    def shortfall(self, x: np.ndarray) -> np.ndarray:
        """``target − Σ coef n·x`` per row ``(r,)``, m (> 0: violated)."""
        pts = x[np.maximum(self.verts, 0)]  # (r, m, 3); padding has coefficient 0
        value = np.einsum("rk,rki,ri->r", self.coefs * (self.verts >= 0), pts, self.normals)
        return self.targets - value


def limit_strain(model: Model, x: np.ndarray, v: np.ndarray, h: float,
                 fixed: np.ndarray | None = None, rows: LinearRows | None = None,
                 stretch: bool = True, compliance: float = 0.0,
                 memory: StrainMemory | None = None) -> StrainLimitInfo:
    """Project the structural springs of ``x`` onto ``ℓ ≤ (1 + max_stretch) L`` in place.

    Parameters
    ----------
    model : Model
        ``model.max_stretch`` > 0, or ``rows`` given (otherwise nothing happens).
    x : numpy.ndarray
        Shape ``(n, 3)``, m, positions at the end of the step; updated.
    v : numpy.ndarray
        Shape ``(n, 3)``, m/s; updated by ``Δx/h``.
    h : float
        Step length, s.
    fixed : numpy.ndarray, optional
        Shape ``(n,)`` bool: vertices that must not move (hard pins are always
        fixed).
    rows : LinearRows, optional
        One-sided linear constraints projected together with the strain limit (Goldenthal
        et al. 2007 handle any constraint this way): a collider's contacts (the held
        vertex slides over it or leaves it, but is not pulled in), springs no shorter than
        a bound along a fixed direction (a push passed on along stiff springs instead of
        compressing them), self-collision's pair constraints (its push passed on to the
        cloth around instead of stretching it).
    stretch : bool
        Whether the strain limit takes part; without it the constraints are linear and
        every Newton step is taken whole.
    compliance : float
        ``α`` ≥ 0, dimensionless: each Newton step solves
        ``(J W Jᵀ + α diag(J W Jᵀ) + εI) δλ = C``, a step of a least-squares
        compromise where the constraints are redundant or contradict each other (module
        docstring); 0: the plain fast projection.
    memory : StrainMemory, optional
        What the last projection of this model left: this one starts from its active set,
        reuses what it derived from the model and leaves its own there (``None``: starts from
        no active spring and derives everything anew).

    Returns
    -------
    StrainLimitInfo
    """
    s = max(model.max_stretch, 0.0) if stretch else 0.0
    e = model.structural_count
    if (s <= 0 and rows is None) or e == 0:
        return StrainLimitInfo(0, True, 0.0)
    springs = model.springs[:e]
    rest = model.rest_lengths[:e]
    n = model.vertex_count
    inv_m, bound, scale, tol_bound, band_floor, keep_floor, inv_rest = _bounds(model, s > 0, fixed, memory)
    r = 0 if rows is None else len(rows.targets)
    no_rows = np.zeros(0, bool)
    if r:
        row_verts = np.where(rows.verts >= 0, rows.verts, n)
        free_row = np.any((rows.coefs != 0) & (inv_m[row_verts] > 0), axis=1)
        width = max(2, row_verts.shape[1])
    alone = not r and not compliance  # the strain limit alone: _SpringStep
    spring_coefs = None if alone else np.broadcast_to(np.array([1.0, -1.0]), (e, 2))
    x_start = x.copy()
    released = np.zeros(e, dtype=bool)  # candidates the last Newton step released
    released_r = np.zeros(r, dtype=bool)  # ... and rows
    active = np.zeros(e, dtype=bool) if memory is None else memory.start(model, e)
    pieces = _pieces(model, springs, memory) if alone else None
    if pieces is not None:  # each piece runs its own Newton steps (see _Pieces)
        steps = np.zeros(pieces.count, dtype=np.int64)  # each piece's Newton steps taken
        stuck = np.zeros(pieces.count, dtype=bool)  # pieces no step helps
        parked = np.zeros(e, dtype=bool)  # the active sets of the pieces that stopped
    it = 0
    excess = 0.0
    converged = False
    known = None  # the geometry and shortfalls at ``x`` if the line search computed them
    while True:
        d, length, short = known if known is not None else (
            *_geometry(model, x, springs), rows.shortfall(x) if r else np.zeros(0))
        known = None
        over = length - bound
        viol = over > tol_bound
        viol_r = (short > TOLERANCE * rows.scale) & free_row if r else no_rows
        if not (viol.any() or (r and viol_r.any())):
            converged = True
            excess = max(float(np.max(over * inv_rest, initial=0.0)), 0.0)
            break
        if pieces is not None:
            live = np.zeros(pieces.count, dtype=bool)
            live[pieces.spring[viol]] = True
            live &= ~stuck & (steps < MAX_ITERATIONS)
            on = live[pieces.spring]
            parked |= active & ~on
            if not live.any():
                excess = float(np.max(over[viol] / rest[viol], initial=0.0))
                break
        elif it >= MAX_ITERATIONS:
            excess = float(np.max(over[viol] / rest[viol], initial=0.0))
            break
        # active: too long now, or near the bound (within half the allowed stretch): a
        # spring next to a violated one is pulled over its bound by the projection
        # unless it is a constraint too, so the set would grow one ring per Newton step.
        # Candidates the solve would have to push apart are released below, and do not
        # return as candidates in later Newton steps (only once violated): on a
        # flag in strong wind most of the cloth is in the band and a projection released
        # ~2/3 of it in every step, each time after one more factorisation (if no step
        # then helps, the Newton step is tried again with them). The rows near their bound
        # are candidates too: a push passed on along a chain of them reaches its far end
        # in one Newton step.
        band = over > band_floor
        skipped_s = band & released  # candidates released by earlier Newton steps
        active = viol | (active & (over > keep_floor)) | (band & ~released)
        if pieces is not None:
            active &= on
        released &= ~viol
        if r:
            near_r = (short > -_LOWER_BAND * rows.scale) & free_row
            skipped = bool((near_r & released_r).any())  # rows released by earlier Newton steps
            active_r = viol_r | (near_r & ~released_r)
            released_r &= ~viol_r
        else:
            skipped, active_r = False, no_rows
        dropped = []  # the springs released in this Newton step's rounds
        step = None
        if alone:  # its rounds work within the springs active now
            cand, pattern = _candidates(model, active, springs, memory)
            u_cand = d / length[:, None] if cand is None else d.take(cand, axis=0) / length.take(cand)[:, None]
            step = _SpringStep(pattern, u_cand, inv_m)
        for _ in range(_ROUNDS if not r else 4):
            hi = np.flatnonzero(active)
            co = np.flatnonzero(active_r) if r else hi[:0]
            if r:
                verts = np.concatenate([_pad(springs[hi], width, n), _pad(row_verts[co], width, n)])
                coefs = np.concatenate([_pad(spring_coefs[hi], width, 0.0),
                                        _pad(rows.coefs[co], width, 0.0)])
                # a row ``target − Σ coef n·x ≤ 0`` has ``−coef n`` at its vertices; one
                # that holds is kept where it is, not moved onto its bound (it only
                # passes pushes on)
                u = np.concatenate([d[hi] / length[hi, None], -rows.normals[co]])
                c = np.concatenate([over[hi], np.maximum(short[co], 0.0)])
            else:
                c = over[hi]
            if step is not None:
                lam, dx = step.solve(active if cand is None else active[cand], c)
            else:
                if not r:
                    verts, coefs, u = springs[hi], spring_coefs[hi], d[hi] / length[hi, None]
                lam, moved, dxv = _project(verts, coefs, u, inv_m, c, compliance)
                dx = np.zeros((n + 1, 3))
                dx[moved] = dxv
            # a constraint that holds but that the solve would have to push the other way
            # (a spring within its bound pushed apart, a contact pulling its vertex in)
            # is not held by the inequality: release it and solve again (active-set step)
            release = (lam < 0) & (c <= 0)
            # ... and a spring released in an earlier round that this step (linearised)
            # stretches past its bound is held again: released all at once, the springs of
            # a taut chain (a flag's edge) came back one per Newton step, each time only
            # once violated (4.4 Newton steps per projection on the bench's flag, 1.4 now)
            back = np.zeros(0, dtype=np.intp)
            if dropped and not r:
                back = np.concatenate(dropped)
                back = back[~active[back]]
                ends = springs.take(back, axis=0)
                grown = over[back] - _dot(d.take(back, axis=0) / length[back, None],
                                          dx.take(ends[:, 0], axis=0) - dx.take(ends[:, 1], axis=0))
                back = back[grown > tol_bound[back]]
            if not release.any() and not len(back):
                break
            active[back] = True
            released[back] = False
            dropped.append(hi[release[:len(hi)]])
            active[hi[release[:len(hi)]]] = False
            released[hi[release[:len(hi)]]] = True
            active_r[co[release[len(hi):]]] = False
            released_r[co[release[len(hi):]]] = True
        dx = dx[:n]
        if pieces is not None:
            t, known = _piece_search(model, pieces, x, dx, springs, live, over, bound, scale,
                                     skipped_s, released, stuck)
            moved = t > 0
            if moved.any():
                x[...] = x - pieces.step_of(t, dx)
                steps += moved
                it += 1
            else:
                known = (d, length, short)
            continue
        if s > 0:
            # damped step: halve while the worst violation grows (far from the constraint
            # manifold the linearisation overshoots)
            worst = _worst(length, bound, scale, short, rows)
            t = 1.0
            for _ in range(6):
                xt = x - t * dx
                known = (*_geometry(model, xt, springs), rows.shortfall(xt) if r else short)
                if _worst(known[1], bound, scale, known[2], rows) < worst:
                    break
                t *= 0.5
            else:
                if skipped_s.any() or skipped:  # the same step with the candidates the last one released
                    released[:] = False
                    released_r[:] = False
                    known = (d, length, short)
                    continue
                # no step helps (constraints that contradict each other): stop here
                excess = float(np.max(over[viol] / rest[viol], initial=0.0))
                break
        else:
            xt = x - dx
            known = None
        x[...] = xt
        it += 1
    if pieces is not None:
        active = active | parked
        it = int(steps.max(initial=0))
    if memory is not None:
        memory.keep(model, active)
    if it:
        v += (x - x_start) / h
    return StrainLimitInfo(it, converged, excess)


@dataclass(frozen=True)
class _Pieces:
    """The disconnected pieces of a model's structural springs (spring bones' chains share a
    model): the strain limit alone projects each on its own, so that a piece ends where it would
    in a model of its own, to round-off: a Newton step moves only the pieces that have a violated
    spring, each with its own damped step, and a piece stops (converged, stuck or after
    :data:`MAX_ITERATIONS` of its own steps) while others go on. One piece: the plain loop.

    Attributes
    ----------
    count : int
    spring : numpy.ndarray
        Shape ``(e,)``, each structural spring's piece.
    vertex : numpy.ndarray
        Shape ``(n,)``, each vertex's piece (0 for a vertex in no spring: it never moves).
    order : numpy.ndarray or None
        The springs sorted by piece (``None``: they are).
    starts : numpy.ndarray
        Where each piece starts among them (:meth:`worst`).
    """

    count: int
    spring: np.ndarray
    vertex: np.ndarray
    order: np.ndarray
    starts: np.ndarray

    def step_of(self, t: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """``t`` ``(count,)`` of each piece's displacement ``dx`` ``(n, 3)``."""
        return t[self.vertex][:, None] * dx

    def worst(self, values: np.ndarray) -> np.ndarray:
        """The largest of ``values`` ``(e,)`` in each piece, ``(count,)``."""
        return np.maximum.reduceat(values if self.order is None else values.take(self.order), self.starts)


def _pieces(model: Model, springs: np.ndarray, memory: StrainMemory | None) -> _Pieces | None:
    """The :class:`_Pieces` of ``springs`` ``(e, 2)`` (kept in ``memory``), ``None`` for one."""
    kept = None if memory is None else memory.of(model).pieces
    if kept is None:
        n = model.vertex_count
        graph = sp.coo_matrix((np.ones(len(springs)), (springs[:, 0], springs[:, 1])), shape=(n, n))
        label = connected_components(graph, directed=False)[1]
        used, spring = np.unique(label[springs[:, 0]], return_inverse=True)
        vertex = np.zeros(label.max(initial=0) + 1, dtype=np.int64)  # a vertex in no spring: 0
        vertex[used] = np.arange(len(used))
        order = np.argsort(spring, kind="stable")
        starts = np.flatnonzero(np.r_[True, spring[order][1:] != spring[order][:-1]])
        in_order = bool(np.all(order == np.arange(len(order))))  # spring bones: chain after chain
        kept = _Pieces(len(used), spring, vertex[label], None if in_order else order, starts)
        if memory is not None:
            memory.pieces = kept
    return kept if kept.count > 1 else None


def _piece_search(model: Model, pieces: _Pieces, x: np.ndarray, dx: np.ndarray, springs: np.ndarray,
                  live: np.ndarray, over: np.ndarray, bound: np.ndarray, scale: np.ndarray,
                  skipped: np.ndarray, released: np.ndarray, stuck: np.ndarray) -> tuple[np.ndarray, Any]:
    """The damped step of :func:`limit_strain`, piece by piece: each ``live`` piece's step ``dx``
    ``(n, 3)`` is halved while its worst violation grows (up to 6 times). A piece that no halving
    helps stays where it is: its candidates released earlier (``skipped`` ``(e,)``) are freed
    for the next Newton step if it had any (``released`` ``(e,)``, in place), else it is
    ``stuck`` (``(count,)``, in place). Returns each piece's step length ``(count,)`` (0: not
    moved) and the geometry and shortfalls at the result (``None``: not computed)."""
    k = pieces.count
    worst = pieces.worst(over / scale)
    t = live.astype(np.float64)
    bad = live
    known = None
    for _ in range(6):
        known = (*_geometry(model, x - pieces.step_of(t, dx), springs), np.zeros(0))
        bad = live & ~(pieces.worst((known[1] - bound) / scale) < worst)
        if not bad.any():
            return t, known
        t[bad] *= 0.5
    skip = np.zeros(k, dtype=bool)
    skip[pieces.spring[skipped]] = True
    retry = bad & skip
    released[retry[pieces.spring]] = False
    stuck |= bad & ~retry
    t[bad] = 0.0
    return t, None


def _bounds(model: Model, limited: bool, fixed: np.ndarray | None,
            memory: StrainMemory | None = None) -> tuple[np.ndarray, ...]:
    """What :func:`limit_strain` derives from the model, its limits (``model.stretch_limits``,
    or none where not ``limited``) and the ``fixed``
    vertices: inverse masses ``(n + 1,)`` (0 for pinned and fixed vertices and for index ``n``,
    a row's padding), the springs' bounds ``(e,)`` (``inf`` where neither end can move, or
    without a limit), the lengths violations are relative to, the tolerated excess over the
    bounds, the over-lengths above which a spring is a candidate and stays active (m) and
    the inverse rest lengths (1/m; all ``(e,)``). Without ``fixed`` they are the same at every step of a model: kept in
    ``memory`` (:class:`StrainMemory`)."""
    keep = fixed is None and memory is not None
    if keep:
        kept = memory.of(model).bounds
        if kept is not None and kept[0] == limited:
            return kept[1]
    e = model.structural_count
    springs, rest = model.springs[:e], model.rest_lengths[:e]
    inv_m = 1.0 / model.masses
    inv_m = np.where(model.pinned, 0.0, inv_m)
    if fixed is not None:
        inv_m = np.where(fixed, 0.0, inv_m)
    inv_m = np.append(inv_m, 0.0)  # index -1 (a row's padding): no vertex
    # a constraint whose vertices cannot move is left as it is (two pinned ends)
    s = model.stretch_limits if limited else np.zeros(e)
    bound = np.where(s > 0, (1.0 + s) * rest, np.inf)
    bound = np.where(inv_m[springs[:, 0]] + inv_m[springs[:, 1]] > 0, bound, np.inf)
    scale = (1.0 + s) * rest  # finite: violations relative to it
    out = (inv_m, bound, scale, TOLERANCE * bound,
           -_BAND * s * rest,  # candidates: above this over-length
           -0.25 * s * rest,  # the last active set: kept above this
           1.0 / np.maximum(rest, 1e-300))  # what an over-length is relative to
    for a in out:
        a.setflags(write=False)
    if keep:
        memory.bounds = (limited, out)
    return out


def _pairs_in_groups(group: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of entries in the same group, each entry with itself included:
    ``group`` ``(m,)`` the non-decreasing group index (``< groups``) of each entry; returns
    the pairs' entries ``(left, right)``, grouped by ``left``. Two constraints meeting at a
    vertex make one entry of ``J W Jᵀ`` (:func:`_project`, :class:`_SpringStep`): with the
    incidences grouped by vertex, all of them at once and linear in their number."""
    size = np.bincount(group, minlength=groups)
    first = np.cumsum(size) - size
    per = size[group]
    left = np.repeat(np.arange(len(group)), per)
    right = first[group[left]] + (np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per))
    return left, right


class _SpringPattern:
    """The index work of :class:`_SpringStep` for one set of springs ``(k, 2)``: it depends
    only on which springs take part (:func:`_candidates` keeps the one of all springs of a
    small model).

    Attributes
    ----------
    springs : numpy.ndarray
        Shape ``(k, 2)``.
    ra, rb : numpy.ndarray
        Rows and columns of the entries of ``J W Jᵀ`` among them: first every ordered pair
        of distinct springs meeting at a vertex, then the diagonal in spring order.
    pair_a, pair_b, pair_vert : numpy.ndarray
        Those pairs' springs and the vertex they meet at.
    pair_sign : numpy.ndarray
        The product of the two springs' signs at that vertex (±1).
    slots : numpy.ndarray
        Shape ``(2, k, 3)``: entry ``3 v + j`` of a spring's first and second end.
    """

    def __init__(self, springs: np.ndarray) -> None:
        k = len(springs)
        # the incidences (spring, vertex, sign) grouped by vertex, and within each vertex's
        # group every ordered pair of distinct springs
        flat = springs.reshape(-1)
        order = np.argsort(flat, kind="stable")
        vert = flat[order]
        spring, sign = order // 2, np.where(order % 2 == 0, 1.0, -1.0)
        starts = np.ones(len(vert), dtype=bool)
        starts[1:] = vert[1:] != vert[:-1]
        group = np.cumsum(starts) - 1
        left, right = _pairs_in_groups(group, int(group[-1]) + 1 if len(group) else 0)
        off = spring[left] != spring[right]
        left, right = left[off], right[off]
        self.springs = springs
        self.pair_a, self.pair_b = spring[left], spring[right]
        self.pair_vert = vert[left]
        self.pair_sign = sign[left] * sign[right]
        self.ra = np.concatenate([self.pair_a, np.arange(k)])  # rows
        self.rb = np.concatenate([self.pair_b, np.arange(k)])  # columns
        # the displacement W Jᵀ λ gathered per vertex and coordinate in one bincount:
        # entry 3 v + j, +λ u at a spring's first end, −λ u at its second
        self.slots = (springs[:, :, None] * 3 + np.arange(3)).transpose(1, 0, 2)  # (2, k, 3)


#: Models with at most this many structural springs give every Newton step all of them as
#: candidates (:func:`_candidates`): the same :class:`_SpringPattern` every time, kept in
#: the caller's :class:`StrainMemory`. Spring bones' chains (4–100 bones) change their active set from step
#: to step (a bone compressed under an upright antenna leaves it, a whip brings it back),
#: and building the pattern anew was a fifth of their strain limit.
_WHOLE = 256


def _candidates(model: Model, active: np.ndarray, springs: np.ndarray,
                memory: StrainMemory | None = None) -> tuple[np.ndarray | None, _SpringPattern]:
    """The springs a Newton step's rounds work within (indices into ``springs`` ``(e, 2)``)
    and their :class:`_SpringPattern`: the ``active`` ones (bool ``(e,)``), or all of a small
    model's (:data:`_WHOLE`; the rounds solve for the active ones alone either way, the same
    system), then ``None`` for the indices."""
    e = len(springs)
    if e > _WHOLE:
        cand = np.flatnonzero(active)
        return cand, _SpringPattern(springs.take(cand, axis=0))
    pattern = None if memory is None else memory.of(model).pattern
    if pattern is None or len(pattern.springs) != e:
        pattern = _SpringPattern(springs)
        if memory is not None:
            memory.pattern = pattern
    return None, pattern


class _SpringStep:
    """:func:`_project` for springs alone (no rows, no compliance), over one Newton step.

    The springs that may take part in a Newton step's active-set rounds (its rounds only
    release springs and take released ones back) are a :class:`_SpringPattern`, with unit
    directions ``u`` ``(k, 3)`` and inverse masses ``inv_m`` ``(n + 1,)`` (0 at ``n``):
    every entry of ``J W Jᵀ`` among them (each spring with itself, ``w_i + w_j``, and two
    springs meeting at a vertex ``v``, ``±w_v (ûₐ·û_b)``) is computed once, and each round
    (:meth:`solve`) picks those of its active springs instead of sorting its incidences
    again. The system is the full ``(J W Jᵀ + εI) λ = c``: :func:`_project` eliminates a
    spring with one movable end rather than solving for it, the same step to round-off
    (``tests/core/test_springs_material.py`` checks the two against each other). Memory
    and time follow the step's springs, not the mesh.
    """

    def __init__(self, pattern: _SpringPattern, u: np.ndarray, inv_m: np.ndarray) -> None:
        p = pattern
        vals = np.concatenate([p.pair_sign * inv_m[p.pair_vert]
                               * _dot(u.take(p.pair_a, axis=0), u.take(p.pair_b, axis=0)),
                               inv_m[p.springs[:, 0]] + inv_m[p.springs[:, 1]]])
        self.ra, self.rb, self.vals = p.ra, p.rb, vals  # the diagonal last, in spring order
        self.slots = p.slots
        self.u = u
        self.inv_m = inv_m

    def solve(self, sel: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``λ`` ``(b,)`` of the springs ``sel`` (bool ``(k,)``, ``b`` of them) with
        violations ``c`` ``(b,)``, and the displacement ``W Jᵀ λ`` ``(n + 1, 3)``."""
        b = len(c)
        if b == 0:
            return np.zeros(0), np.zeros((len(self.inv_m), 3))
        if b == len(sel):  # all of them (a chain's bones, usually): nothing to pick
            ra, rb, vals, u, slots = self.ra, self.rb, self.vals.copy(), self.u, self.slots
        else:
            pos = np.cumsum(sel) - 1
            keep = sel[self.ra] & sel[self.rb]
            ra, rb, vals = pos[self.ra[keep]], pos[self.rb[keep]], self.vals[keep]
            u, slots = self.u.compress(sel, axis=0), self.slots.compress(sel, axis=1)
        diag = vals[-b:]  # the selected springs' diagonal entries (kept last, in order)
        diag += _EPS * max(float(diag.max()), 1e-300)
        lam = solve_spd_entries(b, ra, rb, vals, c, dense_max=_DENSE)
        push = lam[:, None] * u
        n1 = len(self.inv_m)
        dx = (np.bincount(slots[0].reshape(-1), push.reshape(-1), minlength=3 * n1)
              - np.bincount(slots[1].reshape(-1), push.reshape(-1), minlength=3 * n1)).reshape(n1, 3)
        dx *= self.inv_m[:, None]
        return lam, dx


def _pad(a: np.ndarray, width: int, fill: float) -> np.ndarray:
    return a if a.shape[1] == width else np.pad(a, ((0, 0), (0, width - a.shape[1])),
                                                constant_values=fill)


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b)


def _geometry(model: Model, x: np.ndarray, springs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spring vectors ``(e, 3)`` and lengths ``(e,)`` of ``springs`` at ``x``; a spring
    whose ends coincide gets its rest direction at a tiny length (a lower bound pushes
    it apart along that)."""
    d = x.take(springs[:, 0], axis=0) - x.take(springs[:, 1], axis=0)
    length = np.sqrt(_dot(d, d))
    if len(length) and length.min() < 1e-12:
        tiny = length < 1e-12
        d[tiny] = 1e-12 * model.rest_directions[:len(springs)][tiny]
        length[tiny] = 1e-12
    return d, length


def _worst(length: np.ndarray, bound: np.ndarray, scale: np.ndarray, short: np.ndarray,
           rows: LinearRows | None) -> float:
    """The largest relative violation (negative when all hold): of the strain limit, and
    of the ``rows`` with shortfalls ``short``."""
    worst = float(np.max((length - bound) / scale))
    if rows is not None and len(short):
        worst = max(worst, float(np.max(short / rows.scale)))
    return worst


def _project(verts: np.ndarray, coefs: np.ndarray, u: np.ndarray, inv_m: np.ndarray,
             c: np.ndarray, compliance: float = 0.0
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One fast-projection Newton step on the constraints ``a``.

    Constraint ``a`` has the gradient ``coefs[a, k] u[a]`` at vertex ``verts[a, k]``
    (``(a, m)`` each; a spring: ``(i, j)``, ``(1, −1)`` along its direction; padding:
    the index of a vertex with zero inverse mass). Solves
    ``(J W Jᵀ + α diag(J W Jᵀ) + εI) λ = c`` for inverse masses ``inv_m``, violations
    ``c`` ``(a,)`` (m) and ``α`` the ``compliance`` (the diagonal of the whole system:
    the eliminated constraints below are solved exactly); returns ``λ`` ``(a,)``,
    the vertices ``moved`` ``(k,)`` the step moves and their displacement ``W Jᵀ λ``
    ``(k, 3)`` (to be subtracted).

    A constraint with a single movable vertex ``v`` (a collider contact, a spring to a
    pin) fixes the component of ``v``'s displacement along its direction ``r``:
    ``C r·Δx_v = c``. It is eliminated rather than solved for (one per vertex, the
    first): ``v`` moves by ``c r/(C |r|²)`` along ``r`` plus ``w_v P g_v`` across it,
    with ``P = I − r̂r̂ᵀ`` and ``g_v`` the other constraints' ``Σ λ_b C_bv u_b`` at ``v``,
    so the other constraints see ``v``'s directions projected by ``P`` and their
    violations less what the fixed part does to them; its multiplier is then
    ``λ = (c/(C w_v) − r·g_v)/(C |r|²)``. This is the same solution (a Schur complement
    of the full system on the eliminated rows) from a smaller system: a cloth resting
    on a collider has a contact row for every vertex it holds.

    ``J W Jᵀ`` is assembled entry by entry: two constraints meeting at a movable vertex
    ``v`` give ``(J W Jᵀ)_{ab} += C_av C_bv w_v (u_a·u_b)`` with the coefficients ``C``
    by vertex; every such pair of incidences is listed at once (vertex by vertex, all
    pairs within its group), so the cost is linear in the number of non-zeros. Small
    systems (the usual case: the springs at a pinned corner) are solved densely, large
    ones by the shared sparse factorisation (:func:`~.linsolve.solve_spd_entries`).
    """
    a, m = verts.shape
    # the incidences (constraint, vertex, coefficient), grouped by vertex (one stable sort)
    flat = verts.reshape(-1)
    order = np.argsort(flat, kind="stable")
    sorted_v = flat[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = sorted_v[1:] != sorted_v[:-1]
    moved = sorted_v[starts]
    vert = np.cumsum(starts) - 1  # index into ``moved``
    row, coef = order // m, coefs.reshape(-1)[order]
    w = inv_m[moved]
    keep = (coef != 0.0) & (w[vert] > 0.0)  # the incidences that can move something
    row, vert, coef = row[keep], vert[keep], coef[keep]
    ux, uy, uz = (np.ascontiguousarray(u[:, k])[row] for k in range(3))
    if compliance:  # (J W Jᵀ)_aa, before the elimination below
        damp = compliance * np.bincount(row, w[vert] * coef * coef
                                        * (ux * ux + uy * uy + uz * uz), minlength=a)
    # the constraints with one movable vertex, the first at each vertex: eliminated
    single = np.flatnonzero(np.bincount(row, minlength=a)[row] == 1)  # their incidences
    single = single[np.unique(vert[single], return_index=True)[1]]
    gone = np.zeros(a, dtype=bool)
    gone[row[single]] = True
    at = np.full(len(moved), -1)  # the eliminated constraint at each vertex (its incidence)
    at[vert[single]] = single
    fixed = np.zeros((len(moved), 3))  # the displacement they fix (along their directions)
    r_hat = np.zeros((len(moved), 3))
    if len(single):
        rs = row[single]
        r = u[rs]
        rr = np.einsum("ij,ij->i", r, r)
        fixed[vert[single]] = (c[rs] / (coef[single] * rr))[:, None] * r
        r_hat[vert[single]] = r / np.sqrt(rr)[:, None]
    rest = ~gone[row]
    row_all, vert_all, coef_all = row, vert, coef
    row, vert, coef = row[rest], vert[rest], coef[rest]
    ux, uy, uz = ux[rest], uy[rest], uz[rest]
    # the others: what the fixed part already does to them, and their directions across
    # the eliminated directions
    c_rest = c - np.bincount(row, coef * (ux * fixed[vert, 0] + uy * fixed[vert, 1]
                                          + uz * fixed[vert, 2]), minlength=a)
    on = at[vert] >= 0
    rh = r_hat[vert[on]]
    along = ux[on] * rh[:, 0] + uy[on] * rh[:, 1] + uz[on] * rh[:, 2]
    px, py, pz = ux.copy(), uy.copy(), uz.copy()
    px[on] -= along * rh[:, 0]
    py[on] -= along * rh[:, 1]
    pz[on] -= along * rh[:, 2]
    kept = np.flatnonzero(~gone)
    b = len(kept)
    index = np.cumsum(~gone) - 1  # constraint → its index in the reduced system
    red = index[row]
    wc = w[vert] * coef
    diag = np.bincount(red, wc * coef * (px * px + py * py + pz * pz), minlength=b)
    reg = _EPS * max(float(diag.max(initial=0.0)), 1e-300)
    # all pairs of incidences at the same vertex (itself included)
    left, right = _pairs_in_groups(vert, len(moved))
    vals = wc[left] * coef[right] * (px[left] * px[right] + py[left] * py[right]
                                      + pz[left] * pz[right])
    ra = np.concatenate([red[left], np.arange(b)])
    rb = np.concatenate([red[right], np.arange(b)])
    vals = np.concatenate([vals, reg + damp[kept] if compliance else np.full(b, reg)])
    lam = np.zeros(a)
    lam[kept] = solve_spd_entries(b, ra, rb, vals, c_rest[kept], dense_max=_DENSE)
    # W Jᵀ λ by vertex: across the eliminated directions, plus the fixed part along them
    push = wc * lam[row]
    dxv = fixed + np.column_stack([np.bincount(vert, push * pk, minlength=len(moved))
                                   for pk in (px, py, pz)])
    if len(single):
        # the eliminated multipliers: λ = (c/(C w) − r·g)/(C |r|²), g = Σ λ_b C_b u_b at v
        g_r = np.bincount(vert[on], coef[on] * lam[row[on]] * along, minlength=len(moved))
        v_s, rs = vert_all[single], row_all[single]
        r_len = np.sqrt(np.einsum("ij,ij->i", u[rs], u[rs]))
        cs = coef_all[single]
        lam[rs] = (c[rs] / (cs * w[v_s]) - r_len * g_r[v_s]) / (cs * r_len**2)
    return lam, moved, dxv
