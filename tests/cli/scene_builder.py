"""A small scene with one IK chain and one spring rope, built inside Blender.

Used by the command-line tests (run as a ``--python`` script in the real binary, and
imported in the bpy module tier). Registers the add-on from the source tree when it is
not registered yet.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def build(path: str, frames: int = 12) -> None:
    import bpy

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tools.scenes import bones

    if not hasattr(bpy.types, "SINEW_OT_bake_ik"):
        import blender_addon

        blender_addon.register()
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames

    ob = bones.straight_chain("Arm", 4, 0.5, bone_name="b{i}")
    target = bpy.data.objects.new("Target", None)
    scene.collection.objects.link(target)
    for f, loc in ((1, (1.0, 0.0, 1.2)), (frames, (0.5, 0.8, 1.5))):
        target.location = loc
        target.keyframe_insert("location", frame=f)
    s = ob.pose.bones["b3"].sinew_ik
    s.enabled, s.solver, s.target_mode, s.target = True, "FABRIK", "OBJECT", target

    me = bpy.data.meshes.new("Rope")
    n = 8
    me.from_pydata([(0.1 * i, 0.0, 0.0) for i in range(n)], [(i, i + 1) for i in range(n - 1)], [])
    rope = bpy.data.objects.new("Rope", me)
    scene.collection.objects.link(rope)
    rope.location = (2.0, 0.0, 2.0)
    rope.vertex_groups.new(name="pin").add([0], 1.0, "REPLACE")
    sp = rope.sinew_springs
    sp.enabled, sp.solver, sp.pin_group, sp.vertex_mass, sp.stiffness = True, "FAST", "pin", 0.01, 200.0
    sp.bending_stiffness = sp.shear_stiffness = 0.0
    sp.mass_mode, sp.stiffness_mode, sp.max_stretch = "VERTEX", "SPRING", 0.0  # the first round's per-vertex / per-spring model
    bpy.ops.wm.save_as_mainfile(filepath=path)


if __name__ == "__main__":
    build(sys.argv[sys.argv.index("--") + 1])
