"""Scene → numpy: Blender's force-field objects, read per frame for a spring bake.

Which fields act follows Blender's effector list for Cloth: every object enabled in the
viewport of the current view layer (its collection neither excluded nor hidden with the
monitor icon, the object not ``hide_viewport``; the eye icon does not matter) whose
``field.type`` is set, except the simulated object itself. ``object.sinew_springs``
``use_force_fields`` switches them all off and ``field_weight`` scales them (Blender's
effector weights). Types and shapes :mod:`core.springs.fields` does not model (Magnet,
Harmonic, Charge, Texture, ..., the Surface and Every Point shapes) are skipped and
reported.

The field settings are read from the evaluated object at every frame, so keyed strength,
falloff or transforms take effect per frame; ``FieldSettings`` has the same attribute
names in Blender 3.4, 4.5 and 5.2.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bpy
import numpy as np

from .read import matrix_array

# core.springs needs scipy, which the add-on must register without (deps.py): it is
# imported inside the functions, which only a bake calls.

#: ``ForceField`` attribute ← ``FieldSettings`` attribute (same numbers, plain types).
_FLOATS = {
    "strength": "strength", "flow": "flow", "noise": "noise", "falloff_power": "falloff_power",
    "distance_min": "distance_min", "distance_max": "distance_max", "radial_min": "radial_min",
    "radial_max": "radial_max", "radial_falloff": "radial_falloff", "damp": "quadratic_drag",
    "size": "size", "wind_factor": "wind_factor",
}
_BOOLS = ("use_min_distance", "use_max_distance", "use_radial_min", "use_radial_max",
          "use_global_coords", "use_gravity_falloff", "apply_to_location")
_ENUMS = ("shape", "falloff_type", "z_direction")


def _enabled_collections(layer_collection: Any) -> Iterator[Any]:
    """Collections of the view layer that are neither excluded nor hidden in viewports."""
    if layer_collection.exclude or layer_collection.collection.hide_viewport:
        return
    yield layer_collection.collection
    for child in layer_collection.children:
        yield from _enabled_collections(child)


def scene_fields(view_layer: bpy.types.ViewLayer,
                 obj: bpy.types.Object) -> tuple[list[bpy.types.Object], list[str]]:
    """Field objects that act on ``obj``, and a description of each one skipped.

    Returns
    -------
    objects : list of bpy.types.Object
        Supported fields, sorted by name (a stable order for the bake).
    skipped : list of str
        ``"Name (TYPE)"`` or ``"Name (SHAPE shape)"`` for fields Sinew does not model.
    """
    from ..core.springs.fields import FIELD_TYPES, SHAPES

    seen: dict[str, bpy.types.Object] = {}
    for coll in _enabled_collections(view_layer.layer_collection):
        for ob in coll.objects:
            if ob.hide_viewport or ob == obj or ob.field is None or ob.field.type == "NONE":
                continue
            seen[ob.name] = ob
    objects: list[bpy.types.Object] = []
    skipped: list[str] = []
    for name in sorted(seen):
        ob = seen[name]
        if ob.field.type not in FIELD_TYPES:
            skipped.append(f"{name} ({ob.field.type})")
        elif ob.field.shape not in SHAPES:
            skipped.append(f"{name} ({ob.field.shape} shape)")
        else:
            objects.append(ob)
    return objects, skipped


def read_field(ob: bpy.types.Object, depsgraph: Any) -> Any:
    """One field object's settings at the depsgraph's frame, as a
    :class:`core.springs.fields.ForceField`."""
    from ..core.springs.fields import ForceField

    ev = ob.evaluated_get(depsgraph)
    fs = ev.field
    kw: dict[str, Any] = {k: float(getattr(fs, a)) for k, a in _FLOATS.items()}
    kw.update({k: bool(getattr(fs, k)) for k in _BOOLS})
    kw.update({k: str(getattr(fs, k)) for k in _ENUMS})
    return ForceField(str(fs.type), matrix_array(ev.matrix_world), seed=int(fs.seed), **kw)


def read_fields(objects: list[bpy.types.Object], depsgraph: Any) -> list[Any]:
    """:func:`read_field` for each of ``objects``."""
    return [read_field(ob, depsgraph) for ob in objects]


def read_triangles(mesh: bpy.types.Mesh) -> np.ndarray:
    """Blender's loop triangles of ``mesh`` ``(t, 3)`` (the triangles Cloth applies wind to),
    in one order whatever the order Blender lists them in (it varies between sessions; the
    per-vertex sums of the face forces would differ in their last bits)."""
    from ..core.springs.colliders import canonical_triangles

    mesh.calc_loop_triangles()
    t = np.empty(3 * len(mesh.loop_triangles), dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", t)
    return canonical_triangles(t)
