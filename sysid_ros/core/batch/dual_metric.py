"""The dual-metric program (arXiv 2603.14656, eqs. 28, 33): torque residuals weighted by the inverse
mass matrix (or drag matrix), affine in θ.

Two readings of eq. 28, ``min Σ_k r_k(θ)ᵀ M_k(θ)⁻¹ r_k(θ)``:

* ``metric="estimate"`` (the default, :func:`_fixed_point`): the dual metric *at the estimate*,
  θ* = argmin_θ Σ_k r_k(θ)ᵀ M_k(θ*)⁻¹ r_k(θ) (+ prior), reached by re-weighting: each step a convex
  weighted least squares with the metric frozen at the previous θ. The residual is weighted by the
  robot's metric; the metric is not itself a free variable of the fit.
* ``metric="joint"`` (:func:`_proximal_newton`, the SDP :func:`_dual_metric_sdp` as fall-back):
  minimised over θ in M too, the seed's eq. 33 as written. On data with noise this estimate is
  biased toward a larger metric, since inflating M_k shrinks the weighted noise r_kᵀ M_k⁻¹ r_k:
  on real-like vendor logs it exported rotor inertias up to 10× the truth's and held-out torque
  errors 1.4–1.5× pc_ls's (issue 22), where the fixed point is within 5 % of pc_ls's. On
  noise-free data both give the truth (a zero residual is optimal whatever the weights).
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import replace

import numpy as np
import scipy.linalg
import scipy.sparse

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch import conic
from sysid_ros.core.batch.convex import (
    FEASIBILITY_TOLERANCE,
    TIE_BREAK,
    ConvexProgram,
    ConvexSolution,
    column_scale,
    cp,
    direct_feasible_set,
    direct_solve,
    near_boundary,
    prior_pull_weights,
    tie_break_basis,
)
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.target import Target

log = logging.getLogger(__name__)
#: cvxpy's status texts (without importing it)
OPTIMAL, OPTIMAL_INACCURATE = "optimal", "optimal_inaccurate"


#: weight of the dual-metric program's pull toward the nominal model, relative to its data term's
#: relative residual ρ² (:func:`dual_metric_program`): ``DUAL_METRIC_PRIOR·ρ²·Σ(c_i Δθ_i)²`` beside a
#: data term of curvature ~Σ c_i², so the prior only regularises, weighted by the data's own noise.
#: It was 2·PRIOR_WEIGHT (200): on real logs (ρ² ~ 0.01–0.1) that outweighed the data and pinned
#: joint friction to the model file's (Coulomb 0 on 5 of 7 joints, issue 22); the exported θ takes
#: the directions the data leave free from the prior anyway (core.batch.plausible)
DUAL_METRIC_PRIOR = 2.0

def dual_metric_program(target: Target, y: np.ndarray, tau: np.ndarray, ym: np.ndarray,
                        m_known: np.ndarray, *, regularizer: str | None = None,
                        weight: float = 0.0, metric: str = "estimate", direct: bool = True
                        ) -> ConvexSolution:
    """The dual-metric program (eq. 33) on ``K`` samples.

    ``y (K, n, p)`` regressor, ``tau (K, n)`` torques minus the known part, ``ym (K, n, n, p)``
    mass-matrix regressor and ``m_known (K, n, n)`` its known part (``M_k(θ) = M_known + Y_M θ``).
    ``M`` is the system's metric (seed eq. 29, affine in θ): the mass matrix of an
    inertia-dominated system, the drag matrix D(q) of a drag-dominated one (τ = D(q) q̇, seed
    eqs. 4, 18; ``ym`` its regressor, ``y = ym @ q̇``, target :func:`coefficient_target`).

    min (1/K) Σ_k r_kᵀ M_k⁻¹ r_k + tie-break + prior pull (+ weight·regulariser) over the
    consistent set. ``metric="estimate"``: M_k at the estimate (the fixed point of re-weighted
    least squares, :func:`_fixed_point`; see the module's docstring); ``metric="joint"``: minimised
    through M_k too, the SDP's optimum (eq. 33: the Schur LMI holds iff s_k ≥ r_kᵀ M_k⁻¹ r_k),
    solved by proximal Newton (:func:`_proximal_newton`): the data term is smooth and convex
    wherever every M_k ≻ 0, which the consistency constraints ensure, so each step is a small
    conic program on θ alone instead of an SDP with K LMIs; the SDP (:func:`_dual_metric_sdp`)
    is the fall-back when a step fails.

    The prior pull (arms with plausibility bounds, :meth:`ConvexProgram.prior_pull`) is
    least_squares_program's in this objective's units: there ``ρ·PRIOR_WEIGHT·Σ(c_i Δθ_i)²``
    beside the residual norm ‖e‖ (curvature XᵀX/ρ), i.e. ``2·PRIOR_WEIGHT·ρ²·Σ(c_i Δθ_i)²``
    beside ‖e‖² (curvature 2XᵀX), here with :data:`DUAL_METRIC_PRIOR` in place of 2·PRIOR_WEIGHT,
    with ρ² the relative residual energy of the best fit and c_i
    the column norms of the data term's quadratic form. Here the quadratic form is the data term
    in the prior's metric, (1/K) Σ ‖L_k⁻¹ (Y_k θ − τ_k)‖² (M_k⁰ = L_k L_kᵀ), so c_i² =
    (1/K) Σ_k ‖L_k⁻¹ Y_k e_i‖² and ρ² = its minimum over its value at θ = 0.
    """
    data = _DualMetricData(target, y, tau, ym, m_known)
    scale = _standard_scale(target)
    regularised = regularizer in ("logdet", "pullback") and weight > 0
    if direct and metric == "estimate" and not regularised:
        try:  # the same step programs in Clarabel's own form: no cvxpy import nor compilation
            return _fixed_point(target, data, _DirectSteps(target, scale, data))
        except _DirectSolveError as exc:
            log.debug("dual metric: %s; solving its steps through cvxpy", exc)
    prog = ConvexProgram(target, consistent=True, scale=scale)
    extra = (TIE_BREAK * max(data.data_ls, 1e-16) * prog.tie_break()
             + DUAL_METRIC_PRIOR * data.rho2 * prog.prior_pull(data.column_norms))
    if regularizer == "logdet" and weight > 0:
        extra = extra + weight * prog.logdet_divergence()
    elif regularizer == "pullback" and weight > 0:
        extra = extra + weight * prog.pullback()
    if metric == "estimate":
        return _fixed_point(target, data, _CvxpySteps(prog, data, extra))
    if metric != "joint":
        raise IdentificationError(f"unknown dual metric {metric!r}; expected 'estimate' or 'joint'")
    try:
        return _proximal_newton(prog, data, extra)
    except _NewtonError as exc:
        log.warning("dual-metric proximal Newton failed (%s); solving the SDP", exc)
    return _dual_metric_sdp(prog, data, extra)


class _NewtonError(Exception):
    """The proximal Newton iteration could not proceed (a mass matrix not positive definite, no
    descent, no convergence)."""


#: proximal Newton stops when the model's decrease is below this fraction of the objective
NEWTON_TOL = 1e-7
#: ... or when no step along the model's minimiser descends and its decrease is below this
#: fraction (the accuracy of the subproblems' solutions)
NEWTON_FLOOR = 1e-6
NEWTON_MAX_STEPS = 40
#: proximal Newton stops at an objective below this (normalised: ~1 at θ = 0; a relative residual
#: of 1e-10, below what the steps' conic programs resolve)
NEWTON_EXACT = 1e-20


class _DualMetricData:
    """The dual-metric data term D(β) = (1/K) Σ r_kᵀ M_k⁻¹ r_k on base parameters β = Bθ, with
    r_k = (Y_k β − τ_k)/σ and M_k = (M_known + Y_M,k β)/μ (σ: RMS torque, μ: mean diagonal of
    the prior's mass matrix), and the figures of the prior pull and tie-break."""

    def __init__(self, target: Target, y: np.ndarray, tau: np.ndarray, ym: np.ndarray,
                 m_known: np.ndarray):
        base = target.base
        self.k, self.n, _ = y.shape
        self.matrix = base.matrix
        self.sigma = max(float(np.sqrt(np.mean(tau**2))), 1e-12)
        m_prior = m_known + ym @ target.prior
        self.mu = max(float(np.mean(np.abs(np.einsum("kii->ki", m_prior)))), 1e-12)
        self.yb = base.columns(y) / self.sigma
        self.ymb = base.columns(ym) / self.mu
        self.tau = tau / self.sigma
        self.m_known = m_known / self.mu
        m_prior = m_prior / self.mu
        # size of the data term at the unconstrained least-squares β, metric of the prior
        beta_ls = rla.lstsq(self.yb.reshape(-1, base.rank), self.tau.reshape(-1))
        r_ls = self.yb @ beta_ls - self.tau
        self.data_ls = float(np.mean(np.einsum("ki,ki->k", r_ls,
                                               np.linalg.solve(m_prior, r_ls[..., None])[..., 0])))
        try:  # the prior's metric as a quadratic form: rows L_k⁻¹ Y_k / √K
            chol = np.linalg.cholesky(m_prior)
        except np.linalg.LinAlgError:
            chol = None
        if chol is None:
            self.column_norms, self.rho2 = np.zeros(target.n_params), 0.0
        else:
            rows = np.linalg.solve(chol, y / self.sigma).reshape(-1, y.shape[-1]) / np.sqrt(self.k)
            rhs = np.linalg.solve(chol, self.tau[..., None])[..., 0].reshape(-1) / np.sqrt(self.k)
            rows_b = np.linalg.solve(chol, self.yb).reshape(-1, base.rank) / np.sqrt(self.k)
            fit = rhs - rows_b @ rla.lstsq(rows_b, rhs)
            self.column_norms = np.linalg.norm(rows, axis=0)
            self.rho2 = float(fit @ fit) / max(float(rhs @ rhs), 1e-300)

    def value(self, beta: np.ndarray) -> float:
        """D(β), +inf where a mass matrix is not positive definite."""
        r = self.yb @ beta - self.tau
        m = self.m_known + self.ymb @ beta
        try:
            np.linalg.cholesky(m)
        except np.linalg.LinAlgError:
            return np.inf
        return float(np.mean(np.einsum("ki,ki->k", r, np.linalg.solve(m, r[..., None])[..., 0])))

    def model(self, beta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``(D, g (r,), R (r, r))`` with D(β + Δ) ≈ D + gᵀΔ + ‖RΔ‖² (RᵀR = ½ ∇²D, exact:
        ∇²D = (2/K) Σ G_kᵀ M_k⁻¹ G_k with G_k = Y_k − (∂M_k/∂β) u_k, u_k = M_k⁻¹ r_k)."""
        r = self.yb @ beta - self.tau
        m = self.m_known + self.ymb @ beta
        try:
            chol = np.linalg.cholesky(m)
        except np.linalg.LinAlgError as exc:
            raise _NewtonError("a mass matrix is not positive definite") from exc
        u = np.linalg.solve(m, r[..., None])[..., 0]
        value = float(np.mean(np.einsum("ki,ki->k", r, u)))
        rank = self.yb.shape[-1]
        dm_u = np.matmul(u[:, None, None, :], self.ymb)[:, :, 0, :]  # (∂M_k/∂β) u_k  (K, n, r)
        grad = u.reshape(-1) @ (2.0 * self.yb - dm_u).reshape(-1, rank) / self.k
        p = np.linalg.solve(chol, self.yb - dm_u).reshape(-1, rank)  # L_k⁻¹ G_k, stacked
        half_hessian = p.T @ p / self.k
        lam, vec = rla.eigh(half_hessian)
        return value, grad, np.sqrt(np.maximum(lam, 0.0))[:, None] * vec.T


def _proximal_newton(prog: ConvexProgram, data: _DualMetricData, extra: cp.Expression
                     ) -> ConvexSolution:
    """min D(Bθ) + h(θ) over the program's constraints, h = ``extra`` (convex, kept exact). Each
    step minimises D's second-order model at θ_t plus h (one conic program compiled once, its
    data as cvxpy Parameters, scaled by 1/F(θ_t) so that the solver's tolerances are relative),
    then backtracks on F = D + h along the step (Armijo). Converges to the minimiser of the
    convex F (proximal Newton, Lee, Sun & Saunders 2014); the constraints' multipliers are the
    last step's, rescaled to F."""
    start = time.perf_counter()
    rank = data.matrix.shape[0]
    grad_p = cp.Parameter(rank, name="gradient")
    root_p = cp.Parameter((rank, rank), name="half_hessian_root")
    centre_p = cp.Parameter(rank, name="root_times_beta")
    offset_p = cp.Parameter(name="model_offset")
    inv_scale = cp.Parameter(nonneg=True, name="inverse_objective_scale")
    beta = data.matrix @ prog.theta
    # (D_t + gᵀ(β − β_t) + ‖R(β − β_t)‖² + h(θ)) / F_t: 1 at θ_t, so that the solver's relative
    # tolerances apply to the decrease
    objective = (grad_p @ beta + offset_p + cp.sum_squares(root_p @ beta - centre_p)
                 + inv_scale * extra)

    def h(theta: np.ndarray) -> float:
        prog.theta_scaled.value = theta / prog.scale
        value = extra.value
        return float(value) if value is not None else np.inf

    def step(theta_t: np.ndarray) -> tuple[ConvexSolution, float, float]:
        """Minimiser of the model at θ_t: (solution in θ, F(θ_t)'s data part, model decrease)."""
        beta_t = data.matrix @ theta_t
        value, grad, root = data.model(beta_t)
        scale = max(value + h_t, 1e-300) if np.isfinite(h_t) else max(value, 1e-300)
        grad_p.value, root_p.value = grad / scale, root / np.sqrt(scale)
        centre_p.value = root_p.value @ beta_t
        offset_p.value = (value - grad @ beta_t) / scale
        inv_scale.value = 1.0 / scale
        sol = prog.solve(objective, solvers=("CLARABEL",))
        if sol.status != cp.OPTIMAL and not prog.feasible(sol.theta, FEASIBILITY_TOLERANCE):
            raise _NewtonError(f"a step's conic program ended {sol.status} outside the constraints")
        d_beta = data.matrix @ (sol.theta - theta_t)
        model_change = grad @ d_beta + float(np.sum((root @ d_beta) ** 2)) + h(sol.theta) - h_t
        sol = replace(sol, multipliers={k: v * scale for k, v in sol.multipliers.items()})
        return sol, value, model_change

    theta = prog.target.prior.astype(float)
    h_t = np.inf
    sol = None
    if not prog.feasible(theta) or not np.isfinite(data.value(data.matrix @ theta)):
        # the first step from a prior outside the feasible set is taken in full
        sol, _, _ = step(theta)
        theta = sol.theta
    decrease = np.inf
    for iteration in range(1, NEWTON_MAX_STEPS + 1):
        h_t = h(theta)
        f_exact = data.value(data.matrix @ theta) + h_t
        if sol is not None and f_exact <= NEWTON_EXACT:  # an exact fit: nothing left to resolve
            break
        try:
            sol, d_t, change = step(theta)
        except IdentificationError:
            if sol is None or f_exact > EXACT_FIT**2:
                raise
            break  # the step's program, scaled by 1/F, is beyond the solver on a (near) exact fit
        f_t = d_t + h_t
        decrease = -change / max(f_t, 1e-300)
        if decrease <= NEWTON_TOL:
            if data.value(data.matrix @ sol.theta) + h(sol.theta) <= f_t:
                theta = sol.theta
            break
        direction, alpha = sol.theta - theta, 1.0
        while data.value(data.matrix @ (theta + alpha * direction)) + h(theta + alpha * direction) \
                > f_t + 0.25 * alpha * change:
            alpha *= 0.5
            if alpha < 1e-3:
                break
        else:
            theta = theta + alpha * direction
            log.debug("proximal Newton step %d: F %.6e, model decrease %.3e, step %.3g", iteration,
                      f_t, decrease, alpha)
            continue
        if decrease <= NEWTON_FLOOR:  # the subproblems' own accuracy: converged
            break
        raise _NewtonError(f"no descent along the Newton step (relative model decrease {decrease:.2e})")
    else:
        raise _NewtonError(f"no convergence in {NEWTON_MAX_STEPS} steps (relative model decrease "
                             f"{decrease:.2e})")
    objective_value = data.value(data.matrix @ theta) + h(theta)
    return replace(sol, theta=theta, status=cp.OPTIMAL, objective=objective_value, iterations=iteration,
                   solve_time=time.perf_counter() - start, active=prog._active(theta))

#: the re-weighting stops when a step changes the weighted fit by less than this fraction of the
#: objective (‖R_t B(θ_{t+1} − θ_t)‖² / F_t, R_t the weighted rows' triangular factor) ...
FIXED_POINT_TOL = 1e-8
#: ... or after this many steps (then the result says it did not converge)
FIXED_POINT_MAX_STEPS = 30


class _CvxpySteps:
    """The re-weighting step's program stated in cvxpy, ``‖R β − c‖² + floor + h(θ)`` over the
    program's constraints (h = ``extra``), all scaled by 1/F: compiled once, its data as cvxpy
    Parameters."""

    def __init__(self, prog: ConvexProgram, data: _DualMetricData, extra: cp.Expression):
        rank = data.matrix.shape[0]
        self.prog, self.extra = prog, extra
        self.root = cp.Parameter((rank, rank), name="weighted_rows_root")
        self.centre = cp.Parameter(rank, name="weighted_rows_rhs")
        self.offset = cp.Parameter(name="weighted_residual_floor")
        self.inv_scale = cp.Parameter(nonneg=True, name="inverse_objective_scale")
        self.objective = (cp.sum_squares(self.root @ (data.matrix @ prog.theta) - self.centre)
                          + self.offset + self.inv_scale * extra)

    def h(self, theta: np.ndarray) -> float:
        """h(θ) of ``theta (p,)`` (+inf where cvxpy cannot evaluate it)."""
        self.prog.theta_scaled.value = theta / self.prog.scale
        value = self.extra.value
        return float(value) if value is not None else np.inf

    def solve(self, root: np.ndarray, centre: np.ndarray, floor: float, scale: float) -> ConvexSolution:
        self.root.value, self.centre.value = root / np.sqrt(scale), centre / np.sqrt(scale)
        self.offset.value, self.inv_scale.value = floor / scale, 1.0 / scale
        return self.prog.solve(self.objective, solvers=("CLARABEL",))

    def feasible(self, theta: np.ndarray) -> bool:
        return self.prog.feasible(theta, FEASIBILITY_TOLERANCE)


class _DirectSolveError(IdentificationError):
    """Clarabel did not solve a step's program in its direct form (the cvxpy one is solved)."""


class _DirectSteps:
    """:class:`_CvxpySteps`' program without cvxpy (regulariser none): h(θ) = tie-break + prior
    pull = ‖L (θ̃ − θ̃₀)‖² (``TIE_BREAK·data_ls·‖Nᵀ·‖²`` along the base map's null space N,
    ``DUAL_METRIC_PRIOR·ρ²·‖w ⊙ ·‖²``: :meth:`ConvexProgram.tie_break`, :meth:`ConvexProgram.prior_pull`),
    solved by Clarabel on the conic form (:mod:`~sysid_ros.core.batch.conic`)."""

    def __init__(self, target: Target, scale: np.ndarray, data: _DualMetricData):
        self.target, self.scale, self.data = target, scale, data
        null = tie_break_basis(target, scale)
        weights = prior_pull_weights(target, scale, data.column_norms)
        root = np.sqrt(TIE_BREAK * max(data.data_ls, 1e-16)) * null.T
        if weights is not None:
            root = np.vstack([root, np.sqrt(DUAL_METRIC_PRIOR * data.rho2) * np.diag(weights)])
        self.pull, self.prior = root, target.prior / scale
        self.rows = data.matrix * scale  # β = B θ = (B diag(scale)) θ̃
        self.feasible = direct_feasible_set(target, scale)  # the same set at every step

    def h(self, theta: np.ndarray) -> float:
        d = self.pull @ (theta / self.scale - self.prior)
        return float(d @ d)

    def solve(self, root: np.ndarray, centre: np.ndarray, floor: float, scale: float) -> ConvexSolution:
        norm = 1.0 / np.sqrt(scale)
        objective = conic.SquaresObjective(
            (np.vstack([norm * root @ self.rows, norm * self.pull]),
             np.concatenate([norm * centre, norm * self.pull @ self.prior])), offset=floor / scale)
        solution = direct_solve(self.target, self.scale, objective, feasible=self.feasible)
        if solution is None:
            raise _DirectSolveError("Clarabel did not solve a re-weighting step's conic form")
        return solution

    def feasible(self, theta: np.ndarray) -> bool:
        return True  # direct_solve returns only "optimal" answers


def _fixed_point(target: Target, data: _DualMetricData, steps: _CvxpySteps | _DirectSteps
                 ) -> ConvexSolution:
    """θ* = argmin_θ (1/K) Σ_k ‖L_k*⁻¹(Y_k Bθ − τ_k)‖² + h(θ) over the program's constraints, with
    M_k(θ*) = L_k* L_k*ᵀ the metric at the estimate itself, h the regularisers of ``steps``. From
    the prior, each step freezes the metric at θ_t and solves that convex weighted least squares
    exactly (``steps``: one program, the weighted rows compressed to their triangular factor,
    scaled by 1/F(θ_t) so that the solver's tolerances are relative), until a step changes the
    weighted fit by less than :data:`FIXED_POINT_TOL` of it. A metric that is not positive
    definite at θ_t (an unconstrained start) is replaced by the last one that was.
    ``iterations`` of the result: the steps; ``status`` "optimal" when converged, else
    "optimal_inaccurate" (:data:`FIXED_POINT_MAX_STEPS` reached, the last step's θ)."""
    start = time.perf_counter()
    rank = data.matrix.shape[0]
    theta = target.prior.astype(float)
    m_prior = data.m_known + data.ymb @ (data.matrix @ theta)
    try:
        chol = np.linalg.cholesky(m_prior)
    except np.linalg.LinAlgError:  # a prior outside the consistent set: its metric's diagonal
        diag = np.abs(np.einsum("kii->ki", m_prior)) + 1e-12
        chol = np.sqrt(diag)[..., None] * np.eye(data.n)
    sol, change, value = None, np.inf, np.inf
    for iteration in range(1, FIXED_POINT_MAX_STEPS + 1):
        rows = np.linalg.solve(chol, data.yb).reshape(-1, rank) / np.sqrt(data.k)
        rhs = np.linalg.solve(chol, data.tau[..., None])[..., 0].reshape(-1) / np.sqrt(data.k)
        tri = np.linalg.qr(np.column_stack([rows, rhs]), mode="r")
        root, centre, floor = tri[:rank, :rank], tri[:rank, rank], float(tri[rank, rank] ** 2)
        beta_t = data.matrix @ theta
        h_t = steps.h(theta)
        fit_t = float(np.sum((root @ beta_t - centre) ** 2)) + floor
        value = fit_t + (h_t if np.isfinite(h_t) else 0.0)
        if sol is not None and value <= NEWTON_EXACT:  # an exact fit: nothing left to resolve
            break
        scale = max(value, 1e-300)
        try:
            step = steps.solve(root, centre, floor, scale)
        except IdentificationError:
            if sol is None or value > EXACT_FIT**2:
                raise
            break  # the step's program, scaled by 1/F, is beyond the solver on a (near) exact fit
        if step.status != OPTIMAL and not steps.feasible(step.theta):
            raise IdentificationError(f"a dual-metric step's conic program ended {step.status} "
                                      "outside the consistency constraints")
        sol = replace(step, multipliers={k: v * scale for k, v in step.multipliers.items()})
        moved = root @ (data.matrix @ (step.theta - theta))
        change = float(moved @ moved) / scale
        theta = step.theta
        try:
            chol = np.linalg.cholesky(data.m_known + data.ymb @ (data.matrix @ theta))
        except np.linalg.LinAlgError:
            log.debug("dual-metric step %d: the metric at the step is not positive definite; "
                      "the previous one kept", iteration)
        log.debug("dual-metric step %d: weighted fit %.6e, change %.3e", iteration, value, change)
        if change <= FIXED_POINT_TOL:
            break
    converged = change <= FIXED_POINT_TOL or value <= NEWTON_EXACT
    if not converged:
        log.warning("the dual metric's re-weighting did not settle in %d steps (last change %.2e of "
                    "the fit); the last step's estimate is kept", FIXED_POINT_MAX_STEPS, change)
    return replace(sol, theta=theta, status=OPTIMAL if converged else OPTIMAL_INACCURATE,
                   objective=data.value(data.matrix @ theta) + steps.h(theta), iterations=iteration,
                   solve_time=time.perf_counter() - start,
                   active=near_boundary(target, theta, rel=1e-6))


def _dual_metric_sdp(prog: ConvexProgram, data: _DualMetricData, extra: cp.Expression
                     ) -> ConvexSolution:
    """The dual-metric SDP (eq. 33) itself: one slack and one (n+1)×(n+1) LMI per sample. The
    LMIs are written on the base parameters ``β = B θ`` (torques and mass matrix depend on θ only
    through β), a separate variable tied to θ by an equality, which keeps every LMI's coefficient
    block small."""
    k, n, rank = data.k, data.n, data.matrix.shape[0]
    beta_scale = column_scale(data.yb)
    beta_s = cp.Variable(rank, name="beta_scaled")
    tie = [cp.multiply(beta_scale, beta_s) == data.matrix @ prog.theta]
    s = cp.Variable(k, name="s")
    m1 = n + 1
    f = np.zeros((k, m1, m1, rank))
    g = np.zeros((k, m1, m1))
    f[:, :n, :n] = data.ymb
    g[:, :n, :n] = data.m_known
    f[:, :n, n] = data.yb
    f[:, n, :n] = data.yb
    g[:, :n, n] = -data.tau
    g[:, n, :n] = -data.tau
    # all K LMIs as one batched PSD constraint on a (K, n+1, n+1) affine expression
    f = f.reshape(k * m1 * m1, rank) * beta_scale
    corner = scipy.sparse.csr_matrix(
        (np.ones(k), (np.arange(k) * m1 * m1 + n * m1 + n, np.arange(k))), shape=(k * m1 * m1, k))
    stacked = cp.reshape(f @ beta_s + corner @ s + g.reshape(-1), (k, m1, m1), order="C")
    with warnings.catch_warnings():  # cvxpy notes it uses its SciPy backend for 3-D expressions
        warnings.simplefilter("ignore", UserWarning)
        lmis = [cp.constraints.PSD(stacked)]
    objective = cp.sum(s) / k + extra
    solution = prog.solve(objective, tie + lmis)
    if solution.objective < EXACT_FIT:  # (near) noise-free data: polish with tight tolerances
        solution = prog.solve(objective, tie + lmis, precise=True)
    return solution


#: mean scaled dual-metric residual below which the fit counts as exact and is re-solved precisely
EXACT_FIT = 1e-6


def _standard_scale(target: Target) -> np.ndarray:
    """Scale of the standard parameters: their prior magnitude (at least 1e-3 of the block's)."""
    scale = np.abs(target.prior).astype(float)
    for _, sl in target.body_blocks:
        block = scale[sl]
        scale[sl] = np.maximum(block, 1e-3 * max(block.max(), 1e-12))
    return np.maximum(scale, 1e-6)
