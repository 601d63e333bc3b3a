"""Pictures of the shot: the contact sheet, the animated strip (GIF) and the per-bake figures.

Frames are rendered with Workbench (EEVEE takes minutes per frame headless); the lab's
writing arms are rendered through their own camera and pasted into the top-right corner of
each frame as an inset.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np


def _render(scene, camera, width: int, height: int, path: Path) -> np.ndarray:
    import bpy
    from PIL import Image

    scene.camera = camera
    scene.render.resolution_x, scene.render.resolution_y = width, height
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
    scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True)
    return np.asarray(Image.open(path).convert("RGB"))


def render_frame(frame: int, size: tuple[int, int], tmp: Path, inset: bool = True) -> np.ndarray:
    """One frame of the shot (RGB uint8, (h, w, 3)) with the lab inset in its top-right corner."""
    import bpy

    scene = bpy.context.scene
    main, lab = bpy.data.objects["Camera"], bpy.data.objects["LabCamera"]
    scene.frame_set(frame)
    w, h = size
    img = _render(scene, main, w, h, tmp / f"shot_{frame:04d}_{w}.png").copy()
    if inset:
        iw, ih = w // 3, h // 3
        small = _render(scene, lab, iw, ih, tmp / f"lab_{frame:04d}_{w}.png")
        x0 = w - iw - 4
        img[4:4 + ih, x0:x0 + iw] = small
        img[4:5 + ih, x0 - 1] = img[4 + ih, x0 - 1:x0 + iw] = 40
    scene.camera = main
    return img


def contact_sheet(out: Path, frames: int) -> Path:
    """Six frames of the shot, 3 × 2, at 640 × 360: ``out/demo_frames.png``."""
    from PIL import Image

    picks = sorted({1, *(int(round(1 + (frames - 1) * k / 5)) for k in range(1, 6))})
    with tempfile.TemporaryDirectory(prefix="sinew-demo-") as tmp:
        tiles = [render_frame(f, (640, 360), Path(tmp)) for f in picks]
    while len(tiles) % 3:
        tiles.append(np.full_like(tiles[0], 255))
    sheet = np.concatenate([np.concatenate(tiles[i:i + 3], axis=1) for i in range(0, len(tiles), 3)], axis=0)
    path = out / "demo_frames.png"
    Image.fromarray(sheet).save(path)
    return path


def animation(out: Path, frames: int, step: int) -> Path:
    """Every ``step``-th frame at 400 × 225 as a looping GIF at the scene's speed: ``out/demo.gif``."""
    import bpy
    from PIL import Image

    with tempfile.TemporaryDirectory(prefix="sinew-demo-gif-") as tmp:
        images = [Image.fromarray(render_frame(f, (400, 225), Path(tmp))) for f in range(1, frames + 1, step)]
    path = out / "demo.gif"
    fps = bpy.context.scene.render.fps
    images[0].save(path, save_all=True, append_images=images[1:], loop=0, duration=int(1000 * step / fps),
                   optimize=True)
    return path


def plot_shot(out: Path, m: dict[str, np.ndarray], pending: dict[str, str]) -> Path:
    """Per-frame figures of the saved shot (tips, contact, stretch, the flag): ``out/demo_shot.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    frames = np.arange(1, len(m["cape clearance"]) + 1)
    ax = axes[0, 0]
    for k in (k for k in m if k.startswith("tip ")):
        ax.semilogy(frames, np.maximum(m[k], 1e-9), label=k[4:])
    ax.set_ylabel("tip to target (m)")
    ax.set_title("IK: tips on their control bones / the lantern")
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    ax.plot(frames, 1000 * m["cape clearance"], label="cape to the body")
    ax.plot(frames, 1000 * m["drape clearance"], label="drape to the ball and floor")
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_ylabel("closest vertex (mm, < 0 inside)")
    ax.set_title("Contact: clearance per frame")
    ax.legend(fontsize=8)
    ax = axes[1, 0]
    for name in ("Cape", "Flag", "Drape"):
        ax.plot(frames, 100 * m[f"strain {name}"], label=name)
    ax.set_ylabel("largest edge stretch (%)")
    ax.set_xlabel("frame")
    ax.set_title("Cloth: stretch per frame")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    ax.plot(frames, m["flag reach"], label="flag: free edge downwind of the pole (m)")
    ax.plot(frames, m["calm reach"], label="its windless twin: the same (m)")
    ax.plot(frames, m["drape speed"], label="drape: fastest vertex (m/s)")
    if "tail x" in m:
        from .checks import tail_swing

        ax.plot(frames, np.radians(tail_swing(m)[0]), label="tail: tip off its mean direction from the hips (rad)")
    ax.set_xlabel("frame")
    ax.set_title("Wind, rest and the tail's swing")
    ax.legend(fontsize=8)
    if pending:
        fig.text(0.5, 0.005, "Pending: " + "; ".join(sorted(pending)), ha="center", fontsize=7,
                 wrap=True)
    fig.suptitle("The demo shot as Blender plays it back (add-on disabled)")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    path = out / "demo_shot.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
