"""Sinew's command line: bake every enabled IK chain, spring chain and spring mesh of a .blend
(in that order).

In a Blender binary::

    blender -b SCENE.blend --python blender_addon/cli.py -- \\
        [--frames START END] [--objects NAME ...] --save OUT.blend

With Blender as a Python module (``pip install bpy``)::

    python blender_addon/cli.py SCENE.blend [--frames START END] [--objects NAME ...] --save OUT.blend

It prints a progress line now and then and a summary, saves to OUT.blend and exits 0.
On failure it prints one line starting with ``sinew: error:`` and exits 1; nothing is
saved. The add-on is used as installed when it is enabled, otherwise it is loaded from
the folder this script lives in.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

USAGE_EXAMPLES = """\
examples:
  blender -b rig.blend --python blender_addon/cli.py -- --save rig_baked.blend
  blender -b shot.blend --python blender_addon/cli.py -- --frames 1 120 --objects Flag Arm --save out.blend
  python blender_addon/cli.py shot.blend --save out.blend      (bpy module)
"""


class CliError(Exception):
    """A problem reported as one line, exit status 1."""


def _parser(standalone: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sinew" if not standalone else "python blender_addon/cli.py",
        description="Bake every enabled Sinew IK chain, spring chain and spring mesh of a .blend file "
                    "(in that order), then save it.",
        epilog=USAGE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if standalone:
        p.add_argument("scene", help="the .blend file to open")
    p.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"),
                   help="frame range to bake (default: the scene's range)")
    p.add_argument("--objects", nargs="+", metavar="NAME",
                   help="bake only these objects (armatures and/or meshes); default: all enabled")
    p.add_argument("--save", required=True, metavar="OUT.blend", help="where to save the baked file")
    return p


def _argv() -> tuple[list[str], bool]:
    """The script's own arguments, and whether we run as a plain Python program."""
    import bpy

    in_binary = bool(getattr(bpy.app, "binary_path", "")) and os.path.basename(sys.argv[0]).startswith("blender")
    if "--" in sys.argv:
        return sys.argv[sys.argv.index("--") + 1:], not in_binary
    return ([] if in_binary else sys.argv[1:]), not in_binary


def _parse(args: list[str], standalone: bool) -> argparse.Namespace:
    parser = _parser(standalone)

    def fail(message: str) -> None:  # argparse would exit 2; the contract says 1
        raise CliError(message)

    parser.error = fail  # type: ignore[method-assign,assignment]
    return parser.parse_args(args)


def _ensure_addon():
    """Return the registered add-on package, registering it from this folder if needed."""
    import bpy

    for name in list(sys.modules):
        mod = sys.modules[name]
        if name.endswith(".sinew") or name in ("sinew", "blender_addon"):
            if hasattr(mod, "register") and hasattr(bpy.types, "SINEW_OT_bake_ik"):
                return mod
    here = os.path.dirname(os.path.abspath(__file__))
    parent, package = os.path.split(here)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    import importlib

    mod = importlib.import_module(package)
    if not hasattr(bpy.types, "SINEW_OT_bake_ik"):
        mod.register()
    return mod


def _enabled_chains(ob) -> list[str]:
    if ob.type != "ARMATURE" or ob.pose is None:
        return []
    return [pb.name for pb in ob.pose.bones if pb.sinew_ik.enabled]


def _enabled_spring_chains(ob) -> list[str]:
    if ob.type != "ARMATURE" or ob.pose is None:
        return []
    return [pb.name for pb in ob.pose.bones if pb.sinew_spring.enabled]


#: Bake order: IK chains, then spring bones (on top of the IK keys), then spring meshes (which
#: may collide with a body that those bones deform).
_ORDER = {"IK": 0, "spring bones": 1, "springs": 2}


def _bake_all(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    import bpy

    addon = _ensure_addon()
    bakejob = sys.modules[addon.__name__ + ".bakejob"]
    scene = bpy.context.scene
    objects = list(scene.objects)
    if args.objects:
        by_name = {ob.name: ob for ob in objects}
        missing = [name for name in args.objects if name not in by_name]
        if missing:
            raise CliError(f"no object named {', '.join(repr(m) for m in missing)} in the scene {scene.name!r}")
        objects = [by_name[name] for name in args.objects]
    jobs = []
    for ob in objects:
        if _enabled_chains(ob):
            jobs.append((ob, "IK", bpy.ops.sinew.bake_ik))
        if _enabled_spring_chains(ob):
            jobs.append((ob, "spring bones", bpy.ops.sinew.bake_spring_bones))
        if ob.type == "MESH" and ob.sinew_springs.enabled:
            jobs.append((ob, "springs", bpy.ops.sinew.bake_springs))
    jobs.sort(key=lambda job: _ORDER[job[1]])  # stable: object order within a kind
    if args.objects:
        idle = [ob.name for ob in objects if not any(j[0] is ob for j in jobs)]
        if idle:
            raise CliError(f"{', '.join(idle)}: no enabled Sinew IK chain, spring chain or spring mesh on this object")
    if not jobs:
        raise CliError("nothing to bake: no enabled Sinew IK chain, spring chain or spring mesh in this file")

    start, end = (args.frames if args.frames else (scene.frame_start, scene.frame_end))
    if end < start:
        raise CliError(f"--frames {start} {end}: the end frame comes before the start frame")
    results = []
    for ob, kind, op in jobs:
        print(f"sinew: baking {kind} of {ob.name!r}, frames {start}-{end}", flush=True)
        view_layer = bpy.context.view_layer
        if view_layer.objects.get(ob.name) is None:
            raise CliError(f"{ob.name}: the object is not in the active view layer")
        for other in view_layer.objects:
            other.select_set(False)
        ob.select_set(True)
        view_layer.objects.active = ob
        try:
            result = op(frame_start=start, frame_end=end)
        except RuntimeError as exc:
            message = bakejob.read_report(ob)["error"] or str(exc).strip().replace("\n", " ")
            raise CliError(f"{ob.name}: {kind} bake failed: {message}") from None
        report = bakejob.read_report(ob)  # the operator stores its run's report on the object
        if "FINISHED" not in result or report["state"] != "FINISHED":
            message = report["error"] or "the bake was cancelled"
            raise CliError(f"{ob.name}: {kind} bake failed: {message}")
        for warning in filter(None, report["warnings"].split("\n")):
            print(f"sinew: {ob.name}: warning: {warning}", flush=True)
        results.append((ob.name, kind, report["summary"]))
    return results


def main() -> int:
    t0 = time.perf_counter()
    try:
        import bpy
    except ImportError:
        print("sinew: error: this script needs Blender: run it with `blender -b SCENE.blend --python "
              "blender_addon/cli.py -- ...` or with a Python that has the bpy module", file=sys.stderr)
        return 1
    raw, standalone = _argv()
    try:
        if any(a in ("-h", "--help") for a in raw):
            _parser(standalone).print_help()
            return 0
        args = _parse(raw, standalone)
        if standalone:
            if not os.path.isfile(args.scene):
                raise CliError(f"{args.scene}: no such .blend file")
            bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.scene))
        out_dir = os.path.dirname(os.path.abspath(args.save))
        if not os.path.isdir(out_dir):
            raise CliError(f"--save {args.save}: the folder {out_dir} does not exist")
        results = _bake_all(args)
        bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(args.save))
    except CliError as exc:
        print(f"sinew: error: {exc}", flush=True)
        return 1
    print("sinew: summary", flush=True)
    for name, kind, summary in results:
        print(f"sinew:   {name:20s} {kind:8s} {summary}", flush=True)
    print(f"sinew: saved {os.path.abspath(args.save)} ({len(results)} bakes, {time.perf_counter() - t0:.1f} s)",
          flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        standalone = _argv()[1]
    except ImportError:  # no bpy at all: main() said so already
        standalone = True
    if standalone:
        # Blender as a Python module: bpy 4.5 can deadlock in its exit handlers (a
        # delayed-close thread), and the file is saved already, so end the process directly.
        os._exit(code)
    if code:
        sys.exit(code)
