"""A comparable snapshot of everything a bake may touch, for "scene unchanged" checks.

Objects (transform, parent, modifiers and their flags, vertex coordinates, shape keys with
values, mutes and coordinates, pose-bone transforms, Sinew settings and bake state), every
animated ID's action and F-curves with their keyframes, datablock counts, the current frame,
and the files in a folder (for cache output).
"""

from __future__ import annotations

import importlib
import os

import bpy
import numpy as np

ADDON_MODULE = "bl_ext.user_default.sinew"


def _fcurves(id_data) -> list:
    compat = importlib.import_module(ADDON_MODULE + ".compat")
    ad = id_data.animation_data
    if ad is None:
        return None
    out = []
    for fc in compat.fcurves(id_data):
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out.append((fc.data_path, fc.array_index, fc.mute, co.tobytes()))
    return (ad.action.name if ad.action else None, sorted(out))


def _coords(collection) -> bytes:
    co = np.empty(3 * len(collection), dtype=np.float32)
    collection.foreach_get("co", co)
    return co.tobytes()


def _props(group) -> tuple:
    return tuple((k, repr(getattr(group, k))) for k in sorted(group.bl_rna.properties.keys()) if k != "rna_type")


def snapshot(folder: str | None = None) -> dict:
    bpy.context.view_layer.update()
    snap: dict = {"frame": (bpy.context.scene.frame_current, bpy.context.scene.frame_subframe),
                  "counts": {k: len(getattr(bpy.data, k)) for k in
                             ("objects", "meshes", "actions", "shape_keys", "curves", "armatures")},
                  "actions": sorted(a.name for a in bpy.data.actions)}
    for ob in bpy.data.objects:
        d = {"matrix": tuple(tuple(r) for r in ob.matrix_world), "parent": ob.parent.name if ob.parent else None,
             "modifiers": [(m.name, m.type, m.show_viewport, m.show_render) for m in ob.modifiers],
             "anim": _fcurves(ob), "active_key": ob.active_shape_key_index, "show_only": ob.show_only_shape_key}
        if ob.type == "MESH":
            d["co"] = _coords(ob.data.vertices)
            d["springs"] = _props(ob.sinew_springs)
            key = ob.data.shape_keys
            if key is not None:
                d["key"] = (key.use_relative, _fcurves(key),
                            [(kb.name, kb.value, kb.mute, kb.relative_key.name, _coords(kb.data))
                             for kb in key.key_blocks])
        if ob.type == "ARMATURE":
            d["pose"] = [(pb.name, tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler),
                          pb.rotation_mode, tuple(pb.scale), _props(pb.sinew_ik), _props(pb.sinew_spring),
                          [(c.name, c.mute) for c in pb.constraints]) for pb in ob.pose.bones]
        snap[ob.name] = d
    if folder is not None:
        snap["files"] = sorted(os.path.relpath(os.path.join(r, f), folder)
                               for r, _, fs in os.walk(folder) for f in fs)
    return snap
