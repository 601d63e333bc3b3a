"""Spring topology: counts and rules on small meshes."""

import numpy as np
import pytest

from core.errors import TopologyError
from core.springs import build_springs
from core.springs.shapes import grid, rope, springs_of


def _build(mesh, **kw):
    return springs_of(mesh, **kw)


def _pairs(a):
    return {tuple(r) for r in np.asarray(a).tolist()}


def test_quad_grid_counts():
    n = 4
    ss = _build(grid(n))
    m = n + 1
    assert len(ss.structural) == 2 * m * n
    assert len(ss.shear) == 2 * n * n
    assert len(ss.bending) == 2 * m * (m - 2)  # skip-one along rows and columns
    idx = np.arange(m * m).reshape(m, m)
    # usual skip-one bending springs along grid lines
    assert (idx[0, 0], idx[0, 2]) in _pairs(ss.bending)
    assert (idx[0, 0], idx[2, 0]) in _pairs(ss.bending)
    assert (idx[0, 0], idx[1, 1]) in _pairs(ss.shear)
    assert (idx[0, 1], idx[1, 0]) in _pairs(ss.shear)
    for arr in (ss.structural, ss.shear, ss.bending):
        assert np.all(arr[:, 0] < arr[:, 1])
    allp = np.concatenate([ss.structural, ss.shear, ss.bending])
    assert len(_pairs(allp)) == len(allp)  # no duplicates across kinds


def test_two_triangles():
    # square 0-1-2-3 split along 0-2; bending spring joins the opposite corners 1, 3
    edges = np.array([[0, 1], [1, 2], [2, 0], [2, 3], [3, 0]])
    ss = build_springs(4, edges, [0, 3], [3, 3], [0, 1, 2, 0, 2, 3])
    assert len(ss.structural) == 5
    assert len(ss.shear) == 0
    assert _pairs(ss.bending) == {(1, 3)}


def test_triangle_strip_bending():
    # tetrahedron: 4 triangles, 6 edges, each edge shared by 2 faces; opposite vertices
    # of each edge pair are the other edge's ends, already structural -> no bending
    tris = np.array([[0, 2, 1], [0, 1, 3], [1, 2, 3], [0, 3, 2]])
    edges = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
    ss = build_springs(4, edges, [0, 3, 6, 9], [3, 3, 3, 3], tris.reshape(-1))
    assert len(ss.structural) == 6 and len(ss.bending) == 0 and len(ss.shear) == 0


def test_ngons():
    pent = build_springs(5, np.zeros((0, 2)), [0], [5], np.arange(5))
    assert len(pent.structural) == 5
    assert len(pent.shear) == 5  # all diagonals of a pentagon
    hexa = build_springs(6, np.zeros((0, 2)), [0], [6], np.arange(6))
    assert len(hexa.shear) == 6  # short diagonals only
    assert (0, 3) not in _pairs(hexa.shear)


def test_rope_polyline_and_branch():
    r = rope(5)
    ss = _build(r)
    assert len(ss.structural) == 5
    assert _pairs(ss.bending) == {(0, 2), (1, 3), (2, 4), (3, 5)}
    # a star: centre 0 with three arms -> all pairs of arms
    star = build_springs(4, np.array([[0, 1], [0, 2], [0, 3]]), [], [], [])
    assert _pairs(star.bending) == {(1, 2), (1, 3), (2, 3)}


def test_options_and_duplicates():
    g = grid(3)
    ss = _build(g, shear=False, bending=False)
    assert len(ss.shear) == 0 and len(ss.bending) == 0
    dup = build_springs(3, np.array([[0, 1], [1, 0], [1, 1], [1, 2]]), [], [], [])
    assert _pairs(dup.structural) == {(0, 1), (1, 2)}


def test_bad_topology():
    with pytest.raises(TopologyError):
        build_springs(2, np.array([[0, 5]]), [], [], [])
    with pytest.raises(TopologyError):
        build_springs(3, np.zeros((0, 2)), [0], [2], [0, 1])
    with pytest.raises(TopologyError):
        build_springs(3, np.zeros((0, 3)), [], [], [])
