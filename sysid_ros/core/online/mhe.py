"""Moving-horizon estimation: the identification problem over a sliding window, solved as a
constrained convex program (overview seed, "MHE").

At each solve (``solve_rate`` [Hz] of data time) over the rows of the last ``horizon`` seconds::

    min_θ  Σ_window ‖W^½ (A_k θ − y_k)‖² + (θ − c)ᵀ Π_H (θ − c)
    s.t.   the target's feasible set (:class:`~sysid_ros.core.batch.convex.ConvexProgram`):
           pseudo-inertia J(φ_b) ≻ 0 per body (so m > 0), friction and rotor inertia ≥ 0 (with
           Coulomb + viscous terms ≥ 0 each joint's friction is monotone in its speed), and for an
           arm the plausibility bounds (:class:`~sysid_ros.core.model.target.Plausibility`,
           defaults unless the target has its own): masses, extents, CoMs.

Arrival cost ``(c, Π)``: the information of every row that has left the window, folded in as it
leaves (``Π ← Π + AᵀWA``, ``c ← (Π + AᵀWA)⁻¹(Π c + AᵀW y)``: the Kalman filter of the dropped rows,
started from the prior ``N(θ₀, (INITIAL_STD·s)²)``); the parameters' random walk of
:mod:`.drift` inflates it as data time passes, and by one more horizon in the objective
(``Π_H = (Π⁻¹ + drift² s² H)⁻¹``: the window's estimate is of θ now, the arrival of θ a horizon ago).
No row is counted twice. The program is compiled once (cvxpy parameters hold the data), solved with
Clarabel (SCS as fall-back), warm-started where the solver supports it.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import deque

import cvxpy as cp
import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.convex import ConvexProgram
from sysid_ros.core.errors import DataError, IdentificationError
from sysid_ros.core.model.target import Plausibility, Target
from sysid_ros.core.online.drift import INITIAL_STD, parameter_scale


class MovingHorizon:
    """MHE on a target's standard parameters, fed row by row like the recursive estimators.

    ``prior (p,)``; ``weight``: W of every row (1/σ² [1/(N·m)²]); ``horizon`` [s] the window
    (2–5 s typical); ``solve_rate`` [Hz]: solves per second of data; ``drift`` [1/√s] (see
    :mod:`.drift`). :meth:`update` takes rows ``a (m, p)``, ``y (m,)`` and their data time
    ``t`` [s]. Every estimate satisfies the constraints (up to the solver's tolerance; the
    pseudo-inertias with a margin)."""

    #: the online estimator passes each row's data time to :meth:`update`
    timed = True

    def __init__(self, target: Target, prior: np.ndarray, *, weight: float = 1.0, horizon: float = 2.0,
                 solve_rate: float = 10.0, drift: float = 0.1) -> None:
        for name, value in (("horizon", horizon), ("solve_rate", solve_rate), ("weight", weight)):
            if not (math.isfinite(value) and value > 0):
                raise DataError(f"{name} must be a finite number > 0, got {value}")
        if not drift >= 0:
            raise DataError(f"drift must be >= 0, got {drift}")
        target = Plausibility.or_default(target)
        self.target = target
        self.horizon, self.period, self.drift = float(horizon), 1.0 / float(solve_rate), float(drift)
        self.weight = float(weight)
        self.scale = parameter_scale(target)
        p = target.n_params
        self.theta = np.asarray(prior, dtype=float).copy()
        # arrival cost in scaled coordinates x = θ / s
        self._centre = self.theta / self.scale
        self._info = np.eye(p) / INITIAL_STD**2
        self._rows: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self._arrival_t: float | None = None  # data time the arrival cost refers to
        self._next_solve = -math.inf
        self.omega = np.diag(1.0 / (INITIAL_STD * self.scale) ** 2)
        self.samples = 0
        self.solves = 0
        self.solve_times: list[float] = []
        self.last_status = ""
        self._prog = ConvexProgram(target, scale=self.scale)
        self._s = cp.Parameter((p, p), name="window_factor")
        self._d = cp.Parameter(p, name="window_target")
        self._problem = cp.Problem(cp.Minimize(cp.sum_squares(self._s @ self._prog.theta_scaled - self._d)),
                                   self._prog.constraints)

    def update(self, a: np.ndarray, y: np.ndarray, t: float) -> bool:
        """Add rows ``a (m, p)``, ``y (m,)`` of data time ``t`` [s]; solve when a period has
        passed. Returns whether it solved. Non-finite rows raise :class:`DataError`; a failed
        solve raises :class:`IdentificationError` (the estimate stays)."""
        a = np.atleast_2d(np.asarray(a, dtype=float))
        y = np.atleast_1d(np.asarray(y, dtype=float))
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(y)) and math.isfinite(t)):
            raise DataError("non-finite regressor row or output: sample rejected")
        if self._arrival_t is None:
            self._arrival_t = float(t)
        self._rows.append((float(t), a * self.scale, y))
        self.samples += 1
        if t < self._next_solve:
            return False
        self._next_solve = float(t) + self.period
        self.solve(float(t))
        return True

    def solve(self, now: float) -> np.ndarray:
        """Fold rows older than ``now − horizon`` into the arrival cost, solve the window
        (:attr:`solve_times` [s]: each call's wall time, folding and assembling included)."""
        start = time.perf_counter()
        self._fold(now - self.horizon)
        w = math.sqrt(self.weight)
        a = np.concatenate([r[1] for r in self._rows]) * w
        y = np.concatenate([r[2] for r in self._rows]) * w
        span = max(now - self._arrival_t, 0.0)  # the window's data is of θ now, the arrival's older
        arrival = _inflate(self._info, self.drift**2 * span)
        hess = a.T @ a + arrival
        grad = a.T @ y + arrival @ self._centre
        norm = max(float(np.trace(hess)) / hess.shape[0], 1e-300)
        chol = np.linalg.cholesky(hess / norm)
        self._s.value = chol.T
        self._d.value = np.linalg.solve(chol, grad / norm)
        x = self._solve_program()
        self.solve_times.append(time.perf_counter() - start)
        self.solves += 1
        self.theta = x * self.scale
        self.omega = hess / np.outer(self.scale, self.scale)
        return self.theta

    def _fold(self, before: float) -> None:
        """Rows older than ``before`` leave the window: their information joins the arrival cost
        (after the random walk from the arrival's time to theirs)."""
        rows = self._rows
        if not rows or rows[0][0] >= before:
            return
        out = []
        while rows and rows[0][0] < before:
            out.append(rows.popleft())
        t_last = out[-1][0]
        info = _inflate(self._info, self.drift**2 * max(t_last - self._arrival_t, 0.0))
        a = np.concatenate([r[1] for r in out]) * math.sqrt(self.weight)
        y = np.concatenate([r[2] for r in out]) * math.sqrt(self.weight)
        new = info + a.T @ a
        self._centre = np.linalg.solve(new, info @ self._centre + a.T @ y)
        self._info = 0.5 * (new + new.T)
        self._arrival_t = t_last

    def _solve_program(self) -> np.ndarray:
        problem, x = self._problem, self._prog.theta_scaled
        errors = []
        for solver, options in (("CLARABEL", {}), ("SCS", {"warm_start": True})):
            if solver not in cp.installed_solvers():
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    problem.solve(solver=solver, **options)
            except cp.error.SolverError as exc:
                errors.append(f"{solver}: {exc}")
                continue
            self.last_status = problem.status
            if problem.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and x.value is not None:
                return np.array(x.value, dtype=float)
            errors.append(f"{solver}: {problem.status}")
        raise IdentificationError(f"the moving-horizon program could not be solved ({'; '.join(errors)})")


def _inflate(info: np.ndarray, variance: float) -> np.ndarray:
    """``(Π⁻¹ + variance·I)⁻¹`` for a symmetric positive definite ``Π`` (scaled coordinates)."""
    if variance <= 0:
        return info
    lam, vec = rla.eigh(info)
    lam = np.maximum(lam, 0.0)
    return (vec * (lam / (1.0 + variance * lam))) @ vec.T
