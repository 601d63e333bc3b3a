"""One spring bake through the real ``blender -b`` binary (Debian's 3.4), from the source tree."""

from __future__ import annotations

import json

from tests.conftest import ROOT

_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
import bpy, numpy as np
import blender_addon
blender_addon.register()

def evaluated(ob):
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    co = np.empty(3 * len(me.vertices), dtype=np.float32)
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    return co.reshape(-1, 3).astype(float)

bpy.ops.wm.read_homefile(use_empty=True)
bpy.ops.wm.save_as_mainfile(filepath={blend!r})
scene = bpy.context.scene
n, seg, m, k = 6, 0.2, 0.1, 400.0
me = bpy.data.meshes.new("Rope")
me.from_pydata([(0.0, 0.0, -seg * i) for i in range(n)], [(i, i + 1) for i in range(n - 1)], [])
ob = bpy.data.objects.new("Rope", me)
scene.collection.objects.link(ob)
bpy.context.view_layer.objects.active = ob
ob.location = (0.0, 0.0, 0.0)  # the hook starts with no offset
ob.vertex_groups.new(name="pins").add([0], 1.0, "REPLACE")
empty = bpy.data.objects.new("Handle", None)
scene.collection.objects.link(empty)
hook = ob.modifiers.new("Hook", "HOOK")
hook.object, hook.vertex_group = empty, "pins"
empty.location = (0.0, 0.0, 0.0)
empty.keyframe_insert("location", frame=1)
empty.location = (0.5, 0.0, 0.0)
empty.keyframe_insert("location", frame=40)
s = ob.sinew_springs
s.enabled, s.pin_group, s.solver = True, "pins", "IMPLICIT"
s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = m, k, 0.0, 0.0
s.damping, s.air_drag = 3.0, 2.0
s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0
scene.frame_start, scene.frame_end = 1, 300
top = []
for f in (1, 20, 40):
    scene.frame_set(f)
    top.append(evaluated(ob)[0].tolist())
out = {{"version": bpy.app.version_string}}
for output in ("KEYFRAMES", "CACHE"):
    s.output = output
    assert bpy.ops.sinew.bake_springs() == {{"FINISHED"}}
    frames = {{}}
    for f in (1, 20, 40, 300):
        scene.frame_set(f)
        frames[f] = evaluated(ob)
    out[output] = {{str(f): x.tolist() for f, x in frames.items()}}
    out[output + "_pins"] = [frames[f][0].tolist() for f in (1, 20, 40)]
    assert bpy.ops.sinew.free_bake() == {{"FINISHED"}}
    assert ob.data.shape_keys is None and [m.name for m in ob.modifiers] == ["Hook"]
    assert hook.show_viewport and hook.show_render
out["top"] = top
print("SPRINGS-RESULT " + json.dumps(out))
"""


def test_rope_bake_on_the_blender_binary(blender, tmp_path):
    proc = blender(script=_SCRIPT.format(root=str(ROOT), blend=str(tmp_path / "rope.blend")))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("SPRINGS-RESULT "))
    out = json.loads(line[len("SPRINGS-RESULT "):])
    print(out["version"])
    import numpy as np

    n, seg, m, k = 6, 0.2, 0.1, 400.0
    for output in ("KEYFRAMES", "CACHE"):
        # the pinned top vertex follows the animated hook
        np.testing.assert_allclose(out[output + "_pins"], out["top"], atol=1e-5)
        # long after the hook stopped, the rope hangs in its analytic equilibrium
        z = np.array(out[output]["300"])[:, 2]
        stretch = -np.diff(z) - seg
        expected = m * np.arange(n - 1, 0, -1) * 9.81 / k
        np.testing.assert_allclose(stretch, expected, rtol=0.01)
    for f in ("1", "20", "40", "300"):
        np.testing.assert_allclose(out["CACHE"][f], out["KEYFRAMES"][f], atol=1e-5)


_PRESET_SCRIPT = """
import json, math, sys
sys.path.insert(0, {root!r})
import bpy, numpy as np
import blender_addon
blender_addon.register()
from blender_addon.springs.presets import MEASURED

bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
bpy.ops.mesh.primitive_grid_add(x_subdivisions=6, y_subdivisions=6, size=1.0)
ob = bpy.context.active_object
ob.rotation_euler = (math.pi / 2, 0.0, 0.0)
co = np.empty(3 * len(ob.data.vertices), dtype=np.float32)
ob.data.vertices.foreach_get("co", co)
co = co.reshape(-1, 3)
top = np.flatnonzero(co[:, 1] > co[:, 1].max() - 1e-6)
ob.vertex_groups.new(name="pins").add([int(top[0]), int(top[-1])], 1.0, "REPLACE")
assert bpy.ops.sinew.springs_preset(preset="COTTON") == {{"FINISHED"}}
s = ob.sinew_springs
s.enabled, s.pin_group, s.pre_roll = True, "pins", 6
scene.frame_start, scene.frame_end = 1, 12
assert bpy.ops.sinew.bake_springs() == {{"FINISHED"}}
scene.frame_set(1)
ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
me = ev.to_mesh()
first = np.empty(3 * len(me.vertices), dtype=np.float32)
me.vertices.foreach_get("co", first)
ev.to_mesh_clear()
out = dict(version=bpy.app.version_string, strain=s.bake_max_strain, limit=s.max_stretch,
           documented=max(MEASURED["COTTON"]), mass_mode=s.mass_mode, frames=[s.bake_frame_start,
           s.bake_frame_end], moved=float(np.abs(first.reshape(-1, 3) - co).max()))
print("PRESET-RESULT " + json.dumps(out))
"""


def test_cotton_preset_with_pre_roll_on_the_blender_binary(blender, tmp_path):
    proc = blender(script=_PRESET_SCRIPT.format(root=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("PRESET-RESULT "))
    out = json.loads(line[len("PRESET-RESULT "):])
    assert out["mass_mode"] == "DENSITY" and out["frames"] == [1, 12]
    assert 0.0 < out["strain"] <= min(out["limit"], out["documented"]) + 1e-3
    assert out["moved"] > 1e-3  # frame 1 is already the pre-rolled, hanging state


_COLLIDER_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
import bpy, numpy as np
import blender_addon
blender_addon.register()
bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
bpy.ops.mesh.primitive_uv_sphere_add(radius=0.4, segments=16, ring_count=8)
ball = bpy.context.active_object
ball.modifiers.new("Collision", "COLLISION")  # default settings
bpy.ops.mesh.primitive_grid_add(x_subdivisions=8, y_subdivisions=8, size=1.2, location=(0, 0, 0.6))
ob = bpy.context.active_object
ob.sinew_springs.enabled = True
scene.frame_start, scene.frame_end = 1, 15
assert bpy.ops.sinew.bake_springs() == {{"FINISHED"}}
out = {{"version": bpy.app.version_string, "contacts": ob.sinew_springs.bake_contacts,
        "penetration": ob.sinew_springs.bake_max_penetration, "frames": {{}}}}
for f in (1, 8, 15):
    scene.frame_set(f)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    co = np.empty(3 * len(me.vertices), dtype=np.float32)
    me.vertices.foreach_get("co", co)
    m = np.array([list(r) for r in ev.matrix_world])
    ev.to_mesh_clear()
    x = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
    out["frames"][str(f)] = x.tolist()
print("COLLIDER-RESULT " + json.dumps(out))
"""


def test_collision_modifier_collider_on_the_blender_binary(blender):
    proc = blender(script=_COLLIDER_SCRIPT.format(root=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("COLLIDER-RESULT "))
    out = json.loads(line[len("COLLIDER-RESULT "):])
    import numpy as np

    assert out["contacts"] > 0 and out["penetration"] == 0.0
    for f in ("8", "15"):
        x = np.array(out["frames"][f])
        # outside the sphere: its 16×8 polygon lies inside the 0.4 m sphere, so radius > 0.4
        assert np.linalg.norm(x, axis=1).min() > 0.4, f
    assert np.array(out["frames"]["15"])[:, 2].max() < 0.6  # it fell onto the ball
