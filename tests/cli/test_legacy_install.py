"""The legacy zip installs into the real blender binary (3.4) the way users install it."""

from __future__ import annotations

from tests.conftest import built_zip


def test_legacy_zip_installs_registers_and_unregisters_twice(blender):
    proc = blender(script=f"""
        import bpy, addon_utils, sys
        print("BLENDER", bpy.app.version_string)
        bpy.ops.preferences.addon_install(filepath={str(built_zip("legacy"))!r})
        def sinew_classes():
            out = set()
            for base in (bpy.types.Operator, bpy.types.Panel, bpy.types.PropertyGroup,
                         bpy.types.AddonPreferences, bpy.types.UIList, bpy.types.Menu):
                out |= {{c.__name__ for c in base.__subclasses__()
                        if c.__name__.startswith("SINEW_") and getattr(c, "is_registered", False)}}
            return out
        addon_utils.enable("sinew", default_set=True, handle_error=None)
        first = sinew_classes()
        assert first, "nothing registered"
        for _ in range(2):
            addon_utils.disable("sinew", default_set=True, handle_error=None)
            assert sinew_classes() == set(), sinew_classes()
            addon_utils.enable("sinew", default_set=True, handle_error=None)
            assert sinew_classes() == first
        mod = sys.modules["sinew"]
        assert mod.__file__.startswith(bpy.utils.user_resource("SCRIPTS")), mod.__file__
        assert mod.deps.scipy_problem() is None, mod.deps.scipy_problem()
        print("LEGACY-OK", sorted(first))
    """)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "LEGACY-OK" in proc.stdout
    assert "BLENDER 3." in proc.stdout or "BLENDER 4." in proc.stdout or "BLENDER 5." in proc.stdout
