"""Sinew: bake IK chains, spring bones and mass-spring meshes to keyframes.

All maths lives in ``core`` (numpy/scipy, no bpy), shipped inside this package. The
modules here only read scenes, call ``core`` and write results back. Registration goes
through one ordered list of modules, each with ``register()``/``unregister()``;
unregistering runs the list in reverse.
"""

bl_info = {
    "name": "Sinew",
    "author": "Sinew developers",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "Properties > Bone / Physics, 3D Viewport > Sidebar > Sinew",
    "description": "Bake IK chains (CCD, FABRIK, DLS), spring bones and mass-spring cloth, flags and ropes to keyframes",
    "category": "Animation",
    "doc_url": "",
    "tracker_url": "",
}

import importlib

# Feature modules in registration order (property groups before the panels using them).
_MODULE_NAMES = ("preferences", "bakejob", "ik", "springbones", "springs")


def _modules():
    return [importlib.import_module(f".{name}", __package__) for name in _MODULE_NAMES]


def register() -> None:
    done = []
    try:
        for module in _modules():
            module.register()
            done.append(module)
    except Exception:
        for module in reversed(done):
            module.unregister()
        raise


def unregister() -> None:
    for module in reversed(_modules()):
        module.unregister()
