"""``sinew.bake_springs`` and ``sinew.free_bake``.

The bake is one translation step: :mod:`.read` copies the deformed input, pins and
colliders of every frame into numpy, ``core.springs`` simulates in world space, and
:mod:`.write` stores object-space positions. The job touches the scene only in
``commit``; a failed or cancelled bake leaves the object as it was.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any

import bpy
import numpy as np
from bpy.props import IntProperty

from .. import deps
from ..bakejob import BakeJob, BakeOperator
from ..core.errors import SinewError
from . import budget, fields, read, write


@dataclass(frozen=True)
class SpringSettings:
    """The plain settings of one bake, copied from ``object.sinew_springs``."""

    solver: str
    vertex_mass: float
    stiffness: float
    shear_stiffness: float
    bending_stiffness: float
    damping: float
    air_drag: float
    pin_group: str
    substeps: int
    iterations: int
    output: str
    mass_mode: str = "VERTEX"
    density: float = 0.15
    stiffness_mode: str = "SPRING"
    max_stretch: float = 0.0
    pin_stiffness: float = 0.0
    pre_roll: int = 0
    self_collision: bool = False
    self_distance: float = 0.015
    tolerance: float = 0.01

    @classmethod
    def from_props(cls, props: Any) -> SpringSettings:
        return cls(props.solver, float(props.vertex_mass), float(props.stiffness),
                   float(props.shear_stiffness), float(props.bending_stiffness),
                   float(props.damping), float(props.air_drag), props.pin_group,
                   int(props.substeps), int(props.iterations), props.output,
                   mass_mode=props.mass_mode, density=float(props.density),
                   stiffness_mode=props.stiffness_mode, max_stretch=float(props.max_stretch),
                   pin_stiffness=float(props.pin_stiffness), pre_roll=int(props.pre_roll),
                   self_collision=bool(props.self_collision),
                   self_distance=float(props.self_distance), tolerance=float(props.tolerance))

    def mass_arguments(self) -> dict[str, float]:
        """``build_model``'s mass keyword for the mass mode."""
        if self.mass_mode == "DENSITY":
            return {"density": self.density}
        return {"vertex_mass": self.vertex_mass}


def scene_fps(scene: bpy.types.Scene) -> float:
    """Frames per second of ``scene`` (``fps / fps_base``)."""
    return scene.render.fps / scene.render.fps_base


def scene_gravity(scene: bpy.types.Scene) -> np.ndarray:
    """The scene's gravity ``(3,)`` m/s², zero when ``use_gravity`` is off."""
    return np.array(scene.gravity, dtype=np.float64) if scene.use_gravity else np.zeros(3)


def check_object(obj: Any) -> None:
    """Raise :class:`SinewError` unless ``obj`` is a mesh object that can be baked."""
    if obj is None or obj.type != "MESH":
        raise SinewError("select a mesh object to bake springs")
    if obj.mode != "OBJECT":
        raise SinewError(f"{obj.name}: switch to Object Mode before baking")


class SpringBakeJob(BakeJob):
    """Reads every frame up front, simulates one frame per :meth:`step`, writes in :meth:`commit`."""

    def __init__(self, context: bpy.types.Context, obj: bpy.types.Object, frame_start: int,
                 frame_end: int) -> None:
        super().__init__()
        problem = deps.scipy_problem()
        if problem:
            raise SinewError(problem)
        from ..core.springs import SelfCollision, Simulator, TriangleMesh, build_model, build_springs
        from ..core.springs.shapes import triangulate

        check_object(obj)
        if frame_end < frame_start:
            raise SinewError(f"frame_end ({frame_end}) is before frame_start ({frame_start})")
        self.memory_estimate = budget.check(obj.name, len(obj.data.vertices), frame_end - frame_start + 1,
                                            obj.sinew_springs.solver,
                                            pinned=bool(obj.sinew_springs.pin_group))
        self.label = f"Springs {obj.name}"
        self.obj = obj
        self.settings = s = SpringSettings.from_props(obj.sinew_springs)
        if s.pin_group and obj.vertex_groups.get(s.pin_group) is None:
            raise SinewError(f"{obj.name}: the pin group '{s.pin_group}' does not exist; pick one of "
                             f"the object's vertex groups or clear the field")
        if s.output == "CACHE":
            write.check_cache_writable(obj)  # unsaved .blend, path outside its folder, read-only
        scene = context.scene
        self.started = started = time.perf_counter()
        # force fields (fields.py): which ones act, read per frame with the mesh
        props = obj.sinew_springs
        field_weight = float(props.field_weight)
        field_objs, self.fields_skipped = (
            fields.scene_fields(context.view_layer, obj)
            if props.use_force_fields and field_weight != 0.0 else ([], []))
        self.fields_used = [ob.name for ob in field_objs]
        source = (lambda dg: fields.read_fields(field_objs, dg)) if field_objs else None
        with write.unbaked_view(obj):
            self.input = inp = read.read_input(scene, obj, frame_start, frame_end, s.pin_group,
                                               obj.sinew_springs.collision_collection,
                                               field_source=source)
        topo = inp.topology
        springs = build_springs(topo.vertex_count, topo.edges, topo.loop_starts, topo.loop_totals,
                                topo.loop_vertices, shear=s.shear_stiffness > 0,
                                bending=s.bending_stiffness > 0)
        triangles = triangulate(topo)
        self.model = build_model(inp.world[0], springs, stiffness=s.stiffness,
                                 shear_stiffness=s.shear_stiffness,
                                 bending_stiffness=s.bending_stiffness, damping=s.damping,
                                 pinned=inp.pin_weights, air_drag=s.air_drag,
                                 gravity=scene_gravity(scene), triangles=triangles,
                                 stiffness_mode=s.stiffness_mode, pin_stiffness=s.pin_stiffness,
                                 max_stretch=s.max_stretch, **s.mass_arguments())
        self_col = None
        if s.self_collision and len(topo.loop_totals):
            # neighbours are decided on the first frame's shape (world space)
            self_col = SelfCollision.build(inp.world[0], triangles, s.self_distance)
        self.sim = Simulator(self.model, s.solver, fps=scene_fps(scene), substeps=s.substeps,
                             iterations=s.iterations, frame_start=frame_start,
                             self_collision=self_col, triangles=triangles, tolerance=s.tolerance)
        self._colliders = collider_frames(TriangleMesh, inp.colliders)
        self._field_forces: Any = None
        if field_objs:
            from ..core.springs import FieldForces
            self._field_forces = FieldForces(fields.read_triangles(obj.data), self.model.masses,
                                             fps=scene_fps(scene), weight=field_weight)
        self.positions: np.ndarray | None = np.empty_like(inp.world)
        self.positions[0] = self.sim.state.x
        self.iterations = 0
        self.max_strain = 0.0
        self.contacts = 0
        self.max_penetration = 0.0
        self.unconverged = 0
        self.diagnostics: list[Any] = []  # the written frames' FrameDiagnostics
        self.max_residual = 0.0
        self.self_contacts = 0
        self.self_crossings = 0
        self.read_time = time.perf_counter() - started
        self.pre_roll = s.pre_roll
        self.total = s.pre_roll + len(inp.frames) - 1
        self.done = 0

    def step(self) -> bool:
        if self.done >= self.total:
            return True
        assert self.positions is not None, "step() after cancel()"
        if self.done < self.pre_roll:
            # pre-roll: pins, colliders and force fields held as at frame_start; not written
            ahead = self.pre_roll - self.done
            self.sim.pre_roll(1, self._colliders[0],
                              self._external(0, 0, int(self.input.frames[0]) - ahead))
            self.done += 1
            self.positions[0] = self.sim.state.x
            return self.done >= self.total
        i = self.done - self.pre_roll + 1
        pins = self.input.world[i][self.model.target_index]
        ext = self._external(i - 1, i, int(self.input.frames[i - 1]))
        diag = self.sim.advance(pins, self._colliders[i], external=ext)
        self.positions[i] = self.sim.state.x
        self.iterations += diag.iterations
        self.max_strain = max(self.max_strain, float(diag.max_strain))
        self.contacts += int(diag.contacts)
        self.max_penetration = max(self.max_penetration, float(diag.max_penetration))
        self.unconverged += 0 if diag.converged else 1
        self.diagnostics.append(replace(diag, frame=int(self.input.frames[i])))
        if np.isfinite(diag.max_residual):
            self.max_residual = max(self.max_residual, float(diag.max_residual))
        self.self_contacts += diag.self_contacts
        self.self_crossings = max(self.self_crossings, diag.self_crossings)
        self.done += 1
        return self.done >= self.total

    def _external(self, a: int, b: int, frame: int) -> Any:
        """The force fields' ``external`` callable for the step from input frame ``a`` to ``b``."""
        if self._field_forces is None:
            return None
        return self._field_forces.for_frame(self.input.fields[a], self.input.fields[b], frame)

    def cancel(self) -> None:
        self.positions = None

    def local_positions(self) -> np.ndarray:
        """The simulated positions in object space per frame, ``(F, n, 3)``."""
        return read.to_local(self.input.matrices, self.positions)

    def commit(self, context: bpy.types.Context) -> str:
        obj, props = self.obj, self.obj.sinew_springs
        frames = self.input.frames
        local = self.local_positions()
        if props.baked:
            free_bake(obj)
        record = write.write(obj, self.settings.output, frames, local)
        props.bake_record = json.dumps(record)
        props.baked = True
        props.bake_output = self.settings.output
        props.bake_frame_start = int(frames[0])
        props.bake_frame_end = int(frames[-1])
        written = max(len(frames) - 1, 1)
        props.bake_iterations = self.iterations / written
        props.bake_max_strain = self.max_strain
        props.bake_contacts = self.contacts
        props.bake_max_penetration = self.max_penetration
        contact = ""
        if self._colliders and any(self._colliders):
            contact = (f", {self.contacts} collider contacts, max penetration "
                       f"{1000.0 * self.max_penetration:.1f} mm")
        props.bake_unconverged = self.unconverged
        props.bake_max_residual = self.max_residual
        props.bake_time = time.perf_counter() - self.started
        if self.unconverged:
            from ..core.springs.simulate import unconverged_summary

            conv = unconverged_summary(self.diagnostics, self.settings.tolerance,
                                       self.settings.iterations)
        else:
            conv = "converged" + (f" (residual up to {self.max_residual:.3g} N)"
                                  if self.max_residual else "")
        pre = f", {self.pre_roll} pre-roll frames" if self.pre_roll else ""
        if self.sim.substeps > self.sim.requested_substeps:
            pre += (f", {self.sim.substeps} substeps per frame ({self.sim.integrator.name}'s "
                    f"stability limit; {self.sim.requested_substeps} asked)")
        self_col = ""
        if self.sim.self_collision is not None:
            self_col = (f", {self.self_contacts / written:.0f} self-contacts per frame, "
                        f"{self.self_crossings} crossing triangle pairs")
        field_note = (f", force fields: {', '.join(self.fields_used)}" if self.fields_used else "")
        if self.fields_skipped:
            field_note += f"; force fields not supported, skipped: {', '.join(self.fields_skipped)}"
        return (f"{obj.name}: {len(frames)} frames{pre}, {props.bake_iterations:.1f} iterations "
                f"per frame, max strain {100.0 * self.max_strain:.2f}%{contact}{self_col}, {conv}{field_note}")


def collider_frames(mesh_cls: type, frames: list) -> list[list]:
    """Per frame, ``mesh_cls`` colliders (``core.springs.TriangleMesh``) from the
    :func:`.read.read_colliders` tuples; a collider with the same vertices as on the
    frame before moves (and deforms) linearly from there within the frame (also when its
    triangles differ: Blender splits a deforming body's quads anew as they bend); one
    with the same triangles too is built from that frame's
    (:meth:`~core.springs.TriangleMesh.moved_to`: its edge topology is kept, and one that
    has not moved stays the same object, broad-phase structures and all)."""
    out = []
    before: list = []
    meshes: list = []
    for cols in frames:
        row = []
        for k, (v, t, th, fr) in enumerate(cols):
            same_vertices = k < len(before) and before[k][0].shape == v.shape
            if same_vertices and np.array_equal(before[k][1], t) and tuple(before[k][2:]) == (th, fr):
                row.append(meshes[k].moved_to(v, previous=before[k][0]))
            elif same_vertices:  # new settings, or a deforming body's quads split anew: it still moves
                row.append(mesh_cls(v, t, thickness=th, friction=fr, previous=before[k][0]))
            else:
                row.append(mesh_cls(v, t, thickness=th, friction=fr))
        out.append(row)
        before, meshes = cols, row
    return out


def free_bake(obj: bpy.types.Object) -> bool:
    """Remove ``obj``'s bake and restore it exactly; False when there was none."""
    props = obj.sinew_springs
    if not props.baked:
        return False
    record = json.loads(props.bake_record) if props.bake_record else {}
    write.free(obj, record)
    props.baked = False
    props.bake_record = ""
    props.bake_output = ""
    props.bake_frame_start = props.bake_frame_end = 0
    props.bake_time = props.bake_iterations = props.bake_max_strain = 0.0
    props.bake_contacts, props.bake_max_penetration = 0, 0.0
    props.bake_unconverged = 0
    props.bake_max_residual = 0.0
    return True


class SINEW_OT_bake_springs(BakeOperator, bpy.types.Operator):
    """Simulate the active mesh as a mass-spring system and bake the motion"""

    bl_idname = "sinew.bake_springs"
    bl_label = "Bake Springs"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(name="Start", description="First frame (default: the scene's start)")
    frame_end: IntProperty(name="End", description="Last frame (default: the scene's end)")

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.active_object
        return obj is not None and obj.type == "MESH"

    def make_job(self, context: bpy.types.Context) -> BakeJob:
        scene = context.scene
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = scene.frame_start
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = scene.frame_end
        return SpringBakeJob(context, context.active_object, self.frame_start, self.frame_end)


class SINEW_OT_free_bake(bpy.types.Operator):
    """Remove the active mesh's spring bake and restore the mesh exactly as before"""

    bl_idname = "sinew.free_bake"
    bl_label = "Free Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.active_object
        return obj is not None and obj.type == "MESH"

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.active_object
        if obj.mode != "OBJECT":
            self.report({"ERROR"}, f"{obj.name}: switch to Object Mode before freeing the bake")
            return {"CANCELLED"}
        if not free_bake(obj):
            self.report({"WARNING"}, f"{obj.name} has no spring bake")
            return {"CANCELLED"}
        self.report({"INFO"}, f"{obj.name}: spring bake freed")
        return {"FINISHED"}


classes = (SINEW_OT_bake_springs, SINEW_OT_free_bake)
