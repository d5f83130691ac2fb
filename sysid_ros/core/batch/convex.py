"""Convex estimators on standard parameters with physical consistency (cvxpy, Clarabel/SCS).

All share the same feasible set: ``J(φ_b) ⪰ ε I`` per body (pseudo-inertia LMI, constrained-IV
seed eqs. 17–19) and ``Fc, Fv, Ia ≥ 0`` per joint. Objectives (dual-metric seed §II–III):

* ``pc_ls``        ‖X θ − y‖²                                     (eq. 7)
* ``energy``       Σ_k (q̇_kᵀ (Y_k θ − τ_k))²                       (eq. 9)
* ``wls_logdet``   Σ_j ‖(X_j θ − y_j)/σ_j‖² + λ Σ_b D(J(φ_b)‖J(φ_b⁰))  (eqs. 5, 8; Bregman)
* ``wls_pullback`` Σ_j ‖(X_j θ − y_j)/σ_j‖² + λ Σ_b ‖J₀^{-½}(J − J₀)J₀^{-½}‖_F²  (constant pullback)
* ``dual_metric``  Σ_k s_k  s.t. [[M_k(θ), r_k(θ)], [r_kᵀ, s_k]] ⪰ 0  (eqs. 28, 31–33), i.e.
  Σ_k r_kᵀ M_k⁻¹ r_k, minimised by proximal Newton on θ (:func:`dual_metric_program`)

Standard parameters are not all identifiable; a small pull toward the prior along the null space
of the base-parameter map (directions that change no base parameter) selects one of the equally
good solutions without biasing any base parameter.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch import conic
from sysid_ros.core.batch.conic import com_labels as _com_labels
from sysid_ros.core.batch.conic import extent_labels as _extent_labels
from sysid_ros.core.batch.conic import mass_labels as _mass_labels
from sysid_ros.core.batch.least_squares import RANK_TOLERANCE
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.consistency import PSEUDO_INERTIA_BASIS, pseudo_inertia
from sysid_ros.core.model.target import Target, sphere_slack

log = logging.getLogger(__name__)


class _Cvxpy:
    """cvxpy, imported on first use: its import (with ``scipy.stats``) is ~0.4 s of a
    ``sysid identify`` whose plausible fit, when its optimum is interior, is found without it
    (:func:`interior_optimum`)."""

    def __getattr__(self, name: str):
        import cvxpy

        return getattr(cvxpy, name)


cp = _Cvxpy()

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
#: multipliers below this are zero: the programs' objectives are normalised (~1 at θ = 0 or at the
#: prior), so this is below the solvers' tolerances (~1e-8); an exact optimum on noise-free data
#: may touch the consistency margin of a barely excited body with a multiplier ~1e-14
MULTIPLIER_FLOOR = 1e-10
#: [SI] constraint violation accepted of a step's "optimal_inaccurate" answer (well inside the
#: consistency margin)
FEASIBILITY_TOLERANCE = 1e-9


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
    iterations: int | None = None  # outer iterations of an iterative method (proximal Newton)

    def binding(self) -> list[str]:
        """Constraints at their boundary with a non-zero multiplier: the data pull the estimate
        out of the feasible set there (the constraint is shaping the result). Multipliers below
        :data:`MULTIPLIER_FLOOR` count as zero."""
        return [k for k in self.active if self.multipliers.get(k, 0.0) > MULTIPLIER_FLOOR]


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
        self._problems: dict[tuple, tuple] = {}
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
        null = tie_break_basis(self.target, self.scale, rows)
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
        weights = prior_pull_weights(self.target, self.scale, column_norms)
        if weights is None:
            return cp.Constant(0.0)
        return cp.sum_squares(cp.multiply(weights, self.theta_scaled - self.target.prior / self.scale))

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
        for _, sl in self.target.coefficient_blocks:  # diagonal P: ‖P₀^{-½}(P − P₀)P₀^{-½}‖_F²
            c0 = self.target.prior[sl]
            terms.append(cp.sum_squares(cp.multiply(1.0 / c0, self.theta[sl] - c0)))
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
        for _, sl in self.target.coefficient_blocks:  # diagonal P: −log det P + tr(P₀⁻¹ P)
            terms.append(cp.sum(-cp.log(self.theta[sl]) + cp.multiply(1.0 / self.target.prior[sl],
                                                                       self.theta[sl])))
            covered[sl] = True
        rest = np.flatnonzero(~covered)
        if rest.size:
            terms.append(self._joint_terms_pull(rest, column_norms))
        return cp.sum(cp.hstack(terms))

    def solve(self, objective: cp.Expression, extra: list[cp.Constraint] | None = None, *,
              precise: bool = False, solvers: tuple[str, ...] | None = None) -> ConvexSolution:
        """Solve with Clarabel (SCS as fall-back; ``solvers``: only these, if installed).
        ``precise`` tightens Clarabel's tolerances for objectives that are squared residuals
        (whose optimum may be ~1e-12 on clean data)."""
        problem = self._problem(objective, extra or [])
        start = time.perf_counter()
        last_error: Exception | None = None
        inaccurate = None  # (theta, multipliers, solver, value) of an "optimal_inaccurate" answer
        for solver in [s for s in _solvers() if solvers is None or s in solvers]:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    options = _SETTINGS.get(solver, {}) | (_PRECISE.get(solver, {}) if precise else {})
                    problem.solve(solver=solver, **options)
            except cp.error.SolverError as exc:
                last_error = exc
                continue
            if self.theta_scaled.value is None:
                continue
            if problem.status == cp.OPTIMAL:
                status = cp.OPTIMAL
                theta, mult, value = self._solution(), self._multipliers(), float(problem.value)
                if (inaccurate is not None and not self.feasible(theta, FEASIBILITY_TOLERANCE)
                        and self.feasible(inaccurate[0], FEASIBILITY_TOLERANCE)):
                    # a fall-back's "optimal" outside the constraints (SCS's tolerances are
                    # loose: pseudo-inertias 1e-3 below the margin were seen) loses to the first
                    # solver's inaccurate answer inside them
                    status = cp.OPTIMAL_INACCURATE
                    theta, mult, solver, value = inaccurate
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

    def feasible(self, theta: np.ndarray, tol: float = 0.0) -> bool:
        """Whether ``theta (p,)`` satisfies every constraint (to ``tol``)."""
        self.theta_scaled.value = np.asarray(theta, dtype=float) / self.scale
        return all(float(np.max(c.violation())) <= tol for c in self.constraints)

    def _problem(self, objective: cp.Expression, extra: list[cp.Constraint]) -> cp.Problem:
        """The problem of ``objective`` and ``extra`` constraints, built once: solving it again
        with new values of its cvxpy Parameters skips cvxpy's compilation."""
        key = (id(objective), *map(id, extra))
        if key not in self._problems:  # the expressions are kept: their ids stay theirs
            problem = cp.Problem(cp.Minimize(objective), self.constraints + extra)
            self._problems[key] = (objective, extra, problem)
        return self._problems[key][2]

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
        return near_boundary(self.target, theta, rel=rel)


def near_boundary(target: Target, theta: np.ndarray, *, rel: float, margin: float = 0.0) -> list[str]:
    """Labels of the consistency constraints (:class:`ConvexProgram`'s, in its order) that
    ``theta (p,)`` violates or meets within ``rel`` of its own size: a pseudo-inertia with
    ``λ_min − margin ≤ rel·λ_max``, a non-negative parameter ``≤ rel·max|θ|``, a mass within
    ``rel`` (relative) of a bound, a CoM offset ``≥ (1 − rel)·m·r``, a sphere slack ``≤ rel·m r²``.
    ``rel`` 1e-6 and ``margin`` 0: the constraints active at a solver's answer; a larger ``rel``
    and the program's margin: whether θ is strictly inside the feasible set with room to spare."""
    out = []
    for label, sl in target.body_blocks:
        lam = rla.eigvalsh(pseudo_inertia(theta[sl]))
        if lam[0] - margin <= rel * lam[-1]:
            out.append(f"{label}.J")
    top = max(float(np.max(np.abs(theta))), 1e-300)
    out += [target.names[int(i)] for i in target.nonnegative if theta[int(i)] <= rel * top]
    for (i, low, high), (at_low, at_high) in zip(target.mass_bounds, _mass_labels(target),
                                                  strict=True):
        if theta[i] <= low * (1 + rel):
            out.append(at_low)
        elif theta[i] >= high * (1 - rel):
            out.append(at_high)
    for (i, com, radius), (plus, minus) in zip(target.com_bounds, _com_labels(target), strict=True):
        offset = theta[i + 1:i + 4] - theta[i] * com  # m·(c − c₀)
        reach = theta[i] * radius * (1 - rel)
        if np.any(offset >= reach):
            out.append(plus)
        if np.any(-offset >= reach):
            out.append(minus)
    for (i, centre, radius), label in zip(target.extent_bounds, _extent_labels(target), strict=True):
        if sphere_slack(theta[i:i + 10], centre, radius) <= rel * theta[i] * radius**2:
            out.append(label)
    return out


def tie_break_basis(target: Target, scale: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """``N (p, k)``: orthonormal basis of the null space of ``rows·diag(scale)`` (``rows (m, p)``,
    default the base-parameter map), the directions :meth:`ConvexProgram.tie_break` pulls."""
    matrix = target.base.matrix if rows is None else np.asarray(rows, dtype=float)
    return rla.null_space(matrix * scale, rcond=RANK_TOLERANCE)


def prior_pull_weights(target: Target, scale: np.ndarray, column_norms: np.ndarray) -> np.ndarray | None:
    """``w (p,)`` with :meth:`ConvexProgram.prior_pull` = ‖w ⊙ (θ̃ − θ̃₀)‖² in the scaled variables
    (None for a target without plausibility bounds)."""
    if target.plausibility is None:
        return None
    c = np.asarray(column_norms, dtype=float)
    # parameters the data barely see (c below 1e-2 of the largest) are held by the prior firmly
    # enough for the solver to place them reproducibly
    c = np.maximum(c, 1e-2 * max(float(c.max(initial=0.0)), 1e-300))
    return c * scale


#: Clarabel without chordal decomposition: it splits the 8×8 PSD blocks of cvxpy's log_det
#: (the plausible export, wls_logdet) into overlapping cliques, and on the export of the UR5e test
#: log (test_urdf_model) Clarabel then ended NumericalError, AlmostSolved or Solved at random
#: with a relative change of 1e-12 in the data (objective 243.2-249.2 where the optimum is
#: 243.17389); without it, Solved at 243.17389 in 25-28 iterations for every such perturbation.
#: The 4×4 pseudo-inertia LMIs are dense: nothing to decompose there.
_SETTINGS = {"CLARABEL": {"chordal_decomposition_enable": False}}
_PRECISE = {"CLARABEL": {"tol_gap_abs": 1e-13, "tol_gap_rel": 1e-11, "tol_feas": 1e-11,
                         "tol_ktratio": 1e-9, "max_iter": 300}}


@functools.cache
def _solvers() -> list[str]:
    installed = cp.installed_solvers()
    return [s for s in ("CLARABEL", "SCS") if s in installed]


def _inv_sqrt(a: np.ndarray) -> np.ndarray:
    lam, vec = rla.eigh(a)
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
                          consistent: bool = True, closed_form: bool = True,
                          precise: bool = False, direct: bool = True) -> ConvexSolution:
    """min ‖W θ − rhs‖² / ‖rhs‖² + weight·R(θ) + tie-break, subject to consistency.

    ``w (m, p)``, ``rhs (m,)``: regression rows (already weighted); ``regularizer`` one of
    ``None``, ``"logdet"``, ``"pullback"``. Without a regulariser the optimum, when strictly
    inside every constraint, is found by linear algebra (:func:`interior_optimum`, solver
    :data:`CLOSED_FORM`) and the conic program is solved only otherwise (or with
    ``closed_form=False``; ``precise``: with tight solver tolerances, see :meth:`ConvexProgram.solve`).
    ``direct`` (default): Clarabel on the program's own conic form (:func:`direct_solve`, no cvxpy
    import nor compilation: ~2 s less of a command's CPU), the cvxpy statement only when Clarabel
    does not report ``Solved``; ``direct=False`` solves the cvxpy statement (the reference).
    """
    r, c = compress(*_normalised(w, rhs))
    if regularizer not in (None, "logdet", "pullback"):
        raise IdentificationError(f"unknown regulariser {regularizer!r}")
    scale = column_scale(r)
    if regularizer is None or weight <= 0:
        # the residual norm (not its square) keeps solver tolerances meaningful for tiny residuals
        x_ls = rla.lstsq(r, c)
        rho = max(float(np.linalg.norm(r @ x_ls - c)), 1e-12)
        if closed_form:
            solution = interior_optimum(target, r, c, scale, rho, consistent=consistent)
            if solution is not None:
                return solution
        if direct and consistent:  # the same program, stated below in cvxpy, in Clarabel's own form
            root = _pull_root(target, r, scale)
            solution = direct_solve(target, scale, conic.SquaresObjective(
                (np.sqrt(rho) * root, np.sqrt(rho) * root @ (target.prior / scale)),
                norm=(r * scale, c)), precise=precise)
            if solution is not None:
                return solution
        prog = ConvexProgram(target, consistent=consistent, scale=scale)
        return prog.solve(cp.norm(r @ prog.theta - c, 2)
                          + rho * (TIE_BREAK * prog.tie_break(r)
                                   + PRIOR_WEIGHT * prog.prior_pull(np.linalg.norm(r, axis=0))),
                          precise=precise)
    prog = ConvexProgram(target, consistent=consistent, scale=scale)
    norms = np.linalg.norm(r, axis=0)
    reg = prog.logdet_divergence(norms) if regularizer == "logdet" else prog.pullback(norms)
    return prog.solve(cp.sum_squares(r @ prog.theta - c) + weight * reg, precise=True)


def _pull_root(target: Target, r: np.ndarray, scale: np.ndarray, null: np.ndarray | None = None
               ) -> np.ndarray:
    """``L (s, p)`` with ``‖L d‖² = TIE_BREAK·‖Nᵀd‖² + PRIOR_WEIGHT·‖w ⊙ d‖²``: least_squares_program's
    tie-break and prior pull (:meth:`ConvexProgram.tie_break` of ``r``, :meth:`ConvexProgram.prior_pull`
    of its column norms) on the scaled step ``d = θ̃ − θ̃₀`` (``null``: the tie-break basis, if
    already computed)."""
    null = tie_break_basis(target, scale, r) if null is None else null
    weights = prior_pull_weights(target, scale, np.linalg.norm(r, axis=0))
    l_root = np.sqrt(TIE_BREAK) * null.T
    if weights is not None:
        l_root = np.vstack([l_root, np.sqrt(PRIOR_WEIGHT) * np.diag(weights)])
    return l_root


def direct_solve(target: Target, scale: np.ndarray, objective: conic.SquaresObjective, *,
                 precise: bool = False, feasible: conic.FeasibleSet | None = None) -> ConvexSolution | None:
    """``min objective`` over :class:`ConvexProgram`'s consistent set (default margin) by Clarabel
    on the conic form (:mod:`~sysid_ros.core.batch.conic`), without cvxpy: the ConvexSolution of
    :meth:`ConvexProgram.solve` with the same objective, or None when Clarabel does not report
    ``Solved`` (the caller solves the cvxpy statement then, with its fall-backs). ``feasible``:
    that set's conic form (:func:`direct_feasible_set` of the same target and scale), when a caller
    solves several programs over it."""
    feasible = direct_feasible_set(target, scale) if feasible is None else feasible
    try:
        sol = conic.solve_squares(objective, feasible, _PRECISE["CLARABEL"] if precise else None)
    except (ValueError, TypeError, ArithmeticError, RuntimeError) as exc:
        sol = f"failed ({exc})"
    if isinstance(sol, str):
        log.debug("Clarabel on the program's conic form ended %s; solving it through cvxpy", sol)
        return None
    theta = scale * sol.x
    return ConvexSolution(theta, "optimal", conic.SOLVER, sol.solve_time, sol.objective,
                          sol.multipliers, near_boundary(target, theta, rel=1e-6),
                          iterations=None)


def direct_feasible_set(target: Target, scale: np.ndarray) -> conic.FeasibleSet:
    """The conic form of :class:`ConvexProgram`'s consistent set (default margin) on
    ``θ = scale ⊙ θ̃``, as :func:`direct_solve` solves over it."""
    return conic.feasible_set(target, scale, CONSISTENCY_MARGIN)


#: ConvexSolution.solver of an optimum found by linear algebra, strictly inside every constraint
CLOSED_FORM = "closed form (interior optimum)"
#: relative room to every constraint (:func:`near_boundary`'s ``rel``, beyond the consistency
#: margin) that an unconstrained minimiser needs to count as the program's optimum: 10× the
#: tolerance at which a solver's answer counts as active, far above the minimiser's rounding
INTERIOR_SLACK = 1e-5


def interior_optimum(target: Target, r: np.ndarray, c: np.ndarray, scale: np.ndarray, rho: float,
                     *, consistent: bool = True) -> ConvexSolution | None:
    """The optimum of least_squares_program's program without regulariser,
    ``min ‖r θ − c‖ + ρ·(TIE_BREAK·tie-break + PRIOR_WEIGHT·prior pull)`` in the scaled
    variables ``θ = scale ⊙ θ̃`` (``r (m, p)``, ``c (m,)``, ``scale (p,)``), when the objective's
    unconstrained minimiser (:func:`~sysid_ros.core.batch.interior.unconstrained_minimiser`) is
    strictly inside every constraint (:func:`near_boundary` with :data:`INTERIOR_SLACK` and the
    consistency margin): then it is the program's optimum (convexity, KKT with zero multipliers).
    None otherwise."""
    from sysid_ros.core.batch.interior import unconstrained_minimiser

    start = time.perf_counter()
    a = r * scale
    null = tie_break_basis(target, scale, r)
    l_root = _pull_root(target, r, scale, null)
    candidate = unconstrained_minimiser(a, c, target.prior / scale, rho, l_root, null)
    if candidate is None:
        return None
    theta = scale * candidate.theta_scaled
    near = near_boundary(target, theta, rel=INTERIOR_SLACK, margin=CONSISTENCY_MARGIN) if consistent else []
    if near:
        log.debug("unconstrained minimiser not strictly inside %s: solving the program", near)
        return None
    return ConvexSolution(theta, "optimal", CLOSED_FORM, time.perf_counter() - start,
                          candidate.objective)
