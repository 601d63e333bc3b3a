"""Baked motion leaves Blender through its own Alembic exporter and comes back unchanged.

The path to other tools and game engines: a baked spring mesh (shape keys) and a mesh skinned
to a baked IK chain (rotation keys) are exported with ``wm.alembic_export``, imported into an
empty scene with ``wm.alembic_import``, and every vertex is where Blender put it before, at
every frame (world space, within 1e-5 m; Alembic stores float32 positions).

Runs in both bpy tiers: the 5.2 and 4.5 wheels are both built with Alembic
(``bpy.app.build_options.alembic``), and the test fails (does not skip) if one is not.
"""

from __future__ import annotations

import math

import bpy
import numpy as np

from tools.scenes import bones

FRAMES = range(1, 13)


def world_vertices(ob: bpy.types.Object) -> np.ndarray:
    """Evaluated vertices of ``ob`` in world space, ``(n, 3)``."""
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    me = ev.to_mesh()
    co = np.empty(3 * len(me.vertices), dtype=np.float64)
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    m = np.array([list(r) for r in ev.matrix_world])
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def play(scene: bpy.types.Scene, names: list[str]) -> dict[str, np.ndarray]:
    out: dict[str, list] = {n: [] for n in names}
    for f in FRAMES:
        scene.frame_set(f)
        for n in names:
            out[n].append(world_vertices(bpy.data.objects[n]))
    return {n: np.array(v) for n, v in out.items()}


def ik_arm_with_skin(scene: bpy.types.Scene) -> None:
    """A 3-bone chain reaching for a keyed empty, a box per bone skinned to it."""
    arm = bones.straight_chain("Arm", 3, 0.5, location=(0.0, 0.0, 0.2))
    verts, faces = [], []
    skin = bpy.data.objects.new("Skin", bpy.data.meshes.new("Skin"))
    groups = []
    for i in range(3):
        base = len(verts)
        for z in (0.5 * i + 0.02, 0.5 * (i + 1) - 0.02):
            verts += [(0.05, 0.05, z), (-0.05, 0.05, z), (-0.05, -0.05, z), (0.05, -0.05, z)]
        faces += [(base, base + 1, base + 2, base + 3), (base + 4, base + 7, base + 6, base + 5)]
        faces += [(base + k, base + 4 + k, base + 4 + (k + 1) % 4, base + (k + 1) % 4) for k in range(4)]
        groups.append(list(range(base, base + 8)))
    skin.data.from_pydata(verts, [], faces)
    scene.collection.objects.link(skin)
    skin.parent = arm
    for i, idx in enumerate(groups):
        skin.vertex_groups.new(name=f"B{i}").add(idx, 1.0, "REPLACE")
    skin.modifiers.new("Armature", "ARMATURE").object = arm
    target = bpy.data.objects.new("Target", None)
    scene.collection.objects.link(target)
    for f in FRAMES:
        a = 2 * math.pi * (f - 1) / len(FRAMES)
        target.location = (0.6 * math.cos(a), 0.4 * math.sin(a), 1.2)
        target.keyframe_insert("location", frame=f)
    s = arm.pose.bones["B2"].sinew_ik
    s.enabled, s.chain_length, s.solver, s.target_mode, s.target = True, 0, "DLS", "OBJECT", target
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.sinew.bake_ik(frame_start=FRAMES[0], frame_end=FRAMES[-1]) == {"FINISHED"}


def hanging_cloth(scene: bpy.types.Scene) -> None:
    """A 6×6-cut sheet hanging from its two top corners, baked to shape keys."""
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=6, y_subdivisions=6, size=1.0, location=(2.0, 0.0, 1.5))
    ob = bpy.context.active_object
    ob.name = "Sheet"
    ob.rotation_euler = (math.pi / 2, 0.0, 0.0)
    co = np.array([v.co[:] for v in ob.data.vertices])
    top = np.flatnonzero(co[:, 1] > co[:, 1].max() - 1e-6)
    corners = [int(top[np.argmin(co[top, 0])]), int(top[np.argmax(co[top, 0])])]
    ob.vertex_groups.new(name="pins").add(corners, 1.0, "REPLACE")
    s = ob.sinew_springs
    s.enabled, s.solver, s.pin_group, s.vertex_mass, s.stiffness, s.substeps = True, "FAST", "pins", 0.02, 100.0, 2
    assert bpy.ops.sinew.bake_springs(frame_start=FRAMES[0], frame_end=FRAMES[-1]) == {"FINISHED"}


def test_alembic_round_trip_plays_the_same_positions(scene, tmp_path):
    assert bpy.app.build_options.alembic, "this bpy wheel was built without Alembic"
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    ik_arm_with_skin(scene)
    hanging_cloth(scene)
    names = ["Skin", "Sheet"]
    before = play(scene, names)
    # The baked motion is there to carry: both meshes move by centimetres (1000× the tolerance).
    for n in names:
        assert np.linalg.norm(before[n] - before[n][0], axis=2).max() > 0.01, n

    path = tmp_path / "baked.abc"
    result = bpy.ops.wm.alembic_export(filepath=str(path), start=FRAMES[0], end=FRAMES[-1], selected=False,
                                       flatten=False, evaluation_mode="RENDER")
    assert result == {"FINISHED"} and path.stat().st_size > 0

    bpy.ops.wm.read_homefile(use_empty=True)
    result = bpy.ops.wm.alembic_import(filepath=str(path), set_frame_range=True)
    assert result == {"FINISHED"}
    assert all(n in bpy.data.objects for n in names), list(bpy.data.objects.keys())
    after = play(bpy.context.scene, names)
    for n in names:
        assert after[n].shape == before[n].shape, n
        err = np.abs(after[n] - before[n]).max()
        assert err < 1e-5, f"{n}: {err:.2e} m off after the Alembic round trip"
