"""Material model (DENSITY mass, MATERIAL stiffness), strain limiting, soft pins, pre-roll,
convergence reporting and the shared linear solvers: physics, not snapshots."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from core.errors import SinewError
from core.springs import INTEGRATORS, NewtonImplicitEuler, Simulator, build_model, build_springs, simulate
from core.springs.linsolve import factor_spd, pcg
from core.springs.shapes import grid, rope, springs_of, triangulate

G = 9.81
SOLVERS = list(INTEGRATORS)


def sheet(n, size=1.0, pins=(0, None), stretch_x=1.0, **kw):
    """An n×n sheet hanging in XZ, ``size`` m tall, ``stretch_x`` × as wide; pinned top corners."""
    g = grid(n, size)
    pos = g.positions * [stretch_x, 1.0, 1.0]
    pin = kw.pop("pinned", None)
    if pin is None:
        pin = np.zeros(len(pos))
        pin[[0, n]] = 1.0
    return build_model(pos, springs_of(g), triangles=triangulate(g), pinned=pin, **kw)


CLOTH = dict(density=0.2, stiffness=200.0, shear_stiffness=20.0, bending_stiffness=0.5, damping=0.5,
             air_drag=2.0, stiffness_mode="MATERIAL")


def test_density_gives_the_same_mass_at_any_resolution():
    for n in (20, 40, 80):
        m = sheet(n, stretch_x=1.5, **CLOTH)
        assert m.total_mass == pytest.approx(0.2 * 1.5 * 1.0, rel=1e-12)
    # a rope (no faces): density per metre of edge
    r = rope(10, 2.0)
    ss = build_springs(11, r.edges, r.loop_starts, r.loop_totals, r.loop_vertices)
    m = build_model(r.positions, ss, stiffness=1.0, shear_stiffness=0, bending_stiffness=0, damping=0,
                    density=0.3)
    assert m.total_mass == pytest.approx(0.6) and m.masses[0] == pytest.approx(0.5 * m.masses[5])


def test_same_material_hangs_to_the_same_shape_at_20_40_80():
    lows, masses = [], []
    for n in (20, 40, 80):
        m = sheet(n, **CLOTH)
        sim = Simulator(m, "FAST", fps=24, iterations=10)
        for _ in range(72):
            d = sim.advance()
        assert d.kinetic_energy < 1e-6  # at rest
        lows.append(sim.state.x[:, 2].min())
        masses.append(m.total_mass)
    assert np.ptp(lows) < 0.03 * 1.0  # 3 % of the 1 m sheet
    assert np.ptp(masses) < 1e-12
    # the same per-spring N/m and per-vertex kg do not: the fine sheet is 16× heavier
    spring = [sheet(n, vertex_mass=0.2 / 21**2, stiffness=200, shear_stiffness=20,
                    bending_stiffness=0.5, damping=0.5, air_drag=2.0).total_mass for n in (20, 80)]
    assert spring[1] / spring[0] > 14


@pytest.mark.parametrize("n,stretch_x", [(8, 1.0), (16, 1.0), (8, 2.5)])
def test_material_stretch_matches_the_membrane_under_its_own_weight(n, stretch_x):
    # pinned along the whole top edge, stretch springs only: a hanging membrane of
    # density ρ and modulus E extends by ρ g H² / (2E) whatever the cells' size and shape
    rho, E, H = 0.5, 40.0, 1.0
    top = np.zeros((n + 1) ** 2)
    top[: n + 1] = 1.0
    m = sheet(n, H, stretch_x=stretch_x, pinned=top, density=rho, stiffness=E, shear_stiffness=0.0,
              bending_stiffness=0.0, damping=0.0, air_drag=0.0, stiffness_mode="MATERIAL")
    newton = NewtonImplicitEuler(linear_solver="DIRECT")
    st = m.initial_state()
    for _ in range(30):  # large steps: backward Euler goes straight to the static state
        newton.step(m, st, 10.0, iterations=30)
    extension = -st.x[:, 2].min() - H
    assert extension == pytest.approx(rho * G * H * H / (2 * E), rel=0.06)


# VBD's strain limit is a Gauss–Seidel projection after the solve (core/springs/vbd.py): on
# this sheet, loaded to 4× its limit and hanging from two corners, it needs ~2,000 passes
# (docs/CONTACT.md); VBD's strain bound is tested under contact at its preset settings
# (test_springs_vbd.py).
@pytest.mark.parametrize("name", [s for s in SOLVERS if s != "VBD"])
def test_strain_never_exceeds_max_stretch(name):
    limit = 0.05
    kw = dict(density=2.0, stiffness=15.0, shear_stiffness=2.0, bending_stiffness=0.0, damping=0.2,
              air_drag=1.0, stiffness_mode="MATERIAL")
    sub = 20 if name in ("EXPLICIT", "SYMPLECTIC") else 1
    _, free = simulate(sheet(6, **kw), name, 12, fps=24, substeps=sub, iterations=5)
    out, diags = simulate(sheet(6, max_stretch=limit, **kw), name, 12, fps=24, substeps=sub,
                          iterations=5)
    assert max(d.max_strain for d in free) > 4 * limit  # heavily loaded: the limit matters
    assert max(d.max_strain for d in diags) <= limit + 1e-3
    assert all(d.converged or name in ("NEWTON", "FAST") for d in diags)
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("name", SOLVERS)
def test_soft_pin_equilibrium_is_m_g_over_k(name):
    # two loose vertices on soft pins of weight 1 and 0.5: offsets m g / (k w)
    pos = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    k, mass = 50.0, 0.1
    m = build_model(pos, build_springs(2, [], [], [], []), stiffness=0, shear_stiffness=0,
                    bending_stiffness=0, damping=0, vertex_mass=mass, pinned=np.array([1.0, 0.5]),
                    pin_stiffness=k, air_drag=8.0)
    assert len(m.pinned_index) == 0 and list(m.anchor_index) == [0, 1]
    sub = 10 if name in ("EXPLICIT", "SYMPLECTIC") else 1
    out, _ = simulate(m, name, 120, fps=24, substeps=sub)
    drop = pos[:, 2] - out[-1, :, 2]
    assert drop == pytest.approx(mass * G / (k * np.array([1.0, 0.5])), rel=1e-3)


def test_soft_pins_with_weight_half_sag_more_and_follow_their_targets():
    n = 6
    lows = {}
    for w in (1.0, 0.5):
        pin = np.zeros((n + 1) ** 2)
        pin[: n + 1] = w  # the top row
        m = sheet(n, pinned=pin, pin_stiffness=20.0, **CLOTH)
        traj = np.repeat(m.rest_positions[m.target_index][None], 48, axis=0)
        traj[:, :, 0] += np.linspace(0.0, 0.3, 48)[:, None]  # the targets slide 0.3 m along x
        out, _ = simulate(m, "FAST", 48, fps=24, pin_trajectory=traj)
        lows[w] = out[-1, :, 2].min()
        top = out[-1, m.target_index]
        assert np.abs(top[:, 0] - traj[-1, :, 0]).max() < 0.05  # pulled along
        assert np.all(top[:, 2] < traj[-1, :, 2])  # and hanging below the target: soft
    assert lows[0.5] < lows[1.0] - 0.01


def test_pre_roll_frames_are_not_returned():
    m = sheet(5, **CLOTH)
    out, diags = simulate(m, "FAST", 4, fps=24, pre_roll=10)
    assert out.shape[0] == 4 and len(diags) == 4
    sim = Simulator(m, "FAST", fps=24)
    for _ in range(10):
        sim.advance()
    assert np.abs(out[0] - sim.state.x).max() < 1e-12  # frame 0 = after the pre-roll
    sim.advance()
    assert np.abs(out[1] - sim.state.x).max() < 1e-12
    # pins held at their frame-0 targets through the pre-roll
    assert np.abs(out[0][m.pinned_index] - m.rest_positions[m.pinned_index]).max() == 0.0


def test_convergence_is_reported():
    m = sheet(12, density=0.2, stiffness=2000.0, shear_stiffness=200.0, bending_stiffness=1.0,
              damping=0.5, air_drag=0.5, stiffness_mode="MATERIAL")
    few = Simulator(m, "FAST", fps=24, iterations=1).advance()
    many = Simulator(m, "FAST", fps=24, iterations=300).advance()
    assert not few.converged and many.converged and many.residual < few.residual
    newton = Simulator(m, "NEWTON", fps=24, iterations=100).advance()
    assert newton.converged and np.isfinite(newton.max_residual)


def test_shared_pcg_matches_a_direct_solve():
    rng = np.random.default_rng(3)
    n = 60
    a = sp.random(n, n, density=0.1, random_state=4)
    a = (a @ a.T + sp.identity(n) * 0.5).tocsc()
    b = rng.standard_normal((n, 3))
    exact = np.column_stack([spsolve(a, b[:, k]) for k in range(3)])
    jacobi = 1.0 / a.diagonal()

    def apply(u, out):
        out[...] = a @ u
        return out

    res = pcg(apply, b, lambda r: jacobi[:, None] * r, rtol=1e-12, max_iterations=500)
    assert res.converged and np.abs(res.x - exact).max() < 1e-9 * np.abs(exact).max()
    # the shared factorisation as preconditioner: one iteration
    res = pcg(apply, np.asfortranarray(b), factor_spd(a), rtol=1e-12)
    assert res.iterations <= 2 and np.abs(res.x - exact).max() < 1e-9 * np.abs(exact).max()
    # capped: says so
    assert not pcg(apply, b, lambda r: r, rtol=1e-14, max_iterations=2).converged


def test_strain_limit_sparse_projection_equals_the_dense_one(monkeypatch):
    """Large active sets go to SuperLU, small ones to LAPACK: one fast-projection step gives
    the same multipliers and displacements either way, and the displacement removes each
    active constraint's violation to first order (``Σₖ coefₖ u·Δxₖ = c``): springs
    (``(i, j)``, ``(1, −1)``), one-vertex rows (a collider contact, padded with a pinned
    vertex) and four-vertex rows (a self-collision pair)."""
    from core.springs import strainlimit

    g = grid(24, 1.0, plane="XY")
    rng = np.random.default_rng(4)
    x = g.positions + rng.normal(scale=0.002, size=g.positions.shape)
    inv_m = 1.0 / rng.uniform(0.5e-3, 2e-3, len(x))
    inv_m[:25] = 0.0  # a pinned row
    centre = np.linalg.norm(x[g.edges].mean(1) - [0.0, 0.0, 0.0], axis=1)
    pairs = g.edges[np.argsort(centre)[:300]]  # a connected patch of 300 springs
    d = x[pairs[:, 0]] - x[pairs[:, 1]]
    u = d / np.linalg.norm(d, axis=1)[:, None]
    inner = np.unique(pairs)[::7][:20]
    quads = np.stack([rng.choice(np.unique(pairs), 4, replace=False) for _ in range(10)])
    verts = np.concatenate([np.pad(pairs, ((0, 0), (0, 2)), constant_values=0),
                            np.stack([inner, np.zeros_like(inner), np.zeros_like(inner),
                                      np.zeros_like(inner)], 1), quads])
    coefs = np.concatenate([np.tile([1.0, -1.0, 0.0, 0.0], (len(pairs), 1)),
                            np.tile([1.0, 0.0, 0.0, 0.0], (len(inner), 1)),
                            np.tile([1.0, -0.3, -0.3, -0.4], (len(quads), 1))])
    dirs = np.concatenate([u, np.tile([0.0, 0.0, 1.0], (len(inner) + len(quads), 1))])
    c = rng.uniform(0.0, 1e-3, len(verts))
    out = {}
    for dense in (True, False):
        monkeypatch.setattr(strainlimit, "_DENSE", len(verts) if dense else 0)
        out[dense] = strainlimit._project(verts, coefs, dirs, inv_m, c)
    (lam_d, verts_d, dx_d), (lam_s, verts_s, dx_s) = out[True], out[False]
    assert np.array_equal(verts_d, verts_s)
    np.testing.assert_allclose(lam_s, lam_d, rtol=1e-7, atol=1e-10 * np.abs(lam_d).max())
    np.testing.assert_allclose(dx_s, dx_d, rtol=1e-7, atol=1e-10 * np.abs(dx_d).max())
    dx = np.zeros_like(x)
    dx[verts_s] = dx_s
    reduced = np.einsum("rk,rki,ri->r", coefs, dx[verts], dirs)
    np.testing.assert_allclose(reduced, c, atol=1e-6 * c.max())


@pytest.mark.parametrize("dense", [True, False])
def test_strain_limit_projection_eliminating_one_vertex_rows_equals_the_full_solve(monkeypatch,
                                                                                  dense):
    """The projection eliminates the constraints with a single movable vertex (collider
    contacts, springs to a pin) instead of solving for them: its multipliers and
    displacements equal those of the full system ``J W Jᵀ λ = c``, ``Δx = W Jᵀ λ``
    assembled here densely from the gradients, on a patch of springs with contacts at
    some of its vertices (two at one vertex: only one is eliminated), springs to pinned
    vertices and four-vertex rows; every constraint is then met to first order."""
    from core.springs import strainlimit

    monkeypatch.setattr(strainlimit, "_DENSE", 10**6 if dense else 0)
    g = grid(12, 1.0, plane="XY")
    rng = np.random.default_rng(11)
    x = g.positions + rng.normal(scale=0.01, size=g.positions.shape)
    n = len(x)
    inv_m = 1.0 / rng.uniform(0.5e-3, 2e-3, n)
    pairs = g.edges[np.linalg.norm(x[g.edges].mean(1), axis=1) < 0.3]
    d = x[pairs[:, 0]] - x[pairs[:, 1]]
    u_s = d / np.linalg.norm(d, axis=1)[:, None]
    inner = np.unique(pairs)[::3]
    inv_m[np.setdiff1d(np.unique(pairs)[1::7], inner)] = 0.0  # pins inside the patch
    normals = rng.normal(size=(len(inner) + 1, 3))
    normals /= np.linalg.norm(normals, axis=1)[:, None]
    contacts = np.append(inner, inner[0])  # a second contact at one vertex
    quads = np.stack([rng.choice(np.unique(pairs), 4, replace=False) for _ in range(6)])
    verts = np.concatenate([np.pad(pairs, ((0, 0), (0, 2)), constant_values=n),
                            np.pad(contacts[:, None], ((0, 0), (0, 3)), constant_values=n),
                            quads])
    coefs = np.concatenate([np.tile([1.0, -1.0, 0.0, 0.0], (len(pairs), 1)),
                            np.tile([0.7, 0.0, 0.0, 0.0], (len(contacts), 1)),
                            np.tile([1.0, -0.3, -0.3, -0.4], (len(quads), 1))])
    dirs = np.concatenate([u_s, normals, np.tile([0.0, 0.0, 1.0], (len(quads), 1))])
    c = rng.uniform(-1e-3, 1e-3, len(verts))
    inv = np.append(inv_m, 0.0)
    assert np.any(inv[pairs].min(1) == 0) and np.any(inv[pairs].max(1) > 0)  # springs to pins
    lam, moved, dxv = strainlimit._project(verts, coefs, dirs, inv, c)

    jac = np.zeros((len(verts), 3 * (n + 1)))
    for k in range(verts.shape[1]):
        for i in range(3):
            np.add.at(jac, (np.arange(len(verts)), 3 * verts[:, k] + i), coefs[:, k] * dirs[:, i])
    weight = np.repeat(inv, 3)
    lam_ref = np.linalg.solve((jac * weight) @ jac.T, c)
    dx_ref = (weight * (jac.T @ lam_ref)).reshape(-1, 3)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-6, atol=1e-8 * np.abs(lam_ref).max())
    dx = np.zeros((n + 1, 3))
    dx[moved] = dxv
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-6, atol=1e-6 * np.abs(dx_ref).max())
    np.testing.assert_allclose(jac @ dx.reshape(-1), c, atol=1e-6 * np.abs(c).max())


@pytest.mark.parametrize("dense", [True, False])
def test_the_springs_only_projection_step_equals_the_general_projection(monkeypatch, dense):
    """The strain limit alone solves its rounds with :class:`strainlimit._SpringStep` (the
    system among a Newton step's springs assembled once, a round picking its active
    springs), not with :func:`strainlimit._project` (which sorts every round's incidences
    and eliminates springs with one movable end): the same multipliers and displacements to
    round-off, on random subsets of a sheet's structural springs with pinned vertices
    inside, dense and sparse, and with the subset's own violations."""
    from core.springs import strainlimit

    monkeypatch.setattr(strainlimit, "_DENSE", 10**6 if dense else 0)
    m = sheet(14, **CLOTH)
    e, n = m.structural_count, m.vertex_count
    springs = m.springs[:e]
    rng = np.random.default_rng(5)
    x = m.rest_positions + rng.normal(scale=0.01, size=m.rest_positions.shape)
    inv_m = np.append(np.where(m.pinned, 0.0, 1.0 / m.masses), 0.0)
    inv_m[rng.choice(n, 6, replace=False)] = 0.0  # pins inside the sheet
    inv_m[n] = 0.0
    d = x[springs[:, 0]] - x[springs[:, 1]]
    u = d / np.linalg.norm(d, axis=1)[:, None]
    movable = np.flatnonzero(inv_m[springs[:, 0]] + inv_m[springs[:, 1]] > 0)
    for _ in range(4):
        cand = np.sort(rng.choice(movable, 120, replace=False))
        step = strainlimit._SpringStep(strainlimit._SpringPattern(springs[cand]), u[cand], inv_m)
        sel = rng.random(len(cand)) < 0.7
        hi = cand[sel]
        c = rng.uniform(-2e-3, 2e-3, len(hi))
        lam, dx = step.solve(sel, c)
        lam_ref, moved, dxv = strainlimit._project(springs[hi], np.tile([1.0, -1.0], (len(hi), 1)),
                                                   u[hi], inv_m, c)
        dx_ref = np.zeros((n + 1, 3))
        dx_ref[moved] = dxv
        np.testing.assert_allclose(lam, lam_ref, rtol=1e-6, atol=1e-9 * np.abs(lam_ref).max())
        np.testing.assert_allclose(dx, dx_ref, rtol=1e-6, atol=1e-9 * np.abs(dx_ref).max())
        # and every selected spring's violation is met to first order
        met = np.einsum("ij,ij->i", u[hi], dx[springs[hi, 0]] - dx[springs[hi, 1]])
        np.testing.assert_allclose(met, c, atol=1e-6 * np.abs(c).max())


def test_a_stiffness_beyond_double_precision_is_refused():
    """Blender clamps an infinite stiffness to FLT_MAX; float64 round-off in such spring
    forces (ε k L) dwarfs the weight, so the model refuses it with a message."""
    with pytest.raises(SinewError, match="stiffness is too large"):
        sheet(4, density=0.2, stiffness=3.4e38, shear_stiffness=0.0, bending_stiffness=0.0,
              damping=0.0, stiffness_mode="MATERIAL")
    sheet(4, density=0.2, stiffness=1e9, shear_stiffness=0.0, bending_stiffness=0.0, damping=0.0,
          stiffness_mode="MATERIAL")  # stiff, but its forces are still resolved


def test_fast_warm_start_meets_the_same_rule_in_fewer_iterations():
    """A strain-limited sheet hanging from its corners: every solve stretches the corner
    springs past the limit and the strain limit takes that back, so a cold solve starts
    each step from the same pulled-back state. FAST's warm start adds back what the limit
    took; every step must still meet the convergence rule against ‖∇g(x₀ + h v₀)‖, and land
    as close to the exact implicit-Euler step as a cold start does, in far fewer iterations."""
    from core.springs import LocalGlobal
    from core.springs.base import Objective

    n = 16
    m = sheet(n, density=0.15, stiffness=300.0, shear_stiffness=200.0, bending_stiffness=2.0,
              damping=1.0, air_drag=0.5, stiffness_mode="MATERIAL", max_stretch=0.03)
    h = 1 / 24
    warm, cold = LocalGlobal(), LocalGlobal(warm_start=False)
    st = Simulator(m, "FAST", fps=24).state.copy()
    its_warm = its_cold = 0
    err_warm = err_cold = 0.0
    for _ in range(48):
        exact = st.copy()
        NewtonImplicitEuler(tolerance=1e-12, linear_solver="DIRECT").step(m, exact, h, iterations=60)
        c = st.copy()
        info_c = cold.step(m, c, h, iterations=60)
        obj = Objective(m, st, h)
        r_start = float(np.linalg.norm(obj.gradient(obj.start(st.x[m.target_index]))))
        info_w = warm.step(m, st, h, iterations=60)
        assert warm.residual_history[0] == pytest.approx(r_start, rel=1e-6)
        assert info_w.converged and info_c.converged
        its_warm += info_w.iterations
        its_cold += info_c.iterations
        err_warm = max(err_warm, float(np.abs(st.x - exact.x).max()))
        err_cold = max(err_cold, float(np.abs(c.x - exact.x).max()))
    sp_ = m.springs[:m.structural_count]
    strain = np.linalg.norm(st.x[sp_[:, 0]] - st.x[sp_[:, 1]], axis=1) / m.rest_lengths[:m.structural_count] - 1
    assert strain.max() > 0.029  # the limit acts
    assert its_warm < 0.5 * its_cold
    assert err_warm < max(2.0 * err_cold, 1e-5) and err_warm < 0.01 / n


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_strain_limit_projects_a_taut_flag_in_one_newton_step(seed):
    """A flag in wind (pinned along its pole, the FLAG preset's 2 % limit): nearly every
    structural spring is stretched past half the limit (a candidate of the active set) and
    ~15 % are over it, by up to 1.5 %. The released candidates that the step would stretch
    past their bound are held again within the Newton step, so one step ends within the
    tolerance (released for good, the springs of a taut row came back one per Newton step:
    3–5 steps here); pins stay, velocities change by Δx/h."""
    from core.springs.strainlimit import TOLERANCE, limit_strain

    g = grid(20, 1.0)
    pos = g.positions
    pin = np.isclose(pos[:, 0], pos[:, 0].min()).astype(float)
    m = build_model(pos, springs_of(g), triangles=triangulate(g), pinned=pin, density=0.12,
                    stiffness=3000.0, shear_stiffness=300.0, bending_stiffness=1.0, damping=1.0,
                    air_drag=1.0, stiffness_mode="MATERIAL", max_stretch=0.02)
    rng = np.random.default_rng(seed)
    x = pos * 1.017  # every spring 1.7 % long
    x[:, 1] += 0.01 * np.sin(7 * pos[:, 0] + 3 * pos[:, 2]) + rng.normal(scale=0.0015, size=len(pos))
    x[m.pinned_index] = pos[m.pinned_index]
    sp_ = m.springs[:m.structural_count]
    rest = m.rest_lengths[:m.structural_count]
    before = np.linalg.norm(x[sp_[:, 0]] - x[sp_[:, 1]], axis=1) / rest - 1
    assert np.mean(before > 0.01) > 0.9 and 0.1 < np.mean(before > 0.02) and before.max() > 0.03
    x0, v = x.copy(), np.zeros_like(x)
    info = limit_strain(m, x, v, 1 / 24)
    after = np.linalg.norm(x[sp_[:, 0]] - x[sp_[:, 1]], axis=1) / rest - 1
    assert info.converged and info.iterations == 1
    assert after.max() <= 0.02 + 1.02 * TOLERANCE * 1.02
    np.testing.assert_array_equal(x[m.pinned_index], x0[m.pinned_index])
    np.testing.assert_allclose(v, (x - x0) * 24, atol=1e-12)


@pytest.mark.parametrize("with_contacts", [False, True])
def test_strain_limit_projection_is_the_closest_point_in_the_mass_metric(with_contacts):
    """Fast projection (Goldenthal et al. 2007) ends on the constraints and, for violations
    of a few per cent, at the point an independent solver finds for the same problem:
    min ½ Σ mᵢ‖xᵢ − x̂ᵢ‖² with every structural spring no longer than (1 + s) L, the pins
    fixed and, with contacts, some vertices on the outer side of a plane (SLSQP on the full
    problem). Velocities change by Δx/h."""
    from scipy.optimize import minimize

    from core.springs.strainlimit import TOLERANCE, LinearRows, limit_strain

    n, s, h = 8, 0.05, 1 / 24
    m = sheet(n, max_stretch=s, **CLOTH)
    rng = np.random.default_rng(7)
    x_hat = m.rest_positions * [1.09, 1.0, 1.04] + rng.normal(scale=0.004, size=(len(m.masses), 3))
    x_hat[m.pinned_index] = m.rest_positions[m.pinned_index]
    rows = None
    if with_contacts:  # the lowest row of vertices held above z = its mean height
        low = np.flatnonzero(np.isclose(m.rest_positions[:, 2], m.rest_positions[:, 2].min()))
        plane = np.full((len(low), 3), [0.0, 0.0, x_hat[low, 2].mean()])
        rows = LinearRows.points(low, np.tile([0.0, 0.0, 1.0], (len(low), 1)), plane, 0.1)
    x, v = x_hat.copy(), np.zeros_like(x_hat)
    info = limit_strain(m, x, v, h, rows=rows)
    sp_ = m.springs[:m.structural_count]
    bound = (1 + s) * m.rest_lengths[:m.structural_count]
    assert info.converged and info.iterations > 0
    assert np.all(np.linalg.norm(x[sp_[:, 0]] - x[sp_[:, 1]], axis=1) <= bound * (1 + 2 * TOLERANCE))
    np.testing.assert_allclose(x[m.pinned_index], x_hat[m.pinned_index])
    np.testing.assert_allclose(v, (x - x_hat) / h, atol=1e-12)
    if with_contacts:
        assert np.all(rows.shortfall(x) <= TOLERANCE * 0.1)

    free = np.flatnonzero(~m.pinned)
    w = np.repeat(m.masses[free], 3)

    def full(z):
        y = x_hat.copy()
        y[free] = z.reshape(-1, 3)
        return y

    def length_margin(z):
        y = full(z)
        return bound ** 2 - np.sum((y[sp_[:, 0]] - y[sp_[:, 1]]) ** 2, axis=1)

    cons = [{"type": "ineq", "fun": length_margin}]
    if with_contacts:
        cons.append({"type": "ineq", "fun": lambda z: -rows.shortfall(full(z))})
    z0 = x_hat[free].reshape(-1)
    res = minimize(lambda z: 0.5 * np.sum(w * (z - z0) ** 2), x[free].reshape(-1),
                   jac=lambda z: w * (z - z0), constraints=cons, method="SLSQP",
                   options={"maxiter": 500, "ftol": 1e-14})
    assert res.success
    best = full(res.x)
    cost = 0.5 * np.sum(m.masses[:, None] * (x - x_hat) ** 2)
    optimum = 0.5 * np.sum(m.masses[:, None] * (best - x_hat) ** 2)
    assert optimum > 0 and cost == pytest.approx(optimum, rel=0.01)
    moved = np.abs(best - x_hat).max()
    assert np.abs(x - best).max() < 0.12 * moved
