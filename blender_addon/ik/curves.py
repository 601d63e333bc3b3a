"""Curve objects as dense world-space polylines (the CURVE target mode)."""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from ..core import SinewError
from .sampling import mat4

__all__ = ["curve_polyline"]


def _walk_polyline(co: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, bool]:
    """Vertex order along the first edge path (the first spline); True if it is a closed loop."""
    m = co.shape[0]
    adj: list[list[int]] = [[] for _ in range(m)]
    for a, b in edges.tolist():
        adj[a].append(b)
        adj[b].append(a)
    ends = [v for v in range(m) if len(adj[v]) == 1]
    cyclic = not ends
    order = [ends[0] if ends else 0]
    prev = -1
    while len(order) <= m:
        nxt = sorted(v for v in adj[order[-1]] if v != prev)
        if not nxt or nxt[0] == order[0]:
            break
        prev = order[-1]
        order.append(nxt[0])
    return np.array(order, dtype=np.int64), cyclic


def _spline_points(spline: Any) -> np.ndarray:
    """Dense local-space polyline of a Bezier or poly spline (used when the mesh has faces)."""
    if spline.type == "POLY":
        pts = np.array([tuple(p.co)[:3] for p in spline.points], dtype=np.float64)
        return np.concatenate((pts, pts[:1])) if spline.use_cyclic_u else pts
    if spline.type != "BEZIER":
        raise SinewError("a NURBS curve with bevel or extrusion cannot be used as an IK target path; "
                         "remove the bevel/extrusion or use a Bezier or poly spline")
    bp = spline.bezier_points
    co = np.array([tuple(p.co) for p in bp], dtype=np.float64)
    hl = np.array([tuple(p.handle_left) for p in bp], dtype=np.float64)
    hr = np.array([tuple(p.handle_right) for p in bp], dtype=np.float64)
    idx = np.arange(len(bp))
    nxt = (idx + 1) % len(bp)
    if not spline.use_cyclic_u:
        idx, nxt = idx[:-1], nxt[:-1]
    if idx.size == 0:
        return co
    t = np.linspace(0.0, 1.0, 65)[:-1, None, None]
    p0, p1, p2, p3 = co[idx], hr[idx], hl[nxt], co[nxt]
    seg = ((1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t ** 2 * p2 + t ** 3 * p3)
    pts = np.swapaxes(seg, 0, 1).reshape(-1, 3)
    return np.concatenate((pts, co[nxt[-1:]]))


def curve_polyline(context: bpy.types.Context, obj: bpy.types.Object) -> tuple[np.ndarray, bool]:
    """The evaluated curve's first spline as a dense polyline in world space, and whether it is cyclic.

    Any spline type: the evaluated curve is converted to a mesh (honouring modifiers and the
    curve's resolution); if that mesh has faces (bevel, extrusion), Bezier and poly splines are
    sampled from their control data instead.
    """
    if obj.type != "CURVE":
        raise SinewError(f"target '{obj.name}' is not a curve object")
    if len(obj.data.splines) == 0:
        raise SinewError(f"curve '{obj.name}' has no splines")
    dg = context.evaluated_depsgraph_get()
    ev = obj.evaluated_get(dg)
    pts = None
    cyclic = False
    mesh = ev.to_mesh()
    try:
        if mesh is not None and len(mesh.polygons) == 0 and len(mesh.vertices) >= 2 and len(mesh.edges) >= 1:
            co = np.empty(3 * len(mesh.vertices))
            mesh.vertices.foreach_get("co", co)
            ed = np.empty(2 * len(mesh.edges), dtype=np.int64)
            mesh.edges.foreach_get("vertices", ed)
            order, cyclic = _walk_polyline(co.reshape(-1, 3), ed.reshape(-1, 2))
            pts = co.reshape(-1, 3)[order]
    finally:
        ev.to_mesh_clear()
    if pts is None:
        pts = _spline_points(obj.data.splines[0])
        cyclic = False  # _spline_points already closes cyclic splines
    mw = mat4(ev.matrix_world)
    return pts @ mw[:3, :3].T + mw[:3, 3], cyclic
