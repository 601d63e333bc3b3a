"""What the three IK solvers share: settings, results, validation and the common driver.

The driver (:func:`solve_batch`) handles, for a batch of independent problems at once:
input validation, targets out of reach (the chain is stretched straight toward the target),
a chain lying straight along the line to a nearer target (it is bent slightly toward the pole,
or the middle bone's +Z, so that the solvers have a direction to move in), the pole target,
and the final statistics. Each solver supplies a *kernel* that iterates on the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import quat
from ..errors import ChainError
from .chain import Chain, RootLike, _fk, _root_arrays
from .limits import clamp_bounds

__all__ = ["SolveSettings", "SolveResult", "solve_batch", "recover_rotations", "Kernel"]

# kernel(chain, q (b,n,4), targets (b,3), root_rot (b,4), root_pos (b,3), settings, max_iter)
#   -> (q (b,n,4), iterations (b,))
Kernel = Callable[..., "tuple[np.ndarray, np.ndarray]"]


@dataclass(frozen=True)
class SolveSettings:
    """Settings shared by every solver.

    Attributes
    ----------
    max_iterations : int
        Largest number of solver iterations per solve (>= 0).
    tolerance : float
        Metres: the solve has converged when the tip is this close to the target.
    """

    max_iterations: int = 50
    tolerance: float = 1e-5

    def __post_init__(self) -> None:
        mi = int(self.max_iterations)
        tol = float(self.tolerance)
        if mi < 0:
            raise ChainError(f"max_iterations must be >= 0, got {self.max_iterations}")
        if not np.isfinite(tol) or tol < 0:
            raise ChainError(f"tolerance must be finite and >= 0, got {self.tolerance}")
        object.__setattr__(self, "max_iterations", mi)
        object.__setattr__(self, "tolerance", tol)


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one IK solve.

    Attributes
    ----------
    rotations : ndarray, shape (n, 4)
        Pose rotations (Blender's pose-bone quaternions), unit, within the limits.
    iterations : int
        Solver iterations used.
    error : float
        Distance from the tip to the target, metres.
    converged : bool
        ``error <= tolerance``.
    """

    rotations: np.ndarray
    iterations: int
    error: float
    converged: bool


def bone_bounds(chain: Chain) -> tuple[np.ndarray, np.ndarray] | None:
    """Limit bounds (n, 3) low/high, or None if the chain has no active limits."""
    if chain.limits is None or not chain.limits.active:
        return None
    return chain.limits.bounds()


def clamp_bone(q: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None, i: int) -> np.ndarray:
    """Clamp the pose rotations ``q (b, 4)`` of bone ``i`` (no-op without limits)."""
    if bounds is None:
        return q
    lo, hi = bounds[0][i], bounds[1][i]
    if np.all(np.isinf(lo)) and np.all(np.isinf(hi)):
        return q
    return clamp_bounds(q, lo, hi)


def recover_rotations(chain: Chain, q_old: np.ndarray, desired: np.ndarray, root_rot: np.ndarray,
                      root_pos: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Pose rotations that put the joints at ``desired``, keeping each bone's previous twist.

    From the root outwards, bone ``i`` keeps its previous pose rotation on top of its (new)
    parent frame, then turns by the minimal rotation taking its segment (head to next head)
    onto the direction of the desired next joint, and is clamped into its limits. This is the
    rotation step of FABRIK (Aristidou & Lasenby 2011) with twist preserved. Non-connected
    bones are handled because a segment is the rigid head-to-next-head offset in the bone's
    frame; a zero segment keeps its previous rotation.

    Parameters
    ----------
    chain : Chain
    q_old : ndarray, shape (b, n, 4)
        Previous pose rotations.
    desired : ndarray, shape (b, n+1, 3)
        Desired joint positions, metres (index 0 is ignored: the first head is fixed).
    root_rot, root_pos : ndarray, shapes (b, 4), (b, 3)
    bounds : tuple of ndarray (n, 3), optional
        Limit bounds from :func:`bone_bounds`.

    Returns
    -------
    q : ndarray, shape (b, n, 4)
    positions : ndarray, shape (b, n+1, 3)
        The joints the returned pose really reaches (differs from ``desired`` under limits).
    """
    b, n = q_old.shape[0], chain.n
    if b == 1 and bounds is None:
        from ._scalar import recover_one
        q1, p1 = recover_one(chain, q_old[0], desired[0], root_rot[0], root_pos[0])
        return q1[None], p1[None]
    q_new = np.empty_like(q_old)
    pos = np.empty((b, n + 1, 3))
    g = root_rot
    h = root_pos
    for i in range(n):
        h = h + quat.rotate(g, chain.rest_offsets[i])
        pos[:, i] = h
        par = quat.multiply(g, chain.rest_rotations[i])
        cur = quat.multiply(par, q_old[:, i])
        seg = chain.segments[i]
        if chain.segment_lengths[i] > 0.0:
            d_cur = quat.rotate(cur, seg)
            d_new = desired[:, i + 1] - h
            r = quat.between(d_cur, d_new)
            qi = quat.normalize(quat.multiply(quat.conjugate(par), quat.multiply(r, cur)))
        else:
            qi = q_old[:, i]
        qi = clamp_bone(qi, bounds, i)
        q_new[:, i] = qi
        g = quat.multiply(par, qi)
    pos[:, n] = h + quat.rotate(g, chain.segments[n - 1])
    return q_new, pos


def _straight_one(pts: list, reach: float) -> bool:
    """Whether the joints ``pts`` (plain lists) lie on the first-head -> tip line."""
    bx, by, bz = pts[0]
    ux, uy, uz = pts[-1][0] - bx, pts[-1][1] - by, pts[-1][2] - bz
    ll = (ux * ux + uy * uy + uz * uz) ** 0.5
    if ll <= 1e-12:
        return True
    ux, uy, uz = ux / ll, uy / ll, uz / ll
    lim = (1e-7 * reach) ** 2
    for x, y, z in pts[1:-1]:
        rx, ry, rz = x - bx, y - by, z - bz
        d = rx * ux + ry * uy + rz * uz
        px, py, pz = rx - d * ux, ry - d * uy, rz - d * uz
        if px * px + py * py + pz * pz > lim:
            return False
    return True


def _prebend(chain: Chain, q: np.ndarray, pos: np.ndarray, glob: np.ndarray, targets: np.ndarray,
             bend: np.ndarray) -> np.ndarray:
    """Bend chains that lie straight along the line to a nearer target; return new q."""
    if pos.shape[0] == 1 and not _straight_one(pos[0].tolist(), chain.reach):
        return q
    base = pos[:, 0]
    line = pos[:, -1] - base
    ll = np.linalg.norm(line, axis=1)
    reach = chain.reach
    u = line / np.where(ll > 1e-12, ll, 1.0)[:, None]
    rel = pos - base[:, None]
    perp = rel - np.einsum("bji,bi->bj", rel, u)[..., None] * u[:, None]
    straight = np.max(np.linalg.norm(perp, axis=2), axis=1) < 1e-7 * reach
    tr = targets - base
    tperp = tr - np.einsum("bi,bi->b", tr, u)[:, None] * u
    on_line = np.linalg.norm(tperp, axis=1) < 1e-7 * reach
    nearer = np.linalg.norm(tr, axis=1) < reach * (1.0 - 1e-9)
    sel = straight & on_line & nearer & (ll > 1e-12) & (chain.n > 1)
    if not np.any(sel):
        return q
    bp = bend[sel] - np.einsum("bi,bi->b", bend[sel], u[sel])[:, None] * u[sel]
    nb = np.linalg.norm(bp, axis=1)
    fallback = quat._any_perpendicular(u[sel])
    bp = np.where((nb > 1e-9)[:, None], bp / np.where(nb > 1e-9, nb, 1.0)[:, None], fallback)
    # Curl every bone after the first by a small angle about axis a = bp x u (global), which
    # puts the middle joints on the +bp side of the chord.
    axis = np.cross(bp, u[sel])
    eps = 0.2
    r = quat.from_axis_angle(axis, np.full(axis.shape[0], eps))
    qs = q[sel].copy()
    gs = glob[sel]
    for i in range(1, chain.n):
        par = quat.multiply(gs[:, i], quat.conjugate(qs[:, i]))
        qs[:, i] = quat.normalize(quat.multiply(quat.conjugate(par), quat.multiply(r, quat.multiply(par, qs[:, i]))))
    # First bone turns back by half the curl so the chord stays near the line.
    par0 = quat.multiply(gs[:, 0], quat.conjugate(qs[:, 0]))
    r0 = quat.from_axis_angle(axis, np.full(axis.shape[0], -0.5 * eps * (chain.n - 1)))
    qs[:, 0] = quat.normalize(quat.multiply(quat.conjugate(par0), quat.multiply(r0, quat.multiply(par0, qs[:, 0]))))
    q = q.copy()
    q[sel] = qs
    return q


def _apply_pole(chain: Chain, q: np.ndarray, pos: np.ndarray, glob: np.ndarray, poles: np.ndarray,
                root_rot: np.ndarray) -> np.ndarray:
    """Turn each solved chain about its first-head -> tip axis so its joints face the pole."""
    base = pos[:, 0]
    line = pos[:, -1] - base
    ll = np.linalg.norm(line, axis=1)
    u = line / np.where(ll > 1e-12, ll, 1.0)[:, None]
    mid = pos[:, 1:-1] - base[:, None]
    mperp = mid - np.einsum("bji,bi->bj", mid, u)[..., None] * u[:, None]
    m = mperp.sum(axis=1)
    pr = poles - base
    pp = pr - np.einsum("bi,bi->b", pr, u)[:, None] * u
    ok = (ll > 1e-9) & (np.linalg.norm(m, axis=1) > 1e-9 * chain.reach) & (np.linalg.norm(pp, axis=1) > 1e-12)
    if not np.any(ok):
        return q
    ang = np.arctan2(np.einsum("bi,bi->b", u, np.cross(m, pp)), np.einsum("bi,bi->b", m, pp))
    ang = np.where(ok, ang, 0.0)
    r = quat.from_axis_angle(u, ang)
    par0 = quat.multiply(glob[:, 0], quat.conjugate(q[:, 0]))
    q = q.copy()
    q[:, 0] = quat.normalize(quat.multiply(quat.conjugate(par0), quat.multiply(r, glob[:, 0])))
    return q


def _errors(pos: np.ndarray, targets: np.ndarray) -> np.ndarray:
    d = pos[:, -1] - targets
    return np.sqrt(np.einsum("bi,bi->b", d, d))


def check_inputs(chain: Chain, targets: np.ndarray, initial: np.ndarray | None, b: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Validate targets (b, 3) and initial rotations (b, n, 4); identity if None."""
    t = np.asarray(targets, dtype=np.float64)
    if t.shape != (b, 3):
        raise ChainError(f"target must have shape (3,), got {t.shape[1:] if t.ndim > 1 else t.shape}")
    if not np.all(np.isfinite(t)):
        raise ChainError("target is not finite")
    if initial is None:
        q = quat.identity((b, chain.n))
    else:
        q = chain.check_rotations(initial)
        if q.shape != (b, chain.n, 4):
            raise ChainError(f"initial rotations must have shape ({chain.n}, 4), got {q.shape[1:]}")
    return t, q


def solve_batch(kernel: Kernel, chain: Chain, targets: np.ndarray, initial: np.ndarray,
                settings: SolveSettings, poles: np.ndarray | None, root_rot: np.ndarray,
                root_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Solve ``b`` independent IK problems with one solver kernel.

    Parameters
    ----------
    kernel : callable
        The solver's iteration loop (see module docstring).
    chain : Chain
    targets : ndarray, shape (b, 3)
        Metres, in the root frame's space.
    initial : ndarray, shape (b, n, 4)
        Starting pose rotations (unit).
    settings : SolveSettings
    poles : ndarray, shape (b, 3), or None
    root_rot, root_pos : ndarray, shapes (b, 4), (b, 3)

    Returns
    -------
    rotations : ndarray, shape (b, n, 4)
    iterations : ndarray of int, shape (b,)
    errors : ndarray, shape (b,)
        Tip distance, metres.
    """
    b = targets.shape[0]
    tol = settings.tolerance
    bounds = bone_bounds(chain)
    q = clamp_bounds_all(initial, bounds)
    pos, glob = _fk(chain, q, root_rot, root_pos)
    err = _errors(pos, targets)
    iters = np.zeros(b, dtype=np.int64)
    todo = err > tol
    if settings.max_iterations == 0:
        todo[:] = False
    # Out of reach and unconstrained: stretch straight toward the target.
    if bounds is None and np.any(todo):
        dist = np.linalg.norm(targets - pos[:, 0], axis=1)
        far = todo & (dist >= chain.reach)
        if np.any(far):
            idx = np.nonzero(far)[0]
            u = (targets[idx] - pos[idx, 0]) / dist[idx, None]
            cum = np.concatenate(([0.0], np.cumsum(chain.segment_lengths)))
            desired = pos[idx, 0][:, None] + cum[None, :, None] * u[:, None]
            qn, _ = recover_rotations(chain, q[idx], desired, root_rot[idx], root_pos[idx], None)
            q[idx] = qn
            iters[idx] = 1
            todo[idx] = False
    if np.any(todo):
        idx = np.nonzero(todo)[0]
        if poles is not None:
            bend = poles[idx] - pos[idx, 0]
        else:
            mid = chain.n // 2
            bend = quat.rotate(glob[idx, mid], np.array([0.0, 0.0, 1.0]))
        qs = _prebend(chain, q[idx], pos[idx], glob[idx], targets[idx], bend)
        qs = clamp_bounds_all(qs, bounds)
        qs, it = kernel(chain, qs, targets[idx], root_rot[idx], root_pos[idx], settings, settings.max_iterations)
        q[idx] = qs
        iters[idx] += it
    if poles is not None and chain.n > 1:
        pos, glob = _fk(chain, q, root_rot, root_pos)
        q = _apply_pole(chain, q, pos, glob, poles, root_rot)
        if bounds is not None:
            q = clamp_bounds_all(q, bounds)
            pos, _ = _fk(chain, q, root_rot, root_pos)
            err = _errors(pos, targets)
            redo = err > tol
            if np.any(redo) and settings.max_iterations > 0:
                idx = np.nonzero(redo)[0]
                qs, it = kernel(chain, q[idx], targets[idx], root_rot[idx], root_pos[idx], settings,
                                settings.max_iterations)
                q[idx] = qs
                iters[idx] += it
    q = quat.normalize(q)
    pos, _ = _fk(chain, q, root_rot, root_pos)
    return q, iters, _errors(pos, targets)


def clamp_bounds_all(q: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Clamp ``q (b, n, 4)`` into limit bounds (no-op without limits)."""
    if bounds is None:
        return q.copy()
    return clamp_bounds(q, bounds[0], bounds[1])


def solve_one(kernel: Kernel, chain: Chain, target: np.ndarray, initial: np.ndarray | None,
              settings: SolveSettings, pole: np.ndarray | None, root: RootLike) -> SolveResult:
    """Single-problem wrapper around :func:`solve_batch` (validates everything)."""
    if not isinstance(settings, SolveSettings):
        raise ChainError("settings must be a SolveSettings")
    tg = np.asarray(target, dtype=np.float64)
    t, q = check_inputs(chain, tg[None] if tg.ndim == 1 else tg,
                        None if initial is None else np.asarray(initial, dtype=np.float64)[None], 1)
    poles = None
    if pole is not None:
        poles = np.asarray(pole, dtype=np.float64).reshape(-1)
        if poles.shape != (3,) or not np.all(np.isfinite(poles)):
            raise ChainError("pole must be a finite (3,) vector")
        poles = poles[None]
    rr, rp = _root_arrays(root, (1,))
    q, it, err = solve_batch(kernel, chain, t, q, settings, poles, np.array(rr), np.array(rp))
    e = float(err[0])
    return SolveResult(q[0], int(it[0]), e, bool(e <= settings.tolerance))


class Solver:
    """Base of the solver classes in the :data:`~core.ik.SOLVERS` table.

    A subclass sets ``name`` (the table key and enum identifier), ``label`` and
    ``description`` (for the UI) and ``kernel``, its batched iteration
    ``kernel(chain, q, targets, root_rot, root_pos, settings, max_iter) -> (q, iterations)``.
    """

    name = ""
    label = ""
    description = ""
    kernel: Kernel

    @classmethod
    def solve(cls, chain: Chain, target: np.ndarray, initial: np.ndarray | None = None,
              settings: SolveSettings = SolveSettings(), pole: np.ndarray | None = None,  # noqa: B008 (frozen)
              root: RootLike = None) -> SolveResult:
        """Solve one pose.

        Parameters
        ----------
        chain : Chain
        target : array_like, shape (3,)
            Metres, in the space of the root frame's parent (armature space).
        initial : array_like, shape (n, 4), optional
            Starting pose rotations (warm start); identity (the rest pose) by default.
        settings : SolveSettings
        pole : array_like, shape (3,), optional
            The chain bends toward this point.
        root : RootTransform or ndarray (4, 4), optional
            The chain's root frame.

        Returns
        -------
        SolveResult
        """
        return solve_one(cls.kernel, chain, target, initial, settings, pole, root)
