"""The demo (``python3 build.py demo``) on a shortened range: files exist, checks pass."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, built_zip


def test_demo_quick(tmp_path):
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "demo.py"), "--quick", "--out", str(tmp_path / "out"),
         "--zip", str(built_zip("linux-x64"))],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "check failed" not in proc.stdout
    for name in ("demo.blend", "demo_frames.png", "demo_ik.png", "demo_springs.png"):
        path = tmp_path / "out" / name
        assert path.is_file() and path.stat().st_size > 10_000, name
    # Every bake reported its summary line.
    for name in ("ArmCCD", "ArmFABRIK", "ArmDLS", "Flag", "Cloth", "Rope"):
        assert any(line.startswith(name) for line in proc.stdout.splitlines()), name
