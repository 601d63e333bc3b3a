"""What the three IK solvers share: settings, results, the canonical start, poles, the driver.

Every solver computes the pose as a *function of the goals* (target, pole, orientation, root
frame): each problem starts from the same canonical start derived from the rest pose, never
from the previous frame, so a closed target path returns to the same pose and all frames of a
bake are independent (solved at once, vectorised over frames). The driver
(:func:`solve_frames`) does, for a batch of problems:

1. the pole (Blender's IK constraint semantics, intern/iksolver ``ConstrainPoleVector``): the
   chain's root frame is turned about the first bone's head so that the rest chain's
   head -> tip direction points at the target and the first bone's
   ``x cos(pole_angle) + z sin(pole_angle)`` axis, made perpendicular to that direction, points
   at the pole likewise made perpendicular (Blender's "look-at" frames);
2. the canonical start: the rest pose (joint coordinates 0), curled by 0.01 rad per joint about
   each bone's X axis when the rest chain is straight (otherwise a target on its line would
   give no direction to bend in);
3. targets out of reach on chains without limits or orientation goals: the chain points
   straight at them;
4. the solver's kernel; with a pole, Blender's own iteration from the turned start (each IK bone
   a spherical joint, selectively damped least squares: :func:`.least_squares.blender_iterations`),
   then damped least squares with twist on every bone (unless ``lock_ik_y``) to the tolerance:
   the pole sets the start, and the path of Blender's iteration decides where the bend plane
   ends (docs/BENCHMARKS.md, IK poles). FABRIK and CCD, whose passes give no twist, hand chains
   with a pole to DLS.
   Without a pole (or orientation goal, or bounded swing) position goals give no twist;
5. the pole turn is folded into the first bone's rotation (as Blender's ``PrependBasis``), not
   limited by its IK limits, as in Blender. Like Blender, the pole turns the chain *before* the
   solve only: ``ConstrainPoleVector``'s comment speaks of a call after solving too, but
   ``IK_QJacobianSolver::Solve`` calls it once, before iterating, so the bend plane is where
   the iterations leave it. (A final turn that made the pole condition exact after the solve
   put a Rigify arm's elbow up to 15 degrees from Blender's IK constraint with a target looping
   in front of the shoulder and a swaying pole; without it, 1.1 degrees.)
6. the statistics of the pose really returned.

A solver kernel works on the swing-twist joint coordinates of :mod:`.limits`:
``kernel(chain, angles (B, n, 3), targets (B, 3), orientations (B, 4) | None, rotation_weight,
root_rot (B, 4), root_pos (B, 3), settings[, twist=True]) -> (angles, iterations (B,))``
(``twist`` given for chains with a pole: step 4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import quat
from ..errors import ChainError
from .chain import Chain, RootLike, _fk, _root_arrays, pose_from_joints
from .limits import clamp_bounds, from_angles, limit_angles

__all__ = ["SolveSettings", "SolveResult", "Solver", "solve_frames", "pole_turn", "canonical_start",
           "check_frames", "Kernel"]

Kernel = Callable[..., "tuple[np.ndarray, np.ndarray]"]

#: Curl per joint of the canonical start of a chain that is straight at rest, radians.
_CURL = 0.01


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


def clamp_bounds_all(q: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Clamp ``q (..., n, 4)`` into limit bounds (a copy; no-op without limits)."""
    if bounds is None:
        return np.array(q, dtype=np.float64)
    return clamp_bounds(q, bounds[0], bounds[1])


def _straight(chain: Chain) -> bool:
    """Whether the rest chain's joints lie on one line."""
    if chain.n < 2:
        return False
    pos, _ = _fk(chain, quat.identity((1, chain.n)), quat.identity((1,)), np.zeros((1, 3)))
    p = pos[0] - pos[0, 0]
    u = p[-1] / max(np.linalg.norm(p[-1]), 1e-300)
    perp = p - np.outer(p @ u, u)
    return bool(np.max(np.linalg.norm(perp, axis=1)) < 1e-7 * chain.reach)


def canonical_start(chain: Chain, b: int) -> np.ndarray:
    """The start coordinates of every solve, shape (b, n, 3): rest, curled if straight at rest."""
    a = np.zeros((b, chain.n, 3))
    if _straight(chain):
        a[:, 1:, 0] = _CURL
        if chain.limits is not None:
            lo, hi = chain.limits.bounds()
            a = np.clip(a, lo, hi)
    return a


def _look_at(direction: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blender's look-at rows ``(normalize(dir x up), that x dir, -dir)`` (B, 3, 3) and validity (B,)."""
    x = np.cross(direction, up)
    nx = np.linalg.norm(x, axis=1)
    ok = nx > 1e-9
    x = x / np.where(ok, nx, 1.0)[:, None]
    y = np.cross(x, direction)
    return np.stack((x, y, -direction), axis=1), ok


def _unit(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = np.linalg.norm(v, axis=-1)
    ok = n > 1e-12
    return v / np.where(ok, n, 1.0)[..., None], ok


def pole_turn(head: np.ndarray, tip: np.ndarray, root_bone_rot: np.ndarray, goal: np.ndarray,
              pole: np.ndarray, pole_angle: float) -> np.ndarray:
    """The rotation Blender's IK applies to a chain for a pole target (``ConstrainPoleVector``).

    Parameters
    ----------
    head, tip : ndarray, shape (B, 3)
        The chain's first head and its tip, metres.
    root_bone_rot : ndarray, shape (B, 4)
        Global rotation of the first bone.
    goal : ndarray, shape (B, 3)
        Where the head -> tip direction should point (the target; the tip itself makes a
        turn about that direction only).
    pole : ndarray, shape (B, 3)
    pole_angle : float
        Radians.

    Returns
    -------
    ndarray, shape (B, 4)
        A rotation about ``head``: takes the head -> tip direction onto head -> goal, and the
        first bone's ``x cos(a) + z sin(a)`` axis's part perpendicular to it onto the part of
        head -> pole perpendicular to head -> goal. Identity where that is undefined.
    """
    d, ok1 = _unit(tip - head)
    axes = quat.to_matrix(root_bone_rot)
    up = axes[..., :, 0] * np.cos(pole_angle) + axes[..., :, 2] * np.sin(pole_angle)
    gd, ok2 = _unit(goal - head)
    pu, ok3 = _unit(pole - head)
    mat, ok4 = _look_at(d, up)
    pmat, ok5 = _look_at(gd, pu)
    rot = np.swapaxes(pmat, 1, 2) @ mat
    q = quat.from_matrix(rot)
    ok = ok1 & ok2 & ok3 & ok4 & ok5
    return np.where(ok[:, None], q, quat.identity(()))


def _turn_root(rr: np.ndarray, rp: np.ndarray, head: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Root frames turned by ``r`` about ``head``."""
    return quat.multiply(r, rr), head + quat.rotate(r, rp - head)


def check_frames(chain: Chain, targets: np.ndarray, poles: np.ndarray | None, orientations: np.ndarray | None,
                 rotation_weight: float, pole_angle: float) -> tuple:
    """Validate per-problem goals: targets (B, 3), poles/orientations (B, 3)/(B, 4) or broadcastable."""
    t = np.asarray(targets, dtype=np.float64)
    if t.ndim != 2 or t.shape[1] != 3:
        raise ChainError(f"targets must have shape (F, 3), got {t.shape}")
    if not np.all(np.isfinite(t)):
        bad = int(np.argmax(~np.all(np.isfinite(t), axis=1)))
        raise ChainError(f"target of frame index {bad} is not finite")
    b = t.shape[0]
    pl = None
    if poles is not None:
        pl = np.asarray(poles, dtype=np.float64)
        if pl.shape == (3,):
            pl = np.broadcast_to(pl, (b, 3))
        if pl.shape != (b, 3) or not np.all(np.isfinite(pl)):
            raise ChainError(f"poles must be finite with shape ({b}, 3) or (3,), got {pl.shape}")
    ori = None
    w = float(rotation_weight)
    if not np.isfinite(w) or w < 0.0 or w > 1.0:
        raise ChainError(f"rotation_weight must be within [0, 1], got {rotation_weight}")
    pa = float(pole_angle)
    if not np.isfinite(pa):
        raise ChainError(f"pole_angle must be finite, got {pole_angle}")
    if orientations is not None:
        ori = np.asarray(orientations, dtype=np.float64)
        if ori.shape == (4,):
            ori = np.broadcast_to(ori, (b, 4))
        if ori.shape != (b, 4) or not np.all(np.isfinite(ori)) or np.any(np.linalg.norm(ori, axis=1) < 1e-9):
            raise ChainError(f"orientations must be finite non-zero quaternions with shape ({b}, 4), got {ori.shape}")
        ori = quat.normalize(ori)
    if w == 0.0:
        ori = None
    return t, pl, ori, w, pa


def solve_frames(kernel: Kernel, chain: Chain, targets: np.ndarray, settings: SolveSettings,
                 root_rot: np.ndarray, root_pos: np.ndarray, poles: np.ndarray | None = None,
                 pole_angle: float = 0.0, orientations: np.ndarray | None = None,
                 rotation_weight: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Solve ``B`` independent problems (frames) with one solver kernel (validated inputs).

    Parameters
    ----------
    kernel : callable
        The solver's kernel (see the module docstring).
    chain : Chain
    targets : ndarray, shape (B, 3)
        Metres, in the root frame's parent space (armature space).
    settings : SolveSettings
    root_rot, root_pos : ndarray, shapes (B, 4), (B, 3)
    poles : ndarray, shape (B, 3), optional
    pole_angle : float
        Radians (Blender's ``pole_angle``).
    orientations : ndarray, shape (B, 4), optional
        Target global rotation of the tip bone.
    rotation_weight : float
        0..1; 0 = position only.

    Returns
    -------
    rotations : ndarray, shape (B, n, 4)
        Pose rotations within the limits (the pole turn excepted, as in Blender).
    iterations : ndarray of int, shape (B,)
    errors : ndarray, shape (B,)
        Tip distance of the returned pose, metres.
    """
    b = targets.shape[0]
    rr0, rp0 = root_rot, root_pos
    rr, rp = rr0, rp0
    start = canonical_start(chain, b)
    head = rp0 + quat.rotate(rr0, chain.rest_offsets[0])
    if poles is not None:
        pos, glob = _fk(chain, from_angles(start), rr, rp)
        r = pole_turn(head, pos[:, -1], glob[:, 0], targets, poles, pole_angle)
        rr, rp = _turn_root(rr, rp, head, r)
    angles = start.copy()
    iters = np.zeros(b, dtype=np.int64)
    todo = np.ones(b, dtype=bool) if settings.max_iterations > 0 else np.zeros(b, dtype=bool)
    if chain.limits is None or not chain.limits.active:
        if orientations is None:
            dist = np.linalg.norm(targets - head, axis=1)
            far = todo & (dist >= chain.reach)
            if np.any(far):
                idx = np.nonzero(far)[0]
                u = (targets[idx] - head[idx]) / dist[idx, None]
                cum = np.concatenate(([0.0], np.cumsum(chain.segment_lengths)))
                joints = head[idx][:, None] + cum[None, :, None] * u[:, None]
                angles[idx] = limit_angles(pose_from_joints(chain, joints, rr[idx], rp[idx]))
                iters[idx] = 1
                todo[idx] = False
    if np.any(todo):
        idx = np.nonzero(todo)[0]
        # with a pole every bone may also turn about its own axis, as in Blender's solver
        kw = {} if poles is None else {"twist": True}
        a, it = kernel(chain, angles[idx], targets[idx], None if orientations is None else orientations[idx],
                       rotation_weight, rr[idx], rp[idx], settings, **kw)
        angles[idx] = a
        iters[idx] += it
    q = from_angles(angles)
    if poles is not None:
        # Fold the pole turns into the first bone: G_0 = rr . rest_0 . q_0 = rr0 . rest_0 . q_0'.
        rest0 = chain.rest_rotations[0]
        turn = quat.multiply(quat.conjugate(rr0), rr)
        q[:, 0] = quat.normalize(quat.multiply(quat.multiply(quat.conjugate(rest0), quat.multiply(turn, rest0)),
                                               q[:, 0]))
    pos, _ = _fk(chain, q, rr0, rp0)
    d = pos[:, -1] - targets
    return q, iters, np.sqrt(np.einsum("bi,bi->b", d, d))


class Solver:
    """Base of the solver classes in the :data:`~core.ik.SOLVERS` table.

    A subclass sets ``name`` (the table key and enum identifier), ``label`` and
    ``description`` (for the UI), ``kernel`` (see the module docstring) and ``block``, the
    frames a bake solves per vectorised call (so that a block takes a fraction of a second
    and a modal bake stays responsive).
    """

    name = ""
    label = ""
    description = ""
    kernel: Kernel
    block = 512

    @classmethod
    def solve(cls, chain: Chain, target: np.ndarray, initial: np.ndarray | None = None,
              settings: SolveSettings = SolveSettings(), pole: np.ndarray | None = None,  # noqa: B008 (frozen)
              root: RootLike = None, *, pole_angle: float = 0.0, orientation: np.ndarray | None = None,
              rotation_weight: float = 0.0) -> SolveResult:
        """Solve one pose.

        Parameters
        ----------
        chain : Chain
        target : array_like, shape (3,)
            Metres, in the space of the root frame's parent (armature space).
        initial : array_like, shape (n, 4), optional
            Validated but not used: every solve starts from the canonical start (the module
            docstring), so the pose is a function of the goals. Kept for callers of the
            earlier warm-started API.
        settings : SolveSettings
        pole : array_like, shape (3,), optional
            Pole target (Blender's semantics, with ``pole_angle``).
        root : RootTransform or ndarray (4, 4), optional
            The chain's root frame.
        pole_angle : float
            Radians.
        orientation : array_like, shape (4,), optional
            Target global rotation of the tip bone (with ``rotation_weight`` > 0).
        rotation_weight : float
            0..1.

        Returns
        -------
        SolveResult
        """
        if not isinstance(settings, SolveSettings):
            raise ChainError("settings must be a SolveSettings")
        tg = np.asarray(target, dtype=np.float64).reshape(-1)
        if tg.shape != (3,):
            raise ChainError(f"target must have shape (3,), got {np.shape(target)}")
        if not np.all(np.isfinite(tg)):
            raise ChainError("target is not finite")
        if initial is not None:
            q0 = chain.check_rotations(initial)
            if q0.shape != (chain.n, 4):
                raise ChainError(f"initial rotations must have shape ({chain.n}, 4), got {q0.shape}")
        if pole is not None:
            pv = np.asarray(pole, dtype=np.float64).reshape(-1)
            if pv.shape != (3,) or not np.all(np.isfinite(pv)):
                raise ChainError("pole must be a finite (3,) vector")
            pole = pv
        t, pl, ori, w, pa = check_frames(chain, tg[None], pole, orientation, rotation_weight, pole_angle)
        rr, rp = _root_arrays(root, (1,))
        q, it, err = solve_frames(cls.kernel, chain, t, settings, np.array(rr), np.array(rp), pl, pa, ori, w)
        e = float(err[0])
        return SolveResult(q[0], int(it[0]), e, bool(e <= settings.tolerance))
