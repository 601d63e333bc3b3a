"""Baking IK over a frame range: every frame solved from the canonical start, all at once.

Each frame's pose is a function of that frame's goals (target, pole, orientation, root frame;
see :mod:`.base`), never of the previous frame's pose, so a closed target path returns to the
same pose and frames are independent: they are solved in blocks, vectorised over frames.
``max_step_angle`` then caps how far any joint may turn between consecutive frames (the new
rotation is slerped back toward the previous one; that, and only that, makes a frame depend on
the one before). Output quaternions are made sign-continuous over frames (``q`` and ``-q`` are
the same rotation, but keyframe interpolation between them is not). Errors are the tip
distances of the rotations returned, and ``converged`` says which frames are within the
tolerance: a frame the solver could not bring there is reported, never hidden.

:func:`iter_bake` is a generator that yields after every block of frames so a Blender modal
operator can bake incrementally and cancel; :func:`bake_chain` runs it to the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .. import quat
from ..errors import BakeCancelled, ChainError
from .base import SolveSettings, bone_bounds, check_frames, clamp_bounds_all, solve_frames
from .chain import Chain, RootLike, _fk, _root_arrays

__all__ = ["BakeResult", "BakeProgress", "bake_chain", "iter_bake", "STRATEGIES", "solver_class", "run_to_end",
           "check_finite"]

ProgressFn = Callable[[int, int], bool | None]

#: Accepted for compatibility; every strategy bakes the same way (frames are independent).
STRATEGIES = ("auto", "sequential", "batched")


@dataclass(frozen=True)
class BakeResult:
    """Per-frame output of a bake.

    Attributes
    ----------
    rotations : ndarray, shape (F, n, 4)
        Pose rotations per frame, sign-continuous along frames.
    iterations : ndarray of int, shape (F,)
    errors : ndarray, shape (F,)
        Tip distance of the returned pose from the target, metres.
    converged : ndarray of bool, shape (F,)
        ``errors <= tolerance``.
    """

    rotations: np.ndarray
    iterations: np.ndarray
    errors: np.ndarray
    converged: np.ndarray


@dataclass(frozen=True)
class BakeProgress:
    """What :func:`iter_bake` yields: frames done so far, the total, and (last) the result."""

    done: int
    total: int
    result: BakeResult | None = None


def solver_class(solver: str):
    """The solver class named ``solver`` (a key of ``SOLVERS``)."""
    from . import SOLVERS  # late import: the table lives in the package __init__
    try:
        return SOLVERS[solver]
    except KeyError:
        raise ChainError(f"unknown solver {solver!r}; expected one of {sorted(SOLVERS)}") from None


def iter_bake(chain: Chain, targets: np.ndarray, solver: str, settings: SolveSettings, *,
              max_step_angle: float = 0.0, poles: np.ndarray | None = None, pole_angle: float = 0.0,
              orientations: np.ndarray | None = None, rotation_weight: float = 0.0,
              initial: np.ndarray | None = None, roots: RootLike = None,
              chunk: int = 64, strategy: str = "auto") -> Iterator[BakeProgress]:
    """Bake a frame range incrementally.

    Parameters
    ----------
    chain : Chain
    targets : array_like, shape (F, 3)
        Target per frame, metres, in the roots' space (armature space).
    solver : str
        A key of ``SOLVERS``: ``'CCD'``, ``'FABRIK'`` or ``'DLS'``.
    settings : SolveSettings
    max_step_angle : float
        Radians; largest rotation change of any joint between consecutive frames (0 = off).
    poles : array_like, shape (F, 3) or (3,), optional
        Pole target per frame.
    pole_angle : float
        Radians, Blender's IK constraint ``pole_angle`` (see :func:`.base.pole_turn`).
    orientations : array_like, shape (F, 4) or (4,), optional
        Target armature-space rotation of the tip bone's frame per frame (``w, x, y, z``).
    rotation_weight : float
        0..1, Blender's ``orient_weight``; 0 = position only.
    initial : array_like, shape (n, 4), optional
        The pose before the first frame: the reference of the ``max_step_angle`` cap and of
        the quaternion signs (rest pose by default). Solves do not start from it.
    roots : RootTransform or ndarray, optional
        Root frame per frame (shapes (F, 4)/(F, 3), or (F, 4, 4)) or one for all frames.
    chunk : int
        Frames per progress report; frames are solved in vectorised blocks of at least the
        solver's ``block`` frames (DLS 2,048, FABRIK 512, CCD 256: about the same time each).
    strategy : {'auto', 'sequential', 'batched'}
        Accepted for compatibility; all give the same result.

    Yields
    ------
    BakeProgress
        Once with ``done = 0`` when the inputs are checked, after each block, and last with
        the :class:`BakeResult`. Closing the generator stops the bake.
    """
    cls = solver_class(solver)
    kernel = cls.kernel
    if not isinstance(settings, SolveSettings):
        raise ChainError("settings must be a SolveSettings")
    if strategy not in STRATEGIES:
        raise ChainError(f"unknown strategy {strategy!r}; expected one of {list(STRATEGIES)}")
    t = np.asarray(targets, dtype=np.float64)
    if t.ndim != 2 or t.shape[1] != 3 or t.shape[0] < 1:
        raise ChainError(f"targets must have shape (F, 3) with F >= 1, got {t.shape}")
    t, pl, ori, w, pa = check_frames(chain, t, poles, orientations, rotation_weight, pole_angle)
    frames = t.shape[0]
    step = float(max_step_angle)
    if not np.isfinite(step) or step < 0:
        raise ChainError(f"max_step_angle must be finite and >= 0, got {max_step_angle}")
    rr, rp = _root_arrays(roots, (frames,))
    rr, rp = np.ascontiguousarray(rr), np.ascontiguousarray(rp)
    if initial is None:
        start = quat.identity((chain.n,))
    else:
        start = chain.check_rotations(initial)
        if start.shape != (chain.n, 4):
            raise ChainError(f"initial rotations must have shape ({chain.n}, 4), got {start.shape}")
    start = clamp_bounds_all(start, bone_bounds(chain))
    block = max(int(chunk), cls.block)
    yield BakeProgress(0, frames)  # inputs are valid; a modal operator may cancel before any solve
    rot = np.empty((frames, chain.n, 4))
    its = np.zeros(frames, dtype=np.int64)
    errs = np.empty(frames)
    for s in range(0, frames, block):
        e = min(frames, s + block)
        sl = slice(s, e)
        rot[sl], its[sl], errs[sl] = solve_frames(
            kernel, chain, t[sl], settings, rr[sl], rp[sl], None if pl is None else pl[sl], pa,
            None if ori is None else ori[sl], w)
        if e < frames:
            yield BakeProgress(e, frames)
    if step > 0.0:
        limited = _cap_steps(rot, start, step)
        if limited.size:
            bounds = bone_bounds(chain)
            if bounds is not None:  # a slerp between poses within the limits may leave them
                rot[limited] = clamp_bounds_all(rot[limited], bounds)
            pos, _ = _fk(chain, rot[limited], rr[limited], rp[limited])
            errs[limited] = np.linalg.norm(pos[:, -1] - t[limited], axis=1)
    # Sign continuity along frames (and with the start pose): flip where the running product
    # of the signs of consecutive dot products is negative.
    d = np.einsum("fbi,fbi->fb", rot, np.concatenate((start[None], rot[:-1]), axis=0))
    sign = np.cumprod(np.where(d < 0, -1.0, 1.0), axis=0)
    rot *= sign[..., None]
    check_finite(rot, solver)
    res = BakeResult(rot, its, errs, errs <= settings.tolerance)
    yield BakeProgress(frames, frames, res)


def check_finite(rotations: np.ndarray, what: str) -> None:
    """Raise :class:`~core.errors.ChainError` if a pose rotation ``(F, n, 4)`` is not finite:
    a bake must end with poses that can be keyed or with an error that leaves the scene as it
    was, never with NaN keys."""
    ok = np.all(np.isfinite(rotations), axis=tuple(range(1, rotations.ndim)))
    if not np.all(ok):
        raise ChainError(f"the {what} solve returned a non-finite pose at frame index "
                         f"{int(np.argmin(ok))}; nothing was written (please report this)")


def _cap_steps(rot: np.ndarray, start: np.ndarray, step: float) -> np.ndarray:
    """Cap every joint's change between consecutive frames at ``step`` radians, in place.

    Sequential where it matters: a frame whose joints all stay within ``step`` of the previous
    (already capped) frame is kept; otherwise each joint over the cap is slerped back to exactly
    ``step`` from the previous frame, and the next frame is compared with that capped pose.
    Runs of frames needing no cap are skipped with one vectorised test.

    Parameters
    ----------
    rot : ndarray, shape (F, n, 4)
        Rotations, modified in place.
    start : ndarray, shape (n, 4)
        Pose before the first frame.
    step : float
        Radians, > 0.

    Returns
    -------
    ndarray of int
        Indices of the frames that were changed.
    """
    frames = rot.shape[0]
    # Steps between the uncapped frames; while the output equals the input these are exact.
    raw = quat.angle_between(np.concatenate((start[None], rot[:-1]), axis=0), rot).max(axis=1)
    changed = []
    f = 0
    prev = start
    while f < frames:
        over = np.nonzero(raw[f:] > step)[0]
        if over.size == 0:
            break
        f += int(over[0])
        prev = start if f == 0 else rot[f - 1]
        # Capped run: continue frame by frame until the output catches up with the input.
        while f < frames:
            ang = quat.angle_between(prev, rot[f])
            if not np.any(ang > step):
                break
            frac = np.where(ang > step, step / np.maximum(ang, 1e-300), 1.0)
            rot[f] = quat.slerp(prev, rot[f], frac)
            changed.append(f)
            prev = rot[f]
            f += 1
        f += 1
    return np.asarray(changed, dtype=np.int64)


def bake_chain(chain: Chain, targets: np.ndarray, solver: str, settings: SolveSettings, *,
               max_step_angle: float = 0.0, poles: np.ndarray | None = None, pole_angle: float = 0.0,
               orientations: np.ndarray | None = None, rotation_weight: float = 0.0,
               initial: np.ndarray | None = None, roots: RootLike = None,
               progress: ProgressFn | None = None, chunk: int = 64, strategy: str = "auto") -> BakeResult:
    """Bake a frame range in one call (see :func:`iter_bake` for the parameters).

    Parameters
    ----------
    progress : callable ``(done, total) -> bool | None``, optional
        Called after each chunk; returning ``False`` cancels the bake.

    Returns
    -------
    BakeResult

    strategy : {'auto', 'sequential', 'batched'}
        See :func:`iter_bake`.

    Raises
    ------
    BakeCancelled
        If ``progress`` returned ``False``.
    ChainError
        On invalid input.
    """
    return run_to_end(iter_bake(chain, targets, solver, settings, max_step_angle=max_step_angle, poles=poles,
                                pole_angle=pole_angle, orientations=orientations,
                                rotation_weight=rotation_weight, initial=initial, roots=roots, chunk=chunk,
                                strategy=strategy), progress)


def run_to_end(gen: Iterator, progress: ProgressFn | None):
    """Drive a bake generator (items with ``done``, ``total``, ``result``) to its result.

    ``progress(done, total)`` is called after each item; returning ``False`` cancels
    (:class:`BakeCancelled`). The generator is closed in every case.
    """
    try:
        for p in gen:
            if progress is not None and progress(p.done, p.total) is False:
                raise BakeCancelled(f"IK bake cancelled after {p.done} of {p.total} frames")
            if p.result is not None:
                return p.result
    finally:
        gen.close()
    raise AssertionError("the bake generator ended without a result")  # pragma: no cover
