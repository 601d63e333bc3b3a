"""IK on a production rig: Blender's Rigify human metarig with bone controls, through the operators.

Every check lets Blender evaluate the baked keys (``frame_set`` + the evaluated pose); targets
are the control bones' heads, as Blender's IK constraint reads a bone subtarget.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest

from bench import metarig as M

from .scene_snapshot import snapshot

F = 24
FRAMES = range(1, F + 1)


@pytest.fixture()
def rig(scene):
    scene.frame_start, scene.frame_end = 1, F
    scene.frame_set(3)
    return M.add_metarig()


def _tips(rig, ev, tip):
    return ev[tip][:, :3, 3] + rig.data.bones[tip].length * ev[tip][:, :3, 1]


def test_limbs_and_spine_with_bone_targets_in_one_call(rig, scene):
    controls = M.add_controls(rig, F)
    M.enable_chains(rig, controls, max_iterations=300)
    before = M.evaluate(rig, FRAMES, ["chest_ik", "shoulder.L"])
    scene.frame_set(3)
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    assert scene.frame_current == 3
    report = rig.sinew_report
    assert report.state == "FINISHED" and report.operator == "sinew.bake_ik"
    assert "5 chain(s)" in report.summary and "via F-curves" in report.summary
    ev = M.evaluate(rig, FRAMES, list(controls) + list(controls.values()) + ["shoulder.L"])
    for tip, ctrl in controls.items():
        err = np.linalg.norm(_tips(rig, ev, tip) - ev[ctrl][:, :3, 3], axis=1)
        assert err.max() < 1e-4, (tip, err.max())
        # The reported error is the error of the written pose as Blender evaluates it.
        assert rig.pose.bones[tip].sinew_ik.last_error_max == pytest.approx(err.max(), abs=1e-6), tip
    # The chest control moves and the arms hang below the spine chain: their roots followed it.
    moved = np.linalg.norm(ev["shoulder.L"][:, :3, 3] - before["shoulder.L"][:, :3, 3], axis=1)
    assert moved.max() > 0.03


def test_target_bone_moving_with_the_chain_is_refused(rig, scene):
    controls = M.add_controls(rig, F, limbs={"hand.L": M.LIMBS["hand.L"]}, spine=False, parent="spine.002")
    M.enable_chains(rig, controls, limbs={"hand.L": M.LIMBS["hand.L"]}, poles=False)
    # hand_ik.L hangs below spine.002: fine while the spine is not baked ...
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    # ... refused once a chain through spine.002 is baked with it.
    s = rig.pose.bones["spine.003"].sinew_ik
    s.enabled, s.chain_length, s.target_mode = True, 3, "EXPRESSION"
    s.expression_x, s.expression_y, s.expression_z = "0", "-0.05", "1.6"
    before = snapshot()
    with pytest.raises(RuntimeError, match="hand_ik.L' moves with the baked bone 'spine.00[12]'"):
        bpy.ops.sinew.bake_ik()
    assert snapshot() == before
    assert rig.sinew_report.state == "FAILED" and "chase itself" in rig.sinew_report.error
    # A chain bone as its own target.
    s.enabled = False
    rig.pose.bones["hand.L"].sinew_ik.target_bone = "forearm.L"
    before = snapshot()
    with pytest.raises(RuntimeError, match="'forearm.L' is baked itself"):
        bpy.ops.sinew.bake_ik()
    assert snapshot() == before
    # The armature itself without a bone: Blender's IK ignores such a target; Sinew refuses it.
    rig.pose.bones["hand.L"].sinew_ik.target_bone = ""
    before = snapshot()
    with pytest.raises(RuntimeError, match="is an armature; choose one of its bones"):
        bpy.ops.sinew.bake_ik()
    assert snapshot() == before


def test_bone_target_of_another_armature_read_through_the_depsgraph(rig, scene):
    # Controls on their own armature, moved by a constraint: read by stepping the scene.
    data = bpy.data.armatures.new("Controls")
    ctl = bpy.data.objects.new("Controls", data)
    scene.collection.objects.link(ctl)
    ctl.location = (0.05, -0.02, 0.0)
    bpy.context.view_layer.objects.active = ctl
    bpy.ops.object.mode_set(mode="EDIT")
    b = data.edit_bones.new("foot_ik.L")
    b.head, b.tail = (0.05, -0.1, 0.25), (0.05, -0.1, 0.35)
    bpy.ops.object.mode_set(mode="OBJECT")
    lead = bpy.data.objects.new("Lead", None)
    scene.collection.objects.link(lead)
    for f in FRAMES:
        a = 2 * math.pi * (f - 1) / (F - 1)
        lead.location = (0.03 * math.cos(a), -0.05 * math.sin(a), 0.03 * math.sin(2 * a))
        lead.keyframe_insert("location", frame=f)
    con = ctl.pose.bones["foot_ik.L"].constraints.new("COPY_LOCATION")
    con.target, con.use_offset, con.target_space, con.owner_space = lead, True, "LOCAL", "LOCAL"
    s = rig.pose.bones["shin.L"].sinew_ik
    s.enabled, s.chain_length, s.target, s.target_bone, s.max_iterations = True, 2, ctl, "foot_ik.L", 300
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    assert "frame_set (bone 'foot_ik.L' has constraints)" in rig.sinew_report.summary
    assert scene.frame_current == 3
    tips, goals = [], []
    for f in FRAMES:
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        ev, ec = rig.evaluated_get(dg), ctl.evaluated_get(dg)
        tips.append(np.array(ev.matrix_world @ ev.pose.bones["shin.L"].tail))
        goals.append(np.array(ec.matrix_world @ ec.pose.bones["foot_ik.L"].head))
    err = np.linalg.norm(np.array(tips) - np.array(goals), axis=1)
    assert err.max() < 1e-4
    assert np.ptp(np.array(goals), axis=0).max() > 0.04  # the constraint moved the control


def test_import_rigify_style_constraint_in_one_click(rig, scene, capfd):
    controls = M.add_controls(rig, F, spine=False)
    # Rigify's generated rig: an IK constraint on the forearm/shin with a bone target and a
    # bone pole, pole_angle -90 degrees; the hand keeps its own constraint chain.
    off = rig.pose.bones["shin.L"].constraints.new("IK")  # Rigify's pole switch: the other one, muted
    off.target, off.subtarget, off.mute = rig, controls["shin.L"], True
    con = rig.pose.bones["shin.L"].constraints.new("IK")
    con.target, con.subtarget, con.chain_count = rig, controls["shin.L"], 2
    con.pole_target, con.pole_subtarget, con.pole_angle = rig, "knee_pole.L", -math.pi / 2
    con.iterations = 200
    # Use Tail off on the hand: Blender's chain ends at the hand's head (the forearm is the tip).
    con2 = rig.pose.bones["hand.L"].constraints.new("IK")
    con2.target, con2.subtarget, con2.chain_count, con2.use_tail = rig, controls["hand.L"], 2, False
    con2.use_rotation, con2.weight, con2.orient_weight = True, 0.5, 0.25
    capfd.readouterr()
    for bone in ("shin.L", "hand.L"):
        with bpy.context.temp_override(active_pose_bone=rig.pose.bones[bone], object=rig):
            assert bpy.ops.sinew.import_ik_constraint() == {"FINISHED"}
    out = capfd.readouterr().out
    assert "Warning" not in out and "WARNING" not in out, out
    s = rig.pose.bones["shin.L"].sinew_ik
    assert (s.enabled, s.target, s.target_bone, s.chain_length, s.max_iterations) == (
        True, rig, "foot_ik.L", 2, 200)
    assert (s.pole_target, s.pole_bone, s.use_rotation) == (rig, "knee_pole.L", False)
    assert s.pole_angle == pytest.approx(-math.pi / 2)
    assert not rig.pose.bones["hand.L"].sinew_ik.enabled
    s = rig.pose.bones["forearm.L"].sinew_ik
    assert (s.enabled, s.target_bone, s.chain_length, s.use_rotation) == (True, "hand_ik.L", 2, True)
    assert s.rotation_weight == pytest.approx(0.5)
    assert "Use Tail off" in out


def test_panels_show_bone_pickers(rig, scene, addon):
    """Draw both panels with an armature target and pole (the bone pickers' branch) without errors."""
    import importlib

    ui = importlib.import_module(addon.__name__ + ".ik.ui")
    controls = M.add_controls(rig, F, limbs={"shin.L": M.LIMBS["shin.L"]}, spine=False)
    M.enable_chains(rig, controls, limbs={"shin.L": M.LIMBS["shin.L"]})
    drawn = []

    class Layout:
        use_property_split = use_property_decorate = active = enabled = False

        def __getattr__(self, name):
            def call(*args, **kw):
                drawn.append((name, args[1] if len(args) > 1 else None, kw.get("text")))
                return Layout()
            return call

    ui.draw_targets(Layout(), rig.pose.bones["shin.L"].sinew_ik)
    searched = {d[1] for d in drawn if d[0] == "prop_search"}
    assert searched == {"target_bone", "pole_bone"}
    props = {d[1] for d in drawn if d[0] == "prop"}
    assert {"target", "pole_target", "pole_angle", "use_rotation", "rotation_weight"} <= props


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (degrees) between rows of two (F, 3) arrays of vectors."""
    cos = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def _rotation_angle(ma: np.ndarray, mb: np.ndarray) -> np.ndarray:
    """Angles (degrees) between the rotations of two (F, 4, 4) stacks of pose matrices."""
    ra = ma[:, :3, :3] / np.linalg.norm(ma[:, :3, :3], axis=1, keepdims=True)
    rb = mb[:, :3, :3] / np.linalg.norm(mb[:, :3, :3], axis=1, keepdims=True)
    r = np.einsum("fji,fjk->fik", ra, rb)
    return np.degrees(np.arccos(np.clip(0.5 * (np.trace(r, axis1=1, axis2=2) - 1.0), -1.0, 1.0)))


def test_limbs_bend_as_blenders_ik_constraint_with_the_same_poles(rig, scene):
    """Elbows and knees against Blender's own IK (same bone targets, bone poles, pole angles),
    baked with nla.bake + visual keying in the same scene."""
    controls = M.add_controls(rig, F, spine=False)
    angles = M.pole_angles(rig)
    other = M.add_metarig()
    M.add_controls(other, F, spine=False)
    M.enable_chains(rig, controls)
    for tip, a in angles.items():
        rig.pose.bones[tip].sinew_ik.pole_angle = a
    M.add_constraints(other, controls, angles)
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    M.nla_bake(other, F)
    joints = {"hand.L": ("upper_arm.L", "forearm.L"), "hand.R": ("upper_arm.R", "forearm.R"),
              "shin.L": ("thigh.L", "shin.L"), "shin.R": ("thigh.R", "shin.R")}
    names = sorted({b for pair in joints.values() for b in pair} | set(controls) | set(controls.values()))
    ours, blender = M.evaluate(rig, FRAMES, names), M.evaluate(other, FRAMES, names)
    for tip, (root, mid) in joints.items():
        err = np.linalg.norm(_tips(rig, ours, tip) - ours[controls[tip]][:, :3, 3], axis=1)
        assert err.max() < 1e-4, (tip, err.max())
        # The elbow / knee: direction from the chain's root to the middle joint.
        ours_dir = ours[mid][:, :3, 3] - ours[root][:, :3, 3]
        theirs_dir = blender[mid][:, :3, 3] - blender[root][:, :3, 3]
        assert _angle(ours_dir, theirs_dir).max() < 2.0, (tip, _angle(ours_dir, theirs_dir).max())
        # Closed target loops: the last frame's pose is the first one's.
        for bone in (root, mid):
            assert _rotation_angle(ours[bone][:1], ours[bone][-1:])[0] < 1.0, bone


def test_full_rig_hands_follow_control_rotation_loops_close(rig, scene):
    """Four limbs (hands with use_rotation) and the spine, one call; the arms hang below the spine."""
    controls = M.add_controls(rig, F)
    angles = M.pole_angles(rig)
    M.enable_chains(rig, controls, rotation=True)
    for tip, a in angles.items():
        rig.pose.bones[tip].sinew_ik.pole_angle = a
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    assert "rotation error" in rig.sinew_report.summary
    chain_bones = [b for tip in controls for b in
                   [p.name for p in (rig.pose.bones[tip], *rig.pose.bones[tip].parent_recursive)]
                   [:(M.LIMBS[tip][1] if tip in M.LIMBS else M.SPINE[2])]]
    ev = M.evaluate(rig, FRAMES, sorted(set(chain_bones) | set(controls.values())))
    for tip, ctrl in controls.items():
        err = np.linalg.norm(_tips(rig, ev, tip) - ev[ctrl][:, :3, 3], axis=1)
        assert err.max() < 1e-4, (tip, err.max())
        assert rig.pose.bones[tip].sinew_ik.last_error_max == pytest.approx(err.max(), abs=1e-6), tip
        if tip.startswith("hand"):
            assert _rotation_angle(ev[tip], ev[ctrl]).max() < 2.0, tip
    for bone in chain_bones:
        assert _rotation_angle(ev[bone][:1], ev[bone][-1:])[0] < 1.0, bone


def test_chains_sharing_spine_bones_are_solved_jointly(rig, scene):
    """Both arms run down into the spine (spine.003 and spine.002 shared): both hands reach."""
    limbs = {"hand.L": ("hand_ik.L", 6, (-0.3, -0.25, 0.1), 0.05, None, None),
             "hand.R": ("hand_ik.R", 6, (0.25, -0.3, -0.05), 0.05, None, None)}
    controls = M.add_controls(rig, F, limbs=limbs, spine=False)
    M.enable_chains(rig, controls, limbs=limbs, poles=False)
    s = rig.pose.bones["hand.L"].sinew_ik
    s.pole_target, s.pole_bone = rig, "root"
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    assert "1 group(s) of chains sharing bones solved jointly" in rig.sinew_report.summary
    assert "chain of 'hand.L': its pole is not used" in rig.sinew_report.warnings
    ev = M.evaluate(rig, FRAMES, list(controls) + list(controls.values()) + ["spine.003"])
    for tip, ctrl in controls.items():
        err = np.linalg.norm(_tips(rig, ev, tip) - ev[ctrl][:, :3, 3], axis=1)
        assert err.max() < 1e-4, (tip, err.max())
        assert rig.pose.bones[tip].sinew_ik.last_error_max == pytest.approx(err.max(), abs=1e-6), tip
    rest = np.array(rig.data.bones["spine.003"].matrix_local)[None]
    assert _rotation_angle(ev["spine.003"], rest).max() > 2.0  # the shared bones took part


def test_generated_rigify_rig_converts_in_one_click_and_bakes_like_blender(rig, scene, capfd):
    """Rigify's generated rig: the limbs' IK constraints (bone target, a driver switching a pole
    variant) are imported in one click each, baked, and played back like Blender's own IK."""
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.pose.rigify_generate() == {"FINISHED"}
    gen = bpy.data.objects["rig"]
    bpy.context.view_layer.objects.active = gen
    if gen.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    frames = range(1, 17)
    for ctrl, inward in (("hand_ik.L", -1.0), ("hand_ik.R", 1.0), ("foot_ik.L", 0.0)):
        pb = gen.pose.bones[ctrl]
        rest = np.array(gen.data.bones[ctrl].matrix_local)[:3, :3]
        for f in frames:
            a = 2 * math.pi * (f - 1) / 15
            offset = np.array([inward * 0.05 * (1 - math.cos(a)), -0.05 * math.sin(a), 0.1 + 0.03 * math.sin(2 * a)])
            pb.location = offset @ rest  # armature-space offset in the control's rest frame
            pb.keyframe_insert("location", frame=f)
    chains = {"MCH-forearm_ik.L": "upper_arm_ik.L", "MCH-forearm_ik.R": "upper_arm_ik.R",
              "MCH-shin_ik.L": "thigh_ik.L"}

    targets = [c.subtarget for tip in chains for c in gen.pose.bones[tip].constraints if c.type == "IK"]

    def pose():
        out = {b: [] for b in [*chains, *chains.values(), *targets]}
        for f in frames:
            scene.frame_set(f)
            ev = gen.evaluated_get(bpy.context.evaluated_depsgraph_get())
            for b in out:
                out[b].append((np.array(ev.pose.bones[b].head), np.array(ev.pose.bones[b].tail)))
        return {b: np.array(v) for b, v in out.items()}

    # Blender's own IK, as the generated rig has it, except that its IK stretch (0.1, which lets
    # Blender shorten a thigh by 2 % even for reachable targets) is off: Sinew keeps bone lengths.
    for tip, root in chains.items():
        gen.pose.bones[tip].ik_stretch = gen.pose.bones[root].ik_stretch = 0.0
    blender = pose()
    capfd.readouterr()
    for tip in chains:
        with bpy.context.temp_override(active_pose_bone=gen.pose.bones[tip], object=gen):
            assert bpy.ops.sinew.import_ik_constraint() == {"FINISHED"}
    out = capfd.readouterr().out
    assert "Warning" not in out, out
    for tip, root in chains.items():  # the stretch the generated rig has: said at import, not a warning
        gen.pose.bones[tip].ik_stretch = gen.pose.bones[root].ik_stretch = 0.1
        with bpy.context.temp_override(active_pose_bone=gen.pose.bones[tip], object=gen):
            assert bpy.ops.sinew.import_ik_constraint() == {"FINISHED"}
        gen.pose.bones[tip].ik_stretch = gen.pose.bones[root].ik_stretch = 0.0
    out = capfd.readouterr().out
    assert "Warning" not in out and "Sinew keeps bone lengths" in out, out
    bpy.context.view_layer.objects.active = gen
    assert bpy.ops.sinew.bake_ik(frame_start=1, frame_end=16) == {"FINISHED"}
    assert "targets via frame_set" in gen.sinew_report.summary
    assert "muted the driver" in gen.sinew_report.warnings  # the pole switch would re-enable the IK
    ours = pose()
    for tip, root in chains.items():
        goal = ours[gen.pose.bones[tip].sinew_ik.target_bone][:, 0]
        assert np.linalg.norm(ours[tip][:, 1] - goal, axis=1).max() < 1e-4, tip
        assert np.linalg.norm(blender[tip][:, 1] - goal, axis=1).max() < 1e-3, tip  # Blender's own IK
        mid_ours = ours[tip][:, 0] - ours[root][:, 0]
        mid_theirs = blender[tip][:, 0] - blender[root][:, 0]
        assert _angle(mid_ours, mid_theirs).max() < 2.0, tip
    assert np.ptp(blender["MCH-forearm_ik.R"][:, 1], axis=0).max() > 0.05  # the hands moved


@pytest.mark.parametrize("rotation", [False, True], ids=["position", "use_rotation"])
@pytest.mark.parametrize("solver", ["DLS", "FABRIK", "CCD"])
def test_arm_bends_as_blenders_ik_constraint_with_a_moving_target_and_swaying_pole(scene, solver, rotation):
    """Issue 31: the metarig's left arm, its control looping in front of the shoulder and its
    pole bone swaying 3 cm behind the elbow, pole angle -90 degrees: the elbow's plane against
    Blender's own IK constraint (same subtarget, pole bone and angle, baked with nla.bake) at
    every frame, with and without ``use_rotation`` (the hand keeping its control's orientation,
    rotation weight 1 against the constraint's orient_weight 1). Blender turns the chain for the
    pole before its solve only; Sinew turning it again after its solve put the plane up to 15
    degrees off here. With ``use_rotation`` the two goals leave the elbow a swivel that only the
    path of the iteration decides: Sinew's own damped least squares left it up to 108 degrees
    from Blender's, Blender's iteration (least_squares.blender_iterations) 0.02."""
    frames = 48
    scene.frame_start, scene.frame_end = 1, frames
    limbs = {"hand.L": ("hand_ik.L", 3, (-0.45, -0.35, 0.0), 0.1, "elbow_pole.L", (0.0, 0.45, 0.0))}
    rig, other = M.add_metarig(), M.add_metarig()
    controls = M.add_controls(rig, frames, limbs=limbs, spine=False)
    M.add_controls(other, frames, limbs=limbs, spine=False)
    import importlib

    compat = importlib.import_module(M.ADDON_MODULE + ".compat")
    f = np.arange(1, frames + 1, dtype=float)
    a = 2 * np.pi * (f - 1) / (frames - 1)
    sway = 0.03 * np.stack([np.sin(a), np.sin(2 * a), np.cos(a) - 1.0], axis=1)
    for ob in (rig, other):
        for i in range(3):
            fc = compat.ensure_fcurve(ob, 'pose.bones["elbow_pole.L"].location', i, "elbow_pole.L")
            compat.set_keys(fc, f, sway[:, i], "LINEAR")
    M.enable_chains(rig, controls, limbs=limbs, solver=solver, rotation=rotation)  # the default budget
    rig.pose.bones["hand.L"].sinew_ik.pole_angle = -math.pi / 2
    M.add_constraints(other, controls, {"hand.L": -math.pi / 2}, limbs=limbs, rotation=rotation)
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.sinew.bake_ik() == {"FINISHED"}
    M.nla_bake(other, frames)
    names = ["upper_arm.L", "forearm.L", "hand.L"]
    ours, theirs = M.evaluate(rig, range(1, frames + 1), names), M.evaluate(other, range(1, frames + 1), names)

    def normal(ev, ob):
        s, e = ev["upper_arm.L"][:, :3, 3], ev["forearm.L"][:, :3, 3]
        w = ev["hand.L"][:, :3, 3] + ob.data.bones["hand.L"].length * ev["hand.L"][:, :3, 1]
        n = np.cross(e - s, w - s)
        return n / np.linalg.norm(n, axis=1)[:, None]

    cos = np.sum(normal(ours, rig) * normal(theirs, other), axis=1)
    deg = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    worst = deg.max()
    # Issue 31's goal is 1 degree; measured 0.02 with and without use_rotation (Blender's
    # iteration for chains with a pole: every solver hands them to least_squares.solve_tree).
    # Before: 0.61 without, 108 with use_rotation (docs/BENCHMARKS.md, IK poles).
    assert worst < 0.1, worst
