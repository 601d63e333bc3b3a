"""Scene → plain arrays for a spring-bone bake.

Everything is read up front, by stepping the scene over the frames (scene frame restored):
the armature's evaluated pose (its keys, constraints, drivers and any IK keys baked before),
its world matrix, and the colliders. The bones' evaluated matrices give each chain bone's
animated local rotation and the frame its parent carries the chain in; the simulation runs in
world space, where gravity and the colliders are (an armature scaled uniformly has its chains
scaled with it). Chain geometry comes from :func:`..ik.read.chain_geometry` and colliders
from :mod:`..springs.read`, as the IK and spring bakes read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from .. import compat
from ..core import SinewError, quat
from ..ik.pose import relative_rest
from ..ik.read import chain_geometry
from ..ik.sampling import mat4
from ..springs.read import collider_objects, kept_frame, read_colliders

__all__ = ["SpringInput", "ChainInput", "spring_tips", "spring_chain_bones", "read_springs", "pre_roll_frames",
           "check_springs"]


def spring_tips(obj: bpy.types.Object) -> list[bpy.types.PoseBone]:
    """The pose bones of ``obj`` that are tips of enabled spring chains (armature order)."""
    if obj is None or obj.type != "ARMATURE" or obj.pose is None:
        return []
    return [pb for pb in obj.pose.bones if pb.sinew_spring.enabled]


def spring_chain_bones(tip: bpy.types.PoseBone) -> list[bpy.types.PoseBone]:
    """The chain's pose bones, root first: the tip and its ``chain_length − 1`` parents."""
    length = int(tip.sinew_spring.chain_length)
    if length < 1:
        raise SinewError(f"spring chain of '{tip.name}': chain length must be at least 1")
    bones = [tip]
    while len(bones) < length and bones[-1].parent is not None:
        bones.append(bones[-1].parent)
    if len(bones) < length:
        raise SinewError(f"spring chain of '{tip.name}': chain length {length} goes beyond the root bone "
                         f"'{bones[-1].name}' (at most {len(bones)} bones)")
    return bones[::-1]


@dataclass
class ChainInput:
    """One chain: names to write back, plain arrays for core."""

    tip: str
    bones: list[str]                 # root -> tip
    rotation_modes: list[str]
    parent: str | None
    chain: Any                       # core.ik.Chain in world units (the armature's scale applied)
    rotations: np.ndarray            # (T, n, 4) animated local pose rotations
    root_rotation: np.ndarray        # (T, 4) world
    root_position: np.ndarray        # (T, 3) world, m
    settings: Any                    # core.springbones.SpringSettings
    colliders: tuple[int, ...]       # indices into SpringInput.collider_names


@dataclass
class SpringInput:
    """Everything a spring-bone bake needs, over ``frames`` (pre-roll frames first)."""

    frames: np.ndarray               # (T,) scene frames read
    written: int                     # F: the last F of them are written
    fps: float
    gravity: np.ndarray              # (3,) world, m/s²
    chains: list[ChainInput]
    collider_names: list[str]
    colliders: list[list[tuple]]     # per frame, read_colliders tuples in collider_names order
    notes: list[str]


def _settings(tip: bpy.types.PoseBone) -> Any:
    from ..core.springbones import SpringSettings

    s = tip.sinew_spring
    try:
        return SpringSettings(stiffness=s.stiffness, damping=s.damping, drag=s.drag, gravity=s.gravity,
                              stretch=s.stretch, radius=s.radius, substeps=int(s.substeps),
                              pre_roll=int(s.pre_roll))
    except SinewError as exc:
        raise SinewError(f"spring chain of '{tip.name}': {exc}") from None


def _check_chains(arm: bpy.types.Object, chains: list[tuple[bpy.types.PoseBone, list[bpy.types.PoseBone]]]
                  ) -> None:
    """Refuse chains that share bones, hang below another spring chain, have bones that do not
    inherit their parent's rotation and scale, or are IK chains too."""
    owner: dict[str, str] = {}
    for tip, bones in chains:
        for pb in bones:
            if pb.name in owner:
                raise SinewError(f"spring chains of '{owner[pb.name]}' and '{tip.name}' share the bone "
                                 f"'{pb.name}'; shorten one of them")
            owner[pb.name] = tip.name
    for tip, bones in chains:
        above = next((p for p in bones[0].parent_recursive if p.name in owner), None)
        if above is not None:
            raise SinewError(f"spring chain of '{tip.name}' hangs below the spring chain of '{owner[above.name]}' "
                             f"(bone '{above.name}'): make them one chain, or bake them in separate armatures")
    for tip, bones in chains:
        odd = next((pb for pb in bones if not pb.bone.use_inherit_rotation or pb.bone.inherit_scale != "FULL"), None)
        if odd is not None:
            raise SinewError(f"spring chain of '{tip.name}': bone '{odd.name}' does not inherit its parent's rotation "
                             "and scale fully (Bone properties › Relations); spring bones key rotations composed "
                             "as Blender's default inheritance does")
    ik_bones: dict[str, str] = {}
    from ..ik.read import chain_bones, enabled_tips

    for ik_tip in enabled_tips(arm):
        try:
            ik_bones.update((pb.name, ik_tip.name) for pb in chain_bones(ik_tip))
        except SinewError:
            continue  # the IK bake reports its own problems
    for tip, bones in chains:
        both = next((pb.name for pb in bones if pb.name in ik_bones), None)
        if both is not None:
            raise SinewError(f"bone '{both}' is in the spring chain of '{tip.name}' and in the Sinew IK chain of "
                             f"'{ik_bones[both]}'; a bone is baked by one of them")


def _keyed_every_frame(arm: bpy.types.Object, bones: list[bpy.types.PoseBone], start: int, end: int) -> str:
    """The first of ``bones`` whose rotation (in its rotation mode) has a key on every frame of
    ``start .. end`` (more than one frame), or ''."""
    if end <= start:
        return ""
    paths = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}
    for pb in bones:
        path = f'pose.bones["{bpy.utils.escape_identifier(pb.name)}"].{paths.get(pb.rotation_mode, "rotation_euler")}'
        fc = compat.find_fcurve(arm, path, 0)
        if fc is None or len(fc.keyframe_points) < end - start + 1:
            continue
        co = np.empty(2 * len(fc.keyframe_points))
        fc.keyframe_points.foreach_get("co", co)
        keyed = co[0::2]
        inside = keyed[(keyed >= start - 1e-3) & (keyed <= end + 1e-3)]
        if len(inside) >= end - start + 1:
            return f"bone '{pb.name}'"
    return ""


def _world_scale(arm_name: str, world: np.ndarray, frames: np.ndarray) -> float:
    """The armature object's uniform scale (constant over the frames), or a SinewError."""
    axes = np.linalg.norm(world[:, :3, :3], axis=1)  # (T, 3) column lengths
    s = float(axes[0, 0])
    if not (np.all(np.isfinite(axes)) and s > 1e-9) or np.any(np.abs(axes - s) > 1e-5 * s):
        k = int(np.argmax(np.max(np.abs(axes - s), axis=1))) if np.all(np.isfinite(axes)) else 0
        raise SinewError(f"'{arm_name}' is not scaled uniformly and constantly (frame {int(frames[k])}); spring "
                         "bones need one scale for the whole armature: apply its scale (Ctrl+A)")
    return s


def check_springs(arm: bpy.types.Object) -> tuple[list[tuple[bpy.types.PoseBone, list[bpy.types.PoseBone]]], list]:
    """The enabled chains of ``arm`` (tip, bones root first) and their core settings, or the
    :class:`SinewError` naming what is wrong (no chain, a chain beyond the root, shared or nested
    chains, bones not inheriting fully, a bone in an IK chain too, a setting out of range)."""
    tips = spring_tips(arm)
    if not tips:
        raise SinewError(f"'{arm.name}' has no enabled spring chain (enable one in the bone's Sinew Spring panel)")
    chains = [(tip, spring_chain_bones(tip)) for tip in tips]
    _check_chains(arm, chains)
    return chains, [_settings(tip) for tip, _ in chains]


def pre_roll_frames(arm: bpy.types.Object) -> int:
    """Frames read before the range: the largest ``pre_roll`` of the enabled chains."""
    return max((max(int(pb.sinew_spring.pre_roll), 0) for pb in spring_tips(arm)), default=0)


def _anchors(arm: bpy.types.Object, names: list[str], solved: dict[str, np.ndarray]) -> dict[str, str]:
    """Of ``names``, those not solved themselves but below a solved bone: name -> nearest such bone."""
    out = {}
    for name in names:
        if name not in solved:
            hit = next((p.name for p in arm.pose.bones[name].parent_recursive if p.name in solved), None)
            if hit is not None:
                out[name] = hit
    return out


def read_springs(context: bpy.types.Context, arm: bpy.types.Object, frame_start: int, frame_end: int,
                 solved: dict[str, np.ndarray] | None = None) -> SpringInput:
    """Read every enabled spring chain of ``arm`` (frames ``frame_start − max pre_roll .. frame_end``).

    ``solved`` holds the armature-space matrices ``(T, 4, 4)`` over those frames of bones a Sinew
    IK bake solves (:class:`..ik.operators.IKBakeJob` with ``keep_pose``): they replace the
    evaluated ones, and a bone below one of them follows it with the offset it had before the
    bake (as the IK bake places chains below other chains), so spring chains ride on the IK
    solution whether or not its keys were written yet.

    Raises
    ------
    SinewError
        No enabled chain, bad settings, a chain beyond the root, chains sharing bones or
        nested, a bone in an IK chain too, a non-uniformly scaled armature; the message names
        the bone.
    """
    from ..core.ik import Chain

    chains, settings = check_springs(arm)
    scene = context.scene
    lead = max(s.pre_roll for s in settings)
    frames = np.arange(int(frame_start) - lead, int(frame_end) + 1)
    t_count = len(frames)
    # colliders: the scene's Collision objects plus each chain's collection, one list for all
    per_chain = [collider_objects(arm, tip.sinew_spring.collision_collection, scene) for tip, _ in chains]
    objects: dict[str, bpy.types.Object] = {}
    for obs in per_chain:
        for ob in obs:
            objects.setdefault(ob.name, ob)
    names = list(objects)
    index = {name: i for i, name in enumerate(names)}
    wanted = list(dict.fromkeys([pb.name for _, bones in chains for pb in bones]
                                + [bones[0].parent.name for _, bones in chains if bones[0].parent is not None]))
    solved = solved or {}
    anchors = _anchors(arm, wanted, solved)
    read = list(dict.fromkeys(wanted + list(anchors.values())))
    world = np.empty((t_count, 4, 4))
    pose = {name: np.empty((t_count, 4, 4)) for name in read}
    colliders: list[list[tuple]] = []
    memo: dict = {}  # (each collider's triangles in canonical order while they stay the same)
    with kept_frame(scene):
        for k, f in enumerate(frames):
            scene.frame_set(int(f))
            dg = context.evaluated_depsgraph_get()
            ev = arm.evaluated_get(dg)
            world[k] = mat4(ev.matrix_world)
            for name in read:
                pose[name][k] = mat4(ev.pose.bones[name].matrix)
            colliders.append(read_colliders([objects[n] for n in names], dg, memo))
    for name, a in anchors.items():  # below an IK-solved bone: its offset from it as evaluated
        pose[name] = solved[a] @ np.linalg.solve(pose[a], pose[name])
    for name in wanted:
        if name in solved:
            pose[name] = solved[name]
    scale = _world_scale(arm.name, world, frames)
    notes: list[str] = []
    out = []
    for (tip, bones), s, obs in zip(chains, settings, per_chain):
        chain_parent, parent = chain_geometry(bones)
        chain = Chain(chain_parent.rest_rotations, chain_parent.rest_offsets * scale, chain_parent.lengths * scale)
        local = []
        prev = np.broadcast_to(np.eye(4), (t_count, 4, 4)) if parent is None else pose[parent]
        prev_rest = None if parent is None else mat4(arm.pose.bones[parent].bone.matrix_local)
        for pb in bones:
            rest = mat4(pb.bone.matrix_local)
            rel = relative_rest(rest, prev_rest)
            # Blender's M = M_parent · inv(R_parent) · R · B, so B = inv(rel) · inv(M_parent) · M
            basis = np.linalg.inv(rel)[None] @ np.linalg.solve(prev, pose[pb.name])
            r = basis[:, :3, :3] / np.linalg.norm(basis[:, :3, :3], axis=1, keepdims=True)
            local.append(quat.from_matrix(r))
            prev, prev_rest = pose[pb.name], rest
        q = quat.make_continuous(np.stack(local, axis=1), axis=0)
        # the frame the parent carries the chain in: bone 0's posed matrix without its own
        # rotation and rest offset (a bone 0 moved by location keys carries its chain along)
        rel0 = relative_rest(mat4(bones[0].bone.matrix_local), None if parent is None else
                             mat4(arm.pose.bones[parent].bone.matrix_local))
        rot0 = np.zeros((t_count, 4, 4))
        rot0[:, :3, :3] = quat.to_matrix(q[:, 0])
        rot0[:, 3, 3] = 1.0
        m0 = pose[bones[0].name].copy()
        m0[:, :3, :3] /= np.linalg.norm(m0[:, :3, :3], axis=1, keepdims=True)
        root_arm = m0 @ np.linalg.inv(rot0) @ np.linalg.inv(rel0)[None]
        root_world = world @ root_arm
        rr = quat.make_continuous(quat.from_matrix(root_world[:, :3, :3] / scale), axis=0)
        baked = _keyed_every_frame(arm, bones, int(frame_start), int(frame_end))
        if baked:
            notes.append(f"spring chain of '{tip.name}': {baked} has a rotation key on every frame of the range "
                         "(a previous bake?): the bake read those keys as the animation; undo, or clear them, to "
                         "bake from the animation before it")
        moved = [pb.name for pb in bones[1:] if any(abs(v) > 1e-9 for v in pb.location)]
        if moved:
            notes.append(f"spring chain of '{tip.name}': the location of {', '.join(moved)} is not simulated")
        if any(not c.mute and c.influence > 0.0 for pb in bones for c in pb.constraints):
            notes.append(f"spring chain of '{tip.name}': constraints on its bones act on top of the baked keys; "
                         "mute them to see the spring motion alone")
        out.append(ChainInput(
            tip=tip.name, bones=[pb.name for pb in bones], rotation_modes=[pb.rotation_mode for pb in bones],
            parent=parent, chain=chain, rotations=q, root_rotation=rr, root_position=root_world[:, :3, 3].copy(),
            settings=s, colliders=tuple(index[ob.name] for ob in obs)))
    fps = float(scene.render.fps) / float(scene.render.fps_base)
    gravity = np.array(scene.gravity, dtype=np.float64) if scene.use_gravity else np.zeros(3)
    return SpringInput(frames, int(frame_end) - int(frame_start) + 1, fps, gravity, out, names, colliders, notes)
