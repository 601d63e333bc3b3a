"""Reading IK chains and their targets from a Blender scene into plain numpy data.

Everything a bake needs is read here, up front, so the solve never touches the scene:

* the chain: bones from the tip up ``chain_length`` (0 = to the root), rest geometry from
  ``bone.matrix_local`` / ``head_local`` / ``length`` (connected or not), Blender's per-bone
  IK locks and limits;
* per-frame transforms: the armature's world matrix (targets are solved in armature space),
  the target and pole objects' world locations, the chain root's parent bone. When every
  object involved is moved only by its own F-curves (no constraints, drivers, NLA or
  non-object parenting), they are computed by evaluating the F-curves directly
  (``fcurve.evaluate``), which is much cheaper than stepping the scene; otherwise the scene
  is stepped with ``frame_set`` and the original frame restored;
* the target per mode: OBJECT, CURVE (the evaluated curve as a dense polyline, resampled by
  arc length over the range) or EXPRESSION (core's safe expressions, armature space).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from .. import compat
from ..core import SinewError, quat
from ..core.ik import Chain, JointLimits, SolveSettings
from ..core.ik.targets import expression_targets, resample_polyline
from .pose import relative_rest
from .rotations import axis_angle_to_matrix, euler_to_matrix, quat_to_matrix

__all__ = ["ChainInput", "read_chains", "chain_bones", "enabled_tips", "FrameSampler", "curve_polyline"]

_TRANSFORM_PATHS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale")
_DELTA_PATHS = ("delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale",
                "rotation_mode")


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


def _mat4(m: Any) -> np.ndarray:
    return np.array([list(row) for row in m], dtype=np.float64)


def _limits(bones: list[bpy.types.PoseBone]) -> JointLimits | None:
    lock = np.array([[pb.lock_ik_x, pb.lock_ik_y, pb.lock_ik_z] for pb in bones], dtype=bool)
    use = np.array([[pb.use_ik_limit_x, pb.use_ik_limit_y, pb.use_ik_limit_z] for pb in bones], dtype=bool)
    lo = np.array([[pb.ik_min_x, pb.ik_min_y, pb.ik_min_z] for pb in bones], dtype=np.float64)
    hi = np.array([[pb.ik_max_x, pb.ik_max_y, pb.ik_max_z] for pb in bones], dtype=np.float64)
    stiff = np.array([[pb.ik_stiffness_x, pb.ik_stiffness_y, pb.ik_stiffness_z] for pb in bones], dtype=np.float64)
    if not (lock.any() or use.any() or stiff.any()):
        return None
    return JointLimits(lock, use, lo, hi, stiffness=stiff if stiff.any() else None)


# --------------------------------------------------------------------------- per-frame transforms


def _basis(loc: np.ndarray, rot: np.ndarray, scale: np.ndarray, mode: str) -> np.ndarray:
    """Object basis matrices (F, 4, 4) = T @ R @ S from per-frame channel values."""
    if mode == "QUATERNION":
        r = quat_to_matrix(rot[:, :4])
    elif mode == "AXIS_ANGLE":
        r = axis_angle_to_matrix(rot[:, :4])
    else:
        r = euler_to_matrix(rot[:, :3], mode)
    m = np.zeros((loc.shape[0], 4, 4))
    m[:, :3, :3] = r * scale[:, None, :]
    m[:, :3, 3] = loc
    m[:, 3, 3] = 1.0
    return m


def _fcurve_world(obj: bpy.types.Object, frames: np.ndarray) -> tuple[np.ndarray | None, str]:
    """World matrices (F, 4, 4) of ``obj`` from its own F-curves, or (None, reason)."""
    if any(not c.mute and c.influence > 0.0 for c in obj.constraints):
        return None, f"'{obj.name}' has constraints"
    ad = obj.animation_data
    curves: dict[tuple[str, int], Any] = {}
    if ad is not None:
        if len(ad.drivers):
            return None, f"'{obj.name}' has drivers"
        if any(not t.mute for t in ad.nla_tracks):
            return None, f"'{obj.name}' has NLA tracks"
        if getattr(ad, "action_influence", 1.0) != 1.0 or getattr(ad, "action_blend_type", "REPLACE") != "REPLACE":
            return None, f"'{obj.name}' blends its action"
        for fc in compat.fcurves(obj):
            if fc.mute:
                continue
            if fc.data_path in _DELTA_PATHS:
                return None, f"'{obj.name}' animates {fc.data_path}"
            if fc.data_path in _TRANSFORM_PATHS:
                curves[(fc.data_path, fc.array_index)] = fc
    if (any(obj.delta_location) or any(obj.delta_rotation_euler) or tuple(obj.delta_scale) != (1.0, 1.0, 1.0)
            or tuple(obj.delta_rotation_quaternion) != (1.0, 0.0, 0.0, 0.0)):
        return None, f"'{obj.name}' has delta transforms"
    mode = obj.rotation_mode
    rot_path = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")

    def channel(path: str, size: int) -> np.ndarray:
        base = np.array(getattr(obj, path), dtype=np.float64)
        out = np.repeat(base[None, :size], frames.shape[0], axis=0)
        for i in range(size):
            fc = curves.get((path, i))
            if fc is not None:
                out[:, i] = [fc.evaluate(float(f)) for f in frames]
        return out

    basis = _basis(channel("location", 3), channel(rot_path, 4 if rot_path != "rotation_euler" else 3),
                   channel("scale", 3), mode)
    if obj.parent is None:
        return basis, ""
    if obj.parent_type != "OBJECT":
        return None, f"'{obj.name}' has a {obj.parent_type.lower()} parent"
    parent, why = _fcurve_world(obj.parent, frames)
    if parent is None:
        return None, why
    return parent @ _mat4(obj.matrix_parent_inverse) @ basis, ""


def _fcurve_bone(arm: bpy.types.Object, name: str, frames: np.ndarray) -> tuple[np.ndarray | None, str]:
    """Armature-space pose matrices (F, 4, 4) of bone ``name`` from the armature's own F-curves.

    The bone and its ancestors must be moved by their own keys (or not at all) with Blender's
    default inheritance: no constraints, drivers, NLA or blended actions, full rotation and
    scale inheritance, local location. Returns ``(None, reason)`` otherwise.
    """
    ad = arm.animation_data
    curves: dict[tuple[str, int], Any] = {}
    if ad is not None:
        if len(ad.drivers):
            return None, f"'{arm.name}' has drivers"
        if any(not t.mute for t in ad.nla_tracks):
            return None, f"'{arm.name}' has NLA tracks"
        if getattr(ad, "action_influence", 1.0) != 1.0 or getattr(ad, "action_blend_type", "REPLACE") != "REPLACE":
            return None, f"'{arm.name}' blends its action"
        curves = {(fc.data_path, fc.array_index): fc for fc in compat.fcurves(arm) if not fc.mute}
    chain: list[bpy.types.PoseBone] = []
    pb: bpy.types.PoseBone | None = arm.pose.bones[name]
    while pb is not None:
        if any(not c.mute and c.influence > 0.0 for c in pb.constraints):
            return None, f"bone '{pb.name}' has constraints"
        bone = pb.bone
        if (not bone.use_inherit_rotation or bone.inherit_scale != "FULL" or not bone.use_local_location
                or bone.use_relative_parent):
            return None, f"bone '{pb.name}' does not inherit its parent's transform fully"
        chain.append(pb)
        pb = pb.parent
    f_count = frames.shape[0]
    mats = np.repeat(np.eye(4)[None], f_count, axis=0)
    parent_rest = None
    for pb in reversed(chain):
        prefix = f'pose.bones["{bpy.utils.escape_identifier(pb.name)}"].'
        mode = pb.rotation_mode
        rot_path = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode,
                                                                                                "rotation_euler")

        def channel(path: str, size: int, pb: bpy.types.PoseBone = pb, prefix: str = prefix) -> np.ndarray:
            out = np.repeat(np.array(getattr(pb, path), dtype=np.float64)[None, :size], f_count, axis=0)
            for i in range(size):
                fc = curves.get((prefix + path, i))
                if fc is not None:
                    out[:, i] = [fc.evaluate(float(f)) for f in frames]
            return out

        basis = _basis(channel("location", 3), channel(rot_path, 3 if rot_path == "rotation_euler" else 4),
                       channel("scale", 3), mode)
        rest = _mat4(pb.bone.matrix_local)
        mats = mats @ relative_rest(rest, parent_rest) @ basis
        parent_rest = rest
    return mats, ""


class FrameSampler:
    """Per-frame world matrices of objects and pose matrices of bones over a frame range.

    Parameters
    ----------
    context : bpy.types.Context
    frames : ndarray of int, shape (F,)
    objects : list of bpy.types.Object
        Objects whose world matrices are needed (the armature first).
    bones : list of (str, str)
        ``(armature object name, bone name)`` pairs whose armature-space pose matrices are
        needed (chain roots' parents, target and pole bones).

    Attributes
    ----------
    world : dict of str to ndarray (F, 4, 4)
    bone : dict of (str, str) to ndarray (F, 4, 4)
    path : str
        ``'F-curves'`` (evaluated directly) or ``'frame_set'`` (scene stepped, frame restored),
        and the reason for the latter.
    """

    def __init__(self, context: bpy.types.Context, frames: np.ndarray, objects: list[bpy.types.Object],
                 bones: list[tuple[str, str]]) -> None:
        self.world: dict[str, np.ndarray] = {}
        self.bone: dict[tuple[str, str], np.ndarray] = {}
        reason = ""
        for obj in objects:
            if obj.name in self.world:
                continue
            mats, why = _fcurve_world(obj, frames)
            if mats is None:
                reason = why
                break
            self.world[obj.name] = mats
        if not reason:
            for key in bones:
                mats, why = _fcurve_bone(bpy.data.objects[key[0]], key[1], frames)
                if mats is None:
                    reason = why
                    break
                self.bone[key] = mats
        if not reason:
            self.path = "F-curves"
            return
        self.path = f"frame_set ({reason})"
        self._step(context, frames, objects, bones)

    def _step(self, context: bpy.types.Context, frames: np.ndarray, objects: list[bpy.types.Object],
              bones: list[tuple[str, str]]) -> None:
        scene = context.scene
        frame0, sub0 = scene.frame_current, scene.frame_subframe
        f_count = frames.shape[0]
        names = list(dict.fromkeys([o.name for o in objects] + [k[0] for k in bones]))
        world = {name: np.empty((f_count, 4, 4)) for name in names}
        bone = {key: np.empty((f_count, 4, 4)) for key in bones}
        try:
            for k, f in enumerate(frames):
                scene.frame_set(int(f))
                dg = context.evaluated_depsgraph_get()
                for name in names:
                    world[name][k] = _mat4(bpy.data.objects[name].evaluated_get(dg).matrix_world)
                for key in bones:
                    bone[key][k] = _mat4(bpy.data.objects[key[0]].evaluated_get(dg).pose.bones[key[1]].matrix)
        finally:
            scene.frame_set(frame0, subframe=sub0)
        self.world, self.bone = world, bone


# --------------------------------------------------------------------------- curves


def _walk_polyline(co: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, bool]:
    """Vertex order along the first edge path (the first spline); True if it is a closed loop."""
    m = co.shape[0]
    adj: list[list[int]] = [[] for _ in range(m)]
    for a, b in edges.tolist():
        adj[a].append(b)
        adj[b].append(a)
    ends = [v for v in range(m) if len(adj[v]) == 1]
    cyclic = not ends
    order = [ends[0] if ends else 0]
    prev = -1
    while len(order) <= m:
        nxt = sorted(v for v in adj[order[-1]] if v != prev)
        if not nxt or nxt[0] == order[0]:
            break
        prev = order[-1]
        order.append(nxt[0])
    return np.array(order, dtype=np.int64), cyclic


def _spline_points(spline: Any) -> np.ndarray:
    """Dense local-space polyline of a Bezier or poly spline (used when the mesh has faces)."""
    if spline.type == "POLY":
        pts = np.array([tuple(p.co)[:3] for p in spline.points], dtype=np.float64)
        return np.concatenate((pts, pts[:1])) if spline.use_cyclic_u else pts
    if spline.type != "BEZIER":
        raise SinewError("a NURBS curve with bevel or extrusion cannot be used as an IK target path; "
                         "remove the bevel/extrusion or use a Bezier or poly spline")
    bp = spline.bezier_points
    co = np.array([tuple(p.co) for p in bp], dtype=np.float64)
    hl = np.array([tuple(p.handle_left) for p in bp], dtype=np.float64)
    hr = np.array([tuple(p.handle_right) for p in bp], dtype=np.float64)
    idx = np.arange(len(bp))
    nxt = (idx + 1) % len(bp)
    if not spline.use_cyclic_u:
        idx, nxt = idx[:-1], nxt[:-1]
    if idx.size == 0:
        return co
    t = np.linspace(0.0, 1.0, 65)[:-1, None, None]
    p0, p1, p2, p3 = co[idx], hr[idx], hl[nxt], co[nxt]
    seg = ((1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t ** 2 * p2 + t ** 3 * p3)
    pts = np.swapaxes(seg, 0, 1).reshape(-1, 3)
    return np.concatenate((pts, co[nxt[-1:]]))


def curve_polyline(context: bpy.types.Context, obj: bpy.types.Object) -> tuple[np.ndarray, bool]:
    """The evaluated curve's first spline as a dense polyline in world space, and whether it is cyclic.

    Any spline type: the evaluated curve is converted to a mesh (honouring modifiers and the
    curve's resolution); if that mesh has faces (bevel, extrusion), Bezier and poly splines are
    sampled from their control data instead.
    """
    if obj.type != "CURVE":
        raise SinewError(f"target '{obj.name}' is not a curve object")
    if len(obj.data.splines) == 0:
        raise SinewError(f"curve '{obj.name}' has no splines")
    dg = context.evaluated_depsgraph_get()
    ev = obj.evaluated_get(dg)
    pts = None
    cyclic = False
    mesh = ev.to_mesh()
    try:
        if mesh is not None and len(mesh.polygons) == 0 and len(mesh.vertices) >= 2 and len(mesh.edges) >= 1:
            co = np.empty(3 * len(mesh.vertices))
            mesh.vertices.foreach_get("co", co)
            ed = np.empty(2 * len(mesh.edges), dtype=np.int64)
            mesh.edges.foreach_get("vertices", ed)
            order, cyclic = _walk_polyline(co.reshape(-1, 3), ed.reshape(-1, 2))
            pts = co.reshape(-1, 3)[order]
    finally:
        ev.to_mesh_clear()
    if pts is None:
        pts = _spline_points(obj.data.splines[0])
        cyclic = False  # _spline_points already closes cyclic splines
    mw = _mat4(ev.matrix_world)
    return pts @ mw[:3, :3].T + mw[:3, 3], cyclic


# --------------------------------------------------------------------------- chains


def _to_armature(arm_world: np.ndarray, points_world: np.ndarray) -> np.ndarray:
    """Points (F, 3) from world space into the armature's space at each frame."""
    inv = np.linalg.inv(arm_world)
    return np.einsum("fij,fj->fi", inv[:, :3, :3], points_world) + inv[:, :3, 3]


def _moving_bones(arm: bpy.types.Object, baked: set[str]) -> dict[str, str]:
    """Bones of ``arm`` that move when the ``baked`` bones do: name -> the baked bone it follows."""
    moving: dict[str, str] = {}
    for pb in arm.pose.bones:
        if pb.name in baked:
            moving[pb.name] = pb.name
            continue
        hit = next((p.name for p in pb.parent_recursive if p.name in baked), None)
        if hit is None:
            hit = next((c.subtarget for p in (pb, *pb.parent_recursive) for c in p.constraints
                        if not c.mute and getattr(c, "target", None) is arm and getattr(c, "subtarget", "") in baked),
                       None)
        if hit is not None:
            moving[pb.name] = hit
    return moving


def _moved_by_chain(obj: bpy.types.Object, arm: bpy.types.Object, moving: dict[str, str]) -> str | None:
    """Why ``obj`` moves with the baked bones (parented or constrained to them), or None.

    Such a target would chase itself: every solve moves it, so the bake is refused.
    """
    seen = set()
    node: bpy.types.Object | None = obj
    while node is not None and node.name not in seen:
        seen.add(node.name)
        if node.parent is arm and node.parent_type == "BONE" and node.parent_bone in moving:
            return f"'{obj.name}' is parented to bone '{node.parent_bone}', which the bake moves"
        for con in getattr(node, "constraints", []):
            if getattr(con, "target", None) is arm and getattr(con, "subtarget", "") in moving and not con.mute:
                return f"'{obj.name}' follows bone '{con.subtarget}' (moved by the bake) through constraint '{con.name}'"
        node = node.parent
    return None


def _chain_geometry(bones: list[bpy.types.PoseBone]) -> tuple[Chain, str | None]:
    heads = np.array([tuple(pb.bone.head_local) for pb in bones], dtype=np.float64)
    mats = np.array([_mat4(pb.bone.matrix_local) for pb in bones], dtype=np.float64)
    lengths = np.array([pb.bone.length for pb in bones], dtype=np.float64)
    parent = bones[0].parent
    if parent is not None:
        # Express the chain in its parent's rest frame; the root is then the parent's pose.
        inv = np.linalg.inv(_mat4(parent.bone.matrix_local))
        heads = heads @ inv[:3, :3].T + inv[:3, 3]
        mats = inv[None] @ mats
    # matrix_local carries no scale, but normalise against round-off.
    rot = mats[:, :3, :3] / np.linalg.norm(mats[:, :3, :3], axis=1, keepdims=True)
    return Chain.from_rest_matrices(heads, rot, lengths, _limits(bones)), None if parent is None else parent.name


@dataclass(frozen=True)
class _Source:
    """Where a target or pole comes from: an object, or a bone of an armature object (its head)."""

    obj: bpy.types.Object
    bone: str = ""


def _source(role: str, obj: bpy.types.Object, bone: str, arm: bpy.types.Object, moving: dict[str, str],
            name: str) -> _Source:
    """Validate a target/pole choice; refuse (SinewError) what would bake something unintended."""
    if obj.type != "ARMATURE":
        return _Source(obj)  # a bone name left over from an armature target means nothing here
    if not bone:
        raise SinewError(f"{name}: the {role} '{obj.name}' is an armature; choose one of its bones as "
                         f"{role} bone (Blender's IK constraint follows a bone of an armature), or use an empty")
    if obj.data.bones.get(bone) is None:
        raise SinewError(f"{name}: the {role} bone '{bone}' is not a bone of '{obj.name}'")
    if obj is arm and bone in moving:
        via = moving[bone]
        how = "is baked itself" if via == bone else f"moves with the baked bone '{via}'"
        raise SinewError(f"{name}: the {role} bone '{bone}' {how}, so it would chase itself; parent it to a "
                         "bone the bake does not move (Rigify parents its IK controls to the root)")
    return _Source(obj, bone)


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
    moving = _moving_bones(arm, baked)
    geometry = []
    objects: list[bpy.types.Object] = [arm]
    bone_keys: list[tuple[str, str]] = []
    for tip, bones in chains:
        s = tip.sinew_ik
        name = f"chain of '{tip.name}'"
        chain, parent = _chain_geometry(bones)
        if s.target_mode in ("OBJECT", "CURVE") and s.target is None:
            raise SinewError(f"{name}: no target object set")
        if s.target_mode == "CURVE" and s.target.type != "CURVE":
            raise SinewError(f"{name}: target '{s.target.name}' is not a curve")
        if s.use_rotation and s.target_mode != "OBJECT":
            raise SinewError(f"{name}: Rotation needs an object or bone target (the {s.target_mode.lower()} "
                             "target has no orientation)")
        target = pole = None
        if s.target_mode == "OBJECT":
            target = _source("target", s.target, s.target_bone, arm, moving, name)
        if s.pole_target is not None:
            pole = _source("pole target", s.pole_target, s.pole_bone, arm, moving, name)
        curve = _Source(s.target) if s.target_mode == "CURVE" else None
        for role, src in (("target", target or curve), ("pole target", pole)):
            if src is None:
                continue
            why = _moved_by_chain(src.obj, arm, moving) if src.obj is not arm else None
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

    def world_of(src: _Source) -> np.ndarray:
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
            own = _mat4(pb.bone.matrix_local)
            rest[pb.name] = relative_rest(own, None if pb.parent is None else _mat4(pb.parent.bone.matrix_local))
        settings = SolveSettings(int(s.max_iterations), float(s.tolerance))
        out.append(ChainInput(
            tip=tip.name, bones=[pb.name for pb in bones], rotation_modes=[pb.rotation_mode for pb in bones],
            chain=chain, parent=parent, solver=s.solver, settings=settings, max_step_angle=float(s.max_step_angle),
            targets=targets, poles=poles, pole_angle=float(s.pole_angle) if poles is not None else 0.0,
            orientations=orientations, rotation_weight=float(s.rotation_weight) if s.use_rotation else 0.0,
            roots=roots, arm_world=arm_world, trace=bool(s.trace), rest=rest, anchor=anchor,
            anchor_offset=anchor_offset))
    return out, sampler.path
