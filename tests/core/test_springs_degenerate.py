"""Degenerate meshes and bad input: a clear error or a sane result, never NaN."""

import numpy as np
import pytest

from core.errors import BakeCancelled, SinewError
from core.springs import INTEGRATORS, Simulator, SpringSet, build_model, build_springs, simulate
from core.springs.shapes import grid, springs_of
from tests.core.unchecked import unchecked

SOLVERS = list(INTEGRATORS)
KW = dict(stiffness=100.0, shear_stiffness=10.0, bending_stiffness=1.0, damping=0.1)


def _steps(name):
    return 10 if name in ("EXPLICIT", "SYMPLECTIC") else 1


@pytest.mark.parametrize("name", SOLVERS)
def test_free_fall_without_springs(name):
    # loose vertices, no springs: every solver is exact or first-order for x = ½ g t²
    pos = np.array([[0.0, 0, 0], [1.0, 0, 0]])
    m = build_model(pos, build_springs(2, [], [], [], []), vertex_mass=0.5, **KW)
    frames, fps = 25, 24
    out, diags = simulate(m, name, frames, fps=fps, substeps=_steps(name))
    t = (frames - 1) / fps
    drop = -out[-1, :, 2]
    exact = 0.5 * 9.81 * t * t
    h = 1 / (fps * _steps(name))
    # forward Euler lags by ½ g h t, backward/semi-implicit Euler lead by ½ g h t
    assert np.allclose(np.abs(drop - exact), 0.5 * 9.81 * h * t, rtol=1e-6)
    assert diags[-1].potential_energy < 0 and diags[-1].max_strain == 0.0


@pytest.mark.parametrize("name", SOLVERS)
def test_zero_length_edges_and_loose_vertices(name):
    g = grid(3, 1.0)
    pos = np.vstack([g.positions, g.positions[5:6], [[3.0, 0.0, 0.0]]])  # duplicate + loose
    n = len(pos)
    edges = np.vstack([g.edges, [[5, n - 2]]])  # a zero-length edge
    ss = build_springs(n, edges, g.loop_starts, g.loop_totals, g.loop_vertices)
    pin = np.zeros(n, bool)
    pin[[0, 3]] = True
    m = build_model(pos, ss, vertex_mass=0.01, pinned=pin, **KW)
    assert m.rest_lengths.min() == 0.0
    out, diags = simulate(m, unchecked(name), 10, fps=24, substeps=_steps(name) * 4, iterations=5)
    assert np.all(np.isfinite(out))
    assert all(np.isfinite(d.kinetic_energy) for d in diags)


@pytest.mark.parametrize("name", SOLVERS)
def test_all_pinned_follows_pins(name):
    g = grid(2)
    ss = springs_of(g)
    m = build_model(g.positions, ss, vertex_mass=0.1, pinned=np.ones(len(g.positions)), **KW)
    traj = g.positions[None] + np.linspace(0, 1, 5)[:, None, None] * [0.0, 0.0, 0.3]
    out, _ = simulate(m, name, 5, fps=24, pin_trajectory=traj)
    assert np.array_equal(out, traj)


@pytest.mark.parametrize("name", SOLVERS)
def test_empty_mesh(name):
    m = build_model(np.zeros((0, 3)), SpringSet(0, np.zeros((0, 2), int), np.zeros((0, 2), int),
                                                np.zeros((0, 2), int)), vertex_mass=1.0, **KW)
    out, diags = simulate(m, name, 3, fps=24)
    assert out.shape == (3, 0, 3) and diags[-1].kinetic_energy == 0.0


def test_caller_arrays_untouched_and_errors():
    g = grid(2)
    ss = springs_of(g)
    pin = np.zeros(len(g.positions), bool)
    pin[0] = True
    m = build_model(g.positions, ss, vertex_mass=0.1, pinned=pin, **KW)
    pins = np.array([[0.0, 0.0, 0.5]])
    keep = pins.copy()
    sim = Simulator(m, "FAST", fps=24)
    sim.advance(pins)
    assert np.array_equal(pins, keep)
    with pytest.raises(SinewError):
        sim.advance(np.array([[np.nan, 0, 0]]))
    with pytest.raises(SinewError):
        sim.advance(np.zeros((2, 3)))
    with pytest.raises(SinewError):
        Simulator(m, "RK4", fps=24)
    with pytest.raises(BakeCancelled):
        simulate(m, "FAST", 5, fps=24, progress=lambda done, total: done < 2)
