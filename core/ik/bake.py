"""Baking IK over a frame range: warm-started per frame, or batched over all frames; jitter-guarded.

Sequential strategy: each frame starts from the previous frame's solution (the first from
``initial``), so the pose moves smoothly with the target. Batched strategy (the default for
FABRIK on chains without limits or poles, available for DLS, see :mod:`.batch`): every frame's
joints are solved at once from ``initial``, the rotations follow from the joints frame after
frame (each bone's twist carried from the previous frame, as in the sequential bake), and the
few frames where that solution jumps are re-solved sequentially.
``max_step_angle`` caps how far any joint may turn between consecutive frames: the new
rotation is slerped back toward the previous one. Output
quaternions are made sign-continuous over frames (``q`` and ``-q`` are the same rotation, but
keyframe interpolation between them is not).

:func:`iter_bake` is a generator that yields after every chunk of frames so a Blender modal
operator can bake incrementally and cancel; :func:`bake_chain` runs it to the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .. import quat
from ..errors import BakeCancelled, ChainError
from .base import SolveSettings, bone_bounds, clamp_bounds_all, solve_batch
from .batch import repair_walk, solve_all_frames, transport_all
from .chain import Chain, RootLike, _fk, _root_arrays

__all__ = ["BakeResult", "BakeProgress", "bake_chain", "iter_bake", "uses_batched", "STRATEGIES",
           "BATCHED_SOLVERS", "AUTO_BATCHED_SOLVERS"]

ProgressFn = Callable[[int, int], bool | None]


@dataclass(frozen=True)
class BakeResult:
    """Per-frame output of a bake.

    Attributes
    ----------
    rotations : ndarray, shape (F, n, 4)
        Pose rotations per frame, sign-continuous along frames.
    iterations : ndarray of int, shape (F,)
    errors : ndarray, shape (F,)
        Tip distance from the target, metres.
    converged : ndarray of bool, shape (F,)
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


def _solver_kernel(solver: str):
    from . import SOLVERS  # late import: the table lives in the package __init__
    try:
        return SOLVERS[solver].kernel
    except KeyError:
        raise ChainError(f"unknown solver {solver!r}; expected one of {sorted(SOLVERS)}") from None


STRATEGIES = ("auto", "sequential", "batched")
# Solvers 'batched' bakes all frames at once. CCD stays sequential: solved from one start pose
# its solutions jump between frames (measured: p99 joint step ~100 degrees on the bench path)
# and it is only ~2x faster batched.
BATCHED_SOLVERS = ("FABRIK", "DLS")
# ... and those 'auto' bakes so: the batched result must be about as smooth as the sequential
# one (largest joint step within ~1.5x). FABRIK is (bench path: 12.6 vs 11.4 degrees, once the
# twist is carried from frame to frame). DLS is not: warm-started DLS takes minimal steps
# (0.7 degrees), while the batched DLS poses, each solved from the start pose, sit elsewhere in
# the null space and swing by up to 11 degrees in a frame.
AUTO_BATCHED_SOLVERS = ("FABRIK",)


def uses_batched(chain: Chain, solver: str, poles: np.ndarray | None, strategy: str = "auto") -> bool:
    """Whether :func:`iter_bake` bakes all frames at once (see :mod:`.batch`).

    ``'batched'`` does so for FABRIK and DLS, ``'auto'`` for FABRIK only (batched DLS is much
    less smooth than warm-started DLS), both only on chains without active limits and without
    a pole target; everything else (CCD, limits, poles, ``'sequential'``) is baked one frame at
    a time, warm-started from the previous frame.
    """
    if strategy not in STRATEGIES:
        raise ChainError(f"unknown strategy {strategy!r}; expected one of {list(STRATEGIES)}")
    solvers = AUTO_BATCHED_SOLVERS if strategy == "auto" else BATCHED_SOLVERS
    return (strategy != "sequential" and solver in solvers and poles is None
            and bone_bounds(chain) is None)


def iter_bake(chain: Chain, targets: np.ndarray, solver: str, settings: SolveSettings, *,
              max_step_angle: float = 0.0, poles: np.ndarray | None = None,
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
    initial : array_like, shape (n, 4), optional
        Pose the first frame starts from (and is step-limited against); rest pose by default.
        The batched strategy solves every frame's joints from it; rotations then follow from
        the joints frame after frame, each bone's twist carried from the previous frame as
        in the sequential bake.
    roots : RootTransform or ndarray, optional
        Root frame per frame (shapes (F, 4)/(F, 3), or (F, 4, 4)) or one for all frames.
    chunk : int
        Frames per yield.
    strategy : {'auto', 'sequential', 'batched'}
        ``'batched'`` solves every frame at once from ``initial`` and repairs jumps
        sequentially (:mod:`.batch`) where the solver is FABRIK or DLS and the chain has no
        active limits and no pole; ``'auto'`` does so for FABRIK only. Otherwise, or with
        ``'sequential'``, each frame is solved warm-started from the previous one. Both give
        every frame's tip within the tolerance of a reachable target (poses may differ in the
        null space), continuity, the ``max_step_angle`` cap and sign continuity.

    Yields
    ------
    BakeProgress
        After each chunk; the last one carries the :class:`BakeResult`. Closing the generator
        stops the bake.
    """
    kernel = _solver_kernel(solver)
    if not isinstance(settings, SolveSettings):
        raise ChainError("settings must be a SolveSettings")
    t = np.asarray(targets, dtype=np.float64)
    if t.ndim != 2 or t.shape[1] != 3 or t.shape[0] < 1:
        raise ChainError(f"targets must have shape (F, 3) with F >= 1, got {t.shape}")
    if not np.all(np.isfinite(t)):
        bad = int(np.argmax(~np.all(np.isfinite(t), axis=1)))
        raise ChainError(f"target of frame index {bad} is not finite")
    frames = t.shape[0]
    step = float(max_step_angle)
    if not np.isfinite(step) or step < 0:
        raise ChainError(f"max_step_angle must be finite and >= 0, got {max_step_angle}")
    pl = None
    if poles is not None:
        pl = np.asarray(poles, dtype=np.float64)
        if pl.shape == (3,):
            pl = np.broadcast_to(pl, (frames, 3))
        if pl.shape != (frames, 3) or not np.all(np.isfinite(pl)):
            raise ChainError(f"poles must be finite with shape ({frames}, 3) or (3,), got {pl.shape}")
    rr, rp = _root_arrays(roots, (frames,))
    rr, rp = np.ascontiguousarray(rr), np.ascontiguousarray(rp)
    if initial is None:
        prev = quat.identity((1, chain.n))
    else:
        prev = chain.check_rotations(initial).reshape(1, chain.n, 4)
    bounds = bone_bounds(chain)
    prev = clamp_bounds_all(prev, bounds)
    chunk = max(1, int(chunk))
    if uses_batched(chain, solver, pl, strategy):
        yield from _iter_bake_batched(solver, kernel, chain, t, settings, step, prev[0], rr, rp, chunk)
        return
    rot = np.empty((frames, chain.n, 4))
    its = np.zeros(frames, dtype=np.int64)
    errs = np.empty(frames)
    for f in range(frames):
        sl = slice(f, f + 1)
        q, it, err = solve_batch(kernel, chain, t[sl], prev, settings,
                                 None if pl is None else pl[sl], rr[sl], rp[sl])
        if step > 0.0:
            ang = quat.angle_between(prev, q)
            over = ang > step
            if np.any(over):
                frac = np.where(over, step / np.maximum(ang, 1e-300), 1.0)
                q = quat.slerp(prev, q, frac)
                if bounds is not None:
                    q = clamp_bounds_all(q, bounds)
                pos, _ = _fk(chain, q, rr[sl], rp[sl])
                err = np.linalg.norm(pos[:, -1] - t[sl], axis=1)
        # Sign continuity with the previous frame.
        d = np.einsum("bij,bij->bi", q, prev)
        q = np.where(d[..., None] < 0, -q, q)
        rot[f] = q[0]
        its[f] = it[0]
        errs[f] = err[0]
        prev = q
        if (f + 1) % chunk == 0 and f + 1 < frames:
            yield BakeProgress(f + 1, frames)
    res = BakeResult(rot, its, errs, errs <= settings.tolerance)
    yield BakeProgress(frames, frames, res)


#: Frames solved per vectorised call in a batched bake before progress is reported.
_SOLVE_BLOCK = 2048


def _iter_bake_batched(solver: str, kernel, chain: Chain, t: np.ndarray, settings: SolveSettings, step: float,
                       start: np.ndarray, rr: np.ndarray, rp: np.ndarray, chunk: int
                       ) -> Iterator[BakeProgress]:
    """The batched bake (validated inputs): solve all, repair jumps, cap, sign-fix.

    Long ranges are solved in blocks of :data:`_SOLVE_BLOCK` frames with a progress report
    after each (so a modal bake stays responsive and can be cancelled); every frame starts
    from the same pose, so the blocks give exactly the frames one call would. The rotations
    are then carried through all frames in one pass (:func:`.batch.transport_all`).
    """
    frames = t.shape[0]
    if frames <= _SOLVE_BLOCK:
        rot, its, errs = solve_all_frames(solver, kernel, chain, t, start, settings, rr, rp, transport=True)
    else:
        parts = []
        for s in range(0, frames, _SOLVE_BLOCK):
            e = min(frames, s + _SOLVE_BLOCK)
            parts.append(solve_all_frames(solver, kernel, chain, t[s:e], start, settings, rr[s:e], rp[s:e]))
            yield BakeProgress(e // 2, frames)
        its = np.concatenate([p[1] for p in parts])
        pos, _ = _fk(chain, np.concatenate([p[0] for p in parts]), rr, rp)
        rot, pos = transport_all(chain, start, pos, rr, rp)
        errs = np.linalg.norm(pos[:, -1] - t, axis=1)
    half = frames // 2 if frames > _SOLVE_BLOCK else 0
    for done in repair_walk(solver, kernel, chain, t, start, settings, rr, rp, rot, its, errs, chunk):
        yield BakeProgress(half + (done * (frames - half)) // frames, frames)
    if step > 0.0:
        limited = _cap_steps(rot, start, step)
        if limited.size:
            pos, _ = _fk(chain, rot[limited], rr[limited], rp[limited])
            errs[limited] = np.linalg.norm(pos[:, -1] - t[limited], axis=1)
    # Sign continuity along frames (and with the start pose): flip where the running product
    # of the signs of consecutive dot products is negative.
    d = np.einsum("fbi,fbi->fb", rot, np.concatenate((start[None], rot[:-1]), axis=0))
    sign = np.cumprod(np.where(d < 0, -1.0, 1.0), axis=0)
    rot *= sign[..., None]
    res = BakeResult(rot, its, errs, errs <= settings.tolerance)
    yield BakeProgress(frames, frames, res)


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
               max_step_angle: float = 0.0, poles: np.ndarray | None = None,
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
    gen = iter_bake(chain, targets, solver, settings, max_step_angle=max_step_angle, poles=poles,
                    initial=initial, roots=roots, chunk=chunk, strategy=strategy)
    try:
        for p in gen:
            if progress is not None and progress(p.done, p.total) is False:
                raise BakeCancelled(f"IK bake cancelled after {p.done} of {p.total} frames")
            if p.result is not None:
                return p.result
    finally:
        gen.close()
    raise AssertionError("iter_bake ended without a result")  # pragma: no cover
