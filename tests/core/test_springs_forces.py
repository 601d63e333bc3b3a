"""Spring energy derivatives, masses and model validation."""

import numpy as np
import pytest

from core.errors import SinewError, TopologyError
from core.springs import build_model, build_springs, lumped_masses
from core.springs import forces as F
from core.springs.base import Objective
from core.springs.shapes import grid, springs_of, triangulate


def _model(seed=0, damping=0.3):
    g = grid(3, 1.0)
    ss = springs_of(g)
    return build_model(g.positions, ss, stiffness=50.0, shear_stiffness=20.0,
                       bending_stiffness=5.0, damping=damping, vertex_mass=0.02, air_drag=0.4,
                       wind=(0.3, 0.0, 0.1))


def _perturbed(model, seed, scale=0.05):
    rng = np.random.default_rng(seed)
    return model.rest_positions + scale * rng.standard_normal(model.rest_positions.shape)


def test_gradient_matches_finite_differences():
    m = _model()
    x = _perturbed(m, 1)
    grad = F.spring_gradient(m, x)
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in range(len(x)):
        for c in range(3):
            xp, xm = x.copy(), x.copy()
            xp[i, c] += eps
            xm[i, c] -= eps
            fd[i, c] = (F.spring_energy(m, xp) - F.spring_energy(m, xm)) / (2 * eps)
    assert np.allclose(grad, fd, atol=1e-6, rtol=1e-6)


def test_exact_hessian_matches_finite_differences_of_gradient():
    m = _model()
    x = _perturbed(m, 2)
    blocks = F.spring_hessian_blocks(m, x, project=False)
    n = len(x)
    eps = 1e-6
    for i in (0, 5, 10):
        for c in range(3):
            xp, xm = x.copy(), x.copy()
            xp[i, c] += eps
            xm[i, c] -= eps
            col_fd = (F.spring_gradient(m, xp) - F.spring_gradient(m, xm)) / (2 * eps)
            e = np.zeros((n, 3))
            e[i, c] = 1.0
            from core.springs.base import block_apply
            col = block_apply(m, blocks, e)
            assert np.allclose(col, col_fd, atol=1e-5)


def test_projected_blocks_are_psd_and_exact_in_tension():
    m = _model()
    x = _perturbed(m, 3, scale=0.1)
    proj = F.spring_hessian_blocks(m, x, project=True)
    assert np.linalg.eigvalsh(proj).min() > -1e-9
    exact = F.spring_hessian_blocks(m, x, project=False)
    _, length, _ = F.spring_geometry(m, x)
    stretched = length >= m.rest_lengths
    assert np.allclose(proj[stretched], exact[stretched])
    assert np.linalg.eigvalsh(exact[~stretched]).min() < 0  # compression makes it indefinite


def test_objective_gradient_is_backward_euler_residual():
    # ∇g = M(v - v0)/h - f(x, v) with damping directions frozen at x0
    m = _model()
    rng = np.random.default_rng(4)
    from core.springs import State
    st = State(_perturbed(m, 4), rng.standard_normal(m.rest_positions.shape) * 0.1)
    h = 0.01
    obj = Objective(m, st, h)
    x = _perturbed(m, 5)
    v = (x - st.x) / h
    f = -F.spring_gradient(m, x) + F.external_forces(m, v)
    # frozen-direction damping force
    u0 = obj.u0
    dv = m.incidence @ v
    f -= m.incidence_t @ ((m.damping * np.einsum("ij,ij->i", dv, u0))[:, None] * u0)
    expect = m.masses[:, None] * (v - st.v) / h - f
    assert np.allclose(obj.gradient(x), expect, atol=1e-9)
    # and the objective's gradient is the derivative of its value
    eps = 1e-6
    xp, xm = x.copy(), x.copy()
    xp[3, 1] += eps
    xm[3, 1] -= eps
    assert np.isclose((obj.value(xp) - obj.value(xm)) / (2 * eps), obj.gradient(x)[3, 1],
                      rtol=1e-5, atol=1e-6)


def test_damping_force_opposes_stretching_velocity():
    m = _model()
    v = np.zeros_like(m.rest_positions)
    v[0, 0] = -1.0  # vertex 0 moving away from vertex 1 along x
    f = F.damping_forces(m, m.rest_positions, v)
    assert f[0, 0] > 0
    assert np.allclose(f.sum(axis=0), 0.0)  # internal forces


def test_lumped_masses_sum_to_total():
    g = grid(5, 2.0)
    tri = triangulate(g)
    pos = g.positions.copy()
    pos[:, 0] *= np.linspace(1, 2, len(pos))  # uneven areas
    extra = np.vstack([pos, [[10.0, 0.0, 0.0]]])  # a vertex in no triangle
    masses = lumped_masses(extra, tri, 0.7)
    assert np.isclose(masses.sum(), 0.7)
    assert np.all(masses > 0)
    corner, middle = masses[0], masses[8]
    assert middle > corner  # interior vertices touch more area


def test_model_validation():
    g = grid(2)
    ss = springs_of(g)
    kw = dict(stiffness=10.0, shear_stiffness=1.0, bending_stiffness=0.0, damping=0.0)
    bad = g.positions.copy()
    bad[0, 0] = np.nan
    with pytest.raises(TopologyError):
        build_model(bad, ss, vertex_mass=1.0, **kw)
    with pytest.raises(SinewError):
        build_model(g.positions, ss, vertex_mass=-1.0, **kw)
    with pytest.raises(SinewError):
        build_model(g.positions, ss, vertex_mass=1.0, **dict(kw, stiffness=-1.0))
    with pytest.raises(SinewError):
        build_model(g.positions, ss, **kw)  # no mass given
    with pytest.raises(TopologyError):
        build_model(g.positions[:4], ss, vertex_mass=1.0, **kw)
    m = build_model(g.positions, ss, vertex_mass=1.0, **kw)
    assert m.spring_count == len(ss.structural) + len(ss.shear)  # bending k = 0 left out
    with pytest.raises(ValueError):
        m.rest_positions[0, 0] = 1.0  # frozen arrays


def test_zero_length_springs_are_finite():
    pos = np.array([[0.0, 0, 0], [0.0, 0, 0], [1.0, 0, 0]])  # vertices 0 and 1 coincide
    ss = build_springs(3, np.array([[0, 1], [1, 2]]), [], [], [])
    m = build_model(pos, ss, stiffness=10.0, shear_stiffness=0.0, bending_stiffness=1.0,
                    damping=0.1, vertex_mass=1.0)
    assert m.rest_lengths.min() == 0.0
    x = pos.copy()
    x[2] = x[0]  # now every spring has zero current length
    for arr in (F.spring_gradient(m, x), F.spring_hessian_blocks(m, x),
                F.damping_forces(m, x, np.ones_like(x))):
        assert np.all(np.isfinite(arr))
    assert np.isfinite(F.spring_energy(m, x)) and np.isfinite(F.max_strain(m, x))


def test_strain_is_the_largest_edge_stretch_not_fold_compression():
    """A folded cloth compresses shear/bending springs; strain reports edge stretch only."""
    from core.springs import shapes
    from core.springs.model import build_model

    g = shapes.grid(4, 1.0, plane="XY")
    ss = shapes.springs_of(g)
    m = build_model(g.positions, ss, stiffness=10.0, shear_stiffness=5.0, bending_stiffness=1.0,
                    damping=0.0, vertex_mass=0.01)
    assert m.edge_springs == len(ss.structural)
    x = g.positions.copy()
    assert F.max_strain(m, x) == 0.0
    # Fold the sheet in half along x = 0: edges keep their length, bending springs across
    # the fold shorten; no stretch is reported.
    x[:, 0] = np.abs(x[:, 0])
    assert F.max_strain(m, x) < 1e-12
    # Stretch one edge by 20 % (its other edges stretch ~2 % or shorten): 0.2 is reported.
    i, j = ss.structural[0]
    x = g.positions.copy()
    x[j] = x[i] + 1.2 * (x[j] - x[i])
    assert abs(F.max_strain(m, x) - 0.2) < 1e-9
    # Shrinking every edge is compression: no strain.
    assert F.max_strain(m, 0.5 * g.positions) == 0.0
