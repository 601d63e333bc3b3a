"""Spring bones through the command line on the real blender binary (3.4): IK first, then the
spring chain on top of the IK keys, and the saved file plays back without the add-on."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

CLI = str(ROOT / "blender_addon" / "cli.py")

BUILD = """
import sys
import bpy
sys.path.insert(0, {root!r})
if not hasattr(bpy.types, "SINEW_OT_bake_ik"):
    import blender_addon
    blender_addon.register()
bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 16
from tools.scenes import bones
ob = bones.straight_chain("Arm", 3, 0.5, bone_name="b{{i}}")
arm = ob.data
bpy.ops.object.mode_set(mode="EDIT")
parent = arm.edit_bones["b2"]
for i in range(2):
    eb = arm.edit_bones.new("tail%d" % i)
    eb.head, eb.tail = (0, -0.2 * i, 1.5), (0, -0.2 * (i + 1), 1.5)
    eb.parent, eb.use_connect = parent, i > 0
    parent = eb
bpy.ops.object.mode_set(mode="OBJECT")
target = bpy.data.objects.new("Target", None)
scene.collection.objects.link(target)
for f, loc in ((1, (1.0, 0.0, 1.0)), (16, (-0.6, 0.8, 1.1))):
    target.location = loc
    target.keyframe_insert("location", frame=f)
s = ob.pose.bones["b2"].sinew_ik
s.enabled, s.solver, s.target_mode, s.target = True, "DLS", "OBJECT", target
t = ob.pose.bones["tail1"].sinew_spring
t.enabled, t.chain_length, t.stiffness, t.damping, t.gravity = True, 2, 10.0, 1.0, 0.0
bpy.ops.wm.save_as_mainfile(filepath=sys.argv[sys.argv.index("--") + 1])
"""

CHECK = """
import bpy
scene = bpy.context.scene
ob = bpy.data.objects["Arm"]
assert not hasattr(bpy.types, "SINEW_OT_bake_spring_bones"), "the add-on must not be loaded"
worst = 0.0
for f in range(1, 17):
    scene.frame_set(f)
    pb = ob.pose.bones["tail0"]
    q = pb.rotation_quaternion
    worst = max(worst, q.angle)
    # lengths: the keys are rotations, the bones keep their rest lengths
    assert abs((pb.tail - pb.head).length - 0.2) < 1e-5
print("TAIL-SWING", worst)
"""


def test_cli_bakes_ik_then_spring_bones(blender, tmp_path: Path):
    scene = tmp_path / "scene.blend"
    proc = blender("--", str(scene), script=BUILD.format(root=str(ROOT)))
    assert proc.returncode == 0 and scene.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    out = tmp_path / "out.blend"
    proc = blender(str(scene), "--python", CLI, "--", "--save", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("sinew: baking")]
    assert [line.split(" of ")[0] for line in lines] == ["sinew: baking IK", "sinew: baking spring bones"], lines
    assert any("spring chain(s), 2 bones, 16 frames" in line for line in proc.stdout.splitlines())
    check = blender(str(out), script=CHECK)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    # without gravity a tail on a still parent would stay on its rest pose (no rotation): it
    # swings because it rides on the IK chain baked before it
    swing = float(next(line for line in check.stdout.splitlines() if line.startswith("TAIL-SWING")).split()[1])
    assert swing > 0.05, swing
