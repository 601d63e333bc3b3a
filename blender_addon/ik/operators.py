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
from ..core.ik import forward_kinematics_batch
from ..core.ik.bake import BakeProgress, iter_bake
from .read import ChainInput, read_chains
from .write import write_rotation_keys, write_trace

__all__ = ["IKBakeJob", "SINEW_OT_bake_ik", "SINEW_OT_import_ik_constraint", "classes"]


class IKBakeJob(BakeJob):
    """Bake every enabled IK chain of an armature over a frame range.

    Parameters
    ----------
    context : bpy.types.Context
    arm : bpy.types.Object
        The armature.
    frame_start, frame_end : int
        Inclusive range, ``frame_end >= frame_start``.
    """

    def __init__(self, context: bpy.types.Context, arm: bpy.types.Object, frame_start: int, frame_end: int) -> None:
        super().__init__()
        if frame_end < frame_start:
            raise SinewError(f"frame_end ({frame_end}) is before frame_start ({frame_start})")
        self.started = time.perf_counter()
        self.arm_name = arm.name
        self.label = f"IK {arm.name}"
        self.frames = np.arange(int(frame_start), int(frame_end) + 1)
        self.inputs: list[ChainInput]
        self.inputs, self.read_path = read_chains(context, arm, self.frames)
        self.total = len(self.frames) * len(self.inputs)
        self.results: list = []
        self._gen: Iterator[BakeProgress] | None = None
        self.warnings: list[str] = []

    def step(self) -> bool:
        if len(self.results) >= len(self.inputs):
            return True
        if self._gen is None:
            ci = self.inputs[len(self.results)]
            self._gen = iter_bake(ci.chain, ci.targets, ci.solver, ci.settings, max_step_angle=ci.max_step_angle,
                                  poles=ci.poles, roots=ci.roots, chunk=32)
        progress = next(self._gen)
        self.done = len(self.results) * len(self.frames) + progress.done
        if progress.result is not None:
            self._gen.close()
            self._gen = None
            self.results.append(progress.result)
        return len(self.results) >= len(self.inputs)

    def cancel(self) -> None:
        if self._gen is not None:
            self._gen.close()
            self._gen = None
        self.results = []

    def commit(self, context: bpy.types.Context) -> str:
        arm = bpy.data.objects.get(self.arm_name)
        if arm is None or len(self.results) != len(self.inputs):
            raise SinewError("the armature changed during the bake; nothing was written")
        elapsed = time.perf_counter() - self.started
        iters = np.concatenate([r.iterations for r in self.results])
        errors = np.concatenate([r.errors for r in self.results])
        for ci, res in zip(self.inputs, self.results):
            write_rotation_keys(arm, ci.bones, ci.rotation_modes, self.frames, res.rotations)
            pb = arm.pose.bones[ci.tip]
            s = pb.sinew_ik
            s.last_frames = len(self.frames)
            s.last_iterations_mean = float(res.iterations.mean())
            s.last_iterations_max = int(res.iterations.max())
            s.last_error_max = float(res.errors.max())
            s.last_time = elapsed
            for name in ci.bones:
                for con in arm.pose.bones[name].constraints:
                    if con.type == "IK" and not con.mute:
                        con.mute = True
                        self.warnings.append(f"muted IK constraint '{con.name}' on '{name}': it would "
                                             "override the baked keys")
            if ci.trace:
                tips = forward_kinematics_batch(ci.chain, res.rotations, ci.roots)[:, -1]
                world = np.einsum("fij,fj->fi", ci.arm_world[:, :3, :3], tips) + ci.arm_world[:, :3, 3]
                write_trace(context, f"{arm.name}_{ci.tip}_trace", world)
        arm.update_tag()
        context.view_layer.update()
        return (f"{len(self.inputs)} chain(s), {len(self.frames)} frames, iterations mean {iters.mean():.1f} "
                f"max {int(iters.max())}, max tip error {errors.max():.2e} m (targets via {self.read_path})")


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

    def _finish(self, context: bpy.types.Context, job: BakeJob) -> set[str]:
        result = super()._finish(context, job)
        for text in getattr(job, "warnings", []):
            self.report({"WARNING"}, text)
            print(f"Sinew: {job.label}: warning: {text}", flush=True)
        return result


class SINEW_OT_import_ik_constraint(bpy.types.Operator):
    """Fill this bone's Sinew IK settings from its Blender IK constraint (target, chain length, pole, iterations) and enable it"""

    bl_idname = "sinew.import_ik_constraint"
    bl_label = "Import IK Constraint"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return getattr(context, "active_pose_bone", None) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        pb = context.active_pose_bone
        con = next((c for c in pb.constraints if c.type == "IK"), None)
        if con is None:
            self.report({"ERROR"}, f"bone '{pb.name}' has no IK constraint")
            return {"CANCELLED"}
        s = pb.sinew_ik
        s.target_mode = "OBJECT"
        s.target = con.target
        s.chain_length = con.chain_count
        s.max_iterations = max(1, con.iterations)
        s.pole_target = con.pole_target
        s.enabled = True
        # Sinew targets are objects: a bone subtarget is followed through its armature object's
        # origin, which is only right if that is where the bone sits. Say so.
        for what, sub in (("target", con.subtarget), ("pole target", getattr(con, "pole_subtarget", ""))):
            if sub:
                self.report({"WARNING"}, f"the constraint's {what} is bone '{sub}': Sinew follows objects, so it "
                            "now follows the armature object's origin; use an empty parented to that bone instead")
        self.report({"INFO"}, f"'{pb.name}': Sinew IK enabled from constraint '{con.name}'")
        return {"FINISHED"}


classes = (SINEW_OT_bake_ik, SINEW_OT_import_ik_constraint)
