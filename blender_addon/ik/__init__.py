"""IK chains: settings on the tip pose bone, reading, baking to keys, panels.

``props.py`` the ``pose_bone.sinew_ik`` property group; ``read.py`` scene -> plain arrays;
``write.py`` keys and trace curve; ``rotations.py`` bpy-free rotation conversions;
``operators.py`` ``sinew.bake_ik`` / ``sinew.import_ik_constraint``; ``ui.py`` panels.
"""

from __future__ import annotations

import bpy

from . import operators, props, ui

classes = (*props.classes, *operators.classes, *ui.classes)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    props.register_properties()


def unregister() -> None:
    props.unregister_properties()
    for cls in reversed(classes):
        if getattr(cls, "is_registered", False):
            bpy.utils.unregister_class(cls)
