"""Run every benchmark section in this process and write out/bench.md and plots.

Called by ``python3 build.py bench`` inside a bpy environment (one process per Blender
version). Each section is a module under ``bench/`` with ``run(quick) -> list[dict]``;
the sections that compare against Blender run Blender's own solver side by side in this
same process, alternating and repeating runs themselves.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# The add-on is installed from its built zip into a throw-away user folder; Blender reads
# this variable once, when bpy is first imported. The folder is removed when the run ends
# (here, explicitly: the run ends with os._exit, which skips atexit).
from tools import userdir  # noqa: E402
from tools.userdir import throwaway_user_resources  # noqa: E402

throwaway_user_resources("sinew-bench-")

SECTIONS = [
    ("The demo's shot: Sinew against Blender's IK constraints and Cloth on the character, cape, flag and drape",
     "bench.shot"),
    ("IK in core: 10-bone chain, 1,000 frames", "bench.ik_core"),
    ("IK: Sinew core against ikpy (same chains and targets)", "bench.ikpy_compare"),
    ("IK bake: Sinew against Blender's IK constraint + nla.bake (same rig, same target)", "bench.ik_blender"),
    ("IK rig: Rigify metarig, four limbs + spine with bone targets and poles, against Blender's IK + nla.bake",
     "bench.ik_rig"),
    ("Springs in core: hanging grids, two top corners pinned", "bench.springs_core"),
    ("Spring bake: Sinew's presets against Blender's Cloth modifier (64² grid)", "bench.springs_blender"),
    ("Spring presets in core: strain while hanging, resolution sweep (20², 40², 80²)",
     "bench.springs_presets"),
    ("Flag in the wind: Sinew against Blender's Cloth with the same Wind field", "bench.springs_fields"),
    ("Keyframe writing", "bench.keys"),
    ("Cloth contact: Sinew against Blender's Cloth (drape over a sphere on the ground, skirt on a moving body, "
     "dress on an armature-deformed body, tablecloth on a table at 40², 100², 160²)",
     "bench.springs_contact"),
    ("Self-collision: a strip folding over a box, Sinew against Blender's Cloth", "bench.selfcollision_blender"),
    ("Spring bones in core: the presets' look, and three characters with 80 spring bones over 250 frames",
     "bench.spring_bones"),
]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def versions() -> str:
    import numpy
    import scipy

    parts = [f"Python {platform.python_version()}", f"numpy {numpy.__version__}", f"scipy {scipy.__version__}"]
    try:
        import bpy

        parts.insert(0, f"Blender {bpy.app.version_string} (bpy module)")
    except ImportError:
        pass
    return ", ".join(parts)


def fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v == 0:
            return "0"
        if abs(v) >= 1e5 or abs(v) < 1e-3:
            return f"{v:.2e}"
        if abs(v) >= 100:
            return f"{v:.0f}"
        return f"{v:.3g}"
    return str(v)


def table(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)\n"
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    out = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |")
    return "\n".join(out) + "\n"


def plot_scaling(rows: list[dict], path: Path) -> bool:
    pts = [r for r in rows if "vertices" in r and "ms_per_frame" in r and isinstance(r.get("ms_per_frame"), float)]
    if not pts:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    key = "integrator" if "integrator" in pts[0] else "solver"
    for name in sorted({r.get(key, "?") for r in pts}):
        sel = sorted((r["vertices"], r["ms_per_frame"]) for r in pts if r.get(key) == name and r["ms_per_frame"] > 0)
        if sel:
            ax.loglog([s[0] for s in sel], [s[1] for s in sel], "o-", label=name)
    ax.set_xlabel("vertices")
    ax.set_ylabel("ms per frame")
    ax.set_title("Spring solvers: cost against mesh size (log-log)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_ik(rows: list[dict], path: Path) -> bool:
    pts = [r for r in rows if "ms_per_frame" in r and r.get("frames")]
    if not pts:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r.get('library', 'Sinew')} {r.get('solver', '')}\n{r.get('bones', '')} bones" for r in pts]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.bar(range(len(pts)), [r["ms_per_frame"] for r in pts], color=["C0" if r.get("library") == "Sinew" else "C3"
                                                                       for r in pts])
    ax.set_yscale("log")
    ax.set_xticks(range(len(pts)), labels, fontsize=7)
    ax.set_ylabel("ms per frame (log)")
    ax.set_title("IK: Sinew (blue) against ikpy (red), warm-started per frame")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _goals(module: str, all_rows: dict[str, list[dict]]) -> list[str]:
    """The headline lines of a section that states its own goals (``module.goals(rows)``)."""
    if module not in all_rows:  # not run, or failed: its traceback is in the report
        return []
    try:
        return importlib.import_module(module).goals(all_rows[module])
    except Exception:  # a broken headline must not hide the tables
        traceback.print_exc()
        return [f"{module}: its goals could not be stated (traceback printed)"]


def headline(all_rows: dict[str, list[dict]]) -> list[str]:
    """The goals of issues 3-6, each with the figure measured in this run."""
    out: list[str] = []
    out += _goals("bench.shot", all_rows)
    out += _goals("bench.spring_bones", all_rows)

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    for r in all_rows.get("bench.ik_core", []):
        if r.get("default") and r.get("frames") == 1000:
            ms = 1000 * r["seconds"]
            out.append(f"core {r['solver']} (default) bake, 10 bones, 1,000 frames: {ms:.0f} ms; loop closure "
                       f"{r['loop_closure_deg']:.2g} deg (goal < 1: {verdict(r['loop_closure_deg'] < 1.0)}), max twist "
                       f"{r['max_twist_deg']:.2g} deg, hinge error {r['hinge_error_m']:.1e} m")
    ik = {r["contender"]: r for r in all_rows.get("bench.ik_blender", [])}
    from core.ik import DEFAULT_SOLVER

    fab = ik.get(f"Sinew {DEFAULT_SOLVER}")
    if fab:
        out.append(f"IK bake ({DEFAULT_SOLVER}, the default) vs Blender IK + nla.bake: {fab['time_ratio']:.2f}× the "
                   f"time (goal ≤ 0.2×: {verdict(fab['time_ratio'] <= 0.2)}), max tip error "
                   f"{1 / fab['error_ratio']:.0f}× smaller (goal ≥ 10×: {verdict(fab['error_ratio'] <= 0.1)})")
    out += _goals("bench.springs_core", all_rows)
    cloth = next((r for r in all_rows.get("bench.springs_blender", [])
                  if not str(r.get("method", "")).startswith("Sinew")), None)
    for r in all_rows.get("bench.springs_blender", []):
        if str(r.get("method", "")).startswith("Sinew") and cloth:
            out.append(f"{r['method']} vs Blender Cloth at 64²: {r['ratio_to_blender']:.2f}× the time per "
                       f"frame (goal ≤ 0.5×: {verdict(r['ratio_to_blender'] <= 0.5)}), max edge strain "
                       f"{100 * r['max_edge_strain']:.1f}% vs Blender's {100 * cloth['max_edge_strain']:.1f}% "
                       f"(goal ≤: {verdict(r['max_edge_strain'] <= cloth['max_edge_strain'])}), playback "
                       f"{r['playback_ms_per_frame']:.2f} ms/frame (goal ≤ 5: "
                       f"{verdict(r['playback_ms_per_frame'] <= 5)})")
    out += _goals("bench.springs_presets", all_rows)
    for r in all_rows.get("bench.selfcollision_blender", []):
        if str(r.get("method", "")).startswith("Sinew"):
            out.append(f"self-collision fold vs Blender Cloth: {r['ratio_to_blender']:.2f}× the time per frame "
                       f"(goal ≤ 0.5×: {verdict(r['ratio_to_blender'] <= 0.5)}), {r['max_crossings']:.0f} "
                       f"crossing triangle pairs (goal 0: {verdict(r['max_crossings'] == 0)})")
    out += _goals("bench.springs_fields", all_rows)
    out += _goals("bench.springs_contact", all_rows)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(ROOT / "out"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--label", default="5.2")
    parser.add_argument("--only", nargs="*", help="module names to run (default: all)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.label == "5.2" else f"_{args.label.replace('.', '')}"
    started = time.perf_counter()
    doc = [
        f"# Sinew benchmarks{' (quick)' if args.quick else ''}",
        "",
        f"- date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        f"- machine: {machine()}",
        f"- versions: {versions()}",
        "- every figure below was measured in this run; ratios are what we claim, absolute times are this "
        "machine's.",
        "",
    ]
    failed = 0
    all_rows: dict[str, list[dict]] = {}
    for title, module in SECTIONS:
        if args.only and module.split(".")[-1] not in args.only:
            continue
        print(f"bench: {title} ...", flush=True)
        t0 = time.perf_counter()
        try:
            rows = importlib.import_module(module).run(args.quick)
        except Exception:  # a broken section is reported, the others still run
            failed += 1
            doc += [f"## {title}", "", "```", traceback.format_exc(), "```", ""]
            traceback.print_exc()
            continue
        all_rows[module] = rows
        doc += [f"## {title}", "", table(rows), f"_{time.perf_counter() - t0:.1f} s_", ""]
        print(table(rows), flush=True)
    goals = headline(all_rows)
    if goals:
        doc += ["## Goals", "", *[f"- {g}" for g in goals], ""]
        print("\n".join(goals), flush=True)
    pics = []
    if plot_scaling(all_rows.get("bench.springs_core", []), out / f"bench_springs{suffix}.png"):
        pics.append(f"bench_springs{suffix}.png")
    if plot_ik(all_rows.get("bench.ikpy_compare", []), out / f"bench_ik{suffix}.png"):
        pics.append(f"bench_ik{suffix}.png")
    doc += [f"![{p}]({p})" for p in pics]
    doc += ["", f"Total: {time.perf_counter() - started:.0f} s."]
    path = out / f"bench{suffix}.md"
    path.write_text("\n".join(doc) + "\n")
    print(f"bench: wrote {path}" + "".join(f", {out / p}" for p in pics))
    return 1 if failed else 0


if __name__ == "__main__":
    userdir.run_then_exit(main)
