"""``object.sinew_springs``: the settings of CONTRACT.md ("Spring meshes") and the bake state.

The solver enum is fed by ``core.springs.INTEGRATORS`` (name, label, description). Without
scipy that table cannot be imported, so the same five names come from a fallback list; the
panel then says scipy is missing and the bake refuses to run.
"""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty, StringProperty

from .. import deps

_FALLBACK_SOLVERS = (
    ("EXPLICIT", "Explicit Euler", "Forward Euler"),
    ("SYMPLECTIC", "Symplectic Euler", "Semi-implicit Euler"),
    ("IMPLICIT", "Linearised implicit Euler", "One linearised backward-Euler step (Baraff & Witkin 1998)"),
    ("NEWTON", "Newton implicit Euler", "Implicit Euler solved by Newton with a line search"),
    ("FAST", "Fast mass-spring (Liu 2013)", "Liu et al. 2013 local/global solver"),
)


def solver_items() -> list[tuple[str, str, str]]:
    """Enum items ``(name, label, description)`` in the order of ``core.springs.INTEGRATORS``."""
    if deps.scipy_problem() is None:
        try:
            from ..core.springs import INTEGRATORS
        except ImportError:
            pass
        else:
            return [(name, cls.label or name.title(), cls.description or cls.label)
                    for name, cls in INTEGRATORS.items()]
    return list(_FALLBACK_SOLVERS)


# Enum items must stay referenced while registered (Blender keeps pointers to the strings).
_SOLVER_ITEMS = solver_items()

OUTPUT_ITEMS = (
    ("KEYFRAMES", "Keyframes", "One shape key per frame, keyed on and off: stored in the .blend"),
    ("CACHE", "Cache (PC2)", "A PC2 file in //sinew_cache/ next to the saved .blend, read by a Mesh "
     "Cache modifier"),
)


class SINEW_PG_springs(bpy.types.PropertyGroup):
    """Mass-spring settings of one mesh object, and the state of its bake."""

    enabled: BoolProperty(name="Sinew Springs", description="Simulate this mesh as a mass-spring system",
                          default=False)
    solver: EnumProperty(name="Solver", items=_SOLVER_ITEMS, default="FAST",
                         description="Time integrator")
    vertex_mass: FloatProperty(name="Vertex Mass", description="Mass of each vertex (kg)",
                               default=0.3, min=1e-6, soft_max=10.0, precision=3, unit="MASS")
    stiffness: FloatProperty(name="Stiffness", description="Structural springs along mesh edges (N/m)",
                             default=1000.0, min=0.0, soft_max=1e6)
    shear_stiffness: FloatProperty(name="Shear", description="Face-diagonal springs (N/m); 0 = none",
                                   default=100.0, min=0.0, soft_max=1e6)
    bending_stiffness: FloatProperty(name="Bending", description="Skip-one springs (N/m); 0 = none",
                                     default=10.0, min=0.0, soft_max=1e6)
    damping: FloatProperty(name="Damping", description="Damping along each spring (N·s/m)",
                           default=1.0, min=0.0, soft_max=1000.0)
    air_drag: FloatProperty(name="Air Drag", description="Drag on each vertex's velocity (1/s)",
                            default=0.1, min=0.0, soft_max=10.0)
    pin_group: StringProperty(name="Pin Group",
                              description="Vertex group: vertices with weight > 0 follow the "
                                          "object's animated, deformed mesh")
    substeps: IntProperty(name="Substeps", description="Time steps per frame", default=1, min=1,
                          soft_max=50, max=1000)
    iterations: IntProperty(name="Iterations", description="Newton or local/global iterations per step",
                            default=10, min=1, soft_max=100, max=1000)
    collision_collection: PointerProperty(name="Collision Collection", type=bpy.types.Collection,
                                          description="Mesh objects in this collection are colliders")
    output: EnumProperty(name="Output", items=OUTPUT_ITEMS, default="KEYFRAMES",
                         description="Where the baked motion is stored")

    # -- self-collision (core/springs/selfcollision.py) ----------------------------------
    self_collision: BoolProperty(name="Self Collision",
                                 description="The mesh collides with itself: its non-neighbouring "
                                             "parts never pass through each other",
                                 default=False)
    self_distance: FloatProperty(name="Self Distance",
                                 description="Smallest distance kept between non-neighbouring "
                                             "parts of the mesh (m)",
                                 default=0.015, min=0.001, soft_max=0.1, precision=3, unit="LENGTH")

    # -- bake state (written by the bake, read by the panel and by free) ---------------
    baked: BoolProperty(name="Baked", default=False, options={"HIDDEN"})
    bake_frame_start: IntProperty(name="Baked From", default=0, options={"HIDDEN"})
    bake_frame_end: IntProperty(name="Baked To", default=0, options={"HIDDEN"})
    bake_time: FloatProperty(name="Bake Time", description="Seconds", default=0.0, options={"HIDDEN"})
    bake_iterations: FloatProperty(name="Iterations per Frame", default=0.0, options={"HIDDEN"})
    bake_max_strain: FloatProperty(name="Max Strain", default=0.0, options={"HIDDEN"})
    bake_contacts: IntProperty(name="Collider Contacts", description="Vertex contacts with colliders, "
                               "summed over the bake's substeps", default=0, options={"HIDDEN"})
    bake_max_penetration: FloatProperty(name="Max Penetration", description="Deepest a vertex "
                                        "ended inside a collider in any substep (m; 0 is the goal)",
                                        default=0.0, options={"HIDDEN"}, unit="LENGTH")
    bake_output: StringProperty(name="Baked Output", default="", options={"HIDDEN"})
    # What free_bake needs to restore the object exactly: a JSON document (see write.py).
    bake_record: StringProperty(name="Bake Record", default="", options={"HIDDEN"})


classes = (SINEW_PG_springs,)
