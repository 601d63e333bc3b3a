"""The lab inset: two arms write SINEW (the seeds' lab), and the lab's core-only plots.

* one arm (CCD) follows an EXPRESSION target, a piecewise formula of ``t`` generated below;
  the other (FABRIK) follows a CURVE target, a poly curve spelling the same word; both leave
  a traced curve of their tip. They stand far to the side of the shot (``LAB_ORIGIN``) with
  their own camera, rendered as a small inset in the shot's pictures.
* ``plot_ik``: CCD vs FABRIK vs DLS on the same word (iterations and tip error per frame);
  ``plot_springs``: energy and max strain per frame of every integrator on one hanging cloth.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from tools.scenes.bones import straight_chain

from .shot import link

LAB_ORIGIN = (60.0, 0.0, 0.0)

# --------------------------------------------------------------------------- the word

# Strokes of each letter in a unit box (x right, y up), drawn in order; the pen moves
# in straight lines between letters (the arm never lifts its pen), so each letter starts
# where the previous one ended, along the baseline or the top line.
LETTERS: dict[str, list[tuple[float, float]]] = {
    "S": [(1.0, 0.85), (0.8, 1.0), (0.2, 1.0), (0.0, 0.8), (0.05, 0.6), (0.95, 0.4),
          (1.0, 0.2), (0.8, 0.0), (0.2, 0.0), (0.0, 0.15)],
    "I": [(0.5, 0.0), (0.5, 1.0)],
    "N": [(0.0, 1.0), (0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)],
    "E": [(1.0, 0.0), (0.0, 0.0), (0.0, 0.5), (0.7, 0.5), (0.0, 0.5), (0.0, 1.0), (1.0, 1.0)],
    "W": [(0.0, 1.0), (0.25, 0.0), (0.5, 0.6), (0.75, 0.0), (1.0, 1.0)],
}


def word_polyline(word: str = "SINEW", height: float = 0.9, width: float = 0.6, gap: float = 0.25):
    """The word as one polyline, shape (m, 2), centred on the origin (metres)."""
    pts = []
    x0 = 0.0
    for ch in word:
        pts += [(x0 + width * x, height * y) for x, y in LETTERS[ch]]
        x0 += width + gap
    total = x0 - gap
    return [(x - total / 2, y - height / 2) for x, y in pts]


def piecewise_expression(values: list[float], knots: list[float]) -> str:
    """A linear interpolant through (knots[i], values[i]) as one safe expression of t.

    Nested ``if`` pieces: ``if(t < k1, v0 + (t - k0) * s0, if(t < k2, ...))``.
    """
    def fmt(v: float) -> str:
        return f"{v:.6g}"

    expr = fmt(values[-1])
    for i in range(len(values) - 2, -1, -1):
        k0, k1 = knots[i], knots[i + 1]
        slope = (values[i + 1] - values[i]) / (k1 - k0) if k1 > k0 else 0.0
        piece = f"{fmt(values[i])} + (t - {fmt(k0)}) * {fmt(slope)}"
        expr = f"if(t < {fmt(k1)}, {piece}, {expr})"
    return expr


def arc_length_knots(points) -> list[float]:
    d = [0.0]
    for (ax, ay), (bx, by) in zip(points[:-1], points[1:]):
        d.append(d[-1] + math.hypot(bx - ax, by - ay))
    return [v / d[-1] for v in d]


# --------------------------------------------------------------------------- scene building


def make_arm(name: str, location, bones: int, length: float, direction=(0.0, 0.0, 1.0)):
    """A connected chain of ``bones`` bones of ``length`` metres along ``direction``."""
    from mathutils import Vector

    ob = straight_chain(name, bones, length, bone_name="{name}.{i:02d}", direction=direction,
                        location=location, rotation_mode="QUATERNION")
    skin_arm(ob, Vector(direction).normalized(), length, bones)
    return ob, f"{name}.{bones - 1:02d}"


def skin_arm(arm_ob, d, length: float, bones: int) -> None:
    """A renderable tapered box per bone, deformed by the armature (armatures do not render)."""
    import bpy
    from mathutils import Vector

    side = d.orthogonal().normalized()
    other = d.cross(side).normalized()
    verts, faces, groups = [], [], []
    for i in range(bones):
        w0, w1 = 0.09 * (1 - 0.5 * i / bones), 0.09 * (1 - 0.5 * (i + 1) / bones)
        base = len(verts)
        for t, w in ((i * length, w0), ((i + 1) * length * 0.985, w1)):
            for a, b in ((1, 1), (-1, 1), (-1, -1), (1, -1)):
                verts.append(d * t + side * (a * w) + other * (b * w))
        faces += [(base, base + 1, base + 2, base + 3), (base + 4, base + 7, base + 6, base + 5)]
        faces += [(base + k, base + 4 + k, base + 4 + (k + 1) % 4, base + (k + 1) % 4) for k in range(4)]
        groups.append(list(range(base, base + 8)))
    me = bpy.data.meshes.new(arm_ob.name + "Skin")
    me.from_pydata([tuple(v) for v in verts], [], faces)
    skin = link(bpy.data.objects.new(arm_ob.name + "Skin", me))
    skin.parent = arm_ob
    for i, vs in enumerate(groups):
        skin.vertex_groups.new(name=f"{arm_ob.data.name}.{i:02d}").add(vs, 1.0, "REPLACE")
    skin.modifiers.new("Armature", "ARMATURE").object = arm_ob
    skin.color = (0.85, 0.85, 0.8, 1.0)
    _ = Vector


def build_lab(frames: int):
    """The two writing arms, the word curve and the lab camera, around ``LAB_ORIGIN``."""
    import bpy
    from mathutils import Vector

    ox, oy, oz = LAB_ORIGIN
    poly = word_polyline()
    knots = arc_length_knots(poly)
    z_word = 2.4

    # Arm 1: CCD with an expression target (armature space: the arm stands at x = -4.5).
    arm_ccd, tip_ccd = make_arm("ArmCCD", (ox - 4.5, oy - 1.4, oz), bones=8, length=0.55)
    s = arm_ccd.pose.bones[tip_ccd].sinew_ik
    s.enabled, s.chain_length, s.solver, s.target_mode = True, 0, "CCD", "EXPRESSION"
    s.expression_x = piecewise_expression([x + 0.0 for x, _ in poly], knots)
    s.expression_y = "1.4"
    s.expression_z = piecewise_expression([y + z_word for _, y in poly], knots)
    s.max_iterations, s.tolerance, s.trace = 100, 1e-4, True

    # Arm 2: FABRIK following a poly curve spelling the same word, at x = +4.5.
    curve = bpy.data.curves.new("SinewWord", "CURVE")
    curve.dimensions = "3D"
    spline = curve.splines.new("POLY")
    spline.points.add(len(poly) - 1)
    for p, (x, y) in zip(spline.points, poly):
        p.co = (ox + x + 4.5, oy, oz + y + z_word, 1.0)
    curve.bevel_depth = 0.035
    word_ob = link(bpy.data.objects.new("SinewWord", curve))
    word_ob.color = (0.3, 0.3, 0.3, 1.0)
    arm_fab, tip_fab = make_arm("ArmFABRIK", (ox + 4.5, oy - 1.4, oz), bones=8, length=0.55)
    s = arm_fab.pose.bones[tip_fab].sinew_ik
    s.enabled, s.chain_length, s.solver, s.target_mode, s.target = True, 0, "FABRIK", "CURVE", word_ob
    s.max_iterations, s.tolerance, s.trace = 400, 1e-5, True

    cam = link(bpy.data.objects.new("LabCamera", bpy.data.cameras.new("LabCamera")))
    cam.location = (ox, oy - 9.0, oz + 2.4)
    cam.rotation_euler = (Vector((ox, oy, oz + 2.0)) - cam.location).to_track_quat("-Z", "Y").to_euler()
    cam.data.lens = 24
    return {"arms": [(arm_ccd, tip_ccd), (arm_fab, tip_fab)], "word": poly, "knots": knots, "camera": cam}


# --------------------------------------------------------------------------- bake + checks


def style_traces(scene_info, frames: int) -> None:
    """Give the tip traces a thickness and let them grow with the drawing (bevel end keyed 0→1)."""
    import bpy

    edit = bpy.context.preferences.edit
    previous, edit.keyframe_new_interpolation_type = edit.keyframe_new_interpolation_type, "LINEAR"
    for (ob, tip), color in zip(scene_info["arms"][:2], ((0.1, 0.35, 0.9, 1), (0.9, 0.35, 0.1, 1))):
        trace = bpy.data.objects.get(f"{ob.name}_{tip}_trace")
        if trace is None:
            raise SystemExit(f"demo: the trace curve of {ob.name} is missing")
        trace.data.bevel_depth = 0.06
        trace.data.bevel_factor_mapping_end = "SPLINE"
        trace.color = color
        for frame, value in ((1, 0.0), (frames, 1.0)):
            trace.data.bevel_factor_end = value
            trace.data.keyframe_insert("bevel_factor_end", frame=frame)
    edit.keyframe_new_interpolation_type = previous


def check_lab(lab) -> list[str]:
    """The writing arms' tips stay on their word (as the bake measured it)."""
    problems = []
    for ob, tip in lab["arms"]:
        s = ob.pose.bones[tip].sinew_ik
        if not s.last_error_max < 1e-3:
            problems.append(f"{ob.name}: max tip error {s.last_error_max:.2e} m (expected < 1e-3 m)")
    return problems


# --------------------------------------------------------------------------- pictures


def plot_ik(out: Path, addon, poly, knots, frames: int) -> tuple[Path, list[dict]]:
    """CCD vs FABRIK vs DLS on the same word, through core (the demo's own chain)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    core = addon.core
    from importlib import import_module

    ik_bake = import_module(core.__name__ + ".ik.bake")
    ik_chain = import_module(core.__name__ + ".ik.chain")
    ik_targets = import_module(core.__name__ + ".ik.targets")
    base = import_module(core.__name__ + ".ik.base")
    pts = np.array([(x, 1.4, y + 2.4) for x, y in poly])
    targets = ik_targets.resample_polyline(pts, frames)
    chain = ik_chain.Chain.from_points(np.array([(0.0, 0.0, 0.55 * i) for i in range(9)]))
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    rows = []
    for name in ("CCD", "FABRIK", "DLS"):
        settings = base.SolveSettings(max_iterations=100, tolerance=1e-5)
        t0 = time.perf_counter()
        res = ik_bake.bake_chain(chain, targets, name, settings)
        dt = time.perf_counter() - t0
        axes[0].plot(res.iterations, label=name)
        axes[1].semilogy(np.maximum(res.errors, 1e-12), label=name)
        rows.append({"solver": name, "seconds": dt, "mean_iter": float(np.mean(res.iterations)),
                     "max_iter": int(np.max(res.iterations)), "max_error": float(np.max(res.errors))})
    axes[0].set_ylabel("iterations")
    axes[1].set_ylabel("tip error (m)")
    axes[1].set_xlabel("frame")
    axes[0].set_title("Writing SINEW: iterations and tip error per frame (8 bones, warm-started)")
    axes[0].legend()
    fig.tight_layout()
    path = out / "demo_ik.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path, rows


def plot_springs(out: Path, addon, frames: int) -> tuple[Path, list[dict]]:
    """Energy and max strain per frame for each integrator on the same hanging cloth.

    At most 96 frames (4 s): enough to see forward Euler diverge and the others settle, and
    NEWTON's 0.1–0.25 s per frame would otherwise take a minute of the demo's three.
    """
    frames = min(frames, 96)
    import matplotlib

    matplotlib.use("Agg")
    from importlib import import_module

    import matplotlib.pyplot as plt
    import numpy as np

    core = addon.core
    topology = import_module(core.__name__ + ".springs.topology")
    model_mod = import_module(core.__name__ + ".springs.model")
    sim_mod = import_module(core.__name__ + ".springs.simulate")
    errors = import_module(core.__name__ + ".errors")
    n = 16
    xs, zs = np.meshgrid(np.linspace(-0.6, 0.6, n + 1), np.linspace(0.6, -0.6, n + 1))
    rest = np.stack([xs.ravel(), np.zeros(xs.size), zs.ravel()], axis=1)
    quads = [(j * (n + 1) + i, j * (n + 1) + i + 1, (j + 1) * (n + 1) + i + 1, (j + 1) * (n + 1) + i)
             for j in range(n) for i in range(n)]
    loops = np.array(quads).ravel()
    edges = set()
    for q in quads:
        for a, b in zip(q, q[1:] + q[:1]):
            edges.add((min(a, b), max(a, b)))
    springs = topology.build_springs(len(rest), np.array(sorted(edges)), np.arange(0, len(loops), 4),
                                     np.full(len(quads), 4), loops)
    pinned = np.zeros(len(rest), bool)
    pinned[[0, n]] = True
    model = model_mod.build_model(rest, springs, stiffness=300.0, shear_stiffness=40.0, bending_stiffness=1.0,
                                  damping=0.02, vertex_mass=0.002, pinned=pinned, air_drag=0.3)
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    rows = []
    stable: list[float] = []
    for name in ("EXPLICIT", "SYMPLECTIC", "IMPLICIT", "NEWTON", "FAST"):
        # The explicit integrators need small steps to be stable (h·sqrt(k/m) well below 2).
        substeps = 64 if name in ("EXPLICIT", "SYMPLECTIC") else 4
        sim = sim_mod.Simulator(model, name, fps=24.0, substeps=substeps, iterations=10)
        energy, strain = [], []
        t0 = time.perf_counter()
        status = "ok"
        try:
            for _ in range(frames - 1):
                d = sim.advance(rest[pinned])
                energy.append(d.kinetic_energy + d.potential_energy)
                strain.append(d.max_strain)
        except errors.StabilityError as exc:  # refused before it could diverge
            status = f"refused: {exc.detail}"
        except errors.DivergenceError as exc:
            status = f"diverged at frame {exc.frame}"
        dt = time.perf_counter() - t0
        label = name if status == "ok" else f"{name} ({status})"
        if status == "ok":
            stable.extend(energy)
        axes[0].plot(energy, label=label)
        axes[1].plot(strain, label=label)
        rows.append({"solver": name, "substeps": substeps, "ms_per_frame": 1000 * dt / max(len(energy), 1),
                     "max_strain": float(max(strain)) if strain else float("nan"), "status": status})
    if stable:  # a diverged run would flatten everything else
        lo, hi = min(stable), max(stable)
        pad = 0.1 * (hi - lo or 1.0)
        axes[0].set_ylim(lo - pad, hi + pad)
    axes[0].set_ylabel("kinetic + potential energy (J)")
    axes[1].set_ylabel("max strain")
    axes[1].set_xlabel("frame")
    axes[1].set_ylim(0, 0.5)
    axes[0].set_title("A 17×17 hanging cloth: energy and strain per integrator (explicit: 64 substeps, implicit: 4)")
    axes[0].legend()
    fig.tight_layout()
    path = out / "demo_springs.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path, rows
