"""Batched bake (FABRIK, DLS): every frame solved at once from one shared start pose, then repaired.

The sequential bake (:mod:`.bake`) solves one frame at a time, warm-started from the previous
frame; that is inherently serial and pays Python overhead per frame. Here every frame of the
range starts from the *same* pose (the chain's initial pose), so all frames are independent:
the FABRIK backward/forward passes loop over the ``n`` joints but each step is one numpy
operation over all still-unconverged frames (positions kept as ``(n+1, 3, F)`` so each joint
is a contiguous ``(3, F)`` block). DLS runs its own kernel, already vectorised over problems,
on all frames at once.

Rotations are then recovered from the joint positions *as a sequence* (:func:`transport_all`):
each frame's from the previous frame's, exactly as the sequential bake's recovery does, so
each bone's twist is carried along its direction path (parallel transport) instead of being
the start pose's twist in every frame. The latter swings fast where a bone's direction passes
near the antipode of its start direction and was most of the batched bake's roughness
(measured on the bench path: largest joint step 32 degrees, 29.5 of them twist; carried: 12.6,
sequential bake 11.4). The recurrence is a cumulative quaternion product over frames per bone,
computed with a parallel prefix scan (``log2 F`` vectorised products), bones from the root out.

FABRIK from a fixed start pose is a continuous function of the target almost everywhere, so
consecutive frames are continuous; where it is not (the target crosses a branch boundary, e.g.
the line of a straight start pose), a joint jumps. A vectorised check finds every frame whose
largest joint rotation change exceeds what the target's motion implies; from such a frame the
bake is *repaired sequentially*: each frame is solved warm-started from the previous output
frame, with the start pose pulled toward the batched pose by at most a small angle per frame
(a "glide"), until the output meets the batched solution again, after which the batched frames
are used as they are. Repairs therefore stay local, and every output frame still reaches its
target to the tolerance (or is straight toward an unreachable one). After a repair the later
frames' rotations are recovered again as a sequence from the repaired frames, so the twist
stays continuous through the rejoin.

CCD is not batched (solved from one start pose its solutions jump between frames). Limits and
poles are not batched: :func:`.bake.iter_bake` keeps the sequential path for chains
with active limits or a pole target.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .. import quat
from ._scalar import fk_one, recover_one
from .base import SolveSettings, _prebend, _straight_one, solve_batch
from .chain import Chain, _fk
from .fabrik import _passes_scalar

__all__ = ["solve_all_frames", "fabrik_all_frames", "recover_all", "transport_all", "continuity_limits",
           "repair_walk"]

# The continuity limit of a frame step: _JUMP_GAIN * (target step / shortest segment) +
# _JUMP_FLOOR radians (a joint turning by target step / shortest segment moves the next joint
# by the target's step). A step over the limit is repaired if the solution map is
# discontinuous there (checked by solving between the frames) or if it is over _WHIP times the
# limit (a continuous but whipping stretch, e.g. the bend plane swinging round as the target
# passes close to the straight start pose's line). Measured on smooth targets the ratio of
# joint turn to (target step / shortest segment) peaks at 3.95 (Lissajous bench), < 0.7 on
# circles; branch jumps are far above. With the twist carried from frame to frame
# (transport_all) the remaining roughness is positional whips; gain 2 and whip 1 (rather than
# 3 and 1.5) repair those that made a 6-bone chain on a fast Lissajous step 1.8x as far as the
# sequential bake (now 0.9x), for ~+5 ms on the 1,000-frame bench bake.
_JUMP_GAIN = 2.0
_JUMP_FLOOR = np.radians(3.0)
_WHIP = 1.0
# ... and a continuous step over this many radians is always repaired (a near half turn in one
# frame, however fast the target moves).
_WHIP_CAP = np.radians(90.0)
# While repairing, each frame may drift from the warm-started solution toward the batched pose
# by _GLIDE_GAIN * (the batched pose's own motion) + _GLIDE_FLOOR radians.
_GLIDE_GAIN = 0.25
_GLIDE_FLOOR = np.radians(1.0)
# ... plus this fraction of the remaining gap, at most the batched pose's own motion (a fast
# target hides a faster glide; a slow one gets a slow, smooth one).
_GLIDE_PULL = 0.1
_LOOKAHEAD = 5
# Sub-steps used to tell a fast but continuous step from a jump.
_SUBSTEPS = 8
# Finish the last few slow problems of a batch with plain-float passes.
_SCALAR_TAIL = 4


def _passes_all(p: np.ndarray, targets_t: np.ndarray, seg: np.ndarray, tol: float,
                max_iter: int) -> np.ndarray:
    """FABRIK passes over many problems at once until each tip is within ``tol``.

    Parameters
    ----------
    p : ndarray, shape (n+1, 3, B)
        Joint positions (heads, then the tip), updated in place; column ``b`` is problem ``b``.
    targets_t : ndarray, shape (3, B)
    seg : ndarray, shape (n,)
        Segment lengths.
    tol : float
        Metres.
    max_iter : int

    Returns
    -------
    ndarray of int, shape (B,)
        Passes made per problem (a problem stops once its tip is within ``tol``; while more
        than half the problems are still active, finished ones keep iterating with them, which
        only makes them more accurate and is cheaper than gathering).
    """
    n = seg.shape[0]
    b_all = p.shape[2]
    iters = np.zeros(b_all, dtype=np.int64)
    idx = np.arange(b_all)
    pa, ta, base = p, targets_t, p[0].copy()
    tol2 = tol * tol
    gathered = False
    for it in range(max_iter):
        e = pa[n] - ta
        act = np.einsum("ij,ij->j", e, e) > tol2
        na = int(np.count_nonzero(act))
        if na == 0:
            break
        if na <= _SCALAR_TAIL:
            # A few slow problems left: plain-float passes beat numpy's per-call overhead.
            left = max_iter - it
            for j in np.nonzero(act)[0]:
                pj = np.ascontiguousarray(pa[:, :, j])
                iters[idx[j]] += _passes_scalar(pj, ta[:, j], seg, left, tol)
                pa[:, :, j] = pj
            break
        if na < act.shape[0] // 2:
            if gathered:
                p[:, :, idx] = pa
            idx = idx[act]
            pa, ta, base = p[:, :, idx], ta[:, act], base[:, act]
            gathered = True
        iters[idx] += 1
        nxt = ta
        pa[n] = nxt
        for i in range(n - 1, -1, -1):
            d = pa[i] - nxt
            dd = d * d
            ln = np.sqrt(dd[0] + dd[1] + dd[2])
            d *= seg[i] / np.maximum(ln, 1e-300)  # coincident joints: d = 0 keeps the joint
            d += nxt
            pa[i] = d
            nxt = d
        nxt = base
        pa[0] = base
        for i in range(n):
            d = pa[i + 1] - nxt
            dd = d * d
            ln = np.sqrt(dd[0] + dd[1] + dd[2])
            d *= seg[i] / np.maximum(ln, 1e-300)
            d += nxt
            pa[i + 1] = d
            nxt = d
    if gathered:
        p[:, :, idx] = pa
    return iters


def _qmul(a, b):
    """Hamilton product of quaternions given as 4-tuples of arrays (or floats)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


def _qrot(q, v):
    """Rotate the 3-tuple ``v`` by the 4-tuple quaternion ``q`` (components are arrays/floats)."""
    w, x, y, z = q
    vx, vy, vz = v
    tx, ty, tz = 2.0 * (y * vz - z * vy), 2.0 * (z * vx - x * vz), 2.0 * (x * vy - y * vx)
    return (vx + w * tx + y * tz - z * ty, vy + w * ty + z * tx - x * tz, vz + w * tz + x * ty - y * tx)


def recover_all(chain: Chain, q_old: np.ndarray, desired: np.ndarray, root_rot: np.ndarray,
                root_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.base.recover_rotations` without limits, for many frames, one array per component.

    Same result as the vectorised recovery (minimal rotation of each bone onto its desired
    segment on top of its previous rotation, so each bone keeps its twist) but with each
    quaternion/vector component a contiguous ``(F,)`` array, which needs far fewer and cheaper
    numpy calls than ``(F, 4)`` stacks.

    Parameters
    ----------
    chain : Chain
    q_old : ndarray, shape (F, n, 4)
        Reference pose rotations (twist source).
    desired : ndarray, shape (F, n+1, 3)
        Desired joint positions, metres (index 0 is ignored).
    root_rot, root_pos : ndarray, shapes (F, 4), (F, 3)

    Returns
    -------
    q : ndarray, shape (F, n, 4)
        Unit pose rotations.
    positions : ndarray, shape (F, n+1, 3)
        The joints the returned pose reaches.
    """
    frames, n = q_old.shape[0], chain.n
    qo = np.ascontiguousarray(q_old.transpose(1, 2, 0))  # (n, 4, F)
    de = np.ascontiguousarray(desired.transpose(1, 2, 0))  # (n+1, 3, F)
    q_new = np.empty((n, 4, frames))
    pos = np.empty((n + 1, 3, frames))
    g = tuple(np.ascontiguousarray(root_rot.T))
    h = tuple(np.ascontiguousarray(root_pos.T))
    offs = chain.rest_offsets.tolist()
    rests = chain.rest_rotations.tolist()
    segs = chain.segments.tolist()
    for i in range(n):
        o = _qrot(g, offs[i])
        h = (h[0] + o[0], h[1] + o[1], h[2] + o[2])
        pos[i] = h
        par = _qmul(g, rests[i])
        qi = tuple(qo[i])
        if chain.segment_lengths[i] > 0.0:
            cur = _qmul(par, qi)
            u = _qrot(cur, segs[i])
            v = (de[i + 1, 0] - h[0], de[i + 1, 1] - h[1], de[i + 1, 2] - h[2])
            nu = np.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
            nv = np.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
            nu_ = np.maximum(nu, 1e-300)
            nv_ = np.maximum(nv, 1e-300)
            ux, uy, uz = u[0] / nu_, u[1] / nu_, u[2] / nu_
            vx, vy, vz = v[0] / nv_, v[1] / nv_, v[2] / nv_
            d = ux * vx + uy * vy + uz * vz
            r = [1.0 + d, uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx]
            odd = (d < -1.0 + 1e-12) | (nu <= 1e-12) | (nv <= 1e-12)
            if np.any(odd):  # antiparallel or zero: the general routine's conventions
                rq = quat.between(np.stack(u, axis=1)[odd], np.stack(v, axis=1)[odd])
                for k in range(4):
                    r[k] = np.where(odd, 0.0, r[k])
                    r[k][odd] = rq[:, k]
            rn = np.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3])
            r = (r[0] / rn, r[1] / rn, r[2] / rn, r[3] / rn)
            pc = (par[0], -par[1], -par[2], -par[3])
            qi = _qmul(pc, _qmul(r, cur))
            qn = np.sqrt(qi[0] * qi[0] + qi[1] * qi[1] + qi[2] * qi[2] + qi[3] * qi[3])
            qi = (qi[0] / qn, qi[1] / qn, qi[2] / qn, qi[3] / qn)
        q_new[i] = qi
        g = _qmul(par, qi)
    o = _qrot(g, segs[n - 1])
    pos[n] = (h[0] + o[0], h[1] + o[1], h[2] + o[2])
    return q_new.transpose(2, 0, 1).copy(), pos.transpose(2, 0, 1).copy()


def _scan_products(b: np.ndarray) -> np.ndarray:
    """Prefix products along axis 1, in place: ``b[:, f] <- b[:, f] * ... * b[:, 0]``.

    Later factors go on the left (rotations applied later compose on the left). Hillis-Steele
    scan: ``ceil(log2 F)`` vectorised Hamilton products. (A two-level blocked scan does fewer
    full-size products but measured slower at these sizes: strided blocks, more calls.)

    Parameters
    ----------
    b : ndarray, shape (4, F, ...)
        Quaternion components first, frames second.

    Returns
    -------
    ndarray
        ``b``.
    """
    m = b.shape[1]
    k = 1
    while k < m:
        r = _qmul(tuple(b[:, k:]), tuple(b[:, :-k]))  # evaluated before any assignment
        for c in range(4):
            b[c, k:] = r[c]
        k *= 2
    return b


def transport_all(chain: Chain, start: np.ndarray, desired: np.ndarray, root_rot: np.ndarray,
                  root_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotations recovered frame after frame from joint positions, each frame's twist from the last.

    Gives what the sequential bake's recovery gives for the same joint positions:
    ``q[f] = recover_rotations(q[f-1], desired[f])`` with ``q[-1] = start`` (each bone turns by
    the minimal rotation from its previous direction onto the new one, on top of its previous
    pose rotation: parallel transport of the bone's frame along its direction path, in its
    parent's frame). Without limits that recurrence is, per bone ``i`` and in its parent's
    frame, ``q_i[f] = between(l_i[f-1], l_i[f]) * q_i[f-1]`` where ``l_i[f]`` is the desired
    segment direction in the parent's (already recovered) frame, so ``q_i`` is a cumulative
    quaternion product over frames: one parallel prefix scan per bone, bones from the root
    outwards (the scan's rounding grows with ``log F``, not ``F``).

    Parameters
    ----------
    chain : Chain
        Limits are ignored.
    start : ndarray, shape (..., n, 4)
        Pose before the first frame (the twist source), per sequence ``...``.
    desired : ndarray, shape (F, ..., n+1, 3)
        Desired joint positions per frame, metres (index 0 is ignored: the first head follows
        the root). Frames are the first axis; any further leading axes are independent
        sequences.
    root_rot, root_pos : ndarray, shapes (F, ..., 4), (F, ..., 3)

    Returns
    -------
    q : ndarray, shape (F, ..., n, 4)
        Unit pose rotations.
    positions : ndarray, shape (F, ..., n+1, 3)
        The joints the returned poses reach.
    """
    n = chain.n
    frames = desired.shape[0]
    lead = desired.shape[:-2]
    de = np.moveaxis(desired, (-2, -1), (0, 1))  # (n+1, 3, F, ...)
    st = np.moveaxis(np.broadcast_to(start, lead[1:] + (n, 4)), (-2, -1), (0, 1))  # (n, 4, ...)
    g = tuple(np.moveaxis(np.broadcast_to(root_rot, lead + (4,)), -1, 0))
    h = tuple(np.moveaxis(np.broadcast_to(root_pos, lead + (3,)), -1, 0))
    q_new = np.empty((n, 4) + lead)
    pos = np.empty((n + 1, 3) + lead)
    offs = chain.rest_offsets.tolist()
    rests = chain.rest_rotations.tolist()
    segs = chain.segments.tolist()
    for i in range(n):
        o = _qrot(g, offs[i])
        h = (h[0] + o[0], h[1] + o[1], h[2] + o[2])
        pos[i] = h
        par = _qmul(g, rests[i])
        s0 = tuple(st[i])
        if chain.segment_lengths[i] > 0.0:
            pc = (par[0], -par[1], -par[2], -par[3])
            lv = np.stack(_qrot(pc, (de[i + 1, 0] - h[0], de[i + 1, 1] - h[1], de[i + 1, 2] - h[2])))
            nl = np.sqrt(np.einsum("i...,i...->...", lv, lv))
            ok = nl > 1e-12  # a zero desired segment keeps the previous rotation
            lv /= np.where(ok, nl, 1.0)
            u0 = np.stack(_qrot(s0, segs[i]))
            u0 /= np.sqrt(np.einsum("i...,i...->...", u0, u0))
            if not np.all(ok):
                last = np.where(ok, np.arange(frames).reshape((frames,) + (1,) * (ok.ndim - 1)), -1)
                last = np.maximum.accumulate(last, axis=0)
                filled = np.take_along_axis(lv, np.maximum(last, 0)[None], axis=1)
                lv = np.where(last[None] >= 0, filled, u0[:, None])
            prev = np.concatenate((u0[:, None], lv[:, :-1]), axis=1)  # (3, F, ...)
            b = _scan_products(_between_t(prev, lv, par))
            qi = _qmul(tuple(b), s0)
            qn = np.sqrt(qi[0] * qi[0] + qi[1] * qi[1] + qi[2] * qi[2] + qi[3] * qi[3])
            qi = (qi[0] / qn, qi[1] / qn, qi[2] / qn, qi[3] / qn)
        else:
            qi = tuple(np.broadcast_to(c, lead) for c in s0)
        q_new[i] = qi
        g = _qmul(par, qi)
    o = _qrot(g, segs[n - 1])
    pos[n] = (h[0] + o[0], h[1] + o[1], h[2] + o[2])
    return np.moveaxis(q_new, (0, 1), (-2, -1)).copy(), np.moveaxis(pos, (0, 1), (-2, -1)).copy()


def _between_t(u: np.ndarray, v: np.ndarray, par) -> np.ndarray:
    """Shortest arc from ``u`` to ``v`` (parent-frame directions, shape (3, ...)), shape (4, ...).

    Antiparallel pairs take the half turn :func:`core.quat.between` picks for the *global*
    directions (``par`` rotates parent-frame vectors to global), brought back into the
    parent's frame, so the result is exactly the recovery's.
    """
    nu = np.sqrt(np.einsum("i...,i...->...", u, u))
    uu = u / np.maximum(nu, 1e-300)
    d = np.einsum("i...,i...->...", uu, v)
    r = np.empty((4,) + d.shape)
    r[0] = 1.0 + d
    r[1] = uu[1] * v[2] - uu[2] * v[1]
    r[2] = uu[2] * v[0] - uu[0] * v[2]
    r[3] = uu[0] * v[1] - uu[1] * v[0]
    anti = d < -1.0 + 1e-12
    if np.any(anti):
        pa = tuple(np.broadcast_to(c, d.shape)[anti] for c in par)
        ug = np.stack(_qrot(pa, tuple(uu[:, anti])), axis=-1)
        rq = quat.between(ug, -ug).T  # global half turn, then into the parent's frame
        pc = (pa[0], -pa[1], -pa[2], -pa[3])
        r[:, anti] = np.stack(_qmul(pc, _qmul(tuple(rq), pa)))
    r /= np.sqrt(np.einsum("i...,i...->...", r, r))
    return r


def fabrik_all_frames(chain: Chain, targets: np.ndarray, start: np.ndarray, settings: SolveSettings,
                      root_rot: np.ndarray, root_pos: np.ndarray, transport: bool = False
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FABRIK for every frame at once, each from the same start pose (no limits, no poles).

    Does what :func:`.base.solve_batch` does with the FABRIK kernel, vectorised over frames:
    targets out of reach give a straight chain toward them, a start pose lying straight along
    the line to a nearer target is bent slightly first, the rest run FABRIK passes. Rotations
    are recovered from the joint positions either with the start pose's twist in every frame
    (each frame on its own) or, with ``transport``, frame after frame as the sequential bake
    recovers them (:func:`transport_all`: each bone's twist carried from the previous frame).

    Parameters
    ----------
    chain : Chain
        Must have no active limits.
    targets : ndarray, shape (F, 3)
    start : ndarray, shape (n, 4)
        Shared start pose (unit quaternions).
    settings : SolveSettings
    root_rot, root_pos : ndarray, shapes (F, 4), (F, 3)
    transport : bool
        Recover the frames' rotations as a sequence starting from ``start``.

    Returns
    -------
    rotations : ndarray, shape (F, n, 4)
    iterations : ndarray of int, shape (F,)
    errors : ndarray, shape (F,)
        Tip distance from the target, metres.
    """
    frames, n = targets.shape[0], chain.n
    tol = settings.tolerance
    q = np.array(np.broadcast_to(start, (frames, n, 4)))
    # The start pose's joints in the root frame, once; then placed by each frame's root.
    local, glob_local = fk_one(chain, start, np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3))
    pos = quat.rotate(root_rot[:, None], local[None]) + root_pos[:, None]
    d = pos[:, -1] - targets
    err = np.sqrt(np.einsum("fi,fi->f", d, d))
    iters = np.zeros(frames, dtype=np.int64)
    todo = err > tol
    if settings.max_iterations == 0:
        todo[:] = False
    desired = pos.copy()
    dist = np.linalg.norm(targets - pos[:, 0], axis=1)
    far = todo & (dist >= chain.reach)
    if np.any(far):
        u = (targets[far] - pos[far, 0]) / dist[far, None]
        cum = np.concatenate(([0.0], np.cumsum(chain.segment_lengths)))
        desired[far] = pos[far, 0][:, None] + cum[None, :, None] * u[:, None]
        iters[far] = 1
    near = np.nonzero(todo & ~far)[0]
    if near.size:
        if n > 1 and _straight_one(local.tolist(), chain.reach):
            # A straight start pose cannot fold toward a target on its own line: bend those
            # frames first (as the single-frame driver does).
            line = local[-1] - local[0]
            u = line / max(float(np.linalg.norm(line)), 1e-300)
            tl = quat.rotate(quat.conjugate(root_rot[near]), targets[near] - root_pos[near]) - local[0]
            perp = tl - (tl @ u)[:, None] * u
            sel = near[(np.linalg.norm(perp, axis=1) < 1e-6 * chain.reach)
                       & (np.linalg.norm(tl, axis=1) < chain.reach)]
            if sel.size:
                glob = quat.multiply(root_rot[sel, None], glob_local[None])
                bend = quat.rotate(glob[:, n // 2], np.array([0.0, 0.0, 1.0]))
                qs = _prebend(chain, q[sel], pos[sel], glob, targets[sel], bend)
                bent = np.any(qs != q[sel], axis=(1, 2))
                if np.any(bent):
                    nb = sel[bent]
                    q[nb] = qs[bent]
                    pos[nb] = _fk(chain, q[nb], root_rot[nb], root_pos[nb])[0]
        p = np.ascontiguousarray(pos[near].transpose(1, 2, 0))
        tt = np.ascontiguousarray(targets[near].T)
        iters[near] = _passes_all(p, tt, chain.segment_lengths, tol, settings.max_iterations)
        desired[near] = p.transpose(2, 0, 1)
    moved = np.nonzero(iters > 0)[0]
    if transport:
        q, pos = transport_all(chain, start, desired, root_rot, root_pos)
    elif moved.size:
        if moved.size == frames:
            q, pos = recover_all(chain, q, desired, root_rot, root_pos)
        else:
            qn, pn = recover_all(chain, q[moved], desired[moved], root_rot[moved], root_pos[moved])
            q[moved] = qn
            pos[moved] = pn
    d = pos[:, -1] - targets
    return q, iters, np.sqrt(np.einsum("fi,fi->f", d, d))


def solve_all_frames(solver: str, kernel, chain: Chain, targets: np.ndarray, start: np.ndarray,
                     settings: SolveSettings, root_rot: np.ndarray, root_pos: np.ndarray,
                     transport: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every frame solved at once from the same start pose (no limits, no poles).

    FABRIK uses :func:`fabrik_all_frames`; other solvers (DLS) run their kernel, which is
    vectorised over problems, through :func:`.base.solve_batch` on all frames. With
    ``transport`` the rotations are then re-derived from the joint positions frame after frame
    (:func:`transport_all`), so each bone's twist follows from the previous frame as in the
    sequential bake instead of being each frame's own (for FABRIK, the start pose's twist).

    Parameters
    ----------
    solver : str
        ``'FABRIK'`` or ``'DLS'``.
    kernel : callable
        The solver's kernel.
    chain : Chain
    targets : ndarray, shape (F, 3)
    start : ndarray, shape (n, 4)
    settings : SolveSettings
    root_rot, root_pos : ndarray, shapes (F, 4), (F, 3)
    transport : bool
        Recover the rotations as one sequence starting from ``start``.

    Returns
    -------
    rotations : ndarray, shape (F, n, 4)
    iterations : ndarray of int, shape (F,)
    errors : ndarray, shape (F,)
    """
    if solver == "FABRIK":
        return fabrik_all_frames(chain, targets, start, settings, root_rot, root_pos, transport)
    frames = targets.shape[0]
    q0 = np.array(np.broadcast_to(start, (frames, chain.n, 4)))
    rr, rp = np.ascontiguousarray(root_rot), np.ascontiguousarray(root_pos)
    q, iters, errors = solve_batch(kernel, chain, targets, q0, settings, None, rr, rp)
    if transport:
        q, pos = transport_all(chain, start, _fk(chain, q, rr, rp)[0], rr, rp)
        d = pos[:, -1] - targets
        errors = np.sqrt(np.einsum("fi,fi->f", d, d))
    return q, iters, errors


def _max_joint_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Largest per-joint rotation angle between poses ``a`` and ``b`` (..., n, 4) -> (...)."""
    d = np.abs(np.einsum("...i,...i->...", a, b))
    return 2.0 * np.arccos(np.clip(d.min(axis=-1), 0.0, 1.0))


def continuity_limits(chain: Chain, targets: np.ndarray, root_rot: np.ndarray,
                      root_pos: np.ndarray) -> np.ndarray:
    """Largest joint turn per frame step that a continuous solution may make.

    ``_JUMP_GAIN * |step of the target in the root frame| / shortest segment + _JUMP_FLOOR``.

    Parameters
    ----------
    chain : Chain
    targets : ndarray, shape (F, 3)
    root_rot, root_pos : ndarray, shapes (F, 4), (F, 3)

    Returns
    -------
    ndarray, shape (F,)
        Radians; entry ``f`` bounds the step from frame ``f-1`` to ``f`` (entry 0 is inf).
    """
    local = quat.rotate(quat.conjugate(root_rot), targets - root_pos)
    step = np.zeros(targets.shape[0])
    step[1:] = np.linalg.norm(np.diff(local, axis=0), axis=1)
    seg = chain.segment_lengths
    lmin = float(seg[seg > 0].min()) if np.any(seg > 0) else 1.0
    lim = _JUMP_GAIN * step / lmin + _JUMP_FLOOR
    lim[0] = np.inf
    return lim


def _discontinuous(solver: str, kernel, chain: Chain, targets: np.ndarray, start: np.ndarray,
                   settings: SolveSettings, root_rot: np.ndarray, root_pos: np.ndarray,
                   batched: np.ndarray, nat: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Which large steps of the batched bake are real jumps, by solving between the frames.

    For each candidate frame ``f`` the batched solve is repeated at ``_SUBSTEPS - 1`` targets
    (and roots) evenly between frames ``f-1`` and ``f``. Along a continuous stretch of the
    solution map the step splits into ``_SUBSTEPS`` small ones; at a branch jump one sub-step
    still carries most of it. A step is a jump if its largest sub-step exceeds half of it.

    Parameters
    ----------
    solver : str
    kernel : callable
        As for :func:`solve_all_frames`.
    chain : Chain
    targets : ndarray, shape (F, 3)
    start : ndarray, shape (n, 4)
        The batched bake's shared start pose.
    settings : SolveSettings
    root_rot, root_pos : ndarray, shapes (F, 4), (F, 3)
    batched : ndarray, shape (F, n, 4)
        Batched rotations, recovered as one sequence (the sub-steps are recovered likewise,
        from frame ``f-1``).
    nat : ndarray, shape (F,)
        Largest joint step into each frame, radians.
    cand : ndarray of int, shape (k,)
        Candidate frames (>= 1).

    Returns
    -------
    ndarray of bool, shape (k,)
    """
    m = _SUBSTEPS
    s = (np.arange(1, m) / m)[None, :, None]
    a, b = cand - 1, cand
    tg = (targets[a][:, None] * (1.0 - s) + targets[b][:, None] * s).reshape(-1, 3)
    rp = (root_pos[a][:, None] * (1.0 - s) + root_pos[b][:, None] * s).reshape(-1, 3)
    ra, rb = root_rot[a][:, None], root_rot[b][:, None]
    rb = np.where(np.einsum("kji,kji->kj", ra, rb)[..., None] < 0, -rb, rb)
    rr = quat.normalize(ra * (1.0 - s) + rb * s).reshape(-1, 4)
    sub, _, _ = solve_all_frames(solver, kernel, chain, tg, start, settings, rr, rp)
    # The sub-steps' joints, then frame b's, recovered as a sequence from frame a (the batched
    # frames are recovered so, see transport_all).
    k, nj = cand.size, chain.n + 1
    sub_pos = _fk(chain, sub, rr, rp)[0].reshape(k, m - 1, nj, 3)
    b_pos = _fk(chain, batched[b], root_rot[b], root_pos[b])[0]
    path = np.concatenate((sub_pos, b_pos[:, None]), axis=1).transpose(1, 0, 2, 3)
    path_rr = np.concatenate((rr.reshape(k, m - 1, 4), root_rot[b][:, None]), axis=1).transpose(1, 0, 2)
    path_rp = np.concatenate((rp.reshape(k, m - 1, 3), root_pos[b][:, None]), axis=1).transpose(1, 0, 2)
    tq, _ = transport_all(chain, batched[a], path, path_rr, path_rp)  # (m, k, n, 4)
    seq = np.concatenate((batched[a][:, None], tq.transpose(1, 0, 2, 3)), axis=1)
    steps = _max_joint_angles(seq[:, :-1], seq[:, 1:]).max(axis=1)
    return steps > 0.5 * nat[cand]


def repair_walk(solver: str, kernel, chain: Chain, targets: np.ndarray, start: np.ndarray,
                settings: SolveSettings, root_rot: np.ndarray, root_pos: np.ndarray, rot: np.ndarray,
                iters: np.ndarray, errors: np.ndarray, chunk: int) -> Iterator[int]:
    """Repair jumps of a batched bake in place, sequentially and locally.

    Walks the frames; while the batched frames step continuously (every joint's change within
    :func:`continuity_limits`) they are kept. At a jump, frames are solved one by one with
    ``kernel``, each starting from a blend of the previous output frame and the batched frame
    that moves at most the batched pose's own motion plus a glide step (a quarter of the
    continuity limit plus 1 degree) toward the batched pose: joint positions are blended
    linearly in the root frame and rotations recovered from them with a twist slerped the same
    way. When the batched pose is within that reach, the output takes it again and the repair
    ends. If a blended start would make a bigger step than the continuity limit, the frame is
    solved warm-started from the previous output frame alone (the sequential bake). Last, the
    rotations from the first repaired frame on are re-derived from their joint positions as one
    sequence (:func:`transport_all`), so each frame's twist follows from the previous output
    frame exactly as the sequential bake's recovery makes it.

    Parameters
    ----------
    solver : str
        ``'FABRIK'`` or ``'DLS'``.
    kernel : callable
        The solver's kernel (see :mod:`.base`).
    chain : Chain
    targets : ndarray, shape (F, 3)
    start : ndarray, shape (n, 4)
        The shared start pose of the batched solve.
    settings : SolveSettings
    root_rot, root_pos : ndarray, shapes (F, 4), (F, 3)
    rot : ndarray, shape (F, n, 4)
        Batched rotations, recovered as one sequence from ``start``
        (``solve_all_frames(..., transport=True)``); repaired in place.
    iters, errors : ndarray, shape (F,)
        Batched stats; updated in place (a repaired frame adds its own iterations).
    chunk : int
        Yield after every ``chunk`` frames.

    Yields
    ------
    int
        Frames walked so far (multiples of ``chunk``, not the last).
    """
    frames = rot.shape[0]
    lim = continuity_limits(chain, targets, root_rot, root_pos)
    batched = rot.copy()
    nat = np.zeros(frames)
    nat[1:] = _max_joint_angles(batched[:-1], batched[1:])
    # A step over the limit is a jump if the solution map is discontinuous there, or if it
    # whips (continuous, but over _WHIP times the limit).
    jump = nat > np.minimum(_WHIP * lim, _WHIP_CAP)
    cand = np.nonzero((nat > lim) & ~jump)[0]
    if cand.size:
        jump[cand] = _discontinuous(solver, kernel, chain, targets, start, settings, root_rot, root_pos,
                                    batched, nat, cand)
    # Frames the cold start left short of a reachable target: the warm start may reach it.
    base = quat.rotate(root_rot, chain.rest_offsets[0]) + root_pos
    reachable = np.linalg.norm(targets - base, axis=1) < chain.reach
    if settings.max_iterations > 0:
        jump |= (errors > settings.tolerance) & reachable
    if not np.any(jump):
        for f in range(chunk, frames, chunk):
            yield f
        return
    nat = np.where(jump, 0.0, nat)
    # Glide toward (and rejoin) the batched frames only where no jump follows within
    # _LOOKAHEAD frames; inside a run of jumps the repair is the plain sequential bake.
    padded = np.concatenate((jump, np.zeros(_LOOKAHEAD, dtype=bool)))
    ahead = np.zeros(frames, dtype=bool)
    for k in range(1, _LOOKAHEAD + 1):
        ahead |= padded[k:k + frames]
    clean = ~(jump | ahead)
    glide = _GLIDE_GAIN * nat + _GLIDE_FLOOR
    # Batched joint positions in each frame's root frame.
    pos_b, _ = _fk(chain, batched, root_rot, root_pos)
    inv = quat.conjugate(root_rot)
    local_b = quat.rotate(inv[:, None], pos_b - root_pos[:, None])
    repairing = False
    seg = chain.segment_lengths
    cum = np.concatenate(([0.0], np.cumsum(seg)))
    reach_all = chain.reach
    tol = settings.tolerance
    for f in range(1, frames):
        if f % chunk == 0:
            yield f
        if not repairing and not jump[f]:
            continue
        prev = rot[f - 1]
        sl = slice(f, f + 1)
        # The sequential bake's step: warm start from the previous output frame.
        qw, itw, ew = solve_batch(kernel, chain, targets[sl], prev[None], settings, None,
                                  root_rot[sl], root_pos[sl])
        it = int(itw[0])
        qf, err = qw[0], float(ew[0])
        gap = float(_max_joint_angles(qf, batched[f]))
        repairing = True
        reach = glide[f] + min(_GLIDE_PULL * gap, nat[f])
        if clean[f] and gap <= reach:
            rot[f] = batched[f]  # rejoined: one step within `reach` of the warm-started one
            iters[f] += it
            repairing = False
            continue
        if clean[f] and solver != "FABRIK":
            # Drift toward the batched pose by `reach`: solve from the slerp between the
            # warm-started and the batched pose (a local solver stays near its start).
            w = reach / gap
            qs, its_, es_ = solve_batch(kernel, chain, targets[sl], quat.slerp(qf, batched[f], w)[None],
                                        settings, None, root_rot[sl], root_pos[sl])
            it += int(its_[0])
            step_w = float(_max_joint_angles(prev, qf))
            eb = float(es_[0])
            if eb <= max(err, tol) and float(_max_joint_angles(prev, qs[0])) <= step_w + 2.0 * reach:
                qf, err = qs[0], eb
        elif clean[f]:
            # Drift toward the batched pose by `reach`: blend joint positions of the warm and
            # batched solutions (both reach the target, so the blend nearly does), a few
            # FABRIK passes to restore the lengths, twist slerped alike.
            w = reach / gap
            pw = _fk(chain, qw, root_rot[sl], root_pos[sl])[0][0]
            lw = quat.rotate(inv[f], pw - root_pos[f])
            p = quat.rotate(root_rot[f], (1.0 - w) * lw + w * local_b[f]) + root_pos[f]
            tgt = targets[f]
            dist = float(np.linalg.norm(tgt - p[0]))
            if dist >= reach_all:
                p[1:] = p[0] + cum[1:, None] * ((tgt - p[0]) / dist)
                itb = 1
            else:
                itb = _passes_scalar(p, tgt, seg, settings.max_iterations, tol) if settings.max_iterations else 0
            qb, pb = recover_one(chain, quat.slerp(qf, batched[f], w), p, root_rot[f], root_pos[f])
            qb = quat.normalize(qb)
            eb = float(np.linalg.norm(pb[-1] - tgt))
            it += itb
            step_w = float(_max_joint_angles(prev, qf))
            if eb <= max(err, tol) and float(_max_joint_angles(prev, qb)) <= step_w + 2.0 * reach:
                qf, err = qb, eb
        rot[f] = qf
        iters[f] += it
        errors[f] = err
    # Every output frame's twist follows from the previous output frame, as in the sequential
    # bake: from the first repaired frame on, re-recover the rotations from their joints as one
    # sequence (the repaired frames' twists and the rejoined batched frames' came from other
    # paths).
    rep = np.nonzero(jump[1:])[0]
    if rep.size:
        g = int(rep[0]) + 1
        pos, _ = _fk(chain, rot[g:], root_rot[g:], root_pos[g:])
        qt, pt = transport_all(chain, rot[g - 1], pos, root_rot[g:], root_pos[g:])
        rot[g:] = qt
        errors[g:] = np.linalg.norm(pt[:, -1] - targets[g:], axis=1)
