"""Blender-as-a-module tests: the add-on is installed from the built extension zip.

The extension goes into a temporary user folder (BLENDER_USER_RESOURCES, set before bpy
is imported), is installed the way Blender installs extensions, and stays enabled for
the whole session. Each test starts from an empty scene.
"""

from __future__ import annotations

import os
import sys

os.environ.pop("BLENDER_USER_RESOURCES", None)  # always a fresh folder for the session
from tools.userdir import throwaway_user_resources  # noqa: E402

_USER = throwaway_user_resources("sinew-user-")

import bpy  # noqa: E402
import pytest  # noqa: E402

from tests.conftest import built_zip  # noqa: E402

ADDON_MODULE = "bl_ext.user_default.sinew"


@pytest.fixture(scope="session")
def addon():
    """The installed, enabled add-on's package module (``bl_ext.user_default.sinew``)."""
    if ADDON_MODULE not in sys.modules:
        result = bpy.ops.extensions.package_install_files(
            repo="user_default", filepath=str(built_zip("linux-x64")), enable_on_install=True
        )
        assert result == {"FINISHED"}, result
    assert ADDON_MODULE in bpy.context.preferences.addons.keys()
    return sys.modules[ADDON_MODULE]


@pytest.fixture()
def scene(addon):
    """An empty scene with the add-on enabled; returns ``bpy.context.scene``."""
    bpy.ops.wm.read_homefile(use_empty=True)
    assert ADDON_MODULE in bpy.context.preferences.addons.keys()
    return bpy.context.scene


@pytest.fixture()
def user_dir() -> str:
    return _USER
