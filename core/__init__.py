"""Sinew's solver library: inverse kinematics and mass-spring simulation.

Plain numpy + scipy. This package never imports ``bpy``, ``mathutils`` or ``bmesh``
(a test proves it), and every import inside it is relative, so the same files work
as the top-level package ``core`` and as ``<addon>.core`` inside the Blender add-on.

Subpackages
-----------
``ik``       chains, forward kinematics, CCD / FABRIK / DLS solvers, frame-range baking.
``springs``  topology, model/state, five integrators, colliders, diagnostics.
``expr``     the safe expression language used for IK targets (never ``eval``).
"""

from .errors import SinewError

__all__ = ["SinewError"]
