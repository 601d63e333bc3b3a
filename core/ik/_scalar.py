"""Plain-float versions of the per-bone hot loops for a single problem (batch of one).

numpy costs microseconds per call on 3- and 4-vectors, so for one frame at a time these
tuple-based loops are several times faster. They compute exactly what the vectorised
versions in :mod:`.chain` and :mod:`.base` compute (the tests run both paths).
"""

from __future__ import annotations

import numpy as np


def qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


def qrot(q, v):
    w, x, y, z = q
    vx, vy, vz = v
    tx, ty, tz = 2.0 * (y * vz - z * vy), 2.0 * (z * vx - x * vz), 2.0 * (x * vy - y * vx)
    return (vx + w * tx + y * tz - z * ty, vy + w * ty + z * tx - x * tz, vz + w * tz + x * ty - y * tx)


def qconj(q):
    return (q[0], -q[1], -q[2], -q[3])


def qnorm(q):
    n = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]) ** 0.5
    if n <= 1e-12:
        return (1.0, 0.0, 0.0, 0.0)
    return (q[0] / n, q[1] / n, q[2] / n, q[3] / n)


def qbetween(u, v):
    """Shortest arc from u to v (mirrors :func:`core.quat.between` without a fallback axis)."""
    nu = (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]) ** 0.5
    nv = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) ** 0.5
    if nu <= 1e-12 or nv <= 1e-12:
        return (1.0, 0.0, 0.0, 0.0)
    ux, uy, uz = u[0] / nu, u[1] / nu, u[2] / nu
    vx, vy, vz = v[0] / nv, v[1] / nv, v[2] / nv
    d = ux * vx + uy * vy + uz * vz
    if d < -1.0 + 1e-12:
        # Antiparallel: half turn about the axis perpendicular to u least aligned with it.
        a = (abs(ux), abs(uy), abs(uz))
        k = a.index(min(a))
        e = [0.0, 0.0, 0.0]
        e[k] = 1.0
        px, py, pz = uy * e[2] - uz * e[1], uz * e[0] - ux * e[2], ux * e[1] - uy * e[0]
        return qnorm((0.0, px, py, pz))
    return qnorm((1.0 + d, uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx))


def fk_one(chain, q: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray):
    """FK of one pose: q (n, 4), root (4,), (3,) -> positions (n+1, 3), globals (n, 4)."""
    n = chain.n
    offs = chain.rest_offsets.tolist()
    rests = chain.rest_rotations.tolist()
    ql = q.tolist()
    g = tuple(root_rot.tolist())
    h = tuple(root_pos.tolist())
    pos = []
    glob = []
    for i in range(n):
        o = qrot(g, offs[i])
        h = (h[0] + o[0], h[1] + o[1], h[2] + o[2])
        g = qmul(qmul(g, rests[i]), ql[i])
        pos.append(h)
        glob.append(g)
    o = qrot(g, chain.segments[n - 1].tolist())
    pos.append((h[0] + o[0], h[1] + o[1], h[2] + o[2]))
    return np.array(pos), np.array(glob)


def recover_one(chain, q_old: np.ndarray, desired: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray):
    """:func:`.base.recover_rotations` without limits for one problem: q (n, 4), positions (n+1, 3)."""
    n = chain.n
    offs = chain.rest_offsets.tolist()
    rests = chain.rest_rotations.tolist()
    segs = chain.segments.tolist()
    seglen = chain.segment_lengths.tolist()
    ql = q_old.tolist()
    des = desired.tolist()
    g = tuple(root_rot.tolist())
    h = tuple(root_pos.tolist())
    qn = []
    pos = []
    for i in range(n):
        o = qrot(g, offs[i])
        h = (h[0] + o[0], h[1] + o[1], h[2] + o[2])
        pos.append(h)
        par = qmul(g, rests[i])
        qi = tuple(ql[i])
        if seglen[i] > 0.0:
            cur = qmul(par, qi)
            dc = qrot(cur, segs[i])
            dn = (des[i + 1][0] - h[0], des[i + 1][1] - h[1], des[i + 1][2] - h[2])
            r = qbetween(dc, dn)
            qi = qnorm(qmul(qconj(par), qmul(r, cur)))
        qn.append(qi)
        g = qmul(par, qi)
    o = qrot(g, segs[n - 1])
    pos.append((h[0] + o[0], h[1] + o[1], h[2] + o[2]))
    return np.array(qn), np.array(pos)


def ccd_one(chain, q: np.ndarray, target: np.ndarray, root_rot: np.ndarray, root_pos: np.ndarray,
            tol: float, max_iter: int, bounds) -> tuple[np.ndarray, int]:
    """CCD (Welman 1993) for one problem; mirrors :func:`.ccd.kernel` (including the unfold kicks)."""
    from .limits import clamp_bounds

    n = chain.n
    reach = chain.reach
    pos_a, glob_a = fk_one(chain, q, root_rot, root_pos)
    ps = [tuple(p) for p in pos_a.tolist()]
    gs = [tuple(g) for g in glob_a.tolist()]
    qs = [tuple(v) for v in q.tolist()]
    tx, ty, tz = (float(v) for v in target)
    limited = []
    if bounds is not None:
        for i in range(n):
            limited.append(not (np.all(np.isinf(bounds[0][i])) and np.all(np.isinf(bounds[1][i]))))

    def err_of(p):
        dx, dy, dz = p[0] - tx, p[1] - ty, p[2] - tz
        return (dx * dx + dy * dy + dz * dz) ** 0.5

    err = err_of(ps[n])
    best_err, best_q = err, list(qs)
    prev = float("inf")
    kicks = 8
    iters = 0
    if err <= tol:
        return q.copy(), 0
    for _ in range(max_iter):
        for i in range(n - 1, -1, -1):
            h = ps[i]
            tip = ps[n]
            r = qbetween((tip[0] - h[0], tip[1] - h[1], tip[2] - h[2]), (tx - h[0], ty - h[1], tz - h[2]))
            par = qmul(gs[i], qconj(qs[i]))
            qi = qnorm(qmul(qconj(par), qmul(r, gs[i])))
            if bounds is not None and limited[i]:
                qi = tuple(clamp_bounds(np.array(qi), bounds[0][i], bounds[1][i]).tolist())
            gi = qmul(par, qi)
            delta = qnorm(qmul(gi, qconj(gs[i])))
            qs[i] = qi
            gs[i] = gi
            for j in range(i + 1, n):
                gs[j] = qmul(delta, gs[j])
            for j in range(i + 1, n + 1):
                p = ps[j]
                o = qrot(delta, (p[0] - h[0], p[1] - h[1], p[2] - h[2]))
                ps[j] = (h[0] + o[0], h[1] + o[1], h[2] + o[2])
        iters += 1
        e = err_of(ps[n])
        if e < best_err:
            best_err, best_q = e, list(qs)
        if e <= tol:
            break
        stalled = e > prev - 1e-14 * reach
        prev = e
        if stalled:
            if kicks > 0 and e > 1e-4 * reach:
                kicks -= 1
                sign = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
                rv = np.zeros((n, 3))
                rv[:, 0] = 0.3 * sign
                rv[:, 2] = 0.2
                from .. import quat
                qk = quat.normalize(quat.multiply(np.array(qs), quat.from_rotvec(rv)))
                if bounds is not None:
                    qk = clamp_bounds(qk, bounds[0], bounds[1])
                qs = [tuple(v) for v in qk.tolist()]
                pa, ga = fk_one(chain, qk, root_rot, root_pos)
                ps = [tuple(p) for p in pa.tolist()]
                gs = [tuple(g) for g in ga.tolist()]
                prev = float("inf")
            else:
                break
    return np.array(best_q), iters
