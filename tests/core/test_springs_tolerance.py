"""``tolerance``: with a tight value, FAST and NEWTON solve implicit Euler to convergence.

The reference is implicit Euler as seed 001 (Liu et al. 2013) states it — the new positions
minimise ``g(x) = 1/(2h²) (x − y)ᵀ M (x − y) + E(x)`` with ``y = x₀ + h v₀ + h² g`` — solved here
in plain numpy by Newton's method with the exact dense Hessian (seed 004's spring Hessian, no
projection) and a backtracking line search, to round-off. Every step starts both from the same
state, so the comparison is per step.
"""

import numpy as np
import pytest

from core.errors import SinewError
from core.springs import Simulator, build_model
from core.springs.shapes import grid, springs_of, triangulate

H = 1.0 / 24.0


def cloth():
    g = grid(4, 0.6)
    ss = springs_of(g)
    pin = np.zeros(len(g.positions), bool)
    pin[[0, 4]] = True
    return build_model(g.positions, ss, stiffness=300.0, shear_stiffness=60.0, bending_stiffness=5.0,
                       damping=0.0, total_mass=0.2, triangles=triangulate(g), pinned=pin, air_drag=0.0)


def reference_step(m, x0, v0, h):
    """Implicit Euler by dense Newton on g(x) over the free vertices, to round-off."""
    free = np.flatnonzero(~np.asarray(m.pinned, bool))
    mass = m.masses
    y = x0 + h * v0 + h * h * m.gravity
    sp, k, rest = m.springs, m.stiffness, m.rest_lengths

    def energy(x):
        d = x[sp[:, 0]] - x[sp[:, 1]]
        ln = np.linalg.norm(d, axis=1)
        return (0.5 / h**2 * np.sum(mass[:, None] * (x - y) ** 2) + 0.5 * np.sum(k * (ln - rest) ** 2))

    def grad_hess(x):
        n = len(x)
        gr = (mass[:, None] * (x - y)) / h**2
        hs = np.zeros((3 * n, 3 * n))
        hs[np.arange(3 * n), np.arange(3 * n)] = np.repeat(mass, 3) / h**2
        d = x[sp[:, 0]] - x[sp[:, 1]]
        ln = np.linalg.norm(d, axis=1)
        u = d / ln[:, None]
        f = (k * (ln - rest))[:, None] * u
        np.add.at(gr, sp[:, 0], f)
        np.add.at(gr, sp[:, 1], -f)
        for s_, (a, b) in enumerate(sp):
            blk = k[s_] * (np.outer(u[s_], u[s_]) + (1 - rest[s_] / ln[s_]) * (np.eye(3) - np.outer(u[s_], u[s_])))
            for p_, q_, sign in ((a, a, 1), (b, b, 1), (a, b, -1), (b, a, -1)):
                hs[3 * p_:3 * p_ + 3, 3 * q_:3 * q_ + 3] += sign * blk
        return gr, hs

    x = x0 + h * v0
    idx = (3 * free[:, None] + np.arange(3)).reshape(-1)
    for _ in range(100):
        gr, hs = grad_hess(x)
        gf = gr[free].reshape(-1)
        if np.linalg.norm(gf) < 1e-13:
            break
        step = np.linalg.solve(hs[np.ix_(idx, idx)], -gf).reshape(-1, 3)
        t, e0 = 1.0, energy(x)
        while t > 1e-8:
            trial = x.copy()
            trial[free] += t * step
            if energy(trial) <= e0 + 1e-4 * t * float(gf @ step.reshape(-1)):
                break
            t *= 0.5
        x = trial
    return x


@pytest.mark.parametrize("solver,iterations", [("FAST", 2000), ("NEWTON", 200)])
def test_tight_tolerance_reproduces_implicit_euler(solver, iterations):
    m = cloth()
    sim = Simulator(m, solver, fps=24, substeps=1, iterations=iterations, tolerance=1e-9)
    rng = np.random.default_rng(3)
    for _ in range(6):
        x0, v0 = sim.state.x.copy(), sim.state.v.copy()
        expect = reference_step(m, x0, v0, H)
        sim.advance()
        assert np.abs(sim.state.x - expect).max() < 1e-7
        # perturb the next start a little so the steps differ
        sim.state.v[~np.asarray(m.pinned, bool)] += rng.normal(0.0, 0.05, (len(m.free_index), 3))


def test_loose_tolerance_is_looser():
    """The default (1 %) leaves a FAST step further from the exact one than 1e-9 does."""
    m = cloth()
    errs = []
    for tol in (1e-2, 1e-9):
        sim = Simulator(m, "FAST", fps=24, substeps=1, iterations=2000, tolerance=tol)
        x0, v0 = sim.state.x.copy(), sim.state.v.copy()
        sim.advance()
        errs.append(np.abs(sim.state.x - reference_step(m, x0, v0, H)).max())
    assert errs[1] < errs[0]


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-3, float("nan")])
def test_tolerance_must_be_a_fraction(bad):
    with pytest.raises(SinewError):
        Simulator(cloth(), "FAST", fps=24, tolerance=bad)


@pytest.mark.parametrize("solver,iterations", [("FAST", 3), ("NEWTON", 1), ("VBD", 3)])
def test_relative_residual_is_what_the_tolerance_judges(solver, iterations):
    """Every frame's largest relative residual decides its convergence by the residual: at
    or under the tolerance where the frame converged (this cloth holds no strain limit)."""
    sim = Simulator(cloth(), solver, fps=24, substeps=2, iterations=iterations, tolerance=0.01)
    seen = set()
    for _ in range(24):
        d = sim.advance()
        assert np.isfinite(d.max_relative_residual) and d.strain_held
        assert d.converged == (d.max_relative_residual <= 0.01)
        seen.add(d.converged)
    assert seen == {True, False}  # a swinging cloth at few iterations: both kinds of frame


def test_unconverged_summary_names_the_frames_and_why():
    from core.springs.simulate import FrameDiagnostics, unconverged_summary

    def diag(frame, rel, held=True):
        return FrameDiagnostics(frame, 10, 0.0, 0.0, 0.0, 0.0, converged=rel <= 0.01 and held,
                                max_relative_residual=rel, strain_held=held)

    frames = [diag(1, 0.001), diag(2, 0.05), diag(3, 0.02), diag(4, 0.001),
              diag(5, 0.03, held=False), diag(6, 0.001, held=False), diag(7, 0.005)]
    text = unconverged_summary(frames, 0.01, 10)
    assert text.startswith("4 of 7 frames not converged")
    assert "frames 2–3, 5: the solve stopped at 10 iterations" in text
    assert "at 2–5 % of its force scale (tolerance 1 %)" in text
    assert "frames 5–6: the strain limit was not reached" in text
    assert unconverged_summary([diag(1, 0.001)], 0.01, 10) == ""
