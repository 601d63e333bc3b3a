"""The UI tier: Debian's blender in a real window under Xvfb, driven by simulated events."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import blender_binary, clean_env
from tests.conftest import ROOT

HERE = Path(__file__).resolve().parent
SHOTS = ROOT / "out" / "ui"


@pytest.fixture(scope="session")
def window_session(tmp_path_factory) -> dict:
    """Build the scene in the background, then run tests/ui/session.py in a window once.

    Returns the session's results (checks, panel draw counts, screenshots) plus its log.
    Screenshots are written to out/ui/.
    """
    xvfb = shutil.which("xvfb-run")
    if not xvfb:
        pytest.fail("xvfb-run is not installed (python3 build.py test installs xvfb and xauth)")
    work = tmp_path_factory.mktemp("ui")
    env = clean_env()
    for key, sub in (("BLENDER_USER_SCRIPTS", "scripts"), ("BLENDER_USER_CONFIG", "config")):
        env[key] = str(work / "user" / sub)
    scene = work / "scene.blend"
    made = subprocess.run([blender_binary(), "-b", "--factory-startup", "--python-exit-code", "1",
                           "--python", str(HERE / "make_scene.py"), "--", str(scene)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert made.returncode == 0 and scene.is_file(), made.stdout[-3000:] + made.stderr[-3000:]
    SHOTS.mkdir(parents=True, exist_ok=True)
    results_file = work / "results.json"
    proc = subprocess.run(
        [xvfb, "-a", "-s", "-screen 0 1280x800x24", blender_binary(), "--factory-startup",
         "--enable-event-simulate", str(scene), "--python", str(HERE / "session.py"), "--",
         str(results_file), str(SHOTS)],
        capture_output=True, text=True, env=env, timeout=1500,
    )
    log = proc.stdout + proc.stderr
    (work / "session.log").write_text(log)
    assert results_file.is_file(), f"the window session wrote no results (exit {proc.returncode}):\n{log[-5000:]}"
    results = json.loads(results_file.read_text())
    results["log"] = log
    results["returncode"] = proc.returncode
    return results
