"""Convex estimators on standard parameters with physical consistency (cvxpy, Clarabel/SCS).

All share the same feasible set: ``J(φ_b) ⪰ ε I`` per body (pseudo-inertia LMI, constrained-IV
seed eqs. 17–19) and ``Fc, Fv, Ia ≥ 0`` per joint. Objectives (dual-metric seed §II–III):

* ``pc_ls``        ‖X θ − y‖²                                     (eq. 7)
* ``energy``       Σ_k (q̇_kᵀ (Y_k θ − τ_k))²                       (eq. 9)
* ``wls_logdet``   Σ_j ‖(X_j θ − y_j)/σ_j‖² + λ Σ_b D(J(φ_b)‖J(φ_b⁰))  (eqs. 5, 8; Bregman)
* ``wls_pullback`` Σ_j ‖(X_j θ − y_j)/σ_j‖² + λ Σ_b ‖J₀^{-½}(J − J₀)J₀^{-½}‖_F²  (constant pullback)
* ``dual_metric``  Σ_k s_k  s.t. [[M_k(θ), r_k(θ)], [r_kᵀ, s_k]] ⪰ 0  (eqs. 28, 31–33)

Standard parameters are not all identifiable; a small pull toward the prior along the null space
of the base-parameter map (directions that change no base parameter) selects one of the equally
good solutions without biasing any base parameter.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
import scipy.linalg
import scipy.sparse

from sysid_ros.core.batch.least_squares import RANK_TOLERANCE
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.consistency import PSEUDO_INERTIA_BASIS, pseudo_inertia
from sysid_ros.core.model.target import Target, sphere_slack

log = logging.getLogger(__name__)

#: smallest eigenvalue enforced on every pseudo-inertia [SI]; strictly consistent results
CONSISTENCY_MARGIN = 1e-7  # well above the conic solvers' feasibility tolerance (~1e-8)
#: weight of the pull toward the prior along unidentifiable directions (breaks ties only),
#: relative to the size of the data term at the unconstrained least-squares solution
TIE_BREAK = 1e-6
#: weight of the pull toward the nominal model of an arm with plausibility bounds
#: (:meth:`ConvexProgram.prior_pull`) relative to the fit's relative residual ρ: a direction of the
#: unit-column regressor with singular value σ follows the data when σ ≫ ρ·√PRIOR_WEIGHT and the
#: prior when σ ≪ it (on the vendor-style test log, 1 left distal masses at their bounds, 100
#: brought them within 1.7× of the truth for +0.05 % torque error)
PRIOR_WEIGHT = 100.0


@dataclass
class ConvexSolution:
    """θ from a convex program with its solve figures and constraint multipliers."""

    theta: np.ndarray
    status: str
    solver: str
    solve_time: float
    objective: float
    multipliers: dict[str, float] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)

    def binding(self) -> list[str]:
        """Constraints at their boundary with a non-zero multiplier: the data pull the estimate
        out of the feasible set there (the constraint is shaping the result)."""
        return [k for k in self.active if self.multipliers.get(k, 0.0) > 0.0]


class ConvexProgram:
    """θ variable, consistency constraints and regularisers of a :class:`Target`."""

    def __init__(self, target: Target, *, consistent: bool = True, margin: float = CONSISTENCY_MARGIN,
                 scale: np.ndarray | None = None):
        self.target = target
        # θ = scale ⊙ θ̃: the solver works on θ̃ of unit-size columns
        self.scale = np.ones(target.n_params) if scale is None else np.asarray(scale, dtype=float)
        self.theta_scaled = cp.Variable(target.n_params, name="theta_scaled")
        self.theta = cp.multiply(self.scale, self.theta_scaled)
        self.constraints: list[cp.Constraint] = []
        self.labels: list[str] = []
        if consistent:
            e16 = PSEUDO_INERTIA_BASIS.reshape(10, 16)
            for label, sl in target.body_blocks:
                j = cp.reshape(e16.T @ self.theta[sl], (4, 4), order="C")
                self.constraints.append(0.5 * (j + j.T) >> margin * np.eye(4))
                self.labels.append(f"{label}.J")
            for i in target.nonnegative:
                self.constraints.append(self.theta[int(i)] >= 0)
                self.labels.append(target.names[int(i)])
            for (i, low, high), labels in zip(target.mass_bounds, _mass_labels(target), strict=True):
                self.constraints += [self.theta[i] >= low, self.theta[i] <= high]
                self.labels += labels
            for (i, com, radius), labels in zip(target.com_bounds, _com_labels(target), strict=True):
                m, h = self.theta[i], self.theta[i + 1:i + 4]
                self.constraints += [h - m * com <= m * radius, m * com - h <= m * radius]
                self.labels += labels
            for (i, centre, radius), label in zip(target.extent_bounds, _extent_labels(target),
                                                  strict=True):
                self.constraints.append(sphere_slack(self.theta[i:i + 10], centre, radius) >= 0)
                self.labels.append(label)

    def tie_break(self, rows: np.ndarray | None = None) -> cp.Expression:
        """‖Nᵀ(θ̃ − θ̃₀)‖² with N an orthonormal basis of the null space of ``rows·diag(scale)``
        (``rows (m, p)``: the regression rows in standard parameters; default the base-parameter
        map ``B``): moves only what no measurement can see, toward the prior."""
        matrix = self.target.base.matrix if rows is None else np.asarray(rows, dtype=float)
        null = scipy.linalg.null_space(matrix * self.scale, rcond=RANK_TOLERANCE)
        if null.shape[1] == 0:
            return cp.Constant(0.0)
        prior_scaled = self.target.prior / self.scale
        return cp.sum_squares(null.T @ (self.theta_scaled - prior_scaled))

    def prior_pull(self, column_norms: np.ndarray) -> cp.Expression:
        """Σ_i (c_i (θ_i − θ₀_i))² with ``column_norms`` c (p,) of the regressor (normalised as
        the objective's data term), for a target with plausibility bounds (an arm whose prior is
        its nominal model; 0 otherwise: a payload's prior is a placeholder). Weighted by
        :data:`PRIOR_WEIGHT` × the fit's relative residual it moves only the directions the data
        determine worse than the noise, toward the nominal model."""
        if self.target.plausibility is None:
            return cp.Constant(0.0)
        c = np.asarray(column_norms, dtype=float)
        # parameters the data barely see (c below 1e-2 of the largest) are held by the prior firmly
        # enough for the solver to place them reproducibly
        c = np.maximum(c, 1e-2 * max(float(c.max(initial=0.0)), 1e-300))
        return cp.sum_squares(cp.multiply(c * self.scale, self.theta_scaled - self.target.prior / self.scale))

    def _joint_terms_pull(self, rest: np.ndarray, column_norms: np.ndarray | None) -> cp.Expression:
        """The regularisers' term for parameters outside the bodies (joint friction, offset, rotor
        inertia): ‖c ⊙ (ψ − ψ₀)‖² with ``column_norms`` c of the (normalised) data term, so that
        its weight is small against what the data say of each (a friction prior of the MJCF's
        values, 0 where it has none, that does not pin them); without column norms, relative to
        the prior's magnitude (at least 1e-3)."""
        if column_norms is None:
            scale = 1.0 / np.maximum(np.abs(self.target.prior[rest]), 1e-3)
        else:
            c = np.asarray(column_norms, dtype=float)[rest]
            scale = np.maximum(c, 1e-3 * max(float(np.max(column_norms)), 1e-300))
        return cp.sum_squares(cp.multiply(scale, self.theta[rest] - self.target.prior[rest]))

    def pullback(self, column_norms: np.ndarray | None = None) -> cp.Expression:
        """Σ_b ‖J₀^{-½} (J(φ) − J₀) J₀^{-½}‖_F² (+ ‖ψ − ψ₀‖² for the remaining parameters,
        scaled to unity), the constant pull-back metric at the prior."""
        terms = []
        covered = np.zeros(self.target.n_params, dtype=bool)
        for _, sl in self.target.body_blocks:
            j0 = pseudo_inertia(self.target.prior[sl])
            w = _inv_sqrt(j0)
            # vec(W (J − J0) W) is linear in φ − φ0
            basis = np.einsum("ab,nbc,cd->nad", w, PSEUDO_INERTIA_BASIS, w).reshape(10, 16)
            terms.append(cp.sum_squares(basis.T @ (self.theta[sl] - self.target.prior[sl])))
            covered[sl] = True
        rest = np.flatnonzero(~covered)
        if rest.size:
            terms.append(self._joint_terms_pull(rest, column_norms))
        return cp.sum(cp.hstack(terms)) if terms else cp.Constant(0.0)

    def logdet_divergence(self, column_norms: np.ndarray | None = None) -> cp.Expression:
        """Σ_b (−log det J + tr(J₀⁻¹ J)) (the Bregman/log-det divergence up to constants), plus
        the pull-back term for parameters outside the bodies."""
        terms = []
        covered = np.zeros(self.target.n_params, dtype=bool)
        e16 = PSEUDO_INERTIA_BASIS.reshape(10, 16)
        for _, sl in self.target.body_blocks:
            j0_inv = np.linalg.inv(pseudo_inertia(self.target.prior[sl]))
            j = cp.reshape(e16.T @ self.theta[sl], (4, 4), order="C")
            terms.append(-cp.log_det(0.5 * (j + j.T)) + cp.trace(j0_inv @ j))
            covered[sl] = True
        rest = np.flatnonzero(~covered)
        if rest.size:
            terms.append(self._joint_terms_pull(rest, column_norms))
        return cp.sum(cp.hstack(terms))

    def solve(self, objective: cp.Expression, extra: list[cp.Constraint] | None = None, *,
              precise: bool = False) -> ConvexSolution:
        """Solve with Clarabel (SCS as fall-back). ``precise`` tightens Clarabel's tolerances for
        objectives that are squared residuals (whose optimum may be ~1e-12 on clean data)."""
        problem = cp.Problem(cp.Minimize(objective), self.constraints + (extra or []))
        start = time.perf_counter()
        last_error: Exception | None = None
        inaccurate = None  # (theta, multipliers, solver, value) of an "optimal_inaccurate" answer
        for solver in _solvers():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    options = _PRECISE.get(solver, {}) if precise else {}
                    problem.solve(solver=solver, **options)
            except cp.error.SolverError as exc:
                last_error = exc
                continue
            if self.theta_scaled.value is None:
                continue
            if problem.status == cp.OPTIMAL:
                status = cp.OPTIMAL
                theta, mult, value = self._solution(), self._multipliers(), float(problem.value)
                break
            if problem.status == cp.OPTIMAL_INACCURATE and inaccurate is None:
                # kept, but the next solver is tried: an inaccurate answer may violate the constraints
                inaccurate = (self._solution(), self._multipliers(), solver, float(problem.value))
        else:
            if inaccurate is None:
                raise IdentificationError(f"the convex program could not be solved (status "
                                          f"{problem.status}, {last_error or 'no solution'}); the "
                                          "constraints may be infeasible or the data too poor")
            status = cp.OPTIMAL_INACCURATE
            theta, mult, solver, value = inaccurate
        return ConvexSolution(theta, status, solver, time.perf_counter() - start, value, mult,
                              self._active(theta))

    def _solution(self) -> np.ndarray:
        return self.scale * np.array(self.theta_scaled.value, dtype=float)

    def _multipliers(self) -> dict[str, float]:
        mult = {}
        for label, con in zip(self.labels, self.constraints, strict=True):
            dual = con.dual_value
            mult[label] = 0.0 if dual is None else float(np.max(np.abs(dual)))
        return mult

    def _active(self, theta: np.ndarray, rel: float = 1e-6) -> list[str]:
        """Constraints (nearly) at their boundary at ``theta``."""
        out = []
        for label, sl in self.target.body_blocks:
            lam = np.linalg.eigvalsh(pseudo_inertia(theta[sl]))
            if lam[0] <= rel * lam[-1]:
                out.append(f"{label}.J")
        top = max(float(np.max(np.abs(theta))), 1e-300)
        out += [self.target.names[int(i)] for i in self.target.nonnegative if theta[int(i)] <= rel * top]
        for (i, low, high), (at_low, at_high) in zip(self.target.mass_bounds, _mass_labels(self.target),
                                                      strict=True):
            if theta[i] <= low * (1 + 1e-6):
                out.append(at_low)
            elif theta[i] >= high * (1 - 1e-6):
                out.append(at_high)
        for (i, com, radius), (plus, minus) in zip(self.target.com_bounds, _com_labels(self.target),
                                                   strict=True):
            offset = theta[i + 1:i + 4] - theta[i] * com  # m·(c − c₀)
            reach = theta[i] * radius * (1 - 1e-6)
            if np.any(offset >= reach):
                out.append(plus)
            if np.any(-offset >= reach):
                out.append(minus)
        for (i, centre, radius), label in zip(self.target.extent_bounds, _extent_labels(self.target),
                                              strict=True):
            if sphere_slack(theta[i:i + 10], centre, radius) <= 1e-6 * theta[i] * radius**2:
                out.append(label)
        return out


def _extent_labels(target: Target) -> list[str]:
    """Constraint label of each of ``target.extent_bounds``."""
    return [f"{target.names[i].rsplit('.', 1)[0]} inside r={radius:.3g} m"
            for i, _c, radius in target.extent_bounds]


def _mass_labels(target: Target) -> list[list[str]]:
    """``[lower, upper]`` constraint label of each of ``target.mass_bounds``."""
    return [[f"{target.names[i]} >= {low:.4g}", f"{target.names[i]} <= {high:.4g}"]
            for i, low, high in target.mass_bounds]


def _com_labels(target: Target) -> list[list[str]]:
    """``[+, −]`` constraint label of each of ``target.com_bounds``."""
    out = []
    for i, _com, radius in target.com_bounds:
        body = target.names[i].rsplit(".", 1)[0]
        out.append([f"{body}.com within {radius:g} m (+)", f"{body}.com within {radius:g} m (-)"])
    return out


_PRECISE = {"CLARABEL": {"tol_gap_abs": 1e-13, "tol_gap_rel": 1e-11, "tol_feas": 1e-11,
                         "tol_ktratio": 1e-9, "max_iter": 300}}


def _solvers() -> list[str]:
    installed = cp.installed_solvers()
    return [s for s in ("CLARABEL", "SCS") if s in installed]


def _inv_sqrt(a: np.ndarray) -> np.ndarray:
    lam, vec = np.linalg.eigh(a)
    return vec @ np.diag(1.0 / np.sqrt(lam)) @ vec.T


def compress(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, c)`` with ``‖A x − b‖² = ‖R x − c‖² + const`` (economic QR), ``R`` at most p × p."""
    if a.shape[0] <= a.shape[1]:
        return a, b
    q, r = scipy.linalg.qr(a, mode="economic")
    return r, q.T @ b


def _normalised(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = max(float(np.linalg.norm(b)), 1e-12)
    return a / scale, b / scale


def column_scale(a: np.ndarray) -> np.ndarray:
    """1/‖column‖ of a regressor (1 for columns that are identically zero)."""
    norms = np.linalg.norm(a.reshape(-1, a.shape[-1]), axis=0)
    return np.where(norms > 1e-12 * max(norms.max(), 1e-300), 1.0 / np.maximum(norms, 1e-300), 1.0)


def least_squares_program(target: Target, w: np.ndarray, rhs: np.ndarray, *,
                          regularizer: str | None = None, weight: float = 0.0,
                          consistent: bool = True) -> ConvexSolution:
    """min ‖W θ − rhs‖² / ‖rhs‖² + weight·R(θ) + tie-break, subject to consistency.

    ``w (m, p)``, ``rhs (m,)``: regression rows (already weighted); ``regularizer`` one of
    ``None``, ``"logdet"``, ``"pullback"``.
    """
    r, c = compress(*_normalised(w, rhs))
    prog = ConvexProgram(target, consistent=consistent, scale=column_scale(r))
    if regularizer not in (None, "logdet", "pullback"):
        raise IdentificationError(f"unknown regulariser {regularizer!r}")
    if regularizer is None or weight <= 0:
        # the residual norm (not its square) keeps solver tolerances meaningful for tiny residuals
        x_ls = np.linalg.lstsq(r, c, rcond=None)[0]
        rho = max(float(np.linalg.norm(r @ x_ls - c)), 1e-12)
        return prog.solve(cp.norm(r @ prog.theta - c, 2)
                          + rho * (TIE_BREAK * prog.tie_break(r)
                                   + PRIOR_WEIGHT * prog.prior_pull(np.linalg.norm(r, axis=0))))
    norms = np.linalg.norm(r, axis=0)
    reg = prog.logdet_divergence(norms) if regularizer == "logdet" else prog.pullback(norms)
    return prog.solve(cp.sum_squares(r @ prog.theta - c) + weight * reg, precise=True)


def dual_metric_program(target: Target, y: np.ndarray, tau: np.ndarray, ym: np.ndarray,
                        m_known: np.ndarray, *, regularizer: str | None = None,
                        weight: float = 0.0) -> ConvexSolution:
    """The dual-metric SDP (eq. 33) on ``K`` samples.

    ``y (K, n, p)`` regressor, ``tau (K, n)`` torques minus the known part, ``ym (K, n, n, p)``
    mass-matrix regressor and ``m_known (K, n, n)`` its known part (``M_k(θ) = M_known + Y_M θ``).
    One slack and one (n+1)×(n+1) LMI per sample. The LMIs are written on the base parameters
    ``β = B θ`` (torques and mass matrix depend on θ only through β), a separate variable tied to
    θ by an equality, which keeps every LMI's coefficient block small.
    """
    k, n, _ = y.shape
    base = target.base
    yb = base.columns(y)
    ymb = base.columns(ym)
    prog = ConvexProgram(target, consistent=True, scale=_standard_scale(target))
    beta_scale = column_scale(yb)
    beta_s = cp.Variable(base.rank, name="beta_scaled")
    tie = [cp.multiply(beta_scale, beta_s) == base.matrix @ prog.theta]
    s = cp.Variable(k, name="s")
    sigma = max(float(np.sqrt(np.mean(tau**2))), 1e-12)
    mu = max(float(np.mean(np.abs(np.einsum("kii->ki", m_known + ym @ target.prior)))), 1e-12)
    m1 = n + 1
    f = np.zeros((k, m1, m1, base.rank))
    g = np.zeros((k, m1, m1))
    f[:, :n, :n] = ymb / mu
    g[:, :n, :n] = m_known / mu
    f[:, :n, n] = yb / sigma
    f[:, n, :n] = yb / sigma
    g[:, :n, n] = -tau / sigma
    g[:, n, :n] = -tau / sigma
    # all K LMIs as one batched PSD constraint on a (K, n+1, n+1) affine expression
    f = f.reshape(k * m1 * m1, base.rank) * beta_scale
    corner = scipy.sparse.csr_matrix(
        (np.ones(k), (np.arange(k) * m1 * m1 + n * m1 + n, np.arange(k))), shape=(k * m1 * m1, k))
    stacked = cp.reshape(f @ beta_s + corner @ s + g.reshape(-1), (k, m1, m1), order="C")
    with warnings.catch_warnings():  # cvxpy notes it uses its SciPy backend for 3-D expressions
        warnings.simplefilter("ignore", UserWarning)
        lmis = [cp.constraints.PSD(stacked)]
    # size of the data term at the unconstrained least-squares β, metric of the prior
    beta_ls = np.linalg.lstsq(yb.reshape(-1, base.rank), tau.reshape(-1), rcond=None)[0]
    r_ls = (yb @ beta_ls - tau) / sigma
    m_prior = (m_known + ym @ target.prior) / mu
    data_ls = float(np.mean(np.einsum("ki,ki->k", r_ls, np.linalg.solve(m_prior, r_ls[..., None])[..., 0])))
    objective = cp.sum(s) / k + TIE_BREAK * max(data_ls, 1e-16) * prog.tie_break()
    if regularizer == "logdet" and weight > 0:
        objective = objective + weight * prog.logdet_divergence()
    elif regularizer == "pullback" and weight > 0:
        objective = objective + weight * prog.pullback()
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
