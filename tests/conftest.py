"""Shared test settings: paths, the tier we are running in, the built zips."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def built_zip(kind: str) -> Path:
    """The zip ``build.py`` made for this run (``linux-x64`` or ``legacy``).

    ``python3 build.py test`` builds the zips first and passes their paths in
    SINEW_ZIP / SINEW_LEGACY_ZIP; running pytest by hand falls back to dist/.
    """
    env = {"linux-x64": "SINEW_ZIP", "legacy": "SINEW_LEGACY_ZIP"}[kind]
    if os.environ.get(env):
        return Path(os.environ[env])
    pattern = "sinew-*-linux_x64.zip" if kind == "linux-x64" else "sinew-*-legacy.zip"
    hits = sorted((ROOT / "dist").glob(pattern))
    if not hits:
        pytest.fail(f"no built {kind} zip: run `python3 build.py build` first (or `python3 build.py test`)")
    return hits[-1]


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


def pytest_unconfigure(config):
    """End a bpy test process directly once pytest has reported everything.

    bpy 4.5 can deadlock in its exit handlers (its delayed-close thread), which would hang
    the tier after all tests passed; by now the summary and the JUnit file are written.
    """
    if "bpy" in sys.modules and _EXIT_STATUS:
        if "tools.userdir" in sys.modules:  # os._exit skips atexit: remove the user folder now
            sys.modules["tools.userdir"].cleanup()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
