"""Blender's own Rigify human metarig with IK controls, for the rig benchmark and the rig tests.

The bundled ``rigify`` add-on is enabled and its human metarig added. Control bones are added
the way Rigify's generated rig has them: parented to a ``root`` bone, never to the chains they
drive. Each control is keyed on every frame along a small closed loop (the first and last
frames coincide) around a pose where the limb is bent.
"""

from __future__ import annotations

import importlib
import math

import bpy
import numpy as np
from mathutils import Vector

from bench import ADDON_MODULE

# tip bone -> (control, chain length, offset of the loop's centre from the tip's rest tail
# (armature space, metres), loop radius, pole bone and its offset from the middle joint)
LIMBS = {
    "hand.L": ("hand_ik.L", 3, (-0.15, -0.15, 0.0), 0.04, "elbow_pole.L", (0.0, 0.45, 0.0)),
    "hand.R": ("hand_ik.R", 3, (0.15, -0.15, 0.0), 0.04, "elbow_pole.R", (0.0, 0.45, 0.0)),
    "shin.L": ("foot_ik.L", 2, (0.0, -0.12, 0.16), 0.05, "knee_pole.L", (0.0, -0.5, 0.0)),
    "shin.R": ("foot_ik.R", 2, (0.0, -0.12, 0.16), 0.05, "knee_pole.R", (0.0, -0.5, 0.0)),
}
SPINE = ("spine.003", "chest_ik", 3, (0.0, -0.06, -0.07), 0.02)


def enable_rigify() -> None:
    """Enable the ``rigify`` add-on bundled with Blender (``scripts/addons_core/rigify``)."""
    import addon_utils

    if "rigify" not in bpy.context.preferences.addons.keys():
        addon_utils.enable("rigify", default_set=True)
    assert "rigify" in bpy.context.preferences.addons.keys(), "the bundled rigify add-on did not enable"


def add_metarig() -> bpy.types.Object:
    """The human metarig, active, in Object Mode."""
    enable_rigify()
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.active_object
    assert rig is not None and rig.type == "ARMATURE"
    if rig.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    return rig


def _loop(frames: int, radius: float, phase: float) -> np.ndarray:
    """(F, 3) offsets on a closed 3-D loop: frame 1 and frame F coincide."""
    a = 2 * math.pi * np.arange(frames) / (frames - 1) + phase
    return radius * np.stack((np.cos(a) - math.cos(phase), 0.6 * (np.sin(2 * a) - math.sin(2 * phase)),
                              np.sin(a) - math.sin(phase)), axis=1)


def add_controls(rig: bpy.types.Object, frames: int, limbs: dict | None = None, spine: bool = True,
                 parent: str = "root") -> dict[str, str]:
    """Add ``root``, the IK control bones and the pole bones; key the controls on every frame.

    Each control copies its tip bone's rest orientation, sits at the tip's tail moved by the
    limb's offset, and travels a closed loop. Poles sit behind the elbows / in front of the knees.

    Returns
    -------
    dict
        tip bone -> control bone name.
    """
    limbs = LIMBS if limbs is None else limbs
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    eb = rig.data.edit_bones
    root = eb.get("root") or eb.new("root")
    root.head, root.tail, root.roll = (0.0, 0.0, 0.0), (0.0, 0.3, 0.0), 0.0
    items = [(tip, c, n, off, r, pole, poff) for tip, (c, n, off, r, pole, poff) in limbs.items()]
    if spine:
        tip, c, n, off, r = SPINE
        items.append((tip, c, n, off, r, None, None))
    for tip, ctrl, n, off, _r, pole, poff in items:
        t = eb[tip]
        d = Vector(off) + (t.tail - t.head)
        c = eb.new(ctrl)
        c.head, c.tail, c.roll = t.head + d, t.tail + d, t.roll
        c.parent = eb[parent]
        if pole is not None:
            mid = eb[tip].head if n == 2 else eb[tip].parent.head  # knee / elbow
            p = eb.new(pole)
            p.head, p.tail = mid + Vector(poff), mid + Vector(poff) + Vector((0.0, 0.0, 0.1))
            p.parent = eb[parent]
    bpy.ops.object.mode_set(mode="OBJECT")
    compat = importlib.import_module(ADDON_MODULE + ".compat")
    compat.ensure_action(rig, "RigAction")
    f = np.arange(1, frames + 1, dtype=np.float64)
    for k, (_tip, ctrl, _n, _off, radius, _p, _po) in enumerate(items):
        rest = np.array(rig.data.bones[ctrl].matrix_local)[:3, :3]
        local = _loop(frames, radius, 0.7 * k) @ rest  # armature-space offsets in the bone's rest frame
        path = f'pose.bones["{ctrl}"].location'
        for i in range(3):
            compat.set_keys(compat.ensure_fcurve(rig, path, i, ctrl), f, local[:, i], "LINEAR")
    return {tip: ctrl for tip, ctrl, *_ in items}


def enable_chains(rig: bpy.types.Object, controls: dict[str, str], limbs: dict | None = None, poles: bool = True,
                  rotation: bool = False, **settings) -> None:
    """Sinew chains on every limb and the spine, targeting their control bones."""
    limbs = LIMBS if limbs is None else limbs
    for tip, ctrl in controls.items():
        s = rig.pose.bones[tip].sinew_ik
        s.enabled, s.target, s.target_bone = True, rig, ctrl
        s.chain_length = limbs[tip][1] if tip in limbs else SPINE[2]
        if poles and tip in limbs:
            s.pole_target, s.pole_bone = rig, limbs[tip][4]
        if rotation and tip.startswith("hand"):
            s.use_rotation, s.rotation_weight = True, 1.0
        for key, value in settings.items():
            setattr(s, key, value)


def evaluate(rig: bpy.types.Object, frames, bones: list[str]) -> dict[str, np.ndarray]:
    """Armature-space pose matrices (F, 4, 4) of ``bones`` as Blender evaluates them, per frame."""
    scene = bpy.context.scene
    out = {b: [] for b in bones}
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        for b in bones:
            out[b].append(np.array(ev.pose.bones[b].matrix))
    return {b: np.array(v) for b, v in out.items()}


def pole_angles(rig: bpy.types.Object, limbs: dict | None = None) -> dict[str, float]:
    """Per limb tip, the ``pole_angle`` (Blender's meaning) that aims the rest pose's bend at the pole.

    Blender turns the chain about the root-head -> target axis until the root bone's
    ``x cos(a) + z sin(a)`` direction, projected across that axis, points at the pole. At rest
    the bend direction is the middle joint's offset from that axis; ``a`` is its angle in the
    root bone's X-Z plane.
    """
    limbs = LIMBS if limbs is None else limbs
    out = {}
    for tip, (_c, n, *_rest) in limbs.items():
        bones = [rig.data.bones[tip]]
        while len(bones) < n:
            bones.append(bones[-1].parent)
        root, mid = bones[-1], bones[-2]
        head, end = np.array(root.head_local), np.array(bones[0].tail_local)
        u = (end - head) / np.linalg.norm(end - head)
        d = np.array(mid.head_local) - head
        d -= np.dot(d, u) * u
        m = np.array(root.matrix_local)[:3, :3]
        out[tip] = math.atan2(float(d @ m[:, 2]), float(d @ m[:, 0]))
    return out


def add_constraints(rig: bpy.types.Object, controls: dict[str, str], angles: dict[str, float],
                    limbs: dict | None = None, rotation: bool = False, iterations: int = 500) -> None:
    """Blender's own IK constraints with the same targets, poles and pole angles as the Sinew chains."""
    limbs = LIMBS if limbs is None else limbs
    for tip, ctrl in controls.items():
        con = rig.pose.bones[tip].constraints.new("IK")
        con.target, con.subtarget, con.iterations = rig, ctrl, iterations
        con.chain_count = limbs[tip][1] if tip in limbs else SPINE[2]
        if tip in limbs:
            con.pole_target, con.pole_subtarget, con.pole_angle = rig, limbs[tip][4], angles[tip]
        if rotation and tip.startswith("hand"):
            con.use_rotation = True


def nla_bake(rig: bpy.types.Object, frames: int) -> None:
    """Blender's own IK baked to keys: ``nla.bake`` with visual keying, constraints cleared."""
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="POSE")
    bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=False, visual_keying=True,
                     clear_constraints=True, bake_types={"POSE"})
    bpy.ops.object.mode_set(mode="OBJECT")
