"""An up-front memory estimate for a spring bake, so a bake that cannot fit is refused
before anything is read (a 200,000-vertex mesh over a long range would otherwise fail
minutes later, or swap the machine to a halt).

The bake holds, per frame, the deformed input in object and world space, the simulated
positions, their object-space copy and a float32 copy for writing (about 160 bytes per
vertex per frame, float64 ``(F, n, 3)`` arrays), plus per vertex the model, the springs and,
for the solvers that factorise a sparse matrix (FAST, IMPLICIT, NEWTON, and VBD for pinned
cloth, whose start is FAST's global solve), the factor.
Measured on a 200,704-vertex grid (3 frames, tracemalloc peaks): FAST 688 MB, SYMPLECTIC
345 MB; the per-vertex constants below are rounded up from those.
"""

from __future__ import annotations

import os

PER_VERTEX_FRAME = 160           # bytes per vertex per baked frame
PER_VERTEX_FACTORISED = 4096     # bytes per vertex: model, springs, sparse factor
PER_VERTEX_EXPLICIT = 2048       # bytes per vertex: model and springs only
FACTORISED = frozenset({"FAST", "IMPLICIT", "NEWTON"})
# Share of the available memory a bake may plan to use.
USABLE = 0.8


def estimate_bytes(vertices: int, frames: int, solver: str, pinned: bool = False) -> int:
    """Estimated peak memory of a bake in bytes (see the module docstring); ``pinned``: the
    mesh has pins."""
    factorised = solver in FACTORISED or (solver == "VBD" and pinned)
    per_vertex = PER_VERTEX_FACTORISED if factorised else PER_VERTEX_EXPLICIT
    return int(vertices) * (per_vertex + PER_VERTEX_FRAME * int(frames))


def available_bytes() -> int | None:
    """Memory the system can still hand out (Linux ``MemAvailable``), None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def check(name: str, vertices: int, frames: int, solver: str, available: int | None = None,
          pinned: bool = False) -> int:
    """Return the estimate; raise :class:`SinewError` when it exceeds the usable memory."""
    from ..core.errors import SinewError

    need = estimate_bytes(vertices, frames, solver, pinned)
    have = available_bytes() if available is None else available
    if have is not None and need > USABLE * have:
        raise SinewError(
            f"{name}: this bake needs about {_gb(need)} of memory ({vertices:,} vertices × {frames:,} "
            f"frames, solver {solver}) but only {_gb(have)} is available; bake a shorter frame range, "
            f"use a coarser mesh, or choose Output 'Cache' for several shorter bakes")
    return need
