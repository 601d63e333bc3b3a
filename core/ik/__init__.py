"""Inverse kinematics for bone chains: chain model, FK, CCD / FABRIK / DLS, baking.

``SOLVERS`` maps the solver identifiers used by the add-on's enum (``'CCD'``, ``'FABRIK'``,
``'DLS'``) to solver classes with ``name``, ``label``, ``description`` and a ``solve``
static method sharing one signature::

    solve(chain, target (3,), initial (n, 4), settings, pole=None, root=None) -> SolveResult

``DEFAULT_SOLVER`` is the one new chains should use (damped least squares: natural poses,
spread bends, limits, stiffness and orientation goals in one solve). Every solver poses a
chain as a function of its goals, from the rest pose (:mod:`.base`); chains that share bones
are solved together by :mod:`.group`.
"""

from __future__ import annotations

from .bake import BakeProgress, BakeResult, bake_chain, iter_bake
from .base import SolveResult, SolveSettings
from .ccd import CCD
from .chain import Chain, RootTransform, forward_kinematics, forward_kinematics_batch, forward_kinematics_full
from .dls import DLS
from .fabrik import FABRIK
from .limits import JointLimits, clamp, within
from .targets import expression_targets, resample_polyline

SOLVERS = {"CCD": CCD, "FABRIK": FABRIK, "DLS": DLS}
DEFAULT_SOLVER = "DLS"

__all__ = [
    "SOLVERS", "DEFAULT_SOLVER", "CCD", "FABRIK", "DLS", "Chain", "RootTransform", "JointLimits", "SolveSettings",
    "SolveResult", "forward_kinematics", "forward_kinematics_full", "forward_kinematics_batch",
    "clamp", "within", "bake_chain", "iter_bake", "BakeResult", "BakeProgress",
    "resample_polyline", "expression_targets",
]
