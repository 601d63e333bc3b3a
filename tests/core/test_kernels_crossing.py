"""Triangle crossings through the compiled kernel (``sinew_crossing_pairs``,
core/kernels/src/crossing.c, called by core.springs.selfcollision.crossing_pairs).

The kernel's pairs are checked against brute force: every pair of triangles that share no
vertex through the numpy reference (tests/core/crossing_reference.py), on crumpled meshes
and triangle soups with collapsed triangles, duplicate vertices, coplanar touching pairs,
triangles far larger than the rest and meshes 100 km from the origin.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import kernels
from core.errors import SinewError
from core.springs import count_crossings
from core.springs.selfcollision import crossing_pairs
from core.springs.shapes import grid, triangulate
from tests.core.crossing_reference import brute_force_pairs
from tests.core.test_kernels import FUZZ, SEEDS, P, c64, i64

FAR = np.array([1e5, -1e5, 1e5])  # 173 km from the origin, 100 km along each axis


def check(x: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """The kernel's pairs, checked against brute force and for form; returns them."""
    got = crossing_pairs(x, tris)
    assert got.dtype == np.int64 and got.shape == (len(got), 2)
    assert np.all(got[:, 0] < got[:, 1])
    want = brute_force_pairs(x, tris)
    np.testing.assert_array_equal(got, want)  # the same pairs, sorted by (i, j)
    assert count_crossings(x, tris) == len(want)
    return got


def crumpled(rng: np.random.Generator, n: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """A flat ``n × n`` quad grid, 1 m wide, its vertices moved by normal noise of ``noise`` m."""
    mesh = grid(n, 1.0, plane="XY")
    return mesh.positions + rng.normal(scale=noise, size=mesh.positions.shape), triangulate(mesh)


def soup(rng: np.random.Generator, count: int, lattice: bool) -> tuple[np.ndarray, np.ndarray]:
    """``count`` triangles in a 1 m box: free ones of many sizes (a few ten times the rest),
    collapsed ones (two or three corners at one point, three in a line, a corner repeated),
    ones on vertices of others (shared indices) or on copies of them (duplicate vertices),
    and coplanar pairs touching along an edge or at a corner or overlapping. ``lattice``:
    coordinates on a 1/8 m lattice, so that corners lie exactly on others' planes and edges."""
    x, tris = [], []

    def add(*pts) -> list[int]:
        start = sum(len(p) for p in x)
        x.append(np.asarray(pts, dtype=np.float64).reshape(-1, 3))
        return list(range(start, start + len(pts)))

    while len(tris) < count:
        kind = rng.integers(9)
        centre = rng.uniform(0.0, 1.0, 3)
        size = 0.3 * np.exp(rng.uniform(np.log(0.05), 0.0)) * (30.0 if rng.random() < 0.05 else 1.0)
        a, b, c = centre + rng.normal(scale=size, size=(3, 3))
        have = sum(len(p) for p in x)
        if kind <= 2:                                          # free
            tris.append(add(a, b, c))
        elif kind == 3:                                        # collapsed
            shape = rng.integers(4)
            if shape == 0:
                tris.append(add(a, a, b))
            elif shape == 1:
                tris.append(add(a, a, a))
            elif shape == 2:
                tris.append(add(a, b, a + rng.uniform(-1.0, 2.0) * (b - a)))
            else:
                v = add(a, b)
                tris.append([v[0], v[0], v[1]])
        elif kind == 4 and have:                               # on vertices of others
            pick = rng.integers(have, size=rng.integers(1, 3)).tolist()
            tris.append(pick + add(*[a, b, c][len(pick):]))
        elif kind == 5 and have:                               # on copies of vertices
            every = np.concatenate(x)
            copies = every[rng.integers(have, size=rng.integers(1, 4))]
            tris.append(add(*copies, *[a, b, c][len(copies):]))
        elif kind == 6:                                        # coplanar, touching along an edge
            d = a + (b - a) + (c - a) * rng.uniform(-1.5, -0.2)
            tris.append(add(a, b, c))
            tris.append(add(b, a, d))
        elif kind == 7:                                        # coplanar, touching at a corner
            u, w = rng.uniform(0.2, 1.0, 2)
            tris.append(add(a, b, c))
            tris.append(add(a, a - u * (b - a), a - w * (c - a)))
        else:                                                  # coplanar, overlapping
            u, w = rng.uniform(0.1, 0.5, 2)
            tris.append(add(a, b, c))
            tris.append(add(a + u * (b - a), b + w * (c - b), c + u * (a - c)))
    pos = np.concatenate(x) if x else np.zeros((0, 3))
    if lattice:
        pos = np.round(pos * 8.0) / 8.0
    return pos, np.asarray(tris[:count], dtype=np.int64).reshape(-1, 3)


# --------------------------------------------------------------------------- against brute force


@FUZZ
@given(seed=SEEDS, n=st.integers(1, 9), noise=st.floats(0.0, 0.4), far=st.booleans())
def test_crumpled_meshes_against_brute_force(seed, n, noise, far):
    x, tris = crumpled(np.random.default_rng(seed), n, noise)
    check(x + FAR if far else x, tris)


@FUZZ
@given(seed=SEEDS, count=st.integers(0, 70), lattice=st.booleans(), far=st.booleans())
def test_triangle_soups_against_brute_force(seed, count, lattice, far):
    x, tris = soup(np.random.default_rng(seed), count, lattice)
    check(x + FAR if far else x, tris)


@FUZZ
@given(seed=SEEDS, count=st.integers(2, 70))
def test_lattice_soups_the_same_100_km_away(seed, count):
    """On a 1/8 m lattice, 100 km is an exact shift (the differences of coordinates, and so
    every volume, are the same bits): the same pairs there as at the origin."""
    x, tris = soup(np.random.default_rng(seed), count, lattice=True)
    np.testing.assert_array_equal(check(x + FAR, tris), check(x, tris))


def test_sheets_through_each_other():
    """Three sheets standing through a flat one: the pairs along the lines they cross on."""
    flat = grid(8, 1.0, plane="XY")
    wall = grid(8, 1.0, plane="XZ")
    k = len(flat.positions)
    x = np.concatenate([flat.positions] + [wall.positions + [0.0, y, 0.47] for y in (-0.287, 0.013, 0.213)])
    tris = np.concatenate([triangulate(flat)] + [triangulate(wall) + (w + 1) * k for w in range(3)])
    got = check(x, tris)
    assert len(got) > 3 * 16
    assert np.all(got[:, 0] < 2 * 8 * 8) and np.all(got[:, 1] >= 2 * 8 * 8)  # flat × walls only


def test_more_pairs_than_triangles():
    """A mesh crumpled far more than its edge length: more crossing pairs than triangles,
    more than the wrapper first makes room for."""
    x, tris = crumpled(np.random.default_rng(3), 6, 0.4)
    assert len(check(x, tris)) > len(tris)


def test_hand_made_pairs():
    base = [(0, 0, 0), (1, 0, 0), (0, 1, 0)]
    cases = [
        ([(0.2, 0.2, -0.5), (0.3, 0.2, 0.5), (0.2, 0.4, 0.5)], 1),     # an edge through the face
        ([(0.2, 0.2, 0.5), (0.3, 0.2, 1.5), (0.2, 0.4, 1.5)], 0),      # the same, lifted clear
        ([(0.5, -0.2, -0.5), (0.5, -0.2, 0.5), (0.5, 0.3, 0)], 1),     # through an edge of it
        ([(0.5, -0.2, -0.5), (0.5, -0.2, 0.5), (0.5, -0.1, 0)], 0),    # stops short of it
        ([(0.2, 0.2, 0.0), (0.3, 0.2, 0.5), (0.2, 0.4, 0.5)], 0),      # a corner on the face
        ([(0.2, 0.2, 0.0), (0.6, 0.2, 0.0), (0.2, 0.6, 0.0)], 0),      # coplanar, inside it
        ([(1, 0, 0), (0, 1, 0), (1, 1, 0)], 0),                        # coplanar, edge to edge
        ([(0.2, 0.2, -0.5), (0.2, 0.2, 0.5), (0.2, 0.2, 0.5)], 1),     # a collapsed one through it
        ([(0.2, 0.2, 0.5), (0.2, 0.2, 0.5), (0.2, 0.2, 0.5)], 0),      # a point
    ]
    for other, expect in cases:
        x = np.array(base + other, dtype=np.float64)
        for tris in ([[0, 1, 2], [3, 4, 5]], [[3, 4, 5], [0, 1, 2]]):
            assert count_crossings(x, tris) == expect, other
            assert count_crossings(x + FAR, tris) == expect, other
            check(x, np.array(tris))
        assert count_crossings(x, [[0, 1, 2], [3, 4, 0]]) == 0  # a shared vertex: never


def test_no_crossings_on_a_flat_or_rolled_cloth():
    mesh = grid(20, 1.0, plane="XY")
    tris = triangulate(mesh)
    assert count_crossings(mesh.positions, tris) == 0
    assert count_crossings(mesh.positions + FAR, tris) == 0
    u, w = mesh.positions[:, 0] + 0.5, mesh.positions[:, 1]
    angle = 3.0 * np.pi * u                                   # a spiral roll, 1.5 turns
    radius = 0.05 + 0.02 * angle
    rolled = np.stack([radius * np.cos(angle), w, radius * np.sin(angle)], axis=1)
    assert count_crossings(rolled, tris) == 0
    assert len(brute_force_pairs(rolled, tris)) == 0


def test_fewer_than_two_triangles():
    x = np.zeros((3, 3))
    assert crossing_pairs(x, np.zeros((0, 3), np.int64)).shape == (0, 2)
    assert crossing_pairs(x, [[0, 1, 2]]).shape == (0, 2)


# --------------------------------------------------------------------------- refusals


@pytest.fixture
def no_kernels(monkeypatch):
    """Fails the test if any kernel would be called."""
    def refuse():
        raise AssertionError("the kernels were reached")
    monkeypatch.setattr(kernels, "library", refuse)


def test_wrong_input_refused_before_any_c_runs(no_kernels):
    x, tris = np.zeros((4, 3)), np.array([[0, 1, 2], [1, 2, 3]])
    nan, inf = x.copy(), x.copy()
    nan[2, 1], inf[0, 0] = np.nan, np.inf
    bad = [
        (np.zeros((4, 2)), tris),                 # positions not (n, 3)
        (np.zeros(12), tris),
        (x, np.array([[0, 1, 2, 3]])),            # triangles not (t, 3)
        (x, np.array([0, 1, 2, 1, 2, 3])),
        (nan, tris),                              # not finite
        (inf, tris),
        (x, np.array([[0, 1, 2], [1, 2, 4]])),    # a vertex out of range
        (x, np.array([[0, 1, -1], [1, 2, 3]])),
    ]
    for xx, tt in bad:
        with pytest.raises(SinewError):
            crossing_pairs(xx, tt)
        with pytest.raises(SinewError):
            count_crossings(xx, tt)


def test_kernel_refuses_bad_indices():
    lib = kernels.library()
    x = c64([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1], [1, 0, 1]])
    lo, hi = c64([[0, 0, 0], [0, 0, 0]]), c64([[1, 1, 0], [1, 1, 1]])
    stamp, pairs = np.zeros(2, np.int64), np.zeros((4, 2), np.int64)

    def call(tris=((0, 1, 2), (3, 4, 5)), offsets=(0, 1, 2), entries=(0, 1), big=(), cell=1.0, cap=4):
        t, o, e, b = i64(tris), i64(offsets), i64(entries), i64(big if big else [0])
        return lib.sinew_crossing_pairs(len(x), P(x), len(t), P(t), cell, len(o) - 1, P(o), P(e),
                                        len(big), P(b), P(lo), P(hi), P(stamp), cap, P(pairs))

    assert call() == 0
    assert call(big=(1,), offsets=(0, 1, 1), entries=(0,)) == 0
    assert call(tris=((0, 1, 2), (3, 4, 6))) == -1           # a vertex out of range
    assert call(tris=((0, 1, 2), (3, -1, 5))) == -1
    assert call(entries=(0, 2)) == -1                         # a grid entry out of range
    assert call(big=(2,)) == -1                               # a big triangle out of range
    assert call(offsets=(0, 2, 1)) == -1                      # offsets not increasing
    assert call(offsets=(1, 1, 2)) == -1                      # offsets not from 0
    assert call(cell=0.0) == -1
    assert call(cell=float("nan")) == -1
    assert call(cap=-1) == -1


def test_kernel_counts_past_its_room():
    """With less room than pairs the kernel writes what fits and returns the whole count."""
    lib = kernels.library()
    x = c64([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.2, 0.2, -0.5], [0.3, 0.2, 0.5], [0.2, 0.4, 0.5],
             [0.25, 0.25, -0.5], [0.35, 0.25, 0.5], [0.25, 0.45, 0.5]])
    tris = i64([[0, 1, 2], [3, 4, 5], [6, 7, 8]])
    lo, hi = c64(x[tris].min(axis=1)), c64(x[tris].max(axis=1))
    off, ent, big = i64([0, 3]), i64([0, 1, 2]), i64([0])
    stamp = np.zeros(3, np.int64)
    want = brute_force_pairs(x, tris)
    assert len(want) == 2
    for cap in (0, 1, 2, 3):
        pairs = np.full((max(cap, 1), 2), -7, np.int64)
        got = lib.sinew_crossing_pairs(len(x), P(x), 3, P(tris), 10.0, 1, P(off), P(ent), 0, P(big),
                                       P(lo), P(hi), P(stamp), cap, P(pairs))
        assert got == 2
        kept = min(cap, 2)
        assert {tuple(p) for p in pairs[:kept].tolist()} <= {tuple(p) for p in want.tolist()}
        assert np.all(pairs[kept:] == -7)
