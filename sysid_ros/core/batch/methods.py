"""The batch methods on prepared data (ols, wls, pc_ls, energy, wls_logdet, wls_pullback,
dual_metric) and what every method's result gets: standard parameters exported, their
consistency, the plausibility cost. The instrumental-variable methods are in
:mod:`~sysid_ros.core.batch.instrumental`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from sysid_ros.core.batch.least_squares import (
    joint_variances,
    ols,
    solve_weighted,
    wls,
)
from sysid_ros.core.batch.options import DEFAULT_REGULARIZATION, IdentifyOptions
from sysid_ros.core.batch.prepared import Prepared
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.target import Target
from sysid_ros.core.result import (
    IdentificationResult,
    ParameterSet,
    SolverStatus,
    consistency_of,
    diagnostics_for,
)

if TYPE_CHECKING:  # the convex programs (cvxpy) are imported by the methods that solve one
    from sysid_ros.core.batch.convex import ConvexSolution


# ------------------------------------------------------------------------------------- methods
def fit_ols(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    return ols(prep.x, prep.y, prep.target.base, mask=prep.mask)


def fit_wls(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    return wls(prep.x, prep.y, prep.target.base, mask=prep.mask)


#: ``parameters_from`` of base-parameter methods' exported standard parameters
PROJECTED = "plausible consistent fit of the same rows"


def with_parameters(result: IdentificationResult, target: Target, theta: np.ndarray, source: str
                     ) -> IdentificationResult:
    """``result`` exporting the standard parameters ``theta`` (std unknown), with their
    consistency report."""
    return replace(result, parameters=ParameterSet(target.names, theta, None),
                   consistency=consistency_of(target, theta), parameters_from=source)


def standard_result(method: str, prep: Prepared, theta: np.ndarray, solve_time: float,
                     solver: SolverStatus, extra: dict) -> IdentificationResult:
    """Result of a standard-parameter method: β = Bθ, standard deviations of β from the OLS-style
    covariance at the solution (constraints not binding), consistency per body."""
    base = prep.target.base
    beta = base.of(theta)
    w, rhs, joint = prep.rows()
    resid = rhs - w @ beta
    dof = max(w.shape[0] - base.rank, 1)
    try:
        info = np.linalg.pinv(w.T @ w)
        beta_std = np.sqrt(np.maximum(np.diag(info) * float(resid @ resid) / dof, 0.0))
    except np.linalg.LinAlgError:
        beta_std = np.full(base.rank, np.nan)
    diag = diagnostics_for(w, rhs, joint, beta, n_joints=prep.y.shape[1], n_samples=len(prep.t),
                           solve_time=solve_time, extra=extra)
    result = IdentificationResult(method, base, beta, beta_std, diag, solver=solver)
    return with_parameters(result, prep.target, theta, method)


def pc_ls(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    from sysid_ros.core.batch.convex import least_squares_program

    w, rhs, _ = prep.rows(np.arange(prep.target.n_params))
    sol = least_squares_program(prep.target, w, rhs)
    return standard_result("pc_ls", prep, sol.theta, sol.solve_time, solver_status(sol), multipliers(sol))


def energy(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    from sysid_ros.core.batch.convex import least_squares_program

    # rows: q̇_kᵀ Y_k θ = q̇_kᵀ τ_k (eq. 9), one per sample
    dq = np.where(prep.mask, prep.dq, 0.0)
    w = np.einsum("kj,kjp->kp", dq, prep.x)
    rhs = np.einsum("kj,kj->k", dq, prep.y)
    sol = least_squares_program(prep.target, w, rhs)
    return standard_result("energy", prep, sol.theta, sol.solve_time, solver_status(sol), multipliers(sol))


def _weighted_rows(prep: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standard-parameter rows weighted by 1/σ_j from an unregularised (OLS) fit (seed §IV)."""
    base = prep.target.base
    wb, rhs, joint = prep.rows()
    beta0, _ = solve_weighted(wb, rhs, names=base.names)
    var = joint_variances(rhs - wb @ beta0, joint, prep.y.shape[1], base.rank)
    w_full, _, _ = prep.rows(np.arange(prep.target.n_params))
    sw = 1.0 / np.sqrt(var[joint])
    return w_full * sw[:, None], rhs * sw, np.sqrt(var)


def regularised(kind: str) -> Callable:
    def run(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
        from sysid_ros.core.batch.convex import least_squares_program

        w, rhs, sigma = _weighted_rows(prep)
        weight = options.regularization if options.regularization > 0 else DEFAULT_REGULARIZATION
        sol = least_squares_program(prep.target, w, rhs, regularizer=kind, weight=weight)
        extra = multipliers(sol) | {"regularization": weight, "joint_sigma": sigma.tolist()}
        return standard_result(f"wls_{kind}", prep, sol.theta, sol.solve_time, solver_status(sol), extra)

    return run


def dual_metric(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    from sysid_ros.core.batch.dual_metric import dual_metric_program

    # samples where a Coulomb row is unreliable are left out; up to max_samples, evenly spread
    usable = np.flatnonzero(prep.mask.all(axis=1))
    pick = np.linspace(0, len(usable) - 1, min(len(usable), options.max_samples)).round().astype(int)
    sel = usable[np.unique(pick)] if usable.size else usable
    if sel.size < prep.target.base.rank // max(1, prep.y.shape[1]) + 1:
        raise IdentificationError(f"only {sel.size} usable samples for the dual-metric SDP")
    say(f"dual-metric SDP on {sel.size} samples ({sel.size} LMIs of size {prep.y.shape[1] + 1})")
    ym, m_known = prep.target.mass_matrix(prep.q[sel])
    weight = options.regularization if options.regularization > 0 else 0.0
    sol = dual_metric_program(prep.target, prep.x[sel], prep.y[sel], ym, m_known,
                              regularizer="pullback" if weight > 0 else None, weight=weight)
    extra = multipliers(sol) | {"samples": int(sel.size), "newton_steps": sol.iterations}
    return standard_result("dual_metric", prep, sol.theta, sol.solve_time, solver_status(sol), extra)


def solver_status(sol: ConvexSolution, *, iterations: int | None = None, converged: bool = True
                   ) -> SolverStatus:
    return SolverStatus(solver=sol.solver, status=sol.status, objective=sol.objective,
                        binding_constraints=tuple(sol.binding()), iterations=iterations,
                        converged=converged)


def multipliers(sol: ConvexSolution) -> dict:
    """The constraints' multipliers (for result.json)."""
    return {"multipliers": sol.multipliers}


def consistent_from_base(prep: Prepared, beta: np.ndarray) -> ConvexSolution:
    """The physically consistent, plausible θ (within the target's bounds) whose base parameters
    are closest to ``beta`` in the data's own metric, ‖X_b (Bθ − β)‖ (torque on the regression
    rows); directions the data determine worse than their noise come from the prior."""
    from sysid_ros.core.batch.convex import compress, least_squares_program

    target = prep.target
    w, rhs, _ = prep.rows()
    r, _ = compress(w, np.zeros(w.shape[0]))
    # the data's residual at β as one more (constant) row: ‖[R(Bθ − β); ρ]‖ = ‖X_b Bθ − y‖ when β
    # is least squares, and the program's pull toward the nominal model scales with the noise
    resid = float(np.linalg.norm(rhs - w @ beta))
    rows = np.vstack([r @ target.base.matrix, np.zeros((1, target.n_params))])
    return least_squares_program(target, rows, np.append(r @ beta, resid))


def plausible_fit(prep: Prepared) -> ConvexSolution:
    """The exported standard parameters of a base-parameter method (ols, wls): the physically
    consistent, plausible θ that fits the same rows best, min ‖X θ − y‖ within the target's
    bounds. When β (least squares) is plausible, Bθ = β; otherwise ‖X_b(Bθ − β)‖ is the smallest
    torque change that makes it so (‖Xθ − y‖² = ‖X_b(Bθ − β)‖² + const), and the prior fills the
    directions the data determine worse than their noise (``ConvexProgram.prior_pull``)."""
    from sysid_ros.core.batch.convex import least_squares_program

    w, rhs, _ = prep.rows(np.arange(prep.target.n_params))
    return least_squares_program(prep.target, w, rhs)


def with_constraint_cost(result: IdentificationResult, prep: Prepared) -> IdentificationResult:
    """``result`` with ``diagnostics.extra["plausibility"]``: the bounds that shaped the exported
    parameters and the torque they cost, the RMS residual [N·m] on the regression rows of the
    unconstrained least-squares fit, of the base parameters β and of the exported θ (Bθ)."""
    target = prep.target
    w, rhs, _ = prep.rows()
    beta_ls = np.linalg.lstsq(w, rhs, rcond=None)[0]
    rms = {name: float(np.sqrt(np.mean((rhs - w @ b) ** 2))) if rhs.size else float("nan")
           for name, b in (("unconstrained", beta_ls), ("base_parameters", result.beta),
                           ("exported", target.base.of(result.parameters.values)))}
    doc = {"bounds": target.plausibility.as_dict() if target.plausibility else None,
           "binding": list(result.solver.binding_constraints),
           "torque_rms": rms,
           "cost_percent": 100.0 * (rms["exported"] / max(rms["unconstrained"], 1e-300) - 1.0)}
    extra = result.diagnostics.extra | {"plausibility": doc}
    return replace(result, diagnostics=replace(result.diagnostics, extra=extra))


