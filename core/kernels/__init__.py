"""Sinew's compiled kernels: the one loader and the thin wrappers around them.

The hot loops of the cloth solver (contact detection, the per-vertex solve of Vertex Block
Descent, the strain limit's projections) are C11 with only the C standard library, in
``src/`` beside this file (one file per topic, entry points in ``src/sinew_kernels.h``).
``build.py`` compiles them with zig into ``lib/sinew_kernels-<platform>.<so|dll|dylib>``
for linux_x64, windows_x64, macos_arm64 and macos_x64; the environment variable
``SINEW_KERNELS_LIB`` names another build (the sanitizer tier's).

This module finds the library for this platform, checks its ABI version against
:data:`ABI_VERSION` and declares every entry point's argument types once. A missing or
unloadable library raises :class:`KernelsMissing` with one message that says what to do,
as a missing scipy does. Callers check shapes, dtypes and contiguity with :func:`array`
once per bake and pass the arrays' cached addresses (``array.ctypes.data``): no
``ndpointer`` conversion on the hot paths.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import SinewError

__all__ = ["ABI_VERSION", "KernelsMissing", "library", "platform_tag", "library_path", "array",
           "address", "Anderson", "SpringRows", "VbdProblem", "VbdStage", "VbdSweep", "check_status", "Workers", "block",
           "thread_count"]

#: Must equal ``SINEW_ABI_VERSION`` in ``src/sinew_kernels.h``.
ABI_VERSION = 12
#: The most contact slots per vertex the kernels take (``SINEW_MAX_SLOTS`` in src/sinew_kernels.h).
MAX_SLOTS = 16
#: The most differences an Anderson history holds (``SINEW_ANDERSON_MEMORY``).
ANDERSON_MEMORY = 16
#: Entries per block of Anderson's dot products (``SINEW_ANDERSON_BLOCK``).
ANDERSON_BLOCK = 768
#: The most threads used by default (a sweep's phase has at most 8 slabs: ``vbd._MAX_SLABS``).
MAX_THREADS = 8

_HERE = Path(__file__).resolve().parent
_SUFFIX = {"linux": "so", "windows": "dll", "macos": "dylib"}


class KernelsMissing(SinewError):
    """Sinew's compiled kernel library is missing, unloadable or of another version."""


def platform_tag() -> str:
    """This machine's platform as the zips name it: ``linux_x64``, ``windows_x64``,
    ``macos_arm64`` or ``macos_x64`` (others as ``<os>_<machine>``)."""
    system = {"win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform)
    if system.startswith("linux"):
        system = "linux"
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "arm64": "arm64", "aarch64": "arm64"}.get(machine, machine)
    return f"{system}_{arch}"


def library_path() -> Path:
    """Where the library for this platform is looked for (``SINEW_KERNELS_LIB`` first)."""
    override = os.environ.get("SINEW_KERNELS_LIB")
    if override:
        return Path(override)
    tag = platform_tag()
    return _HERE / "lib" / f"sinew_kernels-{tag}.{_SUFFIX.get(tag.split('_')[0], 'so')}"


_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_F64 = ctypes.c_double


class _SpringsStruct(ctypes.Structure):
    """``SinewVbdSprings`` of ``src/sinew_kernels.h``, field for field."""

    _fields_ = [("off", _P), ("row", _P), ("other", _P), ("k", _P), ("rest", _P), ("kd", _P),
                ("rest_dir", _P), ("limit", _P)]


class _VbdStruct(ctypes.Structure):
    """``SinewVbdProblem`` of ``src/sinew_kernels.h``, field for field."""

    _fields_ = [
        ("n", _I64), ("h", _F64), ("x_prev", _P), ("w", _P), ("y", _P),
        ("springs", _SpringsStruct), ("elastic", _I64), ("k_limit", _F64),
        ("cv", _P), ("cdisp", _P), ("tris", _P), ("closed_tri", _P), ("tri_normal", _P), ("tri_radius", _P),
        ("tri_mu", _P), ("np", _I64), ("prim_type", _P), ("prim", _P),
        ("kslots", _I64), ("c_id", _P), ("c_count", _P), ("c_dist", _P), ("kc", _P), ("eps_u", _F64),
        ("anchor", _P), ("bound", _P),
        ("self_r", _F64), ("self_k", _F64), ("faces", _P), ("edges", _P), ("self_vf", _I64),
        ("pair", _P), ("pair_dist", _P), ("inc_off", _P), ("inc", _P), ("self_anchor", _P),
        ("self_bound", _P), ("self_moved", _P),
    ]


class VbdStage(ctypes.Structure):
    """``SinewVbdStage`` of ``src/sinew_kernels.h``, field for field."""

    _fields_ = [
        ("groups", _I64), ("off", _P), ("vertices", _P), ("cluster", _P), ("leave", _P),
        ("sums", _P), ("whole", _I64), ("terms", _P),
    ]


class AndersonStruct(ctypes.Structure):
    """``SinewAnderson`` of ``src/sinew_kernels.h``, field for field."""

    _fields_ = [("size", _I64), ("memory", _I64), ("state", _P), ("move", _P), ("hist_f", _P),
                ("hist_g", _P), ("gram", _P), ("last", _P), ("before", _P), ("partial", _P)]


class Anderson:
    """Anderson acceleration of a fixed-point iteration ``x ← G(x)`` on iterates of
    ``shape`` (``src/anderson.h``: Anderson 1965; Walker & Ni 2011), its history in arrays
    held here, memory ``memory`` (1 to :data:`ANDERSON_MEMORY`). :meth:`extrapolate` takes
    one iterate (``sinew_anderson``: FAST's local/global iterations); VBD's iterations run
    the same method inside ``sinew_vbd_iterate``, given :attr:`struct`.

    With ``fₖ = G(xₖ) − xₖ`` and the last ``m`` differences ``ΔFᵢ = fᵢ₊₁ − fᵢ``,
    ``ΔGᵢ = G(xᵢ₊₁) − G(xᵢ)``, the next iterate is ``xₖ₊₁ = G(xₖ) − Σᵢ γᵢ ΔGᵢ`` with ``γ``
    minimising ``‖fₖ − Σᵢ γᵢ ΔFᵢ‖`` (an ``m × m`` normal-equation solve, slightly
    regularised). A second vector may be combined with the same weights (FAST's ``S G(x)``,
    which ``S xₖ₊₁`` follows from without a product)."""

    def __init__(self, memory: int, shape: tuple[int, ...]) -> None:
        if not 1 <= int(memory) <= ANDERSON_MEMORY:
            raise ValueError(f"Anderson's memory must be 1 to {ANDERSON_MEMORY}, got {memory!r}")
        self.memory = int(memory)
        self.shape = tuple(int(s) for s in shape)
        size = int(np.prod(self.shape))
        self.size = size
        self.state = np.zeros(2, np.int64)
        self.move = np.full(1, np.inf)
        self.hist_f = np.empty((self.memory, size))
        self.hist_g = np.empty((self.memory, 2, size))
        self.gram = np.zeros((self.memory, self.memory))
        self.last = np.empty((3, size))
        self.before = np.empty(size)
        self.partial = np.empty((-(-size // ANDERSON_BLOCK), 1 + 2 * ANDERSON_MEMORY))
        self.struct = AndersonStruct(size, self.memory, *(a.ctypes.data for a in (
            self.state, self.move, self.hist_f, self.hist_g, self.gram, self.last, self.before, self.partial)))
        self._kernel = library().sinew_anderson

    def clear(self) -> None:
        """Restarts the history: the next iterate is not extrapolated."""
        self.state[0] = 0
        self.move[0] = np.inf

    def _flat(self, a: np.ndarray, name: str) -> np.ndarray:
        v = a.ravel(order="F")  # (no copy for the callers' Fortran-ordered or (N, 1) arrays)
        if v.dtype != np.float64 or v.size != self.size or not v.flags.c_contiguous:
            raise SinewError(f"Anderson's {name} must be {self.shape} float64, got {a.shape} {a.dtype}")
        return v

    def extrapolate(self, g: np.ndarray, f: np.ndarray,
                    sg: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """Records ``G(xₖ)``, ``fₖ`` and ``S G(xₖ)`` (or ``None``, then on every call), each
        of :attr:`shape`; returns ``(xₖ₊₁, S xₖ₊₁)``, Fortran-ordered, or ``(g, sg)``
        themselves where there is nothing to extrapolate from (the first call since
        :meth:`clear`, or weights that are not finite). The kernel copies what it keeps."""
        gv, fv = self._flat(g, "G(x)"), self._flat(f, "f")
        sv = None if sg is None else self._flat(sg, "S G(x)")
        x = np.empty(self.size)
        sx = None if sv is None else np.empty(self.size)
        done = check_status(self._kernel(
            ctypes.addressof(self.struct), gv.ctypes.data, fv.ctypes.data, address(sv), x.ctypes.data,
            address(sx)), "Anderson")
        if not done:
            return g, sg
        return x.reshape(self.shape, order="F"), None if sx is None else sx.reshape(self.shape, order="F")


class VbdSweep(ctypes.Structure):
    """``SinewVbdSweep`` of ``src/sinew_kernels.h``, field for field."""

    _fields_ = [("ncolors", _I64), ("color_off", _P), ("color_vertices", _P)]


#: Entry point → (result type, argument types).
_SIGNATURES = {
    "sinew_abi_version": (ctypes.c_int32, []),
    "sinew_team_size": (_I64, []),
    "sinew_team_init": (ctypes.c_int, [_P, _I64]),
    "sinew_team_cancel": (None, [_P]),
    "sinew_team_contended": (ctypes.c_int, [_P]),
    "sinew_color_greedy": (_I64, [_I64, _P, _P, _P, _P, _P, _I64]),
    "sinew_closest_points": (ctypes.c_int, [_I64, _P, _P, _P, _P, _P, _P]),
    "sinew_element_boxes": (ctypes.c_int, [_I64, _I64, _P, _I64, _P, _P, _P, _P]),
    "sinew_swept_elements_meet": (_I64, [_I64, _I64, _P, _I64, _P, _P, _F64, _P, _P, _P]),
    "sinew_grid_build": (_I64, [_I64, _P, _P, _F64, _I64, _I64, _P, _I64, _P, _P, _P]),
    "sinew_collider_query": (ctypes.c_int, [
        _I64, _P, _P, _I64, _P, _I64, _P, _P, _F64, _I64, _P, _P, _I64, _P, _P, _P, _I64, _P, _P,
        _I64, _P, _P, _P, _P]),
    "sinew_vbd_sweep": (ctypes.c_int, [ctypes.POINTER(_VbdStruct), _I64, _P, _P, _P, _P]),
    "sinew_vbd_push_out": (ctypes.c_int, [ctypes.POINTER(_VbdStruct), _I64, _P, _P]),
    "sinew_vbd_guard": (ctypes.c_int, [ctypes.POINTER(_VbdStruct), _P, _P, _P]),
    "sinew_vbd_cluster_sums": (ctypes.c_int, [ctypes.POINTER(_VbdStruct), _I64, _P, _P, _P, _P, _P, _P]),
    "sinew_vbd_translate": (ctypes.c_int, [ctypes.POINTER(_VbdStruct), _I64, _P, _P, _P, _P, _P, _P]),
    "sinew_vbd_iterate": (_I64, [ctypes.POINTER(_VbdStruct), _P, _I64, _I64, _P, _P, _I64, _P, _P, _I64, _P, _P]),
    "sinew_vbd_forces": (ctypes.c_int, [ctypes.POINTER(_VbdStruct), _I64, _P, _P, _P, _P]),
    "sinew_vbd_carry": (ctypes.c_int, [_I64, _P, _I64, _P, _P, _P, _P, _I64, _P, _P, _I64, _P, _P, _P, _P]),
    "sinew_self_query": (_I64, [_I64, _P, _P, _F64, _F64, _I64, _P, _I64, _P, _F64, _I64, _P, _P, _P, _P,
                                _P, _P, _P, _P, _P, _P, _P, _P, _P, _I64, _I64, _I64, _P, _P, _P]),
    "sinew_crossing_pairs": (_I64, [_I64, _P, _I64, _P, _F64, _I64, _P, _P, _I64, _P, _P, _P, _P, _I64, _P]),
    "sinew_anderson": (ctypes.c_int, [_P, _P, _P, _P, _P, _P]),
    "sinew_fast_local": (ctypes.c_int, [_I64, _I64, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P]),
    "sinew_strain_project": (_I64, [_P, _I64, _I64, _I64, _P, _P, _P, _I64, _P, _I64, _F64,
                                    ctypes.POINTER(_VbdStruct), _P]),
}

_LOADED: dict[str, ctypes.CDLL] = {}
#: The library last returned and the ``SINEW_KERNELS_LIB`` it was found for.
_LAST: tuple[str | None, ctypes.CDLL] | None = None


def library() -> ctypes.CDLL:
    """The kernel library, loaded and checked once per path.

    Raises
    ------
    KernelsMissing
        The file is missing, cannot be loaded, lacks an entry point or has another ABI
        version.
    """
    override = os.environ.get("SINEW_KERNELS_LIB")
    if _LAST is not None and _LAST[0] == override:  # (the path is not worked out again)
        return _LAST[1]
    path = library_path()
    key = str(path)
    lib = _LOADED.get(key)
    if lib is not None:
        _remember(override, lib)
        return lib
    remedy = ("Install the Sinew zip built for this platform, or run `python3 build.py build` "
              "in a source checkout")
    if not path.is_file():
        raise KernelsMissing(
            f"Sinew's compiled kernels for {platform_tag()} are missing ({path.name} not found "
            f"in {path.parent}). {remedy}.")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise KernelsMissing(f"Sinew's compiled kernels ({path.name}) could not be loaded: {exc}. "
                             f"{remedy}.") from None
    for name, (res, args) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise KernelsMissing(f"Sinew's compiled kernels ({path.name}) lack {name}: the "
                                 f"library is from another version. {remedy}.") from None
        fn.restype = res
        fn.argtypes = args
    found = int(lib.sinew_abi_version())
    if found != ABI_VERSION:
        raise KernelsMissing(f"Sinew's compiled kernels ({path.name}) are version {found}, this "
                             f"Sinew needs {ABI_VERSION}. {remedy}.")
    _LOADED[key] = lib
    _remember(override, lib)
    return lib


def _remember(override: str | None, lib: ctypes.CDLL) -> None:
    global _LAST
    _LAST = (override, lib)


def check_status(code: int, what: str) -> int:
    """``code`` from a kernel; a negative one (an error code) raises :class:`SinewError`."""
    if code < 0:
        reason = {-1: "an index out of range", -2: "a buffer too small",
                  -3: "its threads could not all start"}.get(int(code), f"code {code}")
        raise SinewError(f"the {what} kernel refused its input ({reason})")
    return int(code)


def array(value, dtype, shape: tuple, name: str, *, finite: bool = True) -> np.ndarray:
    """``value`` as a C-contiguous array of ``dtype`` and ``shape`` (``-1`` matches any
    length), checked before any C runs: wrong shapes and, for floats, NaN or infinite
    values raise :class:`SinewError`. Returns the array itself when it already fits (no
    copy), so its address can be cached."""
    a = np.asarray(value, dtype=dtype, order="C")  # (ascontiguousarray would make a scalar 1-d)
    if a.ndim != len(shape) or any(s != -1 and s != d for s, d in zip(shape, a.shape)):
        want = "(" + ", ".join("any" if s == -1 else str(s) for s in shape) + ")"
        raise SinewError(f"{name} must have shape {want}, got {a.shape}")
    if finite and a.dtype.kind == "f" and a.size and not np.all(np.isfinite(a)):
        raise SinewError(f"{name} contains NaN or infinite values")
    return a


def address(a: np.ndarray | None) -> int | None:
    """The data address of a C-contiguous array (``None`` for ``None``)."""
    if a is None:
        return None
    if not a.flags.c_contiguous:
        raise SinewError("kernel arrays must be C-contiguous")
    return a.ctypes.data


class SpringRows:
    """The springs each of ``n`` vertices feels, as ``SinewVbdSprings`` in
    ``src/sinew_kernels.h`` takes them: one row of entries per vertex, each entry a spring
    seen from that vertex (its other end, stiffness, rest length, damping, rest direction and
    strain-limit length), the rows laid out in the order a pass of the kernels visits the
    vertices. Every array is checked here, once: shapes, dtypes, finite values, the rows'
    offsets rising from 0 to the entries' count and each vertex's row and other end in
    range."""

    def __init__(self, n: int, off, row, other, k, rest, kd, rest_dir, limit) -> None:
        self.n = int(n)
        self.off = array(off, np.int64, (-1,), "row offsets")
        rows = len(self.off) - 1
        if rows < 0 or self.off[0] != 0 or np.any(np.diff(self.off) < 0):
            raise SinewError("row offsets must rise from 0")
        e = int(self.off[-1])
        self.row = array(row, np.int64, (self.n,), "rows")
        self.other = array(other, np.int64, (e,), "other ends")
        for name, a in (("rows", self.row), ("other ends", self.other)):
            top = rows if name == "rows" else self.n
            if len(a) and not (a.min() >= 0 and a.max() < top):
                raise SinewError(f"{name} out of range")
        self.k = array(k, np.float64, (e,), "stiffness")
        self.rest = array(rest, np.float64, (e,), "rest lengths")
        self.kd = array(kd, np.float64, (e,), "damping")
        self.rest_dir = array(rest_dir, np.float64, (e, 3), "rest directions")
        self.limit = array(limit, np.float64, (e,), "limits")
        self.struct = _SpringsStruct(*(a.ctypes.data for a in (
            self.off, self.row, self.other, self.k, self.rest, self.kd, self.rest_dir, self.limit)))

    def entries(self, i: int) -> slice:
        """The entries of vertex ``i``'s row."""
        r = int(self.row[i])
        return slice(int(self.off[r]), int(self.off[r + 1]))


class VbdProblem:
    """The arrays of one Vertex Block Descent problem and the C struct that points at them.

    Arrays are set by attribute (:meth:`set`); each is checked (dtype, shape, contiguity)
    when set, and the struct's pointer to it updated, so the sweeps pass one pointer.
    Attribute names and shapes are those of ``SinewVbdProblem`` in ``src/sinew_kernels.h``;
    ``springs`` is a :class:`SpringRows` for ``n`` vertices.
    """

    _FLOAT = {"x_prev": (-1, 3), "w": (-1,), "y": (-1, 3), "cv": (-1, 3), "cdisp": (-1, 3),
              "tri_radius": (-1,), "tri_mu": (-1,), "tri_normal": (-1, 3), "prim": (-1, 8), "kc": (-1,),
              "anchor": (-1, 3), "bound": (-1,), "c_dist": (-1, -1), "self_anchor": (-1, 3),
              "self_bound": (-1,), "pair_dist": (-1,), "self_moved": (-1,)}
    _INT = {"tris": (-1, 3), "c_id": (-1, -1), "c_count": (-1,), "faces": (-1, 3), "edges": (-1, 2),
            "pair": (-1, 2), "inc_off": (-1,), "inc": (-1,)}
    #: Arrays read for every vertex: their length is n (inc_off n + 1), else the kernels
    #: would read past their end.
    _ROWS = {"x_prev": 0, "w": 0, "y": 0, "kc": 0, "anchor": 0, "bound": 0, "c_id": 0,
             "c_count": 0, "c_dist": 0, "self_anchor": 0, "self_bound": 0, "inc_off": 1, "self_moved": 0}

    def __init__(self, n: int, h: float) -> None:
        self.lib = library()
        self.struct = _VbdStruct()
        self.struct.n = int(n)
        self.struct.h = float(h)
        self.struct.elastic = 1
        self._keep: dict[str, np.ndarray] = {}
        self.springs: SpringRows | None = None

    def copy(self, h: float) -> VbdProblem:
        """A new problem holding this one's arrays and scalars (checked when they were set),
        with the time step ``h``: a step's problem from one that holds the model's
        constants."""
        out = VbdProblem.__new__(VbdProblem)
        out.lib = self.lib
        out.struct = _VbdStruct.from_buffer_copy(self.struct)
        out._keep = dict(self._keep)
        out.springs = self.springs
        out.set(h=h)
        return out

    def set(self, **arrays) -> None:
        """Set arrays (``None`` clears an optional one) and scalars (``h``, ``k_limit``,
        ``eps_u``, ``self_r``, ``self_k``; ``self_vf`` an int; ``elastic`` a bool) and the
        ``springs`` (a :class:`SpringRows`)."""
        for name, value in arrays.items():
            if name == "self_vf":
                self.struct.self_vf = int(value)
                continue
            if name == "elastic":
                self.struct.elastic = 1 if value else 0
                continue
            if name == "springs":
                if not isinstance(value, SpringRows) or value.n != self.struct.n:
                    raise SinewError(f"springs must be SpringRows for {self.struct.n} vertices")
                self.springs = value
                self.struct.springs = value.struct
                continue
            if name in ("h", "k_limit", "eps_u", "self_r", "self_k"):
                v = float(value)
                if not np.isfinite(v):
                    raise SinewError(f"{name} must be finite")
                setattr(self.struct, name, v)
                continue
            if value is None:
                self._keep.pop(name, None)
                setattr(self.struct, name, None)
                continue
            if name in self._FLOAT:
                a = array(value, np.float64, self._FLOAT[name], name, finite=name != "bound")
            elif name in self._INT:
                a = array(value, np.int64, self._INT[name], name)
            elif name == "closed_tri":
                a = array(value, np.uint8, (-1,), name)
            elif name == "prim_type":
                a = array(value, np.int32, (-1,), name)
            else:
                raise SinewError(f"unknown VBD array {name!r}")
            rows = self._ROWS.get(name)
            if rows is not None and a.shape[0] != self.struct.n + rows:
                raise SinewError(f"{name} must have {self.struct.n + rows} rows (one per vertex"
                                 f"{', and one more' if rows else ''}), got {a.shape[0]}")
            if name == "c_id" and a.shape[1] > MAX_SLOTS:
                raise SinewError(f"c_id has {a.shape[1]} contact slots per vertex; the kernels take "
                                 f"at most {MAX_SLOTS}")
            self._keep[name] = a
            setattr(self.struct, name, a.ctypes.data)
            if name == "prim_type":
                self.struct.np = len(a)
            if name == "c_id":
                self.struct.kslots = a.shape[1]

    def get(self, name: str) -> np.ndarray:
        """The array held for ``name``."""
        return self._keep[name]


def thread_count() -> int:
    """The threads the kernels may use: the ``SINEW_THREADS`` environment variable when it
    is a positive integer (1: none), else the machine's CPUs, at most :data:`MAX_THREADS`.
    Only cloth large enough to be cut into slabs uses more than one (``vbd._SLAB``); the
    result is the same bit for bit at any count (docs/CONTACT.md, "Threads")."""
    env = os.environ.get("SINEW_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(os.cpu_count() or 1, MAX_THREADS))


def block(n: int, part: int, parts: int) -> tuple[int, int]:
    """The items ``[lo, hi)`` of block ``part`` of ``parts`` over ``n`` items, in order (as
    ``team_share`` in ``src/team.h`` cuts them)."""
    return n * part // parts, n * (part + 1) // parts


#: Seconds of team calls that run on one thread after a team was found contended (a thread
#: waited at a barrier for a partner that had no core: ``TEAM_CONTENDED`` in
#: ``src/team.h``), times the barriers of that run where it happened; then the threads are
#: tried again. A run found contended again at once doubles the next spell, up to
#: :data:`SOLO_SECONDS_MAX`; each run that meets at once shortens it by :data:`SOLO_DECAY`,
#: down to this. The spell is time, not calls: 64 calls (the twenty-second session's) were a
#: tenth of a second of a 40² tablecloth's short calls but seconds of a 160² landing's, and
#: one preempted barrier on an idle machine cost that landing a third of its speed; 0.1 s
#: let a 100² tablecloth beside a busy process probe its threads too often (docs/CONTACT.md,
#: *Threads*).
SOLO_SECONDS = 0.25
#: The longest spell on one thread (a machine that stays busy).
SOLO_SECONDS_MAX = 3.2
#: How much shorter each team run that meets at once makes the next spell, s.
SOLO_DECAY = 0.0625
#: The clock the spells are timed by (a test may set another).
_clock = time.perf_counter


class Workers:
    """Runs a kernel call as a team of threads (``src/team.h``): the same entry point on each
    thread, with the thread's index, inside one foreign call per thread (ctypes releases the
    GIL for its length); the threads meet at barriers in C. This thread is thread 0; the
    others come from a pool kept between calls. One thread: the call runs here alone.

    The threads spin at the barriers. When a run finds a thread waiting there for longer than
    a scheduler's time slice (another process had its partner's core), the calls of the next
    :data:`SOLO_SECONDS` run on one thread (:meth:`now` says how many a call gets), as many
    times that as the run had such barriers (a busy machine takes a partner's core at many,
    a preempted thread at one), twice as long each time the threads are found contended
    again right after, up to :data:`SOLO_SECONDS_MAX`, and :data:`SOLO_DECAY` shorter after
    each run that met at once: spinning against a busy machine cost a 40² tablecloth four
    times the time, and the result is the same bit for bit at any count."""

    def __init__(self, threads: int) -> None:
        self.threads = max(int(threads), 1)
        self._pool: ThreadPoolExecutor | None = None
        self._team: np.ndarray | None = None
        self._solo = 0.0  # s of calls left to run on one thread
        self._spell = SOLO_SECONDS  # the next spell on one thread, s
        #: Team runs found contended so far.
        self.contended = 0

    def now(self, threads: int | None = None) -> int:
        """The threads a call asking for ``threads`` (default all) gets now: one while the
        last contended run's spell on one thread is not used up. A caller that cuts its
        work into one block per thread cuts it into this many and asks for as many."""
        want = self.threads if threads is None else min(max(int(threads), 1), self.threads)
        return 1 if self._solo > 0 else want

    def parts(self, n: int, least: int) -> int:
        """How many blocks of at least ``least`` items each ``n`` items split into, one per
        thread (at least one block; :meth:`now`)."""
        return max(1, min(self.now(), int(n) // max(int(least), 1)))

    def team(self, call: Callable[[int, int], int], threads: int, what: str) -> int:
        """Runs ``call(team, t)`` for ``t`` in ``range(threads)`` at once (``team`` the
        address of the team's buffer, set up for ``threads``; at most :attr:`threads`), and
        returns thread 0's result; a negative one raises :class:`SinewError`. A thread that
        cannot start, or raises before its call, cancels the others (they leave at their
        next barrier), and its exception is raised here."""
        lib = library()
        threads = self.now(threads)
        if self._team is None:
            self._team = np.zeros(int(lib.sinew_team_size()) // 8 + 1, np.int64)
        buf = self._team.ctypes.data
        check_status(lib.sinew_team_init(buf, threads), what)
        if threads == 1:
            start = _clock()
            try:
                return check_status(call(buf, 0), what)
            finally:
                self._solo -= _clock() - start
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="sinew-kernels")
        def guarded(t: int) -> int:  # (a thread that raises before its call stops the others)
            try:
                return call(buf, t)
            except BaseException:
                lib.sinew_team_cancel(buf)
                raise

        futures = []
        try:
            for t in range(1, threads):
                futures.append(self._pool.submit(guarded, t))
            code = call(buf, 0)
        except BaseException:
            lib.sinew_team_cancel(buf)
            for f in futures:
                f.exception()
            raise
        codes = [code] + [f.result() for f in futures]
        marked = int(lib.sinew_team_contended(buf))
        if marked:
            self.contended += 1
            self._solo = min(self._spell * marked, SOLO_SECONDS_MAX)
            self._spell = min(2 * self._spell, SOLO_SECONDS_MAX)
        else:
            self._spell = max(SOLO_SECONDS, self._spell - SOLO_DECAY)
        for c in codes:
            check_status(c, what)
        return int(code)

    def close(self) -> None:
        """Stops the threads (they also stop when the object is collected)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
