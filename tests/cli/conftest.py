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


def clean_env() -> dict[str, str]:
    """The environment for the system blender: no pyenv, no virtualenv, no PYTHON* paths.

    Debian's blender embeds the system Python and finds its standard library through
    ``python3`` on PATH; a pyenv or venv interpreter there would hand it the wrong one.
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYENV", "PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV"))}
    parts = [p for p in env.get("PATH", "").split(os.pathsep)
             if p and ".pyenv" not in p and ".venv" not in p]
    env["PATH"] = os.pathsep.join(parts or ["/usr/local/bin", "/usr/bin", "/bin"])
    return env


@pytest.fixture()
def blender(tmp_path: Path):
    """Run ``blender -b --factory-startup --python-exit-code 1 ...`` with a private user folder."""

    def run(*args: str, script: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        env = clean_env()
        for key, sub in (("BLENDER_USER_SCRIPTS", "scripts"), ("BLENDER_USER_CONFIG", "config"),
                         ("BLENDER_USER_DATAFILES", "datafiles")):
            env[key] = str(tmp_path / "user" / sub)
        cmd = [blender_binary(), "-b", "--factory-startup", "--python-exit-code", "1"]
        args = list(args)
        # Blender handles its arguments in order: a .blend file must come before the
        # script that works on it, and the script's own arguments after "--".
        own = args[args.index("--"):] if "--" in args else []
        cmd += args[:len(args) - len(own)]
        if script is not None:
            path = tmp_path / "script.py"
            path.write_text(textwrap.dedent(script))
            cmd += ["--python", str(path)]
        cmd += own
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)

    return run
