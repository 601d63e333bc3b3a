"""The arc start of FABRIK and CCD: the canonical start bent on a circular arc toward the target.

The canonical start (:mod:`.base`: the rest pose, pole-turned) is turned rigidly about the first
head so its head -> tip chord points at the target, then its joints are laid on a circular arc
from the head to the target (arc length = the chain's reach, joints at their distances along
the chain). The arc's side about the chord is searched (36 sides, then 9 finer ones) for the one
whose bend plane, seen in the first bone's frame after that bone's own minimal swing onto its arc
direction, is the start's bend plane with the same sense. So the bend is spread over the chain
and knees and elbows keep bending the rest way (or the pole's) in their parent's frame. The
start, so the pose, is a function of the target; it jumps only where the turn is undefined
(the target crossing the root, or straight opposite the rest chord).
"""

from __future__ import annotations

import numpy as np

from .. import quat
from .chain import Chain, _fk
from .limits import from_angles

__all__ = ["start_joints", "arc_start"]


def _arc_angle(ratio: np.ndarray) -> np.ndarray:
    """Half the arc angle ``t`` in (0, pi] with ``sin(t) / t = ratio`` (chord / arc length), by Newton."""
    r = np.clip(ratio, 0.0, 1.0)
    t = np.sqrt(np.maximum(6.0 * (1.0 - r), 0.0))  # sin t / t ~ 1 - t^2/6
    t = np.minimum(t, np.pi)
    for _ in range(30):
        st, ct = np.sin(t), np.cos(t)
        f = st - r * t
        df = ct - r
        t = np.clip(t - f / np.where(np.abs(df) > 1e-12, df, -1e-12), 1e-9, np.pi)
    return np.where(r >= 1.0 - 1e-15, 0.0, t)


def _bend_side(pos: np.ndarray) -> np.ndarray:
    """Sum of the middle joints' offsets from the head -> tip chord, shape (B, 3) (the bend side)."""
    head = pos[:, 0]
    chord = pos[:, -1] - head
    u = chord / np.maximum(np.linalg.norm(chord, axis=1), 1e-300)[:, None]
    off = (pos[:, 1:-1] - head[:, None]).sum(axis=1)
    return off - np.einsum("bi,bi->b", off, u)[:, None] * u


def arc_start(pos: np.ndarray, targets: np.ndarray, cum: np.ndarray, side: np.ndarray) -> np.ndarray:
    """Joints on a circular arc from the first head to the target, bent toward ``side``.

    Parameters
    ----------
    pos : ndarray, shape (B, n+1, 3)
        Start joints (only the first head is used).
    targets : ndarray, shape (B, 3)
    side : ndarray, shape (B, 3)
        Bend direction; its part perpendicular to the head -> target chord is used (any
        perpendicular where that vanishes).
    cum : ndarray, shape (n+1,)
        Distance of each joint along the chain from the head (0 .. reach), metres.

    Returns
    -------
    ndarray, shape (B, n+1, 3)
        Joint ``i`` at arc length ``cum[i]`` on the arc of length ``cum[-1]`` whose chord is
        head -> target (straight where the target is at full reach).
    """
    head = pos[:, 0]
    chord = targets - head
    d = np.linalg.norm(chord, axis=1)
    u = chord / np.maximum(d, 1e-300)[:, None]
    side = side - np.einsum("bi,bi->b", side, u)[:, None] * u
    ns = np.linalg.norm(side, axis=1)
    fallback = quat._any_perpendicular(np.where(d[:, None] > 1e-12, u, np.array([0.0, 1.0, 0.0])))
    side = np.where((ns > 1e-12)[:, None], side / np.maximum(ns, 1e-300)[:, None], fallback)
    total = cum[-1]
    t = _arc_angle(d / total)                       # half the arc's angle
    radius = np.where(t > 1e-9, total / (2.0 * np.maximum(t, 1e-9)), np.inf)
    phi = (cum[None] / total) * (2.0 * t)[:, None] - t[:, None]   # angle of each joint from the apex
    fin = np.isfinite(radius)
    rad = np.where(fin, radius, 0.0)[:, None]
    # Circle centre below the chord's midpoint on the far side from the bend.
    along = np.where(fin[:, None], rad * np.sin(phi), (cum[None] - 0.5 * total))
    across = np.where(fin[:, None], rad * (np.cos(phi) - np.cos(t)[:, None]), 0.0)
    mid = head + 0.5 * chord
    return mid[:, None] + along[..., None] * u[:, None] + across[..., None] * side[:, None]


def _best_side(chain: Chain, p: np.ndarray, pos: np.ndarray, glob0: np.ndarray, targets: np.ndarray,
               cum: np.ndarray, psi: np.ndarray, e1: np.ndarray, e2: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Of the arc sides ``cos(psi) e1 + sin(psi) e2`` (B, K), the one whose bend plane sits in the
    first bone's frame (after its minimal swing) as the start's does; returns its psi (B,)."""
    b, k = psi.shape
    side = np.cos(psi)[..., None] * e1[:, None] + np.sin(psi)[..., None] * e2[:, None]
    rep = lambda a: np.repeat(a, k, axis=0)  # noqa: E731
    arc = arc_start(rep(p), rep(targets), cum, side.reshape(b * k, 3)).reshape(b, k, -1, 3)
    head = pos[:, 0]
    d0 = arc[:, :, 1] - head[:, None]
    swing = quat.between(np.broadcast_to((pos[:, 1] - head)[:, None], d0.shape), d0)
    normal = np.cross(d0, np.broadcast_to(u[:, None], d0.shape))
    local = quat.rotate(quat.conjugate(quat.multiply(swing, glob0[:, None])), normal)
    want = quat.rotate(quat.conjugate(glob0), np.cross(pos[:, 1] - head, pos[:, -1] - head))
    score = np.einsum("bki,bi->bk", local, want) / np.maximum(np.linalg.norm(local, axis=2), 1e-300)
    return np.take_along_axis(psi, np.argmax(score, axis=1)[:, None], axis=1)[:, 0]


def start_joints(chain: Chain, angles: np.ndarray, targets: np.ndarray, root_rot: np.ndarray,
                 root_pos: np.ndarray) -> np.ndarray:
    """The canonical start bent on an arc toward the target (module docstring), shape (B, n+1, 3)."""
    pos, glob = _fk(chain, from_angles(angles), root_rot, root_pos)
    head = pos[:, 0]
    # Opposite the start's chord, turn in the bend plane (about the first bone's X axis).
    turn = quat.between(pos[:, -1] - head, targets - head,
                        fallback_axis=quat.rotate(glob[:, 0], np.array([1.0, 0, 0])))
    p = head[:, None] + quat.rotate(turn[:, None], pos - head[:, None])
    cum = np.concatenate(([0.0], np.cumsum(chain.segment_lengths)))
    side = _bend_side(p)
    if chain.n < 2:
        return arc_start(p, targets, cum, side)
    # Search the side about the chord: coarse, then fine around the best.
    chord = targets - head
    nc = np.linalg.norm(chord, axis=1)
    u = np.where((nc > 1e-12)[:, None], chord / np.maximum(nc, 1e-300)[:, None], np.array([0.0, 1.0, 0.0]))
    e1 = side - np.einsum("bi,bi->b", side, u)[:, None] * u
    n1 = np.linalg.norm(e1, axis=1)
    e1 = np.where((n1 > 1e-12)[:, None], e1 / np.maximum(n1, 1e-300)[:, None], quat._any_perpendicular(u))
    e2 = np.cross(u, e1)
    coarse = np.linspace(-np.pi, np.pi, 36, endpoint=False)[None].repeat(head.shape[0], 0)
    best = _best_side(chain, p, pos, glob[:, 0], targets, cum, coarse, e1, e2, u)
    fine = best[:, None] + np.linspace(-np.pi / 36, np.pi / 36, 9)[None]
    best = _best_side(chain, p, pos, glob[:, 0], targets, cum, fine, e1, e2, u)
    return arc_start(p, targets, cum, np.cos(best)[:, None] * e1 + np.sin(best)[:, None] * e2)
