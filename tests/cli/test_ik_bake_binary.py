"""``sinew.bake_ik`` on the real ``blender`` binary (Debian's 3.4.1), background mode."""

from __future__ import annotations

from tests.conftest import ROOT

SCRIPT = r"""
import math, sys
sys.path.insert(0, REPO_ROOT)
import bpy
import blender_addon
blender_addon.register()

scene = bpy.context.scene
for obj in list(bpy.data.objects):
    bpy.data.objects.remove(obj)
scene.frame_start, scene.frame_end = 1, 40
data = bpy.data.armatures.new("Rig")
rig = bpy.data.objects.new("Rig", data)
scene.collection.objects.link(rig)
rig.location = (0.2, 0.1, 0.0)
bpy.context.view_layer.objects.active = rig
bpy.ops.object.mode_set(mode="EDIT")
prev = None
for i in range(4):
    eb = data.edit_bones.new("B%d" % i)
    eb.head = (0.05 * (i % 2), 0.0, 0.5 * i)
    eb.tail = (0.05 * ((i + 1) % 2), 0.0, 0.5 * (i + 1))
    eb.roll = 0.3 * i
    if prev is not None:
        eb.parent, eb.use_connect = prev, True
    prev = eb
bpy.ops.object.mode_set(mode="OBJECT")
rig.pose.bones["B1"].rotation_mode = "ZXY"
target = bpy.data.objects.new("Target", None)
scene.collection.objects.link(target)
for f in range(1, 41):
    a = 2 * math.pi * (f - 1) / 39
    target.location = (0.5 + 0.4 * math.cos(a), 0.3 * math.sin(a), 1.2 + 0.2 * math.sin(2 * a))
    target.keyframe_insert("location", frame=f)
s = rig.pose.bones["B3"].sinew_ik
s.enabled, s.target, s.solver, s.max_iterations = True, target, SOLVER, 300
scene.frame_set(7)
result = bpy.ops.sinew.bake_ik(frame_start=1, frame_end=40)
assert result == {"FINISHED"}, result
assert scene.frame_current == 7
worst = 0.0
for f in range(1, 41):
    scene.frame_set(f)
    dg = bpy.context.evaluated_depsgraph_get()
    ev = rig.evaluated_get(dg)
    tip = ev.matrix_world @ ev.pose.bones["B3"].tail
    worst = max(worst, (tip - target.evaluated_get(dg).matrix_world.translation).length)
print("SINEW-WORST %.3e" % worst)
assert worst < 1e-4, worst
keys = [fc for fc in rig.animation_data.action.fcurves if fc.data_path.startswith('pose.bones["B1"]')]
assert sorted(fc.data_path.rsplit(".", 1)[1] for fc in keys) == ["rotation_euler"] * 3
assert all(len(fc.keyframe_points) == 40 for fc in keys)
blender_addon.unregister()
assert not hasattr(bpy.types.PoseBone, "sinew_ik")
print("SINEW-OK")
"""


def _run(blender, solver):
    script = f"REPO_ROOT = {str(ROOT)!r}\nSOLVER = {solver!r}\n" + SCRIPT
    proc = blender(script=script)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "SINEW-OK" in proc.stdout, out[-4000:]
    assert "Sinew: IK Rig:" in proc.stdout  # background progress/summary lines
    return out


def test_bake_fabrik_on_blender_binary(blender):
    _run(blender, "FABRIK")


def test_bake_dls_on_blender_binary(blender):
    _run(blender, "DLS")


def test_bad_input_fails_cleanly_on_blender_binary(blender):
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import bpy
import blender_addon
blender_addon.register()
data = bpy.data.armatures.new("Rig")
rig = bpy.data.objects.new("Rig", data)
bpy.context.scene.collection.objects.link(rig)
bpy.context.view_layer.objects.active = rig
try:
    bpy.ops.sinew.bake_ik(frame_start=1, frame_end=10)
except RuntimeError as exc:
    print("SINEW-ERR", exc)
assert rig.animation_data is None
"""
    proc = blender(script=script)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "SINEW-ERR" in proc.stdout and "no enabled Sinew IK chain" in proc.stdout


BONE_TARGET_SCENE = r"""
import math, sys
sys.path.insert(0, REPO_ROOT)
import bpy
import blender_addon
blender_addon.register()
bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 24
data = bpy.data.armatures.new("Rig")
rig = bpy.data.objects.new("Rig", data)
scene.collection.objects.link(rig)
bpy.context.view_layer.objects.active = rig
bpy.ops.object.mode_set(mode="EDIT")
root = data.edit_bones.new("root")
root.head, root.tail = (0.0, 0.0, 0.0), (0.0, 0.3, 0.0)
prev = None
for name, head, tail in (("thigh", (0.1, 0.0, 1.0), (0.1, -0.03, 0.55)), ("shin", (0.1, -0.03, 0.55), (0.1, 0.0, 0.1))):
    eb = data.edit_bones.new(name)
    eb.head, eb.tail = head, tail
    if prev is not None:
        eb.parent, eb.use_connect = prev, True
    prev = eb
ctl = data.edit_bones.new("foot_ik")
ctl.head, ctl.tail, ctl.parent = (0.1, -0.1, 0.3), (0.1, -0.1, 0.4), root
pole = data.edit_bones.new("knee_pole")
pole.head, pole.tail, pole.parent = (0.1, -0.6, 0.55), (0.1, -0.6, 0.65), root
bpy.ops.object.mode_set(mode="OBJECT")
pb = rig.pose.bones["foot_ik"]
for f in range(1, 25):
    a = 2 * math.pi * (f - 1) / 23
    pb.location = (0.05 * math.cos(a), 0.04 * math.sin(a), 0.03 * math.sin(2 * a))
    pb.keyframe_insert("location", frame=f)
s = rig.pose.bones["shin"].sinew_ik
s.enabled, s.chain_length, s.target, s.target_bone = True, 2, rig, "foot_ik"
s.pole_target, s.pole_bone, s.pole_angle = rig, "knee_pole", -math.pi / 2
bpy.ops.wm.save_as_mainfile(filepath=OUT)
"""


def test_bone_target_bake_through_the_command_line(blender, tmp_path):
    """A bone target and a bone pole of the same armature, baked by cli.py on Debian's blender."""
    scene = tmp_path / "bones.blend"
    proc = blender(script=f"REPO_ROOT = {str(ROOT)!r}\nOUT = {str(scene)!r}\n" + BONE_TARGET_SCENE)
    assert proc.returncode == 0 and scene.is_file(), (proc.stdout + proc.stderr)[-4000:]
    out = tmp_path / "baked.blend"
    proc = blender(str(scene), "--python", str(ROOT / "blender_addon" / "cli.py"), "--", "--save", str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "targets via F-curves" in proc.stdout
    check = blender(str(out), script="""
        import bpy
        scene = bpy.context.scene
        rig = bpy.data.objects["Rig"]
        worst = 0.0
        for f in range(1, 25):
            scene.frame_set(f)
            ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
            worst = max(worst, (ev.pose.bones["shin"].tail - ev.pose.bones["foot_ik"].head).length)
        print("BONE-TARGET-WORST %.3e" % worst)
        assert worst < 1e-4, worst
    """)
    assert check.returncode == 0, (check.stdout + check.stderr)[-4000:]
    assert "BONE-TARGET-WORST" in check.stdout
