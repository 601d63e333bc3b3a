"""Reliability of IK bakes (issue 9): bad input refused with one message and the scene
unchanged (full snapshot), a 100,000-frame range (bounded memory, progress, cancel through
the job API and through the modal operator's Esc), no lost work, bit-identical re-bakes,
and playback of a saved bake in a fresh Blender that never loads the add-on."""

from __future__ import annotations

import importlib
import tracemalloc

import bpy
import numpy as np
import pytest

from tests.blender import ik_rig as rig_
from tests.blender.conftest import ADDON_MODULE
from tests.blender.scene_snapshot import snapshot
from tests.blender.test_reliability_springs import play_without_addon


@pytest.fixture()
def ik(scene, addon):
    return importlib.import_module(ADDON_MODULE + ".ik.operators")


def _bake(**kw):
    return bpy.ops.sinew.bake_ik(**kw)


def _rig(scene):
    scene.frame_start, scene.frame_end = 1, 12
    rig = rig_.make_chain(n=3)
    tgt = rig_.make_target(frames=range(1, 13))
    rig_.activate(rig)
    scene.frame_set(4)
    return rig, tgt


# ----------------------------------------------------------------------------- bad input


def _no_chain(rig, tgt):
    return "no enabled Sinew IK chain", {}


def _chain_beyond_root(rig, tgt):
    rig_.enable_chain(rig, "B2", target=tgt, chain_length=9)
    return "beyond the root", {}


def _target_deleted(rig, tgt):
    rig_.enable_chain(rig, "B2", target=tgt)
    bpy.data.objects.remove(tgt)
    return "no target object set", {}


def _target_is_chain_child(rig, tgt):
    """A target parented to the chain's own tip bone moves with the solution: a feedback
    loop with no meaningful answer, to be refused."""
    child = bpy.data.objects.new("Child", None)
    bpy.context.scene.collection.objects.link(child)
    child.parent, child.parent_type, child.parent_bone = rig, "BONE", "B2"
    rig_.enable_chain(rig, "B2", target=child)
    return r"(?i)child|depends on the chain|parented", {}


def _zero_scaled_armature(rig, tgt):
    rig_.enable_chain(rig, "B2", target=tgt)
    rig.scale = (0.0, 0.0, 0.0)
    return r"(?i)scale", {}


def _reverse_range(rig, tgt):
    rig_.enable_chain(rig, "B2", target=tgt)
    return "before frame_start", {"frame_start": 12, "frame_end": 2}


def _bad_expression(rig, tgt):
    rig_.enable_chain(rig, "B2", target_mode="EXPRESSION", expression_x="__import__('os').system('true')",
                      expression_y="0", expression_z="1")
    return "at character", {}


BAD = [_no_chain, _chain_beyond_root, _target_deleted, _target_is_chain_child, _zero_scaled_armature,
       _reverse_range, _bad_expression]


@pytest.mark.parametrize("case", BAD, ids=[c.__name__.strip("_") for c in BAD])
def test_bad_input_one_message_scene_unchanged(ik, scene, case):
    rig, tgt = _rig(scene)
    match, kw = case(rig, tgt)
    before = snapshot()
    with pytest.raises(RuntimeError, match=match) as ei:
        _bake(**kw)
    assert "Traceback" not in str(ei.value), str(ei.value)[:2000]
    assert snapshot() == before


# ----------------------------------------------------------------------------- long ranges


def _expression_rig(scene):
    rig, _tgt = _rig(scene)
    rig_.enable_chain(rig, "B2", target_mode="EXPRESSION", expression_x="0.4*sin(200*t)",
                      expression_y="0.2*cos(170*t)", expression_z="1.1 + 0.1*sin(frame/7)")
    return rig


def _job_memory(ik, rig, frames, steps):
    tracemalloc.start()
    try:
        job = ik.IKBakeJob(bpy.context, rig, 1, frames)
        created = tracemalloc.get_traced_memory()[0]
        for _ in range(steps):
            assert not job.step()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return job, created, peak


def test_100k_frames_bounded_memory_progress_and_cancel(ik, scene):
    rig = _expression_rig(scene)
    before = snapshot()
    small, small_mem, _ = _job_memory(ik, rig, 10_000, 2)
    small.cancel()
    job, mem, peak = _job_memory(ik, rig, 100_000, 20)
    # linear in the range, and small: under 1 kB per frame for a 3-bone chain
    assert mem < 1024 * 100_000 and peak < 2 * 1024 * 100_000, (mem, peak)
    assert mem < 15 * max(small_mem, 1), (mem, small_mem)
    # progress advances in chunks and is reported against the whole range
    assert job.total == 100_000 and 0 < job.done < job.total
    done = job.done
    assert not job.step() and job.done > done
    job.cancel()
    job.restore_view(bpy.context)
    assert job.rotations == {} and job.chain_stats == {}
    assert snapshot() == before


class _Event:
    def __init__(self, kind: str) -> None:
        self.type, self.value = kind, "PRESS"


def test_modal_escape_cancels_a_100k_frame_bake(ik, scene, capfd):
    """The operator's modal path (as in a window): timer ticks compute, Esc cancels and
    nothing is written. Driven directly through BakeOperator.modal with fake events."""
    bakejob = importlib.import_module(ADDON_MODULE + ".bakejob")
    rig = _expression_rig(scene)
    before = snapshot()
    reports = []

    class Op(bakejob.BakeOperator):
        def report(self, kind, text):
            reports.append((kind, text))

    op = Op()
    op._job = ik.IKBakeJob(bpy.context, rig, 1, 100_000)
    for _ in range(3):
        assert op.modal(bpy.context, _Event("TIMER")) == {"RUNNING_MODAL"}
    assert op.modal(bpy.context, _Event("MOUSEMOVE")) == {"PASS_THROUGH"}
    assert 0 < op._job.done < 100_000
    assert op.modal(bpy.context, _Event("ESC")) == {"CANCELLED"}
    assert op._job is None
    assert reports and "cancelled, nothing was changed" in reports[-1][1]
    assert snapshot() == before


def test_progress_lines_in_background(ik, scene, capfd):
    rig = _expression_rig(scene)
    assert _bake(frame_start=1, frame_end=400) == {"FINISHED"}
    out = capfd.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("Sinew: IK Rig: ")]
    assert any("400/400 (100%)" in line for line in lines), out[-2000:]
    assert rig.animation_data.action is not None


# ----------------------------------------------------------------------------- no lost work


def _key_arrays(rig) -> dict:
    compat = importlib.import_module(ADDON_MODULE + ".compat")
    out = {}
    for fc in compat.fcurves(rig):
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float64)
        fc.keyframe_points.foreach_get("co", co)
        out[(fc.data_path, fc.array_index)] = co.tobytes()
    return out


@pytest.mark.parametrize("solver", ["CCD", "FABRIK", "DLS"])
def test_bake_is_bit_identical_twice(ik, scene, solver):
    rig, tgt = _rig(scene)
    rig_.enable_chain(rig, "B2", target=tgt, solver=solver)
    assert _bake(frame_start=1, frame_end=12) == {"FINISHED"}
    first = _key_arrays(rig)
    assert first
    rig.animation_data_clear()
    for pb in rig.pose.bones:
        pb.rotation_quaternion = (1, 0, 0, 0)
    assert _bake(frame_start=1, frame_end=12) == {"FINISHED"}
    assert _key_arrays(rig) == first


def test_bake_keeps_keys_outside_its_range_and_other_objects(ik, scene):
    """User keys on the chain bones outside the baked range, other bones' and other
    objects' keys, and other actions all survive a bake and a re-bake."""
    rig, tgt = _rig(scene)
    rig_.enable_chain(rig, "B2", target=tgt, chain_length=2)  # B1, B2; B0 is not in the chain
    pb = rig.pose.bones["B1"]
    pb.rotation_quaternion = (0.9, 0.1, 0.0, 0.0)
    pb.keyframe_insert("rotation_quaternion", frame=40)
    rig.pose.bones["B0"].keyframe_insert("rotation_quaternion", frame=5)
    rig.pose.bones["B2"].keyframe_insert("location", frame=3)
    spare = bpy.data.actions.new("Spare")
    spare.use_fake_user = True
    before = _key_arrays(rig)
    target_before = snapshot()["Target"]
    assert _bake(frame_start=1, frame_end=12) == {"FINISHED"}
    assert _bake(frame_start=2, frame_end=10) == {"FINISHED"}
    after = _key_arrays(rig)
    for (path, index), co in before.items():
        keys = np.frombuffer(co).reshape(-1, 2)
        got = np.frombuffer(after[(path, index)]).reshape(-1, 2)
        if "B0" in path or "location" in path:
            np.testing.assert_array_equal(got, keys)  # not touched at all
        else:  # chain bone: the frame-40 key is still there with its value
            assert any(row[0] == 40 and row[1] == keys[keys[:, 0] == 40][0, 1] for row in got), path
    assert "Spare" in bpy.data.actions
    assert snapshot()["Target"] == target_before


# ----------------------------------------------------------------------------- round trip


def test_saved_bake_plays_the_same_without_the_addon(ik, scene, tmp_path):
    rig, tgt = _rig(scene)
    rig_.enable_chain(rig, "B2", target=tgt, solver="DLS")
    assert _bake(frame_start=1, frame_end=12) == {"FINISHED"}
    # a mesh skinned to the chain: its evaluated vertices are what "plays the same" means
    bpy.ops.mesh.primitive_cube_add(size=0.2, location=(0, 0, 1.2))
    cube = bpy.context.active_object
    cube.parent, cube.parent_type, cube.parent_bone = rig, "BONE", "B2"
    cube.matrix_parent_inverse = (rig.matrix_world @ rig.pose.bones["B2"].matrix).inverted()
    scene.frame_set(1)
    frames = range(1, 13)
    baked = []
    for f in frames:
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        ev = cube.evaluated_get(dg)
        m = np.array(ev.matrix_world)
        co = np.array([v.co[:] for v in cube.data.vertices])
        baked.append(co @ m[:3, :3].T + m[:3, 3])
    baked = np.array(baked)
    assert np.ptp(baked[:, 0], axis=0).max() > 0.05  # it moves
    path = tmp_path / "ik.blend"
    name = cube.name
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    fresh = play_without_addon(path, name, 1, 12, tmp_path)
    np.testing.assert_allclose(fresh, baked, atol=1e-5)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene, cube = bpy.context.scene, bpy.data.objects[name]
    again = []
    for f in frames:
        scene.frame_set(f)
        m = np.array(cube.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world)
        again.append(np.array([v.co[:] for v in cube.data.vertices]) @ m[:3, :3].T + m[:3, 3])
    np.testing.assert_allclose(np.array(again), baked, atol=1e-5)
