"""DLS: damped least squares (Nakamura & Hanafusa 1986; Wampler 1986), the default solver.

Every problem starts from the canonical start (:mod:`.base`: the rest pose, pole-turned) and is
solved by the damped-least-squares engine on the chain's swing-twist joint coordinates
(:func:`.least_squares.solve_chain`; the iteration, its damping, limits, stiffness weights,
orientation rows and the null-space pull toward rest are described there), so the pose is a
function of the goals.
"""

from __future__ import annotations

from .base import Solver
from .least_squares import solve_chain

__all__ = ["DLS", "solve", "kernel"]

#: DLS on one chain for a batch of problems (:data:`.base.Kernel`).
kernel = solve_chain


class DLS(Solver):
    """Damped least squares (Nakamura & Hanafusa 1986; Wampler 1986) from the rest pose."""

    name = "DLS"
    label = "Damped Least Squares"
    description = ("Damped least squares from the rest pose: spreads the bend over all joints like "
                   "Blender's IK, respects stiffness, limits and orientation goals")
    kernel = staticmethod(kernel)
    block = 2048


#: Solve one pose with DLS; see :meth:`.base.Solver.solve`.
solve = DLS.solve
