"""A throw-away Blender user folder for the processes that install the add-on from its zip.

Blender reads ``BLENDER_USER_RESOURCES`` once, when bpy is first imported; the tests, the
bench and the demo point it at a fresh temporary folder so the user's own Blender settings and
add-ons are never touched. The folder (about 200 MB once Blender has written its extension
repository) is removed when the process exits, so repeated runs do not fill ``/tmp``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable

#: The folders this process created (removed by :func:`cleanup`).
CREATED: list[str] = []


def cleanup() -> None:
    """Remove the folders this process created. Runs at exit; a process that ends with
    ``os._exit`` (which skips exit handlers) calls it itself first."""
    while CREATED:
        shutil.rmtree(CREATED.pop(), ignore_errors=True)


atexit.register(cleanup)


def throwaway_user_resources(prefix: str) -> str:
    """Point ``BLENDER_USER_RESOURCES`` at a temporary folder removed at exit; return its path.

    A folder already named in the environment (a caller's choice) is kept and returned as is.
    Call this before the first ``import bpy``.
    """
    given = os.environ.get("BLENDER_USER_RESOURCES")
    if given:
        return given
    path = tempfile.mkdtemp(prefix=prefix)
    os.environ["BLENDER_USER_RESOURCES"] = path
    CREATED.append(path)
    return path


def run_then_exit(main: Callable[[], int]) -> None:
    """Run ``main()``, remove the folders, and end the process with its exit code directly.

    bpy 4.5 can deadlock in its exit handlers (a delayed-close thread), so a process that
    imported bpy ends with ``os._exit`` once its output is flushed; that skips ``atexit``,
    hence the explicit :func:`cleanup`. An exception from ``main`` still propagates.
    """
    try:
        code = main()
    finally:
        cleanup()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
