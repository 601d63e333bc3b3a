"""Spring meshes: ``object.sinew_springs``, the Physics panel, ``sinew.bake_springs``.

Module map:

``props``      the property group (settings of CONTRACT.md plus the bake state);
``preset_table`` cotton, silk, denim, rubber, rope, flag as plain dicts (DENSITY + MATERIAL);
``presets``    the operator applying them;
``read``       the scene → numpy boundary: deformed input per frame, pins, colliders;
``write``      numpy → scene: shape keys keyed per frame, or a PC2 file + Mesh Cache
               modifier, and the exact undo of either (free);
``operators``  ``sinew.bake_springs`` (a :class:`~..bakejob.BakeJob`), ``sinew.free_bake``;
``ui``         the "Sinew Springs" panel and its sub-panels.

``core.springs`` (which needs scipy) is only imported when a bake runs, so the add-on
registers and draws its panel in a Blender without scipy.
"""

from __future__ import annotations

import bpy

from . import operators, presets, props, ui

classes = props.classes + presets.classes + operators.classes + ui.classes


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.Object.sinew_springs = bpy.props.PointerProperty(type=props.SINEW_PG_springs)


def unregister() -> None:
    if hasattr(bpy.types.Object, "sinew_springs"):
        del bpy.types.Object.sinew_springs
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
