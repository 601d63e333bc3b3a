"""VBD on the real ``blender -b`` binary (Debian's 3.4): the kernel library loads in its Python
and a contact bake (cloth on a cube with a Collision modifier at its defaults, the COTTON
preset, which picks VBD) runs, with no vertex inside the cube at any frame."""

from __future__ import annotations

import json

import numpy as np

from tests.conftest import ROOT

_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
import bpy, numpy as np
import blender_addon
blender_addon.register()
from blender_addon import deps
from blender_addon.core import kernels

bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0, 0, 0.3))
cube = bpy.context.active_object
cube.modifiers.new("Collision", "COLLISION")
bpy.ops.mesh.primitive_grid_add(x_subdivisions=10, y_subdivisions=10, size=0.9, location=(0, 0, 0.7))
ob = bpy.context.active_object
s = ob.sinew_springs
s.enabled = True
assert bpy.ops.sinew.springs_preset(preset="COTTON") == {{"FINISHED"}}
scene.frame_start, scene.frame_end = 1, 16
assert bpy.ops.sinew.bake_springs() == {{"FINISHED"}}
frames = {{}}
for f in range(1, 17):
    scene.frame_set(f)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    co = np.empty(3 * len(me.vertices), dtype=np.float32)
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    m = np.array([list(r) for r in ob.matrix_world])
    x = co.reshape(-1, 3).astype(float) @ m[:3, :3].T + m[:3, 3]
    frames[f] = x.tolist()
out = dict(version=bpy.app.version_string, problem=deps.kernels_problem(), solver=s.solver,
           library=str(kernels.library_path()), abi=int(kernels.library().sinew_abi_version()),
           penetration=s.bake_max_penetration, contacts=s.bake_contacts, frames=frames)
print("VBD-RESULT " + json.dumps(out))
"""


def test_vbd_contact_bake_on_the_blender_binary(blender, tmp_path):
    proc = blender(script=_SCRIPT.format(root=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("VBD-RESULT "))
    out = json.loads(line[len("VBD-RESULT "):])
    print(out["version"], out["library"])
    assert out["problem"] is None and out["abi"] >= 1
    assert out["solver"] == "VBD"
    assert out["contacts"] > 0 and out["penetration"] == 0.0
    for f, x in out["frames"].items():
        x = np.asarray(x)
        inside = np.all(np.abs(x - [0.0, 0.0, 0.3]) < 0.3, axis=1)  # strictly inside the cube
        assert not np.any(inside), f
    assert np.asarray(out["frames"]["16"])[:, 2].max() < 0.7  # it fell onto the cube
