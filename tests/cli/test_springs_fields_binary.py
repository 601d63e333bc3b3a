"""A flag in a Wind field baked by the real ``blender -b`` binary (Debian's 3.4): the field
settings are read with 3.4's attribute names, the flag moves downwind, and field_weight 0
gives the no-field bake bit for bit."""

from __future__ import annotations

import json

import numpy as np

from tests.conftest import ROOT

_SCRIPT = """
import json, math, sys
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
scene = bpy.context.scene
from tools.scenes import meshes
ob = meshes.flag_on_pole(7, 5)
s = ob.sinew_springs
s.enabled, s.pin_group, s.solver = True, "pole", "FAST"
s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = 0.02, 600.0, 60.0, 2.0
s.damping, s.air_drag, s.substeps = 0.3, 0.1, 2
s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0  # per vertex / spring
bpy.ops.object.effector_add(type="WIND", location=(0.0, -2.0, 0.0),
                            rotation=(-math.pi / 2, 0.0, 0.0))
wind = bpy.context.active_object
wind.field.strength = 300.0
bpy.context.view_layer.objects.active = ob
scene.frame_start, scene.frame_end = 1, 8
out = {{"version": bpy.app.version_string}}
for label, weight in (("wind", 1.0), ("weight0", 0.0)):
    s.field_weight = weight
    assert bpy.ops.sinew.bake_springs() == {{"FINISHED"}}
    scene.frame_set(8)
    out[label] = (evaluated(ob) @ np.array(ob.matrix_world)[:3, :3].T).tolist()
    assert bpy.ops.sinew.free_bake() == {{"FINISHED"}}
bpy.data.objects.remove(wind)
s.field_weight = 1.0
assert bpy.ops.sinew.bake_springs() == {{"FINISHED"}}
scene.frame_set(8)
out["none"] = (evaluated(ob) @ np.array(ob.matrix_world)[:3, :3].T).tolist()
print("FIELDS-RESULT " + json.dumps(out))
"""


def test_flag_in_wind_on_the_blender_binary(blender, tmp_path):
    proc = blender(script=_SCRIPT.format(root=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("FIELDS-RESULT "))
    out = json.loads(line[len("FIELDS-RESULT "):])
    print(out["version"])
    wind, weight0, none = (np.array(out[k]) for k in ("wind", "weight0", "none"))
    assert np.array_equal(weight0, none)
    assert np.abs(none[:, 1]).max() < 1e-4
    assert wind[:, 1].mean() > 0.05 and wind[:, 1].min() > -1e-4  # downwind (+Y)
