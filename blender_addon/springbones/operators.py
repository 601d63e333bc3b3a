"""``sinew.bake_spring_bones``: bake every enabled spring chain of the active armature.

A :class:`~..bakejob.BakeJob`: ``__init__`` solves the armature's Sinew IK chains first (an
:class:`..ik.operators.IKBakeJob` that is not committed: spring chains on or below their bones
ride on the solution), reads the scene (:mod:`.read`), each ``step``
simulates one frame of every chain (:class:`core.springbones.SpringBake`) without touching the
scene, and ``commit`` writes rotation keys the way ``sinew.bake_ik`` does
(:func:`..ik.write.write_rotation_keys`: each bone's rotation mode, sign-continuous
quaternions, other channels and keys outside the range kept).
"""

from __future__ import annotations

import time

import bpy
import numpy as np
from bpy.props import IntProperty

from ..bakejob import BakeJob, BakeOperator
from ..core import SinewError
from ..deps import scipy_problem
from ..ik.operators import IKBakeJob
from ..ik.read import chain_bones, enabled_tips
from ..ik.write import write_rotation_keys
from .read import SpringInput, check_springs, pre_roll_frames, read_springs

__all__ = ["SpringBonesBakeJob", "SINEW_OT_bake_spring_bones", "classes"]


class SpringBonesBakeJob(BakeJob):
    """Bake the spring chains of an armature over ``frame_start .. frame_end`` (inclusive)."""

    def __init__(self, context: bpy.types.Context, arm: bpy.types.Object, frame_start: int, frame_end: int) -> None:
        super().__init__()
        from ..core.springbones import SpringBake, SpringChain
        from ..core.springs import TriangleMesh

        if frame_end < frame_start:
            raise SinewError(f"frame_end ({frame_end}) is before frame_start ({frame_start})")
        self.started = time.perf_counter()
        self.arm_name = self.object_name = arm.name
        self.label = f"Spring bones {arm.name}"
        chains, _settings = check_springs(arm)  # the spring chains' own problems first
        solved = None
        self.ik_chains = 0
        riding = _riding_on_ik(arm, chains)
        if riding:
            # Sinew IK chains are solved first (their keys are not written here: bake_ik does
            # that, before or after); spring chains below their bones ride on the solution
            try:
                ik = IKBakeJob(context, arm, frame_start - pre_roll_frames(arm), frame_end, keep_pose=True)
                while not ik.step():
                    pass
            except SinewError as exc:
                raise SinewError(f"spring chain of '{riding}' hangs below a Sinew IK chain, solved first: {exc}"
                                 ) from None
            solved = ik.composed
            self.ik_chains = len(ik.inputs)
        self.data: SpringInput = read_springs(context, arm, frame_start, frame_end, solved)
        self.warnings.extend(self.data.notes)
        chains = [SpringChain(ci.chain, ci.rotations, ci.root_rotation, ci.root_position, ci.settings,
                              name=ci.tip, colliders=ci.colliders) for ci in self.data.chains]
        raw = self.data.colliders
        meshes: list[list[TriangleMesh]] = []
        for k, frame in enumerate(raw):
            row = []
            for j, (v, t, _thickness, friction) in enumerate(frame):
                previous = raw[k - 1][j][0] if k else None
                if k and meshes[k - 1][j] is not None:
                    row.append(meshes[k - 1][j].moved_to(v, previous))
                else:
                    row.append(TriangleMesh(v, t, 0.0, friction, previous))
            meshes.append(row)
        self.bake = SpringBake(chains, fps=self.data.fps, gravity=self.data.gravity, frames=self.data.written,
                               colliders=lambda f: meshes[f])
        self.total = max(self.bake.total, 1)
        self.results: list | None = None

    def step(self) -> bool:
        finished = self.bake.step()
        self.done = self.bake.done
        if finished and self.results is None:
            self.results = self.bake.results()
        return finished

    def cancel(self) -> None:
        self.results = None
        self.warnings = []

    def commit(self, context: bpy.types.Context) -> str:
        arm = bpy.data.objects.get(self.arm_name)
        if arm is None or arm.type != "ARMATURE" or self.results is None:
            raise SinewError("the armature changed during the bake; nothing was written")
        missing = [b for ci in self.data.chains for b in ci.bones if arm.pose.bones.get(b) is None]
        if missing:
            raise SinewError(f"bone '{missing[0]}' is gone; nothing was written")
        frames = self.data.frames[-self.data.written:]
        names = [b for ci in self.data.chains for b in ci.bones]
        modes = [m for ci in self.data.chains for m in ci.rotation_modes]
        rotations = np.concatenate([r.rotations for r in self.results], axis=1)
        write_rotation_keys(arm, names, modes, frames, rotations)
        for ci, r in zip(self.data.chains, self.results):
            s = arm.pose.bones[ci.tip].sinew_spring
            s.last_frames = len(frames)
            s.last_length_error = r.length_error
            s.last_penetration = r.penetration
        arm.update_tag()
        context.view_layer.update()
        length = max(r.length_error for r in self.results)
        depth = max(r.penetration for r in self.results)
        fps = self.data.fps
        speed = max(_angular_speed(r.rotations, fps) for r in self.results)
        bones = len(names)
        on_ik = f", on {self.ik_chains} Sinew IK chain(s) solved first" if self.ik_chains else ""
        return (f"{len(self.results)} spring chain(s), {bones} bones, {len(frames)} frames, max length error "
                f"{100 * length:.3f} %, max penetration {depth:.2e} m, max angular speed {np.degrees(speed):.0f} deg/s"
                f"{on_ik}")


def _riding_on_ik(arm: bpy.types.Object, chains: list) -> str:
    """The tip of the first spring chain that hangs below a bone of an enabled Sinew IK chain, or ''."""
    ik_bones: set[str] = set()
    for tip in enabled_tips(arm):
        try:
            ik_bones.update(pb.name for pb in chain_bones(tip))
        except SinewError:
            ik_bones.add(tip.name)  # the IK bake names its problem when it runs
    for tip, bones in chains:
        if any(p.name in ik_bones for p in bones[0].parent_recursive):
            return tip.name
    return ""


def _angular_speed(rotations: np.ndarray, fps: float) -> float:
    """Largest rotation speed of a bone's local rotation between frames, rad/s (rotations (F, n, 4))."""
    if len(rotations) < 2:
        return 0.0
    d = np.abs(np.einsum("fni,fni->fn", rotations[1:], rotations[:-1]))
    return float(2.0 * np.arccos(np.clip(d, -1.0, 1.0)).max() * fps)


class SINEW_OT_bake_spring_bones(BakeOperator, bpy.types.Operator):
    """Bake every enabled spring chain of the active armature to rotation keys, on top of its animation"""

    bl_idname = "sinew.bake_spring_bones"
    bl_label = "Bake Spring Bones"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(  # type: ignore[valid-type]
        name="Start", default=1, description="First frame to bake (the scene's start when not set)")
    frame_end: IntProperty(  # type: ignore[valid-type]
        name="End", default=250, description="Last frame to bake (the scene's end when not set)")

    def make_job(self, context: bpy.types.Context) -> SpringBonesBakeJob:
        arm = context.active_object
        if arm is None or arm.type != "ARMATURE":
            raise SinewError("Bake Spring Bones: the active object must be an armature")
        if arm.mode == "EDIT":
            raise SinewError("Bake Spring Bones: leave Edit Mode first")
        problem = scipy_problem()
        if problem:
            raise SinewError(problem)
        scene = context.scene
        props = self.properties
        start = self.frame_start if props.is_property_set("frame_start") else scene.frame_start
        end = self.frame_end if props.is_property_set("frame_end") else scene.frame_end
        self.frame_start, self.frame_end = start, end
        return SpringBonesBakeJob(context, arm, start, end)


classes = (SINEW_OT_bake_spring_bones,)
