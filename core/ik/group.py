"""Joint solving of IK chains that share bones: one problem with several end effectors.

Members (chains with their goals) that share a bone, or where one chain's first bone hangs
from a bone of another, form a *group*. A group is one bone tree (:mod:`.tree`) with one end
effector per member, solved by damped least squares with the members' Jacobians stacked
(:func:`.least_squares.solve_tree`; Nakamura & Hanafusa 1986, Buss & Kim 2005), from the rest pose,
all frames at once, so no chain undoes another: where all targets are reachable together,
all are reached. Whatever solver the members name, a shared group is solved this way (the
documented fallback for FABRIK and CCD; Aristidou & Lasenby 2011's multi-end-effector FABRIK is
not implemented). As in Blender's IK (intern/iksolver, ``ConstrainPoleVector``), pole targets
are not used in a group with several position goals. Members that share nothing are baked
one by one with :func:`.bake.iter_bake`, so a group of one gives exactly ``bake_chain``'s
result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .. import quat
from ..errors import ChainError
from .bake import BakeResult, _cap_steps, check_finite, iter_bake, run_to_end
from .base import SolveSettings
from .chain import Chain, RootLike, _root_arrays
from .least_squares import effector_state, solve_tree
from .limits import from_angles, limit_angles
from .tree import Tree

__all__ = ["GroupMember", "GroupProgress", "GroupResult", "iter_bake_group", "bake_group", "groups_of", "bone_groups"]

#: Fewest frames solved per vectorised call.
_MIN_BLOCK = 2048


@dataclass(frozen=True)
class GroupMember:
    """One chain of a joint bake, with its goals.

    Attributes
    ----------
    chain : Chain
    bones : tuple of str
        Bone names, root first, tip last (``len == chain.n``).
    parent : str or None
        Name of the parent bone of ``bones[0]`` (None: none).
    targets : ndarray, shape (F, 3)
        Armature space, metres.
    solver : str
    settings : SolveSettings
    max_step_angle : float
    poles : ndarray, shape (F, 3), optional
    pole_angle : float
    orientations : ndarray, shape (F, 4), optional
    rotation_weight : float
    roots : RootTransform or ndarray, optional
        Armature-space frame of ``parent`` per frame, as evaluated before the bake (used when
        ``parent`` is not a bone of another member).
    """

    chain: Chain
    bones: tuple
    parent: str | None
    targets: np.ndarray
    solver: str
    settings: SolveSettings
    max_step_angle: float = 0.0
    poles: np.ndarray | None = None
    pole_angle: float = 0.0
    orientations: np.ndarray | None = None
    rotation_weight: float = 0.0
    roots: RootLike = None


@dataclass(frozen=True)
class GroupResult:
    """Result of a joint bake.

    Attributes
    ----------
    rotations : dict of str to ndarray, shape (F, 4)
        Pose rotation of every bone of every member, sign-continuous along frames.
    members : list of BakeResult
        Per member, in the order given; errors measured on the final joint pose.
    """

    rotations: dict
    members: list


@dataclass(frozen=True)
class GroupProgress:
    """What :func:`iter_bake_group` yields: frames done (over all members), total, result (last)."""

    done: int
    total: int
    result: GroupResult | None = None


def _check(members: list[GroupMember]) -> int:
    if not members:
        raise ChainError("a group bake needs at least one member")
    frames = None
    for k, m in enumerate(members):
        if not isinstance(m, GroupMember):
            raise ChainError(f"member {k} is not a GroupMember")
        bones = tuple(m.bones)
        if len(bones) != m.chain.n or len(set(bones)) != len(bones):
            raise ChainError(f"member {k}: {len(bones)} distinct bone names needed for a {m.chain.n}-bone chain")
        if m.parent is not None and m.parent in bones:
            raise ChainError(f"member {k}: parent '{m.parent}' is one of its own bones")
        t = np.asarray(m.targets)
        if t.ndim != 2 or t.shape[1] != 3:
            raise ChainError(f"member {k}: targets must have shape (F, 3), got {t.shape}")
        if frames is None:
            frames = t.shape[0]
        elif t.shape[0] != frames:
            raise ChainError(f"member {k}: {t.shape[0]} frames, the others have {frames}")
    return int(frames)


def groups_of(members: list[GroupMember]) -> list[list[int]]:
    """Indices of members that must be solved together (sharing bones, or hanging from another's).

    Returns
    -------
    list of list of int
        Each inner list in increasing order; groups ordered by their first member.
    """
    return bone_groups([m.bones for m in members], [m.parent for m in members])


def bone_groups(bones: Sequence[Sequence[str]], parents: Sequence[str | None] | None = None
                ) -> list[list[int]]:
    """Connected components of chains given by their bone names (union-find).

    Parameters
    ----------
    bones : sequence of sequence of str
        Each chain's bone names.
    parents : sequence of (str or None), optional
        The parent bone of each chain's first bone; when given, a chain whose parent is a bone
        of another chain joins that chain's component too.

    Returns
    -------
    list of list of int
        Each inner list in increasing order; components ordered by their first chain.
    """
    label = list(range(len(bones)))

    def find(i: int) -> int:
        while label[i] != i:
            label[i] = label[label[i]]
            i = label[i]
        return i

    owner: dict[str, int] = {}
    for k, names in enumerate(bones):
        for b in names:
            if b in owner:
                label[find(k)] = find(owner[b])
            else:
                owner[b] = k
    for k, parent in enumerate(parents or ()):
        if parent is not None and parent in owner:
            label[find(k)] = find(owner[parent])
    out: dict[int, list[int]] = {}
    for k in range(len(bones)):
        out.setdefault(find(k), []).append(k)
    return sorted(out.values(), key=lambda g: g[0])


def _build_tree(members: list[GroupMember], frames: int):
    """The union tree of a group: Tree, bone names in tree order, root frames (F, R, 4)/(F, R, 3)."""
    info: dict[str, tuple] = {}  # name -> (parent name, member, index)
    for k, m in enumerate(members):
        for j, b in enumerate(m.bones):
            par = m.parent if j == 0 else m.bones[j - 1]
            c = m.chain
            data = (c.rest_rotations[j], c.rest_offsets[j], c.lengths[j], c.tree.lower[j], c.tree.upper[j],
                    c.tree.weights[j])
            if b in info:
                p0, k0, j0 = info[b]
                c0 = members[k0].chain
                d0 = (c0.rest_rotations[j0], c0.rest_offsets[j0], c0.lengths[j0], c0.tree.lower[j0],
                      c0.tree.upper[j0], c0.tree.weights[j0])
                same = p0 == par and all(np.allclose(x, y, atol=1e-9, equal_nan=True) for x, y in zip(data, d0))
                if not same:
                    raise ChainError(f"bone '{b}' appears in two chains with different parents, rest data or limits")
            else:
                info[b] = (par, k, j)
    order: list[str] = []
    placed: set[str] = set()

    def place(b: str) -> None:
        if b in placed:
            return
        par = info[b][0]
        if par is not None and par in info:
            place(par)
        placed.add(b)
        order.append(b)

    for b in info:
        place(b)
    index = {b: i for i, b in enumerate(order)}
    root_keys: list = []
    root_src: list[int] = []
    parents, root_of = [], []
    rr_, ro_, ln_, lo_, hi_, w_ = [], [], [], [], [], []
    for b in order:
        par, k, j = info[b]
        if par is not None and par in index:
            parents.append(index[par])
            root_of.append(-1)
        else:
            if par not in root_keys:
                root_keys.append(par)
                root_src.append(k)
            parents.append(-1)
            root_of.append(root_keys.index(par))
        c = members[k].chain
        rr_.append(c.rest_rotations[j])
        ro_.append(c.rest_offsets[j])
        ln_.append(c.lengths[j])
        lo_.append(c.tree.lower[j])
        hi_.append(c.tree.upper[j])
        w_.append(c.tree.weights[j])
    tree = Tree(np.array(parents), np.array(root_of), np.array(rr_), np.array(ro_), np.array(ln_),
                np.array(lo_), np.array(hi_), np.array(w_))
    rot = np.empty((frames, len(root_keys), 4))
    pos = np.empty((frames, len(root_keys), 3))
    for r, k in enumerate(root_src):
        a, p = _root_arrays(members[k].roots, (frames,))
        rot[:, r], pos[:, r] = a, p
    return tree, order, rot, pos


def _solve_shared(members: list[GroupMember], frames: int, chunk: int) -> Iterator[tuple[int, dict, list]]:
    """Joint DLS of one shared group; yields (frames done, rotations by bone, member results) ."""
    tree, order, root_rot, root_pos = _build_tree(members, frames)
    index = {b: i for i, b in enumerate(order)}
    eff = np.array([index[m.bones[-1]] for m in members])
    targets = np.stack([np.asarray(m.targets, dtype=np.float64) for m in members], axis=1)
    if not np.all(np.isfinite(targets)):
        raise ChainError("a member's targets are not finite")
    weights = np.array([float(m.rotation_weight) if m.orientations is not None else 0.0 for m in members])
    if np.any((weights < 0) | (weights > 1)):
        raise ChainError("rotation_weight must be within [0, 1]")
    ori = None
    if np.any(weights > 0):
        ori = np.tile(quat.identity(()), (frames, len(members), 1))
        for k, m in enumerate(members):
            if weights[k] > 0:
                o = np.broadcast_to(np.asarray(m.orientations, dtype=np.float64), (frames, 4))
                if not np.all(np.isfinite(o)) or np.any(np.linalg.norm(o, axis=1) < 1e-9):
                    raise ChainError(f"member '{m.bones[-1]}': orientations must be finite non-zero quaternions")
                ori[:, k] = quat.normalize(o)
    tol = min(m.settings.tolerance for m in members)
    max_iter = max(m.settings.max_iterations for m in members)
    scale = max(m.chain.reach for m in members)
    angles = np.zeros((frames, tree.m, 3))
    iters = np.zeros(frames, dtype=np.int64)
    block = max(int(chunk), _MIN_BLOCK)
    for s in range(0, frames, block):
        e = min(frames, s + block)
        sl = slice(s, e)
        angles[sl], iters[sl] = solve_tree(tree, angles[sl], root_rot[sl], root_pos[sl], eff, targets[sl],
                                           None if ori is None else ori[sl], weights, tol, max_iter, scale)
        if e < frames:
            yield e, {}, []
    q = from_angles(angles)
    for m in members:
        step = float(m.max_step_angle)
        if not np.isfinite(step) or step < 0:
            raise ChainError(f"max_step_angle must be finite and >= 0, got {m.max_step_angle}")
        if step > 0:
            cols = [index[b] for b in m.bones]
            sub = q[:, cols]
            _cap_steps(sub, quat.identity((len(cols),)), step)
            q[:, cols] = sub
    # Sign continuity along frames, from the rest pose.
    d = np.einsum("fbi,fbi->fb", q, np.concatenate((quat.identity((1, tree.m)), q[:-1]), axis=0))
    q *= np.cumprod(np.where(d < 0, -1.0, 1.0), axis=0)[..., None]
    _, _, pts, _ = effector_state(tree, limit_angles(q), root_rot, root_pos, eff)
    errs = np.linalg.norm(pts - targets, axis=2)
    results = []
    for k, m in enumerate(members):
        cols = [index[b] for b in m.bones]
        results.append(BakeResult(q[:, cols].copy(), iters.copy(), errs[:, k].copy(),
                                  errs[:, k] <= m.settings.tolerance))
    yield frames, {b: q[:, index[b]].copy() for b in order}, results


def iter_bake_group(members: list[GroupMember], *, chunk: int = 64) -> Iterator[GroupProgress]:
    """Bake several chains of one armature; chains that share bones are solved together.

    Parameters
    ----------
    members : list of GroupMember
    chunk : int
        Frames per progress report (per member or shared group).

    Yields
    ------
    GroupProgress
        ``done`` counts frames over all members; the last one carries the
        :class:`GroupResult`.

    Raises
    ------
    ChainError
        Inconsistent input (e.g. a bone with different rest data in two members).
    """
    members = list(members)
    frames = _check(members)
    total = frames * len(members)
    groups = groups_of(members)
    yield GroupProgress(0, total)
    rotations: dict[str, np.ndarray] = {}
    results: list = [None] * len(members)
    done = 0
    for g in groups:
        if len(g) == 1:
            m = members[g[0]]
            gen = iter_bake(m.chain, m.targets, m.solver, m.settings, max_step_angle=m.max_step_angle,
                            poles=m.poles, pole_angle=m.pole_angle, orientations=m.orientations,
                            rotation_weight=m.rotation_weight, roots=m.roots, chunk=chunk)
            for p in gen:
                if p.result is None:
                    yield GroupProgress(done + p.done, total)
                    continue
                results[g[0]] = p.result
                for j, b in enumerate(m.bones):
                    rotations[b] = p.result.rotations[:, j]
        else:
            sub = [members[k] for k in g]
            for f, rot, res in _solve_shared(sub, frames, chunk):
                if not res:
                    yield GroupProgress(done + f * len(g), total)
                    continue
                for q in rot.values():
                    check_finite(q, "shared-chain")
                rotations.update(rot)
                for k, r in zip(g, res):
                    results[k] = r
        done += frames * len(g)
    yield GroupProgress(total, total, GroupResult(rotations, results))


def bake_group(members: list[GroupMember], *, progress: Callable[[int, int], bool | None] | None = None,
               chunk: int = 64) -> GroupResult:
    """Bake several chains in one call (see :func:`iter_bake_group`).

    Parameters
    ----------
    members : list of GroupMember
    progress : callable ``(done, total) -> bool | None``, optional
        Called after each block; returning ``False`` cancels the bake.
    chunk : int

    Returns
    -------
    GroupResult

    Raises
    ------
    BakeCancelled
        If ``progress`` returned ``False``.
    ChainError
        On invalid input.
    """
    return run_to_end(iter_bake_group(members, chunk=chunk), progress)
