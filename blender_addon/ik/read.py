"""Reading IK chains and their targets from a Blender scene into plain numpy data.

Everything a bake needs is read here, up front, so the solve never touches the scene:

* the chain: bones from the tip up ``chain_length`` (0 = to the root), rest geometry from
  ``bone.matrix_local`` / ``head_local`` / ``length`` (connected or not), Blender's per-bone
  IK locks and limits;
* per-frame transforms (:mod:`.sampling`): the armature's world matrix (targets are solved in
  armature space), the target and pole objects' world locations, the chain root's parent bone;
* the target per mode: OBJECT, CURVE (:mod:`.curves`: the evaluated curve as a dense polyline,
  resampled by arc length over the range) or EXPRESSION (core's safe expressions, armature
  space); targets and poles that move with the bake are refused (:mod:`.dependencies`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ..core import SinewError, quat
from ..core.ik import Chain, JointLimits, SolveSettings
from ..core.ik.targets import expression_targets, resample_polyline
from .curves import curve_polyline
from .dependencies import Source, moved_by_chain, moving_bones, source
from .pose import relative_rest
from .sampling import FrameSampler, mat4

__all__ = ["ChainInput", "read_chains", "chain_bones", "enabled_tips", "chain_geometry"]


@dataclass
class ChainInput:
    """One chain's plain input to ``core.ik``: arrays only, plus bone names to write back."""

    tip: str
    bones: list[str]                 # root -> tip
    rotation_modes: list[str]        # per bone
    chain: Chain
    parent: str | None               # parent bone of bones[0]
    solver: str
    settings: SolveSettings
    max_step_angle: float
    targets: np.ndarray              # (F, 3) armature space
    poles: np.ndarray | None         # (F, 3) armature space
    pole_angle: float                # radians, Blender's IK constraint pole_angle
    orientations: np.ndarray | None  # (F, 4) armature-space rotation goal of the tip bone
    rotation_weight: float
    roots: Any                       # (F, 4, 4) parent's frame as evaluated before the bake, or None
    arm_world: np.ndarray            # (F, 4, 4)
    trace: bool
    rest: dict[str, np.ndarray] = field(default_factory=dict)   # bone -> matrix_local relative to parent
    anchor: str | None = None        # baked bone the parent follows (parent or an ancestor of it)
    anchor_offset: np.ndarray | None = None  # (F, 4, 4) inv(anchor) . parent, evaluated before the bake
    notes: list[str] = field(default_factory=list)


def enabled_tips(obj: bpy.types.Object) -> list[bpy.types.PoseBone]:
    """The pose bones of ``obj`` that are tips of enabled Sinew chains (armature order)."""
    if obj is None or obj.type != "ARMATURE" or obj.pose is None:
        return []
    return [pb for pb in obj.pose.bones if pb.sinew_ik.enabled]


def chain_bones(tip: bpy.types.PoseBone) -> list[bpy.types.PoseBone]:
    """Pose bones of the chain ending at ``tip``, root first."""
    length = int(tip.sinew_ik.chain_length)
    bones = [tip]
    while (length == 0 or len(bones) < length) and bones[-1].parent is not None:
        bones.append(bones[-1].parent)
    if length and len(bones) < length:
        raise SinewError(f"chain of '{tip.name}': chain length {length} goes beyond the root bone "
                         f"'{bones[-1].name}' (at most {len(bones)} bones)")
    return bones[::-1]


def _limits(bones: list[bpy.types.PoseBone]) -> JointLimits | None:
    lock = np.array([[pb.lock_ik_x, pb.lock_ik_y, pb.lock_ik_z] for pb in bones], dtype=bool)
    use = np.array([[pb.use_ik_limit_x, pb.use_ik_limit_y, pb.use_ik_limit_z] for pb in bones], dtype=bool)
    lo = np.array([[pb.ik_min_x, pb.ik_min_y, pb.ik_min_z] for pb in bones], dtype=np.float64)
    hi = np.array([[pb.ik_max_x, pb.ik_max_y, pb.ik_max_z] for pb in bones], dtype=np.float64)
    stiff = np.array([[pb.ik_stiffness_x, pb.ik_stiffness_y, pb.ik_stiffness_z] for pb in bones], dtype=np.float64)
    if not (lock.any() or use.any() or stiff.any()):
        return None
    return JointLimits(lock, use, lo, hi, stiffness=stiff if stiff.any() else None)


# --------------------------------------------------------------------------- chains


def _to_armature(arm_world: np.ndarray, points_world: np.ndarray) -> np.ndarray:
    """Points (F, 3) from world space into the armature's space at each frame."""
    inv = np.linalg.inv(arm_world)
    return np.einsum("fij,fj->fi", inv[:, :3, :3], points_world) + inv[:, :3, 3]


def chain_geometry(bones: list[bpy.types.PoseBone]) -> tuple[Chain, str | None]:
    heads = np.array([tuple(pb.bone.head_local) for pb in bones], dtype=np.float64)
    mats = np.array([mat4(pb.bone.matrix_local) for pb in bones], dtype=np.float64)
    lengths = np.array([pb.bone.length for pb in bones], dtype=np.float64)
    parent = bones[0].parent
    if parent is not None:
        # Express the chain in its parent's rest frame; the root is then the parent's pose.
        inv = np.linalg.inv(mat4(parent.bone.matrix_local))
        heads = heads @ inv[:3, :3].T + inv[:3, 3]
        mats = inv[None] @ mats
    # matrix_local carries no scale, but normalise against round-off.
    rot = mats[:, :3, :3] / np.linalg.norm(mats[:, :3, :3], axis=1, keepdims=True)
    return Chain.from_rest_matrices(heads, rot, lengths, _limits(bones)), None if parent is None else parent.name


def _to_armature_rotation(arm_world: np.ndarray, world: np.ndarray) -> np.ndarray:
    """Armature-space rotations (F, 4) of world matrices (F, 4, 4), sign-continuous over frames."""
    m = np.linalg.solve(arm_world, world)
    q = quat.from_matrix(m[:, :3, :3])
    flip = np.concatenate(([False], np.einsum("fi,fi->f", q[1:], q[:-1]) < 0))
    return np.where((np.cumsum(flip) % 2 == 1)[:, None], -q, q)


def read_chains(context: bpy.types.Context, arm: bpy.types.Object, frames: np.ndarray
                ) -> tuple[list[ChainInput], str]:
    """Read every enabled chain of ``arm`` over ``frames``.

    Targets and poles are objects (their world location) or, for an armature, one of its bones
    (the bone's head, as Blender's IK constraint reads a subtarget). With ``use_rotation`` the
    tip's goal orientation is the target's rotation (the object's world rotation, or the bone's
    pose rotation, expressed in this armature's space). A chain root whose parent moves with
    another chain of this bake gets ``anchor``/``anchor_offset`` so the bake can place it on the
    other chain's result.

    Returns
    -------
    chains : list of ChainInput
    path : str
        How per-frame transforms were gathered (``'F-curves'`` or ``'frame_set (...)'``).

    Raises
    ------
    SinewError
        For anything a user must fix (no chain, missing target, chain beyond the root, bad
        expression, a target that moves with the bake, ...); the message names the bone.
    """
    tips = enabled_tips(arm)
    if not tips:
        raise SinewError(f"'{arm.name}' has no enabled Sinew IK chain (enable one in the bone's Sinew IK panel)")
    chains = [(tip, chain_bones(tip)) for tip in tips]
    baked = {pb.name for _, bones in chains for pb in bones}
    moving = moving_bones(arm, baked)
    geometry = []
    objects: list[bpy.types.Object] = [arm]
    bone_keys: list[tuple[str, str]] = []
    for tip, bones in chains:
        s = tip.sinew_ik
        name = f"chain of '{tip.name}'"
        chain, parent = chain_geometry(bones)
        if s.target_mode in ("OBJECT", "CURVE") and s.target is None:
            raise SinewError(f"{name}: no target object set")
        if s.target_mode == "CURVE" and s.target.type != "CURVE":
            raise SinewError(f"{name}: target '{s.target.name}' is not a curve")
        if s.use_rotation and s.target_mode != "OBJECT":
            raise SinewError(f"{name}: Rotation needs an object or bone target (the {s.target_mode.lower()} "
                             "target has no orientation)")
        target = pole = None
        if s.target_mode == "OBJECT":
            target = source("target", s.target, s.target_bone, arm, moving, name)
        if s.pole_target is not None:
            pole = source("pole target", s.pole_target, s.pole_bone, arm, moving, name)
        curve = Source(s.target) if s.target_mode == "CURVE" else None
        for role, src in (("target", target or curve), ("pole target", pole)):
            if src is None:
                continue
            why = moved_by_chain(src.obj, arm, moving) if src.obj is not arm else None
            if why:
                raise SinewError(f"{name}: the {role} moves with the bake itself ({why}); "
                                 "use a target that does not depend on the baked bones")
            if src is not curve:
                objects.append(src.obj)
            if src.bone:
                bone_keys.append((src.obj.name, src.bone))
        anchor = None
        if parent is not None:
            bone_keys.append((arm.name, parent))
            if parent in moving:
                # The parent follows a baked bone: it is placed on that bone's result with the
                # offset it had before the bake (exact for parenting; for a parent that follows
                # through a constraint, as if the constraint held that offset rigidly).
                anchor = moving[parent]
                bone_keys.append((arm.name, anchor))
        geometry.append((tip, bones, chain, parent, target, pole, anchor))
    sampler = FrameSampler(context, frames, objects, list(dict.fromkeys(bone_keys)))
    arm_world = sampler.world[arm.name]
    det = np.linalg.det(arm_world[:, :3, :3])
    flat = np.flatnonzero(~(np.abs(det) > 1e-12))
    if flat.size:
        raise SinewError(f"'{arm.name}' has zero scale at frame {int(frames[flat[0]])}: its bones cannot reach "
                         "anything; give the armature object a non-zero scale")

    def world_of(src: Source) -> np.ndarray:
        w = sampler.world[src.obj.name]
        return w @ sampler.bone[(src.obj.name, src.bone)] if src.bone else w

    out = []
    f_count = frames.shape[0]
    for tip, bones, chain, parent, target, pole, anchor in geometry:
        s = tip.sinew_ik
        name = f"chain of '{tip.name}'"
        orientations = None
        if s.target_mode == "OBJECT":
            w = world_of(target)
            targets = _to_armature(arm_world, w[:, :3, 3])
            if s.use_rotation:
                orientations = _to_armature_rotation(arm_world, w)
        elif s.target_mode == "CURVE":
            pts, cyclic = curve_polyline(context, s.target)
            targets = _to_armature(arm_world, resample_polyline(pts, f_count, cyclic=cyclic))
        else:
            try:
                targets = expression_targets(s.expression_x, s.expression_y, s.expression_z, frames)
            except SinewError as exc:
                raise SinewError(f"{name}: {exc}") from None
        poles = None if pole is None else _to_armature(arm_world, world_of(pole)[:, :3, 3])
        roots = None if parent is None else sampler.bone[(arm.name, parent)]
        anchor_offset = None
        if anchor is not None:
            anchor_offset = np.linalg.solve(sampler.bone[(arm.name, anchor)], roots)
        rest = {}
        for pb in bones:
            own = mat4(pb.bone.matrix_local)
            rest[pb.name] = relative_rest(own, None if pb.parent is None else mat4(pb.parent.bone.matrix_local))
        settings = SolveSettings(int(s.max_iterations), float(s.tolerance))
        out.append(ChainInput(
            tip=tip.name, bones=[pb.name for pb in bones], rotation_modes=[pb.rotation_mode for pb in bones],
            chain=chain, parent=parent, solver=s.solver, settings=settings, max_step_angle=float(s.max_step_angle),
            targets=targets, poles=poles, pole_angle=float(s.pole_angle) if poles is not None else 0.0,
            orientations=orientations, rotation_weight=float(s.rotation_weight) if s.use_rotation else 0.0,
            roots=roots, arm_world=arm_world, trace=bool(s.trace), rest=rest, anchor=anchor,
            anchor_offset=anchor_offset))
    return out, sampler.path
