"""The add-on installs from its built zip, registers and unregisters cleanly."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import addon_utils
import bpy

from tests.conftest import ROOT, built_zip

from .conftest import ADDON_MODULE


def _sinew_classes() -> set[str]:
    """Every registered Blender class whose name marks it as Sinew's."""
    names = set()
    for base in (bpy.types.Operator, bpy.types.Panel, bpy.types.PropertyGroup,
                 bpy.types.AddonPreferences, bpy.types.UIList, bpy.types.Menu):
        for cls in base.__subclasses__():
            if cls.__name__.startswith("SINEW_") and getattr(cls, "is_registered", False):
                names.add(cls.__name__)
    return names


def test_installed_from_zip_and_enabled(addon, user_dir):
    assert addon.__file__.startswith(user_dir), addon.__file__
    assert os.path.isfile(os.path.join(os.path.dirname(addon.__file__), "blender_manifest.toml"))
    assert bpy.context.preferences.addons[ADDON_MODULE].preferences is not None
    # The add-on carries its own copy of core, imported relative to the package.
    assert f"{ADDON_MODULE}.core" in sys.modules or __import__(f"{ADDON_MODULE}.core")


def test_scipy_wheel_unpacked_into_extension_site_packages(addon, user_dir):
    found = glob.glob(os.path.join(user_dir, "extensions", ".local", "lib", "python*", "site-packages", "scipy", "__init__.py"))
    assert found, "the scipy wheel carried by the zip was not installed"


def test_unregister_and_register_twice_leaves_nothing_behind(addon):
    registered = _sinew_classes()
    assert registered, "nothing of Sinew's is registered"
    for _ in range(2):
        addon_utils.disable(ADDON_MODULE, default_set=True)
        assert _sinew_classes() == set()
        assert ADDON_MODULE not in bpy.context.preferences.addons.keys()
        addon_utils.enable(ADDON_MODULE, default_set=True)
        assert _sinew_classes() == registered
    assert ADDON_MODULE in bpy.context.preferences.addons.keys()


def test_registers_without_scipy_and_says_so(tmp_path):
    """In a Blender whose Python cannot import scipy the add-on still registers."""
    script = textwrap.dedent(
        f"""
        import os, sys, importlib.abc
        os.environ["BLENDER_USER_RESOURCES"] = {str(tmp_path)!r}

        class NoScipy(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "scipy" or name.startswith("scipy."):
                    raise ImportError("No module named 'scipy' (blocked by the test)")
                return None

        sys.meta_path.insert(0, NoScipy())
        import bpy
        res = bpy.ops.extensions.package_install_files(
            repo="user_default", filepath={str(built_zip("linux-x64"))!r}, enable_on_install=True)
        assert res == {{"FINISHED"}}, res
        mod = sys.modules["{ADDON_MODULE}"]
        problem = importlib.import_module("{ADDON_MODULE}.deps").scipy_problem()
        assert problem and "scipy" in problem, problem
        print("SCIPY-PROBLEM:", problem, flush=True)
        os._exit(0)  # bpy 4.5 can deadlock in its exit handlers (a delayed-close thread)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SCIPY-PROBLEM:" in proc.stdout
