"""The immutable spring :class:`Model`, the mutable :class:`State`, and the builder.

A :class:`Model` never changes during a bake (rest lengths, stiffness, masses,
pins and cached index arrays); a :class:`State` holds what changes each step
(positions and velocities). Integrators key their prefactorisations on
``Model.uid``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union

import numpy as np
import scipy.sparse as sp

from ..errors import SinewError, TopologyError
from .topology import SpringSet, material_scale, vertex_areas, vertex_measures

__all__ = ["Model", "State", "build_model", "lumped_masses"]

_uids = itertools.count(1)

ArrayLike = Union[np.ndarray, Sequence[float], float]


@dataclass(frozen=True, eq=False)
class Model:
    """Everything about a spring system that stays fixed during a bake.

    Attributes
    ----------
    rest_positions : numpy.ndarray
        Shape ``(n, 3)``, m.
    springs : numpy.ndarray
        Shape ``(s, 2)``, int64 vertex indices ``(i, j)``.
    rest_lengths : numpy.ndarray
        Shape ``(s,)``, m (may be 0).
    stiffness : numpy.ndarray
        Shape ``(s,)``, N/m, energy ``E = ½ k (‖xᵢ − xⱼ‖ − L)²``.
    damping : numpy.ndarray
        Shape ``(s,)``, N·s/m, force ``−k_d ((vᵢ − vⱼ)·d̂) d̂`` on ``i``.
    masses : numpy.ndarray
        Shape ``(n,)``, kg, all > 0.
    pinned : numpy.ndarray
        Shape ``(n,)``, bool. Pin targets are passed in ascending vertex order.
    air_drag : float or numpy.ndarray
        1/s; force ``−c m (v − wind)`` on every vertex: one ``c`` for all, or shape ``(n,)``
        per vertex (spring bones: chains of different drag in one model).
    gravity : numpy.ndarray
        Shape ``(3,)``, m/s².
    wind : numpy.ndarray
        Shape ``(3,)``, m/s.
    edge_springs : int
        The first ``edge_springs`` springs are the mesh's edges (structural springs);
        strain is reported over them. -1 (the default) means every spring.
    anchors : numpy.ndarray
        Shape ``(n,)`` or ``(0,)``, N/m: soft-pin stiffness per vertex, a
        zero-rest-length spring ``E = ½ kₐ ‖xᵢ − tᵢ‖²`` to the vertex's animated
        target ``tᵢ`` (0 = none). Empty (the default) means no soft pins.
    max_stretch : float
        Strain limit (fraction, 0 = off): after every step no structural spring is
        longer than ``(1 + max_stretch) L`` (:mod:`.strainlimit`).
    spring_stretch : numpy.ndarray
        Shape ``(e,)`` over the structural springs, each > 0, or ``(0,)`` (the default):
        each spring's own strain limit (spring bones: rigid and stretchy chains in one model);
        ``max_stretch`` is then their largest. Honoured by the post-solve strain limit (every
        integrator but VBD, which the :class:`~.simulate.Simulator` refuses for such a model).
    edge_contact : bool or numpy.ndarray
        The structural springs collide as edges (segments) with colliders: mesh ridges and
        spheres (cloth: True, all of them); False: only the vertices collide; a bool array of
        shape ``(e,)`` over the structural springs: those that collide as edges (spring bones:
        every bone but each chain's first, which starts at its root, often inside the body it
        hangs from, and cannot be kept outside it).

    The remaining attributes are caches built in ``__post_init__``:
    ``uid`` (int), ``pinned_index`` ``(p,)``, ``free_index`` ``(f,)``,
    ``anchor_index`` ``(q,)`` (soft-pinned vertices), ``anchor_stiffness`` ``(q,)`` N/m,
    ``target_index`` ``(t,)`` (hard or soft pinned: the vertices whose targets
    ``Integrator.step(pins=...)`` and ``Simulator.advance`` receive, ascending),
    ``target_hard`` / ``target_anchor`` (positions in ``target_index`` of the hard
    and soft pins),
    ``free_slot`` ``(n,)`` (position in ``free_index`` or -1),
    ``incidence`` (CSR ``(s, n)``, +1 at ``i``, −1 at ``j``),
    ``incidence_t`` (CSR ``(n, s)``), ``rest_directions`` ``(s, 3)``
    (unit, zero for zero rest length), ``vertex_drag`` ``(n,)`` (``air_drag`` per vertex, 1/s)
    ``stretch_limits`` ``(e,)`` (each structural spring's strain limit, ``max_stretch`` or
    ``spring_stretch``), ``contact_edges`` ``(c, 2)`` (the structural springs that collide
    as edges, :attr:`edge_contact`) and ``segment_contact`` (bool: edges collide and they are
    what the model is, chains whose vertices are on at most two structural springs, a rope,
    or edge contact is chosen per spring, spring bones: the post-solve contact stage keeps
    their segments out of colliders; a cloth's contact is its vertices', inside the solve).
    """

    rest_positions: np.ndarray
    springs: np.ndarray
    rest_lengths: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    masses: np.ndarray
    pinned: np.ndarray
    air_drag: float | np.ndarray = 0.0
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    wind: np.ndarray = field(default_factory=lambda: np.zeros(3))
    edge_springs: int = -1
    anchors: np.ndarray = field(default_factory=lambda: np.zeros(0))
    max_stretch: float = 0.0
    edge_contact: bool | np.ndarray = True
    spring_stretch: np.ndarray = field(default_factory=lambda: np.zeros(0))
    uid: int = field(init=False)
    segment_contact: bool = field(init=False, repr=False)
    pinned_index: np.ndarray = field(init=False, repr=False)
    free_index: np.ndarray = field(init=False, repr=False)
    free_slot: np.ndarray = field(init=False, repr=False)
    incidence: sp.csr_matrix = field(init=False, repr=False)
    incidence_t: sp.csr_matrix = field(init=False, repr=False)
    rest_directions: np.ndarray = field(init=False, repr=False)
    anchor_index: np.ndarray = field(init=False, repr=False)
    anchor_stiffness: np.ndarray = field(init=False, repr=False)
    target_index: np.ndarray = field(init=False, repr=False)
    target_hard: np.ndarray = field(init=False, repr=False)
    target_anchor: np.ndarray = field(init=False, repr=False)
    vertex_drag: np.ndarray = field(init=False, repr=False)
    stretch_limits: np.ndarray = field(init=False, repr=False)
    contact_edges: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.rest_positions)
        s = len(self.springs)
        put = object.__setattr__
        put(self, "uid", next(_uids))
        pinned_index = np.flatnonzero(self.pinned)
        free_index = np.flatnonzero(~self.pinned)
        free_slot = np.full(n, -1, dtype=np.int64)
        free_slot[free_index] = np.arange(len(free_index))
        put(self, "pinned_index", pinned_index)
        put(self, "free_index", free_index)
        put(self, "free_slot", free_slot)
        rows = np.repeat(np.arange(s), 2)
        cols = self.springs.reshape(-1)
        vals = np.tile([1.0, -1.0], s)
        inc = sp.csr_matrix((vals, (rows, cols)), shape=(s, n))
        put(self, "incidence", inc)
        put(self, "incidence_t", inc.T.tocsr())
        d = self.rest_positions[self.springs[:, 0]] - self.rest_positions[self.springs[:, 1]]
        with np.errstate(invalid="ignore", divide="ignore"):
            u = np.where(self.rest_lengths[:, None] > 0, d / self.rest_lengths[:, None], 0.0)
        put(self, "rest_directions", u)
        anchors = np.asarray(self.anchors, dtype=np.float64).reshape(-1)
        if len(anchors) == 0:
            anchors = np.zeros(n)
        put(self, "anchors", anchors)
        soft = (anchors > 0) & ~np.asarray(self.pinned, dtype=bool)
        anchor_index = np.flatnonzero(soft)
        put(self, "anchor_index", anchor_index)
        put(self, "anchor_stiffness", anchors[anchor_index])
        target_index = np.flatnonzero(soft | self.pinned)
        put(self, "target_index", target_index)
        put(self, "target_hard", np.flatnonzero(self.pinned[target_index]))
        put(self, "target_anchor", np.flatnonzero(soft[target_index]))
        drag = np.asarray(self.air_drag, dtype=np.float64)
        if drag.ndim:
            if drag.shape != (n,) or not np.all(np.isfinite(drag)) or np.any(drag < 0):
                raise SinewError(f"air_drag must be a number or finite values >= 0 of shape ({n},)")
            put(self, "air_drag", drag.copy())
            self.air_drag.setflags(write=False)
        put(self, "vertex_drag", np.broadcast_to(drag, (n,)).copy())
        e = self.structural_count
        own = np.asarray(self.spring_stretch, dtype=np.float64).reshape(-1)
        if len(own):
            if own.shape != (e,) or not np.all(np.isfinite(own)) or np.any(own <= 0):
                raise SinewError(f"spring_stretch must be values > 0 of shape ({e},), one per structural spring")
            put(self, "max_stretch", float(own.max()))
        put(self, "spring_stretch", own)
        put(self, "stretch_limits", own.copy() if len(own) else np.full(e, float(self.max_stretch)))
        flags = np.asarray(self.edge_contact)
        if flags.ndim == 0:
            put(self, "edge_contact", bool(flags))
            colliding = self.springs[:e] if self.edge_contact else self.springs[:0]
        else:
            if flags.shape != (e,) or flags.dtype != np.bool_:
                raise SinewError(f"edge_contact must be a bool or a bool array of shape ({e},), "
                                 "one per structural spring")
            put(self, "edge_contact", flags.copy())
            self.edge_contact.setflags(write=False)
            colliding = self.springs[:e][flags]
        put(self, "contact_edges", np.ascontiguousarray(colliding, dtype=np.int64))
        # a chain's edges (a rope, spring bones' bones) are what collides, not its vertices
        degree = np.bincount(self.springs[:e].reshape(-1), minlength=n) if e else np.zeros(0, np.int64)
        put(self, "segment_contact", bool(len(self.contact_edges)) and (
            flags.ndim > 0 or int(degree.max(initial=0)) <= 2))
        for a in (self.rest_positions, self.springs, self.rest_lengths, self.stiffness,
                  self.damping, self.masses, self.pinned, self.gravity, self.wind, anchors,
                  self.anchor_index, self.anchor_stiffness, self.target_index, self.vertex_drag,
                  self.spring_stretch, self.stretch_limits, self.contact_edges):
            a.setflags(write=False)

    @property
    def vertex_count(self) -> int:
        """Number of vertices ``n``."""
        return int(len(self.rest_positions))

    @property
    def spring_count(self) -> int:
        """Number of springs ``s``."""
        return int(len(self.springs))

    @property
    def structural_count(self) -> int:
        """Number of structural (edge) springs: the first ones of ``springs``."""
        return self.spring_count if self.edge_springs < 0 else int(self.edge_springs)

    @property
    def total_mass(self) -> float:
        """Sum of vertex masses, kg."""
        return float(self.masses.sum())

    def initial_state(self) -> State:
        """A state at the rest positions with zero velocity."""
        return State(self.rest_positions.copy(), np.zeros_like(self.rest_positions))


@dataclass(eq=False)
class State:
    """What changes every step.

    Attributes
    ----------
    x : numpy.ndarray
        Shape ``(n, 3)``, positions, m.
    v : numpy.ndarray
        Shape ``(n, 3)``, velocities, m/s.
    """

    x: np.ndarray
    v: np.ndarray

    def copy(self) -> State:
        """A deep copy."""
        return State(self.x.copy(), self.v.copy())


def lumped_masses(positions: np.ndarray, triangles: np.ndarray, total_mass: float) -> np.ndarray:
    """Vertex masses lumped from triangle areas (seed 004).

    Each triangle gives a third of its area to each corner; masses are
    proportional to that share, vertices in no triangle (or only in degenerate
    ones) get the mean share of the others, and the result is scaled to sum
    to ``total_mass``. If no triangle has area, masses are uniform.

    Parameters
    ----------
    positions : numpy.ndarray
        Shape ``(n, 3)``, m.
    triangles : numpy.ndarray
        Shape ``(t, 3)``, vertex indices.
    total_mass : float
        kg, > 0.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``, kg, summing to ``total_mass``.
    """
    n = len(positions)
    if n == 0:
        return np.zeros(0)
    share = vertex_areas(positions, triangles)
    has = share > 0
    if not np.any(has):
        share = np.ones(n)
    else:
        share[~has] = share[has].mean()
    return share * (float(total_mass) / share.sum())


def _scalar(value: float, name: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise SinewError(f"{name} must be a number") from None
    if not np.isfinite(f) or f < 0:
        raise SinewError(f"{name} must be finite and >= 0, got {value!r}")
    return f


def build_model(
    rest_positions: np.ndarray,
    spring_set: SpringSet,
    *,
    stiffness: float,
    shear_stiffness: float,
    bending_stiffness: float,
    damping: float,
    vertex_mass: float | None = None,
    total_mass: float | None = None,
    triangles: np.ndarray | None = None,
    pinned: np.ndarray | None = None,
    air_drag: float = 0.0,
    gravity: ArrayLike = (0.0, 0.0, -9.81),
    wind: ArrayLike = (0.0, 0.0, 0.0),
    density: float | None = None,
    stiffness_mode: str = "SPRING",
    pin_stiffness: float = 0.0,
    max_stretch: float = 0.0,
) -> Model:
    """Build a :class:`Model` from rest positions and springs.

    Parameters
    ----------
    rest_positions : numpy.ndarray
        Shape ``(n, 3)``, m; also the rest lengths are measured here.
    spring_set : SpringSet
        From :func:`~.topology.build_springs`.
    stiffness, shear_stiffness, bending_stiffness : float
        ``stiffness_mode='SPRING'``: N/m per structural, shear and bending spring.
        ``'MATERIAL'``: moduli of the cloth in N/m (force per metre of width per
        unit strain; on faceless edges N per unit strain), turned into per-spring
        N/m by :func:`~.topology.material_scale` (``kₛ = E Aₛ/Lₛ²``, derivation
        in :mod:`.topology`). A kind with 0 is left out.
    damping : float
        N·s/m along every spring that is kept; in ``'MATERIAL'`` mode scaled
        per spring like the structural stiffness (N·s/m per metre of width).
    vertex_mass : float, optional
        kg per vertex (uniform masses).
    total_mass : float, optional
        kg for the whole mesh, lumped from ``triangles`` areas (seed 004).
    density : float, optional
        kg/m² of the rest surface, lumped by triangle area (seed 004:
        ``mᵢ = ρ · area/3`` of each adjacent triangle); vertices in no face get
        ``ρ`` × half the length of their edges (kg per metre).
        Exactly one of ``vertex_mass``, ``total_mass`` and ``density`` must be
        given.
    triangles : numpy.ndarray, optional
        Shape ``(t, 3)``, for lumped masses, ``density`` and ``'MATERIAL'``.
    pinned : numpy.ndarray, optional
        Shape ``(n,)``, bool or weights (> 0 means pinned).
    stiffness_mode : str
        ``'SPRING'`` or ``'MATERIAL'`` (see ``stiffness``).
    pin_stiffness : float
        N/m; 0 = hard pins. Otherwise every vertex with pin weight ``w > 0`` is a
        soft pin: a zero-rest-length spring of stiffness ``pin_stiffness · w``
        to its target.
    max_stretch : float
        Strain limit, fraction (0 = off), see :mod:`.strainlimit`.
    air_drag : float
        1/s.
    gravity : array_like
        Shape ``(3,)``, m/s².
    wind : array_like
        Shape ``(3,)``, m/s.

    Returns
    -------
    Model

    Raises
    ------
    TopologyError
        Bad shapes or indices, non-finite coordinates.
    SinewError
        Negative or non-finite stiffness, damping or drag; non-positive masses.
    """
    x = np.asarray(rest_positions, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise TopologyError(f"rest_positions must have shape (n, 3), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise TopologyError("rest_positions contain NaN or infinite coordinates")
    n = len(x)
    if spring_set.vertex_count != n:
        raise TopologyError(
            f"spring set is for {spring_set.vertex_count} vertices, mesh has {n}")
    if stiffness_mode not in ("SPRING", "MATERIAL"):
        raise SinewError(f"stiffness_mode must be 'SPRING' or 'MATERIAL', got {stiffness_mode!r}")
    kp = _scalar(pin_stiffness, "pin_stiffness")
    limit = _scalar(max_stretch, "max_stretch")
    ks = _scalar(stiffness, "stiffness")
    kh = _scalar(shear_stiffness, "shear_stiffness")
    kb = _scalar(bending_stiffness, "bending_stiffness")
    kd = _scalar(damping, "damping")
    c = _scalar(air_drag, "air_drag")
    g = np.asarray(gravity, dtype=np.float64).reshape(-1)
    w = np.asarray(wind, dtype=np.float64).reshape(-1)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise SinewError("gravity must be 3 finite numbers (m/s²)")
    if w.shape != (3,) or not np.all(np.isfinite(w)):
        raise SinewError("wind must be 3 finite numbers (m/s)")

    parts, kparts = [], []
    for arr, k in ((spring_set.structural, ks), (spring_set.shear, kh), (spring_set.bending, kb)):
        arr = np.asarray(arr, dtype=np.int64).reshape(-1, 2)
        if k > 0 and len(arr):
            parts.append(arr)
            kparts.append(np.full(len(arr), k))
    springs = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
    if len(springs) and (springs.min() < 0 or springs.max() >= n):
        raise TopologyError(f"spring vertex index out of range [0, {n})")
    k_all = np.concatenate(kparts) if kparts else np.zeros(0)
    rest = np.linalg.norm(x[springs[:, 0]] - x[springs[:, 1]], axis=1)
    tris = np.zeros((0, 3), dtype=np.int64) if triangles is None else triangles
    kd_all = np.full(len(springs), kd)
    measure = dimension = None
    if stiffness_mode == "MATERIAL" or density is not None:
        measure, dimension = vertex_measures(x, tris, spring_set.structural)
    if stiffness_mode == "MATERIAL" and len(springs):
        scale = np.concatenate([
            material_scale(part, rest[a:a + len(part)], measure, dimension)
            for part, a in zip(parts, np.cumsum([0] + [len(q) for q in parts[:-1]]))])
        k_all = k_all * scale
        kd_all = kd_all * scale

    if sum(v is not None for v in (vertex_mass, total_mass, density)) != 1:
        raise SinewError("give exactly one of vertex_mass, total_mass and density")
    if density is not None:
        rho = _scalar(density, "density")
        if rho <= 0:
            raise SinewError("density must be > 0")
        masses = rho * measure
        has = masses > 0
        if not np.any(has):
            raise SinewError("density needs faces or edges with a length to spread the mass over")
        masses[~has] = masses[has].mean()  # isolated vertices: the mean vertex mass
    elif vertex_mass is not None:
        m0 = _scalar(vertex_mass, "vertex_mass")
        if m0 <= 0:
            raise SinewError("vertex_mass must be > 0")
        masses = np.full(n, m0)
    else:
        mt = _scalar(total_mass, "total_mass")
        if mt <= 0:
            raise SinewError("total_mass must be > 0")
        masses = lumped_masses(x, np.zeros((0, 3)) if triangles is None else triangles, mt)

    if len(springs):
        # Spring forces carry an absolute round-off of ~ε k L (float64). Where it exceeds a
        # vertex's weight the motion is noise: an infinite stiffness (Blender clamps it to
        # FLT_MAX = 3.4e38 N/m) would bake a frozen cloth with 10¹⁵ N of force imbalance.
        noise = float(np.finfo(np.float64).eps * np.max(k_all * rest))
        weight = float(masses.min()) * max(float(np.linalg.norm(g)), 1.0)
        if noise > weight:
            raise SinewError(f"stiffness is too large to simulate: the round-off in its spring "
                             f"forces ({noise:.3g} N) exceeds a vertex's weight ({weight:.3g} N); "
                             f"lower the stiffness")
    if pinned is None:
        pin = np.zeros(n, dtype=bool)
    else:
        pw = np.asarray(pinned).reshape(-1)
        if pw.shape != (n,):
            raise TopologyError(f"pinned must have shape ({n},), got {pw.shape}")
        pin = pw > 0 if pw.dtype != bool else pw.copy()
    anchors = np.zeros(0)
    if kp > 0 and np.any(pin):
        weight = (np.asarray(pinned, dtype=np.float64).reshape(-1) if pinned is not None
                  else np.zeros(n))
        anchors = np.where(pin, kp * np.where(weight > 0, weight, 0.0), 0.0)
        pin = np.zeros(n, dtype=bool)

    edges = len(parts[0]) if parts and ks > 0 and len(spring_set.structural) else 0
    return Model(
        rest_positions=x.copy(), springs=springs, rest_lengths=rest, stiffness=k_all,
        damping=kd_all, masses=masses, pinned=pin,
        air_drag=c, gravity=g.copy(), wind=w.copy(), edge_springs=edges if edges else -1,
        anchors=anchors, max_stretch=limit,
    )
