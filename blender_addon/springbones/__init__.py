"""Spring bones: ``pose_bone.sinew_spring``, the Sinew Spring panel, ``sinew.bake_spring_bones``.

``props`` the property group; ``preset_table`` hair, tail, ear, strap, antenna as plain
dicts; ``presets`` the operator applying them; ``read`` scene → plain arrays (evaluated pose,
world matrices, colliders); ``operators`` the bake (a :class:`~..bakejob.BakeJob` over
``core.springbones``); ``ui`` the panels. ``core.springbones`` (which needs scipy) is only
imported when a bake runs.
"""

from __future__ import annotations

import bpy

from . import operators, presets, props, ui

classes = (*props.classes, *presets.classes, *operators.classes, *ui.classes)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    props.register_properties()


def unregister() -> None:
    props.unregister_properties()
    for cls in reversed(classes):
        if getattr(cls, "is_registered", False):
            bpy.utils.unregister_class(cls)
