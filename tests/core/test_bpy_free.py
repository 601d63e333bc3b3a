"""core and every one of its submodules import with bpy, mathutils and bmesh blocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import ROOT


def test_core_imports_without_blender_modules():
    script = textwrap.dedent(
        """
        import importlib, importlib.abc, pkgutil, sys

        BLOCKED = {"bpy", "mathutils", "bmesh", "bpy_extras", "bgl", "gpu"}

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"core tried to import {name}")
                return None

        sys.meta_path.insert(0, Block())
        import core
        names = ["core"]
        for info in pkgutil.walk_packages(core.__path__, "core."):
            importlib.import_module(info.name)
            names.append(info.name)
        assert not any(m.split(".")[0] in BLOCKED for m in sys.modules), "a Blender module was imported"
        print(len(names), "modules")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    count = int(proc.stdout.split()[0])
    assert count >= 2
