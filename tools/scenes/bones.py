"""Blender armatures built for tests, benchmarks and the demo (see :mod:`tools.scenes`)."""

from __future__ import annotations


def straight_chain(name: str, bones: int, length: float, *, bone_name: str = "B{i}",
                   direction=(0.0, 0.0, 1.0), location=(0.0, 0.0, 0.0), rotation_mode: str | None = None,
                   select: bool = False):
    """An armature (object and data both ``name``) holding one straight chain: ``bones`` bones
    of ``length`` m each, the first from the armature's origin, along ``direction``, each
    connected to the one before; bone ``i`` is named ``bone_name.format(i=i, name=name)``.
    Placed at ``location``, linked to the scene's collection, active (and selected with
    ``select``), in object mode; every pose bone gets ``rotation_mode`` if given."""
    import bpy
    from mathutils import Vector

    data = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(ob)
    ob.location = location
    bpy.context.view_layer.objects.active = ob
    if select:
        ob.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    d = Vector(direction).normalized()
    parent = None
    for i in range(bones):
        eb = data.edit_bones.new(bone_name.format(i=i, name=name))
        eb.head = d * (i * length)
        eb.tail = d * ((i + 1) * length)
        if parent is not None:
            eb.parent, eb.use_connect = parent, True
        parent = eb
    bpy.ops.object.mode_set(mode="OBJECT")
    if rotation_mode is not None:
        for pb in ob.pose.bones:
            pb.rotation_mode = rotation_mode
    return ob
