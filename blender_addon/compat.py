"""Small compatibility layer over Blender's animation API, 3.4 to 5.x.

Blender 3.4-4.3 store F-curves directly on ``Action.fcurves``. 4.4 introduced slotted
(layered) actions, with channel bags per slot; 4.4-4.5 still offer ``Action.fcurves`` as
a view on the first slot, and 5.x removed it. Everything the bakes need goes through the
few functions here, so the rest of the add-on never asks which API it is talking to.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import bpy

try:  # Blender 4.4+
    from bpy_extras import anim_utils as _anim_utils

    # 4.4-4.5 have action_get_channelbag_for_slot only; 5.x adds action_ensure_channelbag_for_slot.
    _HAS_SLOTS = hasattr(_anim_utils, "action_get_channelbag_for_slot")
except ImportError:  # pragma: no cover - very old Blender
    _anim_utils = None  # type: ignore[assignment]
    _HAS_SLOTS = False


def has_slots() -> bool:
    """True when this Blender uses slotted actions (4.4 and newer)."""
    return _HAS_SLOTS


def ensure_action(id_data: Any, name: str) -> bpy.types.Action:
    """Return the action assigned to ``id_data``, creating and assigning one if needed."""
    ad = id_data.animation_data or id_data.animation_data_create()
    if ad.action is None:
        ad.action = bpy.data.actions.new(name)
    if _HAS_SLOTS and getattr(ad, "action_slot", None) is None:
        action = ad.action
        slot = None
        for candidate in action.slots:
            if candidate.target_id_type in (id_data.id_type, "UNSPECIFIED"):
                slot = candidate
                break
        if slot is None:
            slot = action.slots.new(id_data.id_type, id_data.name)
        ad.action_slot = slot
    return ad.action


def _channelbag(id_data: Any, create: bool) -> Any:
    ad = id_data.animation_data
    if ad is None or ad.action is None:
        return None
    if create:
        ensure = getattr(_anim_utils, "action_ensure_channelbag_for_slot", None)
        if ensure is not None:
            return ensure(ad.action, ad.action_slot)
        action = ad.action  # 4.4-4.5: first layer's keyframe strip
        layer = action.layers[0] if len(action.layers) else action.layers.new("Layer")
        strip = layer.strips[0] if len(layer.strips) else layer.strips.new(type="KEYFRAME")
        return strip.channelbag(ad.action_slot, ensure=True)
    if ad.action_slot is None:
        return None
    return _anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot)


def fcurves(id_data: Any) -> Iterable[bpy.types.FCurve]:
    """The F-curves animating ``id_data`` through its assigned action (maybe empty)."""
    ad = id_data.animation_data
    if ad is None or ad.action is None:
        return []
    if _HAS_SLOTS:
        bag = _channelbag(id_data, create=False)
        return list(bag.fcurves) if bag is not None else []
    return list(ad.action.fcurves)


def find_fcurve(id_data: Any, data_path: str, index: int) -> bpy.types.FCurve | None:
    """The F-curve for ``data_path[index]`` on ``id_data``'s action, or None."""
    ad = id_data.animation_data
    if ad is None or ad.action is None:
        return None
    if _HAS_SLOTS:
        bag = _channelbag(id_data, create=False)
        return bag.fcurves.find(data_path, index=index) if bag is not None else None
    return ad.action.fcurves.find(data_path, index=index)


def ensure_fcurve(id_data: Any, data_path: str, index: int, group: str = "") -> bpy.types.FCurve:
    """Find or create the F-curve ``data_path[index]``, in action group ``group``."""
    fc = find_fcurve(id_data, data_path, index)
    if fc is not None:
        return fc
    ad = id_data.animation_data
    if _HAS_SLOTS:
        bag = _channelbag(id_data, create=True)
        fc = bag.fcurves.new(data_path, index=index)
        groups = bag.groups
    else:
        fc = ad.action.fcurves.new(data_path, index=index)
        groups = ad.action.groups
    if group:
        grp = groups.get(group) or groups.new(group)
        fc.group = grp
    return fc


def remove_fcurve(id_data: Any, fc: bpy.types.FCurve) -> None:
    """Remove ``fc`` from ``id_data``'s action."""
    ad = id_data.animation_data
    if _HAS_SLOTS:
        bag = _channelbag(id_data, create=False)
        if bag is not None:
            bag.fcurves.remove(fc)
    else:
        ad.action.fcurves.remove(fc)


def set_keys(fc: bpy.types.FCurve, frames: Any, values: Any, interpolation: str = "LINEAR") -> None:
    """Replace every key of ``fc`` inside [frames[0], frames[-1]] by (frames, values), in bulk.

    Keys outside the range are kept untouched (handles, easing and all). ``frames`` and
    ``values`` are 1-D sequences of equal length; new keys are written with
    ``keyframe_points.add`` + ``foreach_set``.
    """
    import numpy as np

    frames = np.asarray(frames, dtype=np.float64).ravel()
    values = np.asarray(values, dtype=np.float64).ravel()
    lo, hi = float(frames.min()), float(frames.max())
    kp = fc.keyframe_points
    n_old = len(kp)
    if n_old:
        old = np.empty(2 * n_old, dtype=np.float32)
        kp.foreach_get("co", old)
        old_frames = old[0::2]
        inside = np.flatnonzero((old_frames >= lo - 1e-3) & (old_frames <= hi + 1e-3))
        if len(inside) == n_old:
            kp.clear()
        else:
            for i in inside[::-1]:
                kp.remove(kp[int(i)], fast=True)
    n_keep = len(kp)
    kp.add(len(frames))
    flat = np.empty(2 * len(kp), dtype=np.float32)
    kp.foreach_get("co", flat)
    co = flat.reshape(-1, 2)
    co[n_keep:, 0] = frames
    co[n_keep:, 1] = values
    kp.foreach_set("co", flat)
    interp = np.empty(len(kp), dtype=np.int32)
    kp.foreach_get("interpolation", interp)
    interp[n_keep:] = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items[interpolation].value
    kp.foreach_set("interpolation", interp)
    fc.update()
