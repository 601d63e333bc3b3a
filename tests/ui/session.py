"""The UI tier's window session: run inside a real Blender window (under Xvfb).

    blender --factory-startup --enable-event-simulate SCENE.blend --python session.py -- RESULTS.json SHOTS_DIR

Registers Sinew from the source tree, then a generator driven by ``bpy.app.timers`` (one
step per tick) shows every Sinew panel in each state (nothing configured, configured,
baking, baked, failed, scipy missing; a shipped preset on cloth beside a collider), saves
a screenshot of each, runs the IK and spring bakes modally from their operators, presses
Esc mid-bake, Ctrl+Z / Ctrl+Shift+Z after a finished bake, and records what it saw in
RESULTS.json. It asserts nothing itself: the pytest side (``test_window.py``) does.

Instrumentation (wrappers that record, then call the add-on's own code unchanged):
every Sinew panel's ``draw``/``draw_header`` (which panel drew in which shot, and any
exception), ``BakeOperator.modal`` (event and result of every modal call) and
``bakejob._status`` (the status-bar texts). The two panels registered ``DEFAULT_CLOSED``
(Bone > Sinew IK, Springs > Collisions) are registered open, as a user would open them
by clicking their header: only their initial open/closed flag differs.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import bpy
import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

import blender_addon  # noqa: E402
from blender_addon import bakejob, deps  # noqa: E402
from blender_addon.ik import ui as ik_ui  # noqa: E402
from blender_addon.springs import ui as springs_ui  # noqa: E402
from tools.scenes import meshes  # noqa: E402

ARGS = sys.argv[sys.argv.index("--") + 1:]
RESULTS_PATH = Path(ARGS[0])
SHOTS = Path(ARGS[1])
SHOTS.mkdir(parents=True, exist_ok=True)

R: dict = {"finished": False, "driver_error": None, "draws": {}, "draw_errors": [], "shots": {},
           "modal": [], "status": [], "checks": {}}
SHOT = ["(startup)"]  # the shot whose redraw is being counted

PANELS = list(ik_ui.classes) + list(springs_ui.classes)
IK_PANELS = ["SINEW_PT_bone_ik", "SINEW_PT_ik_chains"]
SPRINGS_PANELS = [c.__name__ for c in springs_ui.classes]


# --------------------------------------------------------------------------- instrumentation


def _wrap_draw(cls, method: str) -> None:
    original = getattr(cls, method, None)
    if original is None:
        return

    name = f"{cls.__name__}.{method}"

    def wrapped(self, context):
        counts = R["draws"].setdefault(SHOT[0], {})
        counts[name] = counts.get(name, 0) + 1
        try:
            return original(self, context)
        except Exception:
            R["draw_errors"].append({"shot": SHOT[0], "panel": name, "traceback": traceback.format_exc()})
            raise

    setattr(cls, method, wrapped)


for _cls in PANELS:
    _cls.bl_options = set(getattr(_cls, "bl_options", set())) - {"DEFAULT_CLOSED"}
    _wrap_draw(_cls, "draw")
    _wrap_draw(_cls, "draw_header")

_orig_modal = bakejob.BakeOperator.modal


def _modal(self, context, event):
    result = _orig_modal(self, context, event)
    R["modal"].append({"op": type(self).__name__, "event": event.type, "value": event.value,
                       "result": sorted(result)})
    return result


bakejob.BakeOperator.modal = _modal
_orig_status = bakejob._status


def _status(context, text):
    R["status"].append(text)
    return _orig_status(context, text)


bakejob._status = _status

blender_addon.register()


# --------------------------------------------------------------------------- scene helpers


def digest(values) -> str:
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    return hashlib.sha1(arr.tobytes()).hexdigest()


def _fcurves(ad) -> list:
    if ad is None or ad.action is None:
        return []
    out = []
    for fc in ad.action.fcurves:
        co = np.empty(2 * len(fc.keyframe_points))
        fc.keyframe_points.foreach_get("co", co)
        out.append([fc.data_path, fc.array_index, len(fc.keyframe_points), digest(co), fc.mute])
    return sorted(out)


def snapshot() -> dict:
    """What a bake may change, by names (references die on undo): keys, shape keys,
    modifiers, mesh, pose, constraints, Sinew bake state, current frame."""
    scene = bpy.context.scene
    snap = {"frame": scene.frame_current, "actions": sorted(a.name for a in bpy.data.actions),
            "objects": {}}
    for ob in bpy.data.objects:
        e = {"fcurves": _fcurves(ob.animation_data),
             "action": ob.animation_data.action.name if ob.animation_data and ob.animation_data.action else None,
             "modifiers": [[m.name, m.type, m.show_viewport, m.show_render] for m in ob.modifiers]}
        if ob.type == "MESH":
            me = ob.data
            co = np.empty(3 * len(me.vertices))
            me.vertices.foreach_get("co", co)
            e["vertices"] = [len(me.vertices), digest(co)]
            keys = me.shape_keys
            e["shape_keys"] = [[k.name, round(k.value, 6)] for k in keys.key_blocks] if keys else []
            e["shape_key_fcurves"] = _fcurves(keys.animation_data) if keys else []
            sp = ob.sinew_springs
            e["sinew"] = [sp.baked, sp.bake_record, sp.bake_frame_start, sp.bake_frame_end]
        if ob.type == "ARMATURE":
            e["pose"] = {pb.name: [list(pb.rotation_quaternion), [c.mute for c in pb.constraints],
                                   pb.sinew_ik.last_frames] for pb in ob.pose.bones}
        snap["objects"][ob.name] = e
    return snap


def win():
    return bpy.context.window_manager.windows[0]


def area(kind: str):
    return next(a for a in win().screen.areas if a.type == kind)


def region(a, kind: str = "WINDOW"):
    return next(r for r in a.regions if r.type == kind)


def override(kind: str = "VIEW_3D"):
    a = area(kind)
    return bpy.context.temp_override(window=win(), area=a, region=region(a))


def redraw_all() -> None:
    for a in win().screen.areas:
        a.tag_redraw()


def mouse_to(a) -> tuple[int, int]:
    x, y = a.x + a.width // 2, a.y + a.height // 2
    win().event_simulate(type="MOUSEMOVE", value="NOTHING", x=x, y=y)
    return x, y


def key(kind: str, **mods) -> None:
    x, y = mouse_to(area("VIEW_3D"))
    win().event_simulate(type=kind, value="PRESS", x=x, y=y, **mods)
    win().event_simulate(type=kind, value="RELEASE", x=x, y=y, **mods)


def undo_push(message: str) -> None:
    with override():
        bpy.ops.ed.undo_push(message=message)


def set_mode(mode: str) -> None:
    ob = bpy.context.view_layer.objects.active
    if ob is not None and ob.mode != mode:
        with override():
            bpy.ops.object.mode_set(mode=mode)


def activate(name: str, mode: str) -> None:
    set_mode("OBJECT")
    for ob in bpy.data.objects:
        ob.select_set(ob.name == name)
    bpy.context.view_layer.objects.active = bpy.data.objects[name]
    set_mode(mode)


def tip_gap(frame: int) -> tuple[float, list]:
    scene = bpy.context.scene
    scene.frame_set(frame)
    rig, target = bpy.data.objects["Rig"], bpy.data.objects["Target"]
    tip = rig.matrix_world @ rig.pose.bones["B5"].tail
    return (tip - target.matrix_world.translation).length, list(tip)


def cloth_coords(frame: int) -> np.ndarray:
    scene = bpy.context.scene
    scene.frame_set(frame)
    ob = bpy.data.objects["Cloth"].evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ob.data
    co = np.empty(3 * len(me.vertices))
    me.vertices.foreach_get("co", co)
    return co.reshape(-1, 3)


# --------------------------------------------------------------------------- shots


def set_context(tab: str):
    """Pick a Properties tab; the tabs on offer follow the active data after a redraw."""
    for _ in range(20):
        redraw_all()
        yield 0.1
        try:
            area("PROPERTIES").spaces.active.context = tab
            return
        except TypeError:
            continue
    area("PROPERTIES").spaces.active.context = tab  # raises: the driver records the error


def prepare(kind: str, top: bool = False):
    """Show the IK panels (kind 'ik': Rig in Pose Mode, Bone tab, sidebar tab "Sinew") or the
    springs panels (kind 'springs': Cloth in Object Mode, Physics tab), scrolled to Sinew's
    (with ``top``, back to the tab's start instead: see show_top)."""
    if kind == "ik":
        if bpy.context.view_layer.objects.active is None or bpy.context.view_layer.objects.active.name != "Rig":
            activate("Rig", "POSE")
        set_mode("POSE")
        rig = bpy.data.objects["Rig"]
        rig.data.bones.active = rig.data.bones["B5"]
        yield from set_context("BONE")
    else:
        if bpy.context.view_layer.objects.active is None or bpy.context.view_layer.objects.active.name != "Cloth":
            activate("Cloth", "OBJECT")
        yield from set_context("PHYSICS")
    redraw_all()
    yield 0.2
    props = area("PROPERTIES")
    with bpy.context.temp_override(window=win(), area=props, region=region(props)):
        for _ in range(8):  # Sinew's panels come last: to the end of the tab (or its start)
            if top:
                bpy.ops.view2d.scroll_up(page=True)
            else:
                bpy.ops.view2d.scroll_down(page=True)


def capture(shot: str):
    """Redraw (counting which Sinew panels draw) and save out/ui/<shot>.png."""
    SHOT[0] = shot
    R["draws"][shot] = {}
    redraw_all()
    yield 0.1
    path = SHOTS / f"{shot}.png"
    if path.exists():
        path.unlink()
    with bpy.context.temp_override(window=win()):
        bpy.ops.screen.screenshot(filepath=str(path))
    SHOT[0] = "(between shots)"
    R["shots"][shot] = {"path": str(path), "exists": path.is_file(),
                        "bytes": path.stat().st_size if path.is_file() else 0}
    _save()  # partial results survive a session that stalls later


def show_top(shot: str):
    """The springs panels from Sinew's top (its Presets menu and Solver sub-panel): the
    Physics tab scrolled back to its start, where the cloth (no physics of Blender's own)
    shows only Blender's buttons to add some above Sinew's panel."""
    yield from prepare("springs", top=True)
    # (away from the 3D view and back: an error report's popup at the pointer closes)
    for a in (area("PROPERTIES"), area("VIEW_3D")):
        mouse_to(a)
        yield 0.2
    yield from capture(shot)


def show(shot: str, kind: str):
    yield from prepare(kind)
    yield from capture(f"{shot}_{kind}")


def show_both(shot: str):
    yield from show(shot, "ik")
    yield from show(shot, "springs")


# --------------------------------------------------------------------------- bakes


def modal_calls(op: str, since: int) -> list:
    return [m for m in R["modal"][since:] if m["op"] == "SINEW_OT_" + op]


def start_bake(op: str, **props):
    """Invoke the bake as the panel's button does, inside the 3D view; return (result, index)."""
    since = len(R["modal"])
    R["status"].append(None)  # marks the start of this bake's status texts
    try:
        with override():
            result = getattr(bpy.ops.sinew, op)("INVOKE_DEFAULT", **props)
    except RuntimeError as exc:  # an error report at invoke (bad input): the bake did not start
        R.setdefault("invoke_errors", []).append(str(exc))
        result = {"CANCELLED"}
    return sorted(result), since


def wait_until_done(op: str, since: int, limit: int = 6000):
    for _ in range(limit):
        calls = modal_calls(op, since)
        if calls and calls[-1]["result"] != ["RUNNING_MODAL"]:
            return
        yield 0.05


def bake_checks(name: str, op: str, props: dict, playback) -> Iterator[float]:
    """A finished modal bake, its progress, playback, then Ctrl+Z and Ctrl+Shift+Z."""
    c = R["checks"][name] = {}
    undo_push(f"before {name}")
    yield 0.1
    c["before"] = before = snapshot()
    c["invoke"], since = start_bake(op, **props)
    status_from = len(R["status"])
    yield from wait_until_done(op, since)
    c["modal"] = modal_calls(op, since)
    c["status"] = [s for s in R["status"][status_from:] if s]
    c["last_result"] = bakejob.read_report(bpy.context.view_layer.objects.active)
    yield 0.2
    c["after"] = after = snapshot()
    c["changed"] = after != before
    c["playback"] = playback()
    bpy.context.scene.frame_set(before["frame"])
    yield 0.2
    c["after_playback"] = snapshot()
    key("Z", ctrl=True)
    yield 0.5
    yield 0.2
    c["after_undo"] = snapshot()
    c["undo_restores"] = c["after_undo"] == before
    key("Z", ctrl=True, shift=True)
    yield 0.5
    yield 0.2
    c["after_redo"] = snapshot()
    c["redo_restores"] = c["after_redo"] == c["after_playback"]


def esc_checks(name: str, op: str, props: dict, shot: str, kind: str):
    """A long modal bake, a screenshot while it runs, then Esc: cancelled, scene unchanged."""
    c = R["checks"][name] = {}
    undo_push(f"before {name}")
    yield 0.1
    yield from prepare(kind)
    c["before"] = before = snapshot()
    c["invoke"], since = start_bake(op, **props)
    status_from = len(R["status"])
    for _ in range(200):  # until the job has computed a few slices
        if len([m for m in modal_calls(op, since) if m["event"] == "TIMER"]) >= 3:
            break
        yield 0.01
    yield from capture(f"{shot}_{kind}")
    c["running_before_esc"] = all(m["result"] in (["RUNNING_MODAL"], ["PASS_THROUGH"])
                                  for m in modal_calls(op, since))
    c["status"] = [s for s in R["status"][status_from:] if s]
    mouse_to(area("VIEW_3D"))
    win().event_simulate(type="ESC", value="PRESS")
    win().event_simulate(type="ESC", value="RELEASE")
    yield 0.3
    yield 0.3
    c["modal"] = modal_calls(op, since)
    c["after"] = snapshot()
    c["unchanged"] = c["after"] == before
    c["last_result"] = bakejob.read_report(bpy.context.view_layer.objects.active)


def ik_playback() -> dict:
    gaps = {}
    for f in (1, 12, 24, 36, 48):
        gaps[f] = tip_gap(f)
    return {"gaps": {f: g[0] for f, g in gaps.items()}, "tips": {f: g[1] for f, g in gaps.items()}}


REST = {}


def springs_playback() -> dict:
    first, mid, last = cloth_coords(1), cloth_coords(24), cloth_coords(48)
    return {"frame1_vs_rest": float(np.abs(first - REST["cloth"]).max()),
            "moved_24": float(np.abs(mid - first).max()), "moved_48": float(np.abs(last - first).max()),
            "finite": bool(np.isfinite(mid).all() and np.isfinite(last).all()),
            "vertices": len(first)}


# --------------------------------------------------------------------------- the session


def session():
    w = win()
    props, v3d = area("PROPERTIES"), area("VIEW_3D")
    # Give the Properties editor room: move the 3D view | right column edge left, and the
    # Outliner | Properties edge up.
    with bpy.context.temp_override(window=w, area=props):
        bpy.ops.screen.area_move(x=props.x, y=props.y + props.height // 2, delta=-360)
    yield 0.2
    props = area("PROPERTIES")
    with bpy.context.temp_override(window=w, area=props):
        bpy.ops.screen.area_move(x=props.x + props.width // 2, y=props.y + props.height, delta=160)
    yield 0.2
    v3d.spaces.active.show_region_ui = True
    R["areas"] = {a.type: [a.x, a.y, a.width, a.height] for a in w.screen.areas}
    REST["cloth"] = cloth_coords(1)

    # The sidebar's "Sinew" tab: 3.4 has no Region.active_panel_category, so click the tab
    # strip (right edge of the sidebar) from the top down until the IK Chains panel draws.
    activate("Rig", "POSE")
    yield 0.3
    ui = region(area("VIEW_3D"), "UI")
    R["sidebar_tab"] = None
    x = ui.x + ui.width - 12
    for y in range(ui.y + ui.height - 15, ui.y + 40, -12):
        SHOT[0] = "(tab search)"
        before = R["draws"].get(SHOT[0], {}).get("SINEW_PT_ik_chains.draw", 0)
        w.event_simulate(type="MOUSEMOVE", value="NOTHING", x=x, y=y)
        w.event_simulate(type="LEFTMOUSE", value="PRESS", x=x, y=y)
        w.event_simulate(type="LEFTMOUSE", value="RELEASE", x=x, y=y)
        area("VIEW_3D").tag_redraw()
        yield 0.15
        if R["draws"].get(SHOT[0], {}).get("SINEW_PT_ik_chains.draw", 0) > before:
            R["sidebar_tab"] = [x, y]
            break
    mouse_to(area("VIEW_3D"))

    # 1. nothing configured
    yield from show_both("empty")

    # 2. configured (and an undo step, so undo never goes back past it)
    rig = bpy.data.objects["Rig"]
    s = rig.pose.bones["B5"].sinew_ik
    s.enabled, s.solver, s.target_mode, s.target = True, "FABRIK", "OBJECT", bpy.data.objects["Target"]
    sp = bpy.data.objects["Cloth"].sinew_springs
    sp.enabled, sp.solver, sp.pin_group = True, "FAST", "pin"
    sp.vertex_mass, sp.stiffness, sp.shear_stiffness, sp.bending_stiffness = 0.01, 300.0, 30.0, 3.0
    sp.mass_mode, sp.stiffness_mode, sp.max_stretch = "VERTEX", "SPRING", 0.0  # the first round's per-vertex / per-spring model
    undo_push("configure Sinew")
    yield from show_both("configured")

    # 3. baking: long bakes, screenshot while running, Esc
    activate("Rig", "POSE")
    # CCD bakes frame by frame (FABRIK and DLS may solve the whole range in one batch, which
    # leaves nothing to cancel): a long CCD bake is still running when Esc arrives.
    bpy.data.objects["Rig"].pose.bones["B5"].sinew_ik.solver = "CCD"
    yield from esc_checks("ik_esc", "bake_ik", {"frame_start": 1, "frame_end": 60000}, "baking", "ik")
    bpy.data.objects["Rig"].pose.bones["B5"].sinew_ik.solver = "FABRIK"
    activate("Cloth", "OBJECT")
    yield from esc_checks("springs_esc", "bake_springs", {"frame_start": 1, "frame_end": 1500}, "baking",
                          "springs")

    # 4. baked: finished bakes, playback, undo / redo
    activate("Rig", "POSE")
    yield from bake_checks("ik_bake", "bake_ik", {}, ik_playback)
    activate("Cloth", "OBJECT")
    yield from bake_checks("springs_bake", "bake_springs", {}, springs_playback)
    yield from show_both("baked")

    # 5. failed: an IK expression that does not parse; a spring re-bake that diverges
    activate("Rig", "POSE")
    s = bpy.data.objects["Rig"].pose.bones["B5"].sinew_ik
    s.target_mode, s.expression_x = "EXPRESSION", "sin(t *"
    c = R["checks"]["ik_failed"] = {"before": snapshot()}
    c["invoke"], since = start_bake("bake_ik")
    yield from wait_until_done("bake_ik", since, limit=40)
    c["modal"] = modal_calls("bake_ik", since)
    c["last_result"] = bakejob.read_report(bpy.context.view_layer.objects.active)
    c["after"] = snapshot()
    yield from show("failed", "ik")
    activate("Cloth", "OBJECT")
    sp = bpy.data.objects["Cloth"].sinew_springs
    sp.solver, sp.stiffness, sp.vertex_mass, sp.substeps = "EXPLICIT", 1.0e6, 0.001, 1
    c = R["checks"]["springs_failed"] = {"before": snapshot()}
    c["invoke"], since = start_bake("bake_springs")
    yield from wait_until_done("bake_springs", since)
    c["modal"] = modal_calls("bake_springs", since)
    c["last_result"] = bakejob.read_report(bpy.context.view_layer.objects.active)
    c["after"] = snapshot()
    yield from show("failed", "springs")

    # 6. scipy missing (the state deps.scipy_problem() reports when the import fails)
    deps._status, deps._checked = "scipy is missing (simulated by the UI test)", True
    R["checks"]["scipy_problem"] = deps.scipy_problem()
    c = R["checks"]["springs_noscipy"] = {"before": snapshot()}
    c["invoke"], since = start_bake("bake_springs")
    c["last_result"] = bakejob.read_report(bpy.context.view_layer.objects.active)
    c["after"] = snapshot()
    yield from show_both("noscipy")
    deps._status, deps._checked = None, False

    # 7. a shipped preset on cloth with a collider, as a user sets it up: the bake freed, a
    # ball with a Collision modifier (its defaults) beside the hanging cloth, the COTTON
    # preset from the Presets menu's operator, the Solver sub-panel shown, then a bake
    activate("Cloth", "OBJECT")
    with override():
        bpy.ops.sinew.free_bake()
    with override():
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.3, location=(-2.0, 0.3, 1.15))
    ball = bpy.context.active_object
    ball.name = "Ball"
    with override():
        bpy.ops.object.modifier_add(type="COLLISION")
    activate("Cloth", "OBJECT")
    yield from set_context("PHYSICS")
    props = area("PROPERTIES")
    with bpy.context.temp_override(window=win(), area=props, region=region(props)):
        bpy.ops.sinew.springs_preset(preset="COTTON")
    sp = bpy.data.objects["Cloth"].sinew_springs
    c = R["checks"]["springs_preset"] = {
        "solver": sp.solver, "substeps": sp.substeps, "iterations": sp.iterations,
        "tolerance": sp.tolerance, "baked": sp.baked}
    undo_push("COTTON preset")
    yield from show_top("preset_springs")
    c["invoke"], since = start_bake("bake_springs", frame_start=1, frame_end=12)
    yield from wait_until_done("bake_springs", since)
    c["modal"] = modal_calls("bake_springs", since)
    c["last_result"] = bakejob.read_report(bpy.context.view_layer.objects.active)
    # (the cloth's evaluated vertices in world space; the ball's inside as Blender's BVH
    # tree finds it: tools.scenes.meshes.inside)
    mw = np.array(bpy.data.objects["Cloth"].matrix_world)
    xs = [cloth_coords(f) @ mw[:3, :3].T + mw[:3, 3] for f in range(1, 13)]
    c["inside"] = [int(np.count_nonzero(meshes.inside(ball, x))) for x in xs]
    # cloth vertices within 5 cm of the 0.3 m ball's surface at the end (its Collision
    # modifier's outer thickness is 2 cm): the contact was exercised
    centre = np.array(ball.matrix_world.translation)
    c["near"] = int(np.count_nonzero(np.linalg.norm(xs[-1] - centre, axis=1) < 0.35))
    c["moved"] = float(np.abs(xs[-1] - xs[0]).max())
    R["finished"] = True


# --------------------------------------------------------------------------- driver

_steps = session()


def _save() -> None:
    RESULTS_PATH.write_text(json.dumps(R, indent=1, default=str))


def tick():
    try:
        R.setdefault("ticks", 0)
        R["ticks"] += 1
        delay = next(_steps)
        return delay
    except StopIteration:
        pass
    except Exception:
        R["driver_error"] = traceback.format_exc()
        print(R["driver_error"], flush=True)
    _save()
    print("SINEW-UI session done", flush=True)
    bpy.ops.wm.quit_blender()
    return None


R["started"] = time.time()
bpy.app.timers.register(tick, first_interval=1.0)
