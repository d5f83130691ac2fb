"""One online identification session: joint samples in, an estimate with diagnostics out.

::

    push(t, q, q̇, τ) ─► stream checks ─► causal conditioning ─► rows ─► estimator ─► snapshot()
                        NaN, times that    CausalConditioner      Force/        RLS or RLS
                        do not increase:   (one low-pass, one     Momentum      log-det-div
                        counted; a gap:    delay; rows withheld   Rows
                        filters restart    while it settles)

The ``estimator`` node and ``sysid identify --method rls|rls_logdet|momentum|ekf|mhe`` both run an
:class:`OnlineSession` with the same :class:`OnlineOptions`; the node adds only messages, queues
and publication. Nothing here looks ahead: a sample is processed when it is pushed, and the
estimate does not depend on how the stream is cut into batches.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.data.stationary import moving
from sysid_ros.core.data.stream_time import gap_steps, missing_samples
from sysid_ros.core.errors import DataError
from sysid_ros.core.json_numbers import json_number
from sysid_ros.core.model.target import Target
from sysid_ros.core.online.conditioning import CausalConditioner
from sysid_ros.core.online.estimator import OnlineEstimator, on_one_blas_thread
from sysid_ros.core.online.options import ONLINE_METHODS, OPTION_HELP, OnlineOptions
from sysid_ros.core.online.rows import momentum_row_weight
from sysid_ros.core.result import IdentificationResult, SolverStatus, estimate_result

__all__ = ["ONLINE_METHODS", "OPTION_HELP", "REJECTION_REASONS", "OnlineEstimate", "OnlineOptions",
           "OnlineSession", "StreamEvent"]

#: why a pushed sample did not reach the estimate: non-finite values, a time not after the
#: previous sample's (stale, repeated or out of order), rows the estimator refused
REJECTION_REASONS: tuple[str, ...] = ("nan", "stale", "update")

@dataclass(frozen=True)
class StreamEvent:
    """What one push found: ``reason`` (``"nan"``, ``"stale"``, ``"update"``: samples rejected,
    ``count`` of them; ``"gap"``: one gap, the filters restarted), ``t`` [s] the data time of the
    (first) sample concerned, ``detail``: what was wrong, for a log line."""

    reason: str
    count: int
    t: float
    detail: str


@dataclass(frozen=True)
class OnlineEstimate:
    """The session's state at one moment (a copy: it does not change with later pushes).

    ``time`` [s]: data time of the last sample folded into the estimate (NaN before any);
    ``latest`` [s]: data time of the newest accepted sample (the difference is the conditioning
    delay and the filters' settling). ``theta (p,)``/``std (p,)`` in the target's layout
    (``names``); ``std``: from the covariance (RLS) or the data's information matrix Ω
    (RLS log-det-div; the prior's term left out), NaN before the first update; ``beta (r,)``:
    base parameters; ``rank``/``condition_number``: of the base parameters' information
    ``B Ω Bᵀ`` (√ of its eigenvalue ratio; 0 and NaN before the first update). Counters:
    ``received`` samples pushed, ``accepted`` after the stream checks, ``conditioned`` out of the
    filters, ``stationary`` of those left out by the stationary rule, ``updates`` of the
    estimator, ``gaps`` (filter restarts), ``missing``: samples the stream's time steps say were
    lost on the way (a step of ``k`` nominal periods, ``k ≥ 2``, misses ``k − 1``);
    ``rejected``: samples that never reached the estimate, by reason
    (:data:`REJECTION_REASONS` plus what the caller counted with :meth:`OnlineSession.reject`).
    ``residual_rms`` [N·m for force rows]: of the a-priori residuals; ``consistent``: every
    pseudo-inertia ≻ 0 (and joint terms ≥ 0); divergences: log-det (Σ over bodies) to the prior
    and to the truth (NaN when none is known). ``projection`` (the EKF; None for the others):
    ``theta`` is the filter's estimate projected onto the consistent, plausible set, and this says
    by how much (:meth:`~sysid_ros.core.online.projection.Projection.as_dict`: Mahalanobis
    distance, bodies moved, constraints the raw estimate broke).
    """

    time: float
    latest: float
    method: str
    target: str
    names: tuple[str, ...]
    theta: np.ndarray
    std: np.ndarray
    beta: np.ndarray
    rank: int
    condition_number: float
    received: int
    accepted: int
    conditioned: int
    stationary: int
    updates: int
    gaps: int
    missing: int
    rejected: MappingProxyType
    residual_rms: float
    consistent: bool
    divergence_to_prior: float
    divergence_to_truth: float
    projection: MappingProxyType | None = None

    @property
    def counters(self) -> dict[str, int]:
        """Every counter in one flat dict (``rejected_<reason>`` for the rejections)."""
        return {"received": self.received, "accepted": self.accepted, "conditioned": self.conditioned,
                "stationary": self.stationary, "updates": self.updates, "gaps": self.gaps,
                "missing": self.missing,
                **{f"rejected_{k}": v for k, v in self.rejected.items()}}

    def to_result(self, target: Target, *, joint_names: tuple[str, ...] = (),
                  options: OnlineOptions | None = None) -> IdentificationResult:
        """This estimate as the typed result the batch path writes (``result.json``'s schema):
        ``target`` the session's (its layout is :attr:`names`), ``joint_names`` the stream's.
        The online figures (as a replay's: estimator, regression, updates, rejections, residual
        RMS, divergences; and the counters, the data time, the EKF's projection and, with
        ``options``, the session's options) go under ``diagnostics["online"]``; an EKF estimate
        the projection changed is exported as that projection (``parameters_from``), with the
        projection's solver status."""
        if tuple(target.names) != self.names:
            raise DataError(f"expected the target of this estimate ({len(self.names)} parameters "
                            f"{list(self.names[:3])}...), got one of {target.n_params}")
        kind = OnlineOptions(method=self.method)
        estimator = kind.estimator
        online = {"estimator": estimator, "regression": kind.regression, "updates": self.updates,
                  "rejected": int(self.rejected.get("update", 0)),  # updates refused (as a replay's)
                  "counters": self.counters,
                  "data_time_s": json_number(self.time), "residual_rms": json_number(self.residual_rms),
                  "divergence_to_prior": json_number(self.divergence_to_prior),
                  "final_divergence_to_truth": json_number(self.divergence_to_truth)}
        if options is not None:
            online["options"] = options.as_dict()
        solver = SolverStatus(solver=estimator)
        if self.projection is not None:
            online["projection"] = dict(self.projection)
            if self.projection["status"] != "unchanged":
                solver = SolverStatus(solver=estimator, status=self.projection["status"],
                                      binding_constraints=tuple(self.projection["binding"]))
        result = estimate_result(target, self.theta, method=self.method, std=self.std, rank=self.rank,
                                 condition_number=self.condition_number, residual_rms=self.residual_rms,
                                 n_samples=self.updates, solver=solver, joint_names=tuple(joint_names),
                                 extra={"online": online})
        status = "unchanged" if self.projection is None else self.projection["status"]
        if status != "unchanged" and not status.startswith("failed"):  # Projection.solved
            from sysid_ros.core.online.projection import PROJECTED  # imports cvxpy

            result = replace(result, parameters_from=PROJECTED)
        return result


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.flags.writeable = False
    return a


class OnlineSession:
    """A target's online estimate from a stream of joint samples.

    ``push(t, q, dq, tau)``: one sample (``q``, ``dq``, ``tau`` of shape ``(n,)`` in the model's
    joint order, ``dq`` ``None`` when not measured: differentiated); ``push_batch``: ``K``
    consecutive samples (``(K,)``, ``(K, n)``), as a node's queue hands them over — the result
    is the same however the stream is cut. Samples with a non-finite value and samples whose
    time is not after the last accepted one are counted and left out; a step longer than
    ``options.max_step`` is a gap: the filters and momentum windows restart after it (the
    estimator keeps what it learnt). ``truth`` (optional, the target's layout) adds the
    divergence to the truth to every estimate (and to :attr:`OnlineEstimator.log`).

    ``solve_per_batch`` (a node, whose batches are its queue at each processing step): RLS
    log-det-div (``rls_logdet``, ``momentum``) folds a batch's rows into the information in one
    product and solves once, at the batch's end, if a solve was due in it (``update_rate``): the
    estimate is then the minimiser of every row so far, the one a solve at every sample reaches
    at that sample (to Newton's tolerance), for one solve per batch however long the batch. The
    a-priori residuals (``residual_rms``) are taken against the estimate before the batch. The
    default solves where ``update_rate`` says, sample by sample, whatever the batches.
    """

    def __init__(self, target: Target, options: OnlineOptions | None = None, *,
                 truth: np.ndarray | None = None, solve_per_batch: bool = False) -> None:
        self.target = target
        self.options = options if options is not None else OnlineOptions()
        self.estimator = _make_estimator(target, self.options)
        # the EKF has no rows to fold: it takes every sample as it comes either way
        self.solve_per_batch = bool(solve_per_batch) and isinstance(self.estimator, OnlineEstimator)
        self.n = len(target.model.dof_joint_names)
        self.truth = truth
        self._conditioner = self._new_conditioner()
        self._last_t = -math.inf  # newest accepted sample
        self._time = math.nan  # newest sample folded into the estimate
        self._counts = {"received": 0, "accepted": 0, "conditioned": 0, "stationary": 0, "gaps": 0,
                        "missing": 0}
        self._moving = False  # the last conditioned sample moved (stationary rule)
        self._rejected = dict.fromkeys(REJECTION_REASONS, 0)

    # ---------------------------------------------------------------------------- inputs
    @property
    def truth(self) -> np.ndarray | None:
        return self.estimator.truth

    @truth.setter
    def truth(self, value: np.ndarray | None) -> None:
        if value is not None:
            value = np.asarray(value, dtype=float)
            if value.shape != (self.target.n_params,):
                raise DataError(f"expected true parameters of shape ({self.target.n_params},), "
                                f"got {value.shape}")
        self.estimator.truth = value

    @property
    def settle(self) -> float:
        """[s] rows wait this long after the start and after every gap (the filters' start-up)."""
        return self._conditioner.settle

    def push(self, t: float, q, dq, tau) -> tuple[StreamEvent, ...]:
        """One sample; see :meth:`push_batch`."""
        return self.push_batch(np.array([t], dtype=float), np.asarray(q, dtype=float)[None],
                               None if dq is None else np.asarray(dq, dtype=float)[None],
                               np.asarray(tau, dtype=float)[None])

    def push_batch(self, t, q, dq, tau) -> tuple[StreamEvent, ...]:
        """``K`` samples in time order: ``t (K,)`` [s], ``q, tau (K, n)``, ``dq (K, n)`` or
        ``None``. Returns what was rejected or restarted (empty for a clean stream); arrays of
        the wrong shape raise :class:`DataError` (a caller's mistake, not a bad sample)."""
        t = np.asarray(t, dtype=float).reshape(-1)
        k = t.size
        q, tau = np.asarray(q, dtype=float), np.asarray(tau, dtype=float)
        dq = None if dq is None else np.asarray(dq, dtype=float)
        for name, arr in (("q", q), ("tau", tau), ("dq", dq)):
            if arr is not None and arr.shape != (k, self.n):
                raise DataError(f"expected {name} of shape ({k}, {self.n}) for {k} samples, got {arr.shape}")
        if k == 0:
            return ()
        self._counts["received"] += k
        events: list[StreamEvent] = []
        finite = np.isfinite(t) & np.isfinite(q).all(axis=1) & np.isfinite(tau).all(axis=1)
        if dq is not None:
            finite &= np.isfinite(dq).all(axis=1)
        # newest accepted time before each sample: a stale sample is never newer than it, so the
        # running maximum over every finite sample is the running maximum over the accepted ones
        before = np.maximum.accumulate(np.r_[self._last_t, np.where(finite, t, -np.inf)])[:-1]
        fresh = finite & (t > before)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            events.append(self._count("nan", bad.size, float(t[bad[0]]), "non-finite time, q, q̇ or τ"))
        stale = np.flatnonzero(finite & ~fresh)
        if stale.size:
            events.append(self._count("stale", stale.size, float(t[stale[0]]),
                                      f"t={t[stale[0]]:.6f} s is not after t={before[stale[0]]:.6f} s"))
        idx = np.flatnonzero(fresh)
        if not idx.size:
            return tuple(events)
        self._counts["accepted"] += idx.size
        times = t[idx]
        previous = np.r_[self._last_t, times[:-1]]
        step = times - previous
        known = np.isfinite(previous)
        period = 1.0 / self.options.sample_rate  # the one gap rule at the nominal period: lost samples
        self._counts["missing"] += int(missing_samples(step[known], period).sum())
        gap = known & gap_steps(step, period, self.options.gap_periods)  # and the filters' restarts
        self._last_t = float(times[-1])
        cuts = np.r_[0, np.flatnonzero(gap), idx.size]
        for start, stop in itertools.pairwise(cuts):
            if stop <= start:
                continue
            if gap[start]:  # differences across a gap would be wrong: restart filters and windows
                self._counts["gaps"] += 1
                events.append(StreamEvent("gap", 1, float(times[start]),
                                          f"gap of {1e3 * (times[start] - previous[start]):.1f} ms"))
                self._restart()
            sel = idx[start:stop]
            part_dq = None if dq is None else dq[sel]
            events.extend(self._condition_and_update(t[sel], q[sel], part_dq, tau[sel]))
        if self.solve_per_batch:  # the batch's one solve (RLS log-det-div: the rows were folded)
            refused = self.estimator.rejected
            if not self.estimator.settle(log=self.options.history) and self.estimator.rejected > refused:
                t_bad, why = self.estimator.last_rejection
                events.append(self._count("update", 1, t_bad, why))
        return tuple(events)

    def prepare(self) -> None:
        """Set up now what the first samples would set up when they arrive, without touching this
        session: a copy (same target and options) takes a made-up stream, every joint swinging
        ±0.1 rad at 1 Hz around 0 for the filters' settling time plus 20 samples, and gives its
        estimate, so that the filters' and the regressors' compiled kernels (numba's import and
        CPU target, the kernels' disk cache: ~1-1.5 s of CPU) and the method's solver bindings
        are loaded. A node calls it in a thread of its own once it is ready; samples that arrive
        meanwhile wait for whichever finishes the set-up first. What the copy's data cannot reach
        (a payload target's solver path when no update is accepted) is set up on first use.
        Raises whatever the copy raises (a caller running it in the background logs it)."""
        copy = OnlineSession(self.target, self.options, solve_per_batch=self.solve_per_batch)
        fs = self.options.sample_rate
        t = np.arange(math.ceil(copy.settle * fs) + 20) / fs
        phase = 2.0 * math.pi * t[:, None] + np.arange(self.n)[None, :]
        q, dq = 0.1 * np.sin(phase), 0.2 * math.pi * np.cos(phase)
        copy.push_batch(t, q, dq, np.zeros_like(q))
        copy.result()

    @property
    def counters(self) -> dict[str, int]:
        """:attr:`OnlineEstimate.counters` without computing an estimate (cheap, for log lines)."""
        return {**self._counts, "updates": self.estimator.samples,
                **{f"rejected_{k}": v for k, v in self._rejected.items()}}

    def reject(self, reason: str, count: int = 1) -> None:
        """Count ``count`` samples the caller refused before pushing them (e.g. a node's message
        naming other joints, or its full queue); they appear in :attr:`OnlineEstimate.rejected`."""
        self._rejected[reason] = self._rejected.get(reason, 0) + int(count)

    def _count(self, reason: str, count: int, t: float, detail: str) -> StreamEvent:
        self._rejected[reason] += count
        return StreamEvent(reason, count, t, detail)

    def _new_conditioner(self) -> CausalConditioner:
        """Causal filters for a fresh segment; rows wait until they have settled."""
        return CausalConditioner(self.n, self.options.sample_rate, self.options.effective_cutoff,
                                 settle="auto", effort_lag=self.options.effort_lag)

    def _restart(self) -> None:
        self._conditioner = self._new_conditioner()
        self.estimator.rows.restart()
        self._moving = False

    def _condition_and_update(self, t, q, dq, tau) -> list[StreamEvent]:
        out = self._conditioner.push_batch(t, q, dq, tau)
        if not len(out[0]):
            return []
        refused = self.estimator.rejected
        # only a folding estimator defers its solve (the EKF's push_batch has no ``defer``)
        defer = {"defer": True} if self.solve_per_batch else {}
        self._counts["conditioned"] += len(out[0])
        self._time = float(out[0][-1])
        if self.options.stationary_cut and self.options.regression != "state":  # the EKF needs every sample
            for run, restart in self._moving_runs(out[2]):
                if restart:
                    self.estimator.rows.restart()
                self.estimator.push_batch(*(a[run] for a in out), log=self.options.history, **defer)
        else:
            self.estimator.push_batch(*out, log=self.options.history, **defer)
        refused = self.estimator.rejected - refused
        if not refused:
            return []
        t_bad, why = self.estimator.last_rejection
        return [self._count("update", refused, t_bad, why)]

    def _moving_runs(self, dq: np.ndarray) -> list[tuple[slice, bool]]:
        """``(run, restart)`` for each run of moving samples among conditioned velocities
        ``dq (K, n)``; stationary ones are counted. A run that starts after a stationary sample
        restarts the row builder (a momentum window must not span the samples left out); one that
        continues the previous batch's motion does not, so the rows do not depend on how the
        stream is cut."""
        move = moving(dq)
        self._counts["stationary"] += int(np.count_nonzero(~move))
        edges = np.flatnonzero(np.diff(np.r_[False, move, False].astype(np.int8)))
        runs = [(slice(int(a), int(b)), bool(a > 0 or not self._moving))
                for a, b in zip(edges[::2], edges[1::2], strict=True)]
        self._moving = bool(move[-1])
        return runs

    # --------------------------------------------------------------------------- outputs
    def covariance(self) -> np.ndarray:
        """``Σ (p, p)`` of the estimate in the target's layout: the estimator's own covariance
        ``P`` (RLS), else the pseudo-inverse of the data's information Ω (the prior's term left
        out); NaN before the first update. What the std of :meth:`snapshot` and the precision
        (:func:`~sysid_ros.core.online.precision.estimate_precision`) come from."""
        est = self.estimator
        if not (est.samples or _own_covariance(est)):
            p = self.target.n_params
            return np.full((p, p), np.nan)
        with on_one_blas_thread():
            return self._covariance()

    def information(self) -> np.ndarray:
        """``Ω (p, p)`` the data's information in the target's layout (the prior's term left
        out): what :func:`~sysid_ros.core.online.precision.estimate_precision` takes."""
        return np.array(self.estimator.information, dtype=float)

    def _covariance(self) -> np.ndarray:
        est = self.estimator
        if _own_covariance(est):
            return np.array(est.core.P, dtype=float)
        return rla.pinv(est.information)

    def result(self, estimate: OnlineEstimate | None = None, *,
               joint_names: tuple[str, ...] | None = None) -> IdentificationResult:
        """``estimate`` (default: :meth:`snapshot`) as the batch path's typed result
        (:meth:`OnlineEstimate.to_result` with this session's target and options); the joints
        default to the model's."""
        est = self.snapshot() if estimate is None else estimate
        names = self.target.model.dof_joint_names if joint_names is None else joint_names
        return est.to_result(self.target, joint_names=tuple(names), options=self.options)

    def snapshot(self) -> OnlineEstimate:
        """The current estimate with its diagnostics."""
        with on_one_blas_thread():  # p×p decompositions: a second BLAS thread only waits for a core
            return self._snapshot()

    def _snapshot(self) -> OnlineEstimate:
        est, target = self.estimator, self.target
        # the EKF's raw estimate need not be consistent: what it exports is its projection
        projection = est.projection() if hasattr(est, "projection") else None
        theta = (est.theta if projection is None else projection.theta).copy()
        updates = est.samples
        info = est.information
        std = np.sqrt(np.maximum(np.diag(self._covariance()), 0.0)) if updates or _own_covariance(est) \
            else np.full_like(theta, np.nan)
        rank, cond = 0, math.nan
        if updates:
            b = target.base.matrix
            sv = rla.eigvalsh(b @ info @ b.T)[::-1]
            rank = int(np.sum(sv > 1e-12 * max(sv[0], 1e-300)))
            cond = float(np.sqrt(sv[0] / sv[rank - 1])) if rank else math.inf
        truth = est.truth
        return OnlineEstimate(
            time=self._time, latest=self._last_t if math.isfinite(self._last_t) else math.nan,
            method=self.options.method,
            target="arm" if target.kind == "arm" else target.model.body_name(target.body),
            names=tuple(target.names), theta=_readonly(theta), std=_readonly(std),
            beta=_readonly(target.base.of(theta)), rank=rank, condition_number=cond,
            received=self._counts["received"], accepted=self._counts["accepted"],
            conditioned=self._counts["conditioned"], stationary=self._counts["stationary"],
            updates=updates, gaps=self._counts["gaps"], missing=self._counts["missing"],
            rejected=MappingProxyType(dict(self._rejected)), residual_rms=est.residual_rms,
            consistent=bool(target.consistency(theta)["consistent"]),
            divergence_to_prior=target.divergence(theta, est.prior),
            divergence_to_truth=target.divergence(theta, truth) if truth is not None else math.nan,
            projection=None if projection is None else MappingProxyType(projection.as_dict()))


def _own_covariance(est: OnlineEstimator) -> bool:
    """Whether the estimator keeps its own covariance ``P`` of the target's parameters."""
    cov = getattr(est.core, "P", None)
    return cov is not None and np.shape(cov) == (est.theta.size, est.theta.size)


def _make_estimator(target: Target, options: OnlineOptions) -> OnlineEstimator:
    """The estimator of ``options.method`` with row weights from the torque noise."""
    sigma = max(options.torque_noise, 1e-9)
    adaptive = dict(weighting=options.weighting, weight_memory=options.weight_memory,
                    sample_rate=options.sample_rate)
    if options.method == "ekf":
        from sysid_ros.core.online.ekf import EKFEstimator

        return EKFEstimator(target, torque_noise=sigma, position_noise=options.position_noise,
                            velocity_noise=options.velocity_noise, drift=options.drift)
    if options.regression == "momentum":
        weight = momentum_row_weight(sigma, options.window)
        return OnlineEstimator(target, regression="momentum", estimator="rls_logdet",
                               alpha=options.alpha, weight=weight, forgetting=options.forgetting,
                               window=options.window, momentum_scheme=options.momentum_scheme,
                               update_rate=options.update_rate, **adaptive)
    return OnlineEstimator(target, regression="force", estimator=options.estimator,
                           alpha=options.alpha, weight=1.0 / sigma**2, forgetting=options.forgetting,
                           min_speed=options.min_speed, horizon=options.horizon,
                           solve_rate=options.solve_rate, drift=options.drift,
                           update_rate=options.update_rate, **adaptive)
