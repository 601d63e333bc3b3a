"""Cloth contact in Blender: Sinew against Blender's own Cloth on the same scenes (not a test).

In one bpy process, each scene is built twice, once for Blender's Cloth modifier at its
defaults (frames stepped with ``frame_set``) and once for Sinew (``bpy.ops.sinew.bake_springs``
with the ``COTTON`` preset applied by name through ``sinew.springs_preset``, so it follows
the preset's current values):

* **drape**: a 40×40-cut 2 m grid 0.2 m above a UV sphere (r 0.5) resting on a ground plane,
  both colliders with a Collision modifier at default settings, 120 frames;
* **skirt**: an open cylinder (r 0.34, 0.6 m long, 32×12) pinned at its top ring and
  parented to a cylinder body (r 0.3, 16 sides, Collision modifier) keyed to move 1.5 m out
  and back in 15 frames, 40 frames;
* **dress**: a dress (32×16, pinned at the waist, with an Armature modifier) settling onto
  the hips of a body skinned to a two-bone armature that walks, bends and twists (Armature
  and Collision modifiers), 40 frames;
* **tablecloth n²**: a 1.6 m grid of n × n faces 10 cm above a 1 m square table 0.75 m high on
  a ground plane, both with a Collision modifier at its defaults: 40² over 120 frames, 100²
  and 160² over their first 8 frames (left out of ``--quick``), and the growth exponent of
  the time per frame from 40² to 160²; the 100² once more with self-collision on for both
  (Blender's ``use_self_collision``, Sinew's ``self_collision``, each at its default 0.015 m),
  with the most crossing pairs of the cloth's own triangles at any frame.

Per scene and contender: ms per frame (Sinew: read + simulate + write keys), the time
ratio Sinew/Blender (goal ≤ 0.5), the most cloth vertices inside a collider at any frame
(the colliders' own polygons, evaluated by Blender; goal 0 for Sinew), for the skirt and the
dress also the most cloth edges passing through the body, the most collider edges passing
through a cloth triangle (a table's rim or a body's edge cutting through the cloth between
its vertices), the largest edge stretch ``max(ℓ/L − 1)``, the
fastest vertex over the last frame, where the cloth's middle ended, and Sinew's frames not
converged. The COTTON preset picks the VBD solver for the cloth that lands on colliders
(drape, tablecloths) and FAST for the pinned skirt and dress.

``.venv/bpy-5.2/bin/python bench/springs_contact.py [--quick]``; importable as
``run(quick) -> list[dict]``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tools.scenes import meshes  # noqa: E402
from tools.userdir import throwaway_user_resources  # noqa: E402

throwaway_user_resources("sinew-bench-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402

from bench import step_frames  # noqa: E402
from bench.springs_blender import _edges, _world  # noqa: E402
from core.springs import count_crossings  # noqa: E402

PRESET = "COTTON"


def _install() -> None:
    from bench import install_addon

    install_addon()


def _planes(ob) -> tuple[np.ndarray, np.ndarray]:
    """Face centres and outward unit normals ``(f, 3)`` of ``ob``'s evaluated mesh, world space."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    nrm = np.empty(3 * len(me.polygons))
    cen = np.empty(3 * len(me.polygons))
    me.polygons.foreach_get("normal", nrm)
    me.polygons.foreach_get("center", cen)
    m = np.array([list(r) for r in ev.matrix_world])
    ev.to_mesh_clear()
    cen = cen.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
    nrm = nrm.reshape(-1, 3) @ np.linalg.inv(m[:3, :3])
    return cen, nrm / np.linalg.norm(nrm, axis=1)[:, None]


def _inside_convex(points: np.ndarray, planes: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """True for points strictly inside the convex polyhedron given by its face planes."""
    cen, nrm = planes
    out = np.full(len(points), -np.inf)
    for start in range(0, len(points), 4096):  # chunks bound the (k, f) temporary
        p = points[start:start + 4096]
        out[start:start + 4096] = np.max(np.einsum("kfi,fi->kf", p[:, None, :] - cen[None], nrm), axis=1)
    return out < 0


def _stretch(x: np.ndarray, edges: np.ndarray, rest: np.ndarray) -> float:
    return float(np.max(np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1) / rest - 1.0))


def _cuts(collider):
    """A function of the cloth's world positions ``x`` that counts ``collider``'s mesh edges
    (its evaluated mesh at the current frame, world space) passing through a triangle of the
    cloth: a collider's edge or corner cutting through the cloth between its vertices, which
    counting the cloth's vertices inside does not see."""
    e = _edges(collider.data)  # the evaluated mesh keeps the object's edges (deformed, not remeshed)

    def count(x: np.ndarray, tris: np.ndarray) -> int:
        co = _world(collider)
        A, B, C = x[tris[:, 0]], x[tris[:, 1]], x[tris[:, 2]]
        lo, hi = np.minimum(np.minimum(A, B), C), np.maximum(np.maximum(A, B), C)
        cut = np.zeros(len(e), bool)
        for start in range(0, len(e), 64):  # chunks bound the (edges, triangles) temporaries
            p0, p1 = co[e[start:start + 64, 0], None], co[e[start:start + 64, 1], None]
            box_lo = np.minimum(p0, p1).min(axis=(0, 1))
            box_hi = np.maximum(p0, p1).max(axis=(0, 1))
            near = np.flatnonzero(np.all(lo <= box_hi, axis=1) & np.all(hi >= box_lo, axis=1))
            if not len(near):
                continue
            a, b, c = A[near], B[near], C[near]
            n = np.cross(b - a, c - a)
            s0 = np.einsum("etk,tk->et", p0 - a[None], n)
            s1 = np.einsum("etk,tk->et", p1 - a[None], n)
            span = ((s0 < 0) & (s1 > 0)) | ((s0 > 0) & (s1 < 0))
            tt = s0 / np.where(span, s0 - s1, 1.0)
            X = p0 + tt[..., None] * (p1 - p0)
            inside = span
            for u, v in ((a, b), (b, c), (c, a)):
                inside &= np.einsum("etk,tk->et", np.cross((v - u)[None], X - u[None]), n) > 0
            cut[start:start + 64] = inside.any(axis=1)
        return int(np.count_nonzero(cut))

    return count


def _triangles(me) -> np.ndarray:
    """The mesh's faces as triangles (fans), ``(t, 3)``."""
    tris = [(p.vertices[0], p.vertices[k], p.vertices[k + 1]) for p in me.polygons
            for k in range(1, len(p.vertices) - 1)]
    return np.array(tris, dtype=np.int64).reshape(-1, 3)


def _clear() -> None:
    bpy.ops.wm.read_homefile(use_empty=True)


def _collision(ob) -> None:
    ob.modifiers.new("Collision", "COLLISION")  # default settings


def drape_scene():
    scene = bpy.context.scene
    bpy.ops.mesh.primitive_plane_add(size=6.0)
    ground = bpy.context.active_object
    _collision(ground)
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0, 0, 0.5))
    ball = bpy.context.active_object
    _collision(ball)
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=40, y_subdivisions=40, size=2.0, location=(0, 0, 1.2))
    cloth = bpy.context.active_object
    scene.frame_set(1)

    def inside(x):
        return int(np.count_nonzero(_inside_convex(x, _planes(ball)) | (x[:, 2] < 0.0)))

    return cloth, inside, None, _cuts(ball)


def skirt_scene():
    scene = bpy.context.scene
    bpy.ops.mesh.primitive_cylinder_add(radius=0.3, depth=1.2, vertices=16, location=(0, 0, 0))
    body = bpy.context.active_object
    _collision(body)
    for f, x in ((1, 0.0), (8, 1.5), (15, 0.0)):
        body.location = (x, 0.0, 0.0)
        body.keyframe_insert("location", frame=f)
    cloth = meshes.skirt(radius=0.34, top=0.5, height=0.6, around=32, rings=12)
    cloth.parent = body
    scene.frame_set(1)
    edges = _edges(cloth.data)
    t = np.linspace(0.0, 1.0, 7)[1:-1]

    def inside(x):
        return int(np.count_nonzero(_inside_convex(x, _planes(body))))

    def edges_inside(x):
        pts = x[edges[:, 0], None] + t[None, :, None] * (x[edges[:, 1]] - x[edges[:, 0]])[:, None]
        hit = _inside_convex(pts.reshape(-1, 3), _planes(body)).reshape(len(edges), len(t))
        return int(np.count_nonzero(hit.any(axis=1)))

    return cloth, inside, edges_inside, _cuts(body)


def dress_scene():
    """A dress on an armature-deformed body, as a rigger builds it: a two-bone armature
    (hips, spine) keyed to walk 0.6 m forward, bend and twist; a closed body (1.2 m tall,
    r 0.15 at the waist, 0.21 at the hips; skinned to both bones, blended over the waist)
    with an Armature modifier and a Collision modifier at its defaults; a dress (32 × 16,
    r 0.18 at the waist, 0.24 over the hips, 0.30 at the hem: it settles onto the hips)
    with an Armature modifier on the hips bone before the cloth, pinned by its top ring
    ("pins")."""
    scene = bpy.context.scene
    rig = bpy.data.objects.new("Rig", bpy.data.armatures.new("Rig"))
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    hips = rig.data.edit_bones.new("hips")
    hips.head, hips.tail = (0, 0, 0.9), (0, 0, 1.1)
    spine = rig.data.edit_bones.new("spine")
    spine.head, spine.tail, spine.parent = (0, 0, 1.1), (0, 0, 1.5), hips
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in rig.pose.bones:
        pb.rotation_mode = "XYZ"
    keys = ((1, (0.0, 0.0, 0.0), 0.0, 0.0), (14, (0.3, 0.0, 0.0), 0.5, 0.25),
            (27, (0.6, 0.0, 0.0), -0.4, -0.2), (40, (0.6, 0.0, 0.0), 0.0, 0.0))
    for f, loc, twist, bend in keys:
        rig.pose.bones["hips"].location = loc  # bone space: x is world x, y along the bone (up)
        rig.pose.bones["hips"].rotation_euler = (0.0, twist, 0.0)
        rig.pose.bones["spine"].rotation_euler = (bend, 0.0, 0.0)
        rig.pose.bones["hips"].keyframe_insert("location", frame=f)
        rig.pose.bones["hips"].keyframe_insert("rotation_euler", frame=f)
        rig.pose.bones["spine"].keyframe_insert("rotation_euler", frame=f)
    heights = np.linspace(1.5, 0.3, 13)  # 0.1 m apart: waist at 1.1, hips at 0.8-0.9
    body = meshes.tube("Body", np.interp(heights, [0.3, 0.8, 0.9, 1.1, 1.5], [0.17, 0.21, 0.21, 0.15, 0.16]),
                      heights, 16, closed=True)
    z = np.array([v.co.z for v in body.data.vertices])
    up = np.clip((z - 1.0) / 0.2, 0.0, 1.0)  # blended over the waist
    for name, w in (("hips", 1.0 - up), ("spine", up)):
        vg = body.vertex_groups.new(name=name)
        for i, wi in enumerate(w):
            if wi > 0:
                vg.add([i], float(wi), "REPLACE")
    body.modifiers.new("Armature", "ARMATURE").object = rig
    _collision(body)
    dh = np.linspace(1.05, 0.45, 16)  # fitted over the hips (0.24 at 0.85 m), flaring to the hem
    dress = meshes.tube("Dress", np.interp(dh, [0.45, 0.85, 1.05], [0.30, 0.24, 0.18]), dh, 32,
                       closed=False)
    dress.vertex_groups.new(name="hips").add(list(range(len(dress.data.vertices))), 1.0, "REPLACE")
    dress.vertex_groups.new(name="pins").add(list(range(32)), 1.0, "REPLACE")
    dress.modifiers.new("Armature", "ARMATURE").object = rig
    bpy.context.view_layer.objects.active = dress
    scene.frame_set(1)
    edges = _edges(dress.data)
    t = np.linspace(0.0, 1.0, 4)[1:-1]

    def inside(x):
        return int(np.count_nonzero(meshes.inside(body, x)))

    def edges_inside(x):
        pts = x[edges[:, 0], None] + t[None, :, None] * (x[edges[:, 1]] - x[edges[:, 0]])[:, None]
        return int(np.count_nonzero(meshes.inside(body, pts.reshape(-1, 3)).reshape(len(edges), len(t)).any(axis=1)))

    return dress, inside, edges_inside, _cuts(body)


def tablecloth_scene(n: int):
    """A 1.6 m tablecloth of ``n × n`` faces 10 cm above a 1 m square table 0.75 m high (a
    cube with a Collision modifier at its defaults) on a ground plane (also a collider)."""

    def build():
        scene = bpy.context.scene
        bpy.ops.mesh.primitive_plane_add(size=8.0)
        _collision(bpy.context.active_object)
        bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0, 0, 0.375))
        table = bpy.context.active_object
        table.scale = (1.0, 1.0, 0.75)
        bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
        _collision(table)
        bpy.ops.mesh.primitive_grid_add(x_subdivisions=n, y_subdivisions=n, size=1.6,
                                        location=(0, 0, 0.85))
        cloth = bpy.context.active_object
        scene.frame_set(1)

        def inside(x):
            return int(np.count_nonzero(_inside_convex(x, _planes(table)) | (x[:, 2] < 0.0)))

        return cloth, inside, None, _cuts(table)

    return build


#: name → (scene builder, frames). The large tablecloths are timed over their first frames,
#: as docs/BENCHMARKS.md's growth exponent is (Blender's Cloth takes seconds per frame there).
SCENES = {"drape": (drape_scene, 120), "skirt": (skirt_scene, 40), "dress": (dress_scene, 40),
          "tablecloth 40²": (tablecloth_scene(40), 120),
          "tablecloth 100²": (tablecloth_scene(100), 8),
          "tablecloth 160²": (tablecloth_scene(160), 8),
          "tablecloth 100², self-collision": (tablecloth_scene(100), 8)}
#: Scenes left out of ``--quick``.
LARGE = ("tablecloth 100²", "tablecloth 160²", "tablecloth 100², self-collision")
#: Scenes baked with self-collision on, for both contenders (Blender's
#: ``collision_settings.use_self_collision``, Sinew's ``self_collision``, each at its default
#: distance, 0.015 m for both).
SELF = ("tablecloth 100², self-collision",)


def measure(cloth, inside, edges_inside, cuts, frames: int, crossings: bool = False) -> dict:
    """Play frames 1..frames (already baked or cached): worst penetrations (cloth vertices
    inside, cloth edges through, collider edges through the cloth), stretch and, with
    ``crossings``, the most crossing pairs of the cloth's own triangles."""
    scene = bpy.context.scene
    edges = _edges(cloth.data)
    tris = _triangles(cloth.data)
    scene.frame_set(1)
    x0 = _world(cloth)
    rest = np.linalg.norm(x0[edges[:, 0]] - x0[edges[:, 1]], axis=1)
    worst, worst_e, worst_c, worst_x, stretch = 0, 0, 0, 0, 0.0
    x = x0
    for f in range(1, frames + 1):
        scene.frame_set(f)
        x_before, x = x, _world(cloth)
        worst = max(worst, inside(x))
        if edges_inside is not None:
            worst_e = max(worst_e, edges_inside(x))
        worst_c = max(worst_c, cuts(x, tris))
        stretch = max(stretch, _stretch(x, edges, rest))
        if crossings:
            worst_x = max(worst_x, count_crossings(x, tris))
    # at rest? the fastest vertex over the last frame; where the cloth's middle ended
    speed = float(np.linalg.norm(x - x_before, axis=1).max()) * scene.render.fps
    middle = x[np.argmin(np.hypot(x[:, 0], x[:, 1]))]
    return {"vertices_inside_max": worst, "edges_through_max": worst_e if edges_inside else float("nan"),
            "collider_edges_through_max": worst_c, "max_strain": stretch, "final_max_speed_m_s": speed,
            "middle_z_end": float(middle[2]), **({"self_crossings_max": worst_x} if crossings else {})}


def _build(name: str, frames: int):
    """A fresh scene ``name`` for ``frames`` frames: ``(cloth, inside, edges_inside)``."""
    _clear()
    build, _ = SCENES[name]
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    return build()


def blender_cloth(name: str, frames: int) -> dict:
    cloth, inside, edges_inside, cuts = _build(name, frames)
    mod = cloth.modifiers.new("Cloth", "CLOTH")
    if cloth.vertex_groups.get("pins") is not None:
        mod.settings.vertex_group_mass = "pins"
    mod.collision_settings.use_self_collision = name in SELF
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, frames
    elapsed = step_frames(frames)
    row = {"scene": name, "contender": "Blender Cloth (defaults)", "frames": frames,
           "ms_per_frame": 1000 * elapsed / (frames - 1)}
    row.update(measure(cloth, inside, edges_inside, cuts, frames, name in SELF))  # the cache plays back
    return row


def sinew(name: str, frames: int) -> dict:
    cloth, inside, edges_inside, cuts = _build(name, frames)
    bpy.context.view_layer.objects.active = cloth
    s = cloth.sinew_springs
    s.enabled = True
    if cloth.vertex_groups.get("pins") is not None:
        s.pin_group = "pins"  # before the preset, which picks its solver by colliders and pins
    s.self_collision = name in SELF
    assert bpy.ops.sinew.springs_preset(preset=PRESET) == {"FINISHED"}
    row = {"scene": name, "contender": f"Sinew ({PRESET.lower()} preset, {s.solver}, {s.substeps} substep)",
           "frames": frames}
    t = time.perf_counter()
    try:
        res = bpy.ops.sinew.bake_springs(frame_start=1, frame_end=frames)
    except RuntimeError as exc:  # a failed bake is a result too: say so, keep Blender's row
        row.update(failed(exc))
        return row
    elapsed = time.perf_counter() - t
    assert res == {"FINISHED"}, res
    row.update({"ms_per_frame": 1000 * elapsed / (frames - 1),
                "reported_contacts": s.bake_contacts, "reported_penetration_m": s.bake_max_penetration,
                "unconverged_frames": s.bake_unconverged})
    row.update(measure(cloth, inside, edges_inside, cuts, frames, name in SELF))
    return row


def failed(exc: Exception) -> dict:
    """The row of a bake that failed: no figures, the reason."""
    return {"ms_per_frame": float("nan"), "vertices_inside_max": float("nan"),
            "edges_through_max": float("nan"), "max_strain": float("nan"),
            "error": str(exc).strip().splitlines()[-1][:160]}


def run(quick: bool = False) -> list[dict]:
    """Each scene: Blender's Cloth then Sinew, once each; one row per contender and scene."""
    _install()
    rows = []
    for name, (_, frames) in SCENES.items():
        if quick and name in LARGE:
            continue
        if quick:
            frames = min(frames, 12)
        b = blender_cloth(name, frames)
        s = sinew(name, frames)
        b["time_ratio"] = 1.0
        s["time_ratio"] = s["ms_per_frame"] / b["ms_per_frame"]
        b["vertices"] = s["vertices"] = _vertex_count()
        rows += [b, s]
    _clear()
    return rows


def _vertex_count() -> int:
    ob = bpy.context.view_layer.objects.active
    return len(ob.data.vertices) if ob is not None and ob.type == "MESH" else 0


def growth(rows: list[dict], small: str = "tablecloth 40²", large: str = "tablecloth 160²") -> dict:
    """Per contender, the exponent p of time per frame ∝ vertices^p from ``small`` to
    ``large`` (nan when either is missing)."""
    out = {}
    for who in ("Blender", "Sinew"):
        pick = {r["scene"]: r for r in rows if r["contender"].startswith(who)}
        if small in pick and large in pick and pick[small].get("ms_per_frame") and pick[large].get("ms_per_frame"):
            a, b = pick[small], pick[large]
            out[who] = float(np.log(b["ms_per_frame"] / a["ms_per_frame"]) / np.log(b["vertices"] / a["vertices"]))
        else:
            out[who] = float("nan")
    return out


def goals(rows: list[dict]) -> list[str]:
    """Headline lines for tools/bench.py: the issue-15 goals against this run's figures."""
    out = []
    for r in rows:
        if r["contender"].startswith("Sinew") and r.get("error"):
            out.append(f"contact {r['scene']}: the Sinew bake FAILED ({r['error']}): goals NOT met")
        elif r["contender"].startswith("Sinew"):
            ok_t = "met" if r["time_ratio"] <= 0.5 else "NOT met"
            through = int(np.nan_to_num(r.get("edges_through_max", 0) or 0))
            cut = int(r.get("collider_edges_through_max", 0) or 0)
            crossed = int(r.get("self_crossings_max", 0) or 0)
            ok_p = ("met" if r["vertices_inside_max"] == 0 and through == 0 and cut == 0 and crossed == 0
                    else "NOT met")
            out.append(f"contact {r['scene']}: {r['time_ratio']:.2f}× Blender Cloth's time (goal ≤ 0.5×: {ok_t}); "
                       f"{r['vertices_inside_max']} vertices inside a collider, {through} cloth edges "
                       f"through it, {cut} of its edges through the cloth"
                       + (f", {crossed} self-crossings" if "self_crossings_max" in r else "")
                       + f" at worst (goal 0: {ok_p}); "
                       f"max strain {100 * r['max_strain']:.1f}%; {r.get('unconverged_frames', 0)} of "
                       f"{r['frames'] - 1} frames not converged")
    g = growth(rows)
    if not np.isnan(g["Sinew"]):
        ok = "met" if g["Sinew"] <= g["Blender"] + 0.02 else "NOT met"
        out.append(f"contact growth 40² → 160² (time ∝ vertices^p): Sinew p = {g['Sinew']:.2f}, "
                   f"Blender p = {g['Blender']:.2f} (goal: no worse than Blender's: {ok})")
    return out


if __name__ == "__main__":
    from tools.bench import table

    result = run(quick="--quick" in sys.argv[1:])
    print(table(result))
    print("\n".join(goals(result)))
    sys.stdout.flush()
    os._exit(0)
