"""numpy → scene: the baked motion as shape keys or as a PC2 cache, and its exact undo.

While a bake is active, what fed the simulation must not apply a second time:

* deform modifiers (:data:`.read.DEFORM_TYPES`) that were on in the viewport are switched
  off (``show_viewport`` and ``show_render``); generative modifiers stay on and apply on
  top of the baked positions;
* the user's shape keys (every key but the reference key) are muted, ``use_relative`` is
  switched on and the object's "shape key lock" (``show_only_shape_key``) off.

``'KEYFRAMES'`` adds one shape key per frame, ``sinew_fNNNN``, relative to the reference
key (a "Basis" is created when the mesh has no shape keys), its value keyed 1 on its frame
and 0 on the neighbouring frames with CONSTANT interpolation, in the Key datablock's action
(created when there is none). The first and last baked frames hold outside the range.

``'CACHE'`` writes ``//sinew_cache/<object>.pc2`` (object-space positions, one sample
per frame) and puts a Mesh Cache modifier (PC2, overwrite) first in the stack; frame
``frame_start`` of the scene reads sample 0.

Everything needed to undo this exactly is stored as JSON in ``sinew_springs.bake_record``;
:func:`free` reads it back. JSON, never pickle.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from collections.abc import Iterator
from typing import Any

import bpy
import numpy as np

from .. import compat
from ..core.errors import SinewError
from .read import is_deform

KEY_PREFIX = "sinew_f"
# Blender 4.4+ binds an action to an ID through a slot (even where bpy_extras lacks the
# channel-bag helpers, as in 4.5).
_SLOTTED = "action_slot" in bpy.types.AnimData.bl_rna.properties
CACHE_MODIFIER = "Sinew Cache"
CACHE_DIR = "//sinew_cache/"
_GROUP = "Sinew"


# --------------------------------------------------------------------------- paths
def cache_path(obj: bpy.types.Object) -> tuple[str, str]:
    """``(relative, absolute)`` path of the object's PC2 file.

    Raises
    ------
    SinewError
        The .blend is not saved, or the path would leave the .blend's folder.
    """
    if not bpy.data.filepath:
        raise SinewError("Output 'Cache' writes //sinew_cache/ next to the .blend: save the .blend "
                         "file first (or choose Output 'Keyframes')")
    name = bpy.path.clean_name(obj.name) or "object"
    rel = f"{CACHE_DIR}{name}.pc2"
    absolute = os.path.normpath(bpy.path.abspath(rel))
    root = os.path.normpath(os.path.dirname(bpy.path.abspath(bpy.data.filepath)))
    if os.path.commonpath([root, absolute]) != root:
        raise SinewError(f"the cache path {absolute} is outside the .blend's folder {root}")
    return rel, absolute


def check_cache_writable(obj: bpy.types.Object) -> None:
    """Raise :class:`SinewError` up front when the cache file cannot be written: the .blend
    is unsaved, the path leaves its folder, or the folder (or the nearest existing parent
    it would be created in) is not writable."""
    _rel, absolute = cache_path(obj)
    folder = os.path.dirname(absolute)
    probe = folder
    while not os.path.isdir(probe):
        if os.path.exists(probe):
            raise SinewError(f"{obj.name}: cannot write the cache: {probe} is a file, not a folder")
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.access(probe, os.W_OK | os.X_OK) or (os.path.exists(absolute) and not os.access(absolute, os.W_OK)):
        raise SinewError(f"{obj.name}: cannot write the cache: {probe} is read-only; make it writable "
                         "or choose Output 'Keyframes'")


def write_pc2(path: str, positions: np.ndarray, frame_start: float, sample_rate: float = 1.0) -> None:
    """Write a PC2 point cache: ``positions`` ``(F, n, 3)`` as float32, little-endian."""
    frames, n = positions.shape[:2]
    header = struct.pack("<12siiffi", b"POINTCACHE2\0", 1, n, float(frame_start),
                         float(sample_rate), frames)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(header)
        fh.write(np.ascontiguousarray(positions, dtype="<f4").tobytes())
    os.replace(tmp, path)


# --------------------------------------------------------------------------- inputs
def _switch_inputs_off(obj: bpy.types.Object, record: dict) -> None:
    """Disable what fed the simulation (module docstring); remember the old states."""
    mods = []
    for m in obj.modifiers:
        if is_deform(m) and m.show_viewport:
            mods.append([m.name, bool(m.show_viewport), bool(m.show_render)])
            m.show_viewport = False
            m.show_render = False
    record["modifiers"] = mods
    key = obj.data.shape_keys
    rec: dict[str, Any] = {"existed": key is not None,
                           "active_index": int(obj.active_shape_key_index),
                           "show_only": bool(obj.show_only_shape_key)}
    obj.show_only_shape_key = False
    if key is not None:
        ref = key.reference_key
        rec["use_relative"] = bool(key.use_relative)
        rec["mutes"] = [[kb.name, bool(kb.mute)] for kb in key.key_blocks if kb != ref and not kb.mute]
        for kb in key.key_blocks:
            if kb != ref:
                kb.mute = True
        key.use_relative = True
    record["key"] = rec


def _restore_inputs(obj: bpy.types.Object, record: dict) -> None:
    for name, viewport, render in record.get("modifiers", []):
        m = obj.modifiers.get(name)
        if m is not None:
            m.show_viewport, m.show_render = viewport, render
    rec = record.get("key", {})
    key = obj.data.shape_keys
    if key is not None and rec.get("existed"):
        for name, mute in rec.get("mutes", []):
            kb = key.key_blocks.get(name)
            if kb is not None:
                kb.mute = mute
        key.use_relative = rec.get("use_relative", True)
    obj.show_only_shape_key = rec.get("show_only", False)
    if key is not None:
        obj.active_shape_key_index = min(rec.get("active_index", 0), len(key.key_blocks) - 1)


@contextlib.contextmanager
def unbaked_view(obj: bpy.types.Object) -> Iterator[None]:
    """Show the object as if it had no bake (for reading a re-bake's input), then put the
    bake back. Does nothing when the object is not baked."""
    props = obj.sinew_springs
    if not props.baked or not props.bake_record:
        yield
        return
    record = json.loads(props.bake_record)
    key = obj.data.shape_keys
    ours = [key.key_blocks.get(n) for n in record.get("shape_keys", [])] if key else []
    ours = [kb for kb in ours if kb is not None]
    cache = obj.modifiers.get(record.get("cache", {}).get("modifier", "")) if record.get("cache") else None
    baked_mods = [(m, m.show_viewport, m.show_render) for m in obj.modifiers]
    baked_keys = [(kb, kb.mute) for kb in key.key_blocks] if key else []
    baked_rel = key.use_relative if key else True
    baked_show_only = obj.show_only_shape_key
    baked_active = obj.active_shape_key_index
    try:
        for kb in ours:
            kb.mute = True
        if cache is not None:
            cache.show_viewport = False
        _restore_inputs(obj, record)
        yield
    finally:
        for m, viewport, render in baked_mods:
            m.show_viewport, m.show_render = viewport, render
        for kb, mute in baked_keys:
            kb.mute = mute
        if key is not None:
            key.use_relative = baked_rel
        obj.show_only_shape_key = baked_show_only
        obj.active_shape_key_index = baked_active


# --------------------------------------------------------------------------- keyframes
def _key_frames(i: int, count: int, frame: int) -> tuple[list, list]:
    fr, val = [], []
    if i > 0:
        fr.append(frame - 1)
        val.append(0.0)
    fr.append(frame)
    val.append(1.0)
    if i < count - 1:
        fr.append(frame + 1)
        val.append(0.0)
    return fr, val


def _write_keyframes(obj: bpy.types.Object, frames: np.ndarray, local: np.ndarray,
                     record: dict) -> None:
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
    key = obj.data.shape_keys
    ref = key.reference_key
    anim: dict[str, Any] = {"anim_existed": key.animation_data is not None,
            "action_existed": key.animation_data is not None and key.animation_data.action is not None}
    if _SLOTTED and anim["action_existed"]:
        anim["slot_existed"] = key.animation_data.action_slot is not None
        anim["slots_before"] = [s.identifier for s in key.animation_data.action.slots]
    record["anim"] = anim
    names: list[str] = []
    record["shape_keys"] = names
    count = len(frames)
    flat = local.astype(np.float32).reshape(count, -1)
    for i, f in enumerate(frames):
        kb = obj.shape_key_add(name=f"{KEY_PREFIX}{int(f):04d}", from_mix=False)
        kb.data.foreach_set("co", flat[i])
        kb.relative_key = ref
        kb.value = 0.0
        names.append(kb.name)
    action = compat.ensure_action(key, f"{obj.name}_sinew")
    anim["action"] = action.name
    for i, (f, name) in enumerate(zip(frames, names)):
        fc = compat.ensure_fcurve(key, f'key_blocks["{name}"].value', 0, _GROUP)
        fr, val = _key_frames(i, count, int(f))
        compat.set_keys(fc, fr, val, "CONSTANT")
    _bind_slot(key, action)


def _bind_slot(key: Any, action: Any) -> None:
    """Make sure the Key's animation data plays ``action`` (4.4+: through a slot).

    The legacy ``Action.fcurves`` API of 4.4/4.5 creates a slot for new F-curves but does
    not assign it, so the keys would never play.
    """
    ad = key.animation_data
    if not _SLOTTED or ad.action_slot is not None:
        return
    for slot in action.slots:
        if slot.target_id_type in ("KEY", "UNSPECIFIED"):
            ad.action_slot = slot
            return


def _free_keyframes(obj: bpy.types.Object, record: dict) -> None:
    key = obj.data.shape_keys
    names = record.get("shape_keys", [])
    anim = record.get("anim", {})
    if key is not None:
        ad = key.animation_data
        action = bpy.data.actions.get(anim.get("action", "")) if anim.get("action") else None
        if action is not None and not anim.get("action_existed"):
            if ad is not None and ad.action == action:
                ad.action = None
            bpy.data.actions.remove(action)
        elif ad is not None and ad.action is not None:
            for name in names:
                fc = compat.find_fcurve(key, f'key_blocks["{name}"].value', 0)
                if fc is not None:
                    compat.remove_fcurve(key, fc)
            if _SLOTTED and "slots_before" in anim:
                act = ad.action
                if not anim.get("slot_existed"):
                    ad.action_slot = None
                for slot in list(act.slots):
                    if slot.identifier not in anim["slots_before"]:
                        act.slots.remove(slot)
        if key.animation_data is not None and not anim.get("anim_existed"):
            key.animation_data_clear()
        for name in names:
            kb = key.key_blocks.get(name)
            if kb is not None:
                obj.shape_key_remove(kb)
    if not record.get("key", {}).get("existed") and obj.data.shape_keys is not None:
        obj.shape_key_clear()


# --------------------------------------------------------------------------- cache
def _write_cache(obj: bpy.types.Object, frames: np.ndarray, local: np.ndarray, record: dict) -> None:
    rel, absolute = cache_path(obj)
    folder = os.path.dirname(absolute)
    dir_created = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        write_pc2(absolute, local, float(frames[0]))
    except OSError as exc:
        for leftover in (absolute + ".tmp",):
            if os.path.isfile(leftover):
                os.remove(leftover)
        if dir_created and os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)
        raise SinewError(f"{obj.name}: cannot write the cache file {absolute}: {exc.strerror or exc}; "
                         "make the folder writable or choose Output 'Keyframes'") from None
    record["cache"] = {"file": absolute, "dir_created": dir_created}
    mod = obj.modifiers.new(CACHE_MODIFIER, "MESH_CACHE")
    record["cache"]["modifier"] = mod.name
    mod.cache_format = "PC2"
    mod.filepath = rel
    mod.deform_mode = "OVERWRITE"
    mod.time_mode = "FRAME"
    mod.play_mode = "SCENE"
    mod.frame_start = float(frames[0])
    mod.frame_scale = 1.0
    mod.interpolation = "LINEAR"
    _move_modifier_first(obj, mod)


def _move_modifier_first(obj: bpy.types.Object, mod: Any) -> None:
    index = list(obj.modifiers).index(mod)
    if index == 0:
        return
    if hasattr(obj.modifiers, "move"):
        obj.modifiers.move(index, 0)
        return
    with bpy.context.temp_override(object=obj, active_object=obj):
        bpy.ops.object.modifier_move_to_index(modifier=mod.name, index=0)


def _is_own_cache_file(path: str) -> bool:
    """True for a ``.pc2`` file directly in the saved .blend's ``sinew_cache`` folder."""
    if not bpy.data.filepath or not isinstance(path, str) or not path.endswith(".pc2"):
        return False
    folder = os.path.normpath(bpy.path.abspath(CACHE_DIR))
    return os.path.dirname(os.path.normpath(path)) == folder


def _free_cache(obj: bpy.types.Object, record: dict) -> None:
    cache = record.get("cache", {})
    mod = obj.modifiers.get(cache.get("modifier", "")) if cache.get("modifier") else None
    if mod is not None:
        obj.modifiers.remove(mod)
    path = cache.get("file")
    if path and not _is_own_cache_file(path):
        path = None  # the record comes from a .blend file: never delete anything else
    if path and os.path.isfile(path):
        os.remove(path)
        folder = os.path.dirname(path)
        if cache.get("dir_created") and os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)


# --------------------------------------------------------------------------- public
def write(obj: bpy.types.Object, output: str, frames: np.ndarray, local: np.ndarray) -> dict:
    """Store the baked motion ``local`` ``(F, n, 3)`` (object space) for scene ``frames``
    ``(F,)``, switch the inputs off, and return the record :func:`free` needs.

    On any failure everything done so far is undone before the exception propagates.
    """
    record: dict[str, Any] = {"version": 1, "output": output}
    try:
        _switch_inputs_off(obj, record)
        if output == "CACHE":
            _write_cache(obj, frames, local, record)
        else:
            _write_keyframes(obj, frames, local, record)
    except BaseException:
        free(obj, record)
        raise
    obj.data.update()
    return record


def free(obj: bpy.types.Object, record: dict) -> None:
    """Undo :func:`write` exactly (keys, actions, modifiers, files, switched inputs)."""
    if record.get("output") == "CACHE":
        _free_cache(obj, record)
    else:
        _free_keyframes(obj, record)
    _restore_inputs(obj, record)
    obj.data.update()
