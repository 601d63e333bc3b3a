"""Sinew in a real Blender 3.4 window: panels in every state, modal bakes, Esc, undo.

One window session (tests/ui/session.py) runs every step; each test here asserts one part
of what it recorded. Screenshots of every state land in out/ui/<state>_<ik|springs>.png.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

STATES = ("empty", "configured", "baking", "baked", "failed", "noscipy")
IK_PANELS = ("SINEW_PT_bone_ik.draw", "SINEW_PT_bone_ik.draw_header", "SINEW_PT_ik_chains.draw")
SPRINGS_PANELS = ("SINEW_PT_springs.draw", "SINEW_PT_springs.draw_header", "SINEW_PT_springs_solver.draw",
                  "SINEW_PT_springs_springs.draw", "SINEW_PT_springs_pins.draw",
                  "SINEW_PT_springs_collisions.draw", "SINEW_PT_springs_output.draw",
                  "SINEW_PT_springs_bake.draw")


def check(results: dict, name: str) -> dict:
    assert name in results["checks"], f"the session never reached {name!r}:\n{results['log'][-4000:]}"
    return results["checks"][name]


def test_session_ran_to_the_end(window_session):
    assert window_session["driver_error"] is None, window_session["driver_error"]
    assert window_session["finished"], window_session["log"][-4000:]
    assert window_session["sidebar_tab"] is not None, "the sidebar's Sinew tab was never shown"


def test_no_python_error_from_panels(window_session):
    assert window_session["draw_errors"] == []
    bad = [line for line in window_session["log"].splitlines()
           if re.search(r"Traceback|\w+Error\b|rna_uiItem|ui\.py", line)]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("kind", ["ik", "springs"])
@pytest.mark.parametrize("state", STATES)
def test_panels_drawn_and_captured(window_session, state, kind):
    shot = f"{state}_{kind}"
    drawn = window_session["draws"].get(shot, {})
    for panel in IK_PANELS if kind == "ik" else SPRINGS_PANELS:
        assert drawn.get(panel, 0) > 0, f"{panel} was not drawn in {shot}: {drawn}"
    info = window_session["shots"][shot]
    path = Path(info["path"])
    assert path.is_file() and path.stat().st_size > 20_000, info
    assert path.parent.name == "ui" and path.parent.parent.name == "out"


@pytest.mark.parametrize("name,op", [("ik_esc", "SINEW_OT_bake_ik"), ("springs_esc", "SINEW_OT_bake_springs")])
def test_esc_mid_bake_cancels_and_changes_nothing(window_session, name, op):
    c = check(window_session, name)
    assert c["invoke"] == ["RUNNING_MODAL"]
    assert c["running_before_esc"]
    timers = [m for m in c["modal"] if m["event"] == "TIMER" and m["result"] == ["RUNNING_MODAL"]]
    assert len(timers) >= 3, c["modal"]
    # progress in the status bar: "<label>: done/total (Esc to cancel)"
    assert any(re.search(r": \d+/\d+ \(Esc to cancel\)", s) for s in c["status"]), c["status"]
    last = c["modal"][-1]
    assert (last["op"], last["event"], last["value"], last["result"]) == (op, "ESC", "PRESS", ["CANCELLED"])
    assert c["after"] == c["before"]


@pytest.mark.parametrize("name", ["ik_bake", "springs_bake"])
def test_modal_bake_shows_progress_finishes_and_changes_the_scene(window_session, name):
    c = check(window_session, name)
    assert c["invoke"] == ["RUNNING_MODAL"]
    assert c["modal"][-1]["result"] == ["FINISHED"], c["modal"][-3:]
    assert any(re.search(r": \d+/\d+ \(Esc to cancel\)", s) for s in c["status"]), c["status"]
    assert c["last_result"]["error"] == "" and "48 frames" in c["last_result"]["summary"]
    assert c["after"] != c["before"]


def test_ik_bake_plays_back(window_session):
    p = check(window_session, "ik_bake")["playback"]
    for frame, gap in p["gaps"].items():
        assert gap < 1e-3, f"tip {gap} m from the target at frame {frame}"
    tips = p["tips"]
    assert max(abs(a - b) for a, b in zip(tips["1"], tips["24"])) > 0.1  # it moves


def test_springs_bake_plays_back(window_session):
    p = check(window_session, "springs_bake")["playback"]
    assert p["finite"]
    assert p["frame1_vs_rest"] < 1e-4  # the first frame is the input mesh
    assert p["moved_24"] > 0.01 and p["moved_48"] > 0.01


@pytest.mark.parametrize("name", ["ik_bake", "springs_bake"])
def test_ctrl_z_restores_then_ctrl_shift_z_redoes(window_session, name):
    c = check(window_session, name)
    assert c["after_undo"] == c["before"], "Ctrl+Z did not restore the pre-bake scene"
    assert c["after_redo"] == c["after_playback"], "Ctrl+Shift+Z did not bring the bake back"
    assert c["after_redo"] != c["before"]


@pytest.mark.parametrize("name", ["ik_failed", "springs_failed", "springs_noscipy"])
def test_failed_bake_reports_and_changes_nothing(window_session, name):
    c = check(window_session, name)
    assert c["last_result"]["error"], c["last_result"]
    assert c["last_result"]["summary"] == ""
    assert c["after"] == c["before"]
    if name == "springs_failed":  # failed while running modally, not at invoke
        assert c["invoke"] == ["RUNNING_MODAL"] and c["modal"][-1]["result"] == ["CANCELLED"]
    else:
        assert c["invoke"] == ["CANCELLED"]
    if name == "springs_noscipy":
        assert "scipy" in c["last_result"]["error"]


def test_preset_with_a_collider_shows_vbd_and_bakes_outside_it(window_session):
    """The COTTON preset on the pinned cloth once a ball with a Collision modifier stands
    beside it (step 7): the panel switches to VBD at the pinned contact preset's substeps and
    iterations, the Solver sub-panel is drawn and captured, and a modal bake of 12 frames
    keeps every cloth vertex out of the ball while the cloth rests against it."""
    # (read from its file: the package around it imports bpy, which this process has not)
    spec = importlib.util.spec_from_file_location(
        "preset_table", Path(__file__).resolve().parents[2] / "blender_addon" / "springs" / "preset_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    PINNED_CONTACT_SOLVER = table.PINNED_CONTACT_SOLVER
    c = check(window_session, "springs_preset")
    assert not c["baked"]
    assert (c["solver"], c["substeps"], c["iterations"]) == (
        PINNED_CONTACT_SOLVER["solver"], PINNED_CONTACT_SOLVER["substeps"], PINNED_CONTACT_SOLVER["iterations"])
    assert c["tolerance"] > 0
    drawn = window_session["draws"].get("preset_springs", {})
    for panel in SPRINGS_PANELS:
        assert drawn.get(panel, 0) > 0, f"{panel} was not drawn in preset_springs: {drawn}"
    path = Path(window_session["shots"]["preset_springs"]["path"])
    assert path.is_file() and path.stat().st_size > 20_000
    assert c["invoke"] == ["RUNNING_MODAL"] and c["modal"][-1]["result"] == ["FINISHED"], c["modal"][-3:]
    assert c["last_result"]["error"] == "" and "12 frames" in c["last_result"]["summary"], c["last_result"]
    assert c["inside"] == [0] * 12
    assert c["near"] > 0  # the cloth touches the ball: the contact was exercised
    assert c["moved"] > 1e-3
