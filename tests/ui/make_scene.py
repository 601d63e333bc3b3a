"""Build the UI tier's scene (run by ``blender -b --python make_scene.py -- OUT.blend``).

An armature "Rig" with a 6-bone chain B0..B5 and an animated empty "Target" in reach; a
hanging 16x16 grid "Cloth" with its top row in the vertex group "pin". Nothing is
configured for Sinew: the window session switches the settings on itself.
"""

import math
import sys
from pathlib import Path

import bpy

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
import blender_addon  # noqa: E402
from tools.scenes import bones  # noqa: E402

blender_addon.register()

out = sys.argv[sys.argv.index("--") + 1]
bpy.ops.wm.read_homefile(use_empty=False)  # factory screens (3D view, Properties, Timeline)
for ob in list(bpy.data.objects):
    bpy.data.objects.remove(ob)
scene = bpy.context.scene
scene.frame_start, scene.frame_end, scene.frame_current = 1, 48, 1

rig = bones.straight_chain("Rig", 6, 0.4, rotation_mode="QUATERNION")

target = bpy.data.objects.new("Target", None)
target.empty_display_type = "SPHERE"
target.empty_display_size = 0.1
scene.collection.objects.link(target)
# A loop well inside the chain's 2.4 m reach, keyed on every frame of a long range (the
# session bakes up to frame 60000 for the Esc test).
for k, f in enumerate(range(1, 4001, 40)):
    a = 2 * math.pi * k / 12
    target.location = (0.9 + 0.4 * math.cos(a), 0.3 * math.sin(a), 1.2 + 0.3 * math.sin(2 * a))
    target.keyframe_insert("location", frame=f)

bpy.ops.mesh.primitive_grid_add(x_subdivisions=16, y_subdivisions=16, size=1.0, location=(-2.0, 0.0, 1.5),
                                rotation=(math.pi / 2, 0.0, 0.0))
cloth = bpy.context.active_object
cloth.name = cloth.data.name = "Cloth"
top = [v.index for v in cloth.data.vertices if v.co.y > 0.49]
cloth.vertex_groups.new(name="pin").add(top, 1.0, "REPLACE")
cloth.modifiers.new("Subdivision", "SUBSURF").levels = 1

bpy.context.view_layer.objects.active = rig
bpy.ops.wm.save_as_mainfile(filepath=out)
print("SCENE written", out, len(top), "pinned")
