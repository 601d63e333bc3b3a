"""Helpers for the IK tests: build small rigs and targets, read Blender's evaluated pose."""

from __future__ import annotations

import math

import bpy
import numpy as np
from mathutils import Vector


def make_chain(name: str = "Rig", n: int = 4, length: float = 0.5, connected: bool = True,
               modes: tuple[str, ...] | str = "QUATERNION", parent_bone: bool = False,
               location=(0.0, 0.0, 0.0), scale=(1.0, 1.0, 1.0)) -> bpy.types.Object:
    """An armature with a slightly zig-zagging chain B0..B{n-1} going up +Z, rolled bones.

    ``parent_bone`` adds a bone "Base" (pointing along +X, tilted) as the chain root's parent.
    Non-connected chains leave a 0.1 m gap between a bone's tail and the next head.
    """
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = location
    obj.scale = scale
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    prev = None
    start = Vector((0.0, 0.0, 0.0))
    if parent_bone:
        base = data.edit_bones.new("Base")
        base.head = (0.0, 0.0, -0.3)
        base.tail = (0.3, 0.1, -0.2)
        base.roll = 0.4
        prev = base
    head = start
    for i in range(n):
        eb = data.edit_bones.new(f"B{i}")
        eb.head = head
        wiggle = 0.08 * (1 if i % 2 == 0 else -1)
        eb.tail = head + Vector((wiggle, 0.03 * i, length)).normalized() * length
        eb.roll = 0.3 * i - 0.2
        if prev is not None:
            eb.parent = prev
            eb.use_connect = connected and prev.name != "Base"
        prev = eb
        head = eb.tail.copy() if connected else eb.tail + Vector((0.05, 0.0, 0.1))
    bpy.ops.object.mode_set(mode="OBJECT")
    if isinstance(modes, str):
        modes = (modes,) * n
    for i, mode in enumerate(modes):
        obj.pose.bones[f"B{i}"].rotation_mode = mode
    return obj


def make_target(name: str = "Target", frames=range(1, 49), center=(0.3, 0.2, 1.2), radius=0.4) -> bpy.types.Object:
    """An empty keyed on every frame along a 3-D loop."""
    empty = bpy.data.objects.new(name, None)
    bpy.context.scene.collection.objects.link(empty)
    frames = list(frames)
    for k, f in enumerate(frames):
        a = 2 * math.pi * k / max(len(frames) - 1, 1)
        empty.location = (center[0] + radius * math.cos(a), center[1] + radius * math.sin(2 * a) * 0.5,
                          center[2] + 0.5 * radius * math.sin(a))
        empty.keyframe_insert("location", frame=f)
    return empty


def enable_chain(obj: bpy.types.Object, tip: str, **settings) -> None:
    s = obj.pose.bones[tip].sinew_ik
    s.enabled = True
    for key, value in settings.items():
        setattr(s, key, value)


def activate(obj: bpy.types.Object) -> None:
    bpy.context.view_layer.objects.active = obj


def evaluated(scene, frames, fn):
    """Call ``fn(depsgraph)`` after ``scene.frame_set(f)`` for every frame; stack the results."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        out.append(fn(bpy.context.evaluated_depsgraph_get()))
    return np.array(out)


def tip_world(obj: bpy.types.Object, bone: str):
    def get(dg):
        ev = obj.evaluated_get(dg)
        return tuple(ev.matrix_world @ ev.pose.bones[bone].tail)
    return get


def object_world(obj: bpy.types.Object):
    def get(dg):
        return tuple(obj.evaluated_get(dg).matrix_world.translation)
    return get
