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
from ..core import SinewError
from ..core.ik import Chain, JointLimits, RootTransform, SolveSettings
from ..core.ik.targets import expression_targets, resample_polyline
from .rotations import axis_angle_to_matrix, euler_to_matrix, quat_to_matrix

__all__ = ["ChainInput", "read_chains", "chain_bones", "enabled_tips", "FrameSampler", "curve_polyline"]

_TRANSFORM_PATHS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale")
_DELTA_PATHS = ("delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale",
                "rotation_mode")


@dataclass
class ChainInput:
    """One chain's plain input to ``core.ik.bake``: arrays only, plus bone names to write back."""

    tip: str
    bones: list[str]                 # root -> tip
    rotation_modes: list[str]        # per bone
    chain: Chain
    solver: str
    settings: SolveSettings
    max_step_angle: float
    targets: np.ndarray              # (F, 3) armature space
    poles: np.ndarray | None         # (F, 3) armature space
    roots: Any                       # RootTransform (F,) or None
    arm_world: np.ndarray            # (F, 4, 4)
    trace: bool
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
    if not (lock.any() or use.any()):
        return None
    return JointLimits(lock, use, lo, hi)


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


def _bone_animated(arm: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> bool:
    """True if ``pose_bone`` or an ancestor may move over time (keys, constraints, drivers)."""
    ad = arm.animation_data
    prefixes = []
    pb: bpy.types.PoseBone | None = pose_bone
    while pb is not None:
        if any(not c.mute for c in pb.constraints):
            return True
        prefixes.append(f'pose.bones["{bpy.utils.escape_identifier(pb.name)}"]')
        pb = pb.parent
    if ad is None:
        return False
    if len(ad.drivers) or any(not t.mute for t in ad.nla_tracks):
        return True
    return any(fc.data_path.startswith(tuple(prefixes)) for fc in compat.fcurves(arm))


class FrameSampler:
    """Per-frame world matrices of objects and pose matrices of bones over a frame range.

    Parameters
    ----------
    context : bpy.types.Context
    frames : ndarray of int, shape (F,)
    objects : list of bpy.types.Object
        Objects whose world matrices are needed (the armature first).
    bones : list of str
        Pose bones of ``objects[0]`` (the armature) whose armature-space pose matrices are
        needed (chain roots' parents).

    Attributes
    ----------
    world : dict of str to ndarray (F, 4, 4)
    bone : dict of str to ndarray (F, 4, 4)
    path : str
        ``'F-curves'`` (evaluated directly) or ``'frame_set'`` (scene stepped, frame restored),
        and the reason for the latter.
    """

    def __init__(self, context: bpy.types.Context, frames: np.ndarray, objects: list[bpy.types.Object],
                 bones: list[str]) -> None:
        self.world: dict[str, np.ndarray] = {}
        self.bone: dict[str, np.ndarray] = {}
        arm = objects[0]
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
            for name in bones:
                pb = arm.pose.bones[name]
                if _bone_animated(arm, pb):
                    reason = f"bone '{name}' is animated"
                    break
                self.bone[name] = np.repeat(_mat4(pb.matrix)[None], frames.shape[0], axis=0)
        if not reason:
            self.path = "F-curves"
            return
        self.path = f"frame_set ({reason})"
        self._step(context, frames, objects, bones)

    def _step(self, context: bpy.types.Context, frames: np.ndarray, objects: list[bpy.types.Object],
              bones: list[str]) -> None:
        scene = context.scene
        frame0, sub0 = scene.frame_current, scene.frame_subframe
        f_count = frames.shape[0]
        names = list(dict.fromkeys(o.name for o in objects))
        world = {name: np.empty((f_count, 4, 4)) for name in names}
        bone = {name: np.empty((f_count, 4, 4)) for name in bones}
        arm = objects[0]
        try:
            for k, f in enumerate(frames):
                scene.frame_set(int(f))
                dg = context.evaluated_depsgraph_get()
                for name in names:
                    world[name][k] = _mat4(bpy.data.objects[name].evaluated_get(dg).matrix_world)
                if bones:
                    arm_eval = arm.evaluated_get(dg)
                    for name in bones:
                        bone[name][k] = _mat4(arm_eval.pose.bones[name].matrix)
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


def _moved_by_chain(obj: bpy.types.Object, arm: bpy.types.Object, bones: list[bpy.types.PoseBone]) -> str | None:
    """Why ``obj`` moves with the chain's own bones (parented or constrained to them), or None.

    Such a target would chase itself: every solve moves it, so the bake is refused.
    """
    chain = {pb.name for pb in bones}
    moving = {pb.name for pb in arm.pose.bones
              if pb.name in chain or any(p.name in chain for p in pb.parent_recursive)}
    seen = set()
    node: bpy.types.Object | None = obj
    while node is not None and node.name not in seen:
        seen.add(node.name)
        if node.parent is arm and node.parent_type == "BONE" and node.parent_bone in moving:
            return f"'{obj.name}' is parented to the chain's bone '{node.parent_bone}'"
        for con in getattr(node, "constraints", []):
            if getattr(con, "target", None) is arm and getattr(con, "subtarget", "") in moving and not con.mute:
                return f"'{obj.name}' follows the chain's bone '{con.subtarget}' through constraint '{con.name}'"
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


def read_chains(context: bpy.types.Context, arm: bpy.types.Object, frames: np.ndarray
                ) -> tuple[list[ChainInput], str]:
    """Read every enabled chain of ``arm`` over ``frames``.

    Returns
    -------
    chains : list of ChainInput
    path : str
        How per-frame transforms were gathered (``'F-curves'`` or ``'frame_set (...)'``).

    Raises
    ------
    SinewError
        For anything a user must fix (no chain, missing target, chain beyond the root, bad
        expression, ...); the message names the bone.
    """
    tips = enabled_tips(arm)
    if not tips:
        raise SinewError(f"'{arm.name}' has no enabled Sinew IK chain (enable one in the bone's Sinew IK panel)")
    geometry = []
    objects: list[bpy.types.Object] = [arm]
    parent_bones: list[str] = []
    for tip in tips:
        s = tip.sinew_ik
        bones = chain_bones(tip)
        chain, parent = _chain_geometry(bones)
        if s.target_mode in ("OBJECT", "CURVE") and s.target is None:
            raise SinewError(f"chain of '{tip.name}': no target object set")
        if s.target_mode == "OBJECT":
            objects.append(s.target)
        if s.target_mode == "CURVE" and s.target.type != "CURVE":
            raise SinewError(f"chain of '{tip.name}': target '{s.target.name}' is not a curve")
        for role, obj in (("target", s.target if s.target_mode != "EXPRESSION" else None),
                          ("pole target", s.pole_target)):
            why = _moved_by_chain(obj, arm, bones) if obj is not None else None
            if why:
                raise SinewError(f"chain of '{tip.name}': the {role} moves with the chain itself ({why}); "
                                 "use a target that does not depend on the chain's bones")
        if s.pole_target is not None:
            objects.append(s.pole_target)
        if parent is not None:
            parent_bones.append(parent)
        geometry.append((tip, bones, chain, parent))
    sampler = FrameSampler(context, frames, objects, list(dict.fromkeys(parent_bones)))
    arm_world = sampler.world[arm.name]
    det = np.linalg.det(arm_world[:, :3, :3])
    flat = np.flatnonzero(~(np.abs(det) > 1e-12))
    if flat.size:
        raise SinewError(f"'{arm.name}' has zero scale at frame {int(frames[flat[0]])}: its bones cannot reach "
                         "anything; give the armature object a non-zero scale")
    out = []
    f_count = frames.shape[0]
    for tip, bones, chain, parent in geometry:
        s = tip.sinew_ik
        name = f"chain of '{tip.name}'"
        if s.target_mode == "OBJECT":
            targets = _to_armature(arm_world, sampler.world[s.target.name][:, :3, 3])
        elif s.target_mode == "CURVE":
            pts, cyclic = curve_polyline(context, s.target)
            targets = _to_armature(arm_world, resample_polyline(pts, f_count, cyclic=cyclic))
        else:
            try:
                targets = expression_targets(s.expression_x, s.expression_y, s.expression_z, frames)
            except SinewError as exc:
                raise SinewError(f"{name}: {exc}") from None
        poles = None
        if s.pole_target is not None:
            poles = _to_armature(arm_world, sampler.world[s.pole_target.name][:, :3, 3])
        roots = None
        if parent is not None:
            roots = RootTransform.from_matrix(sampler.bone[parent])
        settings = SolveSettings(int(s.max_iterations), float(s.tolerance))
        out.append(ChainInput(
            tip=tip.name, bones=[pb.name for pb in bones], rotation_modes=[pb.rotation_mode for pb in bones],
            chain=chain, solver=s.solver, settings=settings, max_step_angle=float(s.max_step_angle),
            targets=targets, poles=poles, roots=roots, arm_world=arm_world, trace=bool(s.trace)))
    return out, sampler.path
