"""Blender mesh objects built for tests, benchmarks and the demo (see :mod:`tools.scenes`)."""

from __future__ import annotations

import math

import numpy as np


def hanging_grid(n: int, size: float, name: str):
    """A grid of ``n × n`` faces, ``size`` m wide, hanging in the XZ plane (a primitive grid
    turned a quarter about X); the vertex group "pins" holds its two top corners. Linked to
    the scene and active."""
    import bpy

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n, y_subdivisions=n, size=size)
    ob = bpy.context.active_object
    ob.name = name
    ob.rotation_euler = (math.pi / 2, 0.0, 0.0)
    co = np.empty(3 * len(ob.data.vertices), dtype=np.float32)
    ob.data.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    top = np.flatnonzero(co[:, 1] > co[:, 1].max() - 1e-6)
    corners = [int(top[np.argmin(co[top, 0])]), int(top[np.argmax(co[top, 0])])]
    ob.vertex_groups.new(name="pins").add(corners, 1.0, "REPLACE")
    return ob
