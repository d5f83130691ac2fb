"""Recorded data through an :class:`~sysid_ros.core.online.session.OnlineSession`, sample by
sample, as a live stream would arrive (tune online estimators offline). Used by
``sysid identify --method rls|rls_logdet|momentum|ekf|mhe``; the ``estimator`` node runs the same session."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from sysid_ros.core.atomic import atomic_path
from sysid_ros.core.batch.friction_shape import with_friction_shape_reports
from sysid_ros.core.batch.least_squares import ols
from sysid_ros.core.batch.methods import standard_result
from sysid_ros.core.batch.prepared import Prepared
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.json_numbers import json_number
from sysid_ros.core.model.target import Target
from sysid_ros.core.online.estimator import OnlineEstimator
from sysid_ros.core.online.session import OnlineOptions, OnlineSession
from sysid_ros.core.progress import warn
from sysid_ros.core.report.plotting import pyplot, save_figure
from sysid_ros.core.result import IdentificationResult, SolverStatus, target_label

log = logging.getLogger(__name__)

#: samples handed to the session at a time (any cut gives the same estimate; this only sets the
#: batched regressor calls' size)
CHUNK = 100


def replay(dataset: Dataset, target: Target, options: OnlineOptions, *,
           truth: np.ndarray | None = None, progress: Callable[[str], None] | None = None
           ) -> OnlineSession:
    """Push ``dataset`` through a new session with ``options`` (every estimate kept in
    ``session.estimator.log``) and return the session; progress every tenth of the data."""
    ds = dataset.for_model(target.model)
    session = OnlineSession(target, replace(options, history=True), truth=truth)
    dq = ds.dq if ds.has_velocity else None
    say = progress or (lambda msg: log.info("%s", msg))
    warning = ekf_rate_warning(target, options.method, ds.sample_rate)
    if warning:
        warn(log, progress, warning)
    marks = {max(1, round(i * len(ds) / 10)) for i in range(1, 11)}
    cuts = sorted({*range(0, len(ds), CHUNK), *marks})
    for a, b in itertools.pairwise(cuts):
        for event in session.push_batch(ds.t[a:b], ds.q[a:b], None if dq is None else dq[a:b], ds.tau[a:b]):
            log.warning("%s: %d sample(s) at t=%.4f s: %s", event.reason, event.count, event.t, event.detail)
        if b in marks:
            est = session.estimator
            div = est.log.divergence[-1] if est.log.divergence else float("nan")
            say(f"{options.method}: {100 * b // len(ds)} % ({ds.t[b - 1]:.1f} s), "
                f"{est.samples} updates" + ("" if np.isnan(div) else f", divergence to truth {div:.4g}"))
    if session.estimator.regression == "momentum":
        windows = session.estimator.rows.windows
        say(f"momentum rows: {windows['euler']} window(s) summed as semi-implicit Euler steps, "
            f"{windows['trapezoidal']} integrated by the trapezoidal rule ({options.momentum_scheme})")
    return session


#: most parameters named in convergence.png's legend (the others drawn in grey)
LEGEND_LINES = 12
#: [Hz] above this data rate the whole-arm EKF is warned about (one filter update per sample)
EKF_ARM_RATE = 1000.0


def ekf_rate_warning(target: Target, method: str, rate: float) -> str | None:
    """The warning for the EKF on a whole arm's data sampled faster than :data:`EKF_ARM_RATE`:
    an update of the (2n + r)-state filter per sample makes the replay slow, and its process model
    (integrated over one sample) carries little information per step, so the estimate may end far
    from the truth; None otherwise."""
    if method != "ekf" or target.kind != "arm" or not rate > EKF_ARM_RATE:
        return None
    return (f"ekf on the whole arm ({target.base.rank} base parameters) at {rate:.0f} Hz: one update per "
            f"sample makes it slow and its estimate may end far from the truth; above "
            f"{EKF_ARM_RATE:.0f} Hz use a batch method or rls_logdet, or the ekf on a payload "
            "(--payload-only)")


def write_trajectory(path: Path, est: OnlineEstimator) -> Path:
    """``estimates.csv``: time, divergence to truth, and every parameter over time."""
    header = ",".join(["time", "divergence_to_truth", *est.target.names])
    table = np.column_stack((est.log.t, est.log.divergence, np.array(est.log.theta)))
    with atomic_path(path) as tmp:
        np.savetxt(tmp, table, delimiter=",", header=header, comments="")
    return path


def plot_convergence(path: Path, est: OnlineEstimator) -> Path:
    """Estimates (normalised by their final values) and the divergence to truth over time."""
    plt = pyplot()

    t = np.array(est.log.t)
    theta = np.array(est.log.theta)
    final = np.where(np.abs(theta[-1]) > 1e-12, theta[-1], 1.0)
    fig, axes = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    ratio = theta / final
    names = list(est.target.names)
    # every parameter with its name in the legend; beyond LEGEND_LINES, the ones that moved most
    moved = np.nanmax(np.abs(np.clip(ratio, -1, 3) - 1.0), axis=0) if len(t) else np.zeros(len(names))
    shown = set(np.argsort(-moved)[:LEGEND_LINES].tolist())
    for k, name in enumerate(names):
        if k in shown:
            axes[0].plot(t, ratio[:, k], lw=0.8, label=name)
        else:
            axes[0].plot(t, ratio[:, k], lw=0.5, color="0.75")
    axes[0].set_ylabel("estimate / final")
    axes[0].set_ylim(-1, 3)
    axes[0].grid(alpha=0.3)
    title = None if len(names) <= LEGEND_LINES else f"{LEGEND_LINES} of {len(names)} that moved most"
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", title=title,
                   title_fontsize="x-small", frameon=False)
    div = np.array(est.log.divergence)
    if np.any(np.isfinite(div)):
        axes[1].semilogy(t, div, lw=1.0)
        axes[1].set_ylabel("log-det divergence to truth")
    else:
        axes[1].plot(t, np.linalg.norm(theta - theta[-1], axis=1), lw=1.0)
        axes[1].set_ylabel("‖θ(t) − θ_final‖")
    axes[1].set_xlabel("time [s]")
    axes[1].grid(alpha=0.3)
    fig.suptitle(f"{est.estimator} on {est.regression} rows: convergence")
    return save_figure(fig, path, dpi=90)


def online_result(prep: Prepared, est) -> IdentificationResult:
    """The final estimate of an online replay as a result (fit figures on the prepared data); the
    EKF's is its projection onto the consistent, plausible set, reported under
    ``extra["online"]["projection"]`` (the projection's solver status is the result's)."""
    times = np.array(est.log.update_time) * 1e6
    div = [d for d in est.log.divergence if np.isfinite(d)]
    extra = {"online": {"estimator": est.estimator, "regression": est.regression,
                        "updates": est.samples, "rejected": est.rejected,
                        "update_time_us": {"median": float(np.median(times)) if times.size else None,
                                           "p99": float(np.percentile(times, 99)) if times.size else None},
                        "residual_rms": est.residual_rms,
                        "final_divergence_to_truth": div[-1] if div else None}}
    if est.regression == "momentum":
        extra["online"]["momentum_windows"] = dict(est.rows.windows)
    name = "momentum" if est.regression == "momentum" else est.estimator
    theta, solver = est.theta.copy(), SolverStatus(solver=est.estimator)
    projection = est.projection() if hasattr(est, "projection") else None
    if projection is not None:  # the EKF: its estimate projected onto the consistent, plausible set
        theta = projection.theta.copy()
        extra["online"]["projection"] = projection.as_dict()
        if est.truth is not None:  # the log's last finite divergence may be an earlier estimate's
            final = prep.target.divergence(theta, est.truth)
            extra["online"]["final_divergence_to_truth"] = json_number(final)
        if projection.status != "unchanged":
            solver = SolverStatus(solver=est.estimator, status=projection.status,
                                  binding_constraints=projection.binding)
    result = standard_result(name, prep, theta, float(times.sum() * 1e-6), solver, extra)
    if projection is not None and projection.solved:
        from sysid_ros.core.online.projection import PROJECTED as PROJECTED_ESTIMATE  # imports cvxpy

        result = replace(result, parameters_from=PROJECTED_ESTIMATE)
    result = with_friction_shape_reports(result, prep)
    warning = online_fit_warning(result.diagnostics.relative_error, prep)
    if warning:
        log.warning("%s", warning)
        warnings = [*result.diagnostics.extra.get("warnings", []), warning]
        extra = result.diagnostics.extra | {"warnings": warnings}
        result = replace(result, diagnostics=replace(result.diagnostics, extra=extra))
    return replace(result, joint_names=prep.dataset.joint_names, target=target_label(prep.target))


def online_fit_warning(relative_error: float, prep: Prepared, *, factor: float = 2.0,
                       margin: float = 1.0) -> str | None:
    """A warning when an online estimate's torque error on the prepared rows, ``relative_error``
    [%], exceeds ``factor`` × that of an ordinary least-squares fit of the same rows + ``margin``
    [percentage points]: the estimate ended far from what the data determine; None otherwise."""
    fit = ols(prep.x, prep.y, prep.target.base, mask=prep.mask).diagnostics.relative_error
    if not relative_error > factor * fit + margin:
        return None
    return (f"the online estimate's torque error on this data, {relative_error:.3g} %, is far from a "
            f"least-squares fit of the same data, {fit:.3g} %: it has not converged to what the data "
            "determine (a longer run, more excitation, other tuning, or a batch method)")


