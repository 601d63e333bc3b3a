"""``sinew.bake_spring_bones`` through the real operators, with Blender evaluating the keys."""

from __future__ import annotations

import importlib

import bpy
import numpy as np
import pytest
from mathutils import Vector

from tests.blender.conftest import ADDON_MODULE
from tests.blender.scene_snapshot import snapshot
from tests.blender.test_reliability_springs import play_without_addon

FRAMES = (1, 36)
SEGMENT = 0.2


@pytest.fixture()
def spring(scene, addon):
    scene.frame_start, scene.frame_end = FRAMES
    return importlib.import_module(ADDON_MODULE + ".springbones.operators")


def make_rig(modes=("QUATERNION", "QUATERNION", "QUATERNION"), scale=1.0) -> bpy.types.Object:
    """An armature: bone "Body" standing up +Z from (0, 0, 1) (keyed: carried 1 m along +X over frames
    1-12 while turning 0.5 rad about its own axis, then still) and a 3-bone tail T0-T2 from its
    head, pointing -Y and a little down."""
    data = bpy.data.armatures.new("Rig")
    rig = bpy.data.objects.new("Rig", data)
    bpy.context.scene.collection.objects.link(rig)
    rig.scale = (scale, scale, scale)
    bpy.context.view_layer.objects.active = rig
    rig.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    body = data.edit_bones.new("Body")
    body.head, body.tail = (0.0, 0.0, 1.0), (0.0, 0.0, 1.3)
    prev, head = body, Vector((0.0, 0.0, 1.0))
    for i in range(3):
        eb = data.edit_bones.new(f"T{i}")
        eb.head = head
        eb.tail = head + Vector((0.0, -1.0, -0.3)).normalized() * SEGMENT
        eb.roll = 0.2 * i
        eb.parent = prev
        eb.use_connect = i > 0
        prev, head = eb, eb.tail.copy()
    bpy.ops.object.mode_set(mode="OBJECT")
    for i, mode in enumerate(modes):
        rig.pose.bones[f"T{i}"].rotation_mode = mode
    pb = rig.pose.bones["Body"]
    pb.rotation_mode = "XYZ"
    for f, y, turn in ((1, 0.0, 0.0), (12, 1.0, 0.5), (36, 1.0, 0.5)):
        pb.location = (y, 0.0, 0.0)  # bone space: Body's X is world X (its Y is world Z)
        pb.rotation_euler = (0.0, turn, 0.0)
        pb.keyframe_insert("location", frame=f)
        pb.keyframe_insert("rotation_euler", frame=f)
    s = rig.pose.bones["T2"].sinew_spring
    s.enabled, s.chain_length = True, 3
    bpy.context.view_layer.objects.active = rig
    return rig


def joints_world(scene, rig, frames) -> np.ndarray:
    """World positions of T0's head and T0-T2's tails per frame, as Blender evaluates them."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        m = ev.matrix_world
        pts = [m @ ev.pose.bones["T0"].head] + [m @ ev.pose.bones[f"T{i}"].tail for i in range(3)]
        out.append([tuple(p) for p in pts])
    return np.array(out)


def _keys(fc) -> np.ndarray:
    co = np.empty(2 * len(fc.keyframe_points))
    fc.keyframe_points.foreach_get("co", co)
    return co.reshape(-1, 2)


def test_preset_operator_sets_the_contract_values(spring, scene):
    rig = make_rig()
    bpy.ops.object.mode_set(mode="POSE")
    rig.data.bones.active = rig.data.bones["T2"]
    table = importlib.import_module(ADDON_MODULE + ".springbones.preset_table")
    for name in ("HAIR", "TAIL", "EAR", "STRAP", "ANTENNA"):
        assert bpy.ops.sinew.spring_bones_preset(preset=name) == {"FINISHED"}
        s = rig.pose.bones["T2"].sinew_spring
        for key, value in table.PRESETS[name].items():
            assert getattr(s, key) == pytest.approx(value), (name, key)
    bpy.ops.object.mode_set(mode="OBJECT")


def test_bake_writes_keys_that_blender_plays_as_simulated(spring, scene):
    rig = make_rig(modes=("QUATERNION", "XYZ", "AXIS_ANGLE"))
    s = rig.pose.bones["T2"].sinew_spring
    s.stiffness, s.damping, s.gravity, s.substeps = 20.0, 2.0, 1.0, 2
    frames = np.arange(FRAMES[0], FRAMES[1] + 1)
    animated = joints_world(scene, rig, frames)
    scene.frame_set(5)
    job = spring.SpringBonesBakeJob(bpy.context, rig, *FRAMES)
    while not job.step():
        pass
    job.commit(bpy.context)
    assert scene.frame_current == 5
    baked = joints_world(scene, rig, frames)
    simulated = np.concatenate([r.joints for r in job.results], axis=1)
    # what Blender evaluates from the keys is the simulation (world space, the bones' own lengths)
    assert np.max(np.linalg.norm(baked - simulated, axis=2)) < 3 * SEGMENT * 1e-3
    # and exactly the pose the bake reports on
    np.testing.assert_allclose(baked, np.concatenate([r.pose for r in job.results], axis=1), atol=1e-5)
    lengths = np.linalg.norm(np.diff(baked, axis=1), axis=2)
    np.testing.assert_allclose(lengths, SEGMENT, rtol=1e-5)
    # the root is carried exactly; the tail lags behind the moving body and sags under gravity
    np.testing.assert_allclose(baked[:, 0], animated[:, 0], atol=1e-5)
    lag = np.linalg.norm(baked[:, 3] - animated[:, 3], axis=1)
    assert lag.max() > 0.05
    # keys: one per frame in each bone's own rotation mode, nothing else keyed on the tail
    compat = importlib.import_module(ADDON_MODULE + ".compat")
    for bone, prop, count in (("T0", "rotation_quaternion", 4), ("T1", "rotation_euler", 3),
                              ("T2", "rotation_axis_angle", 4)):
        for k in range(count):
            fc = compat.find_fcurve(rig, f'pose.bones["{bone}"].{prop}', k)
            assert fc is not None, (bone, prop, k)
            assert np.array_equal(_keys(fc)[:, 0], frames)
        assert compat.find_fcurve(rig, f'pose.bones["{bone}"].location', 0) is None
    q = np.stack([_keys(compat.find_fcurve(rig, 'pose.bones["T0"].rotation_quaternion', k))[:, 1]
                  for k in range(4)], axis=1)
    assert np.all(np.einsum("fi,fi->f", q[1:], q[:-1]) > 0)  # sign-continuous
    # the body's own keys are untouched
    assert len(_keys(compat.find_fcurve(rig, 'pose.bones["Body"].location', 1))) == 3


def test_operator_reports_and_stores_its_figures(spring, scene):
    rig = make_rig()
    assert bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=24) == {"FINISHED"}
    s = rig.pose.bones["T2"].sinew_spring
    assert s.last_frames == 24
    assert 0.0 <= s.last_length_error < 1e-3
    report = rig.sinew_report
    assert report.operator == "sinew.bake_spring_bones" and report.state == "FINISHED"
    assert "1 spring chain(s), 3 bones, 24 frames" in report.summary


def test_scaled_moving_armature_bakes_in_world_units(spring, scene):
    """The armature object scaled 2x and carried by its own keys: the chains simulate in world
    space (their lengths doubled) and Blender's evaluation of the keys is the simulation."""
    rig = make_rig(scale=2.0)
    for f, x in ((1, 0.0), (8, -0.6), (24, -0.6)):
        rig.location = (x, 0.3 * x, 0.0)
        rig.keyframe_insert("location", frame=f)
    frames = np.arange(1, 25)
    job = spring.SpringBonesBakeJob(bpy.context, rig, 1, 24)
    while not job.step():
        pass
    job.commit(bpy.context)
    baked = joints_world(scene, rig, frames)
    np.testing.assert_allclose(np.linalg.norm(np.diff(baked, axis=1), axis=2), 2 * SEGMENT, rtol=1e-5)
    assert np.max(np.linalg.norm(baked - job.results[0].joints, axis=2)) < 3 * 2 * SEGMENT * 1e-3


def test_collider_sphere_keeps_the_tail_out(spring, scene):
    rig = make_rig()
    s = rig.pose.bones["T2"].sinew_spring
    s.stiffness, s.damping, s.radius, s.substeps = 5.0, 1.0, 0.03, 4
    job = spring.SpringBonesBakeJob(bpy.context, rig, 1, 36)
    while not job.step():
        pass
    free = job.results[0].joints  # not written: the tail sags far below its rest pose
    # a ball around where the sagging tail's tip ends without it
    center = free[-1, 3]
    assert np.linalg.norm(free[0, 1:] - center, axis=1).min() > 0.3  # it starts well away
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.12, location=tuple(center), segments=32, ring_count=16)
    ball = bpy.context.active_object
    bpy.ops.object.modifier_add(type="COLLISION")
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=36) == {"FINISHED"}
    baked = joints_world(scene, rig, np.arange(1, 37))
    d = np.linalg.norm(baked[:, 1:] - center, axis=2)
    # outside the faceted ball (its flat faces lie up to 0.12 (1 − cos(π/16)) inside the sphere) by the radius
    assert d.min() > 0.12 * np.cos(np.pi / 16) + 0.03 * 0.99, d.min()
    # the reported penetration is the one of the pose Blender evaluates, against the ball's faces
    springs = importlib.import_module(ADDON_MODULE + ".core.springs")
    me = ball.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh()
    me.calc_loop_triangles()
    co = np.array([v.co[:] for v in me.vertices]) + center
    tris = np.array([t.vertices[:] for t in me.loop_triangles])
    ball.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh_clear()
    mesh = springs.TriangleMesh(co, tris)
    depth = max(0.0, max(float(np.max(0.03 - mesh.signed_distance(baked[f, 1:]))) for f in range(36)))
    assert rig.pose.bones["T2"].sinew_spring.last_penetration == pytest.approx(depth, abs=1e-6)
    assert np.linalg.norm(free[:, 1:] - center, axis=2).min() < 0.12  # without it the tail goes in
    assert rig.pose.bones["T2"].sinew_spring.last_length_error < 1e-3


def _box_signed_distance(p: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Exact signed distance of points ``p`` ``(..., 3)`` to the axis-aligned box ``[lo, hi]``."""
    outside = np.linalg.norm(np.maximum(np.maximum(lo - p, p - hi), 0.0), axis=-1)
    inside = np.minimum(p - lo, hi - p).min(axis=-1)
    return np.where(np.all((p > lo) & (p < hi), axis=-1), -inside, outside)


def test_armature_deformed_bar_cannot_pass_between_the_tails_joints(spring, scene):
    """A 2 cm bar skinned to a bone of the same armature (Armature, then Collision modifier)
    sweeps through the middle of a hanging tail's second bone, 10 cm from the joints on either
    side: without the bones colliding it passes between them; with them, at every frame as
    Blender evaluates the keys, every bone but the first keeps the chain's radius from the bar
    as Blender deforms it (its exact box distance, sampled along the bones)."""
    frames, radius = 24, 0.02
    scene.frame_start, scene.frame_end = 1, frames
    data = bpy.data.armatures.new("Rig")
    rig = bpy.data.objects.new("Rig", data)
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    root = data.edit_bones.new("Root")
    root.head, root.tail = (0.0, 0.0, 1.0), (0.0, 0.0, 1.2)
    swing = data.edit_bones.new("Swing")
    swing.head, swing.tail = (0.0, 0.3, 0.7), (0.1, 0.3, 0.7)
    prev = root
    for i in range(3):
        eb = data.edit_bones.new(f"T{i}")
        eb.head, eb.tail = (0.0, 0.0, 1.0 - SEGMENT * i), (0.0, 0.0, 1.0 - SEGMENT * (i + 1))
        eb.parent, eb.use_connect = prev, False
        prev = eb
    bpy.ops.object.mode_set(mode="OBJECT")
    pb = rig.pose.bones["Swing"]
    for f, y in ((1, 0.0), (frames, 0.6)):  # bone space: Swing's Y is world X, its X is world -Y
        pb.location = (y, 0.0, 0.0)
        pb.keyframe_insert("location", frame=f)
    s = rig.pose.bones["T2"].sinew_spring
    s.enabled, s.chain_length = True, 3
    s.stiffness, s.damping, s.gravity, s.radius, s.substeps = 50.0, 5.0, 0.0, radius, 4
    half = np.array([0.2, 0.01, 0.01])
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.3, 0.7))
    bar = bpy.context.active_object
    bar.scale = tuple(2 * half)
    bpy.ops.object.transform_apply(scale=True)
    group = bar.vertex_groups.new(name="Swing")
    group.add(list(range(len(bar.data.vertices))), 1.0, "REPLACE")
    mod = bar.modifiers.new("Armature", "ARMATURE")
    mod.object = rig

    def bar_box(f):
        scene.frame_set(int(f))
        ev = bar.evaluated_get(bpy.context.evaluated_depsgraph_get())
        me = ev.to_mesh()
        co = np.array([ev.matrix_world @ v.co for v in me.vertices])
        ev.to_mesh_clear()
        return co.min(axis=0), co.max(axis=0)

    def bone_gaps(joints):  # (F, n+1, 3) -> (F, n): each bone's least signed distance to the bar
        t = np.linspace(0.0, 1.0, 2001)[:, None, None]
        out = []
        for f, j in enumerate(joints, start=1):
            lo, hi = bar_box(f)
            out.append(_box_signed_distance(j[:-1] + t * np.diff(j, axis=0), lo, hi).min(axis=0))
        return np.array(out)

    lo, hi = bar_box(frames)
    assert np.allclose(hi - lo, 2 * half, atol=1e-6) and abs((lo[1] + hi[1]) / 2 + 0.3) < 1e-6  # deformed
    bpy.context.view_layer.objects.active = rig
    job = spring.SpringBonesBakeJob(bpy.context, rig, 1, frames)  # no collider yet: not written
    while not job.step():
        pass
    free = job.results[0].joints
    # the bar passes through the second bone: its centre line (z = 0.7) crosses the bone's point
    # at that height from one frame to the next (it moves 2-4 cm a frame, its own width 2 cm)
    a, b = free[:, 1], free[:, 2]
    w = (a[:, 2] - 0.7) / (a[:, 2] - b[:, 2])
    assert np.all((w > 0.2) & (w < 0.8))  # between the joints, far from both
    side = np.array([(lo_f[1] + hi_f[1]) / 2 for lo_f, hi_f in map(bar_box, range(1, frames + 1))])
    side -= a[:, 1] + w * (b[:, 1] - a[:, 1])
    assert side[0] > 0.2 and side[-1] < -0.2
    assert min(_box_signed_distance(free[f - 1, 1:], *bar_box(f)).min() for f in range(1, frames + 1)) > 0.05
    bpy.context.view_layer.objects.active = bar
    bpy.ops.object.modifier_add(type="COLLISION")
    bpy.context.view_layer.objects.active = rig
    job = spring.SpringBonesBakeJob(bpy.context, rig, 1, frames)
    while not job.step():
        pass
    job.commit(bpy.context)
    rope = job.results[0].joints
    # the simulated bones: the contact stage leaves them at the radius; a frame whose bones the
    # length projection puts back (along themselves, by at most 0.05 % each) may move them by that
    tolerance = importlib.import_module(ADDON_MODULE + ".core.springbones").LENGTH_TOLERANCE * 3 * SEGMENT
    assert bone_gaps(rope)[:, 1:].min() >= radius - tolerance
    baked = joints_world(scene, rig, np.arange(1, frames + 1))
    gaps = bone_gaps(baked)[:, 1:]
    # the keys' bones have their own lengths: off the rope (its lengths within 0.05 %) by at most
    slack = np.max(np.linalg.norm(baked - rope, axis=2))
    assert slack < 3 * SEGMENT * 1e-3
    assert gaps.min() >= radius - slack - 1e-6, gaps.min()
    assert gaps.min() <= radius * 1.01  # it meets the bar
    assert rig.pose.bones["T2"].sinew_spring.last_penetration == pytest.approx(max(0.0, radius - gaps.min()), abs=1e-6)


def test_saved_bake_plays_back_without_the_addon(spring, scene, tmp_path):
    rig = make_rig()
    assert bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=12) == {"FINISHED"}
    bpy.ops.mesh.primitive_cube_add(size=0.05)
    cube = bpy.context.active_object
    cube.parent, cube.parent_type, cube.parent_bone = rig, "BONE", "T2"
    scene.frame_set(1)
    cube.matrix_parent_inverse = (rig.matrix_world @ rig.pose.bones["T2"].matrix).inverted()
    baked = []
    for f in range(1, 13):
        scene.frame_set(f)
        m = np.array(cube.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world)
        baked.append(np.array([v.co[:] for v in cube.data.vertices]) @ m[:3, :3].T + m[:3, 3])
    baked = np.array(baked)
    path = tmp_path / "spring.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    fresh = play_without_addon(path, cube.name, 1, 12, tmp_path)
    np.testing.assert_allclose(fresh, baked, atol=1e-5)


# ----------------------------------------------------------------------------- failures


def _no_chain(rig):
    rig.pose.bones["T2"].sinew_spring.enabled = False
    return "no enabled spring chain", {}


def _beyond_root(rig):
    rig.pose.bones["T2"].sinew_spring.chain_length = 9
    return "beyond the root", {}


def _shared_bones(rig):
    s = rig.pose.bones["T1"].sinew_spring
    s.enabled, s.chain_length = True, 1
    return "share the bone", {}


def _nested(rig):
    rig.pose.bones["T2"].sinew_spring.chain_length = 1
    s = rig.pose.bones["T1"].sinew_spring
    s.enabled, s.chain_length = True, 1
    return "hangs below", {}


def _also_ik(rig):
    s = rig.pose.bones["T1"].sinew_ik
    s.enabled, s.chain_length = True, 1
    s.target_mode = "EXPRESSION"
    return "Sinew IK chain", {}


def _no_inherit_rotation(rig):
    rig.data.bones["T1"].use_inherit_rotation = False
    return "does not inherit", {}


def _stretched_armature(rig):
    rig.scale = (1.0, 2.0, 1.0)
    return "scaled uniformly", {}


def _reverse_range(rig):
    return "before frame_start", {"frame_start": 12, "frame_end": 2}


def _not_an_armature(rig):
    bpy.ops.mesh.primitive_cube_add()
    return "must be an armature", {}


BAD = [_no_chain, _beyond_root, _shared_bones, _nested, _also_ik, _no_inherit_rotation, _stretched_armature,
       _reverse_range, _not_an_armature]


@pytest.mark.parametrize("case", BAD, ids=[c.__name__.strip("_") for c in BAD])
def test_bad_input_one_message_scene_unchanged(spring, scene, case):
    rig = make_rig()
    scene.frame_set(4)
    match, kw = case(rig)
    before = snapshot()
    with pytest.raises(RuntimeError, match=match) as ei:
        bpy.ops.sinew.bake_spring_bones(**kw)
    assert "Traceback" not in str(ei.value), str(ei.value)[:2000]
    assert snapshot() == before


class _Event:
    def __init__(self, kind: str) -> None:
        self.type, self.value = kind, "PRESS"


def test_cancelled_bake_leaves_the_scene_unchanged(spring, scene):
    rig = make_rig()
    scene.frame_set(4)
    before = snapshot()
    job = spring.SpringBonesBakeJob(bpy.context, rig, 1, 36)
    for _ in range(5):
        assert not job.step()
    assert 0 < job.done < job.total
    job.cancel()
    job.restore_view(bpy.context)
    assert snapshot() == before
    # and through the modal operator's Esc
    bakejob = importlib.import_module(ADDON_MODULE + ".bakejob")
    reports = []

    class Op(bakejob.BakeOperator):
        def report(self, kind, text):
            reports.append((kind, text))

    op = Op()
    op._job = spring.SpringBonesBakeJob(bpy.context, rig, 1, 400)
    assert op.modal(bpy.context, _Event("TIMER")) == {"RUNNING_MODAL"}
    assert 0 < op._job.done < op._job.total
    assert op.modal(bpy.context, _Event("ESC")) == {"CANCELLED"}
    assert reports and "cancelled, nothing was changed" in reports[-1][1]
    assert snapshot() == before


# ----------------------------------------------------------------------------- Rigify metarig


def test_rigify_metarig_tail_and_ponytail_on_ik_legs_in_one_call(spring, scene):
    """Issue 31's rig: Blender's Rigify human metarig on Sinew IK legs (foot controls on loops,
    knee poles, the hips swaying and bobbing), a 6-bone tail on the hips and a 5-bone ponytail
    on the head, both baked by one call after the IK bake; what Blender evaluates from the keys
    is what was simulated."""
    from bench import metarig as M

    frames = 24
    scene.frame_start, scene.frame_end = 1, frames
    rig = M.add_metarig()
    limbs = {k: v for k, v in M.LIMBS.items() if k.startswith("shin")}
    controls = M.add_controls(rig, frames, limbs=limbs, spine=False)
    M.enable_chains(rig, controls, limbs=limbs, max_iterations=200)
    bpy.ops.object.mode_set(mode="EDIT")
    eb = rig.data.edit_bones
    hips, head = eb["spine"], eb["spine.006"]
    for name, parent, start, step, count in (
            ("tail", hips, hips.head + Vector((0.0, 0.1, 0.0)), Vector((0.0, 0.09, -0.03)), 6),
            ("pony", head, head.head + Vector((0.0, 0.1, 0.12)), Vector((0.0, 0.03, -0.07)), 5)):
        prev, at = parent, start
        for i in range(count):
            b = eb.new(f"{name}.{i:03d}")
            b.head, b.tail = at, at + step
            b.parent, b.use_connect = prev, i > 0
            prev, at = b, at + step
    bpy.ops.object.mode_set(mode="OBJECT")
    pb = rig.pose.bones["spine"]
    for f in range(1, frames + 1):
        a = 2 * np.pi * (f - 1) / (frames - 1)
        pb.location = (0.06 * np.sin(a), 0.03 * np.sin(2 * a), 0.0)
        pb.keyframe_insert("location", frame=f)
    for tip, n, preset in (("tail.005", 6, "TAIL"), ("pony.004", 5, "HAIR")):
        bpy.ops.object.mode_set(mode="POSE")
        rig.data.bones.active = rig.data.bones[tip]
        assert bpy.ops.sinew.spring_bones_preset(preset=preset) == {"FINISHED"}
        s = rig.pose.bones[tip].sinew_spring
        s.enabled, s.chain_length, s.pre_roll = True, n, 12
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    job = spring.SpringBonesBakeJob(bpy.context, rig, 1, frames)
    while not job.step():
        pass
    summary = job.commit(bpy.context)
    assert "2 spring chain(s), 11 bones, 24 frames" in summary
    ev = M.evaluate(rig, range(1, frames + 1), [f"tail.{i:03d}" for i in range(6)] + [f"pony.{i:03d}" for i in range(5)])
    world = np.array(rig.matrix_world)
    for ci, r in zip(job.data.chains, job.results):
        heads = np.stack([ev[b][:, :3, 3] for b in ci.bones], axis=1)
        tip = ev[ci.bones[-1]][:, :3, 3] + rig.data.bones[ci.bones[-1]].length * ev[ci.bones[-1]][:, :3, 1]
        joints = np.concatenate((heads, tip[:, None]), axis=1) @ world[:3, :3].T + world[:3, 3]
        assert np.max(np.linalg.norm(joints - r.joints, axis=2)) < 1e-3 * ci.chain.reach, ci.tip
        assert r.length_error < 1e-3
        assert np.max(np.linalg.norm(r.joints - r.animated, axis=2)) > 0.01, ci.tip  # they swing


def test_panels_draw_every_contract_setting(spring, scene, addon):
    """Both panels draw (through a recording layout) every ``sinew_spring`` setting of CONTRACT.md,
    the preset menu and the bake button, and the bake's report once there is one."""
    ui = importlib.import_module(addon.__name__ + ".springbones.ui")
    rig = make_rig()
    drawn = []

    class Layout:
        use_property_split = use_property_decorate = active = enabled = alert = False

        def __getattr__(self, name):
            def call(*args, **kw):
                drawn.append((name, args[1] if len(args) > 1 else args[0] if args else None, kw.get("text")))
                return Layout()
            return call

    class Context:
        object = active_object = rig
        active_pose_bone = rig.pose.bones["T2"]
        scene = bpy.context.scene

    class Panel:
        layout = Layout()

    assert ui.SINEW_PT_bone_spring.poll(Context())
    ui.SINEW_PT_bone_spring.draw(Panel(), Context())
    props = {d[1] for d in drawn if d[0] == "prop"}
    contract = {"chain_length", "stiffness", "damping", "drag", "gravity", "stretch", "radius",
                "collision_collection", "substeps", "pre_roll"}
    assert contract <= props
    assert contract | {"enabled"} <= set(rig.pose.bones["T2"].sinew_spring.bl_rna.properties.keys())
    assert ("operator_menu_enum", "preset", "Preset") in drawn
    assert any(d[0] == "operator" and d[1] == "sinew.bake_spring_bones" for d in drawn)
    assert bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=6) == {"FINISHED"}
    drawn.clear()
    ui.SINEW_PT_spring_chains.draw(Panel(), Context())
    labels = [d[2] for d in drawn if d[0] == "label"]
    assert "T2" in labels and "6 frames baked" in labels
    assert any(d[0] == "operator" and d[1] == "sinew.bake_spring_bones" for d in drawn)


def test_chain_on_an_ik_chain_rides_on_the_ik_solution(spring, scene):
    """A strap hanging from the tip of a Sinew IK arm: the spring bake solves the IK chain first
    (without writing its keys), so once the IK keys are baked too — after it, as here, or
    before — the strap's root is exactly where the simulation carried it."""
    from tests.blender import ik_rig as rig_

    scene.frame_start, scene.frame_end = 1, 24
    rig = rig_.make_chain(n=3)
    target = rig_.make_target(frames=range(1, 25))
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    eb = rig.data.edit_bones
    prev, at = eb["B2"], eb["B2"].tail.copy()
    for i in range(2):
        b = eb.new(f"S{i}")
        b.head, b.tail = at, at + Vector((0.0, -0.15, -0.05))
        b.parent, b.use_connect = prev, True
        prev, at = b, b.tail.copy()
    bpy.ops.object.mode_set(mode="OBJECT")
    rig_.enable_chain(rig, "B2", target=target, solver="DLS")
    s = rig.pose.bones["S1"].sinew_spring
    s.enabled, s.chain_length, s.stiffness, s.damping = True, 2, 10.0, 1.0
    job = spring.SpringBonesBakeJob(bpy.context, rig, 1, 24)
    assert compat_keys(rig, "B0") == 0  # the IK chain is solved, not written
    while not job.step():
        pass
    assert "on 1 Sinew IK chain(s) solved first" in job.commit(bpy.context)
    assert compat_keys(rig, "B0") == 0
    assert bpy.ops.sinew.bake_ik(frame_start=1, frame_end=24) == {"FINISHED"}
    baked = []
    for f in range(1, 25):
        scene.frame_set(f)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        m = ev.matrix_world
        baked.append([tuple(m @ ev.pose.bones["S0"].head), tuple(m @ ev.pose.bones["S0"].tail),
                      tuple(m @ ev.pose.bones["S1"].tail)])
    baked = np.array(baked)
    np.testing.assert_allclose(baked[:, 0], job.results[0].joints[:, 0], atol=1e-5)
    assert np.max(np.linalg.norm(baked - job.results[0].joints, axis=2)) < 1e-3 * 0.32
    assert np.max(np.linalg.norm(job.results[0].joints - job.results[0].animated, axis=2)) > 0.01


def compat_keys(rig, bone) -> int:
    """How many F-curves animate ``bone``'s rotation."""
    compat = importlib.import_module(ADDON_MODULE + ".compat")
    return sum(1 for k in range(4) if compat.find_fcurve(rig, f'pose.bones["{bone}"].rotation_quaternion', k))


def test_baking_again_warns_that_it_reads_the_last_bakes_keys(spring, scene):
    rig = make_rig()
    assert bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=12) == {"FINISHED"}
    assert "previous bake" not in rig.sinew_report.warnings
    assert bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=12) == {"FINISHED"}
    assert "previous bake?" in rig.sinew_report.warnings and "'T0'" in rig.sinew_report.warnings


def test_ik_chains_are_solved_only_for_chains_below_them(spring, scene):
    """A broken Sinew IK chain elsewhere on the armature does not stop the spring bake; one that
    a spring chain hangs below does, with its own message, and nothing is changed."""
    rig = make_rig()
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    arm = rig.data.edit_bones.new("Arm")
    arm.head, arm.tail = (0.5, 0.0, 1.0), (0.8, 0.0, 1.0)
    bpy.ops.object.mode_set(mode="OBJECT")
    s = rig.pose.bones["Arm"].sinew_ik
    s.enabled, s.chain_length = True, 1  # no target: the IK bake would refuse it
    assert bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=6) == {"FINISHED"}
    assert "solved first" not in rig.sinew_report.summary
    s = rig.pose.bones["Body"].sinew_ik
    s.enabled, s.chain_length = True, 1
    before = snapshot()
    with pytest.raises(RuntimeError, match="hangs below a Sinew IK chain, solved first: .*no target"):
        bpy.ops.sinew.bake_spring_bones(frame_start=1, frame_end=6)
    assert snapshot() == before
