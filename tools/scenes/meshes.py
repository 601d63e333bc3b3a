"""Blender mesh objects built for tests, benchmarks and the demo (see :mod:`tools.scenes`)."""

from __future__ import annotations

import math

import numpy as np


def hanging_grid(n: int, size: float, name: str | None = None):
    """A grid of ``n × n`` faces, ``size`` m wide, hanging in the XZ plane (a primitive grid
    turned a quarter about X); the vertex group "pins" holds its two top corners. Linked to
    the scene and active; named ``name`` (``None``: the primitive's name)."""
    import bpy

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n, y_subdivisions=n, size=size)
    ob = bpy.context.active_object
    if name is not None:
        ob.name = name
    ob.rotation_euler = (math.pi / 2, 0.0, 0.0)
    co = np.empty(3 * len(ob.data.vertices), dtype=np.float32)
    ob.data.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    top = np.flatnonzero(co[:, 1] > co[:, 1].max() - 1e-6)
    corners = [int(top[np.argmin(co[top, 0])]), int(top[np.argmax(co[top, 0])])]
    ob.vertex_groups.new(name="pins").add(corners, 1.0, "REPLACE")
    return ob


def leaning_strip(name: str, nx: int, ny: int, tilt: float, width: float = 0.4, length: float = 2.4,
                  bottom: float = 0.65):
    """A strip of ``nx × ny`` quads, ``width`` by ``length`` m, standing on its end at height
    ``bottom`` and leaning ``tilt`` rad towards +Y (the self-collision scene: it falls onto a
    box and folds over it). Linked to the scene and active."""
    import bpy

    w = nx + 1
    verts = [((i / nx - 0.5) * width, length * j / ny * math.sin(tilt),
              bottom + length * j / ny * math.cos(tilt)) for j in range(ny + 1) for i in range(w)]
    faces = [(j * w + i, j * w + i + 1, (j + 1) * w + i + 1, (j + 1) * w + i)
             for j in range(ny) for i in range(nx)]
    me = bpy.data.meshes.new(name)
    me.from_pydata(verts, [], faces)
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    return ob


def cube_on_ground(size: float, name: str | None = None):
    """A cube of side ``size`` m standing on z = 0 at the origin (a primitive cube); active."""
    import bpy

    bpy.ops.mesh.primitive_cube_add(size=size, location=(0.0, 0.0, 0.5 * size))
    ob = bpy.context.active_object
    if name is not None:
        ob.name = name
    return ob


def tube(name: str, radii, heights, around: int, closed: bool = False, outward: bool = True):
    """A tube about the Z axis of ``around`` vertices per ring at the given ``radii`` and
    ``heights`` (rings from the top), quads between the rings facing outward (``outward``)
    or inward; ``closed`` caps both ends with fans (a closed collider). Linked to the scene."""
    import bpy

    from core.springs.shapes import tube as tube_arrays

    mesh = tube_arrays(radii, heights, around, closed=closed, outward=outward)
    verts = [tuple(p) for p in mesh.positions]
    faces = [tuple(int(v) for v in mesh.loop_vertices[s:s + t])
             for s, t in zip(mesh.loop_starts, mesh.loop_totals)]
    me = bpy.data.meshes.new(name)
    me.from_pydata(verts, [], faces)
    me.validate()
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def skirt(radius: float, top: float, height: float, around: int = 24, rings: int = 7, name: str = "Skirt",
          select: bool = False):
    """An open cylinder (no caps) of ``around × (rings − 1)`` quads about the Z axis, from
    ``top`` down by ``height`` m, facing inward; the vertex group "pins" holds its top ring.
    Linked to the scene and active (and selected with ``select``)."""
    import bpy

    ob = tube(name, [radius] * rings, top - np.linspace(0, height, rings), around, outward=False)
    bpy.context.view_layer.objects.active = ob
    if select:
        ob.select_set(True)
    ob.vertex_groups.new(name="pins").add(list(range(around)), 1.0, "REPLACE")
    return ob


def inside(ob, points: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: world-space ``points`` behind the nearest face of ``ob``'s evaluated
    closed mesh, as Blender's BVH tree finds it (in the object's space: an affine map keeps
    which side of a face a point is on)."""
    import bpy
    from mathutils import Vector
    from mathutils.bvhtree import BVHTree

    dg = bpy.context.evaluated_depsgraph_get()
    tree = BVHTree.FromObject(ob, dg)
    inv = np.linalg.inv(np.array([list(r) for r in ob.evaluated_get(dg).matrix_world]))
    local = np.asarray(points) @ inv[:3, :3].T + inv[:3, 3]
    out = np.zeros(len(local), bool)
    for k, p in enumerate(local):
        loc, normal, _, _ = tree.find_nearest(Vector(p))
        out[k] = loc is not None and float(np.dot(p - np.asarray(loc), np.asarray(normal))) < 0.0
    return out


def flag_on_pole(nx: int, ny: int, name: str | None = None):
    """A 1.5 × 1 m flag of ``nx × ny`` faces standing in the XZ plane (a primitive grid scaled
    1.5 along X and turned a quarter about X); the vertex group "pole" holds its x-min edge.
    Linked to the scene and active; named ``name`` (``None``: the primitive's name)."""
    import bpy

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=nx, y_subdivisions=ny, size=1.0)
    ob = bpy.context.active_object
    if name is not None:
        ob.name = name
    ob.scale = (1.5, 1.0, 1.0)
    ob.rotation_euler = (math.pi / 2, 0.0, 0.0)
    co = np.empty(3 * len(ob.data.vertices), dtype=np.float32)
    ob.data.vertices.foreach_get("co", co)
    x = co.reshape(-1, 3)[:, 0]
    ob.vertex_groups.new(name="pole").add([int(i) for i in np.flatnonzero(x < x.min() + 1e-6)],
                                          1.0, "REPLACE")
    return ob
