"""``object.sinew_springs``: the settings of CONTRACT.md ("Spring meshes") and the bake state.

The solver enum is fed by ``core.springs.INTEGRATORS`` (name, label, description). Without
scipy that table cannot be imported, so the same six names come from a fallback list; the
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
    ("VBD", "Vertex Block Descent", "Vertex Block Descent (Chen et al. 2024) with contact inside "
     "the solve"),
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

MASS_MODE_ITEMS = (
    ("VERTEX", "Per Vertex", "Vertex Mass is the mass of each vertex: a finer mesh is heavier"),
    ("DENSITY", "Density", "Density (kg/m²) spread over the vertices by triangle area: the same "
     "cloth weighs the same at any resolution"),
)
STIFFNESS_MODE_ITEMS = (
    ("SPRING", "Per Spring", "The stiffness fields are N/m per spring: a finer mesh is a different "
     "cloth"),
    ("MATERIAL", "Material", "The stiffness fields describe the cloth (N per metre of width per unit "
     "strain), scaled per spring by its rest length and the area it spans: the same cloth at any "
     "resolution"),
)

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
    vertex_mass: FloatProperty(name="Vertex Mass", description="Mass of each vertex (kg), "
                               "Per Vertex mass mode", default=0.3, min=1e-6, soft_max=10.0,
                               precision=3, unit="MASS")
    stiffness: FloatProperty(name="Stiffness", description="Structural springs along mesh edges: N/m "
                             "per spring, or in Material mode the cloth's stretch modulus (N per metre "
                             "of width per unit strain; on edges without faces N per unit strain)",
                             default=2000.0, min=0.0, soft_max=1e6)
    shear_stiffness: FloatProperty(name="Shear", description="Face-diagonal springs (N/m per spring, "
                                   "or the shear modulus in Material mode); 0 = none",
                                   default=200.0, min=0.0, soft_max=1e6)
    bending_stiffness: FloatProperty(name="Bending", description="Skip-one springs (N/m per spring, "
                                     "or fold resistance in Material mode); 0 = none",
                                     default=2.0, min=0.0, soft_max=1e6)
    damping: FloatProperty(name="Damping", description="Damping along each spring (N·s/m; scaled "
                           "like the stiffness in Material mode)", default=1.0, min=0.0, soft_max=1000.0)
    air_drag: FloatProperty(name="Air Drag", description="Drag on each vertex's velocity (1/s)",
                            default=0.1, min=0.0, soft_max=10.0)
    pin_group: StringProperty(name="Pin Group",
                              description="Vertex group: vertices with weight > 0 follow the "
                                          "object's animated, deformed mesh")
    substeps: IntProperty(name="Substeps", description="Time steps per frame (Explicit and Symplectic "
                          "take more when their stability needs it, or say how many they need)",
                          default=1, min=1, soft_max=50, max=1000)
    iterations: IntProperty(name="Iterations", description="Newton or local/global iterations per step, "
                            "at most: Fast stops when the step has converged",
                            default=10, min=1, soft_max=100, max=1000)
    tolerance: FloatProperty(name="Tolerance", description="Relative residual at which the implicit "
                             "solvers (Implicit, Newton, Fast, VBD) stop: a step has converged when "
                             "its force imbalance is at most this fraction of the one it started "
                             "from (or of the cloth's weight); 1e-9 solves implicit Euler to "
                             "convergence", default=0.01, min=1e-12, max=0.5, soft_min=1e-9,
                             precision=4)
    collision_collection: PointerProperty(name="Collision Collection", type=bpy.types.Collection,
                                          description="Mesh objects in this collection are colliders")
    output: EnumProperty(name="Output", items=OUTPUT_ITEMS, default="KEYFRAMES",
                         description="Where the baked motion is stored")

    # -- material model, strain limit, soft pins, pre-roll (issue 16) --------------------
    mass_mode: EnumProperty(name="Mass", items=MASS_MODE_ITEMS, default="DENSITY",
                            description="How the mesh's mass is given")
    density: FloatProperty(name="Density", description="Mass per square metre of the rest surface "
                           "(kg/m²; on edges without faces kg per metre)", default=0.15, min=1e-6,
                           soft_max=5.0, precision=3)
    stiffness_mode: EnumProperty(name="Stiffness", items=STIFFNESS_MODE_ITEMS, default="MATERIAL",
                                 description="What the stiffness fields mean")
    max_stretch: FloatProperty(name="Max Stretch", description="Strain limit: no mesh edge ends a step "
                               "longer than (1 + this) × its rest length; 0 = off", default=0.03,
                               min=0.0, soft_max=1.0, precision=3, subtype="FACTOR")
    pin_stiffness: FloatProperty(name="Pin Stiffness", description="A pinned vertex is pulled to its "
                                 "target by this × its pin weight (N/m) instead of being fixed; "
                                 "0 = hard pins", default=0.0, min=0.0, soft_max=1e5)
    pre_roll: IntProperty(name="Pre-roll", description="Frames simulated before the start frame (pins "
                          "and colliders held as at the start) so the bake starts settled; not "
                          "written", default=0, min=0, soft_max=250, max=100000)

    # -- self-collision (core/springs/selfcollision.py) ----------------------------------
    self_collision: BoolProperty(name="Self Collision",
                                 description="The mesh collides with itself: its non-neighbouring "
                                             "parts never pass through each other",
                                 default=False)
    self_distance: FloatProperty(name="Self Distance",
                                 description="Smallest distance kept between non-neighbouring "
                                             "parts of the mesh (m)",
                                 default=0.015, min=0.001, soft_max=0.1, precision=3, unit="LENGTH")

    # -- force fields (fields.py) ----------------------------------------------------------
    use_force_fields: BoolProperty(
        name="Force Fields", default=True,
        description="Blender's force fields in the scene (Wind, Force, Turbulence, Vortex, Drag) "
                    "act on this mesh, as on Blender's Cloth")
    field_weight: FloatProperty(
        name="Field Weight", default=1.0, min=-100.0, max=100.0, soft_min=0.0, soft_max=2.0,
        description="Scale of all force fields on this mesh (1 = as the fields say, 0 = none)")

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
    bake_unconverged: IntProperty(name="Unconverged Frames", description="Frames whose solve (or "
                                  "strain limit) did not reach its tolerance", default=0,
                                  options={"HIDDEN"})
    bake_max_residual: FloatProperty(name="Max Residual", description="Largest force residual of "
                                     "the solve over the bake (N)", default=0.0, options={"HIDDEN"})
    bake_output: StringProperty(name="Baked Output", default="", options={"HIDDEN"})
    # What free_bake needs to restore the object exactly: a JSON document (see write.py).
    bake_record: StringProperty(name="Bake Record", default="", options={"HIDDEN"})


classes = (SINEW_PG_springs,)
