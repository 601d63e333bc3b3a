"""Mass-spring simulation: topology, model/state, five integrators, colliders.

Pipeline (see ``docs/ARCHITECTURE.md``): :func:`build_springs` (mesh
topology → springs) → :func:`build_model` (immutable :class:`Model`) →
an integrator from :data:`INTEGRATORS` stepping a :class:`State` →
:class:`Simulator` / :func:`simulate` for frames, pins, colliders and
divergence detection.

Integrators (all share ``step(model, state, h, *, pins, iterations, colliders)``):

``EXPLICIT``   forward Euler;
``SYMPLECTIC`` semi-implicit Euler;
``IMPLICIT``   one linearised backward-Euler step (Baraff & Witkin 1998);
``NEWTON``     implicit Euler as minimisation, Newton + Armijo line search;
``FAST``       Liu et al. 2013 local/global (+ Anderson 1965 / Peng 2018 or Wang 2015 Chebyshev acceleration);
``VBD``        Vertex Block Descent (Chen et al. 2024) with contact, friction and the strain limit
               inside the solve, on compiled kernels (:mod:`core.kernels`).

Force fields (:mod:`.fields`): Blender's Wind, Force, Vortex, Turbulence and Drag
evaluated on plain arrays, fed to the integrators as ``external`` forces.

:class:`SelfCollision` (``selfcollision.py``) keeps the mesh from passing through itself
after every step.
"""

from __future__ import annotations

from .base import Integrator, StepInfo
from .colliders import Plane, Sphere, TriangleMesh, resolve
from .explicit import ExplicitEuler
from .fast import LocalGlobal
from .fields import FIELD_TYPES, FieldForces, ForceField
from .implicit import LinearImplicitEuler
from .model import Model, State, build_model, lumped_masses
from .newton import NewtonImplicitEuler
from .selfcollision import SelfCollision, count_crossings
from .simulate import FrameDiagnostics, Simulator, simulate
from .symplectic import SymplecticEuler
from .topology import SpringSet, build_springs
from .vbd import VertexBlockDescent

#: Integrator name → class; keys are the CONTRACT.md ``solver`` enum values, in UI order.
INTEGRATORS: dict[str, type[Integrator]] = {
    cls.name: cls
    for cls in (ExplicitEuler, SymplecticEuler, LinearImplicitEuler, NewtonImplicitEuler,
                LocalGlobal, VertexBlockDescent)
}

__all__ = [
    "INTEGRATORS", "Integrator", "StepInfo", "ExplicitEuler", "SymplecticEuler",
    "LinearImplicitEuler", "NewtonImplicitEuler", "LocalGlobal", "VertexBlockDescent", "Model", "State",
    "build_model", "lumped_masses", "SpringSet", "build_springs", "Plane", "Sphere",
    "TriangleMesh", "resolve", "FrameDiagnostics", "Simulator", "simulate", "SelfCollision",
    "count_crossings", "FIELD_TYPES", "FieldForces", "ForceField",
]
