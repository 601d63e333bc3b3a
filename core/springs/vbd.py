"""Vertex Block Descent with contact inside the solve (Chen, Liu & Yang, SIGGRAPH 2024).

The step minimises the same backward-Euler objective ``g`` as NEWTON and FAST
(:mod:`.base`: inertia, gravity, drag, force fields, soft pins, springs, spring damping),
plus, inside the same minimisation,

* **contact**: a barrier ``k_c r (r ln(r/d) − (r − d))`` for a vertex closer than the
  collider's thickness ``r`` to a collider triangle, plane or sphere (``d`` its distance,
  signed behind the face of a closed mesh), with ``k_c`` :data:`CONTACT_STIFFNESS` times the
  vertex's own inertia and spring stiffness;
* **friction**: Coulomb, ``μ λ`` against the displacement relative to the collider over the
  step, smoothed below :data:`STATIC_SPEED` × ``h`` as in IPC (Li et al. 2020), lagged on
  the normal force ``λ`` of the same iteration: it only ever takes energy out;
* **the strain limit**: ``½ k_lim (ℓ − (1 + s) L)²₊`` on structural springs stretched past
  their limit, with ``k_lim`` :data:`LIMIT_STIFFNESS` times the springs' own;
* **self-contact** (with ``self_collision``): the same barrier on the distance of each
  vertex–face and edge–edge pair of the cloth's own that self detection lists
  (:class:`~.detection.SelfDetection`), within ``self_distance``.

Gauss–Seidel over graph-coloured vertex sets: each vertex takes a 3×3 Newton step on its
local energy with its neighbours held (the compiled ``sinew_vbd_sweep``; more local steps,
and an active-set stop at the edge of a thickness, where a step enters one). Every move
goes through the displacement guard (``src/guard.h``, :mod:`.detection`): it stays inside
a ball around the vertex's position at the last detection that holds no collider triangle
but the ones it was tested against (as Offset Geometric Contact bounds moves, Chen et al.
2025) and stops short of the first of those its path crosses, so no iteration carries a
vertex through a collider, however thin or fast; a vertex that reaches its ball has
detection run again; with self-contact, a move also stays in a ball about the vertex's
position at the last self detection and stops short of the first of its listed pairs its
path would take through (one vertex moves at a time: each pair's four points are coplanar
at one time of the path at most). After every sweep, clusters of vertices take a Newton step as rigid
translations (all free vertices, then cells of about :data:`CLUSTER_SIZE`, and cells four
times as large while a level has more than :data:`COARSER_AFTER`, coloured so that cells of
one colour share no spring; ``sinew_vbd_cluster_sums``, ``sinew_vbd_translate``):
Gauss–Seidel alone barely moves a stiff cloth as a whole (sliding, sticking, drag). A cloth
is swept in slabs (:func:`_slabs`), and a run of iterations is one ``sinew_vbd_iterate``
call per thread of a team (:meth:`~core.kernels.Workers.team`, ``src/team.h``): the threads
take blocks of each phase's slabs (the slabs of one parity share no spring) and of each
coarse stage's groups (the whole cloth's stage: of its vertices), and meet at barriers,
with the same result as one thread. Each iteration (the sweep and the coarse correction, a
map ``G``) is Anderson-accelerated by default (``src/anderson.h``, :class:`~core.kernels.Anderson`,
inside the same call): the next iterate combines the last few, and moves to it through the
guard (a move the guard cuts short is only shorter: the sweeps' own moves call for detection
again); the history restarts wherever an iteration moves the cloth farther than the one
before (friction passing from sticking to sliding), and after detection again. With
self-contact too (on its one thread). The iterations start from VBD's adaptive
initialisation (:meth:`VertexBlockDescent._guess`), or for pinned cloth from FAST's
local/global solve of the step without contact (:meth:`VertexBlockDescent._global_guess`),
less the velocity along the surface of each vertex resting on a still collider whose
friction can stop it within the step (:meth:`VertexBlockDescent._stick`). A moving collider pushes
the vertices it reaches within the step into the step's start, along its outward normal
(:meth:`VertexBlockDescent._carry`); friction in the solve decides whether a cloth on a
body moving sideways goes along.

The strain limit is then made exact (within :func:`_limit_tolerance`) by Gauss–Seidel
projection of the structural springs still past it (``sinew_strain_project``, through the
same guard): no sparse factorisation per step (pinned cloth's global start solves with one
factor kept per model and step length). Velocities are ``(x − x₀)/h``.
docs/CONTACT.md has the design's reasons and measurements.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from .. import kernels
from . import forces as F
from .base import CONVERGENCE_RTOL, Integrator, Objective, StepInfo, force_scale, pin_targets, split_targets
from .detection import ColliderSoup, Contacts, SelfDetection, SelfPairs, split_near
from .fast import LocalGlobal
from .model import Model, State
from .proximity import points_box
from .selfcollision import SelfCollision, _closest

__all__ = ["VertexBlockDescent", "CONTACT_STIFFNESS", "LIMIT_STIFFNESS", "STATIC_SPEED"]

#: Contact stiffness per vertex, as a multiple of the vertex's inertia weight plus the
#: stiffness of its springs.
CONTACT_STIFFNESS = 1.0
#: The strain limit's stiffness as a multiple of each structural spring's own.
LIMIT_STIFFNESS = 1.0
#: m/s: relative sliding speeds below this count as sticking (friction's smoothing).
STATIC_SPEED = 1e-3
#: A vertex's self-contact ball: this many times its move to the starting guess (beyond the
#: whole cloth's median move), plus half the contact radius...
SELF_REACH = 1.5
#: ...and at most this fraction of the median structural edge (a larger ball lists more
#: pairs: a cloth's own neighbours lie about an edge away).
SELF_BALL = 0.1
#: A step keeps the last step's self pairs when every vertex's guess lies within this
#: fraction of its ball (and its start within half).
KEEP_PAIRS = 0.5
#: m: how far beyond the cloth's reach within a step (its start and ``x₀ + h v₀``) a
#: collider's box may lie and still be in the step's soup (:meth:`VertexBlockDescent._region`).
REGION_MARGIN = 0.1
#: Local/global iterations of FAST's prefactored solve (Liu et al. 2013) that give pinned
#: cloth (hard or soft pins) the start of its iterations: the step without contact, solved
#: globally (:meth:`VertexBlockDescent._global_guess`; docs/CONTACT.md, *A global start for
#: pinned cloth*). On the bench's skirt 16 iterations a substep from it do what 20 did from VBD's
#: own start (no cut in eight perturbed starts; 14 cut one of eight, 12 all; from VBD's own
#: start 14 and 15 cut), and the skirt and the dress end two to three times slower.
GLOBAL_START = 5
#: Free vertices per cluster of the finest cell level of the coarse correction (:func:`_clusters`).
CLUSTER_SIZE = 64
#: Cells of a level beyond which the coarse correction takes another level of cells four
#: times as large (:func:`_clusters`): a 160² tablecloth (405 cells of 64) gets cells of
#: 256 as well, and its landing left 500-1,400 structural springs past the strain limit
#: after the iterations instead of 25,000-28,000 (the projection after them: 6-8 ms a step
#: instead of 140-150); a 100² one (160 cells) would be 5-10 % slower with them.
COARSER_AFTER = 256
#: Vertices per part of the all-free-vertices cluster, whose sums are added in order (the
#: parts go to the threads; 256 took 4 % off the 40² tablecloth, within this machine's noise,
#: and changed the order of the sums, so every bake's round-off: docs/CONTACT.md, *Threads*).
_PART = 2048
#: Free vertices per slab of the sweep (:func:`_slabs`), at least; a cloth with fewer than
#: twice as many is swept whole.
_SLAB = 256
#: Most slabs a sweep is cut into.
_MAX_SLABS = 16
#: Gauss–Seidel passes of the strain-limit projection after the solve, at most.
_LIMIT_ROUNDS = 200
#: Detections the projection may ask for when contact bounds hold it back.
_LIMIT_DETECTIONS = 4
#: The bound the projection keeps: no structural spring longer than
#: ``(1 + max_stretch + _LIMIT_SLACK) L`` at the end of a step (issue 30's).
_LIMIT_SLACK = 0.005


def _limit_tolerance(max_stretch: float) -> float:
    """The projection stops once no structural spring is longer than its limit ``(1 + s) L``
    by more than this (relative): ``(1 + s)(1 + t) ≤ 1 + s + _LIMIT_SLACK``, with 3 % to
    spare for round-off."""
    return 0.97 * _LIMIT_SLACK / (1.0 + max_stretch)


class _Stage(NamedTuple):
    """Groups of a level's vertices whose cluster sums are taken together and then
    translated: the clusters of one colour (no spring joins two of them), or the parts of the
    one cluster of all free vertices (``whole``: their sums are added in a fixed order before
    the translation). ``off`` ``(groups + 1,)`` into the level's ``vertices``; ``sums``
    ``(groups, 9)``: scratch; when whole, ``terms`` ``(vertices, 9)``: scratch for each
    vertex's share of the sums (the vertices go to the threads in blocks)."""

    off: np.ndarray
    sums: np.ndarray
    whole: bool
    terms: np.ndarray


class _Level(NamedTuple):
    """One level of the coarse correction: clusters of free vertices that translate together
    (``cluster`` ``(n,)``: each vertex's cluster, -1 for pinned ones, numbered colour by
    colour; the clusters' vertices ``vertices`` in order; ``leave``: the springs at each
    vertex whose other end is in another cluster or pinned, the springs a translation of its
    cluster stretches, a row per vertex in the order of ``vertices``), in ``stages`` run one
    after the other."""

    count: int
    cluster: np.ndarray
    vertices: np.ndarray
    leave: kernels.SpringRows
    stages: list[_Stage]


def _stage(off: np.ndarray, whole: bool) -> _Stage:
    off = np.ascontiguousarray(off, np.int64)
    groups = len(off) - 1
    return _Stage(off, np.zeros((groups, 9)), whole, np.zeros((off[-1] if whole else 0, 9)))


def _level(cluster: np.ndarray, springs: np.ndarray, rows: kernels.SpringRows, owner: np.ndarray) -> _Level:
    """A level from each free vertex's cluster: the clusters coloured so that no spring joins
    two of one colour, renumbered colour by colour; the one cluster of all free vertices
    (count 1) cut into parts of :data:`_PART` vertices. ``rows``: every spring at each
    vertex (:class:`_Layout`), ``owner`` each entry's vertex, for the entries that leave a
    cluster."""
    lib = kernels.library()
    count = int(cluster.max(initial=-1)) + 1
    ca, cb = cluster[springs[:, 0]], cluster[springs[:, 1]]
    if count > 1:
        # the clusters' graph: two clusters are neighbours when a spring joins them
        # (the springs leaving a cluster between two free ones, both ways, as sorted keys)
        cross = (ca != cb) & (ca >= 0) & (cb >= 0)
        a, b = ca[cross].astype(np.int64), cb[cross].astype(np.int64)
        keys = np.unique(np.concatenate([a * count + b, b * count + a]))
        pairs = np.c_[keys // count, keys % count]
        adj_off = np.ascontiguousarray(np.searchsorted(pairs[:, 0], np.arange(count + 1)), np.int64)
        adj = np.ascontiguousarray(pairs[:, 1], np.int64)
        degree = int(np.diff(adj_off).max(initial=0))
        colour = np.empty(count, np.int64)
        scratch = np.zeros(degree + 2, np.uint8)
        ncol = kernels.check_status(lib.sinew_color_greedy(
            count, adj_off.ctypes.data, adj.ctypes.data, np.ones(count, np.uint8).ctypes.data,
            colour.ctypes.data, scratch.ctypes.data, len(scratch)), "colouring")
        order = np.lexsort((np.arange(count), colour))
        renumber = np.empty(count, np.int64)
        renumber[order] = np.arange(count)
        cluster = np.where(cluster >= 0, renumber[np.maximum(cluster, 0)], -1)
        colour_off = np.searchsorted(colour[order], np.arange(ncol + 1))
    free = np.flatnonzero(cluster >= 0)
    vertices = np.ascontiguousarray(free[np.argsort(cluster[free], kind="stable")], np.int64)
    offsets = np.searchsorted(cluster[vertices], np.arange(count + 1))
    if count > 1:
        stages = [_stage(offsets[a:b + 1], False)
                  for a, b in zip(colour_off[:-1], colour_off[1:])]
    else:
        stages = [_stage(np.r_[np.arange(0, len(vertices), _PART), len(vertices)], True)]
    # the entries leaving each vertex's cluster, a row per vertex in the stages' order (the
    # vertices' own order within a row), then the pinned vertices' empty rows
    n = len(cluster)
    visit = np.r_[vertices, np.flatnonzero(cluster < 0)].astype(np.int64)
    place = np.empty(n, np.int64)
    place[visit] = np.arange(n)
    out = np.flatnonzero((cluster[owner] >= 0) & (cluster[owner] != cluster[rows.other]))
    out = out[np.argsort(place[owner[out]], kind="stable")]
    leave = kernels.SpringRows(
        n, np.r_[0, np.cumsum(np.bincount(place[owner[out]], minlength=n))], place, rows.other[out],
        rows.k[out], rows.rest[out], rows.kd[out], rows.rest_dir[out], rows.limit[out])
    return _Level(count, np.ascontiguousarray(cluster, np.int64), vertices, leave, stages)


def _slabs(model: Model, free: np.ndarray, springs: np.ndarray) -> np.ndarray:
    """Each free vertex's slab ``(len(free),)``: the cloth cut across the longest side of its
    rest shape into slabs of equal vertex counts (at least :data:`_SLAB` each; twice a power
    of two of them, at most :data:`_MAX_SLABS`, so that a phase splits evenly over two,
    four or eight threads), so that no spring joins two slabs that are not next to each
    other. The sweep visits the even slabs, then the odd ones: slabs of one parity share no
    spring, so they can go to several threads, and the order, so the result, is the same for
    any number of threads. All zeros (one slab) when the cloth is small or its springs reach
    farther than a slab is thick."""
    one = np.zeros(len(free), np.int64)
    pairs = min(len(free) // (2 * _SLAB), _MAX_SLABS // 2)
    if pairs < 1:
        return one
    count = 2 * (1 << (pairs.bit_length() - 1))
    rest = model.rest_positions[free]
    axis = int(np.argmax(rest.max(axis=0) - rest.min(axis=0)))
    where = np.empty(model.vertex_count, np.int64)
    where[...] = -1
    order = np.argsort(rest[:, axis], kind="stable")
    while count >= 2:
        slab = np.empty(len(free), np.int64)
        slab[order] = np.arange(len(free)) * count // len(free)
        where[free] = slab
        a, b = where[springs[:, 0]], where[springs[:, 1]]
        both = (a >= 0) & (b >= 0)
        if np.all(np.abs(a[both] - b[both]) <= 1):
            return slab
        count //= 2
    return one


def _clusters(model: Model, free: np.ndarray, rows: kernels.SpringRows, owner: np.ndarray) -> list[_Level]:
    """The coarse levels: all free vertices as one cluster, then cells of a grid over the rest
    shape holding about :data:`CLUSTER_SIZE` vertices each (when that makes more than one),
    then, while the last level has more than :data:`COARSER_AFTER` cells, cells four times
    as large (a large cloth: Gauss–Seidel over small cells carries a landing's stop across
    the cloth a cell per iteration). ``rows``: every spring at each vertex, ``owner`` each
    entry's vertex (:class:`_Layout`)."""
    n = model.vertex_count
    if len(free) == 0:
        return []
    whole = np.full(n, -1, np.int64)
    whole[free] = 0
    sp = np.asarray(model.springs, dtype=np.int64).reshape(-1, 2)
    levels = [_level(whole, sp, rows, owner)]
    e = model.structural_count
    size = CLUSTER_SIZE
    while len(free) > 2 * size and e:
        cell = np.sqrt(size) * float(np.median(model.rest_lengths[:e]))
        keys = np.floor(model.rest_positions[free] / cell).astype(np.int64)
        keys -= keys.min(axis=0)
        span = keys.max(axis=0) + 1  # (one integer per cell: faster than unique rows)
        _, ids = np.unique((keys[:, 0] * span[1] + keys[:, 1]) * span[2] + keys[:, 2], return_inverse=True)
        cells = np.full(n, -1, np.int64)
        cells[free] = ids.reshape(-1)
        if cells.max() < 1:
            break
        levels.append(_level(cells, sp, rows, owner))
        if cells.max() + 1 <= COARSER_AFTER:
            break
        size *= 4
    return levels


class _Layout:
    """What never changes for a model: the spring adjacency of each vertex and the colour
    sets of the free vertices (built once per model)."""

    def __init__(self, model: Model, threads: int) -> None:
        lib = kernels.library()
        n, s = model.vertex_count, model.spring_count
        sp = np.asarray(model.springs, dtype=np.int64).reshape(-1, 2)
        ends = np.concatenate([sp[:, 0], sp[:, 1]])
        others = np.concatenate([sp[:, 1], sp[:, 0]])
        ids = np.concatenate([np.arange(s), np.arange(s)])
        by_end = np.argsort(ends, kind="stable")
        # each vertex's springs (CSR by vertex), for the colouring
        vertex_off = np.ascontiguousarray(np.searchsorted(ends[by_end], np.arange(n + 1)), np.int64)
        neighbour = np.ascontiguousarray(others[by_end], np.int64)
        free = np.ones(n, np.uint8)
        free[model.pinned_index] = 0
        degree = int(np.diff(vertex_off).max(initial=0))
        color = np.empty(n, np.int64)
        scratch = np.zeros(degree + 2, np.uint8)
        ncolors = kernels.check_status(lib.sinew_color_greedy(
            n, vertex_off.ctypes.data, neighbour.ctypes.data, free.ctypes.data,
            color.ctypes.data, scratch.ctypes.data, len(scratch)), "colouring")
        self.free = np.flatnonzero(free).astype(np.int64)
        self.movable = free.astype(bool)
        # the sweep: slab by slab (even slabs, then odd ones), colour by colour within each
        slab = _slabs(model, self.free, sp)
        self.slab_count = int(slab.max(initial=0)) + 1
        visit = np.r_[np.arange(0, self.slab_count, 2), np.arange(1, self.slab_count, 2)]
        rank = np.empty(self.slab_count, np.int64)
        rank[visit] = np.arange(self.slab_count)
        key = rank[slab] * (ncolors + 1) + color[self.free]
        order = np.argsort(key, kind="stable")
        self.color_vertices = np.ascontiguousarray(self.free[order], np.int64)
        #: each of color_vertices' place in free
        self.sweep_rank = order
        starts = (np.arange(self.slab_count)[:, None] * (ncolors + 1) + np.arange(ncolors + 1)[None, :])
        bounds = np.searchsorted(key[order], starts)
        # per slab in visiting order: (ncolors + 1) offsets into color_vertices
        self.slab_off = [np.ascontiguousarray(bounds[k], np.int64) for k in range(self.slab_count)]
        self.ncolors = ncolors
        half = (self.slab_count + 1) // 2
        #: the sweep's phases, (phases + 1) offsets into the slabs in visiting order:
        #: the even slabs, whose sweeps may run at once, then the odd ones
        self.phase_off = np.ascontiguousarray([0, half, self.slab_count] if self.slab_count > 1 else [0, 1],
                                              np.int64)
        self._sweeps = (kernels.VbdSweep * self.slab_count)(*[
            kernels.VbdSweep(ncolors, off.ctypes.data, self.color_vertices.ctypes.data)
            for off in self.slab_off])
        self.threads = min(threads, int(np.diff(self.phase_off).max()))
        e = model.structural_count
        limit = np.zeros(s)
        if model.max_stretch > 0:
            limit[:e] = (1.0 + model.max_stretch) * model.rest_lengths[:e]
        # the springs at each vertex, a row each, the rows in the sweep's visiting order (then
        # the pinned vertices): a sweep reads them from one end to the other
        rows = np.r_[self.color_vertices, model.pinned_index].astype(np.int64)
        count = np.diff(vertex_off)[rows]
        row = np.empty(n, np.int64)
        row[rows] = np.arange(n)
        row_off = np.r_[0, np.cumsum(count)]
        entry = by_end[np.repeat(vertex_off[rows] - row_off[:-1], count) + np.arange(2 * s)]
        #: each entry's spring and vertex
        self.adj_spring = ids[entry]
        self.adj_owner = np.repeat(rows, count)
        self.springs = kernels.SpringRows(
            n, row_off, row, others[entry], model.stiffness[self.adj_spring],
            model.rest_lengths[self.adj_spring], np.broadcast_to(model.damping, (s,))[self.adj_spring],
            model.rest_directions[self.adj_spring], limit[self.adj_spring])
        self.levels = _clusters(model, self.free, self.springs, self.adj_owner)
        # the strain limit's projection goes slab by slab as well (sinew_strain_project): a
        # structural spring joining two slabs goes with the lower one, one with a pinned end
        # with its free end's, so the springs of slabs of one parity share no vertex that moves
        where = np.full(n, -1, np.int64)
        where[self.free] = slab
        a, b = where[sp[:e, 0]], where[sp[:e, 1]]
        home = np.maximum(np.where((a >= 0) & (b >= 0), np.minimum(a, b), np.maximum(a, b)), 0)
        by_slab = np.argsort(home, kind="stable")
        self.structural = np.ascontiguousarray(sp[:e][by_slab])
        self.structural_limit = np.ascontiguousarray(limit[:e][by_slab])
        #: (slabs + 1) offsets into structural
        self.strain_off = np.ascontiguousarray(np.searchsorted(home[by_slab], np.arange(self.slab_count + 1)),
                                               np.int64)
        self.inv_mass = np.where(free.astype(bool), 1.0 / model.masses, 0.0)
        # contact stiffness scale: a vertex's springs
        self.spring_stiffness = np.bincount(ends, np.concatenate([model.stiffness, model.stiffness]),
                                            minlength=n)
        self.k_limit = LIMIT_STIFFNESS * float(np.max(model.stiffness[:e], initial=0.0))
        self._table: ctypes.Array | None = None
        self.stage_count = 0
        #: the problem's constants (the springs), set once: each step's problem is a copy
        #: (:meth:`~core.kernels.VbdProblem.copy`)
        self.problem = kernels.VbdProblem(n, 1.0)
        self.problem.set(springs=self.springs, k_limit=self.k_limit)

    def stage_table(self) -> ctypes.Array:
        """The coarse correction's stages as ``sinew_vbd_iterate`` takes them (one group range
        per stage: the one-thread layout), built once."""
        if self._table is None:
            rows = []
            for level in self.levels:
                for st in level.stages:
                    rows.append(kernels.VbdStage(
                        len(st.off) - 1, st.off.ctypes.data, level.vertices.ctypes.data,
                        level.cluster.ctypes.data, ctypes.addressof(level.leave.struct), st.sums.ctypes.data,
                        int(st.whole), st.terms.ctypes.data))
            self._table = (kernels.VbdStage * max(len(rows), 1))(*rows)
            self.stage_count = len(rows)
        return self._table


def _rigid_fit(start: np.ndarray, guess: np.ndarray, free: np.ndarray) -> np.ndarray:
    """``start`` ``(n, 3)`` moved by the rigid motion (rotation and translation, no
    reflection) that best takes its ``free`` vertices to ``guess`` in the least-squares sense
    (Kabsch 1976): the whole cloth's share of the step's motion, which changes no distance."""
    if len(free) < 3:
        return start.copy()
    p, q = start[free], guess[free]
    cp, cq = p.mean(axis=0), q.mean(axis=0)
    u, _, vt = np.linalg.svd((p - cp).T @ (q - cq))
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    rot = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    return np.ascontiguousarray((start - cp) @ rot.T + cq)


class _SelfStep:
    """Self-contact over one step: detection at the step's start and again whenever a vertex
    reaches its ball, the pairs handed to the kernels (``pb``).

    The step's start moves as a whole (to ``start``) by the motion that leaves the fewest
    free vertices farther from the starting guess than the largest ball: none, the median of
    their moves, or the rigid motion that best fits them (:func:`_rigid_fit`); a translation
    or rotation changes no distance, so detection at the start holds for it. No motion when
    a collider is within its reach (``clearance``: each vertex's distance to the nearest
    collider surface at the start; no vertex may be carried behind one). Each vertex's ball
    is :data:`SELF_REACH` times what is left of its move to the guess, plus half the contact
    radius, at most :data:`SELF_BALL` of the median edge.

    ``previous`` (the last step's pairs, when this step continues it) is kept instead of a
    detection when every vertex's start and guess lie well inside its ball there (a cloth at
    rest): the pairs and balls hold wherever the vertices are, as long as each stays in its
    ball. ``workers``: the threads the self query may use."""

    def __init__(self, detection: SelfDetection, model: Model, lay: _Layout, pb: kernels.VbdProblem,
                 start: np.ndarray, guess: np.ndarray, clearance: np.ndarray | None = None,
                 previous: SelfPairs | None = None, workers: kernels.Workers | None = None) -> None:
        self.detection, self.pb, self.workers = detection, pb, workers
        r = detection.distance
        k = CONTACT_STIFFNESS * (pb.get("w") + lay.spring_stiffness)
        pb.set(self_r=r, self_k=float(np.median(k[lay.free])) if len(lay.free) else 0.0,
               faces=detection.faces, edges=detection.edges)
        self.detections = 0
        if previous is not None and len(previous.anchor) == len(start):
            at_start = np.linalg.norm(start - previous.anchor, axis=1)
            at_guess = np.linalg.norm(guess - previous.anchor, axis=1)
            if np.all(at_start <= 0.5 * previous.bound) and np.all(at_guess <= KEEP_PAIRS * previous.bound):
                self.start = start
                self.bound = previous.bound
                self.cap = float(previous.bound.max(initial=0.0))
                self._use(previous, at_start)
                return
        e = model.structural_count
        edge = float(np.median(model.rest_lengths[:e])) if e else r
        cap = max(SELF_BALL * edge, 0.25 * r)
        # the whole cloth's motion: none, the median translation or the best rigid motion,
        # whichever leaves the fewest free vertices a move beyond the largest ball (each
        # costs detections); none when it would carry a vertex into a collider's reach
        free = lay.free
        best, beyond = start, np.inf
        candidates = [start]
        if len(free):
            candidates += [start + np.median(guess[free] - start[free], axis=0), _rigid_fit(start, guess, free)]
        for moved in candidates:
            if moved is not start and clearance is not None and \
                    float(np.linalg.norm(moved - start, axis=1).max()) >= float(clearance[free].min()):
                continue
            far = int(np.count_nonzero(np.linalg.norm(guess[free] - moved[free], axis=1) > cap))
            if far < beyond:
                best, beyond = moved, far
        moved = best
        #: the step's start after the whole cloth's motion, where the guard starts from
        self.start = moved
        self.cap = cap
        left = np.linalg.norm(guess - moved, axis=1)
        self.bound = np.ascontiguousarray(np.minimum(SELF_REACH * left + 0.5 * r, cap))
        self._detect(moved)

    def _detect(self, x: np.ndarray) -> None:
        self.detections += 1
        self._use(self.detection.detect(x, self.bound, self.workers), np.zeros(len(x)))

    def _use(self, found: SelfPairs, moved: np.ndarray) -> None:
        """Hands ``found`` to the kernels, each vertex ``moved`` from its anchor."""
        self.found = found
        self.moved = np.ascontiguousarray(moved)
        self.pb.set(pair=found.pair if len(found.pair) else np.zeros((1, 2), np.int64),
                    pair_dist=found.distance if len(found.pair) else np.zeros(1),
                    self_vf=found.vf, inc_off=found.inc_off,
                    inc=found.inc if len(found.inc) else np.zeros(1, np.int64),
                    self_anchor=found.anchor, self_bound=found.bound, self_moved=self.moved)

    def moved_again(self, x: np.ndarray, rows: np.ndarray) -> None:
        """Vertices ``rows`` were put somewhere in Python (the hard pins): their distance from
        their anchors, for the kernels' bounds."""
        self.moved[rows] = np.linalg.norm(x[rows] - self.found.anchor[rows], axis=1)

    def in_contact(self, x: np.ndarray) -> int:
        """Listed pairs closer than the contact radius at ``x``."""
        f = self.found
        if not len(f.pair):
            return 0
        vf = f.vf
        det = self.detection
        idx = np.concatenate([np.c_[f.pair[:vf, 0], det.faces[f.pair[:vf, 1]]],
                              np.c_[det.edges[f.pair[vf:, 0]], det.edges[f.pair[vf:, 1]]]])
        is_vf = np.arange(len(idx)) < vf
        _, sep = _closest(x[idx], is_vf)
        return int(np.count_nonzero(np.linalg.norm(sep, axis=1) < det.distance))

    def again(self, x: np.ndarray, near: float = 0.98) -> None:
        """Detection again at ``x`` when a vertex has moved ``near`` of its ball or more; the
        balls of the vertices that reached theirs double, up to the largest (they move more
        than their guess said: a cloth hit by another part of itself)."""
        moved = np.linalg.norm(x - self.found.anchor, axis=1)
        hit = moved >= near * self.found.bound
        if np.any(hit):
            self.bound = self.bound.copy()
            self.bound[hit] = np.minimum(2.0 * self.bound[hit], self.cap)
            self._detect(x)


class VertexBlockDescent(Integrator):
    """Vertex Block Descent with contact, friction and the strain limit inside the solve.

    Parameters
    ----------
    tolerance : float, optional
        A step has converged when ``‖∇g‖ ≤ tolerance · max(‖∇g(x_start)‖, ‖M g‖)`` (the
        contact and friction terms included); default :data:`~.base.CONVERGENCE_RTOL`.
    check_every : int
        Also evaluate ``‖∇g‖`` after every this many iterations and stop early once it
        meets the tolerance (0: only after the last iteration; an evaluation costs about
        one sweep, and VBD rarely meets a tight tolerance early).
    threads : int, optional
        Threads of the team that runs the iterations (default
        :func:`~core.kernels.thread_count`). The sweep's slabs (:data:`_SLAB` free vertices
        or more each) and the coarse stages' groups go to the threads, so small cloth runs
        on one thread; with self-contact the iterations run on one thread. The result does
        not depend on the number of threads (the same arithmetic in the same order).
    global_start : int, optional
        Local/global iterations of the start of pinned cloth, hard or soft pins (default
        :data:`GLOBAL_START`; 0: VBD's own start for all cloth).
    acceleration : {"NONE", "ANDERSON"}
        ``"ANDERSON"`` (default): the iterations (each a sweep and the coarse correction, a
        map ``G``) are Anderson-accelerated inside ``sinew_vbd_iterate`` (memory
        ``memory``), each extrapolated iterate reached through the guard, so it stays
        penetration-free; Anderson's history restarts wherever an iteration moves the cloth
        farther than the one before it. With self-contact too (its iterations run on one
        thread: its guard reads the other vertices' moves).
        ``"NONE"``: plain iterations (docs/CONTACT.md, *Anderson acceleration of the
        iterations*).
    memory : int
        Anderson's memory (the last differences it combines), 1 to
        :data:`~core.kernels.ANDERSON_MEMORY`.
    """

    name = "VBD"
    label = "Vertex Block Descent"
    description = ("Vertex Block Descent (Chen et al. 2024): per-vertex Newton steps with "
                   "contact, friction and the strain limit inside the solve; "
                   "penetration-free at any step")
    implicit = True
    #: Contact and self-contact are part of the solve on every model
    #: (:meth:`contact_inside_for`): the simulator runs no contact or self-collision stage
    #: after it, and hands the step its self-collision.
    contact_inside = True

    def __init__(self, tolerance: float | None = None, check_every: int = 0,
                 threads: int | None = None, global_start: int | None = None,
                 acceleration: str = "ANDERSON", memory: int = 5) -> None:
        if acceleration not in ("NONE", "ANDERSON"):
            raise ValueError(f"acceleration must be 'NONE' or 'ANDERSON', got {acceleration!r}")
        if not 1 <= int(memory) <= kernels.ANDERSON_MEMORY:
            raise ValueError(f"memory must be 1 to {kernels.ANDERSON_MEMORY}, got {memory!r}")
        self.acceleration = acceleration
        self.memory = int(memory)
        self._anderson: kernels.Anderson | None = None
        self.tolerance = CONVERGENCE_RTOL if tolerance is None else float(tolerance)
        self.global_start = GLOBAL_START if global_start is None else max(int(global_start), 0)
        self._local_global: LocalGlobal | None = None
        self.check_every = max(int(check_every), 0)
        self.threads = kernels.thread_count() if threads is None else max(int(threads), 1)
        self._workers = kernels.Workers(self.threads)
        #: ``(f, 3)`` the collider normal force on each free vertex at the end of the last
        #: step's iterations (N).
        self.contact_force = np.zeros((0, 3))
        self._layout: tuple[int, _Layout] | None = None
        self._soup: tuple[list, ColliderSoup] | None = None
        # (model uid, x (n, 3) and v₀ (n, 3) of the last step): its acceleration, for _guess
        self._motion: tuple[int, np.ndarray, np.ndarray] | None = None
        self._self: tuple[tuple[int, int], SelfDetection] | None = None
        #: the last step's self pairs, kept for the next step of a cloth at rest
        self._self_pairs: tuple[tuple[int, int], SelfPairs] | None = None
        #: ``‖∇g‖`` at the start and at each check of the last step (N).
        self.residual_history: list[float] = []
        #: Self-contact pairs within their contact radius at the end of the last step.
        self.self_contacts = 0
        #: Self detections of the last step.
        self.self_detections = 0

    def contact_inside_for(self, model: Model) -> bool:
        """Always: contact is part of VBD's solve (:meth:`~.base.Integrator.contact_inside_for`)."""
        return True

    def layout(self, model: Model) -> _Layout:
        """The model's adjacency and colours (built once per model)."""
        if self._layout is None or self._layout[0] != model.uid:
            self._layout = (model.uid, _Layout(model, self.threads))
        return self._layout[1]

    def soup(self, colliders: Sequence[Any], region: tuple[np.ndarray, np.ndarray] | None = None) -> ColliderSoup:
        """The step's colliders as arrays; the same static colliders give the same soup
        (its grid is built once). With ``region`` ``(lo, hi)``, the colliders whose box does
        not meet it are left out and fence the vertices' bounds instead (:func:`split_near`:
        a far body costs a box test, not its triangles), and so are a moving mesh's triangles
        out of it (the region's walls bound the vertices' balls)."""
        cols = list(colliders)
        fence = np.zeros((0, 2, 3))
        if region is not None:
            cols, fence = split_near(cols, *region)
        if (self._soup is None or self._soup[1].cdisp is not None or len(self._soup[0]) != len(cols)
                or any(a is not b for a, b in zip(self._soup[0], cols))):
            self._soup = (cols, ColliderSoup(cols, region))
        self._soup[1].fence = fence
        self._soup[1].workers = self._workers
        return self._soup[1]

    def self_detection(self, model: Model, self_collision: SelfCollision) -> SelfDetection:
        """Self detection for ``self_collision`` on ``model`` (built once per pair)."""
        key = (model.uid, id(self_collision))
        if self._self is None or self._self[0] != key:
            self._self = (key, SelfDetection(self_collision))
        return self._self[1]

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 10, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None, tolerance: float | None = None,
             self_collision: SelfCollision | None = None,
             start: tuple[np.ndarray, np.ndarray] | None = None, explicit: bool = False) -> StepInfo:
        """One step (:class:`~.base.Integrator`); with ``self_collision``, the cloth's contact
        with itself is inside the solve as well (:class:`_SelfStep`, ``src/selfcontact.h``).

        With ``start`` ``(x, v)``, each ``(n, 3)``, another integrator's solve of the step
        without contact (:meth:`~.base.Integrator._finish`): the iterations start from ``x``
        (the hard pins at their targets) and the velocities are ``v`` plus what the contact
        iterations moved over ``h``. With ``explicit`` that solve took the springs' forces
        explicitly (EXPLICIT, SYMPLECTIC): the iterations then minimise
        ``½ Σ mᵢ/h² ‖xᵢ − startᵢ‖²`` plus the strain limit, contact and friction (the
        springs, their damping, drag and fields are in ``start`` already)."""
        tol = self.tolerance if tolerance is None else float(tolerance)
        lay = self.layout(model)
        targets = pin_targets(model, state, pins)
        obj = Objective(model, state, h, targets, external=external)
        x0 = obj.x0
        n = len(x0)
        pi = model.pinned_index
        hard = split_targets(model, targets)[0]
        soup = self.soup(colliders, self._region(x0, obj.v0, targets, h)) if len(colliders) else None
        pb = lay.problem.copy(h)
        pb.set(x_prev=x0, w=obj.w, y=obj.y, kc=CONTACT_STIFFNESS * (obj.w + lay.spring_stiffness),
               eps_u=STATIC_SPEED * h)
        # the residual's reference is x₀ + h v₀ with the pins at their targets, as for NEWTON
        # and FAST; the iterations start from _guess (pinned cloth: _global_guess; another
        # integrator's contact: its solve), pushed back out of the colliders' thickness near
        # them, through the guard
        reference = obj.start(targets)
        given = v_given = None
        if start is not None:
            v_given = kernels.array(start[1], np.float64, (n, 3), "start velocities")
            given = kernels.array(start[0], np.float64, (n, 3), "start positions").copy()
            given[pi] = hard
            x = given.copy()
            if explicit:
                reference = given.copy()
                pb.set(w=model.masses / (h * h), y=given, elastic=False)
        elif self.global_start and (len(pi) or len(model.anchor_index)) and model.spring_count:
            x = self._global_guess(model, obj, reference, hard)
        else:
            x = self._guess(model, state, obj, reference, h)
        contacts = Contacts.empty(n)  # detection fills it in place: the kernels keep its addresses
        pb.set(c_id=contacts.ids, c_count=contacts.count, anchor=contacts.anchor,
               bound=contacts.bound, c_dist=contacts.slot_distance)
        start = x0.copy()
        if soup is not None:
            if soup.cdisp is not None:
                carry = self._carry(soup, x0, h)
                carry[pi] = 0.0  # hard pins are where their targets put them
                start += carry
                x += carry
                reference += carry
            # (a vertex a moving collider swept over is already out of it: the carry)
            reach = np.linalg.norm(x - start, axis=1)
            soup.detect(start, 1.5 * soup.max_radius + 3.0 * reach + 1e-6, contacts)
            if soup.cdisp is None:
                self._stick(model, lay, state, x, h, soup, contacts)
            pb.set(cv=soup.cv, cdisp=soup.cdisp, tris=soup.tris, closed_tri=soup.closed,
                   tri_normal=soup.normals, tri_radius=soup.radius, tri_mu=soup.mu,
                   prim_type=soup.prim_type, prim=soup.prim)
            resting = np.flatnonzero((contacts.distance < 1.5 * soup.max_radius) & lay.movable)
            kernels.check_status(pb.lib.sinew_vbd_push_out(
                pb.struct, len(resting), resting.ctypes.data, x.ctypes.data), "VBD push-out")
        else:
            pb.set(cv=np.zeros((0, 3)), cdisp=None, tris=np.zeros((0, 3), np.int64),
                   closed_tri=np.zeros(0, np.uint8), tri_radius=np.zeros(0), tri_mu=np.zeros(0),
                   prim_type=np.zeros(0, np.int32), prim=np.zeros((0, 8)))
        own = None
        if self_collision is not None:
            # (the whole cloth's shift must not carry a vertex into a collider's thickness)
            clearance = None if soup is None else contacts.distance - 2.0 * soup.max_radius
            kept = (self._self_pairs[1] if self._self_pairs is not None and self._continues(model, state)
                    and self._self_pairs[0] == (model.uid, id(self_collision)) else None)
            own = _SelfStep(self.self_detection(model, self_collision), model, lay, pb, start, x,
                            clearance, kept, self._workers)
            start = own.start
        if soup is not None or own is not None:  # the guess goes through the guard too
            held = np.zeros(1, np.int64)
            target = x
            x = np.ascontiguousarray(start)
            kernels.check_status(pb.lib.sinew_vbd_guard(pb.struct, x.ctypes.data, target.ctypes.data,
                                                        held.ctypes.data), "VBD guard")
        if len(pi):  # hard pins are where their targets put them, whatever the guard did
            x[pi] = hard
            if own is not None:
                own.moved_again(x, pi)
        its, r, r0 = self._iterate(pb, lay, x, reference, max(int(iterations), 1), tol, model,
                                   soup, contacts, own)
        limited = self._limit(model, lay, pb, x, soup, contacts, x0, own)
        self.self_contacts = own.in_contact(x) if own is not None else 0
        self.self_detections = own.detections if own is not None else 0
        self._self_pairs = None if own is None else ((model.uid, id(self_collision)), own.found)
        if len(pi):
            x[pi] = hard
        if soup is not None:
            self._report(lay, x, soup, contacts, colliders)
        state.v[...] = (x - x0) / h if given is None else v_given + (x - given) / h
        state.x[...] = x
        self._motion = (model.uid, x.copy(), obj.v0.copy())
        rel = r / force_scale(model, r0)
        ok = bool(rel <= tol) if tol > 0 else True
        return StepInfo(its, r, ok and limited, rel, limited)

    @staticmethod
    def _region(x0: np.ndarray, v0: np.ndarray, targets: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
        """Where the cloth may get to within the step, for leaving far colliders out (their
        boxes still bound every vertex's move: the soup's fence): the box of its start, its
        start moved on by ``h v₀`` and the pins' targets, grown by :data:`REGION_MARGIN` plus
        twice the longest such move."""
        ahead = x0 + h * v0
        pts = [x0, ahead] + ([targets] if len(targets) else [])
        lo, hi = points_box(*pts)
        grow = REGION_MARGIN + 2.0 * float(np.sqrt(np.einsum("ij,ij->i", ahead - x0, ahead - x0).max(initial=0.0)))
        return lo - grow, hi + grow

    def _continues(self, model: Model, state: State) -> bool:
        """Whether ``state`` is where the last step of this integrator left ``model``
        (what that step measured applies to this one)."""
        last = self._motion
        return last is not None and last[0] == model.uid and np.array_equal(last[1], state.x)

    def _guess(self, model: Model, state: State, obj: Objective, reference: np.ndarray,
               h: float) -> np.ndarray:
        """The iterations' start ``(n, 3)``: VBD's adaptive initialisation (Chen et al. 2024),
        ``x₀ + h v₀`` plus the share of the inertial prediction's own acceleration
        ``a = (ŷ − x₀ − h v₀)/h²`` (gravity, drag, fields) that the vertex showed along ``a``
        in the last step, from 0 (it was held: a cloth resting or sticking stays) to all of it
        (free flight). Without a last step (or after another state was set), all of it."""
        push = obj.y - reference
        share = np.ones(len(reference))
        last = self._motion
        if self._continues(model, state):
            shown = (state.v - last[2]) * h  # the last step's acceleration × h²
            size = np.einsum("ij,ij->i", push, push)
            along = np.einsum("ij,ij->i", shown, push)
            share = np.clip(along / np.where(size > 0, size, 1.0), 0.0, 1.0)
        return reference + share[:, None] * push

    def _global_guess(self, model: Model, obj: Objective, reference: np.ndarray,
                      hard: np.ndarray) -> np.ndarray:
        """The iterations' start ``(n, 3)`` for pinned cloth (hard or soft pins):
        :attr:`global_start` iterations of FAST's prefactored local/global solve of the same
        objective without contact (Liu et al. 2013), from ``reference`` (``x₀ + h v₀``, the
        hard pins at their targets ``hard``). Where a cloth hangs from its pins, its slow motions are the
        whole cloth's, which Gauss–Seidel's sweeps and the coarse translations reach only
        over many iterations and a global solve reaches at once. The colliders' push,
        friction's hold and the guard then act on it as on VBD's own start. (No residual is
        measured: the last iterate is the start, not the best one seen; 2–4 % faster on the
        skirt and the dress, which end as slow or slower.)"""
        if self._local_global is None:
            self._local_global = LocalGlobal(compute_residual=False)
        x = reference.copy()
        self._local_global.solve_free(model, obj, x, hard, self.global_start)
        return x

    def _stick(self, model: Model, lay: _Layout, state: State, x: np.ndarray, h: float,
               soup: ColliderSoup, contacts: Contacts) -> None:
        """Takes out of the start ``x`` the velocity along the surface of each vertex that
        colliders standing still held at the end of the last step (its normal force there
        ``λ``, its direction the normal) and whose friction can stop within the step,
        ``m |v_t| ≤ μ λ h``
        (``μ`` the largest of the collider triangles listed for it and the planes and spheres
        within its reach). Where friction holds a vertex, implicit Euler's step has it
        stick; iterations started from the old velocity that stop short of converging let
        a resting cloth creep on instead (the bench's drape at μ 0.05 slid off its ball).
        The start only: the solve decides."""
        f = self.contact_force
        if not self._continues(model, state) or len(f) != len(lay.free):
            return
        lam = np.sqrt(np.einsum("ij,ij->i", f, f))
        touching = np.flatnonzero(lam > 0)
        if not len(touching):
            return
        idx = lay.free[touching]
        # each vertex's μ: its listed triangles', and the primitives' near it
        slots = contacts.ids[idx]
        listed = np.arange(slots.shape[1])[None, :] < contacts.count[idx, None]
        mu = np.where(listed, soup.mu[slots] if len(soup.mu) else 0.0, 0.0).max(axis=1, initial=0.0)
        p = x[idx]
        reach = np.linalg.norm(p - state.x[idx], axis=1)
        for col in soup.primitives:
            near = col.signed_distance(p) < 2.0 * col.thickness + reach
            mu = np.where(near, np.maximum(mu, col.friction), mu)
        normal = f[touching] / lam[touching, None]
        v = state.v[idx]
        vt = v - np.einsum("ij,ij->i", v, normal)[:, None] * normal
        held = model.masses[idx] * np.sqrt(np.einsum("ij,ij->i", vt, vt)) <= mu * lam[touching] * h
        x[idx[held]] -= h * vt[held]

    @staticmethod
    def _carry(soup: ColliderSoup, x0: np.ndarray, h: float) -> np.ndarray:
        """``(n, 3)``: how far the moving colliders push each vertex over the step (zero
        elsewhere). Each vertex is measured against the colliders where they were at the
        step's start (each of its slot triangles there, the point of it nearest the vertex,
        that point's displacement ``D``): a surface that moves toward the vertex by more than
        the gap to its thickness pushes it along the outward normal by as much, as an
        inelastic hit would (a vertex resting on it: by the surface's whole approach; the
        largest push of its surfaces). The motion along
        the surface is friction's to pass on, in the solve. The straight moves of the guard
        cannot do this: it holds colliders still at their end-of-step positions, which a fast
        collider may have moved past the vertex."""
        out = np.zeros_like(x0)
        if not len(soup.tris):
            return out
        moved = np.sqrt(np.einsum("ij,ij->i", soup.cdisp, soup.cdisp))
        radius = np.full(len(x0), 2.0 * soup.max_radius + float(moved.max()) + 1e-6)
        before = soup.at_start(radius)
        near = before.detect(x0, radius)
        n, k = near.ids.shape
        x0 = kernels.array(x0, np.float64, (n, 3), "positions")
        ids = kernels.array(near.ids, np.int64, (n, k), "contact slots")
        count = kernels.array(near.count, np.int64, (n,), "contact counts")
        dist = kernels.array(near.distance, np.float64, (n,), "contact distances", finite=False)
        slot = kernels.array(near.slot_distance, np.float64, (n, k), "slot distances", finite=False)
        kernels.check_status(kernels.library().sinew_vbd_carry(
            n, x0.ctypes.data, k, ids.ctypes.data, count.ctypes.data, dist.ctypes.data, slot.ctypes.data,
            len(before.cv), before.cv.ctypes.data, soup.cdisp.ctypes.data, len(soup.tris), soup.tris.ctypes.data,
            soup.closed.ctypes.data, soup.radius.ctypes.data, out.ctypes.data), "VBD carry")
        return out

    def _iterate(self, pb: kernels.VbdProblem, lay: _Layout, x: np.ndarray, reference: np.ndarray,
                 iterations: int, tol: float, model: Model, soup: ColliderSoup | None,
                 contacts: Contacts, own: _SelfStep | None = None) -> tuple[int, float, float]:
        """Sweeps on ``x`` in place (detection again after a sweep where a vertex reached its
        bound); returns (iterations, ``‖∇g‖`` at the end, ``‖∇g(reference)‖``)."""
        lib = pb.lib
        ptr = kernels.address(x)
        force = np.empty((len(lay.free), 3))
        cforce = np.empty_like(force)
        held = np.zeros(max(self._workers.threads, 1), np.int64)
        table = lay.stage_table()
        # (with self-contact a slab's sweep reads vertices another slab's thread moves: one thread)
        threads = 1 if own is not None else lay.threads
        iterate = partial(lib.sinew_vbd_iterate, pb.struct)
        # Anderson's history (kernels.Anderson), run inside the iterations' kernel (with
        # self-contact on one thread: its guard reads the other vertices' moves)
        aa = None
        if self.acceleration == "ANDERSON" and len(lay.free):
            if self._anderson is None or self._anderson.size != x.size:
                self._anderson = kernels.Anderson(self.memory, x.shape)
            aa = self._anderson
            aa.clear()
        sweep = (len(lay.phase_off) - 1, lay.phase_off.ctypes.data, ctypes.addressof(lay._sweeps),
                 lay.stage_count, ctypes.addressof(table), None if aa is None else ctypes.addressof(aa.struct))

        def run(k: int) -> int:
            return self._workers.team(lambda team, t: iterate(team, t, *sweep, k, ptr, held.ctypes.data + 8 * t),
                                      threads, "VBD iterations")

        m = len(lay.free)

        def residual(at: int = ptr) -> float:
            # (forces only read the positions: their blocks go to the threads, self-contact or not)
            parts = self._workers.now(lay.threads)

            def block(team: int, t: int) -> int:  # (in the sweep's order: the springs' rows')
                lo, hi = kernels.block(m, t, parts)
                return lib.sinew_vbd_forces(pb.struct, hi - lo, lay.color_vertices.ctypes.data + 8 * lo, at,
                                            force.ctypes.data + 24 * lo, cforce.ctypes.data + 24 * lo)

            self._workers.team(block, parts, "VBD forces")
            return F.norm(force.reshape(-1))

        r0 = residual(kernels.address(np.ascontiguousarray(reference)))
        history = [r0]
        scale = force_scale(model, r0)
        r = r0
        its = 0
        while its < iterations:
            chunk = iterations - its
            if self.check_every:
                chunk = min(chunk, self.check_every - its % self.check_every)
            its += run(chunk)
            if held[0] and own is not None:
                own.again(x)
            if held[0] and soup is not None:  # (every thread wrote the same count)
                # vertices at their bound: detection again for them, where they are now (the
                # others' balls still hold: their anchors have not changed)
                moved = np.linalg.norm(x - contacts.anchor, axis=1)
                at = np.flatnonzero(moved >= 0.98 * contacts.bound)
                if len(at):
                    reach = np.linalg.norm(x[at] - pb.get("x_prev")[at], axis=1)
                    soup.detect_some(x, at, 1.5 * soup.max_radius + 3.0 * reach + 1e-6, contacts)
            if held[0] and aa is not None:
                aa.clear()  # (another map from here)
            if its == iterations or (self.check_every and its % self.check_every == 0):
                r = residual()
                history.append(r)
                if tol > 0 and r <= tol * scale:
                    break
        self.residual_history = history
        self.contact_force = np.empty_like(cforce)  # (by lay.free)
        self.contact_force[lay.sweep_rank] = cforce
        return its, r, r0

    def _limit(self, model: Model, lay: _Layout, pb: kernels.VbdProblem, x: np.ndarray,
               soup: ColliderSoup | None, contacts: Contacts, x0: np.ndarray,
               own: _SelfStep | None = None) -> bool:
        """The strain limit made exact by projection, each vertex's moves within its contact
        bound (detection again where the iterations left the cloth, and again while the
        bounds held the projection back); whether it holds. The projection goes slab by slab
        on the threads (one thread with self-contact: a move's test reads other vertices)."""
        if model.max_stretch <= 0 or not len(lay.structural):
            return True
        lib = kernels.library()
        tol = _limit_tolerance(model.max_stretch)
        threads = 1 if own is not None else lay.threads
        args = (len(x), len(lay.structural), lay.structural.ctypes.data, lay.structural_limit.ctypes.data,
                lay.inv_mass.ctypes.data, lay.slab_count, lay.strain_off.ctypes.data)

        def project(rounds: int, guard: Any) -> int:
            return self._workers.team(
                lambda team, t: lib.sinew_strain_project(team, t, *args, rounds, tol, guard, x.ctypes.data),
                threads, "strain limit")

        over = project(0, None)  # a count, no move
        if over == 0:
            return True
        for attempt in range(_LIMIT_DETECTIONS):
            if own is not None:
                own.again(x, 0.5)
            if soup is not None:
                reach = np.linalg.norm(x - x0, axis=1)
                if attempt == 0:
                    # the balls of the last detection still hold for the vertices that
                    # have not neared their edge: detection again for the others
                    near = np.flatnonzero(np.linalg.norm(x - contacts.anchor, axis=1) > 0.5 * contacts.bound)
                    if len(near):
                        soup.detect_some(x, near, 1.5 * soup.max_radius + 3.0 * reach[near] + 1e-6, contacts)
                else:
                    soup.detect(x, 1.5 * soup.max_radius + 3.0 * reach + 1e-6, contacts)
            over = project(_LIMIT_ROUNDS, pb.struct if soup is not None or own is not None else None)
            if over == 0 or (soup is None and own is None):
                break
        return over == 0

    def _report(self, lay: _Layout, x: np.ndarray, soup: ColliderSoup, contacts: Contacts,
                colliders: Any) -> None:
        """Contact statistics of the step for the diagnostics: vertices touching a collider,
        and, when the step ends a frame, the deepest a vertex near one ends inside it (0 is
        the guarantee; a detection of its own)."""
        stats = getattr(colliders, "stats", None)
        if stats is None:
            return
        touching = int(np.count_nonzero(np.any(self.contact_force != 0.0, axis=1)))
        near = np.flatnonzero((contacts.count > 0) | (contacts.distance < 0.0))
        depth = 0.0
        if len(near) and getattr(colliders, "ends_frame", True):
            end = Contacts.empty(len(near))
            soup.detect(np.ascontiguousarray(x[near]), np.full(len(near), 1.5 * soup.max_radius + 1e-6), end)
            depth = float(max(0.0, -end.distance.min(initial=0.0)))
        stats.add(touching, depth, 0.0)
