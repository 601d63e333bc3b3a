"""Sinew's demo: build the shot in code, bake it headless, save it, check it, picture it.

Run by ``python3 build.py demo`` inside the bpy 5.2 environment::

    python -m tools.demo --out out [--quick] [--zip dist/sinew-...-linux_x64.zip]

1. Builds the shot (``shot.py``: a Rigify metarig character walking with IK legs, a
   reaching arm and a swinging tail, a cape, a flag in a Wind field, a cloth draped on a ball
   on the floor) and the lab inset (``lab.py``: two arms writing SINEW), with the add-on
   installed from its zip.
2. Bakes every IK armature, then the tail's spring bones, then every spring mesh through the
   add-on's operators (``cli.py``'s order), plots the lab's core figures and saves
   ``out/demo.blend``.
3. Disables the add-on, reopens the saved file and measures it frame by frame as Blender
   plays it back (``checks.py``), renders the contact sheet and the animated strip with the
   lab inset (``pictures.py``) and plots the measured figures.

Writes ``out/demo.blend``, ``out/demo.abc`` (Alembic), ``out/demo_frames.png``, ``out/demo.gif``,
``out/demo_shot.png``, ``out/demo_ik.png``, ``out/demo_springs.png``; prints a summary. Exits 1 if a bake fails or a
check fails.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools import userdir  # noqa: E402
from tools.userdir import throwaway_user_resources  # noqa: E402

ADDON = "bl_ext.user_default.sinew"


def install_addon(zip_path: Path):
    """Install the built extension into a temporary user folder, like a user would."""
    import bpy

    result = bpy.ops.extensions.package_install_files(repo="user_default", filepath=str(zip_path),
                                                      enable_on_install=True)
    if result != {"FINISHED"}:
        raise SystemExit(f"demo: installing {zip_path} failed: {result}")
    return sys.modules[ADDON]


#: Bake kind -> the add-on's operator (``cli.py``'s order: IK, spring bones, spring meshes).
OPERATORS = {"IK": "bake_ik", "bones": "bake_spring_bones", "springs": "bake_springs"}


def summary(ob, kind: str) -> str:
    """What the bake left on the object (the panels' figures)."""
    if kind == "IK":
        parts = []
        for pb in ob.pose.bones:
            s = pb.sinew_ik
            if s.enabled:
                parts.append(f"{pb.name} {s.solver} it {s.last_iterations_mean:.1f} err {s.last_error_max:.1e} m")
        return "; ".join(parts)
    if kind == "bones":
        parts = []
        for pb in ob.pose.bones:
            s = pb.sinew_spring
            if s.enabled:
                parts.append(f"{pb.name} chain of {s.chain_length}, length error {100 * s.last_length_error:.3f} %, "
                             f"penetration {s.last_penetration:.1e} m")
        return "; ".join(parts)
    s = ob.sinew_springs
    return f"{s.solver}, {s.bake_iterations:.0f} it/frame, max strain {100 * s.bake_max_strain:.1f} %"


def bake(jobs: list[tuple[object, str]], frames: int) -> list[dict]:
    """Bake each (object, kind) through the add-on's operator, in order; stop with the operator's
    message on failure."""
    import bpy

    rows = []
    for ob, kind in jobs:
        bpy.context.view_layer.objects.active = ob
        op = getattr(bpy.ops.sinew, OPERATORS[kind])
        t0 = time.perf_counter()
        try:
            result = op(frame_start=1, frame_end=frames)
        except RuntimeError as exc:
            raise SystemExit(f"demo: baking {ob.name} ({kind}) failed: {exc}") from None
        if result != {"FINISHED"}:
            raise SystemExit(f"demo: baking {ob.name} ({kind}) failed ({result}); its message is printed above")
        rows.append({"object": ob.name, "kind": kind, "seconds": time.perf_counter() - t0,
                     "summary": summary(ob, kind)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "out"))
    parser.add_argument("--quick", action="store_true", help="48 frames instead of 240, fewer pictures")
    parser.add_argument("--zip", help="the built extension zip (default: newest dist/*linux_x64.zip)")
    parser.add_argument("--no-render", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    zip_path = Path(args.zip) if args.zip else sorted((ROOT / "dist").glob("sinew-*-linux_x64.zip"))[-1]
    throwaway_user_resources("sinew-demo-user-")  # removed at the end (os._exit skips atexit)
    import bpy  # isort: skip  (Blender's modules, addon_utils included, come with bpy)
    import addon_utils

    from tools.demo import checks, lab, pictures, shot

    t_start = time.perf_counter()
    frames = 48 if args.quick else 240
    bpy.ops.wm.read_homefile(use_empty=True)
    addon = install_addon(zip_path)

    the_shot = shot.build_shot(frames)
    the_lab = lab.build_lab(frames)
    rows = bake([(the_shot.armature, "IK"), *((ob, "IK") for ob, _ in the_lab["arms"]),
                 (the_shot.armature, "bones"), *((ob, "springs") for ob in the_shot.springs)], frames)
    lab.style_traces(the_lab, frames)
    problems = lab.check_lab(the_lab)
    ik_plot, ik_rows = lab.plot_ik(out, addon, the_lab["word"], the_lab["knots"], frames)
    spring_plot, spring_rows = lab.plot_springs(out, addon, frames)
    bpy.context.scene.frame_set(1)
    blend = out / "demo.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    t_baked = time.perf_counter()

    # Everything below sees the saved file as a user without Sinew would.
    addon_utils.disable(ADDON, default_set=True)
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    if hasattr(bpy.types.PoseBone, "sinew_ik"):
        raise SystemExit("demo: the add-on is still registered after disabling it")
    measured = checks.measure(frames)
    results = checks.evaluate(measured)
    check_lines, failures = checks.report(results)
    written = [blend, ik_plot, spring_plot, pictures.plot_shot(out, measured, {c.name: c.pending for c in results if c.pending})]
    # The path to other tools: the baked shot through Blender's own Alembic exporter
    # (tests/blender/test_alembic.py checks that a re-import plays the same positions).
    abc = out / "demo.abc"
    if bpy.ops.wm.alembic_export(filepath=str(abc), start=1, end=frames, selected=False) != {"FINISHED"}:
        raise SystemExit(f"demo: the Alembic export to {abc} failed")
    written.append(abc)
    if not args.no_render:
        written.append(pictures.contact_sheet(out, frames))
        written.append(pictures.animation(out, frames, step=8 if args.quick else 6))

    print()
    print(f"Sinew demo: {frames} frames, {time.perf_counter() - t_start:.1f} s in all "
          f"({t_baked - t_start:.1f} s to build and bake)")
    print(f"{'object':12s} {'kind':8s} {'time':>8s}  result")
    for r in rows:
        print(f"{r['object']:12s} {r['kind']:8s} {r['seconds']:7.2f}s  {r['summary']}")
    print()
    print("Checks on the saved file, played back without the add-on:")
    for line in check_lines:
        print(line)
    print()
    print("IK solvers on the word (core, same chain and targets):")
    for r in ik_rows:
        print(f"  {r['solver']:7s} {1000 * r['seconds'] / frames:7.3f} ms/frame  iterations mean {r['mean_iter']:.1f}"
              f" max {r['max_iter']}  max tip error {r['max_error']:.2e} m")
    print(f"Spring integrators on a 17×17 hanging cloth (core, {min(frames, 96)} frames):")
    for r in spring_rows:
        print(f"  {r['solver']:10s} {r['substeps']:3d} substeps {r['ms_per_frame']:7.2f} ms/frame  "
              f"max strain {r['max_strain']:.3f}  {r['status']}")
    print()
    for p in written:
        print(f"wrote {p}")
    for p in problems + failures:
        print(f"demo: check failed: {p}")
    return 1 if problems or failures else 0


if __name__ == "__main__":
    userdir.run_then_exit(main)
