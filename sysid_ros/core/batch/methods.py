"""The batch methods on prepared data (ols, wls, pc_ls, energy, wls_logdet, wls_pullback,
dual_metric) and what every method's result gets: standard parameters exported, their
consistency, the plausibility cost. The instrumental-variable methods are in
:mod:`~sysid_ros.core.batch.instrumental`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.cost import COST_LIMIT_PERCENT
from sysid_ros.core.batch.least_squares import (
    joint_variances,
    ols,
    solve_weighted,
    wls,
)
from sysid_ros.core.batch.options import MIN_PRIOR_WEIGHT, PRIOR_ROWS, IdentifyOptions
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
        info = rla.pinv(w.T @ w)
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
    wb = prep.target.base.columns(w)
    reference = rla.lstsq(wb, rhs)
    return standard_result("energy", prep, sol.theta, sol.solve_time, solver_status(sol),
                           multipliers(sol) | {REFERENCE: ("energy", reference), OWN_ROWS: (wb, rhs)})


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
        # the default weighs the prior like PRIOR_ROWS rows of the data's own noise (the rows are
        # weighted by 1/σ_j, the program divides its data term by ‖rhs‖²)
        weight = (options.regularization if options.regularization > 0
                  else max(PRIOR_ROWS / max(float(rhs @ rhs), 1e-300), MIN_PRIOR_WEIGHT))
        sol = least_squares_program(prep.target, w, rhs, regularizer=kind, weight=weight)
        wb = prep.target.base.columns(w)
        extra = multipliers(sol) | {"regularization": weight, "joint_sigma": sigma.tolist(),
                                    REFERENCE: ("wls", rla.lstsq(wb, rhs))}
        return standard_result(f"wls_{kind}", prep, sol.theta, sol.solve_time, solver_status(sol), extra)

    return run


def dual_metric(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    from sysid_ros.core.batch.dual_metric import dual_metric_program
    from sysid_ros.core.batch.dual_metric_samples import marginalised, spread

    # up to max_samples, evenly spread; a joint whose Coulomb row is unreliable at a sample is
    # marginalised out of that sample's term, not the sample dropped
    pick = spread(len(prep.t), options.max_samples)
    ym, m_known = prep.target.mass_matrix(prep.q[pick])
    x, y, ym, m_known, keep = marginalised(prep.x[pick], prep.y[pick], ym, m_known, prep.mask[pick],
                                           prep.target.prior)
    sel = pick[keep]
    if sel.size < prep.target.base.rank // max(1, prep.y.shape[1]) + 1:
        raise IdentificationError(f"only {sel.size} usable samples for the dual-metric SDP")
    say(f"dual metric on {sel.size} samples (residuals weighted by the inverse mass matrix at the "
        "estimate, re-weighted least squares)")
    weight = options.regularization if options.regularization > 0 else 0.0
    sol = dual_metric_program(prep.target, x, y, ym, m_known,
                              regularizer="pullback" if weight > 0 else None, weight=weight)
    extra = multipliers(sol) | {"samples": int(sel.size), "reweighting_steps": sol.iterations,
                                REFERENCE: ("least squares weighted by M(θ)⁻¹ at the estimate",
                                            _metric_weighted_beta(prep, x, y, ym, m_known, sol.theta))}
    status = solver_status(sol, iterations=sol.iterations, converged=sol.status == "optimal")
    return standard_result("dual_metric", prep, sol.theta, sol.solve_time, status, extra)


def _metric_weighted_beta(prep: Prepared, x: np.ndarray, y: np.ndarray, ym: np.ndarray,
                          m_known: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Base parameters of the unconstrained least squares weighted by the dual metric at
    ``theta``, Σ_k ‖L_k⁻¹(Y_k β − τ_k)‖² with M_k(θ) = L_k L_kᵀ: the dual metric's fit without
    bounds or prior (the reference of its plausibility cost)."""
    base = prep.target.base
    chol = np.linalg.cholesky(m_known + ym @ theta)
    rows = np.linalg.solve(chol, base.columns(x)).reshape(-1, base.rank)
    rhs = np.linalg.solve(chol, y[..., None])[..., 0].reshape(-1)
    return rla.lstsq(rows, rhs)


#: ``diagnostics.extra`` key (removed before the result is returned) of a method's own fit without
#: bounds or prior, ``(name, β)``: the reference of the plausibility cost
REFERENCE = "_reference_fit"
#: ``diagnostics.extra`` key (removed by :func:`with_plausible_export`) of the rows a method fits
#: when they are not the torque rows, ``(rows (m, r), rhs (m,))`` in base columns (energy's)
OWN_ROWS = "_own_rows"


def with_plausible_export(result: IdentificationResult, prep: Prepared) -> IdentificationResult:
    """``result`` exporting the θ nearest the model file that fits the data as well as its
    estimate within its noise (:func:`~sysid_ros.core.batch.plausible.export_plausible`);
    ``diagnostics.extra["exported_model"]`` says per body what came from the data."""
    from sysid_ros.core.batch.plausible import MOVED, export_plausible

    w, rhs, _ = prep.rows()
    extra = dict(result.diagnostics.extra)
    own_rows = extra.pop(OWN_ROWS, None)
    export = export_plausible(prep.target, w, rhs, result.beta, result.parameters.values,
                              own_rows=own_rows)
    source = f"{result.parameters_from or result.method}, {MOVED}"
    result = with_parameters(result, prep.target, export.theta, source)
    extra |= {"exported_model": export.as_dict()}
    return replace(result, diagnostics=replace(result.diagnostics, extra=extra))


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
    unconstrained least-squares fit, of the method's own fit without bounds or prior (the
    reference: its weighting, unconstrained), of the base parameters β and of the exported θ (Bθ);
    ``cost_percent`` is the exported θ's RMS over the reference's, ``excess_percent`` the same
    beyond the estimate's noise (the figure :mod:`~sysid_ros.core.batch.cost`'s limit applies to)."""
    target = prep.target
    w, rhs, _ = prep.rows()
    beta_ls = rla.lstsq(w, rhs)
    extra = dict(result.diagnostics.extra)
    if REFERENCE in extra:
        reference, beta_ref = extra.pop(REFERENCE)
    elif result.method in ("ols", "wls", "iv"):  # base parameters without bounds or prior
        reference, beta_ref = result.method, result.beta
    else:
        reference, beta_ref = "least squares", beta_ls
    rms = {name: float(np.sqrt(np.mean((rhs - w @ b) ** 2))) if rhs.size else float("nan")
           for name, b in (("unconstrained", beta_ls), ("reference", beta_ref),
                           ("base_parameters", result.beta),
                           ("exported", target.base.of(result.parameters.values)))}
    doc = {"bounds": target.plausibility.as_dict() if target.plausibility else None,
           "binding": list(result.solver.binding_constraints),
           "torque_rms": rms, "reference": reference,
           "cost_percent": 100.0 * (rms["exported"] / max(rms["reference"], 1e-300) - 1.0),
           "limit_percent": COST_LIMIT_PERCENT}
    allowance = (extra.get("exported_model") or {}).get("noise_allowance", 0.0)
    allowed = float(np.sqrt(rms["reference"] ** 2 + allowance / max(rhs.size, 1)))
    doc["excess_percent"] = 100.0 * (rms["exported"] / max(allowed, 1e-300) - 1.0)
    extra |= {"plausibility": doc}
    return replace(result, diagnostics=replace(result.diagnostics, extra=extra))


