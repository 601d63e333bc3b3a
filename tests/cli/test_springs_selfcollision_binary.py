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
bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0.0, 0.0, 0.3))
box = bpy.context.active_object
coll = bpy.data.collections.new("Colliders")
scene.collection.children.link(coll)
coll.objects.link(box)
nx, ny, tilt = 2, 12, 0.05
verts = [((i / nx - 0.5) * 0.4, 2.4 * j / ny * np.sin(tilt), 0.65 + 2.4 * j / ny * np.cos(tilt))
         for j in range(ny + 1) for i in range(nx + 1)]
faces = [(j * (nx + 1) + i, j * (nx + 1) + i + 1, (j + 1) * (nx + 1) + i + 1, (j + 1) * (nx + 1) + i)
         for j in range(ny) for i in range(nx)]
me = bpy.data.meshes.new("Strip")
me.from_pydata(verts, [], faces)
ob = bpy.data.objects.new("Strip", me)
scene.collection.objects.link(ob)
bpy.context.view_layer.objects.active = ob
s = ob.sinew_springs
s.enabled, s.solver, s.collision_collection = True, "FAST", coll
s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = 0.01, 1000.0, 200.0, 0.5
s.damping, s.air_drag, s.substeps = 0.5, 0.1, 2
s.self_collision, s.self_distance = True, 0.02
scene.frame_start, scene.frame_end = 1, 24
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
