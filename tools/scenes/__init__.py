"""Scene builders shared by the tests, the bench, the demo and the tools, one of each.

- :mod:`.meshes`: Blender mesh objects (cloth sheets, strips, colliders);
- :mod:`.bones`: Blender armatures (bone chains).

They import ``bpy`` when called, so the modules import anywhere. Plain numpy shapes for
``core`` (grids, ropes, boxes, spheres as arrays) are ``core/springs/shapes.py``.
"""
