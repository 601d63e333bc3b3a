"""The headless command line on the real blender binary: bakes, summaries, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT

CLI = str(ROOT / "blender_addon" / "cli.py")
BUILDER = str(ROOT / "tests" / "cli" / "scene_builder.py")


@pytest.fixture()
def scene_file(blender, tmp_path: Path) -> Path:
    path = tmp_path / "scene.blend"
    proc = blender("--python", BUILDER, "--", str(path))
    assert proc.returncode == 0 and path.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return path


def _sinew_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("sinew:")]


def test_bakes_everything_and_saves(blender, scene_file, tmp_path):
    out = tmp_path / "out.blend"
    proc = blender(str(scene_file), "--python", CLI, "--", "--frames", "1", "10", "--save", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.is_file()
    lines = _sinew_lines(proc.stdout)
    assert any("summary" in line for line in lines)
    assert any("'Arm'" in line for line in lines) and any("'Rope'" in line for line in lines)
    # The saved file plays back without the add-on: the tip follows the target and the
    # rope hangs below its pin.
    check = blender(str(out), script="""
        import bpy
        scene = bpy.context.scene
        arm, target, rope = (bpy.data.objects[n] for n in ("Arm", "Target", "Rope"))
        worst = 0.0
        for f in range(1, 11):
            scene.frame_set(f)
            tip = arm.matrix_world @ arm.pose.bones["b3"].tail
            worst = max(worst, (tip - target.matrix_world.translation).length)
        assert worst < 1e-3, worst
        scene.frame_set(10)
        me = rope.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh()
        zs = [v.co.z for v in me.vertices]
        assert zs[-1] < zs[0] - 0.05, zs
        print("PLAYBACK-OK", worst)
    """)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "PLAYBACK-OK" in check.stdout


def test_only_named_objects(blender, scene_file, tmp_path):
    out = tmp_path / "out.blend"
    proc = blender(str(scene_file), "--python", CLI, "--", "--objects", "Rope", "--frames", "1", "4",
                   "--save", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not any("'Arm'" in line for line in _sinew_lines(proc.stdout))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--objects", "Nope", "--save", "{out}"], "no object named 'Nope'"),
        (["--objects", "Target", "--save", "{out}"], "no enabled Sinew"),
        (["--frames", "10", "1", "--save", "{out}"], "end frame comes before"),
        (["--frames", "1", "--save", "{out}"], "--frames"),
        (["--save", "/no/such/folder/out.blend"], "does not exist"),
        ([], "--save"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_1(blender, scene_file, tmp_path, args, message):
    out = tmp_path / "out.blend"
    args = [a.replace("{out}", str(out)) for a in args]
    proc = blender(str(scene_file), "--python", CLI, "--", *args)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stdout.splitlines() if line.startswith("sinew: error:")]
    assert len(errors) == 1 and message in errors[0], proc.stdout[-2000:]
    assert not out.exists()


def test_nothing_to_bake(blender, tmp_path):
    empty = tmp_path / "empty.blend"
    proc = blender(script=f"import bpy; bpy.ops.wm.save_as_mainfile(filepath={str(empty)!r})")
    assert proc.returncode == 0
    proc = blender(str(empty), "--python", CLI, "--", "--save", str(tmp_path / "o.blend"))
    assert proc.returncode == 1
    assert "sinew: error: nothing to bake" in proc.stdout


def test_diverging_bake_fails_cleanly(blender, scene_file, tmp_path):
    """EXPLICIT with a huge stiffness would diverge: one error line saying how many
    substeps it needs, exit 1."""
    bad = tmp_path / "bad.blend"
    proc = blender(str(scene_file), script=f"""
        import bpy, sys
        sys.path.insert(0, {str(ROOT)!r})
        import blender_addon
        blender_addon.register()
        sp = bpy.data.objects["Rope"].sinew_springs
        sp.solver, sp.stiffness, sp.substeps = "EXPLICIT", 1e9, 1
        bpy.ops.wm.save_as_mainfile(filepath={str(bad)!r})
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "out.blend"
    proc = blender(str(bad), "--python", CLI, "--", "--objects", "Rope", "--save", str(out))
    assert proc.returncode == 1, proc.stdout[-3000:]
    errors = [line for line in proc.stdout.splitlines() if line.startswith("sinew: error:")]
    assert len(errors) == 1 and "needs" in errors[0] and "substeps" in errors[0], proc.stdout[-2000:]
    assert not out.exists()


def test_help(blender):
    proc = blender("--python", CLI, "--", "--help")
    assert proc.returncode == 0
    assert "--frames" in proc.stdout and "--objects" in proc.stdout and "--save" in proc.stdout
