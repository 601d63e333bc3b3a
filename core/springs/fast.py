"""FAST: Liu et al. 2013 "Fast Simulation of Mass-Spring Systems" local/global
solver, with Anderson acceleration (Peng et al. 2018 "Anderson Acceleration for
Geometry Optimization and Physics Simulation"; default) or Chebyshev acceleration
(Wang 2015 "A Chebyshev Semi-Iterative Approach for Accelerating Projective and
Position-based Dynamics").

It minimises the same backward-Euler objective ``g`` as NEWTON (see
:mod:`.base`). Each spring energy is written as
``½ k (‖xᵢ − xⱼ‖ − L)² = min_{‖d‖=L} ½ k ‖xᵢ − xⱼ − d‖²``; alternating

* local step: ``dₛ = Lₛ (xᵢ − xⱼ)/‖xᵢ − xⱼ‖`` for all springs (vectorised);
* global step: ``(W + L_k + L_d/h) x = W ŷ + J d + (1/h) L_d x₀ + (1/h) T (x − x₀)``

never increases ``g`` in the undamped case. ``L_k = A K Aᵀ`` is the
stiffness-weighted graph Laplacian and ``J = A K``; the system matrix is the
same ``f × f`` matrix (free vertices only, pins eliminated to the right-hand
side) for x, y and z, so it is factored once per (model, h) and solved with
three right-hand sides.

Damping. Air drag is folded into ``W`` (implicit drag, equivalent to the
velocity drag factor of Liu's reference code). Spring damping
``D = Σ k_d ûûᵀ`` (directions frozen at the start of the step) is not a
Laplacian, so it is split as ``D = L_d ⊗ I − T`` with the isotropic
``L_d = A K_d Aᵀ`` in the prefactored matrix and the positive semi-definite
transverse part ``T = Σ k_d (I − ûûᵀ)`` lagged by one iteration on the
right-hand side. ``T ≤ L_d ⊗ I < W + L_k + L_d/h`` so the lagged iteration
converges, to the same minimiser as NEWTON.

Anderson acceleration (:class:`~core.kernels.Anderson`): each iterate extrapolates from the
last ``memory`` local/global iterates; an extrapolated iterate that increases
``g`` (evaluated with the local step's spring lengths at no extra pass) is
replaced by the plain one and the history restarts (Peng 2018 §3.2), so it never
does worse than plain iterations. Local/global converges slowly in the soft modes
(a flag turning about its pole, cloth swinging from pins: the prefactored matrix
has the full spring stiffness where the true Hessian has only the tension); on
those Anderson needed ~40 iterations where Chebyshev needed 45–60 and a
hand-picked ``ρ`` (its estimate from the first step, ~0.95, was far too low).

Steps near a collider (:func:`_near_collider`) keep Chebyshev
acceleration even when Anderson is chosen: the
solve does not see the colliders (the contact stage projects afterwards), so a
contact-limited step stalls and ends on whatever iterate the budget leaves, and
Anderson's extrapolations leave iterates further into the collider than
Chebyshev's (a cotton sheet resting on a ball twitched at 0.02–0.05 m/s instead of
≤ 0.002; a strip folding onto the ground crossed itself with numpy 1.24).

Warm start. Strain-limited cloth (every preset) is projected after each solve
(:mod:`.strainlimit`): where the solve's minimiser stretches springs past the limit (the
corners a sheet hangs from), the projection takes that back, and the next solve, started
from ``x₀ + h v₀``, has to stretch them again: a sheet hanging still needed 10–15
iterations every step to find the same minimiser. So the iterations start from
``x₀ + h v₀`` plus what the post-solve stages took off the previous step's solve, if that
has the smaller residual (one more local step per step). The convergence rule is
unchanged: the tolerance stays relative to ``‖∇g(x₀ + h v₀)‖``. Only when the state is
the one the previous step left (not after a rejected split step or a self-collision
pass) and away from colliders (whose push must not be undone).

Chebyshev acceleration: after ``chebyshev_start`` plain iterations,
``x⁽ᵏ⁺¹⁾ = ω_{k+1} (γ (x̂⁽ᵏ⁺¹⁾ − x⁽ᵏ⁾) + x⁽ᵏ⁾ − x⁽ᵏ⁻¹⁾) + x⁽ᵏ⁻¹⁾`` with
``ω = 2/(2 − ρ²)`` then ``ω ← 4/(4 − ρ² ω)``. The spectral radius ``ρ`` is
estimated on the first step of each (model, h) from the contraction of plain
iterations unless given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import kernels
from ..errors import SinewError
from . import forces as F
from .base import CONVERGENCE_RTOL, Integrator, Objective, StepInfo, converged, force_scale, pin_targets, split_targets
from .linsolve import FactorCache, SpringLaplacian, dot_for, matvec_add, product
from .model import Model, State

__all__ = ["LocalGlobal"]

_TINY = F._TINY


class _Prefactored(SpringLaplacian):
    """Per-(model, h) global-step matrix (the shared
    :class:`~.linsolve.SpringLaplacian` with ``a = m (1/h² + c/h) + kₐ`` and
    ``K = k + k_d/h``) and work buffers.

    The iterations keep the free vertices in the order of the factor (:attr:`order`: the
    banded factor's reverse Cuthill–McKee order when :func:`~.linsolve.factor_spd` chose
    it, else ``model.free_index``), so that each global step is the banded solve alone
    (:attr:`solve_ordered`), without permuting its right-hand side and solution.

    Attributes beyond :class:`~.linsolve.SpringLaplacian`'s (``s`` springs,
    ``f`` free vertices): ``order`` ``(f,)`` the free vertices in the iterations' order
    (``perm`` ``(f,)`` its positions in ``model.free_index``, or ``None`` for the same
    order); in that order ``matrix_ordered`` (CSR ``(f, f)``, the system matrix),
    ``coupling_ordered`` ``(f, p)``, ``ld_free`` CSR ``(f, n)`` (rows of ``L_d/h``),
    ``inc_t_ordered`` ``(f, s)``; ``ends`` ``(s, 2)`` each spring's ends as positions in that
    order (-1 for a pinned end); ``kd_h`` ``(s,)`` = ``k_d/h``;
    ``rho`` the Chebyshev spectral-radius estimate.
    """

    def __init__(self, model: Model, h: float) -> None:
        w = model.masses * (1.0 / h**2 + model.vertex_drag / h)
        w[model.anchor_index] += model.anchor_stiffness
        super().__init__(model, w, model.stiffness + model.damping / h)
        inc, inc_t = model.incidence, model.incidence_t
        perm = getattr(self.solve, "perm", None)
        self.perm = None if perm is None else np.asarray(perm, dtype=np.intp)
        if self.perm is None:  # the model's order: the shared matrices as they are
            self.order = model.free_index
            self.solve_ordered = self.solve
            self.matrix_ordered, self.coupling_ordered = self.matrix_csr, self.coupling
            self.inc_t_ordered = self.inc_t_free
        else:
            p = self.perm
            self.order = model.free_index[p]
            self.solve_ordered = self.solve.ordered
            self.matrix_ordered = self.matrix_csr[p][:, p].tocsr()
            self.coupling_ordered = self.coupling[p].tocsr()
            self.inc_t_ordered = self.inc_t_free[p].tocsr()
        self.ld_free = (inc_t @ sp.diags(model.damping / h) @ inc).tocsr()[self.order]
        self.kd_h = model.damping / h
        self.has_damping = bool(np.any(model.damping))
        s = model.spring_count
        # the local step's kernel (sinew_fast_local): each spring's ends as columns of the
        # free vertices in the solver's order (-1: pinned, its part of d given apart)
        column = np.full(model.vertex_count, -1, np.int64)
        column[self.order] = np.arange(len(self.order))
        self.ends = np.ascontiguousarray(column[np.asarray(model.springs, np.int64).reshape(-1, 2)])
        self.stiffness = kernels.array(model.stiffness, np.float64, (s,), "spring stiffness")
        self.rest = kernels.array(model.rest_lengths, np.float64, (s,), "spring rest lengths")
        self.kd_h = kernels.array(self.kd_h, np.float64, (s,), "spring damping")
        self.rest_dir = kernels.array(model.rest_directions, np.float64, (s, 3), "spring rest directions")
        self._proj0 = np.zeros(s)  # û⁰·d⁰ of the step (damping_start)
        self._energy = np.zeros(1)
        self._out = np.empty((3, len(self.order)))
        self._local = kernels.library().sinew_fast_local
        # (the constant arrays' addresses, taken once: an address costs a microsecond, and
        # the kernel itself some twenty on the bench's flag)
        self._at = {name: a.ctypes.data for name, a in (
            ("ends", self.ends), ("k", self.stiffness), ("rest", self.rest), ("kd_h", self.kd_h),
            ("proj0", self._proj0), ("rest_dir", self.rest_dir), ("energy", self._energy),
            ("out", self._out))}
        self.rho: float | None = None
        #: :meth:`spring_forces` also sets :attr:`energy` (J), the spring and damping part of
        #: ``g`` (for the damping part, :meth:`damping_start` gives the step's ``û⁰·d⁰``).
        self.want_energy = False
        self.energy = 0.0

    def damping_start(self, proj0: np.ndarray) -> None:
        """The step's ``û⁰·d⁰`` ``(s,)``, for the damping part of :attr:`energy`."""
        self._proj0[...] = proj0

    def spring_forces(self, model: Model, xf: np.ndarray, d_pin: np.ndarray | None,
                      u0: np.ndarray | None, out: np.ndarray) -> np.ndarray:
        """Local step and ``b(x) − c``: ``out = A_f per(x)`` (see :meth:`LocalGlobal._iterate`).

        ``per_s = k_s L_s d_s/‖d_s‖ + (k_d/h)(d_s − (d_s·û⁰_s) û⁰_s)`` with ``d = Aᵀ x``,
        summed onto the free vertices (``sinew_fast_local``; also sets :attr:`energy` when
        :attr:`want_energy`).

        Shapes: ``xf (f, 3)``, columns contiguous (Fortran order, as the solves give it);
        ``d_pin (3, s)`` (pinned part of ``Aᵀ x``, zero on the springs that touch no pin) or
        ``None``; ``u0 (3, s)`` or ``None`` (no damping); ``out (f, 3)``, returned.
        """
        f = len(self.order)
        if xf.shape != (f, 3) or not xf.flags.f_contiguous or xf.dtype != np.float64:
            raise SinewError("FAST's local step needs the free vertices (f, 3) in Fortran order")
        s = len(self.rest)
        for name, a in (("d_pin", d_pin), ("u0", u0)):
            if a is not None and (a.shape != (3, s) or not a.flags.c_contiguous or a.dtype != np.float64):
                raise SinewError(f"FAST's local step needs {name} (3, {s}), C-contiguous float64")
        direct = out.flags.f_contiguous and out.shape == (f, 3) and out.dtype == np.float64
        at = self._at
        damp = u0 is not None
        kernels.check_status(self._local(
            s, f, at["ends"], xf.ctypes.data, None if d_pin is None else d_pin.ctypes.data,
            at["k"], at["rest"], at["kd_h"] if damp else None, u0.ctypes.data if damp else None,
            at["proj0"] if damp else None, at["rest_dir"], out.ctypes.data if direct else at["out"],
            at["energy"]), "FAST local step")
        if self.want_energy:
            self.energy = float(self._energy[0])
        if not direct:
            out[...] = self._out.T
        return out


#: m added to a step's motion when deciding whether a collider is near the cloth.
_NEAR = 0.05


def _near_collider(colliders: Sequence[Any], x0: np.ndarray, x: np.ndarray) -> bool:
    """Whether any collider may touch the cloth in this step: the cloth's positions at the
    start ``x0`` and the solve's start ``x`` (both ``(n, 3)``) grown by the step's largest
    motion, :data:`_NEAR` and the collider's thickness overlap its box (meshes) or come
    that close to it (planes and spheres, by their signed distance). Colliders of unknown
    type count as near."""
    if not len(colliders):
        return False
    reach = float(np.sqrt(np.einsum("ij,ij->i", x - x0, x - x0).max(initial=0.0))) + _NEAR
    lo = np.minimum(x0.min(axis=0), x.min(axis=0))
    hi = np.maximum(x0.max(axis=0), x.max(axis=0))
    for c in colliders:
        grow = reach + float(getattr(c, "thickness", 0.0))
        if hasattr(c, "c0") and hasattr(c, "c1"):  # a mesh over one substep
            pts = (c.c0, c.c1)
        elif hasattr(c, "vertices"):
            pts = (c.vertices,) if getattr(c, "previous", None) is None else (c.vertices, c.previous)
        elif hasattr(c, "signed_distance"):
            if float(c.signed_distance(x0).min()) < grow:
                return True
            continue
        else:
            return True
        c_lo = np.min([p.min(axis=0) for p in pts], axis=0)
        c_hi = np.max([p.max(axis=0) for p in pts], axis=0)
        if np.all(c_lo <= hi + grow) and np.all(lo <= c_hi + grow):
            return True
    return False


class LocalGlobal(Integrator):
    """Liu 2013 local/global implicit Euler, Anderson- or Chebyshev-accelerated.

    Parameters
    ----------
    acceleration : str
        ``'ANDERSON'`` (default): Anderson acceleration of the local/global map
        (:class:`~core.kernels.Anderson`), Chebyshev in steps near a collider (module docstring);
        ``'CHEBYSHEV'``: Wang 2015; ``'NONE'``: plain iterations.
    memory : int
        Anderson: how many earlier iterates the extrapolation combines (1 to
        :data:`~core.kernels.ANDERSON_MEMORY`; clamped).
    rho : float, optional
        Spectral radius estimate for Chebyshev; estimated if ``None``.
    gamma : float
        Under-relaxation of the Chebyshev iteration (Wang uses 0.9–1).
    chebyshev_start : int
        Plain iterations before Chebyshev acceleration starts.
    compute_residual : bool
        Evaluate ``‖∇g‖`` after the last iteration (one extra local step) and stop
        early when it meets the tolerance.
    tolerance : float, optional
        Stop as soon as ``‖∇g‖ ≤ tolerance · max(‖∇g(x_start)‖, ‖M g‖)``
        (:func:`~.base.converged`); default :data:`~.base.CONVERGENCE_RTOL`, 0 runs
        every iteration. ``iterations`` is the budget.
    warm_start : bool
        Start a step's iterations from ``x₀ + h v₀`` plus what the strain limit took off
        the previous step's solve, when that has the smaller residual (module
        docstring); only with ``compute_residual`` and away from colliders.
    """

    name = "FAST"
    label = "Fast mass-spring (Liu 2013)"
    description = ("Liu et al. 2013 local/global solver with a prefactored matrix: stable at "
                   "large steps and fast; a few iterations give plausible motion")
    implicit = True

    def __init__(self, acceleration: str = "ANDERSON", memory: int = 5, rho: float | None = None,
                 gamma: float = 0.9, chebyshev_start: int = 4, compute_residual: bool = True,
                 tolerance: float | None = None, warm_start: bool = True) -> None:
        if acceleration not in ("ANDERSON", "CHEBYSHEV", "NONE"):
            raise ValueError(f"acceleration must be 'ANDERSON', 'CHEBYSHEV' or 'NONE', got {acceleration!r}")
        self.acceleration = acceleration
        self.chebyshev = acceleration == "CHEBYSHEV"
        self.memory = min(max(int(memory), 1), kernels.ANDERSON_MEMORY)
        self.rho = rho
        self.gamma = float(gamma)
        self.chebyshev_start = max(int(chebyshev_start), 1)
        self.compute_residual = bool(compute_residual)
        self.tolerance = CONVERGENCE_RTOL if tolerance is None else float(tolerance)
        self._cache: FactorCache[_Prefactored] = FactorCache()
        #: ``‖∇g‖`` at the start and after each iteration of the last step (N).
        self.residual_history: list[float] = []
        #: Anderson restarts in the last step (an extrapolated iterate that increased ``g``).
        self.restarts = 0
        self.warm_start = bool(warm_start)
        # (model uid, state.x after the last step (n, 3), what the post-solve stages took
        # off that step's solve (f, 3)): the warm start of the next step
        self._carry: tuple[int, np.ndarray, np.ndarray] | None = None

    def prefactored(self, model: Model, h: float) -> _Prefactored:
        """The cached global-step factorisation for ``(model, h)`` (the last few pairs are
        kept, each with its own Chebyshev ``ρ``: :class:`~.linsolve.FactorCache`)."""
        return self._cache.get((model.uid, float(h)), lambda: _Prefactored(model, h))

    def step(self, model: Model, state: State, h: float, *, pins: np.ndarray | None = None,
             iterations: int = 10, colliders: Sequence[Any] = (),
             external: np.ndarray | None = None, tolerance: float | None = None,
             self_collision: Any = None) -> StepInfo:
        tol = self.tolerance if tolerance is None else float(tolerance)
        targets = pin_targets(model, state, pins)
        obj = Objective(model, state, h, targets, external=external)
        x = obj.start(targets)
        free = model.free_index
        its = max(int(iterations), 1)
        r = rel = float("nan")
        ok = True
        solved = None
        if len(free) and model.spring_count:
            pre = self.prefactored(model, h)
            contact = _near_collider(colliders, obj.x0, x)
            carry, guess = self._carry, None
            if (carry is not None and self.warm_start and not contact and carry[0] == model.uid
                    and np.array_equal(carry[1], state.x)):
                guess = x.take(free, axis=0) + carry[2]
            its, r, r0 = self._iterate(model, pre, obj, x, split_targets(model, targets)[0], its,
                                       contact=contact, guess=guess, tolerance=tol)
            ok = not self.compute_residual or converged(r, r0, model, tol)
            rel = r / force_scale(model, r0)
            if not contact:
                solved = x.take(free, axis=0)
        else:
            x = obj.predicted(targets)  # no springs: ŷ is the minimiser
            its = 1 if len(free) else its
            if self.compute_residual:
                r = F.norm(obj.gradient(x))
            self.residual_history = [r]
        x0 = obj.x0
        info = self._finish(model, state, x, (x - x0) / h, x0, h, targets, colliders, StepInfo(its, r, ok, rel),
                            external=external, tolerance=tolerance, self_collision=self_collision)
        self._carry = None
        if solved is not None:
            taken = solved - state.x.take(free, axis=0)  # what the strain limit took off the solve
            if np.any(taken):
                self._carry = (model.uid, state.x.copy(), taken)
        return info

    def solve_free(self, model: Model, obj: Objective, x: np.ndarray, targets: np.ndarray,
                   iterations: int) -> None:
        """``iterations`` local/global iterations on ``x`` ``(n, 3)`` (its free rows, in place)
        for ``obj`` with the hard pins at ``targets`` ``(p, 3)``, every one of them run
        (no tolerance), and no collider, strain limit or other post-solve stage: the step
        without contact, as another integrator's start (VBD's for pinned cloth)."""
        if len(model.free_index) and model.spring_count:
            self._iterate(model, self.prefactored(model, obj.h), obj, x, targets,
                          max(int(iterations), 1), tolerance=0.0)

    def _iterate(self, model: Model, pre: _Prefactored, obj: Objective, x: np.ndarray,
                 targets: np.ndarray, iterations: int, contact: bool = False,
                 guess: np.ndarray | None = None,
                 tolerance: float | None = None) -> tuple[int, float, float]:
        """Run the local/global iterations on ``x`` ``(n, 3)`` in place (free rows).

        The right-hand side of the global step at ``x`` is
        ``b(x) = c + A_f (per(x))`` with the per-step constant ``c`` and the
        weighted local step ``per`` (:meth:`_Prefactored.spring_forces`); the
        damping term ``(k_d/h)(Δd − (Δd·û⁰)û⁰)`` with ``Δd = d − d⁰`` is split
        into its ``d`` part (in ``per``) and its ``d⁰`` part (in ``c``). Since
        ``∇E(x) = L_k x − J d(x)`` (Liu 2013 §4), the gradient of ``g`` over
        the free vertices is exactly ``∇g(x) = S x − b(x)`` (``S`` the system
        matrix), so the residual of every iterate costs one product with ``S`` beside
        the local step the next iteration needs anyway: the loop stops at the first
        iterate that meets the tolerance (:func:`~.base.converged` against
        ``‖∇g(x_start)‖``, measured on the first iteration), and only a step that uses
        its whole budget pays one more local step for the residual of its result.

        ``guess`` ``(f, 3)``, optional: a first iterate to use instead of ``x_start``
        (free rows of ``x``) if its residual is smaller; the tolerance stays relative to
        ``‖∇g(x_start)‖``.

        Returns (iterations run, ``‖∇g‖`` at the final ``x``, ``‖∇g(x_start)‖``), the
        residuals ``nan`` unless ``compute_residual``.
        """
        rtol = self.tolerance if tolerance is None else tolerance
        # the free vertices in the factor's order (:class:`_Prefactored`); rows by ``take``:
        # a third of the time of fancy indexing for (f, 3) rows
        free = pre.order
        y_f = obj.y.take(free, axis=0)
        const = obj.w[free, None] * y_f
        damp = pre.has_damping
        if damp:
            matvec_add(pre.ld_free, np.ascontiguousarray(obj.x0), const)
            d0, u0 = obj.geometry0()
            # c_s = -(k_d/h)(d⁰ − (d⁰·û⁰)û⁰) vanishes (to round-off) unless d⁰ ≈ 0,
            # where û⁰ is the rest direction instead of d⁰/‖d⁰‖
            tiny = np.flatnonzero(obj.length0 <= _TINY)
            if len(tiny):
                dt, ut = d0[:, tiny], u0[:, tiny]
                c_s = np.zeros((model.spring_count, 3))
                c_s[tiny] = (-(pre.kd_h[tiny]) * (dt - (dt * ut).sum(axis=0) * ut)).T
                const += pre.inc_t_ordered @ c_s
        else:
            u0 = None
        d_pin = None
        if len(model.pinned_index):
            const -= product(pre.coupling_ordered, targets)
            d_pin = np.zeros((3, model.spring_count))
            d_pin[:, pre.pin_springs] = product(pre.inc_pin_springs, targets).T
        rho = self.rho if self.rho is not None else pre.rho
        cheb = self.chebyshev or (contact and self.acceleration == "ANDERSON")
        use_cheb = cheb and rho is not None
        measure = cheb and rho is None
        xf = np.asfortranarray(x.take(free, axis=0))  # columns contiguous, as SuperLU wants them
        const = np.asfortranarray(const)
        rhs = np.empty_like(const)
        xf_prev = xf
        omega = 1.0
        ratios = []
        last_step = None
        last_plain = None
        cheb_start = self.chebyshev_start
        check = self.compute_residual
        hist: list[float] = []
        tol = 0.0
        grad = np.empty_like(const)
        # S x of the current and the previous iterate, carried along: every iterate is a
        # combination of solves S⁻¹ rhs and earlier iterates, so S x needs no product
        sx = product(pre.matrix_ordered, xf) if check else None
        sx_prev = sx
        its = iterations
        best_r, best_x = np.inf, xf  # the iterate with the smallest residual so far
        aa = kernels.Anderson(self.memory, xf.shape) if self.acceleration == "ANDERSON" and not contact else None
        self.restarts = 0
        pre.want_energy = aa is not None
        if aa is not None:
            if damp:
                pre.damping_start(np.einsum("ks,ks->s", *obj.geometry0()))
            w3 = np.tile(obj.w[free], 3)  # W per entry of a flattened (column-major) (f, 3)
            y_f = np.asfortranarray(y_f)
            diff = np.empty_like(const)
            vdot = dot_for(w3.size)

            def objective(xf: np.ndarray) -> float:
                # g(x) up to a constant, with E(x) from the local step just taken at x
                dv = np.subtract(xf, y_f, out=diff).ravel(order="F")
                dv *= dv
                return pre.energy + 0.5 * vdot(w3, dv)
        g_prev = np.inf
        plain = None  # (G(x), S G(x)) of the previous iterate when x was extrapolated
        ready = False  # rhs already holds b(xf)
        if guess is not None and check:
            # the reference is ‖∇g(x_start)‖ whatever the first iterate
            pre.spring_forces(model, xf, d_pin, u0, rhs)
            rhs += const
            r_start = F.norm(np.subtract(sx, rhs, out=grad))
            tol = rtol * force_scale(model, r_start)
            e_start = pre.energy
            xg = np.asfortranarray(guess if pre.perm is None else guess.take(pre.perm, axis=0))
            sxg = np.asfortranarray(product(pre.matrix_ordered, xg))
            rhs_g = np.empty_like(const)
            pre.spring_forces(model, xg, d_pin, u0, rhs_g)
            rhs_g += const
            if F.norm(np.subtract(sxg, rhs_g, out=grad)) < r_start:
                hist.append(r_start)
                xf = xf_prev = best_x = xg
                sx = sx_prev = sxg
                rhs = rhs_g
            else:
                pre.energy = e_start
                guess = None
            ready = True
        for it in range(iterations):
            if not ready:
                pre.spring_forces(model, xf, d_pin, u0, rhs)
                rhs += const
            ready = False
            if aa is not None:
                # g(x) = ½ Σ W ‖x − ŷ‖² + E(x) + damping (up to a constant); Peng et al. 2018
                # §3.2: an extrapolated iterate must not increase it, else take the plain one
                g_x = objective(xf)
                if plain is not None and g_x > g_prev:
                    xf, sx = plain
                    aa.clear()
                    self.restarts += 1
                    pre.spring_forces(model, xf, d_pin, u0, rhs)
                    rhs += const
                    g_x = objective(xf)
                g_prev = g_x
            if check:
                # ∇g(x) = S x − b(x)
                r_it = F.norm(np.subtract(sx, rhs, out=grad))
                hist.append(r_it)
                if it == 0 and guess is None:
                    tol = rtol * force_scale(model, r_it)
                if r_it <= tol:
                    its = it
                    break
                if r_it < best_r:
                    best_r, best_x = r_it, xf
            xf_hat = pre.solve_ordered(rhs)
            sx_new = rhs.copy(order="F") if check else None  # S x̂ = rhs
            if aa is not None:
                xf_hat = np.asfortranarray(xf_hat)
                xf_new, sx_new_aa = aa.extrapolate(xf_hat, xf_hat - xf, sx_new)
                plain = None if xf_new is xf_hat else (xf_hat, sx_new)
                sx_new = sx_new_aa
            elif use_cheb and it >= cheb_start:
                if it == cheb_start:
                    omega = 2.0 / (2.0 - rho * rho)
                else:
                    omega = 4.0 / (4.0 - rho * rho * omega)
                a, b, c = omega * self.gamma, omega * (1.0 - self.gamma), 1.0 - omega
                xf_new = a * xf_hat + b * xf + c * xf_prev
                if check:
                    sx_new = a * sx_new + b * sx + c * sx_prev
                plain = F.norm(xf_hat - xf)
                if last_plain is not None and plain > last_plain:
                    # safeguard: the local/global map is not linear, so Chebyshev can
                    # overshoot; restart from the plain iterate (Wang 2015 §4)
                    xf_new = xf_hat
                    sx_new = rhs.copy(order="F") if check else None
                    cheb_start = it + 2
                last_plain = plain
            else:
                xf_new = xf_hat
            if measure:
                step_norm = F.norm(xf_new - xf)
                if last_step is not None and last_step > 0 and it >= 2:
                    ratios.append(step_norm / last_step)
                last_step = step_norm
            xf_prev, xf = xf, xf_new
            sx_prev, sx = sx, sx_new
        if measure and ratios:
            pre.rho = float(min(max(ratios[-1], 0.0), 0.9999))
        self.residual_history = hist
        if not check:
            x[free] = xf
            return its, float("nan"), float("nan")
        r = hist[-1]
        if its == iterations:  # the budget ran out: the residual of the last solve
            grad = np.subtract(sx, pre.spring_forces(model, xf, d_pin, u0, rhs), out=grad)
            grad -= const
            r = F.norm(grad)
            hist.append(r)
            if best_r < r:
                # accelerated iterates are not monotone: keep the best one seen
                xf, r = best_x, best_r
        x[free] = xf
        return its, r, hist[0]
