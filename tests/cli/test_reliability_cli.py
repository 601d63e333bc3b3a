"""Reliability on the real blender binary (issue 9): untrusted .blend files and bad input
through the command line. Each bad file gives exit 1, exactly one ``sinew: error:`` line,
no traceback, no output file, an untouched input file, and runs no code from the file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.conftest import ROOT

CLI = str(ROOT / "blender_addon" / "cli.py")
BUILDER = str(ROOT / "tests" / "cli" / "scene_builder.py")

# Variants of scene_builder's scene, made in one blender run; {marker} is a file the
# hostile expressions would create if anything ever executed them.
VARIANTS = r"""
import sys, bpy
sys.path.insert(0, {root!r})
from tests.cli import scene_builder
out, marker = {out!r}, {marker!r}
hostile = [
    "__import__('os').system('touch " + marker + "')",
    "open('" + marker + "', 'w').write('x')",
    "t.__class__.__base__.__subclasses__()",
    "exec(\"import os; os.system('touch " + marker + "')\")",
]
for i, text in enumerate(hostile):
    scene_builder.build(out + f"/hostile{{i}}.blend")
    s = bpy.data.objects["Arm"].pose.bones["b3"].sinew_ik
    s.target_mode = "EXPRESSION"
    s.expression_x, s.expression_y, s.expression_z = "0.5", text, "1"
    bpy.ops.wm.save_as_mainfile(filepath=out + f"/hostile{{i}}.blend")

scene_builder.build(out + "/beyond_root.blend")
bpy.data.objects["Arm"].pose.bones["b3"].sinew_ik.chain_length = 9
bpy.ops.wm.save_as_mainfile(filepath=out + "/beyond_root.blend")

scene_builder.build(out + "/pin_missing.blend")
bpy.data.objects["Rope"].sinew_springs.pin_group = "nope"
bpy.ops.wm.save_as_mainfile(filepath=out + "/pin_missing.blend")

scene_builder.build(out + "/no_edges.blend")
me = bpy.data.meshes.new("Dots")
me.from_pydata([(0, 0, 0), (1, 0, 0)], [], [])
ob = bpy.data.objects.new("Dots", me)
bpy.context.scene.collection.objects.link(ob)
ob.sinew_springs.enabled = True
bpy.ops.wm.save_as_mainfile(filepath=out + "/no_edges.blend")

scene_builder.build(out + "/explicit.blend")
sp = bpy.data.objects["Rope"].sinew_springs
sp.solver, sp.stiffness = "EXPLICIT", 1e9
bpy.ops.wm.save_as_mainfile(filepath=out + "/explicit.blend")
print("VARIANTS-OK")
"""

CASES = [("hostile0", "at character"), ("hostile1", "at character"), ("hostile2", "at character"),
         ("hostile3", "at character"), ("beyond_root", "beyond the root"),
         ("pin_missing", "pin group 'nope' does not exist"), ("no_edges", "no edges"),
         ("explicit", r"EXPLICIT needs \d+ substeps per frame")]


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    import subprocess

    from tests.cli.conftest import blender_binary, clean_env

    out = tmp_path_factory.mktemp("variants")
    marker = out / "PWNED"
    script = out / "variants.py"
    script.write_text(VARIANTS.format(root=str(ROOT), out=str(out), marker=str(marker)))
    proc = subprocess.run([blender_binary(), "-b", "--factory-startup", "--python-exit-code", "1",
                           "--python", str(script)], capture_output=True, text=True, cwd=ROOT,
                          env=clean_env(), timeout=600)
    assert proc.returncode == 0 and "VARIANTS-OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, marker


@pytest.mark.parametrize("name,message", CASES, ids=[c[0] for c in CASES])
def test_bad_file_one_error_line_nothing_written(blender, variants, tmp_path, name, message):
    import re

    folder, marker = variants
    src = folder / f"{name}.blend"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "out.blend"
    proc = blender(str(src), "--python", CLI, "--", "--frames", "1", "10", "--save", str(out))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text[-3000:]
    errors = [line for line in proc.stdout.splitlines() if line.startswith("sinew: error:")]
    assert len(errors) == 1 and re.search(message, errors[0]), text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert not out.exists() and not (tmp_path / "out.blend1").exists()
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
    assert not marker.exists() and not Path("/tmp/PWNED").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "user") == []
