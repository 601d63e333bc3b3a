"""Record what the add-on hands core for a bench contact scene, and replay it in core.

Two steps, for measuring a contact solver change without Blender in the loop (and A/B in one
process, which a bake in Blender cannot give):

* ``capture`` (run by a Blender Python: ``.venv/bpy-5.2/bin/python -m tools.replay capture
  skirt OUT.npz``) builds one scene of ``bench/springs_contact.py`` (``drape``, ``skirt``,
  ``dress``, ``tablecloth 40²``, ``tablecloth 100², self-collision`` …; self-collision on
  where the bench has it on), the ``fold`` of ``bench/selfcollision_blender.py``, or the demo
  shot's ``shot cape`` or ``shot drape`` with the shot's own settings (as ``bench/shot.py``
  bakes them, the character's IK baked first),
  applies the COTTON preset as the bench does (optionally
  another ``--solver``, ``--substeps``, ``--iterations``), bakes it with
  ``bpy.ops.sinew.bake_springs`` and records, from inside the installed add-on, the arguments
  of ``build_springs`` and ``build_model``, the ``Simulator``'s settings (self-collision as
  its distance and iterations), and every frame's pin
  targets and colliders (triangle meshes and planes) into an ``.npz`` (numbers and strings
  only: it loads without pickle);
* ``run`` (any Python with numpy and scipy: ``.venv/bench/bin/python -m tools.replay run
  OUT.npz``) rebuilds the model from those arguments with this checkout's ``core``, steps the
  recorded frames (optionally with another solver or settings, and with the start perturbed
  by ``--seed``: 10⁻⁶ m normal noise on the rest positions) and prints the process time per
  frame, the most triangle-mesh collider ridge edges (convex or border) through a cloth triangle and cloth edges
  through a collider triangle at any frame, with self-collision the most crossing pairs of the
  cloth's own triangles at any frame (``selfcollision.count_crossings``), the largest
  structural strain, the cloth's centre
  at the end and its speeds.

docs/CONTACT.md quotes figures measured this way (the skirt's cuts, the tablecloth's corners).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# --------------------------------------------------------------------------- capture (bpy)

def capture(scene: str, out: Path, solver: str | None, substeps: int | None, iterations: int | None) -> None:
    """Bake ``scene`` in Blender as the bench does and write what core was handed to ``out``."""
    os.environ.setdefault("SINEW_ZIP", str(sorted((ROOT / "dist").glob("sinew-*linux_x64.zip"))[-1]))
    from bench import springs_contact as sc  # (before bpy: it sets Blender's user resources up)

    bpy = sc.bpy  # imported there, after that set-up
    sc._install()
    pkg = next(m for name, m in sys.modules.items() if name.endswith(".core.springs") and "sinew" in name)
    sim_mod = sys.modules[pkg.__name__ + ".simulate"]
    seen: dict = {"frames": []}
    build_model, build_springs = pkg.build_model, pkg.build_springs
    init, advance = sim_mod.Simulator.__init__, sim_mod.Simulator.advance

    def rec_springs(*a, **kw):
        seen["springs"] = (a, kw)
        return build_springs(*a, **kw)

    def rec_model(*a, **kw):
        seen["model"] = (a, kw)
        return build_model(*a, **kw)

    def rec_init(self, model, integrator, **kw):
        seen["sim"] = (integrator, kw)
        return init(self, model, integrator, **kw)

    def rec_advance(self, pins_next=None, colliders=(), *, external=None, **kw):
        if callable(external):
            raise SystemExit("this scene has force fields: the replay records colliders and pins only")
        seen["frames"].append((None if pins_next is None else np.array(pins_next), list(colliders)))
        return advance(self, pins_next, colliders, external=external, **kw)

    pkg.build_model, pkg.build_springs = rec_model, rec_springs
    sim_mod.Simulator.__init__, sim_mod.Simulator.advance = rec_init, rec_advance
    try:
        if scene == "fold":  # the strip folding over a box, as bench/selfcollision_blender.py bakes it
            from bench import selfcollision_blender as sb

            frames = sb.FRAMES
            bpy.ops.wm.read_homefile(use_empty=True)
            cloth = sb.sinew_scene()[0]  # (its preset and self-collision set)
        elif scene.startswith("shot "):  # the demo shot's cloth, as bench/shot.py bakes it
            import tempfile

            from bench import shot as bs

            frames = bs.CLOTH_FRAMES
            names = {name.lower(): name for name in bs.CLOTHS}
            if scene[5:] not in names:
                raise SystemExit(f"the shot's cloths are {', '.join('shot ' + n for n in names)}")
            with tempfile.TemporaryDirectory(prefix="sinew-replay-") as tmp:
                bs._open(bs._shot_file(frames, Path(tmp)))
            bs._bake_ik(bpy.data.objects[bs.shot.ARMATURE], frames)
            cloth = bpy.data.objects[names[scene[5:]]]  # (its settings are the shot's)
        else:
            frames = sc.SCENES[scene][1]
            cloth = sc._build(scene, frames)[0]
        bpy.context.view_layer.objects.active = cloth
        s = cloth.sinew_springs
        if scene != "fold" and not scene.startswith("shot "):
            s.enabled = True
            if cloth.vertex_groups.get("pins") is not None:
                s.pin_group = "pins"
            s.self_collision = scene in sc.SELF  # (before the preset, as the bench sets it)
            bpy.ops.sinew.springs_preset(preset=sc.PRESET)
        for name, value in (("solver", solver), ("substeps", substeps), ("iterations", iterations)):
            if value is not None:
                setattr(s, name, value)
        bpy.ops.sinew.bake_springs(frame_start=1, frame_end=frames)
    finally:
        pkg.build_model, pkg.build_springs = build_model, build_springs
        sim_mod.Simulator.__init__, sim_mod.Simulator.advance = init, advance
    data: dict[str, np.ndarray] = {}
    args, kw = seen["springs"]
    for i, value in enumerate(args):
        data[f"springs_arg{i}"] = np.asarray(value)
    for key, value in kw.items():
        data[f"springs_kw_{key}"] = np.asarray(value)
    args, kw = seen["model"]
    data["model_positions"] = np.asarray(args[0])
    for key, value in kw.items():
        data[f"model_kw_{key}"] = np.asarray(value)
    integrator, kw = seen["sim"]
    data["solver"] = np.asarray(str(integrator) if isinstance(integrator, str) else integrator.name)
    for key, value in kw.items():
        if key == "self_collision" and value is not None:
            data["self_distance"] = np.asarray(value.distance)
            data["self_iterations"] = np.asarray(value.iterations)
        elif value is not None:
            data[f"sim_{key}"] = np.asarray(value)
    data["frames"] = np.asarray(len(seen["frames"]))
    for f, (pins, colliders) in enumerate(seen["frames"]):
        if pins is not None:
            data[f"f{f}_pins"] = pins
        data[f"f{f}_colliders"] = np.asarray(len(colliders))
        for j, col in enumerate(colliders):
            key = f"f{f}_c{j}_"
            data[key + "type"] = np.asarray(type(col).__name__)
            data[key + "thickness"] = np.asarray(col.thickness)
            data[key + "friction"] = np.asarray(col.friction)
            if type(col).__name__ == "TriangleMesh":
                data[key + "vertices"], data[key + "triangles"] = col.vertices, col.triangles
                if col.previous is not None:
                    data[key + "previous"] = col.previous
            elif type(col).__name__ == "Plane":
                data[key + "point"], data[key + "normal"] = np.asarray(col.point), np.asarray(col.normal)
            else:
                raise SystemExit(f"a {type(col).__name__} collider: the replay records triangle meshes and planes")
    np.savez_compressed(out, **data)
    print(f"recorded {scene}: {len(seen['frames'])} frames, solver {data['solver']} -> {out}")


# --------------------------------------------------------------------------- replay (core)

def _value(a: np.ndarray):
    return a.item() if a.ndim == 0 else a


def load(path: Path, seed: int = 0):
    """The recorded scene: ``(model, solver, simulator settings, frames, cloth triangles)``;
    frames are ``(pins, colliders, built)``: the recorded colliders and a function of them
    that gives the frame's collider objects."""
    from core.springs import Plane, TriangleMesh, build_model, build_springs

    d = np.load(path)  # allow_pickle stays off
    args = [d[f"springs_arg{i}"] for i in range(8) if f"springs_arg{i}" in d]
    springs = build_springs(*args, **{k[len("springs_kw_"):]: _value(d[k]) for k in d if k.startswith("springs_kw_")})
    kw = {k[len("model_kw_"):]: _value(d[k]) for k in d if k.startswith("model_kw_")}
    x0 = d["model_positions"]
    if seed:
        x0 = x0 + np.random.default_rng(seed).normal(scale=1e-6, size=x0.shape)
    model = build_model(x0, springs, **kw)
    settings = {k[len("sim_"):]: _value(d[k]) for k in d if k.startswith("sim_")}
    if "self_distance" in d:
        from core.springs import SelfCollision

        settings["self_collision"] = SelfCollision.build(
            d["model_positions"], kw["triangles"], float(d["self_distance"]), int(d["self_iterations"]))
    frames = []
    for f in range(int(d["frames"])):
        pins = d[f"f{f}_pins"] if f"f{f}_pins" in d else None
        cols = []
        for j in range(int(d[f"f{f}_colliders"])):
            key = f"f{f}_c{j}_"
            kind, th, mu = str(d[key + "type"]), float(d[key + "thickness"]), float(d[key + "friction"])
            if kind == "TriangleMesh":
                prev = d[key + "previous"] if key + "previous" in d else None
                cols.append(("mesh", d[key + "vertices"], d[key + "triangles"], prev, th, mu))
            else:
                cols.append(("plane", Plane(d[key + "point"], d[key + "normal"], thickness=th, friction=mu)))
        frames.append((pins, cols))

    # each frame's colliders built as the add-on builds them (operators.collider_frames): a
    # mesh with the same triangles and settings as on the frame before is that frame's moved
    # on (TriangleMesh.moved_to: its topology kept, and a still one the same object, so the
    # solver keeps its broad phase)
    rows, before = [], []
    for _, cols in frames:
        row = []
        for k, c in enumerate(cols):
            if c[0] != "mesh":
                row.append(c[1])
                continue
            b = before[k] if k < len(before) else None
            same = (b is not None and isinstance(b[1], TriangleMesh) and b[0][2].shape == c[2].shape
                    and np.array_equal(b[0][2], c[2]) and b[0][4:] == c[4:])
            if same and (c[3] is not None or np.array_equal(b[0][1], c[1])):
                row.append(b[1].moved_to(c[1], previous=c[3]))
            else:
                row.append(TriangleMesh(c[1], c[2], thickness=c[4], friction=c[5], previous=c[3]))
        rows.append(row)
        before = list(zip(cols, row))

    return (model, str(d["solver"]), settings, [(p, c, lambda _, row=row: row) for (p, c), row in zip(frames, rows)],
            kw.get("triangles"))


def _edges(tris: np.ndarray) -> np.ndarray:
    e = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1)
    return np.unique(e, axis=0)


def _through(p0: np.ndarray, p1: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(s,) bool: segment s passes through one of the triangles (Möller–Trumbore, strict)."""
    d = p1 - p0
    e1, e2 = b - a, c - a
    pv = np.cross(d[:, None], e2[None])
    det = np.einsum("stk,tk->st", pv, e1)
    ok = np.abs(det) > 1e-14
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    t0 = p0[:, None] - a[None]
    u = np.einsum("stk,stk->st", t0, pv) * inv
    q = np.cross(t0, e1[None])
    v = np.einsum("sk,stk->st", d, q) * inv
    w = np.einsum("stk,tk->st", q, e2) * inv
    return (ok & (u > 0) & (v > 0) & (u + v < 1) & (w > 0) & (w < 1)).any(axis=1)


def replay(path: Path, solver: str | None, substeps: int | None, iterations: int | None, seed: int) -> None:
    from core.springs import Simulator
    from core.springs.selfcollision import count_crossings

    model, recorded, settings, frames, tris = load(path, seed)
    settings.update({k: v for k, v in (("substeps", substeps), ("iterations", iterations)) if v is not None})
    sim = Simulator(model, solver or recorded, **settings)
    edges = _edges(tris)
    sp = np.asarray(model.springs).reshape(-1, 2)[:model.structural_count]
    rest = model.rest_lengths[:model.structural_count]
    spent, ridges_through, cloth_through, strain, crossings = 0.0, 0, 0, 0.0, 0
    selfish = settings.get("self_collision") is not None
    for pins, cols, built in frames:
        colliders = built(cols)
        t = time.process_time()
        sim.advance(pins, colliders)
        spent += time.process_time() - t
        x = sim.state.x
        for c, col in zip(cols, colliders):
            if c[0] != "mesh":
                continue
            v, tv = c[1], c[2]
            r = col.window(0.0, 1.0).edges  # its ridges: convex or border edges
            ridges_through = max(ridges_through, int(_through(v[r[:, 0]], v[r[:, 1]], x[tris[:, 0]], x[tris[:, 1]],
                                                              x[tris[:, 2]]).sum()))
            cloth_through = max(cloth_through, int(_through(x[edges[:, 0]], x[edges[:, 1]], v[tv[:, 0]], v[tv[:, 1]],
                                                            v[tv[:, 2]]).sum()))
        strain = max(strain, float((np.linalg.norm(x[sp[:, 0]] - x[sp[:, 1]], axis=1) / rest).max() - 1.0))
        if selfish:
            crossings = max(crossings, count_crossings(x, tris))
    speed = np.linalg.norm(sim.state.v, axis=1)
    centre = sim.state.x.mean(axis=0)
    print(f"{path.name} {sim.integrator.name} {sim.substeps}x{sim.iterations} seed {seed}: "
          f"{1000 * spent / len(frames):.1f} ms per frame (process time), collider ridges through the cloth "
          f"{ridges_through}, cloth edges through a collider {cloth_through}"
          f"{f', self-crossings {crossings}' if selfish else ''} (most at any frame), strain "
          f"{100 * strain:.2f} %, centre at the end ({centre[0]:.4f}, {centre[1]:.4f}, {centre[2]:.4f}) m, "
          f"speed at the end mean {speed.mean():.3f} max {speed.max():.3f} m/s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    for name in ("capture", "run"):
        p = sub.add_parser(name)
        if name == "capture":
            p.add_argument("scene")
        p.add_argument("file", type=Path)
        p.add_argument("--solver")
        p.add_argument("--substeps", type=int)
        p.add_argument("--iterations", type=int)
        if name == "run":
            p.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.what == "capture":
        capture(a.scene, a.file, a.solver, a.substeps, a.iterations)
    else:
        replay(a.file, a.solver, a.substeps, a.iterations, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
