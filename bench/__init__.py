"""Benchmark sections; each module has ``run(quick: bool) -> list[dict]``.

``tools/bench.py`` runs them all in one process (``python3 build.py bench``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADDON_MODULE = "bl_ext.user_default.sinew"


def addon_zip() -> Path:
    """The built extension zip: $SINEW_ZIP (set by build.py) or the newest in dist/."""
    if os.environ.get("SINEW_ZIP"):
        return Path(os.environ["SINEW_ZIP"])
    hits = sorted((ROOT / "dist").glob("sinew-*-linux_x64.zip"))
    if not hits:
        raise RuntimeError("no built add-on zip in dist/: run `python3 build.py build` first")
    return hits[-1]


def install_addon():
    """Install and enable the built extension once per process; return its package module."""
    import bpy

    if ADDON_MODULE not in sys.modules:
        if not os.environ.get("BLENDER_USER_RESOURCES"):
            raise RuntimeError("set BLENDER_USER_RESOURCES to a temporary folder before importing bpy")
        res = bpy.ops.extensions.package_install_files(repo="user_default", filepath=str(addon_zip()),
                                                       enable_on_install=True)
        if res != {"FINISHED"}:
            raise RuntimeError(f"installing {addon_zip()} failed: {res}")
    return sys.modules[ADDON_MODULE]


def step_frames(frames: int) -> float:
    """Seconds Blender takes to evaluate frames 2..``frames`` in order from frame 1 (its own
    simulations, such as a Cloth modifier, step as the frames are set)."""
    import time

    import bpy

    scene = bpy.context.scene
    scene.frame_set(1)
    elapsed = 0.0
    for f in range(2, frames + 1):
        t = time.perf_counter()
        scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
        elapsed += time.perf_counter() - t
    return elapsed
