"""The command line through the bpy module: ``python blender_addon/cli.py SCENE.blend ...``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

CLI = str(ROOT / "blender_addon" / "cli.py")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)


def _scene(tmp_path: Path) -> Path:
    path = tmp_path / "scene.blend"
    code = f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); from tests.cli import scene_builder; " \
           f"scene_builder.build({str(path)!r}); sys.stdout.flush(); os._exit(0)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path


def test_cli_bakes_and_saves(tmp_path):
    scene = _scene(tmp_path)
    out = tmp_path / "out.blend"
    proc = _run(str(scene), "--frames", "1", "8", "--save", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.is_file()
    assert "sinew: summary" in proc.stdout
    check = subprocess.run([sys.executable, "-c", f"""
import bpy
bpy.ops.wm.open_mainfile(filepath={str(out)!r})
arm, target = bpy.data.objects["Arm"], bpy.data.objects["Target"]
scene = bpy.context.scene
worst = 0.0
for f in range(1, 9):
    scene.frame_set(f)
    tip = arm.matrix_world @ arm.pose.bones["b3"].tail
    worst = max(worst, (tip - target.matrix_world.translation).length)
assert worst < 1e-3, worst
print("OK", worst, flush=True)
import os
os._exit(0)  # bpy 4.5 can deadlock in its exit handlers (a delayed-close thread)
"""], capture_output=True, text=True, timeout=600)
    assert check.returncode == 0 and "OK" in check.stdout, check.stdout[-2000:] + check.stderr[-2000:]


def test_cli_errors_exit_1(tmp_path):
    scene = _scene(tmp_path)
    for args, message in (
        ([str(scene), "--objects", "Missing", "--save", str(tmp_path / "o.blend")], "no object named 'Missing'"),
        ([str(tmp_path / "none.blend"), "--save", str(tmp_path / "o.blend")], "no such .blend file"),
        ([str(scene)], "--save"),
    ):
        proc = _run(*args)
        assert proc.returncode == 1, (args, proc.stdout[-2000:], proc.stderr[-2000:])
        lines = [line for line in proc.stdout.splitlines() if line.startswith("sinew: error:")]
        assert len(lines) == 1 and message in lines[0], proc.stdout[-2000:]
    assert not (tmp_path / "o.blend").exists()
