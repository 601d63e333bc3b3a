"""The second-round features the demo shot is written for, and which of them are switched on.

The shot (``shot.py``) is built for the add-on as it will be once the second-round branches are
merged: bone targets and poles (rig), contact with Collision modifiers (contact), self-collision
(selfcol), resolution-independent materials and presets (material), force fields (fields) and
natural IK poses (ik). Each element's use of them lives in ONE place (``configure_ik_chains``,
``configure_springs``) and is switched by :data:`FEATURES` below, never by probing the add-on:
a feature that is on but missing from the installed add-on is an error, and a feature that is
off although the add-on has it is reported on every run (``report_features``), so nothing
changes behind the lead's back.

After merging a branch: set its entry to True (or try it first with ``--feature NAME``), run
``python3 build.py demo``, look at the pictures, then move the checks it enables out of
``checks.PENDING_CHECKS``.

Trial merges of the branches as they stood at 16:45 UTC on 22 Nov (throw-away branches, quick
demo, bpy 5.2), so the lead knows what to expect:

* rig + ik + contact together: merge conflict only in ``tools/demo.py`` (modify/delete: the
  package replaced it; rig's ``read_report`` change is not needed here) -> delete it. Legs on
  bone targets and poles, arm to ``hand.L`` with ``use_rotation``: tips within 9e-6 m. The
  ik branch's FABRIK needs up to 100+ iterations at the word's corners (lab arm now 400).
* contact: the cape stays 15 mm off the body and the drape stays on the ball, but each bake
  takes ~13 s per 48 frames (10× today): the full demo then runs well over 3 minutes; the
  drape still moves 0.4 m/s at frame 48, so "drape at rest" may stay pending in ``--quick``.
* material: conflict in ``tools/demo.py`` only (delete). Presets: cape 4.6 %, flag 0.5 %,
  drape 36.8 % (with today's contact). The FLAG preset stays straight out with no wind.
* fields: the flag ends 0.6 m downwind of its windless twin -> delete "flag moved by the wind"
  from ``PENDING_CHECKS``.
* selfcol: works; the cape does not fold in this shot (0 crossings with or without it).
* material + fields and contact + fields conflict in ``core/springs`` (not the demo's).
"""

from __future__ import annotations

#: Feature name -> switched on. Names are the branches that deliver them.
FEATURES: dict[str, bool] = {
    "rig": True,        # issue 14: target_bone / pole_bone / pole_angle / use_rotation / rotation_weight
    "contact": True,    # issue 15: colliders marked by a Collision modifier (today's bake crashes on one)
    "selfcol": True,    # issue 15: self_collision / self_distance on the cape
    "material": True,   # issue 16: mass_mode / density / stiffness_mode / max_stretch / presets / pre_roll
    "fields": True,     # issue 16: use_force_fields / field_weight (the flag's Wind field acts)
    "ik": True,         # issue 13: natural poses; the legs and arm use the default solver
}

#: What each feature needs from the add-on: (owner, property names). ``owner`` is ``"ik"``
#: (``PoseBone.sinew_ik``) or ``"springs"`` (``Object.sinew_springs``).
NEEDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rig": ("ik", ("target_bone", "pole_bone", "pole_angle", "use_rotation", "rotation_weight")),
    "contact": ("springs", ()),
    "selfcol": ("springs", ("self_collision", "self_distance")),
    "material": ("springs", ("mass_mode", "density", "stiffness_mode", "max_stretch", "pre_roll")),
    "fields": ("springs", ("use_force_fields", "field_weight")),
    "ik": ("ik", ()),
}


def on(name: str) -> bool:
    """True if feature ``name`` is switched on."""
    return FEATURES[name]


def _group_properties(owner: str) -> set[str]:
    import bpy

    rna = bpy.types.PoseBone if owner == "ik" else bpy.types.Object
    prop = "sinew_ik" if owner == "ik" else "sinew_springs"
    return {p.identifier for p in rna.bl_rna.properties[prop].fixed_type.bl_rna.properties}


def report_features() -> list[str]:
    """Lines saying which features are on, and any that are off although the add-on has them.

    Raises
    ------
    SystemExit
        A feature is on but the installed add-on lacks one of its properties.
    """
    lines = []
    for name, enabled in FEATURES.items():
        owner, props = NEEDS[name]
        have = _group_properties(owner)
        missing = [p for p in props if p not in have]
        if enabled and missing:
            raise SystemExit(f"demo: feature '{name}' is switched on but the add-on has no "
                             f"{', '.join(missing)} (merge the {name} branch first)")
        if enabled:
            lines.append(f"feature {name}: on")
        elif props and not missing:
            lines.append(f"feature {name}: OFF although the add-on has {', '.join(props)}: "
                         f"switch it on in tools/demo/features.py")
        else:
            lines.append(f"feature {name}: off")
    return lines
