"""Operators: ``sinew.bake_ik`` (bake every enabled chain) and ``sinew.import_ik_constraint``.

The bake is a :class:`~..bakejob.BakeJob`: everything is read in ``__init__`` (see
``read.py``), each ``step`` advances core's incremental bake by one chunk of frames without
touching the scene, and ``commit`` writes all keys at once. Blender IK constraints on a baked
chain would override the keys on playback, so the bake *mutes* them (reversible, reported as a
warning) rather than deleting them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import bpy
import numpy as np
from bpy.props import IntProperty

from ..bakejob import BakeJob, BakeOperator
from ..core import SinewError
from ..core.ik import group as core_group
from ..core.ik.bake import iter_bake
from .pose import compose, rotation_error, tip_positions
from .read import ChainInput, read_chains
from .write import write_rotation_keys, write_trace

__all__ = ["IKBakeJob", "SINEW_OT_bake_ik", "SINEW_OT_import_ik_constraint", "classes"]


def _bake_groups(inputs: list[ChainInput]) -> list[list[int]]:
    """Chains that share bones, in the order they must be solved.

    Chains sharing a bone (directly or through other chains) form one group, solved jointly.
    A group whose chain roots hang below another group's bones (an arm below a spine chain) is
    solved after it, as Blender's IK solves its trees parent first.
    """
    pending = core_group.bone_groups([ci.bones for ci in inputs])
    ordered: list[list[int]] = []
    done: set[str] = set()
    while pending:
        for g in pending:
            own = {b for i in g for b in inputs[i].bones}
            if all(inputs[i].anchor is None or inputs[i].anchor in own or inputs[i].anchor in done for i in g):
                ordered.append(g)
                done |= own
                pending.remove(g)
                break
        else:  # cannot happen: anchors are ancestors, so the dependencies form a tree
            raise SinewError("the chains' dependencies form a cycle")
    return ordered


class IKBakeJob(BakeJob):
    """Bake every enabled IK chain of an armature over a frame range.

    Chains that share bones are solved jointly (``core.ik.group``); the others one by one,
    parents first. Tip errors are measured on the pose as Blender composes it from the rotations
    that will be written (:mod:`.pose`), not taken from the solver.

    Parameters
    ----------
    context : bpy.types.Context
    arm : bpy.types.Object
        The armature.
    frame_start, frame_end : int
        Inclusive range, ``frame_end >= frame_start``.
    keep_pose : bool
        Keep every baked bone's armature-space matrices as Blender will compose them,
        ``composed`` (bone -> (F, 4, 4)), for a bake that builds on this one (spring bones).
    """

    def __init__(self, context: bpy.types.Context, arm: bpy.types.Object, frame_start: int, frame_end: int,
                 keep_pose: bool = False) -> None:
        super().__init__()
        if frame_end < frame_start:
            raise SinewError(f"frame_end ({frame_end}) is before frame_start ({frame_start})")
        self.started = time.perf_counter()
        self.arm_name = self.object_name = arm.name
        self.label = f"IK {arm.name}"
        self.frames = np.arange(int(frame_start), int(frame_end) + 1)
        self.inputs: list[ChainInput]
        self.inputs, self.read_path = read_chains(context, arm, self.frames)
        self.groups = _bake_groups(self.inputs)
        self.depth = {b: len(arm.pose.bones[b].parent_recursive) for ci in self.inputs for b in ci.bones}
        self.total = len(self.frames) * len(self.groups)
        self.rotations: dict[str, np.ndarray] = {}   # bone -> (F, 4), as solved
        self.posed: dict[str, np.ndarray] = {}       # anchor bone -> (F, 4, 4), armature space, as Blender composes
        self.anchors = {ci.anchor for ci in self.inputs if ci.anchor is not None}
        self.keep_pose = keep_pose
        self.composed: dict[str, np.ndarray] = {}    # bone -> (F, 4, 4) of every baked bone, with keep_pose
        self.chain_stats: dict[int, dict] = {}
        self._finished = 0
        self._gen: Iterator | None = None

    # -- solving ---------------------------------------------------------------------------
    def _roots(self, ci: ChainInput, own: set[str]) -> np.ndarray | None:
        if ci.anchor is not None and ci.anchor not in own:
            return self.posed[ci.anchor] @ ci.anchor_offset
        return ci.roots

    def _start(self, group: list[int]) -> Iterator:
        own = {b for i in group for b in self.inputs[i].bones}
        if len(group) == 1:
            ci = self.inputs[group[0]]
            return iter_bake(ci.chain, ci.targets, ci.solver, ci.settings, max_step_angle=ci.max_step_angle,
                             poles=ci.poles, pole_angle=ci.pole_angle, orientations=ci.orientations,
                             rotation_weight=ci.rotation_weight, roots=self._roots(ci, own), chunk=32)
        members = []
        for i in group:
            ci = self.inputs[i]
            if ci.poles is not None:
                self.warnings.append(f"chain of '{ci.tip}': its pole is not used, because it shares bones with "
                                     "other chains and they are solved together (as Blender's IK does)")
            members.append(core_group.GroupMember(
                chain=ci.chain, bones=tuple(ci.bones), parent=ci.parent, targets=ci.targets, solver=ci.solver,
                settings=ci.settings, max_step_angle=ci.max_step_angle, poles=ci.poles, pole_angle=ci.pole_angle,
                orientations=ci.orientations, rotation_weight=ci.rotation_weight, roots=self._roots(ci, own)))
        return core_group.iter_bake_group(members, chunk=32)

    def _solved(self, group: list[int], result) -> None:
        """Keep a group's rotations, compose its pose as Blender will, and measure every tip on it."""
        if len(group) == 1:
            ci = self.inputs[group[0]]
            rotations = {b: result.rotations[:, k] for k, b in enumerate(ci.bones)}
            per_member = [result]
        else:
            rotations = dict(result.rotations)
            per_member = list(result.members)
        own = {b for i in group for b in self.inputs[i].bones}
        parents: dict[str, str | None] = {}
        outside: dict[str, np.ndarray] = {}
        rest: dict[str, np.ndarray] = {}
        for i in group:
            ci = self.inputs[i]
            for k, b in enumerate(ci.bones):
                parents[b] = ci.bones[k - 1] if k else ci.parent
                rest[b] = ci.rest[b]
            roots = self._roots(ci, own)
            if ci.parent is not None and ci.parent not in own and roots is not None:
                outside[ci.parent] = roots
        order = sorted(own, key=lambda b: self.depth[b])
        mats = compose(order, rest, parents, rotations, outside, len(self.frames))
        self.posed.update((b, m) for b, m in mats.items() if b in self.anchors)
        if self.keep_pose:
            self.composed.update(mats)
        self.rotations.update(rotations)
        for i, res in zip(group, per_member):
            ci = self.inputs[i]
            tips = tip_positions(mats[ci.tip], float(ci.chain.lengths[-1]))
            # In world space, where the user measures (the armature object may be scaled).
            errors = np.linalg.norm(np.einsum("fij,fj->fi", ci.arm_world[:, :3, :3], tips - ci.targets), axis=1)
            rot_err = None
            if ci.orientations is not None:
                rot_err = rotation_error(mats[ci.tip], ci.orientations)
            self.chain_stats[i] = {"iterations": np.asarray(res.iterations), "errors": errors, "tips": tips,
                                   "rotation_errors": rot_err, "converged": np.asarray(res.converged, dtype=bool)}

    def step(self) -> bool:
        if self._finished >= len(self.groups):
            return True
        group = self.groups[self._finished]
        if self._gen is None:
            self._gen = self._start(group)
        progress = next(self._gen)
        f_count = len(self.frames)
        self.done = self._finished * f_count + int(f_count * progress.done / max(progress.total, 1))
        if progress.result is not None:
            self._gen.close()
            self._gen = None
            self._solved(group, progress.result)
            self._finished += 1
        return self._finished >= len(self.groups)

    def cancel(self) -> None:
        if self._gen is not None:
            self._gen.close()
            self._gen = None
        self.rotations, self.posed, self.chain_stats, self.composed = {}, {}, {}, {}
        self._finished = 0
        self.warnings = []

    # -- writing ---------------------------------------------------------------------------
    def _mute_drivers(self, arm: bpy.types.Object, con: bpy.types.Constraint) -> None:
        """Mute drivers that would switch a muted IK constraint back on (Rigify's IK/pole switches)."""
        ad = arm.animation_data
        if ad is None:
            return
        prefix = con.path_from_id()
        for fc in ad.drivers:
            if fc.data_path in (f"{prefix}.mute", f"{prefix}.influence", f"{prefix}.enabled") and not fc.mute:
                fc.mute = True
                self.warnings.append(f"muted the driver of {fc.data_path}: it would switch the IK constraint "
                                     "back on over the baked keys")

    def commit(self, context: bpy.types.Context) -> str:
        arm = bpy.data.objects.get(self.arm_name)
        if arm is None or self._finished != len(self.groups):
            raise SinewError("the armature changed during the bake; nothing was written")
        elapsed = time.perf_counter() - self.started
        modes = {b: m for ci in self.inputs for b, m in zip(ci.bones, ci.rotation_modes)}
        names = sorted(self.rotations, key=lambda b: self.depth[b])
        write_rotation_keys(arm, names, [modes[b] for b in names], self.frames,
                            np.stack([self.rotations[b] for b in names], axis=1))
        worst_rot = 0.0
        for i, ci in enumerate(self.inputs):
            st = self.chain_stats[i]
            s = arm.pose.bones[ci.tip].sinew_ik
            s.last_frames = len(self.frames)
            s.last_iterations_mean = float(st["iterations"].mean())
            s.last_iterations_max = int(st["iterations"].max())
            s.last_error_max = float(st["errors"].max())
            s.last_time = elapsed
            if st["rotation_errors"] is not None:
                worst_rot = max(worst_rot, float(st["rotation_errors"].max()))
            missed = int((~st["converged"]).sum())
            if missed:
                self.warnings.append(f"chain of '{ci.tip}': not converged on {missed} of {len(self.frames)} frames "
                                     f"(largest tip error {st['errors'].max():.2e} m)")
            for name in ci.bones:
                for con in arm.pose.bones[name].constraints:
                    if con.type == "IK" and not con.mute:
                        con.mute = True
                        self.warnings.append(f"muted IK constraint '{con.name}' on '{name}': it would "
                                             "override the baked keys")
                    if con.type == "IK":
                        self._mute_drivers(arm, con)
            if ci.trace:
                world = np.einsum("fij,fj->fi", ci.arm_world[:, :3, :3], st["tips"]) + ci.arm_world[:, :3, 3]
                write_trace(context, f"{arm.name}_{ci.tip}_trace", world)
        arm.update_tag()
        context.view_layer.update()
        iters = np.concatenate([st["iterations"] for st in self.chain_stats.values()])
        errors = np.concatenate([st["errors"] for st in self.chain_stats.values()])
        joint = sum(1 for g in self.groups if len(g) > 1)
        shared = f" ({joint} group(s) of chains sharing bones solved jointly)" if joint else ""
        rot = f", max tip rotation error {np.degrees(worst_rot):.2f} deg" if worst_rot else ""
        return (f"{len(self.inputs)} chain(s){shared}, {len(self.frames)} frames, iterations mean "
                f"{iters.mean():.1f} max {int(iters.max())}, max tip error {errors.max():.2e} m{rot} "
                f"(targets via {self.read_path})")


class SINEW_OT_bake_ik(BakeOperator, bpy.types.Operator):
    """Bake every enabled Sinew IK chain of the active armature to rotation keys"""

    bl_idname = "sinew.bake_ik"
    bl_label = "Bake IK"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(  # type: ignore[valid-type]
        name="Start", default=1, description="First frame to bake (the scene's start when not set)")
    frame_end: IntProperty(  # type: ignore[valid-type]
        name="End", default=250, description="Last frame to bake (the scene's end when not set)")

    def make_job(self, context: bpy.types.Context) -> IKBakeJob:
        arm = context.active_object
        if arm is None or arm.type != "ARMATURE":
            raise SinewError("Bake IK: the active object must be an armature")
        if arm.mode == "EDIT":
            raise SinewError("Bake IK: leave Edit Mode first")
        scene = context.scene
        props = self.properties
        start = self.frame_start if props.is_property_set("frame_start") else scene.frame_start
        end = self.frame_end if props.is_property_set("frame_end") else scene.frame_end
        self.frame_start, self.frame_end = start, end
        return IKBakeJob(context, arm, start, end)


class SINEW_OT_import_ik_constraint(bpy.types.Operator):
    """Fill Sinew IK from this bone's IK constraint (target and pole bones, pole angle, tail, rotation) and enable it"""

    bl_idname = "sinew.import_ik_constraint"
    bl_label = "Import IK Constraint"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return getattr(context, "active_pose_bone", None) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        pb = context.active_pose_bone
        # The active one first: Rigify's limbs carry two IK constraints (without and with a
        # pole) and a driver mutes one of them.
        iks = [c for c in pb.constraints if c.type == "IK"]
        con = next((c for c in iks if not c.mute and c.influence > 0.0), iks[0] if iks else None)
        if con is None:
            self.report({"ERROR"}, f"bone '{pb.name}' has no IK constraint")
            return {"CANCELLED"}
        if con.target is None:
            self.report({"ERROR"}, f"IK constraint '{con.name}' has no target (Auto IK is not baked by Sinew)")
            return {"CANCELLED"}
        # Use Tail off: Blender's chain ends at this bone's head, i.e. its parent is the tip
        # and the chain length counts from there (Blender's initialize_posetree).
        tip = pb if con.use_tail else pb.parent
        if tip is None:
            self.report({"ERROR"}, f"IK constraint '{con.name}' excludes its own bone (Use Tail off) and "
                        f"'{pb.name}' has no parent: there is no chain")
            return {"CANCELLED"}
        s = tip.sinew_ik
        s.target_mode = "OBJECT"
        s.target = con.target
        s.target_bone = con.subtarget if con.target.type == "ARMATURE" else ""
        s.chain_length = con.chain_count
        s.max_iterations = max(1, con.iterations)
        s.pole_target = con.pole_target
        s.pole_bone = con.pole_subtarget if con.pole_target is not None and con.pole_target.type == "ARMATURE" else ""
        s.pole_angle = con.pole_angle
        s.use_rotation = con.use_rotation
        # Blender weighs the position goal by `weight` and the orientation goal by
        # `orient_weight`; Sinew keeps position at full weight, so the ratio carries across.
        ratio = con.orient_weight / max(con.weight, 1e-6)
        s.rotation_weight = min(1.0, ratio)
        s.enabled = True
        if tip is not pb:
            self.report({"INFO"}, f"'{con.name}' ends at the head of '{pb.name}' (Use Tail off): the Sinew chain "
                        f"is set on its parent '{tip.name}'")
        chain = [tip, *tip.parent_recursive][:con.chain_count or None]
        if con.use_stretch and any(b.ik_stretch > 0.0 for b in chain):
            self.report({"INFO"}, f"'{con.name}' lets Blender stretch the chain (IK Stretch): Sinew keeps bone "
                        "lengths, so its poses differ where Blender would stretch")
        if con.use_rotation and ratio > 1.0:
            self.report({"INFO"}, f"orientation weight {con.orient_weight:.2f} over position weight "
                        f"{con.weight:.2f} is more than 1: Rotation Weight set to 1")
        for role, obj, sub in (("target", con.target, con.subtarget), ("pole target", con.pole_target,
                                                                        con.pole_subtarget)):
            if obj is not None and obj.type == "ARMATURE" and not sub:
                self.report({"WARNING"}, f"the constraint's {role} is the armature '{obj.name}' without a bone "
                            "(Blender's IK ignores such a target): pick a bone before baking")
        self.report({"INFO"}, f"'{tip.name}': Sinew IK enabled from constraint '{con.name}'")
        return {"FINISHED"}


classes = (SINEW_OT_bake_ik, SINEW_OT_import_ik_constraint)
