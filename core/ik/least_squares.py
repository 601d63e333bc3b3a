"""Damped least squares on the swing-twist joint coordinates of a bone tree: the one engine behind
the DLS solver (:mod:`.dls`), the DLS finish of FABRIK and CCD (:func:`finish`) and chains that
share bones (:mod:`.group`).

Nakamura & Hanafusa 1986 and Wampler 1986: with ``J`` the Jacobian of the goals (every end
effector's position, plus three rows per orientation goal) with respect to the joint
coordinates (:mod:`.tree`: swing x, twist y, swing z per bone, absolute from the rest pose),
each iteration takes

``dtheta = W (Jw^T (Jw Jw^T + lambda^2 I)^-1 (e - Jw z) + z)``,  ``Jw = J W``,

where ``e`` stacks the goal errors (each position error clamped to a third of the reach, Buss
& Kim 2005),
``W`` holds ``1 - stiffness`` per coordinate (0 where locked; Blender's SDLS weights its
columns the same way, so stiffer joints take less of the bend), and ``z = -k theta`` pulls the
pose back toward rest inside the goals' null space, which keeps poses near rest and spreads a
bend over a long chain (a spine) instead of folding two joints; ``k = 0.05 min(1, |e| / e_max)``
fades with the error, so the pull shapes the approach but does not slow the final convergence.
Iterations start from the coordinates given (the DLS solver's: the canonical start, :mod:`.base`,
so its result is a function of the goals; FABRIK's and CCD's poses for :func:`finish`).
``lambda`` (metres) adapts per problem, Levenberg-Marquardt style: a step that lowers the error is kept and ``lambda``
shrinks, otherwise it is rejected and ``lambda`` grows. Coordinates are kept in their limit
box; one pressed against a bound drops out of that iteration's system (Blender's IK locks
clamped degrees of freedom the same way).

Twist columns are used only where something can demand twist: on bones that move an effector
with an orientation goal, and on bones whose swing is locked or limited. Position goals never
need twist (a chain of swing joints reaches every reachable point), so twist otherwise stays
exactly 0, except on chains with a pole (``twist``): Blender's IK solver turns every bone about
its own axis as well, and the bend plane follows Blender's only when these do too.

Chains with a pole first take Blender's own iteration (:func:`blender_iterations`; intern/iksolver,
``IK_QJacobianSolver::Solve``): every bone a spherical joint turned about its posed axes, the
selectively damped least squares of Buss & Kim 2005 (:func:`_sdls_step`) on the position and
orientation tasks weighted as Blender weighs them. A position and an orientation goal leave a
3-bone arm a swivel of the elbow that only the path of the iteration decides, and with Blender's
path the elbow ends where Blender's does; the iterations above then finish to the tolerance.

Orientation rows are the world rotation vector from the effector bone's frame to its target
frame, scaled by ``rotation_weight * scale`` (``scale`` = the chain's reach, so at weight 1 a
radian counts like the whole reach in metres).

Every problem of a batch (frames) is solved at once, vectorised over problems; a problem stops
when its goals are met, when a step cannot lower its error even at the largest damping, or when
an accepted step no longer changes anything (an unreachable goal), and reports its iterations.
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .limits import from_angles, limit_angles
from .tree import Tree, fk, jacobian

__all__ = ["solve_tree", "solve_chain", "finish", "effector_state", "goal_errors", "blender_iterations"]

#: Largest change of any joint coordinate vector per iteration, radians.
_MAX_JOINT_STEP = 0.5
#: Null-space pull toward the rest pose (fraction of the coordinates per iteration).
_REST_PULL = 0.05
#: Blender's selectively damped least squares (intern/iksolver ``IK_QJacobian``): largest joint
#: change through one singular direction, and per iteration, radians.
_SDLS_MAX_ANGLE = np.pi / 4
#: The fraction of each damped singular step taken.
_SDLS_STEP = 0.8
#: A problem stops when no joint changes by more than this in an iteration (radians) ...
_SDLS_STOP = 1e-3
#: ... after this many iterations.
_SDLS_MIN_ITER = 10
#: Iterations of a pole chain's budget kept for the finish after Blender's iteration.
_FINISH_RESERVE = 10


def _in_range(a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Coordinates (B, 3m), already clipped to ``lo``/``hi``, rewritten for the same rotations with
    each swing angle at most pi and twists in [-pi, pi] (the range :func:`.limits.limit_angles`
    reads back), then clipped again."""
    b = a.shape[0]
    v = a.reshape(b, -1, 3)
    sw2 = v[..., 0] ** 2 + v[..., 2] ** 2
    if not (np.any(sw2 > np.pi ** 2) or np.any(np.abs(v[..., 1]) > np.pi)):
        return a  # already in range (and clipped by the caller)
    sw = np.sqrt(sw2)
    k = np.where(sw > np.pi, 1.0 - 2.0 * np.pi / np.maximum(sw, 1e-300), 1.0)  # theta -> theta - 2 pi
    tw = v[..., 1] - 2.0 * np.pi * np.round(v[..., 1] / (2.0 * np.pi))
    v = np.stack((v[..., 0] * k, tw, v[..., 2] * k), axis=-1)
    return np.clip(v.reshape(b, -1), lo, hi)


def _solve_spd(amat: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve the damped normal systems ``amat (B, r, r) y = rhs (B, r)`` (symmetric positive definite).

    For r = 3 (one position goal, the common case) by the adjugate, written out over the
    batch (much faster than a batched LAPACK call on 3 x 3 systems); otherwise with LAPACK.
    """
    if amat.shape[1] != 3:
        return np.linalg.solve(amat, rhs[..., None])[..., 0]
    a, b, c = amat[:, 0, 0], amat[:, 0, 1], amat[:, 0, 2]
    d, e, f = amat[:, 1, 1], amat[:, 1, 2], amat[:, 2, 2]
    i00, i01, i02 = d * f - e * e, c * e - b * f, b * e - c * d
    i11, i12, i22 = a * f - c * c, b * c - a * e, a * d - b * b
    inv_det = 1.0 / (a * i00 + b * i01 + c * i02)
    r0, r1, r2 = rhs[:, 0], rhs[:, 1], rhs[:, 2]
    return np.stack((i00 * r0 + i01 * r1 + i02 * r2, i01 * r0 + i11 * r1 + i12 * r2,
                     i02 * r0 + i12 * r1 + i22 * r2), axis=1) * inv_det[:, None]


def effector_state(tree: Tree, angles: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray,
                   eff_bones: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """FK of the coordinates: heads (B, m, 3), globals (B, m, 4), effector tails (B, E, 3) and rotations (B, E, 4)."""
    heads, glob = fk(tree, from_angles(angles), root_rot, root_pos)
    tails = tree.tails()[eff_bones]
    pts = heads[:, eff_bones] + quat.rotate(glob[:, eff_bones], tails[None])
    return heads, glob, pts, glob[:, eff_bones]


def goal_errors(pts: np.ndarray, rots: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
                orient: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position errors (B, E, 3) (target - tail) and orientation errors (B, k, 3) (world rotation vectors)."""
    ep = targets - pts
    if orientations is None or not np.any(orient):
        return ep, np.zeros(pts.shape[:1] + (0, 3))
    sel = np.nonzero(orient)[0]
    er = quat.to_rotvec(quat.multiply(orientations[:, sel], quat.conjugate(rots[:, sel])))
    return ep, er


def _goals(tree: Tree, eff_bones: np.ndarray, orientations: np.ndarray | None,
           rotation_weights: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """What both solves read of the goals: the effector count, which effectors have an
    orientation goal, and which bones move each effector (``tree.ancestors``)."""
    orient = (rotation_weights > 0) & (orientations is not None)
    return eff_bones.shape[0], orient, tree.ancestors(eff_bones)


def _sdls_step(jac: np.ndarray, beta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """One selectively damped least-squares step (Buss & Kim 2005) as Blender's IK takes it.

    Parameters
    ----------
    jac : ndarray, shape (B, r, c)
        Task rows in blocks of three (each effector's position, then the orientation rows),
        columns already scaled by ``sqrt(w)``.
    beta : ndarray, shape (B, r)
        The weighted task errors.
    w : ndarray, shape (c,)
        Column weights ``1 - stiffness`` (0 where locked).

    Returns
    -------
    ndarray, shape (B, c)
        The joint update, radians.

    Each singular direction ``i`` of ``J = U diag(s) V^T`` contributes ``v_i (u_i . beta) / s_i``,
    scaled down so that no joint turns by more than ``gamma_i = _SDLS_MAX_ANGLE min(1, N_i / M_i)``
    through it, where ``N_i`` sums the norms of ``u_i``'s three-row blocks and ``M_i`` is
    ``sum_j |v_ij| rho_j / s_i`` with ``rho_j`` the summed block norms of column ``j``; of that,
    ``_SDLS_STEP`` is taken. A step whose largest joint change ``t`` exceeds
    ``_SDLS_MAX_ANGLE`` is scaled by ``_SDLS_MAX_ANGLE / (_SDLS_MAX_ANGLE + t)``.
    """
    b, r, c = jac.shape
    blocks = jac.reshape(b, r // 3, 3, c)
    rho = np.sqrt(np.einsum("bkic,bkic->bkc", blocks, blocks)).sum(axis=1)       # (B, c)
    u, s, vt = np.linalg.svd(jac, full_matrices=False)                          # (B,r,k) (B,k) (B,k,c)
    ub = u.reshape(b, r // 3, 3, -1)
    n_norm = np.sqrt(np.einsum("bjik,bjik->bjk", ub, ub)).sum(axis=1)             # (B, k)
    ok = s > 1e-10
    inv = np.where(ok, 1.0 / np.where(ok, s, 1.0), 0.0)
    alpha = np.einsum("brk,br->bk", u, beta) * inv                                # (B, k)
    m_norm = np.einsum("bkc,bc->bk", np.abs(vt), rho) * inv
    tmp = vt * alpha[:, :, None]                                                  # (B, k, c)
    largest = np.max(np.abs(tmp) * np.sqrt(w), axis=2)                            # (B, k)
    gamma = _SDLS_MAX_ANGLE * np.where(n_norm < m_norm, n_norm / np.maximum(m_norm, 1e-300), 1.0)
    damp = np.where(gamma < largest, gamma / np.maximum(largest, 1e-300), 1.0)
    live = w > 0
    per = np.minimum(damp[:, :, None] / np.where(live, w, 1.0), 1.0)             # (B, k, c)
    dth = _SDLS_STEP * np.einsum("bkc,bkc->bc", per * ok[:, :, None], tmp) * w
    mx = np.max(np.abs(dth), axis=1)
    return dth * np.where(mx > _SDLS_MAX_ANGLE, _SDLS_MAX_ANGLE / (_SDLS_MAX_ANGLE + mx), 1.0)[:, None]


def blender_iterations(tree: Tree, angles: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray,
                       eff_bones: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
                       rotation_weights: np.ndarray, max_iter: int, scale: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Blender's IK iteration (intern/iksolver, ``IK_QJacobianSolver::Solve``) on a batch of problems.

    Every bone is a spherical joint whose update ``dtheta_k`` (radians, about the bone's own
    posed axes) turns its pose rotation on the right, ``q_k <- q_k exp(dtheta_k)``. The tasks:
    each effector's position, in units of ``scale`` (the error clamped to ``1 / (2 n)`` with
    ``n`` the bones that move it), and, for effectors with a rotation weight, the orientation
    error ``sin(theta) axis`` of the rotation from the bone's frame to its target frame; task
    weights (1 per position, the rotation weight per orientation) are rescaled to sum to 1 and
    multiply both the rows and the errors. The step is :func:`_sdls_step`. A problem stops when
    no joint changes by more than ``_SDLS_STOP`` radians in an iteration after the first
    ``_SDLS_MIN_ITER`` + 1. Coordinates are clipped into their limit box after each step (Blender
    locks clamped degrees of freedom instead; :func:`solve_tree` then enforces the limits exactly).

    Parameters
    ----------
    tree, angles, root_rot, root_pos, eff_bones, targets, orientations, rotation_weights, scale
        As for :func:`solve_tree`.
    max_iter : int

    Returns
    -------
    angles : ndarray, shape (B, m, 3)
    iterations : ndarray of int, shape (B,)
    """
    b, m = angles.shape[0], tree.m
    e_count, orient, moves = _goals(tree, eff_bones, orientations, rotation_weights)
    task_w = np.concatenate((np.ones(e_count), rotation_weights[orient]))
    task_w = np.repeat(task_w / task_w.sum(), 3)                                  # the errors' weights
    row_w = task_w.copy()
    row_w[:3 * e_count] /= scale                                                  # the rows': metres -> scale
    clamp_len = 1.0 / (2.0 * moves.sum(axis=1))                                   # (E,)
    w = tree.weights.copy()
    w[~np.any(moves, axis=0)] = 0.0
    wflat = w.reshape(-1)
    lo, hi = tree.lower.reshape(-1), tree.upper.reshape(-1)
    bounded = bool(np.any(np.isfinite(lo) | np.isfinite(hi)))
    zero = np.zeros((1, m, 3))
    q = from_angles(angles)
    iters = np.zeros(b, dtype=np.int64)
    active = np.ones(b, dtype=bool)
    sel = np.arange(b)
    for it in range(max_iter):
        sel = sel[active[sel]]
        if sel.size == 0:
            break
        k = sel.size
        heads, glob = fk(tree, q[sel], root_rot[sel], root_pos[sel])
        pts = heads[:, eff_bones] + quat.rotate(glob[:, eff_bones], tree.tails()[eff_bones][None])
        ep = (targets[sel] - pts) / scale
        en = np.linalg.norm(ep, axis=2, keepdims=True)
        ep *= np.minimum(1.0, clamp_len[None, :, None] / np.maximum(en, 1e-300))
        err = [ep.reshape(k, -1)]
        if np.any(orient):
            rv = quat.to_rotvec(quat.multiply(orientations[sel][:, orient], quat.conjugate(glob[:, eff_bones[orient]])))
            th = np.linalg.norm(rv, axis=2, keepdims=True)
            err.append((rv * np.where(th > 1e-12, np.sin(th) / np.maximum(th, 1e-300), 1.0)).reshape(k, -1))
        beta = np.concatenate(err, axis=1) * task_w
        # The Jacobian w.r.t. rotations about the bones' posed axes: the coordinate Jacobian at 0.
        jac = jacobian(tree, np.broadcast_to(zero, (k, m, 3)), heads, glob, pts, eff_bones, moves, orient, wflat > 0)
        jac *= row_w[None, :, None] * np.sqrt(wflat)[None, None, :]
        dth = _sdls_step(jac, beta, wflat)
        q[sel] = quat.normalize(quat.multiply(q[sel], quat.from_rotvec(dth.reshape(k, m, 3))))
        if bounded:
            q[sel] = from_angles(np.clip(limit_angles(q[sel]).reshape(k, -1), lo, hi).reshape(k, m, 3))
        iters[sel] += 1
        if it > _SDLS_MIN_ITER:
            active[sel] = np.max(np.abs(dth), axis=1) >= _SDLS_STOP
    return limit_angles(q), iters


def solve_tree(tree: Tree, angles: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray,
               eff_bones: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
               rotation_weights: np.ndarray, tol: float, max_iter: int, scale: float,
               twist: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """DLS iterations for a batch of problems on one tree (see the module docstring).

    Parameters
    ----------
    tree : Tree
    angles : ndarray, shape (B, m, 3)
        Start coordinates (within the bounds).
    root_rot, root_pos : ndarray, shapes (B, R, 4), (B, R, 3)
    eff_bones : ndarray of int, shape (E,)
        Effector bones (their tails are the effectors).
    targets : ndarray, shape (B, E, 3)
        Metres.
    orientations : ndarray, shape (B, E, 4), or None
        Target global rotations of the effector bones.
    rotation_weights : ndarray, shape (E,)
        0 = no orientation goal for that effector.
    tol : float
        Metres; converged when every effector is this close (and every orientation within
        ``tol / scale`` radians).
    max_iter : int
    scale : float
        Metres: the problem's size (the chain's reach).
    twist : bool
        Chains with a pole (:mod:`.base`, step 4): Blender's own iteration first
        (:func:`blender_iterations`, every bone a spherical joint), whose path through the
        goals' null space decides where the bend plane ends; then these iterations, with twist
        columns on every bone (not locked), finish to ``tol``. Otherwise twist columns only where
        something can demand twist (module docstring).

    Returns
    -------
    angles : ndarray, shape (B, m, 3)
    iterations : ndarray of int, shape (B,)
    """
    b, m = angles.shape[0], tree.m
    e_count, orient, moves = _goals(tree, eff_bones, orientations, rotation_weights)
    rw = np.repeat(rotation_weights[orient] * scale, 3)
    # Columns: where twist can be demanded, and never where locked.
    twist_free = np.any(moves[orient], axis=0) if np.any(orient) else np.zeros(m, dtype=bool)
    swing_bounded = np.isfinite(tree.lower[:, [0, 2]]).any(axis=1) | np.isfinite(tree.upper[:, [0, 2]]).any(axis=1)
    twist_free |= swing_bounded | twist
    w = tree.weights.copy()
    w[:, 1] = np.where(twist_free, w[:, 1], 0.0)
    w[~np.any(moves, axis=0)] = 0.0
    wflat = w.reshape(-1)
    lo, hi = tree.lower.reshape(-1), tree.upper.reshape(-1)
    rtol = tol / scale
    e_max = max(scale / 3.0, 1e-9)
    unit = bool(np.all((wflat == 0.0) | (wflat == 1.0)))  # weights 0/1: the Jacobian's own zeros suffice
    bounded = bool(np.any(np.isfinite(lo) & (wflat > 0)) or np.any(np.isfinite(hi) & (wflat > 0)))
    lam_min, lam_max = 1e-9 * scale, 1e3 * scale
    ridge = (1e-7 * scale) ** 2  # keeps the system regular when every column is pressed or locked

    iters = np.zeros(b, dtype=np.int64)
    if twist and max_iter > 1:
        # The budget but a reserve (10, or half a small budget) in which these iterations finish.
        angles, iters = blender_iterations(tree, angles, root_rot, root_pos, eff_bones, targets, orientations,
                                           rotation_weights, max_iter - min(_FINISH_RESERVE, max_iter // 2), scale)
    a = angles.reshape(b, 3 * m).copy()
    heads, glob, pts, rots = effector_state(tree, a.reshape(b, m, 3), root_rot, root_pos, eff_bones)

    rw3 = rw.reshape(-1, 3)[None]

    def cost_of(ep, er):
        c = np.einsum("bei,bei->b", ep, ep)
        if er.shape[1]:
            c = c + np.einsum("bki,bki->b", er * rw3, er * rw3)
        return c

    def done_of(ep, er):
        ok = np.all(np.einsum("bei,bei->be", ep, ep) <= tol * tol, axis=1)
        if er.shape[1]:
            ok &= np.all(np.einsum("bki,bki->bk", er, er) <= rtol * rtol, axis=1)
        return ok

    ep, er = goal_errors(pts, rots, targets, orientations, orient)
    cost = cost_of(ep, er)
    active = ~done_of(ep, er) & (iters < max_iter)
    lam = np.full(b, 0.01 * scale)
    if not np.any(wflat > 0):
        return a.reshape(b, m, 3), iters
    eye = np.eye(3 * e_count + rw.size)
    # The working set: every problem while nearly all are active (cheaper than gathering), then the
    # active ones only. ``sel`` indexes the full arrays; the cache holds the FK of ``a``.
    sel = np.arange(b)
    cache = (heads, glob, pts, rots)
    tg = targets
    ori = orientations
    rr, rp = root_rot, root_pos
    for _ in range(max_iter):
        act = active[sel]
        if not np.any(act):
            break
        if np.count_nonzero(act) < 0.9 * sel.size:
            sel = sel[act]
            cache = tuple(c[act] for c in cache)
            tg, rr, rp = targets[sel], root_rot[sel], root_pos[sel]
            ori = None if orientations is None else orientations[sel]
            act = act[act]
        k = sel.size
        ak, ls = a[sel], lam[sel]
        hk, gk, pk, rk = cache
        epk, erk = goal_errors(pk, rk, tg, ori, orient)
        en = np.linalg.norm(epk, axis=2, keepdims=True)
        epc = epk * np.minimum(1.0, e_max / np.maximum(en, 1e-300))
        e = np.concatenate((epc.reshape(k, 3 * e_count), (erk.reshape(k, -1) * rw[None])), axis=1)
        # The pull fades with the error, so it shapes the approach but not the convergence.
        fade = np.minimum(1.0, np.sqrt(cost[sel]) / e_max)
        jac = jacobian(tree, ak.reshape(k, m, 3), hk, gk, pk, eff_bones, moves, orient, wflat > 0)
        if rw.size:
            jac[:, 3 * e_count:] *= rw[None, :, None]
        wk = np.broadcast_to(wflat, (k, 3 * m))
        for _pass in range(2):
            jw = jac if (unit and _pass == 0) else jac * wk[:, None, :]
            z = -(_REST_PULL * fade)[:, None] * ak * (wk > 0)
            amat = jw @ jw.transpose(0, 2, 1) + (ls ** 2 + ridge)[:, None, None] * eye
            rhs = e - np.einsum("brc,bc->br", jw, z)
            y = _solve_spd(amat, rhs)
            dth = wk * ((y[:, None, :] @ jw)[:, 0] + z)
            if not bounded:
                break
            # Coordinates pressed against a bound drop out and the step is solved again.
            trial = ak + dth
            pressed = ((trial < lo - 1e-12) & (ak <= lo + 1e-9)) | ((trial > hi + 1e-12) & (ak >= hi - 1e-9))
            pressed &= wk > 0
            if _pass == 1 or not np.any(pressed):
                break
            wk = np.where(pressed, 0.0, wk)
        mx = np.max(np.linalg.norm(dth.reshape(k, m, 3), axis=2), axis=1)
        dth *= np.minimum(1.0, _MAX_JOINT_STEP / np.maximum(mx, 1e-300))[:, None]
        at = _in_range(np.clip(ak + dth, lo, hi), lo, hi)
        trial = effector_state(tree, at.reshape(k, m, 3), rr, rp, eff_bones)
        ept, ert = goal_errors(trial[2], trial[3], tg, ori, orient)
        ct = cost_of(ept, ert)
        ok = (ct < cost[sel]) & act
        small = np.max(np.abs(at - ak), axis=1) < 1e-10
        if np.all(ok):
            a[sel] = at
            cache = trial
        else:
            a[sel] = np.where(ok[:, None], at, ak)
            cache = tuple(np.where(ok.reshape((k,) + (1,) * (c.ndim - 1)), t, c) for t, c in zip(trial, cache))
        newcost = np.where(ok, ct, cost[sel])
        gain = (cost[sel] - newcost) <= 1e-12 * np.maximum(cost[sel], 1e-300)
        cost[sel] = newcost
        lam[sel] = np.where(act, np.clip(np.where(ok, ls * 0.3, ls * 4.0), lam_min, lam_max), ls)
        iters[sel] += act
        done = np.where(ok, done_of(ept, ert), False)
        stalled = ((~ok) & (lam[sel] >= lam_max)) | (ok & (gain | small))
        active[sel] = act & ~done & ~stalled & (iters[sel] < max_iter)
    return a.reshape(b, m, 3), iters


def solve_chain(chain, angles: np.ndarray, targets: np.ndarray, orientations: np.ndarray | None,
                rotation_weight: float, root_rot: np.ndarray, root_pos: np.ndarray, settings,
                twist: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """DLS on one chain for a batch: coordinates (B, n, 3) from ``angles`` -> coordinates, iterations
    (the :data:`.base.Kernel` signature: the DLS solver's kernel, and FABRIK's for stiff chains)."""
    return solve_tree(chain.tree, angles, root_rot[:, None], root_pos[:, None], np.array([chain.n - 1]),
                      targets[:, None], None if orientations is None else orientations[:, None],
                      np.array([float(rotation_weight)]), settings.tolerance, settings.max_iterations,
                      chain.reach, twist)


def finish(chain, angles: np.ndarray, iterations: np.ndarray, targets: np.ndarray,
           orientations: np.ndarray | None, rotation_weight: float, root_rot: np.ndarray,
           root_pos: np.ndarray, settings, budget: int, twist: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Finish another solver's poses with DLS (the FABRIK and CCD fallback).

    Every problem is finished where the chain has active limits or an orientation goal (the
    other solver does not know them); otherwise only those whose tip is not yet within the
    tolerance (e.g. FABRIK's slow approach to a target near full reach).

    Parameters
    ----------
    chain : Chain
    angles : ndarray, shape (B, n, 3)
        The other solver's coordinates (within the bounds).
    iterations : ndarray of int, shape (B,)
        Its iterations, to which DLS's are added.
    targets, orientations, rotation_weight, root_rot, root_pos, settings
        As for :func:`solve_chain`.
    budget : int
        Largest number of DLS iterations (what the other solver left of ``max_iterations``).
    twist : bool
        As for :func:`solve_tree` (the chain has a pole).

    Returns
    -------
    angles : ndarray, shape (B, n, 3)
    iterations : ndarray of int, shape (B,)
    """
    if budget <= 0:
        return angles, iterations
    if orientations is not None or (chain.limits is not None and chain.limits.active):
        idx = np.arange(angles.shape[0])
    else:
        heads, glob = fk(chain.tree, from_angles(angles), root_rot[:, None], root_pos[:, None])
        tip = heads[:, -1] + quat.rotate(glob[:, -1], chain.segments[-1])
        idx = np.nonzero(np.linalg.norm(tip - targets, axis=1) > settings.tolerance)[0]
    if idx.size == 0:
        return angles, iterations
    angles, iterations = angles.copy(), iterations.copy()
    a, it = solve_tree(chain.tree, angles[idx], root_rot[idx, None], root_pos[idx, None], np.array([chain.n - 1]),
                       targets[idx, None], None if orientations is None else orientations[idx, None],
                       np.array([float(rotation_weight)]), settings.tolerance, budget, chain.reach, twist)
    angles[idx] = a
    iterations[idx] += it
    return angles, iterations

