"""Command-line tests: the real ``blender`` binary, run as a pipeline would run it."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT


def blender_binary() -> str:
    path = os.environ.get("SINEW_BLENDER") or shutil.which("blender")
    if not path:
        pytest.fail("the `blender` binary is not installed (python3 build.py test installs Debian's blender)")
    return path


@pytest.fixture()
def blender(tmp_path: Path):
    """Run ``blender -b --factory-startup --python-exit-code 1 ...`` with a private user folder."""

    def run(*args: str, script: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        for key, sub in (("BLENDER_USER_SCRIPTS", "scripts"), ("BLENDER_USER_CONFIG", "config"),
                         ("BLENDER_USER_DATAFILES", "datafiles")):
            env[key] = str(tmp_path / "user" / sub)
        cmd = [blender_binary(), "-b", "--factory-startup", "--python-exit-code", "1"]
        if script is not None:
            path = tmp_path / "script.py"
            path.write_text(textwrap.dedent(script))
            cmd += ["--python", str(path)]
        cmd += list(args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)

    return run
