"""Spring bakes through the real operators: physics, pins, colliders, outputs, free, errors."""

from __future__ import annotations

import importlib
import math

import bpy
import numpy as np
import pytest

from tests.blender.conftest import ADDON_MODULE
from tools.scenes import meshes


# ----------------------------------------------------------------------------- helpers
def core_springs():
    return importlib.import_module(ADDON_MODULE + ".core.springs")


def evaluated(ob: bpy.types.Object) -> np.ndarray:
    """Evaluated vertex positions (object space), ``(n, 3)`` float64."""
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    me = ev.to_mesh()
    co = np.empty(3 * len(me.vertices), dtype=np.float32)
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    return co.reshape(-1, 3).astype(np.float64)


def world_matrix(ob: bpy.types.Object) -> np.ndarray:
    return np.array([list(r) for r in ob.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world])


def to_world(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    return x @ m[:3, :3].T + m[:3, 3]


def play(scene, ob, frames) -> np.ndarray:
    out = []
    for f in frames:
        scene.frame_set(int(f))
        out.append(evaluated(ob))
    return np.array(out)


def hanging_grid(n: int = 6, size: float = 1.0, name: str = "Cloth") -> bpy.types.Object:
    """An n×n-cut grid hanging in XZ; vertex group "pins" holds the two top corners."""
    ob = meshes.hanging_grid(n, size, name)
    s = ob.sinew_springs
    s.enabled = True
    s.pin_group = "pins"
    s.stiffness, s.shear_stiffness, s.bending_stiffness = 800.0, 80.0, 8.0
    s.vertex_mass, s.damping, s.air_drag = 0.05, 0.5, 0.2
    s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0  # the first round's per-vertex / per-spring model
    return ob


def topology(me):
    e = np.empty(2 * len(me.edges), dtype=np.int64)
    me.edges.foreach_get("vertices", e)
    ls = np.empty(len(me.polygons), dtype=np.int64)
    lt = np.empty(len(me.polygons), dtype=np.int64)
    me.polygons.foreach_get("loop_start", ls)
    me.polygons.foreach_get("loop_total", lt)
    lv = np.empty(len(me.loops), dtype=np.int64)
    me.loops.foreach_get("vertex_index", lv)
    return len(me.vertices), e.reshape(-1, 2), ls, lt, lv


def reference(scene, ob, frames: int, pinned: np.ndarray, pin_traj=None, mats=None, colliders=None):
    """core's simulation of the object's input (world space) → object space ``(F, n, 3)``."""
    cs = core_springs()
    s = ob.sinew_springs
    scene.frame_set(scene.frame_start)
    m0 = world_matrix(ob)
    x0 = to_world(m0, evaluated(ob))
    ss = cs.build_springs(*topology(ob.data), shear=s.shear_stiffness > 0, bending=s.bending_stiffness > 0)
    g = np.array(scene.gravity) if scene.use_gravity else np.zeros(3)
    model = cs.build_model(x0, ss, stiffness=s.stiffness, shear_stiffness=s.shear_stiffness,
                           bending_stiffness=s.bending_stiffness, damping=s.damping,
                           vertex_mass=s.vertex_mass, pinned=pinned, air_drag=s.air_drag, gravity=g)
    if pin_traj is None:
        pin_traj = np.repeat(x0[pinned][None], frames, axis=0)
    pos, _ = cs.simulate(model, s.solver, frames, fps=scene.render.fps / scene.render.fps_base,
                         substeps=s.substeps, iterations=s.iterations, pin_trajectory=pin_traj,
                         colliders_per_frame=colliders)
    if mats is None:
        mats = np.repeat(m0[None], frames, axis=0)
    inv = np.linalg.inv(mats[:, :3, :3])
    return np.einsum("fij,fnj->fni", inv, pos - mats[:, None, :3, 3])


def pin_mask(ob) -> np.ndarray:
    mask = np.zeros(len(ob.data.vertices), dtype=bool)
    gi = ob.vertex_groups["pins"].index
    for v in ob.data.vertices:  # test-side reference reader: a plain loop is fine here
        mask[v.index] = any(g.group == gi and g.weight > 0 for g in v.groups)
    return mask


def snapshot(ob) -> dict:
    """Everything free_bake must restore, as comparable plain data (animation at frame 1)."""
    bpy.context.scene.frame_set(1)
    me = ob.data
    co = np.empty(3 * len(me.vertices), dtype=np.float32)
    me.vertices.foreach_get("co", co)
    snap = {
        "co": co.tobytes(),
        "modifiers": [(m.name, m.type, m.show_viewport, m.show_render) for m in ob.modifiers],
        "active_key": ob.active_shape_key_index,
        "show_only": ob.show_only_shape_key,
        "actions": sorted(a.name for a in bpy.data.actions),
        "keys_blocks": len(bpy.data.shape_keys),
        "obj_action": ob.animation_data.action.name if ob.animation_data and ob.animation_data.action else None,
    }
    key = me.shape_keys
    if key is not None:
        blocks = []
        for kb in key.key_blocks:
            d = np.empty(3 * len(kb.data), dtype=np.float32)
            kb.data.foreach_get("co", d)
            blocks.append((kb.name, round(kb.value, 6), kb.mute, kb.relative_key.name, d.tobytes()))
        snap["key"] = (key.use_relative, blocks)
        ad = key.animation_data
        snap["key_anim"] = None if ad is None else (
            ad.action.name if ad.action else None,
            sorted((fc.data_path, fc.array_index, tuple(kp.co[:] for kp in fc.keyframe_points))
                   for fc in _fcurves(key)))
    return snap


def _fcurves(id_data):
    compat = importlib.import_module(ADDON_MODULE + ".compat")
    return compat.fcurves(id_data)


def bake(**kw):
    return bpy.ops.sinew.bake_springs(**kw)


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("solver", ["FAST", "IMPLICIT", "SYMPLECTIC"])
def test_bake_equals_core_simulation(scene, solver):
    scene.frame_start, scene.frame_end = 3, 17
    ob = hanging_grid(5)
    ob.location = (0.3, -0.2, 1.5)
    ob.rotation_euler = (math.pi / 2, 0.0, 0.4)
    ob.scale = (1.2, 1.0, 0.9)
    ob.sinew_springs.solver = solver
    ob.sinew_springs.substeps = 20 if solver == "SYMPLECTIC" else 1
    pinned = pin_mask(ob)
    want = reference(scene, ob, 15, pinned)
    assert bake() == {"FINISHED"}
    s = ob.sinew_springs
    assert s.baked and (s.bake_frame_start, s.bake_frame_end) == (3, 17)
    got = play(scene, ob, range(3, 18))
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.ptp(got[:, :, 1]) > 0.01  # it really moved (falls along local -Y)
    assert 0.0 < s.bake_max_strain < 1.0 and s.bake_iterations >= 1


def test_rope_equilibrium(scene):
    n, seg, m, k = 6, 0.2, 0.1, 400.0
    me = bpy.data.meshes.new("Rope")
    me.from_pydata([(0.0, 0.0, -seg * i) for i in range(n)], [(i, i + 1) for i in range(n - 1)], [])
    ob = bpy.data.objects.new("Rope", me)
    scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    ob.vertex_groups.new(name="pins").add([0], 1.0, "REPLACE")
    s = ob.sinew_springs
    s.enabled, s.pin_group, s.solver = True, "pins", "IMPLICIT"
    s.vertex_mass, s.stiffness, s.shear_stiffness, s.bending_stiffness = m, k, 0.0, 0.0
    s.damping, s.air_drag = 3.0, 2.0
    s.mass_mode, s.stiffness_mode, s.max_stretch = "VERTEX", "SPRING", 0.0  # the first round's per-vertex / per-spring model
    scene.frame_start, scene.frame_end = 1, 300
    assert bake() == {"FINISHED"}
    scene.frame_set(300)
    z = evaluated(ob)[:, 2]
    stretch = -np.diff(z) - seg
    below = m * np.arange(n - 1, 0, -1)
    expected = below * 9.81 / k
    np.testing.assert_allclose(stretch, expected, rtol=0.01)


def test_pins_follow_hook_deformed_mesh(scene):
    scene.frame_start, scene.frame_end = 1, 12
    ob = hanging_grid(4)
    empty = bpy.data.objects.new("Handle", None)
    scene.collection.objects.link(empty)
    hook = ob.modifiers.new("Hook", "HOOK")
    hook.object = empty
    hook.vertex_group = "pins"
    empty.location = (0.0, 0.0, 0.0)
    empty.keyframe_insert("location", frame=1)
    empty.location = (0.6, 0.2, 0.5)
    empty.keyframe_insert("location", frame=12)
    pinned = pin_mask(ob)
    deformed = play(scene, ob, range(1, 13))
    assert np.ptp(deformed[:, pinned, 0]) > 0.3  # the hook really moves the pins
    mats = np.array([world_matrix(ob)] * 12)
    want = reference(scene, ob, 12, pinned,
                     pin_traj=to_world(mats[0], deformed.reshape(-1, 3)).reshape(12, -1, 3)[:, pinned])
    assert bake() == {"FINISHED"}
    assert not hook.show_viewport  # it fed the bake: switched off while baked
    got = play(scene, ob, range(1, 13))
    np.testing.assert_allclose(got[:, pinned], deformed[:, pinned], atol=1e-6)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_cloth_over_sphere_collider_stays_outside(scene):
    cs = core_springs()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0.0, 0.0, 0.0), segments=24, ring_count=12)
    sphere = bpy.context.active_object
    coll = bpy.data.collections.new("Colliders")
    scene.collection.children.link(coll)
    coll.objects.link(sphere)
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=12, y_subdivisions=12, size=1.6, location=(0, 0, 0.7))
    ob = bpy.context.active_object
    s = ob.sinew_springs
    s.enabled, s.collision_collection = True, coll
    s.stiffness, s.shear_stiffness, s.bending_stiffness, s.vertex_mass = 500.0, 50.0, 2.0, 0.02
    s.substeps = 2
    scene.frame_start, scene.frame_end = 1, 40
    assert bake() == {"FINISHED"}
    me = sphere.data
    v = np.empty(3 * len(me.vertices))
    me.vertices.foreach_get("co", v)
    me.calc_loop_triangles()
    t = np.empty(3 * len(me.loop_triangles), dtype=np.int64)
    me.loop_triangles.foreach_get("vertices", t)
    collider = cs.TriangleMesh(v.reshape(-1, 3), t.reshape(-1, 3))
    closest = []
    for f in (10, 25, 40):
        scene.frame_set(f)
        x = to_world(world_matrix(ob), evaluated(ob))
        d = collider.signed_distance(x)
        assert d.min() >= 0.02 - 1e-4, f  # default thickness 0.02 m
        closest.append(d.min())
    assert min(closest) < 0.03  # the cloth really rests on the sphere
    scene.frame_set(40)
    assert to_world(world_matrix(ob), evaluated(ob))[:, 2].min() < 0.2  # and drapes down its sides


def _user_object(scene):
    """A grid with the user's own shape keys (one animated), deform and generative modifiers."""
    ob = hanging_grid(4)
    ob.shape_key_add(name="Basis", from_mix=False)
    bump = ob.shape_key_add(name="Bump", from_mix=False)
    d = np.empty(3 * len(bump.data), dtype=np.float32)
    bump.data.foreach_get("co", d)
    d[2::3] += 0.1
    bump.data.foreach_set("co", d)
    bump.value = 0.3
    bump.keyframe_insert("value", frame=1)
    bump.value = 0.8
    bump.keyframe_insert("value", frame=10)
    other = ob.shape_key_add(name="Muted", from_mix=False)
    other.mute = True
    ob.active_shape_key_index = 1
    wave = ob.modifiers.new("Wave", "WAVE")
    wave.height = 0.05
    off = ob.modifiers.new("Twist", "SIMPLE_DEFORM")
    off.show_viewport = False
    ob.modifiers.new("Subsurf", "SUBSURF").levels = 1
    scene.frame_start, scene.frame_end = 1, 10
    return ob


@pytest.mark.parametrize("output", ["KEYFRAMES", "CACHE"])
def test_free_restores_user_keys_and_modifiers(scene, output, tmp_path):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    scene = bpy.context.scene
    ob = _user_object(scene)
    ob.sinew_springs.output = output
    before = snapshot(ob)
    inputs = play(scene, ob, range(1, 11))
    assert bake() == {"FINISHED"}
    assert snapshot(ob) != before
    assert not ob.modifiers["Wave"].show_viewport and ob.modifiers["Subsurf"].show_viewport
    assert ob.data.shape_keys.key_blocks["Bump"].mute
    subdivided = play(scene, ob, [5])[0]
    assert len(subdivided) > len(ob.data.vertices)  # the generative modifier applies on top
    assert bpy.ops.sinew.free_bake() == {"FINISHED"}
    assert snapshot(ob) == before
    assert not ob.sinew_springs.baked
    np.testing.assert_allclose(play(scene, ob, range(1, 11)), inputs, atol=1e-6)
    if output == "CACHE":
        assert not (tmp_path / "sinew_cache").exists()


def test_free_removes_created_key_and_action(scene):
    ob = hanging_grid(4)
    scene.frame_start, scene.frame_end = 1, 5
    before = snapshot(ob)
    n_keys, n_actions = len(bpy.data.shape_keys), len(bpy.data.actions)
    assert bake() == {"FINISHED"}
    assert ob.data.shape_keys is not None and len(bpy.data.actions) == n_actions + 1
    assert [kb.name for kb in ob.data.shape_keys.key_blocks] == ["Basis"] + [f"sinew_f{f:04d}" for f in range(1, 6)]
    assert bpy.ops.sinew.free_bake() == {"FINISHED"}
    assert ob.data.shape_keys is None
    assert len(bpy.data.actions) == n_actions and len([k for k in bpy.data.shape_keys if k.users]) == n_keys
    assert snapshot(ob) == before


def test_rebake_replaces_old_bake(scene):
    ob = _user_object(scene)
    scene.frame_end = 6
    assert bake() == {"FINISHED"}
    first = play(scene, ob, range(1, 7))
    assert bake() == {"FINISHED"}  # reads the un-baked input again, frees, writes
    names = [kb.name for kb in ob.data.shape_keys.key_blocks]
    assert names == ["Basis", "Bump", "Muted"] + [f"sinew_f{f:04d}" for f in range(1, 7)]
    np.testing.assert_allclose(play(scene, ob, range(1, 7)), first, atol=1e-6)
    ob.sinew_springs.stiffness *= 3
    assert bake() == {"FINISHED"}
    assert np.abs(play(scene, ob, range(1, 7)) - first).max() > 1e-4


def test_keyframes_and_cache_give_the_same_motion(scene, tmp_path):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 2, 14
    ob = hanging_grid(5)
    ob.modifiers.new("Subsurf", "SUBSURF").levels = 1
    assert bake() == {"FINISHED"}
    keyed = play(scene, ob, range(0, 17))
    assert bpy.ops.sinew.free_bake() == {"FINISHED"}
    ob.sinew_springs.output = "CACHE"
    assert bake() == {"FINISHED"}
    assert (tmp_path / "sinew_cache" / "Cloth.pc2").is_file()
    assert ob.modifiers[0].type == "MESH_CACHE"
    cached = play(scene, ob, range(0, 17))
    np.testing.assert_allclose(cached, keyed, atol=1e-6)


@pytest.mark.parametrize("output", ["KEYFRAMES", "CACHE"])
def test_saved_bake_reopens_and_plays_the_same(scene, tmp_path, output):
    path = str(tmp_path / "baked.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    ob = hanging_grid(5)
    ob.sinew_springs.output = output
    assert bake() == {"FINISHED"}
    played = play(scene, ob, range(1, 13))
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=path)
    scene, ob = bpy.context.scene, bpy.data.objects["Cloth"]
    assert ob.sinew_springs.baked
    np.testing.assert_allclose(play(scene, ob, range(1, 13)), played, atol=1e-6)
    bpy.context.view_layer.objects.active = ob
    assert bpy.ops.sinew.free_bake() == {"FINISHED"}
    assert ob.data.shape_keys is None and len(ob.modifiers) == 0


def _assert_refused(ob, match, **kw):
    before = snapshot(ob)
    actions = len(bpy.data.actions)
    with pytest.raises(RuntimeError, match=match):
        bake(**kw)
    assert snapshot(ob) == before and len(bpy.data.actions) == actions
    assert not ob.sinew_springs.baked


def test_bad_input_is_refused_and_changes_nothing(scene):
    me = bpy.data.meshes.new("Points")
    me.from_pydata([(0, 0, 0), (1, 0, 0)], [], [])
    pts = bpy.data.objects.new("Points", me)
    scene.collection.objects.link(pts)
    bpy.context.view_layer.objects.active = pts
    _assert_refused(pts, "no edges")

    ob = hanging_grid(4)
    ob.sinew_springs.pin_group = "missing"
    _assert_refused(ob, "pin group 'missing' does not exist")

    ob.sinew_springs.pin_group = "pins"
    ob.sinew_springs.output = "CACHE"
    assert not bpy.data.filepath
    _assert_refused(ob, "save the .blend")

    ob.sinew_springs.output = "KEYFRAMES"
    ob.sinew_springs.solver = "EXPLICIT"
    ob.sinew_springs.stiffness = 1e7
    scene.frame_start, scene.frame_end = 1, 30
    _assert_refused(ob, r"EXPLICIT needs \d+ substeps per frame.*FAST")
    assert ob.data.shape_keys is None


def test_generative_modifiers_are_not_simulated(scene):
    ob = hanging_grid(4)
    weld = ob.modifiers.new("Weld", "WELD")
    weld.merge_threshold = 10.0  # would collapse the grid if it were part of the input
    assert bake(frame_start=1, frame_end=3) == {"FINISHED"}
    assert weld.show_viewport
    weld.show_viewport = False
    scene.frame_set(3)
    assert len(evaluated(ob)) == len(ob.data.vertices)


def test_topology_change_stops_the_bake(scene):
    ob = hanging_grid(4)
    small = hanging_grid(2, name="Small").data
    big = ob.data

    def swap(scn, *_):
        ob.data = small if scn.frame_current >= 3 else big

    bpy.app.handlers.frame_change_pre.append(swap)
    try:
        bpy.context.view_layer.objects.active = ob
        with pytest.raises(RuntimeError, match="vertex count changed at frame 3"):
            bake(frame_start=1, frame_end=5)
    finally:
        bpy.app.handlers.frame_change_pre.remove(swap)
    assert ob.data == big and big.shape_keys is None and not ob.sinew_springs.baked


# ----------------------------------------------------------------------------- issue 16
def _sheet_for_preset(name: str, cuts: int = 8):
    ob = meshes.hanging_grid(cuts, 1.0)
    assert bpy.ops.sinew.springs_preset(preset=name) == {"FINISHED"}
    ob.sinew_springs.enabled, ob.sinew_springs.pin_group = True, "pins"
    return ob


@pytest.mark.parametrize("name", ["COTTON", "SILK", "DENIM", "RUBBER", "FLAG"])
def test_presets_stay_under_their_documented_strain(scene, name):
    presets = importlib.import_module(ADDON_MODULE + ".springs.presets")
    scene.frame_start, scene.frame_end = 1, 24
    ob = _sheet_for_preset(name)
    s = ob.sinew_springs
    assert s.mass_mode == "DENSITY" and s.stiffness_mode == "MATERIAL"
    assert bake() == {"FINISHED"}
    coarse, fine = presets.MEASURED[name]
    assert 0.0 < s.bake_max_strain <= max(coarse, fine) + 1e-3
    if s.max_stretch > 0:
        assert s.bake_max_strain <= s.max_stretch + 1e-3  # the strain limit holds
    # the same preset on a twice finer mesh weighs the same and hangs the same
    scene.frame_set(24)
    low = evaluated(ob)[:, 1].min()
    fine_ob = _sheet_for_preset(name, cuts=16)
    assert bake() == {"FINISHED"}
    scene.frame_set(24)
    assert abs(evaluated(fine_ob)[:, 1].min() - low) < 0.03  # 3 % of the 1 m sheet


def test_pre_roll_is_simulated_but_not_written(scene):
    scene.frame_start, scene.frame_end = 5, 8
    ob = hanging_grid(4)
    rest = evaluated(ob)
    ref = reference(scene, ob, 16, pin_mask(ob))  # frames 0..15 of the same simulation
    ob.sinew_springs.pre_roll = 12
    assert bake() == {"FINISHED"}
    s = ob.sinew_springs
    assert (s.bake_frame_start, s.bake_frame_end) == (5, 8)
    got = play(scene, ob, range(5, 9))
    # the first written frame is already the settled state, 12 frames after the rest pose
    assert np.abs(got[0] - rest).max() > 0.01
    np.testing.assert_allclose(got[0], ref[12], atol=1e-6)
    np.testing.assert_allclose(got[3], ref[15], atol=1e-6)


def test_soft_pins_sag_below_their_targets(scene):
    scene.frame_start, scene.frame_end = 1, 30
    lows = {}
    for weight in (1.0, 0.5):
        ob = hanging_grid(4, name=f"Soft{weight}")
        corners = np.flatnonzero(pin_mask(ob)).tolist()
        ob.vertex_groups["pins"].add(corners, weight, "REPLACE")
        s = ob.sinew_springs
        s.pin_stiffness = 30.0
        top = evaluated(ob)[corners]
        bpy.context.view_layer.objects.active = ob
        assert bake() == {"FINISHED"}
        scene.frame_set(30)
        x = evaluated(ob)
        sag = top[:, 1] - x[corners, 1]  # the grid hangs along local -Y
        assert np.all(sag > 1e-3)  # soft: the pinned corners hang below their targets
        lows[weight] = x[:, 1].min()
    assert lows[0.5] < lows[1.0] - 1e-3  # half the weight, half the pin stiffness: sags more


def test_a_collider_whose_quads_split_anew_still_moves_within_the_frame(addon):
    # An armature-deformed body's loop triangles can split a bent quad along its other
    # diagonal from one frame to the next; the vertices are the same, so the body still
    # moves linearly from the frame before (it used to stand still for that frame).
    ops = importlib.import_module(ADDON_MODULE + ".springs.operators")
    mesh = core_springs().TriangleMesh
    v0 = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
    v1, v2 = v0 + [0.0, 0.0, 0.5], v0 + [0.0, 0.0, 1.0]
    split_a, split_b = np.array([[0, 1, 2], [0, 2, 3]]), np.array([[0, 1, 3], [1, 2, 3]])
    frames = [[(v0, split_a, 0.02, 0.05)], [(v1, split_b, 0.02, 0.05)], [(v2, split_b, 0.02, 0.05)],
              [(np.vstack([v2, [[2.0, 2.0, 2.0]]]), np.vstack([split_b, [[2, 3, 4]]]), 0.02, 0.05)]]
    cols = [row[0] for row in ops.collider_frames(mesh, frames)]
    assert cols[0].previous is None
    assert np.array_equal(cols[1].previous, v0) and np.array_equal(cols[1].triangles, split_b)
    assert np.array_equal(cols[2].previous, v1)
    assert cols[3].previous is None  # other vertices: nothing to move from
