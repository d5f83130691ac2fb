"""The online estimator: a row builder feeding RLS, RLS log-det-div or MHE, with diagnostics."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sysid_ros.core.blas import on_one_blas_thread  # updates: p×p matrices, one thread
from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.target import Target
from sysid_ros.core.online.options import WEIGHTINGS, Weighting
from sysid_ros.core.online.rls import RecursiveLeastSquares
from sysid_ros.core.online.rls_logdet import RLSLogDet
from sysid_ros.core.online.row_weights import ResidualWeights
from sysid_ros.core.online.rows import (
    ConservationRows,
    ForceRows,
    MomentumRows,
    Regression,
)

Estimator = Literal["rls", "rls_logdet", "mhe"]


@dataclass
class OnlineLog:
    """Estimates over time: ``t (K,)``, ``theta (K, p)``, ``divergence (K,)`` (NaN if no truth)."""

    t: list[float] = field(default_factory=list)
    theta: list[np.ndarray] = field(default_factory=list)
    divergence: list[float] = field(default_factory=list)
    update_time: list[float] = field(default_factory=list)


class EstimateRecord:
    """What every online estimator keeps beside its core (``self.core`` with ``theta`` and
    ``samples``; ``self.truth``, ``self.divergence``): the estimates over time (``log``), the
    refused steps (``rejected``, ``last_rejection``) and the a-priori torque residuals
    (``residual_rms`` [N·m])."""

    def _start_record(self) -> None:
        self.log = OnlineLog()
        self.rejected = 0
        self.last_rejection: tuple[float, str] | None = None
        self.residual_sq = 0.0
        self.residual_n = 0

    @property
    def theta(self) -> np.ndarray:
        return self.core.theta

    @property
    def samples(self) -> int:
        return self.core.samples

    @property
    def residual_rms(self) -> float:
        return float(np.sqrt(self.residual_sq / self.residual_n)) if self.residual_n else float("nan")

    def _reject(self, t: float, exc: Exception) -> bool:
        """Count a step the core refused (the estimate stays as it was); returns False."""
        self.rejected += 1
        self.last_rejection = (float(t), str(exc))
        return False

    def _record(self, t: float, start: float) -> None:
        """Log the estimate after the step at ``t`` that began at ``start`` (perf_counter)."""
        self.log.t.append(float(t))
        self.log.theta.append(self.core.theta.copy())
        self.log.divergence.append(self.divergence(self.truth) if self.truth is not None else np.nan)
        self.log.update_time.append(time.perf_counter() - start)


class OnlineEstimator(EstimateRecord):
    """A row builder feeding RLS or RLS log-det-div, with counters and timing.

    ``push`` takes one conditioned sample, ``push_batch`` ``K`` of them. Rows the estimator
    refuses (non-finite or implausible values, a failed step) leave the estimate as it was and
    are counted in :attr:`rejected` (the last one's time and reason in :attr:`last_rejection`);
    the other rows of a batch are still used. ``weight``: the rows' W from the sensors (scalar or per row);
    ``weighting="adaptive"``: W = 1/σ̂² per row instead, σ̂ estimated online from the
    residuals with ``weight_memory`` [s] of memory at ``sample_rate`` [Hz] rows, never above
    ``weight`` (:class:`~sysid_ros.core.online.row_weights.ResidualWeights`).
    ``estimator="mhe"``: :class:`~sysid_ros.core.online.mhe.MovingHorizon` over ``horizon`` [s]
    of rows, solved ``solve_rate`` times per second of data, parameters drifting by ``drift``.
    ``update_rate`` [Hz of data time] (RLS log-det-div): every row is folded into the information
    at once, the estimate is re-solved (Newton) at the first sample of each ``1/update_rate``
    interval of data time (0: at every sample); what a node at 500 Hz needs when the per-sample
    solve outruns its share of a busy host. The intervals are of data time, so the estimates do
    not depend on how the stream is cut into batches.
    """

    def __init__(self, target: Target, *, regression: Regression = "force",
                 estimator: Estimator = "rls_logdet",
                 forgetting: float = 1.0, alpha: float = 1.0, weight: float | np.ndarray = 1.0,
                 window: float = 0.5, momentum_scheme: str = "auto",
                 prior: np.ndarray | None = None, p0: float = 1.0,
                 truth: np.ndarray | None = None, min_speed: float = 0.0,
                 weighting: Weighting = "fixed", weight_memory: float = 1.0,
                 sample_rate: float = 500.0, horizon: float = 2.0, solve_rate: float = 10.0,
                 drift: float = 0.1, update_rate: float = 0.0) -> None:
        self.target = target
        self._solve_period = 1.0 / update_rate if update_rate > 0 else 0.0  # [s of data]
        self._solved_interval: int | None = None  # index of the data-time interval last solved in
        self._pending: tuple[float, float] | None = None  # a deferred solve: (data time, perf start)
        self.prior = target.prior if prior is None else np.asarray(prior, dtype=float)
        if regression == "force":
            self.rows = ForceRows(target, min_speed=min_speed)
        elif regression == "momentum":
            self.rows = MomentumRows(target, window=window, discretisation=momentum_scheme)
        elif regression == "conservation":
            self.rows = ConservationRows(target)
        else:
            raise DataError(f"unknown regression {regression!r}; expected force, momentum or conservation")
        if weighting not in WEIGHTINGS:
            raise DataError(f"unknown weighting {weighting!r}; expected {' or '.join(WEIGHTINGS)}")
        # adaptive: rows whitened by their online error estimate (the sensors' σ its floor), unit W
        self.row_weights = (ResidualWeights(np.asarray(weight, dtype=float) ** -0.5,
                                            time_constant=weight_memory, fs=sample_rate)
                            if weighting == "adaptive" else None)
        if self.row_weights is not None:
            weight = 1.0
        if estimator == "rls_logdet":
            blocks = [sl for _, sl in target.body_blocks]
            # joint terms that must stay ≥ 0 (friction, rotor inertia) keep a barrier: every
            # estimate is physically consistent, joint terms included
            self.core = RLSLogDet(self.prior, blocks, alpha=alpha, weight=weight, forgetting=forgetting,
                                  nonnegative=target.nonnegative)
        elif estimator == "rls":
            self.core = RecursiveLeastSquares(self.prior, p0, forgetting=forgetting,
                                              noise=1.0 / np.sqrt(weight))
        elif estimator == "mhe":
            from sysid_ros.core.online.mhe import MovingHorizon  # cvxpy only when used

            self.core = MovingHorizon(target, self.prior, weight=float(np.mean(weight)), horizon=horizon,
                                      solve_rate=solve_rate, drift=drift)
        else:
            raise DataError(f"unknown estimator {estimator!r}; expected rls, rls_logdet or mhe")
        self.regression, self.estimator = regression, estimator
        self.truth = truth
        self._start_record()
        p = len(self.prior)
        # RLS keeps P, not the information: Ω = λΩ + AᵀWA of the rows it was given
        self._information = np.zeros((p, p)) if estimator == "rls" else None

    @property
    def information(self) -> np.ndarray:
        """``Ω (p, p)``: the data's information ``Σ λ^{k−i} A_iᵀ W_i A_i`` (the prior's term left out)."""
        return self.core.omega if self._information is None else self._information

    def divergence(self, reference: np.ndarray) -> float:
        """Σ_b log-det divergence of the estimate from ``reference`` (inf if inconsistent, NaN if
        ``reference`` is not consistent)."""
        if isinstance(self.core, RLSLogDet):  # always consistent; the reference's terms kept
            try:
                return self.core.divergence_to(reference)
            except SysIdError:
                return float("nan")
        return self.target.divergence(self.theta, reference)

    def push(self, t: float, q, dq, ddq, tau, *, log: bool = True) -> bool:
        """Process one sample; returns whether the estimate was updated."""
        start = time.perf_counter()
        with on_one_blas_thread():
            return self._update(t, self.rows.push(t, q, dq, ddq, tau), start, log)

    def push_batch(self, t, q, dq, ddq, tau, *, log: bool = True, defer: bool = False) -> int:
        """Process ``K`` samples with batched regressors (how a node catches up); returns the
        number of updates. RLS log-det-div with fixed row weights and an ``update_rate`` (no
        ``log`` of every sample's estimate) folds the rows between two solves in one product
        (:meth:`RLSLogDet.fold`: the information ``K`` one-row folds give) and solves where the
        one-sample path would; ``defer``: the solves due in these samples wait for
        :meth:`settle` (a caller's batch ends with one solve: the minimiser of every row folded,
        the estimate a solve at every sample reaches there; ``log`` then records the solves).
        Other estimators take the rows one sample at a time."""
        if not hasattr(self.rows, "push_batch"):
            return sum(self.push(t[k], q[k], dq[k], ddq[k], tau[k], log=log) for k in range(len(t)))
        with on_one_blas_thread():
            start = time.perf_counter()
            rows = self.rows.push_batch(t, q, dq, ddq, tau)
            if self._folds and (defer or (self._solve_period > 0 and not log)):
                return self._fold_rows(np.asarray(t, dtype=float), rows, start, log, defer)
            build = (time.perf_counter() - start) / max(len(rows), 1)
            return sum(self._update(t[k], r, time.perf_counter() - build, log) for k, r in enumerate(rows))

    @property
    def _folds(self) -> bool:
        """Whether rows can be folded in blocks: RLS log-det-div whose row weights do not depend
        on the estimate row by row (adaptive weights are whitened one row at a time)."""
        return isinstance(self.core, RLSLogDet) and self.row_weights is None

    def _due(self, times: np.ndarray) -> np.ndarray:
        """``(K,)`` bool: the samples at ``times`` [s] a solve follows (the first of each
        ``1/update_rate`` interval of data time; every sample without an update rate)."""
        if self._solve_period <= 0:
            return np.ones(times.shape, dtype=bool)
        intervals = np.floor(times / self._solve_period).astype(np.int64)
        due = np.r_[True, intervals[1:] != intervals[:-1]]
        if self._solved_interval is not None:
            due[0] = intervals[0] != self._solved_interval
        self._solved_interval = int(intervals[-1])
        return due

    def _fold_rows(self, t: np.ndarray, rows: list, start: float, log: bool, defer: bool) -> int:
        """Fold ``rows`` (one ``(A, y)`` or None per sample at ``t``) in blocks that end where a
        solve is due; a-priori residuals against the estimate before each block."""
        keep = [k for k, r in enumerate(rows) if r is not None]
        if not keep:
            return 0
        a = np.stack([np.atleast_2d(rows[k][0]) for k in keep])
        y = np.stack([np.atleast_1d(rows[k][1]) for k in keep])
        times = t[keep]
        refused = self.core.refusals(a, y)
        if refused:  # each refused sample counted, the others folded
            for k, why in refused:
                self._reject(times[k], DataError(why))
            ok = np.ones(len(keep), dtype=bool)
            ok[[k for k, _ in refused]] = False
            a, y, times = a[ok], y[ok], times[ok]
            if not times.size:
                return 0
        due = np.flatnonzero(self._due(times))
        if defer:
            self._fold_block(a, y)
            if due.size:
                self._pending = (float(times[-1]), start)
            return times.size
        updates, first = 0, 0
        for last in due:  # fold up to and including a due sample, then solve
            self._fold_block(a[first:last + 1], y[first:last + 1])
            updates += last + 1 - first
            if self._solve(float(times[last]), start, log):
                start = time.perf_counter()
            first = last + 1
        self._fold_block(a[first:], y[first:])
        return updates + times.size - first

    def _fold_block(self, a: np.ndarray, y: np.ndarray) -> None:
        if not len(a):
            return
        residual = y - a @ self.core.theta
        self.residual_sq += float(np.sum(residual * residual))
        self.residual_n += residual.size
        self.core.fold(a, y)

    def _solve(self, t: float, start: float, log: bool) -> bool:
        try:
            self.core.solve()
        except (SysIdError, np.linalg.LinAlgError) as exc:
            return self._reject(t, exc)
        if log:
            self._record(t, start)
        return True

    def settle(self, *, log: bool = True) -> bool:
        """The solve :meth:`push_batch` deferred, if one is due (once, at the data time of the
        last sample folded); returns whether one ran and succeeded."""
        if self._pending is None:
            return False
        (t, start), self._pending = self._pending, None
        with on_one_blas_thread():
            return self._solve(t, start, log)

    def _update(self, t: float, rows, start: float, log: bool) -> bool:
        if rows is None:
            return False
        a, y = rows
        residual = y - a @ self.core.theta
        fed = (a, y) if self.row_weights is None else self.row_weights.whiten(a, y, self.core.theta)
        extra = {"t": float(t)} if getattr(self.core, "timed", False) else {}
        if self._solve_period > 0 and isinstance(self.core, RLSLogDet):
            interval = math.floor(float(t) / self._solve_period)
            extra["solve"] = interval != self._solved_interval
            self._solved_interval = interval
        try:
            self.core.update(*fed, **extra)
        except (SysIdError, np.linalg.LinAlgError) as exc:
            return self._reject(t, exc)
        if self.row_weights is not None:
            self.row_weights.observe(a, y, self.core.theta)
        if self._information is not None:
            a_w = np.atleast_2d(fed[0])
            noise = np.broadcast_to(np.asarray(self.core.noise, dtype=float), (a_w.shape[0],))
            self._information *= self.core.forgetting
            self._information += a_w.T @ (a_w / noise[:, None] ** 2)
        self.residual_sq += float(residual @ residual)
        self.residual_n += residual.size
        if log:
            self._record(t, start)
        return True
