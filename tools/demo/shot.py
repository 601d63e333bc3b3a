"""The demo's shot, built in code: a walking character with a cape, a flag in wind, a drape.

Everything is built from Blender's own data (no input file):

* ``build_character``: Blender's Rigify human metarig (the bundled ``rigify`` add-on), a
  ``root`` bone, a ``torso`` bone carrying the spine, foot and knee-pole control bones parented
  to the root and keyed in a walk cycle, and a body of capsules (one per limb or spine bone,
  joined into one mesh, each capsule weighted 1.0 to its bone) deformed by the armature. The
  left arm reaches for a lantern that circles in front of the character.
* ``build_tail``: a tail of :data:`TAIL_BONES` bones on the hips (``spine``), pointing back and
  down from the back of the pelvis, with a tapered mesh of capsules skinned to it; a Sinew spring
  chain (the TAIL preset) on its tip swings it behind the walk.
* ``build_cape``: a cape whose top row is pinned to the chest bone, colliding with the body.
* ``build_flag``: a flag on a pole, in a Wind force field.
* ``build_drape``: a cloth falling onto a sphere that rests on the floor.

The add-on's settings of the elements are in ``configure_ik_chains``,
``configure_spring_bones`` and ``configure_springs`` only. All positions of the character are
in the armature's space (Rigify's: the character faces −Y, Z up); the armature object is turned so
that it walks along world −X, its left side to the camera.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

FPS = 24

# ---------------------------------------------------------------------------- names (checks read them)

ARMATURE = "Hero"
BODY = "HeroBody"
TAIL = "HeroTail"
LANTERN = "Lantern"
CAPE = "Cape"
FLAG = "Flag"
FLAG_CALM = "FlagNoWind"     # the same flag baked without force fields (the checks' reference)
FLAG_POLE = "FlagPole"
WIND = "Wind"
DRAPE = "Drape"
BALL = "DrapeBall"
FLOOR = "Floor"

#: IK chains of the character: tip bone -> (chain length, control bone (target), pole bone).
LEG_CHAINS = {"shin.L": (2, "foot_ik.L", "knee_pole.L"), "shin.R": (2, "foot_ik.R", "knee_pole.R")}
ARM_TIP = "hand.L"             # upper_arm.L -> hand.L, the hand oriented as the lantern (use_rotation)
ARM_POLE = "elbow_pole.L"

#: Capsules of the body: bone -> (radius at head, radius at tail, x scale of the cross-section).
CAPSULES: dict[str, tuple[float, float, float]] = {
    "spine": (0.14, 0.13, 1.3), "spine.001": (0.125, 0.12, 1.3), "spine.002": (0.12, 0.13, 1.3),
    "spine.003": (0.13, 0.11, 1.35), "spine.004": (0.05, 0.05, 1.0), "spine.005": (0.05, 0.05, 1.0),
    "spine.006": (0.1, 0.1, 0.9),
}
for _side in ("L", "R"):
    CAPSULES.update({
        f"shoulder.{_side}": (0.05, 0.05, 1.0), f"upper_arm.{_side}": (0.055, 0.045, 1.0),
        f"forearm.{_side}": (0.045, 0.035, 1.0), f"hand.{_side}": (0.035, 0.03, 1.0),
        f"thigh.{_side}": (0.085, 0.06, 1.0), f"shin.{_side}": (0.06, 0.042, 1.0),
        f"foot.{_side}": (0.045, 0.035, 1.0), f"toe.{_side}": (0.035, 0.03, 1.0),
    })

#: The tail: its bones, root first, parented to the hips (the metarig's ``spine``); it leaves
#: the back of the pelvis at TAIL_ROOT (armature space, 3 cm outside the body's skin: the body
#: is a collider of the chain, and a root within the chain's radius of it made the bake diverge
#: at its first frame) and each bone points back (+Y) and down by its angle below the horizontal
#: (degrees), curling up toward the tip; bone lengths (m) and the radii of its mesh at each
#: joint (m). The tail hangs below the cape's hem.
TAIL_BONES = [f"tail.{i:03d}" for i in range(1, 7)]
TAIL_TIP = TAIL_BONES[-1]
TAIL_PARENT = "spine"
TAIL_ROOT = (0.0, 0.2, 0.93)
TAIL_ANGLES = (58.0, 50.0, 42.0, 34.0, 26.0, 18.0)
TAIL_LENGTHS = (0.12, 0.11, 0.10, 0.09, 0.08, 0.07)
TAIL_RADII = (0.04, 0.034, 0.029, 0.024, 0.019, 0.015, 0.011)
TAIL_PRESET = "TAIL"

# Walk: hips lowered so the knees bend, one step every STEP frames, WALK_SPEED m/s.
STEP = 30
WALK_SPEED = 0.2
HIPS_DROP = 0.05

# Where the flag pole and the drape's ball stand (world x, y); the character walks along y = 0
# from x = 0.6 to x = -1.4 (240 frames), seen from the front right so the cape shows.
FLAG_AT = (-4.3, 0.8)
DRAPE_AT = (2.0, 0.9)
LIFT = 0.07

#: The drape: a square cloth (m, cuts) dropped from this height onto a ball of radius 0.45 m.
DRAPE_SIZE = 1.5
DRAPE_CUTS = 20
DRAPE_HEIGHT = 1.05


@dataclass
class Shot:
    """What the bake and the checks need to find again."""

    frames: int
    armature: object = None
    ik_tips: list[str] = field(default_factory=list)
    spring_bone_tips: list[str] = field(default_factory=list)
    springs: list[object] = field(default_factory=list)
    camera: object = None


# ---------------------------------------------------------------------------- helpers


def link(ob, collection=None):
    import bpy

    (collection or bpy.context.scene.collection).objects.link(ob)
    return ob


def mesh_object(name: str, verts, faces, collection=None):
    import bpy

    me = bpy.data.meshes.new(name)
    me.from_pydata([tuple(v) for v in verts], [], [tuple(f) for f in faces])
    me.update()
    return link(bpy.data.objects.new(name, me), collection)


def grid(nx: int, ny: int) -> tuple[list[tuple[float, float]], list[tuple[int, int, int, int]]]:
    """A (nx+1)×(ny+1) grid of (u, v) in [0, 1]², row-major in v, and its quads."""
    uv = [(i / nx, j / ny) for j in range(ny + 1) for i in range(nx + 1)]
    quads = [(j * (nx + 1) + i, j * (nx + 1) + i + 1, (j + 1) * (nx + 1) + i + 1, (j + 1) * (nx + 1) + i)
             for j in range(ny) for i in range(nx)]
    return uv, quads


def capsule(matrix, length: float, r0: float, r1: float, sx: float, seg: int = 12, cap: int = 3):
    """Vertices and faces of a capsule along a bone (local Y from 0 to ``length``).

    The cross-section at local y is an ellipse of radii (sx·r(y), r(y)) with r linear from
    ``r0`` to ``r1``, closed by half-ellipsoids of radius ``r0`` / ``r1`` at the ends; ``matrix``
    is the bone's rest matrix (armature space). :func:`checks.capsule_depth` measures the same
    shape analytically.
    """
    from mathutils import Vector

    rings = [(-r0, 0.0)]                                   # (y, radial) from head pole to tail pole
    rings += [(-r0 * math.cos(math.pi / 2 * k / cap), r0 * math.sin(math.pi / 2 * k / cap)) for k in range(1, cap + 1)]
    rings += [(length + r1 * math.sin(math.pi / 2 * k / cap), r1 * math.cos(math.pi / 2 * k / cap))
              for k in range(0, cap)]
    rings.append((length + r1, 0.0))
    verts = [matrix @ Vector((0.0, rings[0][0], 0.0))]
    for y, rad in rings[1:-1]:
        for k in range(seg):
            a = 2 * math.pi * k / seg
            verts.append(matrix @ Vector((sx * rad * math.cos(a), y, rad * math.sin(a))))
    verts.append(matrix @ Vector((0.0, rings[-1][0], 0.0)))
    n_rings = len(rings) - 2
    faces = [(0, 1 + (k + 1) % seg, 1 + k) for k in range(seg)]
    for r in range(n_rings - 1):
        a, b = 1 + r * seg, 1 + (r + 1) * seg
        faces += [(a + k, a + (k + 1) % seg, b + (k + 1) % seg, b + k) for k in range(seg)]
    last, top = 1 + (n_rings - 1) * seg, len(verts) - 1
    faces += [(last + k, last + (k + 1) % seg, top) for k in range(seg)]
    return [tuple(v) for v in verts], faces


def key_bone_location(pb, frame: int, offset) -> None:
    """Key ``pb``'s location so its head moves by ``offset`` (armature space) from rest.

    Valid for the bones keyed here: their parents only translate, so a pose location (in the
    bone's rest axes) is the armature-space offset turned into those axes.
    """
    from mathutils import Vector

    pb.location = pb.bone.matrix_local.to_3x3().inverted() @ Vector(offset)
    pb.keyframe_insert("location", frame=frame)


# ---------------------------------------------------------------------------- the walk


def hips_offset(f: float) -> tuple[float, float, float]:
    """Armature-space offset of the torso from its rest position at frame ``f``."""
    t = (f - 1) / FPS
    phase = 2 * math.pi * (f - 1) / STEP
    return (0.015 * math.sin(phase / 2), -WALK_SPEED * t + 0.6, -HIPS_DROP + 0.015 * math.cos(phase))


def foot_offset(side: str, f: float) -> tuple[float, float, float]:
    """Armature-space offset of a foot control from rest at frame ``f``: planted, then a swing.

    Steps alternate, right foot first, one every ``STEP`` frames; a foot swings during the
    first 70 % of its step window (eased, lifted by ``LIFT``) and lands one stride
    (``2·WALK_SPEED·STEP/FPS``) ahead, so the hips, moving at ``WALK_SPEED``, stay between the feet.
    """
    stride = 2 * WALK_SPEED * STEP / FPS
    start = 0.6 + (stride / 4 if side == "R" else -stride / 4)
    tau = (f - 1) - (0 if side == "R" else STEP)
    done, progress = 0, 0.0
    if tau >= 0:
        done = math.floor(tau / (2 * STEP))
        r = tau - 2 * STEP * done
        if r < 0.7 * STEP:
            progress = 0.5 - 0.5 * math.cos(math.pi * r / (0.7 * STEP))
        else:
            done += 1
    return (0.0, start - (done + progress) * stride, LIFT * math.sin(math.pi * progress))


# ---------------------------------------------------------------------------- elements


def capsule_distance(points, matrix, length: float, r0: float, r1: float, sx: float):
    """Approximate signed distance (m, negative inside) of points (n, 3) to a :func:`capsule`."""
    import numpy as np

    m = np.array([list(row) for row in matrix], dtype=np.float64)
    inv = np.linalg.inv(m)
    p = points @ inv[:3, :3].T + inv[:3, 3]
    x, y, z = p[:, 0] / sx, p[:, 1], p[:, 2]
    r = r0 + (r1 - r0) * np.clip(y / length, 0.0, 1.0)
    d = np.hypot(x, z) - r
    below, above = y < 0, y > length
    d[below] = np.sqrt(x[below] ** 2 + y[below] ** 2 + z[below] ** 2) - r0
    d[above] = np.sqrt(x[above] ** 2 + (y[above] - length) ** 2 + z[above] ** 2) - r1
    return d


def build_body(arm, rest: dict, voxel: float = 0.02):
    """One closed skin around the capsules, skinned to their bones.

    The capsules (one per bone of :data:`CAPSULES`) overlap at the joints; their union is
    remeshed by Blender's voxel Remesh modifier into one closed surface without inner faces
    (a collider must have an inside and an outside), and each vertex is weighted to the bones
    whose capsules it lies on, blended over ``0.15·voxel``–1 cm near the joints.
    """
    import bpy
    import numpy as np

    verts, faces = [], []
    for name, (r0, r1, sx) in CAPSULES.items():
        mat, length = rest[name]
        v, fs = capsule(mat, length, r0, r1, sx)
        faces += [tuple(len(verts) + i for i in f) for f in fs]
        verts += v
    parts = mesh_object(BODY + "Capsules", verts, faces)
    remesh = parts.modifiers.new("Remesh", "REMESH")
    remesh.mode, remesh.voxel_size, remesh.use_smooth_shade = "VOXEL", voxel, True
    dg = bpy.context.evaluated_depsgraph_get()
    me = bpy.data.meshes.new_from_object(parts.evaluated_get(dg))
    bpy.data.objects.remove(parts)
    me.name = BODY
    body = link(bpy.data.objects.new(BODY, me))
    body.parent = arm
    co = np.empty(3 * len(me.vertices))
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    names = list(CAPSULES)
    dist = np.stack([capsule_distance(co, rest[n][0], rest[n][1], *CAPSULES[n]) for n in names], axis=1)
    w = np.exp(-(dist - dist.min(axis=1, keepdims=True)) / 0.01)
    w[w < 0.02] = 0.0
    w /= w.sum(axis=1, keepdims=True)
    for j, name in enumerate(names):
        group = body.vertex_groups.new(name=name)
        for value in np.unique(np.round(w[:, j], 2)):
            if value > 0:
                group.add(np.flatnonzero(np.round(w[:, j], 2) == value).tolist(), float(value), "REPLACE")
    body.modifiers.new("Armature", "ARMATURE").object = arm
    body.color = (0.85, 0.78, 0.68, 1.0)
    return body




def build_character(frames: int):
    """The metarig, its control bones keyed in a walk, the capsule body, the lantern."""
    import addon_utils
    import bpy
    from mathutils import Matrix, Vector

    addon_utils.enable("rigify", default_set=True)
    bpy.ops.object.armature_human_metarig_add()
    arm = bpy.context.object
    arm.name = arm.data.name = ARMATURE
    arm.rotation_euler = (0.0, 0.0, -math.pi / 2)     # walks along world −X, left side to the camera
    arm.location = (0.0, 0.0, 0.0)
    bpy.ops.object.mode_set(mode="EDIT")
    eb = arm.data.edit_bones
    root = eb.new("root")
    root.head, root.tail, root.roll = (0, 0, 0), (0, 0.5, 0), 0.0
    torso = eb.new("torso")
    hips = eb["spine"]
    torso.head, torso.tail, torso.roll = hips.head, hips.head + Vector((0, 0.3, 0)), 0.0
    torso.parent = root
    hips.parent = torso
    controls = {}
    for side in ("L", "R"):
        ankle = eb[f"shin.{side}"].tail.copy()
        knee = eb[f"shin.{side}"].head.copy()
        controls[f"foot_ik.{side}"] = (ankle, root)
        controls[f"knee_pole.{side}"] = (Vector((knee.x, knee.y - 0.6, knee.z)), root)
    elbow = eb["forearm.L"].head.copy()
    controls[ARM_POLE] = (Vector((elbow.x + 0.1, elbow.y + 0.5, elbow.z - 0.2)), torso)
    for name, (head, parent) in controls.items():
        b = eb.new(name)
        b.head, b.tail, b.roll = head, head + Vector((0, 0.12, 0)), 0.0
        b.parent = parent
        b.use_deform = False
    rest = {name: (Matrix(b.matrix), b.length) for name, b in eb.items() if name in CAPSULES}
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in arm.pose.bones:
        pb.rotation_mode = "QUATERNION"

    # The walk: torso, feet and poles keyed on every frame.
    pose = arm.pose.bones
    for f in range(1, frames + 1):
        hx, hy, hz = hips_offset(f)
        key_bone_location(pose["torso"], f, (hx, hy, hz))
        for side in ("L", "R"):
            key_bone_location(pose[f"foot_ik.{side}"], f, foot_offset(side, f))
            key_bone_location(pose[f"knee_pole.{side}"], f, (0.0, hy, 0.0))

    # The right arm hangs down from the A-pose and swings against the left leg (FK keys).
    upper = pose["upper_arm.R"]
    rest_rot = upper.bone.matrix_local.to_3x3()
    for f in range(1, frames + 1):
        swing = 0.35 * math.sin(math.pi * (f - 1) / STEP)
        turn = Matrix.Rotation(-0.75, 3, "Y") @ Matrix.Rotation(swing, 3, "X")
        upper.rotation_quaternion = (rest_rot.inverted() @ turn @ rest_rot).to_quaternion()
        upper.keyframe_insert("rotation_quaternion", frame=f)
    body = build_body(arm, rest)
    # The lantern the left arm reaches for: circles in front of the left shoulder as it walks.
    import bmesh

    me = bpy.data.meshes.new(LANTERN)
    bm = bmesh.new()
    bmesh.ops.create_icosphere(bm, subdivisions=2, radius=0.07)
    bm.to_mesh(me)
    bm.free()
    lantern = link(bpy.data.objects.new(LANTERN, me))
    lantern.color = (1.0, 0.75, 0.1, 1.0)
    lantern.rotation_mode = "QUATERNION"
    shoulder = Vector(arm.data.bones["upper_arm.L"].head_local)
    for f in range(1, frames + 1):
        a = 2 * math.pi * (f - 1) / 96.0
        local = shoulder + Vector(hips_offset(f)) + Vector((0.22 + 0.08 * math.cos(a), -0.28 + 0.1 * math.sin(a),
                                                             -0.12 + 0.1 * math.sin(a)))
        lantern.location = arm.matrix_world @ local
        lantern.keyframe_insert("location", frame=f)
        lantern.rotation_quaternion = Matrix.Rotation(0.6 * math.sin(a), 4, "Y").to_quaternion()
        lantern.keyframe_insert("rotation_quaternion", frame=f)
    return arm, body, lantern


def build_tail(arm):
    """The tail's bones on the hips (:data:`TAIL_BONES`) and its mesh, skinned to them.

    Each bone carries one capsule (:func:`capsule`, tapering from joint to joint), weighted 1.0
    to its bone: the mesh follows the baked bones with nothing but Blender's Armature modifier.
    The mesh has no Collision modifier, so the tail's own chain does not collide with it.
    """
    import bpy
    from mathutils import Matrix, Vector

    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode="EDIT")
    eb = arm.data.edit_bones
    parent, head = eb[TAIL_PARENT], Vector(TAIL_ROOT)
    for name, angle, length in zip(TAIL_BONES, TAIL_ANGLES, TAIL_LENGTHS):
        a = math.radians(angle)
        b = eb.new(name)
        b.head, b.tail, b.roll = head, head + length * Vector((0.0, math.cos(a), -math.sin(a))), 0.0
        b.parent, b.use_connect = parent, parent.name != TAIL_PARENT
        parent, head = b, b.tail.copy()
    rest = {name: (Matrix(eb[name].matrix), eb[name].length) for name in TAIL_BONES}
    bpy.ops.object.mode_set(mode="OBJECT")
    for name in TAIL_BONES:
        arm.pose.bones[name].rotation_mode = "QUATERNION"
    verts, faces, groups = [], [], []
    for k, name in enumerate(TAIL_BONES):
        mat, length = rest[name]
        v, fs = capsule(mat, length, TAIL_RADII[k], TAIL_RADII[k + 1], 1.0, seg=10, cap=2)
        faces += [tuple(len(verts) + i for i in f) for f in fs]
        groups.append(range(len(verts), len(verts) + len(v)))
        verts += v
    tail = mesh_object(TAIL, verts, faces)
    for poly in tail.data.polygons:
        poly.use_smooth = True
    tail.parent = arm
    for name, members in zip(TAIL_BONES, groups):
        tail.vertex_groups.new(name=name).add(list(members), 1.0, "REPLACE")
    tail.modifiers.new("Armature", "ARMATURE").object = arm
    tail.color = (0.62, 0.38, 0.2, 1.0)
    return tail


def build_cape(arm, body):
    """A cape hanging from the shoulders: top row pinned, every vertex riding the chest bone."""
    nx, ny = 12, 18
    uv, quads = grid(nx, ny)
    verts = []
    for u, v in uv:
        width = 0.42 + 0.2 * v
        x = (u - 0.5) * width
        z = 1.6 - 0.92 * v
        y = 0.17 + 0.12 * v - 0.6 * x * x * (1 - v)
        verts.append((x, y, z))
    cape = mesh_object(CAPE, verts, quads)
    cape.parent = arm
    top = [i for i, (u, v) in enumerate(uv) if v == 0.0]
    cape.vertex_groups.new(name="spine.003").add(list(range(len(uv))), 1.0, "REPLACE")
    cape.vertex_groups.new(name="pin").add(top, 1.0, "REPLACE")
    cape.modifiers.new("Armature", "ARMATURE").object = arm
    cape.color = (0.55, 0.06, 0.08, 1.0)
    return cape


#: The flag's size (m) and cuts, and its wind: a Wind field behind the pole blowing along +X
#: (a field blows along its object's local Z) and a Turbulence field drifting downwind with the
#: air, which ripples the flag so that the wind catches it.
FLAG_SIZE = (1.2, 0.8)
FLAG_CUTS = (20, 13)
WIND_STRENGTH = 8.0
TURBULENCE = "FlagTurbulence"
TURBULENCE_STRENGTH = 1.0
#: The flag as modelled: a slight wave across it (m), as a flag lifted from a fold has; a
#: perfectly flat flag edge-on to gravity would need a push to hang, or to flutter.
FLAG_WAVE = 0.02


def flag_vertices() -> tuple[list[tuple[float, float, float]], list[tuple[int, int, int, int]], list[int]]:
    """The flag's vertices (world), quads and pole-edge vertex indices."""
    (w, h), (nx, ny) = FLAG_SIZE, FLAG_CUTS
    uv, quads = grid(nx, ny)
    verts = [(FLAG_AT[0] + 0.035 + w * u, FLAG_AT[1] + FLAG_WAVE * u * math.sin(3 * math.pi * u + 2 * v),
              2.7 - h * v) for u, v in uv]
    return verts, quads, [i for i, (u, _v) in enumerate(uv) if u == 0.0]


def build_flag(frames: int):
    """A flag on a pole, its pole edge pinned, in the wind.

    A hidden copy (:data:`FLAG_CALM`) is baked with the same settings but no force fields: it
    hangs from its pole, and the checks compare the windy flag with it.
    """
    import bmesh
    import bpy

    me = bpy.data.meshes.new(FLAG_POLE)
    bm = bmesh.new()
    bmesh.ops.create_cone(bm, cap_ends=True, segments=12, radius1=0.035, radius2=0.035, depth=2.8)
    bm.to_mesh(me)
    bm.free()
    pole = link(bpy.data.objects.new(FLAG_POLE, me))
    pole.location = (FLAG_AT[0], FLAG_AT[1], 1.4)
    pole.color = (0.35, 0.3, 0.25, 1.0)
    verts, quads, pins = flag_vertices()
    flag = mesh_object(FLAG, verts, quads)
    flag.vertex_groups.new(name="pin").add(pins, 1.0, "REPLACE")
    flag.color = (0.1, 0.3, 0.75, 1.0)
    calm = link(bpy.data.objects.new(FLAG_CALM, flag.data.copy()))
    calm.vertex_groups.new(name="pin").add(pins, 1.0, "REPLACE")
    calm.hide_render = True
    calm.hide_set(True)
    bpy.ops.object.effector_add(type="WIND", location=(FLAG_AT[0] - 1.0, FLAG_AT[1], 2.3),
                                rotation=(0.0, math.pi / 2, 0.0))
    wind = bpy.context.object
    wind.name = WIND
    wind.field.strength = WIND_STRENGTH
    wind.field.flow = 1.0
    bpy.ops.object.effector_add(type="TURBULENCE", location=(FLAG_AT[0], FLAG_AT[1], 2.3))
    turbulence = bpy.context.object
    turbulence.name = TURBULENCE
    turbulence.field.strength, turbulence.field.size = TURBULENCE_STRENGTH, 0.5
    for f in (1, frames):
        turbulence.location.x = FLAG_AT[0] + 3.0 * (f - 1) / FPS  # the gusts travel with the wind
        turbulence.keyframe_insert("location", frame=f)
    return flag, calm, wind


def build_drape():
    """A floor, a sphere resting on it, and a square cloth above the sphere."""
    import bmesh
    import bpy

    floor = mesh_object(FLOOR, [(-40, -20, 0), (40, -20, 0), (40, 60, 0), (-40, 60, 0)], [(0, 1, 2, 3)])
    floor.color = (0.55, 0.57, 0.6, 1.0)
    me = bpy.data.meshes.new(BALL)
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=32, v_segments=16, radius=0.45)
    bm.to_mesh(me)
    bm.free()
    for poly in me.polygons:
        poly.use_smooth = True
    ball = link(bpy.data.objects.new(BALL, me))
    ball.location = (DRAPE_AT[0], DRAPE_AT[1], 0.45)
    ball.color = (0.75, 0.75, 0.72, 1.0)
    uv, quads = grid(DRAPE_CUTS, DRAPE_CUTS)
    drape = mesh_object(DRAPE, [(DRAPE_AT[0] + DRAPE_SIZE * (u - 0.5), DRAPE_AT[1] + DRAPE_SIZE * (v - 0.5), DRAPE_HEIGHT)
                               for u, v in uv],
                        quads)
    drape.color = (0.2, 0.55, 0.35, 1.0)
    return drape, ball, floor


# ---------------------------------------------------------------------------- the add-on's settings


def configure_ik_chains(arm, lantern) -> list[str]:
    """Set up the Sinew chains of the character; returns their tip bones.

    The legs follow the foot control bones and bend toward the knee-pole bones through
    ``target_bone`` / ``pole_bone`` (as Rigify's generated rig does); the arm chain runs to the
    hand with ``use_rotation`` toward the lantern's orientation. Every chain keeps the add-on's
    default solver.
    """
    tips = []
    for tip, (length, control, pole) in LEG_CHAINS.items():
        s = arm.pose.bones[tip].sinew_ik
        s.enabled, s.chain_length = True, length
        s.target_mode, s.max_iterations, s.tolerance = "OBJECT", 200, 1e-5
        s.target, s.target_bone = arm, control
        s.pole_target, s.pole_bone = arm, pole
        s.pole_angle = blender_pole_angle(arm, tip, length, arm, control, pole)
        tips.append(tip)
    s = arm.pose.bones[ARM_TIP].sinew_ik
    s.chain_length, s.use_rotation, s.rotation_weight = 3, True, 0.5
    s.pole_target, s.pole_bone = arm, ARM_POLE
    s.pole_angle = blender_pole_angle(arm, ARM_TIP, 3, lantern, "", ARM_POLE)
    s.enabled, s.target_mode, s.target = True, "OBJECT", lantern
    s.max_iterations, s.tolerance = 200, 1e-5
    tips.append(ARM_TIP)
    return tips


def blender_pole_angle(arm, tip: str, chain_length: int, target, target_bone: str, pole_bone: str,
                       frame: int = 1) -> float:
    """The ``pole_angle`` (radians) that makes Blender's own IK constraint aim the chain's middle
    joint (knee, elbow) at ``pole_bone`` at ``frame``, to the degree (10° steps, then 1°).

    Blender measures the pole angle from the root bone's own axes, so the value depends on the
    rig (Rigify's legs: −90°; the metarig's arm: about −102°); the rig feature gives Sinew the
    same value, with Blender's meaning, so both solvers bend the joint the same way.
    """
    import bpy
    import numpy as np

    pb = arm.pose.bones[tip]
    con = pb.constraints.new("IK")
    con.target, con.chain_count = target, chain_length
    if target_bone:
        con.subtarget = target_bone
    con.pole_target, con.pole_subtarget = arm, pole_bone
    bones = [pb]
    while len(bones) < chain_length:
        bones.append(bones[-1].parent)
    scene = bpy.context.scene
    frame0 = scene.frame_current
    scene.frame_set(frame)
    def miss(deg: float) -> float:
        """Angle (radians) between the middle joint's bend and the pole, about the root–tip axis."""
        con.pole_angle = math.radians(deg)
        dg = bpy.context.evaluated_depsgraph_get()
        dg.update()
        ev = arm.evaluated_get(dg).pose.bones
        root, mid = np.array(ev[bones[-1].name].head), np.array(ev[bones[-2].name].head)
        end, pole = np.array(ev[tip].tail), np.array(ev[pole_bone].head)
        u = (end - root) / np.linalg.norm(end - root)
        bend = (mid - root) - np.dot(mid - root, u) * u
        aim = (pole - root) - np.dot(pole - root, u) * u
        cos = np.dot(bend, aim) / (np.linalg.norm(bend) * np.linalg.norm(aim))
        return math.acos(float(np.clip(cos, -1.0, 1.0)))

    try:
        coarse = min((miss(deg), deg) for deg in range(-180, 180, 10))[1]
        best = min((miss(deg), deg) for deg in range(coarse - 10, coarse + 11))
    finally:
        pb.constraints.remove(con)
        scene.frame_set(frame0)
    return math.radians(best[1])


def configure_spring_bones(arm) -> list[str]:
    """Set up the Sinew spring chain of the tail; returns its tip bone.

    The chain is the whole tail (tip and its ``chain_length − 1`` parents), set from the TAIL
    preset through the add-on's preset operator with the tip as the active pose bone, as a
    user clicks it in Bone properties. Its colliders are the scene's Collision objects (the
    body among them); the tail's own mesh is not one.
    """
    import bpy

    bpy.context.view_layer.objects.active = arm
    pb = arm.pose.bones[TAIL_TIP]
    arm.data.bones.active = pb.bone
    with bpy.context.temp_override(active_object=arm, object=arm, active_pose_bone=pb):
        if bpy.ops.sinew.spring_bones_preset(preset=TAIL_PRESET) != {"FINISHED"}:
            raise RuntimeError(f"the {TAIL_PRESET} preset did not apply to {TAIL_TIP}")
    s = pb.sinew_spring
    s.enabled, s.chain_length = True, len(TAIL_BONES)
    return [TAIL_TIP]


#: Spring settings per element: a preset of the Cloth panel (DENSITY + MATERIAL, with a
#: strain limit, and the preset's own solver), then these overrides. The cape takes the VBD
#: solver (contact and self-contact inside the solve) at one substep of 16 iterations (as
#: many as the presets give pinned cloth a substep since it starts from FAST's global solve
#: of the step; 20 before); the drape the solver the preset gives cloth that lands on
#: colliders (VBD, 3 × 10), with
#: self-collision on (without it VBD's drape crossed its own folds as it landed, as Blender's
#: does: docs/CONTACT.md, "Self-contact inside the VBD solve").
SPRINGS: dict[str, dict[str, object]] = {
    CAPE: dict(preset="COTTON", solver="VBD", substeps=1, iterations=16),
    FLAG: dict(preset="FLAG", substeps=1, pre_roll=24),
    DRAPE: dict(preset="COTTON", solver="VBD", substeps=3, iterations=10),
}

#: Collision modifier settings of the colliders: thickness_outer (m), cloth_friction.
#: Blender's Cloth reads cloth_friction / 100 as Coulomb's μ: 20 (μ 0.2) is cotton on a
#: painted ball and floor; at μ 0.08 and 3 substeps the drape still crept over the ball
#: (0.06-0.08 m/s at frame 240) after the contact rework of session 4.
COLLIDERS: dict[str, tuple[float, float]] = {BODY: (0.015, 5.0), BALL: (0.01, 20.0), FLOOR: (0.01, 20.0)}


def configure_springs(cape, flag, calm, drape, body, ball, floor) -> list:
    """Set up the spring meshes; returns them in bake order.

    Each cloth gets its preset (:data:`SPRINGS`) and lists its colliders in a
    ``collision_collection``; the colliders carry Blender's Collision modifier, whose thickness
    and friction the bake uses (:data:`COLLIDERS`). The cape collides with itself. The flag
    feels the scene's force fields; its calm twin, the cape and the drape do not.
    """
    import bpy

    for ob in (cape, flag, calm, drape):
        s = ob.sinew_springs
        s.enabled = True
        settings = dict(SPRINGS[FLAG if ob is calm else ob.name])
        bpy.context.view_layer.objects.active = ob
        bpy.ops.sinew.springs_preset(preset=settings.pop("preset"))
        for key, value in settings.items():
            setattr(s, key, value)
        s.use_force_fields = ob is flag
        s.field_weight = 1.0
    for ob in (cape, flag, calm):
        ob.sinew_springs.pin_group = "pin"
    for cloth, colliders in ((cape, (body,)), (drape, (ball, floor))):
        col = bpy.data.collections.new(f"{cloth.name}Colliders")
        bpy.context.scene.collection.children.link(col)
        for ob in colliders:
            col.objects.link(ob)
        cloth.sinew_springs.collision_collection = col
    for ob in (body, ball, floor):
        thickness, friction = COLLIDERS[ob.name]
        ob.modifiers.new("Collision", "COLLISION")
        ob.collision.thickness_outer = thickness
        ob.collision.cloth_friction = friction
    cape.sinew_springs.self_collision = True
    cape.sinew_springs.self_distance = 0.005
    drape.sinew_springs.self_collision = True
    return [cape, flag, calm, drape]


# ---------------------------------------------------------------------------- the whole shot


def build_shot(frames: int) -> Shot:
    """Build every element, camera and look of the shot in the current (empty) scene."""
    import bpy
    from mathutils import Vector

    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps = FPS
    shot = Shot(frames)
    arm, body, lantern = build_character(frames)
    build_tail(arm)
    cape = build_cape(arm, body)
    flag, calm, _wind = build_flag(frames)
    drape, ball, floor = build_drape()
    shot.armature = arm
    shot.ik_tips = configure_ik_chains(arm, lantern)
    shot.spring_bone_tips = configure_spring_bones(arm)
    shot.springs = configure_springs(cape, flag, calm, drape, body, ball, floor)
    arm.hide_render = True

    cam = link(bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera")))
    cam.location = (3.4, -5.4, 1.8)
    cam.rotation_euler = (Vector((-0.5, 1.0, 1.25)) - cam.location).to_track_quat("-Z", "Y").to_euler()
    cam.data.lens = 30
    scene.camera = shot.camera = cam
    world = bpy.data.worlds.new("World")
    world.color = (0.8, 0.83, 0.88)
    scene.world = world
    scene.render.engine = "BLENDER_WORKBENCH"
    shading = scene.display.shading
    shading.light, shading.color_type = "STUDIO", "OBJECT"
    shading.show_shadows = True
    shading.show_cavity = False
    return shot
