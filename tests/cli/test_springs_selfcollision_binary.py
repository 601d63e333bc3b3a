"""One self-collision bake through the real ``blender -b`` binary (Debian's 3.4)."""

from __future__ import annotations

import json

from tests.conftest import ROOT

_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
import bpy, numpy as np
import blender_addon
blender_addon.register()
from blender_addon.core.springs import count_crossings

bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
from tests.selfcollision_scene import strip_over_box
ob = strip_over_box(frames=24)
me = ob.data
assert bpy.ops.sinew.bake_springs() == {{"FINISHED"}}
me.calc_loop_triangles()
tris = np.empty(3 * len(me.loop_triangles), dtype=np.int64)
me.loop_triangles.foreach_get("vertices", tris)
tris = tris.reshape(-1, 3)
crossings, top = [], []
for f in range(1, 25):
    scene.frame_set(f)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    m = ev.to_mesh()
    co = np.empty(3 * len(m.vertices), dtype=np.float32)
    m.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    x = co.reshape(-1, 3).astype(float)
    crossings.append(count_crossings(x, tris))
    top.append(float(x[:, 2].max()))
print("SELFCOL-RESULT " + json.dumps({{"version": bpy.app.version_string, "crossings": crossings,
                                       "top": top}}))
"""


def test_self_collision_bake_on_the_blender_binary(blender, tmp_path):
    proc = blender(script=_SCRIPT.format(root=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("SELFCOL-RESULT "))
    out = json.loads(line[len("SELFCOL-RESULT "):])
    print(out["version"])
    assert out["crossings"] == [0] * 24
    assert out["top"][-1] < out["top"][0] - 0.5  # it fell and folded over the box
