"""The exported standard parameters of an arm: the method's estimate, moved within its own noise to
the point nearest the model file in the seeds' geometry.

A batch method determines the base parameters β = Bθ (what the torques depend on) to within its
noise, and nothing else: link masses, inertias about axes that never turn, the split between
links regrouped into one base parameter. Whatever a solver returns in those directions is where it
stopped. The exported θ is instead the solution of one convex program (online seed §III, dual-metric
seed §II-B3: the log-det/Bregman divergence between pseudo-inertias, invariant to frames and units)

    min   Σ_b D(J(φ_b) ‖ J(φ_b⁰))  +  Σ_i ((ψ_i − ψ_i⁰) / s_i)²                      (prior: the model file)
    s.t.  ‖R (Bθ − β̂)‖² ≤ d_c² + κ·r·σ²                                             (the estimate's noise)
          J(φ_b) ⪰ ε·1, friction and rotor inertia ≥ 0, the target's plausibility bounds

with ``R`` the triangular factor of the base regressor rows (``‖R(β − β')‖`` is the torque the two
parameter sets differ by on the data), β̂ the method's estimate, ``σ²`` the residual variance of
the least-squares fit on those rows (``m`` rows, rank ``r``), ``κ`` :data:`FIT_CONFIDENCE` (the
ellipsoid ``(β − β̂)ᵀ Σ_β⁻¹ (β − β̂) ≤ κ·r`` of the estimate's covariance ``Σ_β = σ²(RᵀR)⁻¹``) and
``d_c`` how far the nearest consistent, plausible θ is from β̂ (0 for a method that estimates
consistent standard parameters). ``ψ`` are the joint terms (friction, offset, rotor inertia) with
scale ``s_i`` = the larger of the prior's and the estimate's magnitude: the data determine them
and the prior only settles what the data leave free.

A body that still exports a mass outside [½, 2] × its nominal or a smallest principal moment (about
its CoM) below 0.1 × its nominal's is re-solved with those bounds on it (:data:`MASS_RANGE`,
:data:`MOMENT_FLOOR`); if the data cannot be fitted that way, the data demand it and the report
says by how much torque keeping it plausible would cost.

Per body, the report says what the data determined: of its 10 directions (in the log-det metric,
so independent of frames and units) how many the data fix (the trace of the body's block of the
resolution matrix ``(F + Λ)⁻¹F``, with ``F`` the data term's and ``Λ`` the divergence's curvature
at the solution, weighted by the program's multiplier) and the share of the mass's prior variance
the data remove.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.convex import CONSISTENCY_MARGIN, ConvexProgram, cp
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.consistency import PSEUDO_INERTIA_BASIS, pseudo_inertia
from sysid_ros.core.model.robot import inertial_from_body_params
from sysid_ros.core.model.target import Target

log = logging.getLogger(__name__)

#: κ: the export may differ from the estimate by κ·r·σ² in squared torque on the data (r base
#: parameters, σ² the residual variance per row): the mean of χ²_r, the estimate's own confidence
#: ellipsoid. Well below a 1 % torque-RMS change whenever there are ≫ r rows.
FIT_CONFIDENCE = 1.0
#: the allowed torque change is at least this share of the torque's norm (noise-free data)
EXACT_FIT_SLACK = 1e-6
#: a body is plausible with its mass within [m₀ / MASS_RANGE, m₀ · MASS_RANGE] ...
MASS_RANGE = 2.0
#: ... and its smallest principal moment about its CoM at least this fraction of its nominal's
MOMENT_FLOOR = 0.1
#: ``parameters_from`` of an exported θ moved from the method's estimate by this program
MOVED = "nearest the model file within the estimate's noise (log-det divergence)"


@dataclass(frozen=True)
class BodyReport:
    """What one body exports and where it came from."""

    name: str
    mass: float
    nominal_mass: float
    min_moment_ratio: float  # smallest principal moment about the CoM / the nominal's
    data_directions: float  # of the body's 10 directions, how many the data determine (0..10)
    mass_from_data: float  # share of the mass's prior variance removed by the data (0..1)
    divergence: float  # D(J‖J₀) of the export
    plausible: bool
    #: [N·m] torque RMS on the data that keeping this body plausible would cost (None: plausible)
    plausibility_cost: float | None = None

    @property
    def mass_ratio(self) -> float:
        return self.mass / self.nominal_mass if self.nominal_mass > 0 else float("nan")

    def as_dict(self) -> dict:
        return {"mass": self.mass, "nominal_mass": self.nominal_mass, "mass_ratio": self.mass_ratio,
                "min_principal_moment_ratio": self.min_moment_ratio,
                "data_directions": self.data_directions, "mass_from_data": self.mass_from_data,
                "divergence_to_prior": self.divergence, "plausible": self.plausible,
                "plausibility_cost_nm": self.plausibility_cost}


@dataclass(frozen=True)
class PlausibleExport:
    """The exported θ (p,) with the figures of the program that chose it."""

    theta: np.ndarray
    estimate_theta: np.ndarray  # the method's own standard parameters (the centre's start)
    bodies: tuple[BodyReport, ...]
    torque_rms: dict[str, float]  # [N·m] on the rows: least squares, estimate, export
    radius: float  # [N·m·√rows] allowed ‖R(Bθ − β̂)‖
    noise_allowance: float  # [N·m²·rows] κ·r·σ², the part of radius² the noise gives
    moved: float  # [N·m·√rows] ‖R(Bθ − β̂)‖ of the export
    multiplier: float  # μ of the fit constraint (0: the prior alone fits within the noise)
    status: str
    solve_time: float
    joint_terms_from_data: dict[str, float] = field(default_factory=dict)

    @property
    def implausible(self) -> tuple[BodyReport, ...]:
        return tuple(b for b in self.bodies if not b.plausible)

    def as_dict(self) -> dict:
        return {"program": "min sum_b D_logdet(J_b || J_b,model) s.t. fit within the estimate's noise",
                "fit_confidence": FIT_CONFIDENCE, "status": self.status, "solve_time_s": self.solve_time,
                "torque_rms": self.torque_rms, "allowed_torque_change": self.radius,
                "noise_allowance": self.noise_allowance,
                "torque_change": self.moved, "multiplier": self.multiplier,
                "bodies": {b.name: b.as_dict() for b in self.bodies},
                "joint_terms_from_data": self.joint_terms_from_data,
                "estimate": self.estimate_theta.tolist()}


def principal_moments(phi: np.ndarray) -> np.ndarray:
    """Principal moments (3,) [kg·m²] about the CoM of body parameters ``phi (10,)`` (ascending;
    NaN for a non-positive mass)."""
    if not phi[0] > 0:
        return np.full(3, np.nan)
    _, _, inertia = inertial_from_body_params(phi)
    return rla.eigvalsh(inertia)


def export_plausible(target: Target, rows: np.ndarray, rhs: np.ndarray, beta_hat: np.ndarray,
                     theta_start: np.ndarray, *,
                     own_rows: tuple[np.ndarray, np.ndarray] | None = None) -> PlausibleExport:
    """The exported θ of an arm ``target`` (see the module's docstring).

    ``rows (m, r)``, ``rhs (m,)``: the regression rows in base columns and the torques [N·m];
    ``beta_hat (r,)`` the method's estimate; ``theta_start (p,)`` a consistent θ within the target's
    bounds near it (the method's standard parameters, or the consistent fit of a base-parameter
    method). ``own_rows``: ``(rows (m', r), rhs (m',))`` of a method that fits other rows than the
    torques' (energy: one power row per sample), whose estimate's noise ellipsoid is in those rows'
    metric (its estimate is no closer to the torque rows' fit than its own rows say); the torque
    figures stay the torque rows'. Raises :class:`IdentificationError` when the rows are too few.
    """
    start = time.perf_counter()
    base = target.base
    m, r = rows.shape
    if m <= r:
        raise IdentificationError(f"{m} regression rows for {r} base parameters: too few to export a model")
    aug = np.linalg.qr(np.column_stack([rows, rhs]), mode="r")  # [[R, c], [0, ‖residual‖]]
    tri, c = aug[:r, :r], aug[:r, r]
    beta_ls = rla.lstsq(tri, c)
    e_ls = float(aug[r, r] ** 2) + float(np.sum((tri @ beta_ls - c) ** 2))
    sigma2 = e_ls / (m - r)
    tri_fit, sigma2_fit, rhs_fit = tri, sigma2, rhs
    if own_rows is not None and own_rows[0].shape[0] > r:
        aug_own = np.linalg.qr(np.column_stack(own_rows), mode="r")
        tri_fit, c_own = aug_own[:r, :r], aug_own[:r, r]
        e_own = float(aug_own[r, r] ** 2) + float(np.sum((tri_fit @ rla.lstsq(tri_fit, c_own) - c_own) ** 2))
        sigma2_fit, rhs_fit = e_own / (own_rows[0].shape[0] - r), own_rows[1]

    def torque_rms(theta: np.ndarray) -> float:
        return float(np.sqrt((e_ls + np.sum((tri @ (base.of(theta) - beta_ls)) ** 2)) / m))

    a_mat = tri_fit @ base.matrix  # (r, p): ‖a θ − b‖ = ‖R(Bθ − β̂)‖
    b_vec = tri_fit @ beta_hat
    d_start = float(np.linalg.norm(a_mat @ theta_start - b_vec))
    # noise-free data: the fit may still change by a rounding-level share of the torque
    radius = max(float(np.sqrt(d_start**2 + FIT_CONFIDENCE * r * sigma2_fit)),
                 EXACT_FIT_SLACK * float(np.linalg.norm(rhs_fit)))
    body_terms = _joint_scales(target, theta_start)
    newton = _newton_with_bounds(target, a_mat / radius, b_vec / radius, body_terms)
    if newton is not None and not _violates_bounds(target, newton[0]) and all(
            _plausible(target, sl, newton[0]) for _, sl in target.body_blocks):
        theta, mu = newton
        status, solver = "optimal", "newton"
    else:
        try:
            theta, mu, status = _conic_export(target, a_mat, b_vec, radius, theta_start)
            solver = "cvxpy"
        except IdentificationError as exc:  # the estimate stays the export; the report says so
            log.warning("the exported model is the estimate itself: the plausible fit failed (%s)", exc)
            theta, mu, status, solver = np.asarray(theta_start, dtype=float).copy(), 0.0, "failed", "none"
    f_mat = 2.0 * mu * (a_mat.T @ a_mat) / radius**2
    lam = _divergence_hessian(target, theta, body_terms)
    bodies, joint_share = _resolution(target, theta, f_mat, lam)
    moved = float(np.linalg.norm(a_mat @ theta - b_vec))
    reports = []
    for report, (_name, sl) in zip(bodies, target.body_blocks, strict=True):
        if not report.plausible:
            cost = _plausibility_cost(target, sl, tri, beta_ls, e_ls, m)
            cost = None if cost is None else max(cost - torque_rms(theta), 0.0)
            report = BodyReport(**{**report.__dict__, "plausibility_cost": cost})
        reports.append(report)
    rms = {"least_squares": float(np.sqrt(e_ls / m)), "estimate": float(
        np.sqrt((e_ls + np.sum((tri @ (beta_hat - beta_ls)) ** 2)) / m)), "exported": torque_rms(theta)}
    return PlausibleExport(theta, np.asarray(theta_start, dtype=float).copy(), tuple(reports), rms,
                           radius, FIT_CONFIDENCE * r * sigma2, moved, mu, f"{status} ({solver})",
                           time.perf_counter() - start, joint_share)


#: the conic program's forms, tried in this order (Clarabel; SCS, cvxpy's other solver, took
#: 30-110 s on a 6-DOF arm's export and is not tried): the fit constraint as a norm (a second-order
#: cone; better conditioned when the fit is tight), then as a sum of squares (a rotated cone)
CONIC_FORMS = ("norm", "squares")


def _conic_export(target: Target, a_mat: np.ndarray, b_vec: np.ndarray, radius: float,
                  theta_start: np.ndarray) -> tuple[np.ndarray, float, str]:
    """The program with every constraint of the target (cvxpy): ``(θ, μ, status)``; bodies that
    come out implausible are re-solved with :func:`_plausibility_constraints` when the fit allows.
    Each solve tries :data:`CONIC_FORMS` in turn: the first optimal answer, else the best
    inaccurate one inside the constraints; :class:`IdentificationError` naming every form's
    failure when none gives one."""
    prog = ConvexProgram(target, consistent=True, scale=_scale(target))
    objective, _ = _divergence_objective(prog, target, theta_start)
    a_n, b_n = a_mat / radius, b_vec / radius
    # μ of ‖Aθ − b‖² ≤ 1 (the Newton path's): the norm form's multiplier ν gives μ = ν / 2
    fits = {"norm": (cp.norm(a_n @ prog.theta - b_n, 2) <= 1.0, 0.5),
            "squares": (cp.sum_squares(a_n @ prog.theta - b_n) <= 1.0, 1.0)}

    def solve(extra_of) -> tuple[np.ndarray, float, str]:
        failures, best = [], None
        for form in CONIC_FORMS:
            fit, to_mu = fits[form]
            try:
                sol = prog.solve(objective, [fit, *extra_of()], solvers=("CLARABEL",))
            except IdentificationError as exc:
                failures.append(f"{form} form: {exc}")
                continue
            mu = to_mu * float(np.max(fit.dual_value)) if fit.dual_value is not None else 0.0
            inside = prog.feasible(sol.theta, 1e-9) and float(
                np.sum((a_n @ sol.theta - b_n) ** 2)) <= 1.0 + 1e-6
            if sol.status == cp.OPTIMAL:
                return sol.theta, mu, sol.status
            if not inside:
                failures.append(f"{form} form: {sol.status} outside the constraints")
                continue
            prog.theta_scaled.value = sol.theta / prog.scale
            value = float(objective.value)
            if best is None or value < best[0]:
                best = (value, sol.theta, mu, sol.status)
        if best is None:
            raise IdentificationError("the plausible fit's conic program failed in every form tried ("
                                      + "; ".join(failures) + ")")
        return best[1:]

    theta, mu, status = solve(lambda: [])
    implausible = [name for name, sl in target.body_blocks if not _plausible(target, sl, theta)]
    if implausible:
        extra = [con for name, sl in target.body_blocks if name in implausible
                 for con in _plausibility_constraints(prog, target, sl)]
        try:
            theta, mu, status = solve(lambda: extra)
        except IdentificationError:
            log.info("bodies %s cannot be kept plausible within the estimate's noise", implausible)
    return theta, (max(mu, 0.0) if np.isfinite(mu) else 0.0), status


def _violates_bounds(target: Target, theta: np.ndarray) -> bool:
    """Whether ``theta`` violates a constraint the Newton path leaves out (non-negative joint terms,
    mass, CoM and extent bounds; J ≻ 0 the divergence keeps). A minimiser without them that
    satisfies them is the constrained optimum (convexity: KKT with zero multipliers)."""
    from sysid_ros.core.batch.convex import near_boundary

    return bool(near_boundary(target, theta, rel=-1e-9, margin=0.0))


#: Newton iterations per multiplier, and bisection steps on log μ
NEWTON_STEPS, MULTIPLIER_STEPS = 50, 60


def _newton_export(target: Target, a_mat: np.ndarray, b_vec: np.ndarray,
                   joint: tuple[np.ndarray, np.ndarray], fixed: dict[int, float] | None = None
                   ) -> tuple[np.ndarray, float, np.ndarray] | None:
    """The program without its linear bounds, by its optimality conditions: θ(μ) = argmin
    f(θ) + μ‖Aθ − b‖² (damped Newton, J ≻ 0 kept by backtracking) at the μ ≥ 0 where
    ‖Aθ(μ) − b‖ = 1 (``a_mat``, ``b_vec`` normalised by the radius), found by bracketing and
    bisection on log μ, each solve warm-started. ``fixed``: parameters held at these values (box
    bounds the active set holds, :func:`_newton_with_bounds`). Returns θ, μ and the gradient of
    f + μ‖Aθ − b‖² at θ; None when Newton fails (the caller solves the conic program)."""
    prior = target.prior.astype(float)
    fixed = fixed or {}
    free = np.ones(target.n_params, dtype=bool)
    free[list(fixed)] = False
    start = prior.copy()
    start[list(fixed)] = list(fixed.values())
    rest, s = joint
    idx = np.array([np.arange(sl.start, sl.stop) for _, sl in target.body_blocks]).reshape(-1, 10)
    j0_inv = np.linalg.inv(pseudo_inertia(prior[idx]))  # (B, 4, 4)
    ata, atb = a_mat.T @ a_mat, a_mat.T @ b_vec
    basis = PSEUDO_INERTIA_BASIS
    prior_grad = np.einsum("kab,nba->kn", j0_inv, basis)  # tr(J₀⁻¹E_n) per body

    def value(theta: np.ndarray, mu: float) -> float:
        j = pseudo_inertia(theta[idx])
        try:
            chol = np.linalg.cholesky(j)
        except np.linalg.LinAlgError:
            return np.inf
        total = mu * float(np.sum((a_mat @ theta - b_vec) ** 2))
        total += -2.0 * float(np.sum(np.log(np.einsum("kii->ki", chol)))) + float(np.sum(j0_inv * j))
        return total + float(np.sum(((theta[rest] - prior[rest]) / s) ** 2))

    def derivatives(theta: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
        grad = 2.0 * mu * (ata @ theta - atb)
        hess = 2.0 * mu * ata
        j_inv = np.linalg.inv(pseudo_inertia(theta[idx]))
        half = np.einsum("kab,nbc->knac", j_inv, basis)  # J⁻¹E_n per body
        grad[idx] += prior_grad - np.einsum("knaa->kn", half)
        hess[idx[:, :, None], idx[:, None, :]] += np.einsum("kmab,knba->kmn", half, half)
        grad[rest] += 2.0 * (theta[rest] - prior[rest]) / s**2
        hess[rest, rest] += 2.0 / s**2
        return grad, hess

    def solve(theta: np.ndarray, mu: float) -> np.ndarray | None:
        f = value(theta, mu)
        if not np.isfinite(f):
            return None
        for _ in range(NEWTON_STEPS):
            grad, hess = derivatives(theta, mu)
            step = np.zeros_like(theta)
            try:
                step[free] = -np.linalg.solve(hess[np.ix_(free, free)], grad[free])
            except np.linalg.LinAlgError:
                return None
            decrement = -float(grad @ step)
            if decrement < 1e-12 * max(1.0, abs(f)):
                return theta
            alpha = 1.0
            while alpha > 1e-10:
                trial = theta + alpha * step
                f_trial = value(trial, mu)
                if f_trial <= f - 0.25 * alpha * decrement:
                    break
                alpha *= 0.5
            else:
                return theta if decrement < 1e-8 * max(1.0, abs(f)) else None
            theta, f = trial, f_trial
        return None

    def gap(theta: np.ndarray) -> float:
        return float(np.sum((a_mat @ theta - b_vec) ** 2)) - 1.0

    theta = solve(start, 0.0)
    if theta is None:
        return None
    if gap(theta) <= 0:
        return theta, 0.0, derivatives(theta, 0.0)[0]
    lo, hi, theta_hi = 0.0, 1e-3, theta
    while True:  # continuation: μ grows until the fit is inside the region
        theta_hi = solve(theta_hi, hi)
        if theta_hi is None:
            return None
        if gap(theta_hi) <= 0:
            break
        lo, theta_lo = hi, theta_hi
        hi *= 10.0
        if hi > 1e16:
            return None
    theta_lo = theta if lo == 0.0 else theta_lo
    for _ in range(MULTIPLIER_STEPS):
        if hi <= lo * (1 + 1e-6):
            break
        mid = np.sqrt(lo * hi) if lo > 0 else hi / 10.0
        theta_mid = solve(theta_hi.copy(), mid)
        if theta_mid is None:
            return None
        if gap(theta_mid) > 0:
            lo, theta_lo = mid, theta_mid
        else:
            hi, theta_hi = mid, theta_mid
        if abs(gap(theta_hi)) < 1e-6:
            break
    return theta_hi, hi, derivatives(theta_hi, hi)[0]


#: passes of the active set on the box bounds (non-negative joint terms, mass bounds)
ACTIVE_SET_PASSES = 12


def _newton_with_bounds(target: Target, a_mat: np.ndarray, b_vec: np.ndarray,
                        joint: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, float] | None:
    """:func:`_newton_export` with the target's box bounds (friction and rotor inertia ≥ 0, mass
    bounds) by an active set: violated parameters are held at their bound, held ones whose
    multiplier has the wrong sign are released, until neither happens (KKT). None when Newton
    fails or the passes run out (the caller solves the conic program)."""
    lower = np.full(target.n_params, -np.inf)
    upper = np.full(target.n_params, np.inf)
    lower[np.asarray(target.nonnegative, dtype=int)] = 0.0
    for i, low, high in target.mass_bounds:
        lower[i], upper[i] = max(lower[i], low), min(upper[i], high)
    fixed: dict[int, float] = {}
    for _ in range(ACTIVE_SET_PASSES):
        out = _newton_export(target, a_mat, b_vec, joint, fixed)
        if out is None:
            return None
        theta, mu, grad = out
        tol = 1e-9 * np.maximum(np.abs(theta), 1e-12)
        below = np.flatnonzero(theta < lower - tol)
        above = np.flatnonzero(theta > upper + tol)
        release = [i for i, v in fixed.items()
                   if (v == lower[i] and grad[i] < 0) or (v == upper[i] and grad[i] > 0)]
        if not below.size and not above.size and not release:
            return theta, mu
        for i in release:
            del fixed[i]
        fixed |= {int(i): float(lower[i]) for i in below} | {int(i): float(upper[i]) for i in above}
    return None


def _scale(target: Target) -> np.ndarray:
    scale = np.abs(target.prior).astype(float)
    for _, sl in target.body_blocks:
        scale[sl] = np.maximum(scale[sl], 1e-3 * max(float(scale[sl].max()), 1e-12))
    return np.maximum(scale, 1e-6)


def _joint_scales(target: Target, theta_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, s)`` of the parameters outside the bodies and their scales."""
    covered = np.zeros(target.n_params, dtype=bool)
    for _, sl in target.body_blocks:
        covered[sl] = True
    rest = np.flatnonzero(~covered)
    size = np.maximum(np.abs(target.prior[rest]), np.abs(theta_start[rest]))
    floor = 1e-3 * max(float(size.max(initial=0.0)), 1e-9)
    return rest, np.maximum(size, floor)


def _divergence_objective(prog: ConvexProgram, target: Target, theta_start: np.ndarray):
    """Σ_b (−log det J_b + tr(J_b⁰⁻¹ J_b)) + Σ_i ((ψ_i − ψ_i⁰)/s_i)² as a cvxpy expression, and the
    joint terms' (indices, scales)."""
    e16 = PSEUDO_INERTIA_BASIS.reshape(10, 16)
    terms = []
    for _, sl in target.body_blocks:
        j0_inv = np.linalg.inv(pseudo_inertia(target.prior[sl]))
        j = cp.reshape(e16.T @ prog.theta[sl], (4, 4), order="C")
        terms.append(-cp.log_det(0.5 * (j + j.T)) + cp.trace(j0_inv @ j))
    rest, s = _joint_scales(target, theta_start)
    if rest.size:
        terms.append(cp.sum_squares(cp.multiply(1.0 / s, prog.theta[rest] - target.prior[rest])))
    return cp.sum(cp.hstack(terms)), (rest, s)


def _divergence_hessian(target: Target, theta: np.ndarray, joint: tuple[np.ndarray, np.ndarray]
                        ) -> np.ndarray:
    """∇² of the objective at ``theta`` (p, p): per body H_mn = tr(J⁻¹E_m J⁻¹E_n) (rls-logdet §3),
    2/s_i² for the joint terms."""
    lam = np.zeros((target.n_params, target.n_params))
    for _, sl in target.body_blocks:
        j_inv = np.linalg.inv(pseudo_inertia(theta[sl]))
        half = np.einsum("ab,nbc->nac", j_inv, PSEUDO_INERTIA_BASIS)  # J⁻¹E_n
        lam[sl, sl] = np.einsum("mab,nba->mn", half, half)
    rest, s = joint
    lam[rest, rest] = 2.0 / s**2
    return lam


def _resolution(target: Target, theta: np.ndarray, f_mat: np.ndarray, lam: np.ndarray
                ) -> tuple[list[BodyReport], dict[str, float]]:
    """Per body: data-determined directions (trace of its block of Λ^{-½}F Λ^{-½}(Λ^{-½}FΛ^{-½} + 1)⁻¹,
    Λ block diagonal), the share of the mass's prior variance removed by the data, plausibility."""
    p = target.n_params
    lam_root_inv = np.zeros((p, p))
    blocks = [sl for _, sl in target.body_blocks]
    covered = np.zeros(p, dtype=bool)
    for sl in blocks:
        w, v = rla.eigh(lam[sl, sl])
        lam_root_inv[sl, sl] = v @ np.diag(1.0 / np.sqrt(np.maximum(w, 1e-300))) @ v.T
        covered[sl] = True
    rest = np.flatnonzero(~covered)
    lam_root_inv[rest, rest] = 1.0 / np.sqrt(np.maximum(np.diag(lam)[rest], 1e-300))
    g = lam_root_inv @ f_mat @ lam_root_inv
    g = 0.5 * (g + g.T)
    w, v = rla.eigh(g)
    w = np.maximum(w, 0.0)
    resolution = (v * (w / (w + 1.0))) @ v.T  # G (G + 1)⁻¹
    posterior = lam_root_inv @ ((v * (1.0 / (w + 1.0))) @ v.T) @ lam_root_inv  # (F + Λ)⁻¹
    prior_cov = lam_root_inv @ lam_root_inv
    reports = []
    for (name, sl) in target.body_blocks:
        phi, phi0 = theta[sl], target.prior[sl]
        moments, moments0 = principal_moments(phi), principal_moments(phi0)
        ratio = float(moments[0] / moments0[0]) if moments0[0] > 0 else float("nan")
        i = sl.start
        share = 1.0 - posterior[i, i] / prior_cov[i, i] if prior_cov[i, i] > 0 else 0.0
        j, j0 = pseudo_inertia(phi), pseudo_inertia(phi0)
        div = float(-np.linalg.slogdet(j)[1] + np.linalg.slogdet(j0)[1]
                    + np.trace(np.linalg.solve(j0, j)) - 4.0)
        reports.append(BodyReport(name, float(phi[0]), float(phi0[0]), ratio,
                                  float(np.trace(resolution[sl, sl])), float(np.clip(share, 0.0, 1.0)),
                                  div, _plausible(target, sl, theta)))
    joint_share = {target.names[k]: float(np.clip(resolution[k, k], 0.0, 1.0)) for k in rest}
    return reports, joint_share


def _plausible(target: Target, sl: slice, theta: np.ndarray) -> bool:
    phi, phi0 = theta[sl], target.prior[sl]
    if not phi0[0] > 0:
        return True
    ratio = phi[0] / phi0[0]
    moments, moments0 = principal_moments(phi), principal_moments(phi0)
    return bool(1.0 / MASS_RANGE <= ratio <= MASS_RANGE
                and (not moments0[0] > 0 or moments[0] >= MOMENT_FLOOR * moments0[0] * (1 - 1e-6)))


def _plausibility_constraints(prog: ConvexProgram, target: Target, sl: slice) -> list:
    """Mass in [m₀/MASS_RANGE, m₀·MASS_RANGE] and I_c ⪰ MOMENT_FLOOR·λ_min(I_c⁰)·1, the latter as
    the LMI [[I_O − a1, S(h)ᵀ], [S(h), m1]] ⪰ 0 (I_c = I_O − S(h)ᵀS(h)/m, Schur complement)."""
    phi = prog.theta[sl]
    phi0 = target.prior[sl]
    out = [phi[0] >= phi0[0] / MASS_RANGE, phi[0] <= phi0[0] * MASS_RANGE]
    moments0 = principal_moments(phi0)
    if moments0[0] > 0:
        a = MOMENT_FLOOR * float(moments0[0])
        m, hx, hy, hz = phi[0], phi[1], phi[2], phi[3]
        ixx, ixy, ixz, iyy, iyz, izz = phi[4], phi[5], phi[6], phi[7], phi[8], phi[9]
        zero = cp.Constant(0.0)
        s_h = [[zero, -hz, hy], [hz, zero, -hx], [-hy, hx, zero]]
        inertia = [[ixx - a, ixy, ixz], [ixy, iyy - a, iyz], [ixz, iyz, izz - a]]
        top = [inertia[k] + [s_h[0][k], s_h[1][k], s_h[2][k]] for k in range(3)]
        bottom = [s_h[k] + [m if k == col else zero for col in range(3)] for k in range(3)]
        lmi = cp.bmat(top + bottom)
        out.append(0.5 * (lmi + lmi.T) >> CONSISTENCY_MARGIN * np.eye(6))
    return out


def _plausibility_cost(target: Target, sl: slice, tri: np.ndarray, beta_ls: np.ndarray, e_ls: float,
                       m: int) -> float | None:
    """[N·m] the smallest torque RMS on the rows with body ``sl`` plausible (None: not solved)."""
    prog = ConvexProgram(target, consistent=True, scale=_scale(target))
    a_mat = tri @ target.base.matrix
    try:
        sol = prog.solve(cp.norm(a_mat @ prog.theta - tri @ beta_ls, 2),
                         _plausibility_constraints(prog, target, sl), solvers=("CLARABEL",))
    except IdentificationError:
        return None
    d = float(np.linalg.norm(a_mat @ sol.theta - tri @ beta_ls))
    return float(np.sqrt((e_ls + d * d) / m))
