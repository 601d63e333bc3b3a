"""The figures the demo holds itself to, measured on the saved file with the add-on disabled.

``measure`` steps the saved shot frame by frame with nothing but Blender evaluating it (the
baked keys and shape keys), so every figure is what a user opening ``out/demo.blend`` sees;
``evaluate`` turns the measurements into named checks.

A check that a short run cannot pass is listed in :data:`PENDING_CHECKS` with the reason:
in the quick demo it is measured and printed like the others, but its failure does not fail
the demo; in the full demo every check counts. A pending check that passes is reported as
such, so an entry is never left behind silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import shot

#: Check name -> why it is pending in a short run (the quick demo's 48 frames). The full demo
#: (240 frames) holds every check; in a run shorter than :data:`SETTLE_FRAMES` these are
#: measured and printed but do not fail it.
PENDING_CHECKS: dict[str, str] = {
    "drape at rest on the ball": "the drape rests by frame 240 (0.02 m/s) but still moves 0.3–0.6 m/s "
                                 "after 48 frames",
}
SETTLE_FRAMES = 200

#: Tolerances (m unless said).
TIP_TOLERANCE = 1e-3
PENETRATION_TOLERANCE = 3e-3
REST_SPEED = 0.05            # m/s, largest vertex speed of a cloth "at rest"
STRAIN_LIMIT = 0.10
FLAG_STREAMS = 0.6           # the windy flag's free edge reaches this fraction of its length downwind
FLAG_HANGS = 0.5             # the calm twin's free edge stays within this fraction of it (it hangs)
TAIL_LENGTH_TOLERANCE = 1e-3  # relative: the tail's bones keep their rest lengths (stretch 0)
TAIL_SWING = 3.0             # degrees: the tail tip, seen from the hips, swings through more than this


@dataclass
class Check:
    name: str
    ok: bool
    measured: str
    pending: str | None = None


def _world_vertices(ob, depsgraph) -> np.ndarray:
    ev = ob.evaluated_get(depsgraph)
    me = ev.to_mesh()
    try:
        co = np.empty(3 * len(me.vertices))
        me.vertices.foreach_get("co", co)
    finally:
        ev.to_mesh_clear()
    m = np.array([list(r) for r in ev.matrix_world])
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def _edges(ob) -> np.ndarray:
    e = np.empty(2 * len(ob.data.edges), dtype=np.int64)
    ob.data.edges.foreach_get("vertices", e)
    return e.reshape(-1, 2)


def _signed_to_mesh(points: np.ndarray, verts: np.ndarray, polys: list) -> np.ndarray:
    """Signed distance of points to a closed mesh (negative inside), by its nearest face's normal."""
    from mathutils import Vector
    from mathutils.bvhtree import BVHTree

    tree = BVHTree.FromPolygons(verts.tolist(), polys)
    out = np.empty(len(points))
    for i, p in enumerate(points):
        loc, normal, _idx, dist = tree.find_nearest(Vector(p))
        out[i] = dist if (Vector(p) - loc).dot(normal) >= 0 else -dist
    return out


def _action_fcurves(action) -> list:
    """The F-curves of an action: its layers' channelbags (4.4+, the only place in 5.x), or
    ``action.fcurves`` (before 4.4)."""
    layers = getattr(action, "layers", None)
    if layers:
        return [fc for layer in layers for strip in layer.strips for bag in strip.channelbags for fc in bag.fcurves]
    return list(action.fcurves)


def _keyed_frames(arm, bones: list[str]) -> dict[str, set[int]]:
    """Frames at which each bone has a key on every channel of its rotation (quaternion)."""
    action = arm.animation_data.action if arm.animation_data else None
    channels: dict[str, list[set[int]]] = {b: [] for b in bones}
    for fc in _action_fcurves(action) if action else []:
        for b in bones:
            if fc.data_path == f'pose.bones["{b}"].rotation_quaternion':
                channels[b].append({round(k.co[0]) for k in fc.keyframe_points})
    return {b: set.intersection(*c) if len(c) == 4 else set() for b, c in channels.items()}


def _self_crossings(verts: np.ndarray, polys: list) -> int:
    """Pairs of faces of one mesh that intersect and share no vertex."""
    from mathutils.bvhtree import BVHTree

    tree = BVHTree.FromPolygons(verts.tolist(), polys, epsilon=0.0)
    sets = [set(p) for p in polys]
    return sum(1 for a, b in tree.overlap(tree) if a < b and not (sets[a] & sets[b]))


def measure(frames: int) -> dict[str, np.ndarray]:
    """Per-frame figures of the open (baked, saved) shot: shape (frames,) each."""
    import bpy

    scene = bpy.context.scene
    obs = bpy.data.objects
    arm = obs[shot.ARMATURE]
    tips = {tip: control for tip, (_n, control, _p) in shot.LEG_CHAINS.items()}
    arm_tip = shot.ARM_TIP
    body, cape, flag, drape = obs[shot.BODY], obs[shot.CAPE], obs[shot.FLAG], obs[shot.DRAPE]
    calm, wind = obs[shot.FLAG_CALM], obs[shot.WIND]
    ball, pole = obs[shot.BALL], obs[shot.FLAG_POLE]
    body_polys = [tuple(p.vertices) for p in body.data.polygons]
    cape_polys = [tuple(p.vertices) for p in cape.data.polygons]
    ball_polys = [tuple(p.vertices) for p in ball.data.polygons]
    rest_len = {}
    for ob in (cape, flag, drape):
        e = _edges(ob)
        co = np.array([v.co[:] for v in ob.data.vertices])
        rest_len[ob.name] = (e, np.linalg.norm(co[e[:, 0]] - co[e[:, 1]], axis=1))
    rest_x = np.array([v.co.x for v in flag.data.vertices])
    flag_far = rest_x > rest_x.max() - 1e-6       # the free edge, opposite the pole
    radius = max(v.co.length for v in ball.data.vertices)
    out: dict[str, list] = {k: [] for k in (
        "tip shin.L", "tip shin.R", f"tip {arm_tip}", "cape clearance", "cape crossings", "drape clearance",
        "drape speed", "drape top gap", "flag reach", "calm reach", "strain Cape", "strain Flag", "strain Drape",
        "tail keyed", "tail length error", "tail x", "tail y", "tail z")}
    # The tail: its rotation keys, its bones' rest lengths, and its root-to-tip direction seen
    # from the hips (the parent's pose axes), per frame.
    tail = shot.TAIL_BONES
    keyed = _keyed_frames(arm, tail)
    tail_rest = np.array([arm.data.bones[b].length for b in tail])
    prev_drape = None
    frame0 = scene.frame_current
    for f in range(1, frames + 1):
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        ev = arm.evaluated_get(dg)
        mw = ev.matrix_world
        for tip, control in tips.items():
            got = mw @ ev.pose.bones[tip].tail
            want = mw @ ev.pose.bones[control].head
            out[f"tip {tip}"].append((got - want).length)
        got = mw @ ev.pose.bones[arm_tip].tail
        out[f"tip {arm_tip}"].append((got - obs[shot.LANTERN].evaluated_get(dg).matrix_world.translation).length)
        pose = ev.pose.bones
        out["tail keyed"].append(sum(f in keyed[b] for b in tail))
        lengths = np.array([(pose[b].tail - pose[b].head).length for b in tail])
        out["tail length error"].append(float(np.abs(lengths / tail_rest - 1.0).max()))
        hips = np.array([list(r) for r in pose[shot.TAIL_PARENT].matrix.to_3x3()])
        d = np.array(pose[tail[-1]].tail - pose[tail[0]].head) @ hips    # hips' axes: rows of hips.T
        d /= np.linalg.norm(d)
        for axis, value in zip("xyz", d):
            out[f"tail {axis}"].append(float(value))
        xs = {ob.name: _world_vertices(ob, dg) for ob in (body, cape, flag, drape, ball, calm)}
        out["cape clearance"].append(_signed_to_mesh(xs[shot.CAPE], xs[shot.BODY], body_polys).min())
        out["cape crossings"].append(_self_crossings(xs[shot.CAPE], cape_polys))
        c = np.array(ball.evaluated_get(dg).matrix_world.translation)
        d = xs[shot.DRAPE]
        to_ball = _signed_to_mesh(d, xs[shot.BALL], ball_polys).min()
        out["drape clearance"].append(min(float(to_ball), float(d[:, 2].min())))
        speed = 0.0 if prev_drape is None else float(np.linalg.norm(d - prev_drape, axis=1).max() * scene.render.fps)
        out["drape speed"].append(speed)
        prev_drape = d
        out["drape top gap"].append(float(np.linalg.norm(d - (c + np.array([0, 0, radius])), axis=1).min()))
        # How far the free edge reaches downwind of the pole: along the wind's horizontal
        # direction (a field blows along its object's local Z).
        pole_at = np.array(pole.evaluated_get(dg).matrix_world.translation)
        blow = np.array(wind.evaluated_get(dg).matrix_world.col[2][:3])
        blow[2] = 0.0
        blow /= np.linalg.norm(blow)
        for key, name in (("flag reach", shot.FLAG), ("calm reach", shot.FLAG_CALM)):
            out[key].append(float(((xs[name][flag_far] - pole_at) @ blow).mean()))
        for name, x in xs.items():
            if name in rest_len:
                e, rl = rest_len[name]
                out[f"strain {name}"].append(float((np.linalg.norm(x[e[:, 0]] - x[e[:, 1]], axis=1) / rl - 1).max()))
    scene.frame_set(frame0)
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


def evaluate(m: dict[str, np.ndarray]) -> list[Check]:
    """The named checks over the measurements of :func:`measure`."""
    checks = []
    tip_keys = [k for k in m if k.startswith("tip ")]
    worst = max(tip_keys, key=lambda k: m[k].max())
    checks.append(Check("IK tips on their targets", bool(max(m[k].max() for k in tip_keys) < TIP_TOLERANCE),
                        f"worst {m[worst].max():.2e} m ({worst[4:]}), limit {TIP_TOLERANCE:.0e} m"))
    worst = int(m["cape clearance"].argmin())
    checks.append(Check("cape outside the body", bool(m["cape clearance"].min() > -PENETRATION_TOLERANCE),
                        f"closest {1000 * m['cape clearance'][worst]:+.1f} mm (− = inside) at frame {worst + 1}"))
    checks.append(Check("cape free of self-crossings", bool(m["cape crossings"].max() == 0),
                        f"at most {int(m['cape crossings'].max())} crossing face pairs"))
    checks.append(Check("cape stretch under 10 %", bool(m["strain Cape"].max() < STRAIN_LIMIT),
                        f"max {100 * m['strain Cape'].max():.1f} %"))
    worst = int(m["drape clearance"].argmin())
    checks.append(Check("drape outside the ball and above the floor",
                        bool(m["drape clearance"].min() > -PENETRATION_TOLERANCE),
                        f"closest {1000 * m['drape clearance'][worst]:+.1f} mm (− = inside) at frame {worst + 1}"))
    speed, gap = m["drape speed"][-1], m["drape top gap"][-1]
    checks.append(Check("drape at rest on the ball", bool(speed < REST_SPEED and gap < 0.03),
                        f"last frame: fastest vertex {speed:.3f} m/s, nearest to the ball's top {gap:.3f} m"))
    half = len(m["flag reach"]) // 2
    reach, calm = m["flag reach"][half:].mean(), m["calm reach"][half:].mean()
    length = shot.FLAG_SIZE[0]
    checks.append(Check("flag moved by the wind",
                        bool(reach > FLAG_STREAMS * length and calm < FLAG_HANGS * length),
                        f"free edge {reach:.2f} m downwind of the pole (limit > {FLAG_STREAMS * length:.2f}), "
                        f"its windless twin's {calm:.2f} m (limit < {FLAG_HANGS * length:.2f}); "
                        f"2nd-half means, flag {length:.1f} m long"))
    for name in ("Flag", "Drape"):
        worst = int(m[f"strain {name}"].argmax())
        checks.append(Check(f"{name.lower()} stretch under 10 %", bool(m[f"strain {name}"].max() < STRAIN_LIMIT),
                            f"max {100 * m[f'strain {name}'][worst]:.1f} % at frame {worst + 1}"))
    if "tail keyed" in m:
        checks.extend(tail_checks(m))
    names = {c.name for c in checks}
    stale = set(PENDING_CHECKS) - names
    if stale:
        raise SystemExit(f"demo: PENDING_CHECKS names unknown checks: {sorted(stale)}")
    if len(m["drape speed"]) < SETTLE_FRAMES:
        for c in checks:
            c.pending = PENDING_CHECKS.get(c.name)
    return checks


def tail_swing(m: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
    """The tail tip's angle (degrees) off its mean direction per frame, seen from the hips, and
    the largest angle between its directions at any two frames (its swing)."""
    d = np.stack([m["tail x"], m["tail y"], m["tail z"]], axis=1)
    mean = d.mean(axis=0)
    mean /= np.linalg.norm(mean)
    off = np.degrees(np.arccos(np.clip(d @ mean, -1.0, 1.0)))
    span = np.degrees(np.arccos(np.clip(d @ d.T, -1.0, 1.0))).max()
    return off, float(span)


def tail_checks(m: dict[str, np.ndarray]) -> list[Check]:
    """The spring-bone tail: keyed on every frame with its bones at their rest lengths, swinging."""
    n, bones = len(m["tail keyed"]), len(shot.TAIL_BONES)
    figures = np.concatenate([m[k] for k in ("tail length error", "tail x", "tail y", "tail z")])
    finite = bool(np.isfinite(figures).all())
    missing = int(np.count_nonzero(m["tail keyed"] < bones))
    worst = int(np.nanargmax(m["tail length error"])) if finite else 0
    error = float(m["tail length error"][worst])
    keyed = Check("tail keyed, bone lengths kept",
                  bool(finite and missing == 0 and error < TAIL_LENGTH_TOLERANCE),
                  f"{bones} bones keyed on {n - missing} of {n} frames, worst length error {100 * error:.4f} % "
                  f"at frame {worst + 1} (limit {100 * TAIL_LENGTH_TOLERANCE:.1f} %)" + ("" if finite else ", NOT FINITE"))
    if not finite:
        return [keyed, Check("tail swings behind the hips", False, "the tail's pose is not finite")]
    off, span = tail_swing(m)
    swings = Check("tail swings behind the hips", bool(span > TAIL_SWING),
                   f"tip seen from the hips swings {span:.1f}° (limit > {TAIL_SWING:.0f}°), "
                   f"at most {off.max():.1f}° off its mean direction")
    return [keyed, swings]


def report(checks: list[Check]) -> tuple[list[str], list[str]]:
    """Printable lines and the failures that fail the demo (failed checks not pending)."""
    lines, failures = [], []
    for c in checks:
        if c.pending and c.ok:
            state = "PASSES although pending: delete it from PENDING_CHECKS"
        elif c.pending:
            state = f"pending ({c.pending})"
        else:
            state = "ok" if c.ok else "FAILED"
        lines.append(f"  {c.name:45s} {state:12s}  {c.measured}")
        if not c.ok and not c.pending:
            failures.append(f"{c.name}: {c.measured}")
    return lines, failures
