"""Colliders: half-spaces, spheres and triangle meshes, resolved by projection.

After each solve every vertex closer to a collider than its ``thickness``
(or inside it) is projected to the surface plus ``thickness`` along the
outward normal; its inward normal velocity is removed and its tangential
velocity is reduced by Coulomb friction, ``|Δv_t| ≤ friction · |Δv_n|``
(a ``friction`` of 0 is frictionless; a large value sticks). Colliders are
resolved one after another in the order given.

Triangle meshes are given in world space for each frame. The nearest surface
point of a vertex is searched among the triangles whose centroids are the
``k`` nearest (``scipy.spatial.cKDTree``), with a vectorised
closest-point-on-triangle. The side is decided by the normal of the triangle
holding that point (counter-clockwise corners seen from outside, as Blender
stores closed meshes): a vertex is inside when ``(x − q)·n < 0``. This is
right for closed, consistently oriented meshes and for one-sided open
surfaces; vertices deeper than ``max_depth`` below an open surface are left
alone.

Self-collision (cloth against itself) is a separate stage after this one:
:mod:`.selfcollision`, which reuses :func:`closest_points_on_triangles`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree

from ..errors import SinewError

__all__ = ["Plane", "Sphere", "TriangleMesh", "resolve", "closest_points_on_triangles"]


def _apply_contact(x: np.ndarray, v: np.ndarray, idx: np.ndarray, target: np.ndarray,
                   normal: np.ndarray, friction: float) -> None:
    """Move ``x[idx]`` to ``target`` and fix velocities for outward ``normal`` (k, 3)."""
    if len(idx) == 0:
        return
    x[idx] = target
    vi = v[idx]
    vn = np.einsum("ij,ij->i", vi, normal)
    inward = np.minimum(vn, 0.0)
    vt = vi - vn[:, None] * normal
    vt_len = np.sqrt(np.einsum("ij,ij->i", vt, vt))
    dvn = -inward
    scale = np.where(vt_len > 0, np.maximum(0.0, 1.0 - friction * dvn / np.where(vt_len > 0, vt_len, 1.0)), 1.0)
    v[idx] = vt * scale[:, None] + np.maximum(vn, 0.0)[:, None] * normal


@dataclass
class Plane:
    """Half-space ``(x − point)·normal ≥ 0`` is outside (e.g. the ground).

    Parameters
    ----------
    point : array_like
        Shape ``(3,)``, a point on the plane, m.
    normal : array_like
        Shape ``(3,)``, outward normal (normalised here).
    thickness : float
        m, kept between vertices and the surface.
    friction : float
        Coulomb coefficient, >= 0.
    """

    point: np.ndarray
    normal: np.ndarray
    thickness: float = 0.0
    friction: float = 0.0

    def __post_init__(self) -> None:
        self.point = np.asarray(self.point, dtype=np.float64).reshape(3)
        n = np.asarray(self.normal, dtype=np.float64).reshape(3)
        ln = np.linalg.norm(n)
        if not np.isfinite(ln) or ln == 0:
            raise SinewError("plane normal must be a finite non-zero vector")
        self.normal = n / ln

    def signed_distance(self, x: np.ndarray) -> np.ndarray:
        """Distance above the plane, shape ``(n,)``, m (negative inside)."""
        return (x - self.point) @ self.normal

    def resolve(self, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray) -> None:
        """Project and fix velocities in place (see module docstring)."""
        s = self.signed_distance(x)
        idx = np.flatnonzero(s < self.thickness)
        if len(idx):
            target = x[idx] + (self.thickness - s[idx])[:, None] * self.normal
            _apply_contact(x, v, idx, target, np.broadcast_to(self.normal, (len(idx), 3)),
                           self.friction)


@dataclass
class Sphere:
    """Solid sphere.

    Parameters
    ----------
    center : array_like
        Shape ``(3,)``, m.
    radius : float
        m, > 0.
    thickness, friction : float
        As for :class:`Plane`.
    """

    center: np.ndarray
    radius: float
    thickness: float = 0.0
    friction: float = 0.0

    def __post_init__(self) -> None:
        self.center = np.asarray(self.center, dtype=np.float64).reshape(3)
        if not (np.isfinite(self.radius) and self.radius > 0):
            raise SinewError("sphere radius must be > 0")

    def signed_distance(self, x: np.ndarray) -> np.ndarray:
        """Distance from the surface, shape ``(n,)``, m (negative inside)."""
        return np.linalg.norm(x - self.center, axis=1) - self.radius

    def resolve(self, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray) -> None:
        """Project and fix velocities in place (see module docstring)."""
        d = x - self.center
        r = np.sqrt(np.einsum("ij,ij->i", d, d))
        idx = np.flatnonzero(r - self.radius < self.thickness)
        if len(idx):
            ri = r[idx]
            up = np.array([0.0, 0.0, 1.0])
            normal = np.where((ri > 1e-12)[:, None], d[idx] / np.where(ri > 1e-12, ri, 1.0)[:, None], up)
            target = self.center + (self.radius + self.thickness) * normal
            _apply_contact(x, v, idx, target, normal, self.friction)


def closest_points_on_triangles(p: np.ndarray, a: np.ndarray, b: np.ndarray,
                                c: np.ndarray) -> np.ndarray:
    """Closest point on triangle ``(a, b, c)`` to ``p``, row by row.

    Vectorised form of the Voronoi-region test (Ericson 2004, "Real-Time
    Collision Detection", §5.1.5).

    Parameters
    ----------
    p, a, b, c : numpy.ndarray
        Shape ``(k, 3)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(k, 3)``.
    """
    ab, ac, ap = b - a, c - a, p - a
    d1 = np.einsum("ij,ij->i", ab, ap)
    d2 = np.einsum("ij,ij->i", ac, ap)
    bp = p - b
    d3 = np.einsum("ij,ij->i", ab, bp)
    d4 = np.einsum("ij,ij->i", ac, bp)
    cp = p - c
    d5 = np.einsum("ij,ij->i", ab, cp)
    d6 = np.einsum("ij,ij->i", ac, cp)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = va + vb + vc
        v = np.where(denom != 0, vb / denom, 0.0)
        w = np.where(denom != 0, vc / denom, 0.0)
        out = a + v[:, None] * ab + w[:, None] * ac  # interior
        # edge BC
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        m = (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0)
        out = np.where(m[:, None], b + np.nan_to_num(t_bc)[:, None] * (c - b), out)
        # edge AC
        t_ac = d2 / (d2 - d6)
        m = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
        out = np.where(m[:, None], a + np.nan_to_num(t_ac)[:, None] * ac, out)
        # edge AB
        t_ab = d1 / (d1 - d3)
        m = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
        out = np.where(m[:, None], a + np.nan_to_num(t_ab)[:, None] * ab, out)
    # vertex regions
    out = np.where(((d6 >= 0) & (d5 <= d6))[:, None], c, out)
    out = np.where(((d3 >= 0) & (d4 <= d3))[:, None], b, out)
    out = np.where(((d1 <= 0) & (d2 <= 0))[:, None], a, out)
    return out


@dataclass
class TriangleMesh:
    """A triangle mesh collider in world space (see module docstring).

    Parameters
    ----------
    vertices : array_like
        Shape ``(m, 3)``, m.
    triangles : array_like
        Shape ``(t, 3)``, vertex indices, counter-clockwise seen from outside.
    thickness, friction : float
        As for :class:`Plane`.
    k : int
        Candidate triangles per vertex (nearest centroids).
    max_depth : float
        m; vertices further than this behind the surface are ignored.
    """

    vertices: np.ndarray
    triangles: np.ndarray
    thickness: float = 0.0
    friction: float = 0.0
    k: int = 8
    max_depth: float = np.inf
    _tree: cKDTree = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.vertices = np.asarray(self.vertices, dtype=np.float64).reshape(-1, 3)
        self.triangles = np.asarray(self.triangles, dtype=np.int64).reshape(-1, 3)
        if not np.all(np.isfinite(self.vertices)):
            raise SinewError("collider vertices contain NaN or infinite values")
        if len(self.triangles) and (self.triangles.min() < 0
                                    or self.triangles.max() >= len(self.vertices)):
            raise SinewError("collider triangle index out of range")
        p = self.vertices[self.triangles]
        self._a, self._b, self._c = p[:, 0], p[:, 1], p[:, 2]
        nrm = np.cross(self._b - self._a, self._c - self._a)
        ln = np.linalg.norm(nrm, axis=1)
        self._normal = nrm / np.where(ln > 0, ln, 1.0)[:, None]
        self._tree = cKDTree(p.mean(axis=1)) if len(p) else None

    def nearest(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nearest surface points ``(n, 3)``, signed distances ``(n,)`` and the
        outward normals ``(n, 3)`` there."""
        kq = min(self.k, len(self.triangles))
        _, cand = self._tree.query(x, k=kq)
        cand = np.asarray(cand).reshape(len(x), kq)
        flat = cand.reshape(-1)
        px = np.repeat(x, kq, axis=0)
        q = closest_points_on_triangles(px, self._a[flat], self._b[flat], self._c[flat])
        diff = px - q
        dist2 = np.einsum("ij,ij->i", diff, diff).reshape(len(x), kq)
        best = np.argmin(dist2, axis=1)
        rows = np.arange(len(x)) * kq + best
        q_best = q[rows]
        nrm = self._normal[flat[rows]]
        diff_best = diff[rows]
        dist = np.sqrt(dist2[np.arange(len(x)), best])
        side = np.einsum("ij,ij->i", diff_best, nrm)
        sign = np.where(side < 0, -1.0, 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out_dir = np.where((dist > 1e-12)[:, None],
                               sign[:, None] * diff_best / np.where(dist > 1e-12, dist, 1.0)[:, None],
                               nrm)
        return q_best, sign * dist, out_dir

    def signed_distance(self, x: np.ndarray) -> np.ndarray:
        """Signed distance to the surface, shape ``(n,)``, m (negative inside)."""
        if self._tree is None:
            return np.full(len(x), np.inf)
        return self.nearest(x)[1]

    def resolve(self, x: np.ndarray, v: np.ndarray, x_prev: np.ndarray) -> None:
        """Project and fix velocities in place (see module docstring)."""
        if self._tree is None or len(x) == 0:
            return
        q, s, out_dir = self.nearest(x)
        idx = np.flatnonzero((s < self.thickness) & (s > -self.max_depth))
        if len(idx):
            target = q[idx] + self.thickness * out_dir[idx]
            _apply_contact(x, v, idx, target, out_dir[idx], self.friction)


def resolve(colliders: Sequence[object], x: np.ndarray, v: np.ndarray,
            x_prev: np.ndarray) -> None:
    """Resolve every collider in turn, in place.

    Parameters
    ----------
    colliders : sequence of Plane, Sphere or TriangleMesh
    x : numpy.ndarray
        Shape ``(n, 3)``, positions after the solve, m (modified).
    v : numpy.ndarray
        Shape ``(n, 3)``, velocities, m/s (modified).
    x_prev : numpy.ndarray
        Shape ``(n, 3)``, positions at the start of the step, m.
    """
    for col in colliders:
        col.resolve(x, v, x_prev)
