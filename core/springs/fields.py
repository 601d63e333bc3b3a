"""Blender's force fields (Wind, Force, Vortex, Turbulence, Drag) acting on a spring mesh.

Plain-array evaluation of the effector semantics of Blender's Cloth
(``blenkernel/intern/effect.cc``: ``effector_falloff``, ``get_effector_data``,
``do_physical_effector``; ``simulation/intern/SIM_mass_spring.cc``:
``cloth_calc_force``; ``implicit_blender.cc``: ``SIM_mass_spring_force_face_wind``
and ``..._face_extern``). The formulas are Blender's; the code is ours.

Geometry of one field. ``c`` is the field object's location, ``ẑ`` its normalised
Z axis, ``r = x − c`` and ``a = r·ẑ``. The vector to the point ``r_s`` depends on
the shape: ``POINT`` ``r_s = r``; ``PLANE`` ``r_s = a ẑ`` (distance to the XY
plane), except for ``VORTEX`` and ``LINE`` where ``r_s = r − a ẑ`` (distance to the
Z axis); ``d = ‖r_s‖``.

Falloff ``φ`` (``effector_falloff``). ``z_direction`` ``POSITIVE`` zeroes ``a < 0``,
``NEGATIVE`` zeroes ``a > 0``. With ``ff(u) = 0`` if ``use_max_distance`` and
``u > distance_max``, ``1`` if ``use_min_distance`` and ``u < distance_min``, else
``(1 + u − m)^(−falloff_power)`` (``m = distance_min`` if used, else 0), and
``fr`` the same with the radial settings and ``radial_falloff``:
``SPHERE`` ``φ = ff(d)``; ``TUBE`` ``φ = ff(|a|) fr(‖r − a ẑ‖)``; ``CONE``
``φ = ff(|a|) fr(angle between r and ẑ in degrees)``. Sinew's ``field_weight``
multiplies every field (Blender's effector weights).

Field vector per vertex (``do_physical_effector``; ``s`` the strength plus noise,
``v`` the vertex velocity in m/s):

* ``WIND``: ``q = s φ ẑ``;
* ``FORCE``: ``q = s φ r_s/d`` (``× d⁻²`` with ``use_gravity_falloff``);
* ``VORTEX`` ``POINT``: ``q = s φ d (ẑ × r_s)/‖ẑ × r_s‖``; other shapes:
  ``t = s φ (ẑ × r)``, ``q = s φ (ẑ × t) + t − v``;
* ``TURBULENCE``: ``q = s φ (2 T(p) − 1)`` per component with ``T`` a fractal
  noise in ``[0, 1]`` of ``p = r + ẑ`` (or ``x`` with ``use_global_coords``)
  divided by ``size``;
* ``DRAG``: ``q = −φ v̂ ‖v‖ (min(s, 2) ‖v‖ + min(k, 2))`` with ``s`` Blender's
  ``f_strength`` (RNA ``linear_drag``) and ``k`` its ``f_damp`` (RNA
  ``quadratic_drag``): Blender multiplies the former by ``‖v‖²``, and so do we;
* every type but ``DRAG``: ``q −= flow φ v``.

How cloth feels it. Blender splits ``q`` into a wind part ``wind_factor · q`` and a
force part ``(1 − wind_factor) · q``. Per triangle of area ``A`` and unit normal
``n̂`` the wind part acts as a pressure along the normal (a face edge-on to the
wind catches none) and the force part as a force per area; each is integrated
over the triangle with linear shape functions, so corner ``i`` gets
``κ (A/12)(pᵢ + Σⱼ pⱼ) n̂`` and ``κ (A/12)(qᵢ + Σⱼ qⱼ)`` (``pⱼ = q_windⱼ·n̂``).
Meshes without triangles get ``(κ/2) q`` per vertex (Blender's vertex wind).

Units. Blender's Cloth measures time in frames (velocities in m/frame, its
gravity scaled by 0.001 per frame²) and its effector scale is 0.02; its effector
output is ``q/fps``. Converting its force to newtons (× fps²) gives
``κ = 0.02 · fps`` N·s/m³ per unit of ``q``: a wind field of strength 1 facing a
sheet pushes with ``0.02 · fps`` Pa. We use exactly that, so a field pushes a
Sinew mesh with the newtons Blender's Cloth would feel at the same fps.

Noise. Blender's ``noise`` adds a fresh random number to the strength for every
vertex and evaluation; its random sequence cannot be reproduced, so we draw
``noise · U(−1, 1)`` per vertex from numpy's PCG64 seeded with (``seed``, step
counter): deterministic, white in space and time like Blender's. Blender's
turbulence uses its own Perlin noise, which we do not reproduce either:
:func:`value_noise` is a documented lattice value noise (hashed lattice values,
smoothstep-interpolated, Perlin 1985 style) summed over three octaves as
Blender's ``BLI_noise_generic_turbulence`` does (amplitudes 1, ½, ¼, normalised).

Time treatment (semi-implicit). Forces are evaluated once per substep from the
state at its start, with the field settings interpolated to the substep's
midpoint, and held constant during it: every integrator adds them as a constant
force (explicit ones to ``f``, implicit ones to the right-hand side). The
position-dependent part is then first-order accurate and adds no stiffness. The
velocity-dependent part (flow, Vortex's ``−v``, Drag) is an explicit damping
``−γ v``: stable while ``γ h/m < 2``. :meth:`FieldForces.evaluate` caps it per
vertex so that ``γ h/m ≤ 1`` (it can stop a vertex within one step but never
reverse it), which keeps it stable at any step size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import SinewError
from .forces import row_norms

__all__ = ["FIELD_TYPES", "EFFECTOR_SCALE", "ForceField", "FieldForces", "interpolate_fields",
           "falloff", "value_noise", "turbulence"]

#: The field types Sinew evaluates (Blender's ``FieldSettings.type`` values).
FIELD_TYPES = ("WIND", "FORCE", "VORTEX", "TURBULENCE", "DRAG")
SHAPES = ("POINT", "LINE", "PLANE")
FALLOFF_TYPES = ("SPHERE", "TUBE", "CONE")
Z_DIRECTIONS = ("BOTH", "POSITIVE", "NEGATIVE")

#: Blender Cloth's ``effector_scale`` (force per area per unit field, per frame units).
EFFECTOR_SCALE = 0.02
_TINY = 1e-12


@dataclass(frozen=True)
class ForceField:
    """One force field at one instant, as plain numbers (Blender's ``FieldSettings``).

    Attributes
    ----------
    kind : str
        One of :data:`FIELD_TYPES`.
    matrix : numpy.ndarray
        Shape ``(4, 4)``, the field object's world matrix (location and Z axis used).
    strength, flow, noise : float
        Blender's ``strength`` (``linear_drag`` for Drag), ``flow``, ``noise``.
    seed : int
        Noise seed.
    shape, falloff_type, z_direction : str
        ``'POINT'``/``'LINE'``/``'PLANE'``; ``'SPHERE'``/``'TUBE'``/``'CONE'``;
        ``'BOTH'``/``'POSITIVE'``/``'NEGATIVE'``.
    falloff_power : float
    use_min_distance, use_max_distance : bool
    distance_min, distance_max : float
        m.
    use_radial_min, use_radial_max : bool
    radial_min, radial_max : float
        m (TUBE) or degrees (CONE).
    radial_falloff : float
    damp : float
        Blender's ``f_damp`` (RNA ``quadratic_drag``), Drag only.
    size : float
        Turbulence size, m (0: unscaled).
    use_global_coords : bool
        Turbulence noise in world coordinates instead of the field's.
    use_gravity_falloff : bool
        Force field ``× 1/d²``.
    wind_factor : float
        Share of the field that acts only along face normals (Blender's default: 1
        for a Wind field added from the Add menu, 0 otherwise).
    apply_to_location : bool
        Off: the field does nothing.
    """

    kind: str
    matrix: np.ndarray
    strength: float = 1.0
    flow: float = 0.0
    noise: float = 0.0
    seed: int = 0
    shape: str = "POINT"
    falloff_type: str = "SPHERE"
    falloff_power: float = 0.0
    use_min_distance: bool = False
    distance_min: float = 0.0
    use_max_distance: bool = False
    distance_max: float = 0.0
    use_radial_min: bool = False
    radial_min: float = 0.0
    use_radial_max: bool = False
    radial_max: float = 0.0
    radial_falloff: float = 0.0
    z_direction: str = "BOTH"
    damp: float = 1.0
    size: float = 0.0
    use_global_coords: bool = False
    use_gravity_falloff: bool = False
    wind_factor: float = 0.0
    apply_to_location: bool = True

    def __post_init__(self) -> None:
        if self.kind not in FIELD_TYPES:
            raise SinewError(f"unsupported force field type {self.kind!r}; "
                             f"expected one of {', '.join(FIELD_TYPES)}")
        if self.shape not in SHAPES:
            raise SinewError(f"unsupported force field shape {self.shape!r}; "
                             f"expected one of {', '.join(SHAPES)}")
        if self.falloff_type not in FALLOFF_TYPES:
            raise SinewError(f"unknown falloff type {self.falloff_type!r}")
        if self.z_direction not in Z_DIRECTIONS:
            raise SinewError(f"unknown z direction {self.z_direction!r}")
        m = np.array(self.matrix, dtype=np.float64)
        if m.shape != (4, 4) or not np.all(np.isfinite(m)):
            raise SinewError("a force field's matrix must be a finite 4×4 matrix")
        m.setflags(write=False)
        object.__setattr__(self, "matrix", m)
        # finite numbers (checked together: fields are made per substep by interpolation)
        floats = [(f.name, v) for f in _FIELDS if isinstance(v := getattr(self, f.name), float)]
        if not np.all(np.isfinite([v for _, v in floats])):
            name, val = next((n, v) for n, v in floats if not np.isfinite(v))
            raise SinewError(f"force field {name} must be finite, got {val!r}")
        z = m[:3, 2]
        n = math.sqrt(float(z @ z))
        axis = z / n if n > _TINY else np.array([0.0, 0.0, 1.0])
        axis.setflags(write=False)
        object.__setattr__(self, "_axis", axis)

    @property
    def center(self) -> np.ndarray:
        """World location ``(3,)``."""
        return self.matrix[:3, 3]

    @property
    def axis(self) -> np.ndarray:
        """Unit Z axis ``(3,)`` (``(0, 0, 1)`` for a degenerate matrix)."""
        return self._axis


_FIELDS = dataclasses.fields(ForceField)

_LERPED = ("strength", "flow", "noise", "falloff_power", "distance_min", "distance_max",
           "radial_min", "radial_max", "radial_falloff", "damp", "size", "wind_factor")


def interpolate_fields(a: Sequence[ForceField], b: Sequence[ForceField],
                       t: float) -> list[ForceField]:
    """Fields at fraction ``t`` ∈ [0, 1] between two instants.

    Numbers and matrices are interpolated linearly (the axis is renormalised when
    used); switches, enums and seeds come from ``a``. Both lists must describe the
    same fields in the same order.
    """
    if len(a) != len(b):
        raise SinewError("the force fields differ between frames")
    if t == 0.0:
        return list(a)
    out = []
    for fa, fb in zip(a, b):
        if fa.kind != fb.kind:
            raise SinewError("a force field changed its type between frames")
        vals = {k: (1.0 - t) * getattr(fa, k) + t * getattr(fb, k) for k in _LERPED}
        out.append(replace(fa, matrix=(1.0 - t) * fa.matrix + t * fb.matrix, **vals))
    return out


def _falloff_1d(u: np.ndarray, use_min: bool, lo: float, use_max: bool, hi: float,
                power: float) -> np.ndarray:
    """Blender's ``falloff_func`` on an array ``u`` ``(n,)``."""
    base = 1.0 + u - (lo if use_min else 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.power(base, -power) if power != 0.0 else np.ones_like(u)
    if use_min:
        out = np.where(u < lo, 1.0, out)
    if use_max:
        out = np.where(u > hi, 0.0, out)
    return out


def _geometry(fld: ForceField, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                       np.ndarray]:
    """``r`` ``(n, 3)``, ``a = r·ẑ`` ``(n,)``, ``r_s`` ``(n, 3)`` and ``d`` ``(n,)``."""
    z = fld.axis
    r = x - fld.center
    a = r @ z
    if fld.shape == "POINT":
        rs = r
    elif fld.shape == "LINE" or fld.kind == "VORTEX":
        rs = r - a[:, None] * z
    else:
        rs = a[:, None] * z
    return r, a, rs, row_norms(rs)


def falloff(fld: ForceField, x: np.ndarray) -> np.ndarray:
    """Blender's effector falloff ``φ`` of ``fld`` at positions ``x`` ``(n, 3)``; ``(n,)``."""
    r, a, _, d = _geometry(fld, x)
    return _falloff_from(fld, r, a, d)


def _falloff_from(fld: ForceField, r: np.ndarray, a: np.ndarray, d: np.ndarray) -> np.ndarray:
    dist = (fld.use_min_distance, fld.distance_min, fld.use_max_distance, fld.distance_max,
            fld.falloff_power)
    rad = (fld.use_radial_min, fld.radial_min, fld.use_radial_max, fld.radial_max,
           fld.radial_falloff)
    if fld.falloff_type == "SPHERE":
        phi = _falloff_1d(d, *dist)
    else:
        phi = _falloff_1d(np.abs(a), *dist)
        if fld.falloff_type == "TUBE":
            radial = row_norms(r - a[:, None] * fld.axis)
        else:
            rn = row_norms(r)
            cos = np.divide(a, rn, out=np.ones_like(a), where=rn > _TINY)
            radial = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
        phi = phi * _falloff_1d(radial, *rad)
    if fld.z_direction == "POSITIVE":
        phi = np.where(a < 0.0, 0.0, phi)
    elif fld.z_direction == "NEGATIVE":
        phi = np.where(a > 0.0, 0.0, phi)
    return phi


def _unit_rows(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``u`` ``(n, 3)`` normalised (zero rows stay zero) and their lengths."""
    n = row_norms(u)
    return np.divide(u, n[:, None], out=np.zeros_like(u), where=n[:, None] > _TINY), n


# -- noise -----------------------------------------------------------------------------

_P1, _P2, _P3 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F),
                  np.uint64(0x165667B19E3779F9))
_M1, _M2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)


def _lattice(ix: np.ndarray, iy: np.ndarray, iz: np.ndarray, seed: int) -> np.ndarray:
    """Hashed lattice values in ``[0, 1)`` (MurmurHash3's 64-bit finaliser)."""
    h = (ix.view(np.uint64) * _P1) ^ (iy.view(np.uint64) * _P2) ^ (iz.view(np.uint64) * _P3)
    h ^= np.uint64((int(seed) * 0xD6E8FEB86659FD93) & 0xFFFFFFFFFFFFFFFF)
    h ^= h >> np.uint64(33)
    h *= _M1
    h ^= h >> np.uint64(33)
    h *= _M2
    h ^= h >> np.uint64(33)
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def value_noise(p: np.ndarray, seed: int = 0) -> np.ndarray:
    """Lattice value noise in ``[0, 1)`` at points ``p`` ``(n, 3)``; ``(n,)``.

    Each integer lattice point gets a hashed value (from ``seed``); between them the
    values are blended trilinearly with the smoothstep weights ``3f² − 2f³``, so the
    noise is continuous with a continuous gradient.
    """
    p = np.asarray(p, dtype=np.float64)
    cell = np.floor(p)
    f = p - cell
    w = f * f * (3.0 - 2.0 * f)
    i = cell.astype(np.int64)
    out = np.zeros(len(p))
    for dx in (0, 1):
        wx = w[:, 0] if dx else 1.0 - w[:, 0]
        for dy in (0, 1):
            wy = w[:, 1] if dy else 1.0 - w[:, 1]
            for dz in (0, 1):
                wz = w[:, 2] if dz else 1.0 - w[:, 2]
                out += wx * wy * wz * _lattice(i[:, 0] + dx, i[:, 1] + dy, i[:, 2] + dz, seed)
    return out


def turbulence(p: np.ndarray, seed: int = 0, octaves: int = 3) -> np.ndarray:
    """Fractal sum of :func:`value_noise` (amplitudes 1, ½, ¼ …, frequencies doubling),
    normalised to ``[0, 1)``; ``p`` ``(n, 3)``, returns ``(n,)``."""
    total = np.zeros(len(p))
    amp, norm = 1.0, 0.0
    for o in range(octaves):
        total += amp * value_noise(p * (2.0 ** o), seed + 7919 * o)
        norm += amp
        amp *= 0.5
    return total / norm


# -- evaluation ------------------------------------------------------------------------

def field_vectors(fld: ForceField, x: np.ndarray, v: np.ndarray,
                  tick: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The field vector ``q`` of one field (module docstring), split into its
    position-dependent and velocity-dependent parts, each ``(n, 3)``.

    Parameters
    ----------
    fld : ForceField
    x, v : numpy.ndarray
        Shape ``(n, 3)``: positions (m) and velocities (m/s).
    tick : int
        Step counter for the strength noise.
    """
    n = len(x)
    qv = np.zeros_like(x)
    if not fld.apply_to_location:
        return np.zeros_like(x), qv
    r, a, rs, d = _geometry(fld, x)
    phi = _falloff_from(fld, r, a, d)
    z = fld.axis
    s = np.full(n, float(fld.strength))
    damp = float(fld.damp)
    if fld.noise > 0.0:
        rng = np.random.default_rng([int(fld.seed) & 0x7FFFFFFF, int(tick) & 0x7FFFFFFF])
        s = s + fld.noise * rng.uniform(-1.0, 1.0, n)
        if fld.kind == "DRAG":
            damp = damp + fld.noise * rng.uniform(-1.0, 1.0, n)
    sp_ = s * phi
    if fld.kind == "WIND":
        qx = sp_[:, None] * z
    elif fld.kind == "FORCE":
        unit, _ = _unit_rows(rs)
        if fld.use_gravity_falloff:
            sp_ = np.where(d < np.finfo(np.float32).eps, 0.0,
                           sp_ / np.maximum(d, np.finfo(np.float32).eps) ** 2)
        qx = sp_[:, None] * unit
    elif fld.kind == "VORTEX":
        if fld.shape == "POINT":
            unit, _ = _unit_rows(np.cross(z, rs))
            qx = (sp_ * d)[:, None] * unit
        else:
            t = sp_[:, None] * np.cross(z, r)
            qx = sp_[:, None] * np.cross(z, t) + t
            qv -= v
    elif fld.kind == "TURBULENCE":
        p = x.copy() if fld.use_global_coords else r + z
        if fld.size != 0.0:
            p = p / fld.size
        qx = np.stack([2.0 * turbulence(p, fld.seed + 101 * k) - 1.0 for k in range(3)], axis=1)
        qx *= sp_[:, None]
    else:  # DRAG
        unit, speed = _unit_rows(v)
        coef = phi * speed * (np.minimum(s, 2.0) * speed + np.minimum(damp, 2.0))
        qx = np.zeros_like(x)
        qv -= coef[:, None] * unit
    if fld.kind != "DRAG" and fld.flow != 0.0:
        qv -= (fld.flow * phi)[:, None] * v
    return qx, qv


class FieldForces:
    """Per-vertex forces of a set of force fields on one triangle mesh.

    Parameters
    ----------
    triangles : numpy.ndarray or None
        Shape ``(t, 3)`` vertex indices (Blender's loop triangles); ``None`` or
        empty: per-vertex (hair-style) response.
    masses : numpy.ndarray
        Shape ``(n,)``, kg (for the stability cap of the velocity-dependent part).
    fps : float
        Frames per second (Blender's Cloth force scale is ``0.02 · fps``, module
        docstring).
    weight : float
        ``field_weight``: scale of all fields; 0 gives exactly zero forces.
    """

    def __init__(self, triangles: np.ndarray | None, masses: np.ndarray, *, fps: float,
                 weight: float = 1.0) -> None:
        m = np.asarray(masses, dtype=np.float64).reshape(-1)
        n = len(m)
        if not (np.isfinite(fps) and fps > 0):
            raise SinewError("fps must be > 0")
        if not np.isfinite(weight):
            raise SinewError("field_weight must be finite")
        tri = np.zeros((0, 3), dtype=np.int64) if triangles is None else \
            np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        if len(tri) and (tri.min() < 0 or tri.max() >= n):
            raise SinewError(f"triangle vertex index out of range [0, {n})")
        self.masses = m
        self.triangles = tri
        self.fps = float(fps)
        self.weight = float(weight)
        self.kappa = EFFECTOR_SCALE * self.fps * self.weight
        # the corners' vertices by corner (3, t), contiguous: gathers by ``take``
        self._corners = np.ascontiguousarray(tri.T)
        self._scatter: dict[int, np.ndarray] = {}  # k → bincount slots of (k, 3, 3, t)

    def _distribute(self, wind: np.ndarray, ext: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Corner forces of the wind part (pressure along normals) and the force
        part (per area), summed per vertex, without the factor κ. ``wind`` and
        ``ext`` are ``(n, k, 3)`` (``k`` vector fields distributed at once);
        returns ``(n, k, 3)``.

        With ``sₜ = Aₜ/12`` (the consistent mass matrix of linear interpolation:
        ``∫ φᵢ φⱼ = sₜ (1 + δᵢⱼ)``) and the corners' field vectors ``qᵢ``, corner ``i`` gets
        ``sₜ (qᵢ + Σⱼ qⱼ)`` from the force part and ``sₜ (pᵢ + Σⱼ pⱼ) n̂ₜ``, ``pᵢ = qᵢ·n̂ₜ``,
        from the wind part. Computed coordinate by coordinate on ``(…, t)`` rows (corners
        gathered by ``take``, summed per vertex by one ``bincount``): per-vertex 3 × 3
        products (``Σₜ sₜ n̂n̂ᵀ``) and sparse products took 2.5× the time on the bench's flag.
        """
        tri = self.triangles
        if not len(tri):
            return 0.5 * (wind + ext)
        n, k = wind.shape[:2]
        t = len(tri)
        corners = self._corners
        c = np.ascontiguousarray(x.T).take(corners, axis=1)  # (coordinate, corner, t)
        e1 = c[:, 0] - c[:, 1]
        e2 = c[:, 1] - c[:, 2]
        nor = np.empty((3, t))
        np.subtract(e1[1] * e2[2], e1[2] * e2[1], out=nor[0])
        np.subtract(e1[2] * e2[0], e1[0] * e2[2], out=nor[1])
        np.subtract(e1[0] * e2[1], e1[1] * e2[0], out=nor[2])
        twice = np.sqrt(np.einsum("jt,jt->t", nor, nor))
        np.divide(nor, twice, out=nor, where=twice > _TINY)
        nor[:, twice <= _TINY] = 0.0
        share = twice / 24.0  # A/12 with A = |cross|/2, shape (t,)
        force = np.zeros((k, 3, 3, t))  # (field, coordinate, corner, triangle)
        if np.any(ext):
            q = np.ascontiguousarray(ext.transpose(1, 2, 0)).take(corners, axis=2)
            q += q.sum(axis=2, keepdims=True)
            q *= share
            force += q
        if np.any(wind):
            q = np.ascontiguousarray(wind.transpose(1, 2, 0)).take(corners, axis=2)
            p = q[:, 0] * nor[0]  # (k, corner, t): qᵢ·n̂
            p += q[:, 1] * nor[1]
            p += q[:, 2] * nor[2]
            p += p.sum(axis=1, keepdims=True)
            p *= share
            force += p[:, None] * nor[None, :, None, :]
        slots = self._scatter.get(k)
        if slots is None:
            slots = (np.arange(3 * k)[:, None, None] * n + corners[None]).reshape(-1)
            self._scatter[k] = slots
        out = np.bincount(slots, force.reshape(-1), minlength=3 * k * n)
        return out.reshape(k, 3, n).transpose(2, 0, 1)

    def evaluate(self, fields: Sequence[ForceField], x: np.ndarray, v: np.ndarray, *,
                 tick: int = 0, h: float | None = None) -> np.ndarray:
        """Forces ``(n, 3)`` in N on the vertices at positions ``x`` and velocities
        ``v`` (both ``(n, 3)``, world space).

        ``tick`` seeds the strength noise; with ``h`` (s), the velocity-dependent
        part is capped so that it never reverses a vertex's velocity within a step
        of that length (module docstring).
        """
        x = np.asarray(x, dtype=np.float64)
        v = np.asarray(v, dtype=np.float64)
        out = np.zeros_like(x)
        if self.weight == 0.0 or not fields:
            return out
        # [:, 0] the position-dependent part, [:, 1] the velocity-dependent part
        wind = np.zeros((len(x), 2, 3))
        ext = np.zeros((len(x), 2, 3))
        for k, fld in enumerate(fields):
            qx, qv = field_vectors(fld, x, v, tick * 1009 + k)
            wf = float(fld.wind_factor)
            if wf != 0.0:
                wind[:, 0] += wf * qx
                wind[:, 1] += wf * qv
            if wf != 1.0:
                ext[:, 0] += (1.0 - wf) * qx
                ext[:, 1] += (1.0 - wf) * qv
        both = self._distribute(wind, ext, x)
        both *= self.kappa
        fx, fv = both[:, 0], both[:, 1]
        if h is not None and h > 0:
            vv = np.einsum("ij,ij->i", v, v)
            gamma = np.divide(np.maximum(-np.einsum("ij,ij->i", fv, v), 0.0), vv,
                              out=np.zeros_like(vv), where=vv > 0)
            over = gamma * h > self.masses
            if np.any(over):
                fv[over] *= (self.masses[over] / (gamma[over] * h))[:, None]
        out += fx
        out += fv
        return out

    def for_frame(self, start: Sequence[ForceField], end: Sequence[ForceField],
                  frame: int) -> Callable[[np.ndarray, np.ndarray, float, float], np.ndarray] | None:
        """The ``external`` callable of :meth:`.simulate.Simulator.advance` for the
        step from one frame (fields ``start``) into the next (fields ``end``):
        ``external(x, v, t, h)`` with ``t`` the substep's midpoint as a fraction of
        the frame. ``None`` when no field can act (no fields or weight 0)."""
        if self.weight == 0.0 or not (start or end):
            return None
        start = list(start) if start else list(end)
        end = list(end) if end else start

        def external(x: np.ndarray, v: np.ndarray, t: float, h: float) -> np.ndarray:
            tick = int(frame) * 4096 + int(round(t * 4095))
            return self.evaluate(interpolate_fields(start, end, t), x, v, tick=tick, h=h)

        return external
