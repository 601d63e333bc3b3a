"""Scene → numpy: the deformed input mesh per frame, pin weights, topology and colliders.

The simulated input is the object's base mesh deformed by its shape keys and deform
modifiers. Generative modifiers (anything not in :data:`DEFORM_TYPES`: subdivision,
solidify, geometry nodes, ...) are switched off in the viewport while reading, so the
evaluated mesh keeps the base mesh's vertices, and switched back on afterwards. Everything
is read with ``foreach_get``; there is no Python loop over vertices.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ..core.errors import TopologyError

#: Modifier types that only move vertices. They feed the simulation and are switched off
#: while a bake is active (the bake already contains their motion).
DEFORM_TYPES = frozenset({
    "ARMATURE", "CAST", "CURVE", "DISPLACE", "HOOK", "LAPLACIANDEFORM", "LATTICE", "MESH_DEFORM",
    "SHRINKWRAP", "SIMPLE_DEFORM", "SMOOTH", "CORRECTIVE_SMOOTH", "LAPLACIANSMOOTH",
    "SURFACE_DEFORM", "WARP", "WAVE", "VOLUME_DISPLACE", "MESH_CACHE", "MESH_SEQUENCE_CACHE",
    "GREASE_PENCIL_SMOOTH",
})

_PROBE_NAME = "__sinew_pin_probe__"


def is_deform(modifier: Any) -> bool:
    """True for modifiers that only move vertices (see :data:`DEFORM_TYPES`)."""
    return modifier.type in DEFORM_TYPES


@contextlib.contextmanager
def deform_only_view(obj: bpy.types.Object) -> Iterator[None]:
    """Switch generative modifiers off in the viewport for the duration, then restore."""
    switched = [m for m in obj.modifiers if m.show_viewport and not is_deform(m)]
    for m in switched:
        m.show_viewport = False
    try:
        yield
    finally:
        for m in switched:
            m.show_viewport = True


@contextlib.contextmanager
def kept_frame(scene: bpy.types.Scene) -> Iterator[None]:
    """Restore the scene's current frame (and subframe) afterwards."""
    frame, sub = scene.frame_current, scene.frame_subframe
    try:
        yield
    finally:
        scene.frame_set(frame, subframe=sub)


def mesh_positions(mesh: bpy.types.Mesh) -> np.ndarray:
    """Vertex coordinates ``(n, 3)`` float64, object space."""
    co = np.empty(3 * len(mesh.vertices), dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    return co.reshape(-1, 3).astype(np.float64)


def matrix_array(matrix: Any) -> np.ndarray:
    """A mathutils 4×4 matrix as a ``(4, 4)`` float64 array."""
    return np.array([list(row) for row in matrix], dtype=np.float64)


def to_world(matrix: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Apply the ``(4, 4)`` affine ``matrix`` to points ``(n, 3)``."""
    return x @ matrix[:3, :3].T + matrix[:3, 3]


def to_local(matrix: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Inverse of :func:`to_world`: points ``(..., n, 3)`` by affine matrices ``(..., 4, 4)``
    (one matrix for all points, or one per frame: ``(F, 4, 4)`` with ``(F, n, 3)``)."""
    inv = np.linalg.inv(matrix[..., :3, :3])
    return np.matmul(x - matrix[..., None, :3, 3], np.swapaxes(inv, -1, -2))


def evaluated_positions(obj: bpy.types.Object, depsgraph: Any) -> tuple[np.ndarray, np.ndarray]:
    """The evaluated object's vertices ``(n, 3)`` (object space) and world matrix ``(4, 4)``."""
    ev = obj.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    try:
        x = mesh_positions(mesh)
    finally:
        ev.to_mesh_clear()
    return x, matrix_array(ev.matrix_world)


@dataclass(frozen=True)
class Topology:
    """Mesh connectivity as arrays (Blender's edge / polygon / loop layout)."""

    vertex_count: int
    edges: np.ndarray          # (e, 2)
    loop_starts: np.ndarray    # (p,)
    loop_totals: np.ndarray    # (p,)
    loop_vertices: np.ndarray  # (l,)


def read_topology(mesh: bpy.types.Mesh) -> Topology:
    """Connectivity of ``mesh`` in bulk."""
    n, e, p, l = len(mesh.vertices), len(mesh.edges), len(mesh.polygons), len(mesh.loops)
    edges = np.empty(2 * e, dtype=np.int32)
    mesh.edges.foreach_get("vertices", edges)
    starts = np.empty(p, dtype=np.int32)
    totals = np.empty(p, dtype=np.int32)
    mesh.polygons.foreach_get("loop_start", starts)
    mesh.polygons.foreach_get("loop_total", totals)
    loops = np.empty(l, dtype=np.int32)
    mesh.loops.foreach_get("vertex_index", loops)
    return Topology(n, edges.reshape(-1, 2).astype(np.int64), starts.astype(np.int64),
                    totals.astype(np.int64), loops.astype(np.int64))


def read_pin_weights(obj: bpy.types.Object, scene: bpy.types.Scene, group: str,
                     unweighted: np.ndarray) -> np.ndarray:
    """Weights ``(n,)`` of vertex group ``group``, read in bulk.

    Blender has no bulk accessor for vertex-group weights, so a temporary Displace
    modifier (no texture, mid level 0, strength 1, local X, restricted to the group) is
    appended and evaluated once: each vertex moves by exactly its weight along local X.
    ``unweighted`` is the same evaluation without the probe, ``(n, 3)``. Weights below
    float32 resolution of the coordinates (~1e-7 · |x|) read as 0.
    """
    probe = obj.modifiers.new(_PROBE_NAME, "DISPLACE")
    try:
        probe.vertex_group = group
        probe.direction = "X"
        probe.space = "LOCAL"
        probe.mid_level = 0.0
        probe.strength = 1.0
        probe.show_viewport = True
        x, _ = evaluated_positions(obj, bpy.context.evaluated_depsgraph_get())
    finally:
        obj.modifiers.remove(probe)
    if x.shape != unweighted.shape:
        raise TopologyError(f"{obj.name}: the pin group could not be read")
    w = x[:, 0] - unweighted[:, 0]
    noise = 4.0 * np.finfo(np.float32).eps * (1.0 + np.abs(unweighted[:, 0]))
    return np.where(w > noise, w, 0.0)


def collision_settings(settings: Any) -> tuple[float, float, float]:
    """``(thickness m, friction coefficient μ, damping)`` of Blender ``CollisionSettings``.

    Read as Blender's Cloth reads them (the same names in 3.4, 4.5 and 5.2):

    * ``thickness_outer``, m.
    * ``cloth_friction`` (0–80, default 5) → ``μ = 0.01 × cloth_friction``. This is
      Blender's own scale: its cloth collision response (``collision.cc``,
      ``cloth_collision_response_static``) cuts the tangential relative speed by
      ``min(pdef_cfrict · 0.01 · vₙ, |v_t|)`` with ``vₙ`` the approaching normal speed,
      i.e. Coulomb's law with ``μ = cloth_friction / 100``; the default 5 is μ = 0.05 (a
      slippery surface: the friction angle is 2.9°), 80 is μ = 0.8. Cloth that rests on a
      curved collider at low friction is held by the geometry (draped across the top),
      not by friction, in Blender as here.
    * ``damping`` (0–1, "Amount of damping during collision"): returned for completeness
      and not used. In Blender it is ``pdef_sbdamp``, which only Soft Body reads; the
      Cloth modifier's collision response ignores it and is fully inelastic (no
      restitution: the approaching normal speed is removed), and so is Sinew's
      (``core.springs.colliders``).

    The particle friction (``friction`` in 3.x, ``friction_factor`` later) is not the
    cloth's and is not read.
    """
    return (float(settings.thickness_outer), 0.01 * float(settings.cloth_friction),
            float(settings.damping))


#: Collider settings without a Collision modifier: Blender's defaults for one
#: (outer thickness 0.02 m, cloth friction 5 → μ 0.05, damping 0.1).
DEFAULT_COLLISION = (0.02, 0.05, 0.1)


def collision_modifier(ob: bpy.types.Object) -> Any:
    """The object's enabled Collision modifier, or None."""
    for m in ob.modifiers:
        if m.type == "COLLISION" and m.show_viewport:
            return m
    return None


def read_colliders(objects: Sequence[bpy.types.Object], depsgraph: Any,
                   memo: dict | None = None) -> list[tuple]:
    """World-space triangle meshes ``(vertices (m, 3), triangles (t, 3), thickness, friction)``.

    The evaluated mesh (modifiers, armature deformation, parents and animation applied)
    in world space. Thickness and friction come from the object's Collision settings
    when it has a Collision modifier (see :func:`collision_settings`), else
    :data:`DEFAULT_COLLISION`. ``memo`` (a dict kept over a bake's frames) keeps each
    object's triangles in their canonical order while Blender lists the same ones.
    """
    from ..core.springs.colliders import canonical_triangles  # scipy: only once a bake runs

    out = []
    for ob in objects:  # one entry per collider object, not per vertex
        ev = ob.evaluated_get(depsgraph)
        mesh = ev.to_mesh()
        try:
            mesh.calc_loop_triangles()
            v = mesh_positions(mesh)
            t = np.empty(3 * len(mesh.loop_triangles), dtype=np.int32)
            mesh.loop_triangles.foreach_get("vertices", t)
        finally:
            ev.to_mesh_clear()
        thickness, friction, _ = DEFAULT_COLLISION
        if collision_modifier(ob) is not None and ob.collision is not None:
            thickness, friction, _ = collision_settings(ob.collision)
        # one order whatever Blender's tessellation listed them in (it varies between
        # sessions, and the contact response depends on the order): reproducible bakes
        seen = None if memo is None else memo.get(ob.name_full)
        if seen is not None and np.array_equal(seen[0], t):
            tris = seen[1]
        else:
            tris = canonical_triangles(t)
            if memo is not None:
                memo[ob.name_full] = (t, tris)
        out.append((to_world(matrix_array(ev.matrix_world), v), tris, thickness, friction))
    return out


def collider_objects(obj: bpy.types.Object, collection: Any,
                     scene: bpy.types.Scene | None = None) -> list[bpy.types.Object]:
    """The colliders of ``obj``, as Blender marks them, without ``obj`` itself.

    Mesh objects of ``collection`` (and its children), and every visible mesh object of
    ``scene`` with an enabled Collision modifier (``collision.use`` on), in a stable
    order without repeats.
    """
    found: dict[str, bpy.types.Object] = {}
    if collection is not None:
        for ob in collection.all_objects:
            if ob.type == "MESH" and ob != obj:
                found.setdefault(ob.name, ob)
    if scene is not None:
        for ob in scene.objects:
            if (ob.type == "MESH" and ob != obj and ob.visible_get()
                    and collision_modifier(ob) is not None and ob.collision is not None
                    and ob.collision.use):
                found.setdefault(ob.name, ob)
    return list(found.values())


@dataclass
class FrameInput:
    """Everything the simulation needs, read for frames ``frames[0] .. frames[-1]``.

    Attributes
    ----------
    frames : numpy.ndarray
        Shape ``(F,)``, scene frame numbers.
    local : numpy.ndarray
        Shape ``(F, n, 3)``, the deformed input in object space, m.
    matrices : numpy.ndarray
        Shape ``(F, 4, 4)``, the object's world matrix per frame.
    world : numpy.ndarray
        Shape ``(F, n, 3)``, the deformed input in world space, m.
    pin_weights : numpy.ndarray
        Shape ``(n,)``.
    colliders : list
        Length ``F``; per frame a list of :func:`read_colliders` tuples, one per collider
        object in the same order every frame.
    topology : Topology
    fields : list
        Length ``F`` (empty without a ``field_source``): per frame what
        ``field_source(depsgraph)`` returned (the force fields, :mod:`.fields`).
    """

    frames: np.ndarray
    local: np.ndarray
    matrices: np.ndarray
    world: np.ndarray
    pin_weights: np.ndarray
    colliders: list
    topology: Topology
    fields: list = field(default_factory=list)


def read_input(scene: bpy.types.Scene, obj: bpy.types.Object, frame_start: int, frame_end: int,
               pin_group: str, collision_collection: Any,
               field_source: Callable[[Any], Any] | None = None) -> FrameInput:
    """Read the deformed mesh, pins and colliders at every frame (scene frame restored);
    with ``field_source``, also ``field_source(depsgraph)`` at every frame.

    Raises
    ------
    TopologyError
        No vertices or edges, or the vertex count changes during the range (the message
        names the frame).
    """
    mesh = obj.data
    topo = read_topology(mesh)
    n = topo.vertex_count
    if n == 0:
        raise TopologyError(f"{obj.name} has no vertices")
    if len(topo.edges) == 0:
        raise TopologyError(f"{obj.name} has no edges: springs run along mesh edges")
    frames = np.arange(frame_start, frame_end + 1)
    cols_objs = collider_objects(obj, collision_collection, scene)
    local = np.empty((len(frames), n, 3))
    mats = np.empty((len(frames), 4, 4))
    colliders = []
    fields: list = []
    weights = np.zeros(n)
    memo: dict = {}  # (each collider's triangles in canonical order while they stay the same)
    with kept_frame(scene), deform_only_view(obj):
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            dg = bpy.context.evaluated_depsgraph_get()
            x, m = evaluated_positions(obj, dg)
            if len(x) != n:
                raise TopologyError(
                    f"{obj.name}: the vertex count changed at frame {int(f)} ({n} → {len(x)}); "
                    "a bake needs the same vertices on every frame (check modifiers and drivers)")
            local[i], mats[i] = x, m
            colliders.append(read_colliders(cols_objs, dg, memo))
            if field_source is not None:
                fields.append(field_source(dg))
            if i == 0 and pin_group:
                weights = read_pin_weights(obj, scene, pin_group, x)
    # x_world = R x_local + t per frame, as (n, 3) rows times Rᵀ: a batched matmul (numpy's
    # einsum took 10 ms for this at 72 frames of 651 vertices, the matmul 0.5 ms)
    world = np.matmul(local, mats[:, :3, :3].transpose(0, 2, 1)) + mats[:, None, :3, 3]
    return FrameInput(frames, local, mats, world, weights, colliders, topo, fields)
