"""Replay recorded data through an online estimator, sample by sample (tune online estimators
offline). Used by ``sysid identify --method rls|rls_logdet|momentum``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.errors import DataError
from sysid_ros.core.model.target import Target
from sysid_ros.core.online.conditioning import CausalConditioner
from sysid_ros.core.online.estimator import OnlineEstimator
from sysid_ros.core.report.plotting import pyplot, save_figure

log = logging.getLogger(__name__)

ONLINE_METHODS: tuple[str, ...] = ("rls", "rls_logdet", "momentum")


@dataclass(frozen=True)
class OnlineOptions:
    """``method``: rls (force rows, RLS), rls_logdet (force rows, RLS log-det-div), momentum
    (generalised-momentum rows, RLS log-det-div). ``alpha``: regularisation strength;
    ``forgetting`` λ; ``torque_noise`` [N·m]: sets the row weight W = 1/σ²; ``cutoff`` [Hz]: causal
    low-pass; ``window`` [s]: momentum window; ``batch``: samples per batched regressor call;
    ``min_speed`` [rad/s]: force rows of slower joints are not used when the model has Coulomb
    friction (its sign model fails near rest). ``weighting``: ``fixed`` (W from ``torque_noise``)
    or ``adaptive`` (each row's W estimated online from its residuals over ``weight_memory`` [s],
    never above the fixed W)."""

    method: str = "rls_logdet"
    alpha: float = 1.0
    forgetting: float = 1.0
    torque_noise: float = 0.05
    cutoff: float = 50.0
    window: float = 0.5
    batch: int = 50
    min_speed: float = 0.05
    log_every: int = 1
    weighting: str = "fixed"
    weight_memory: float = 1.0


def make_estimator(target: Target, options: OnlineOptions, *, sample_period: float,
                   truth: np.ndarray | None = None) -> OnlineEstimator:
    """The estimator of ``options.method`` with weights from the torque noise."""
    if options.method not in ONLINE_METHODS:
        raise DataError(f"unknown online method {options.method!r}; expected {list(ONLINE_METHODS)}")
    sigma = max(options.torque_noise, 1e-9)
    adaptive = dict(weighting=options.weighting, weight_memory=options.weight_memory,
                    sample_rate=1.0 / sample_period)
    if options.method == "momentum":
        # rows are torque integrals over up to one window: noise σ·√(window·h)
        weight = 1.0 / (sigma**2 * options.window * sample_period)
        return OnlineEstimator(target, regression="momentum", estimator="rls_logdet",
                               alpha=options.alpha, weight=weight, forgetting=options.forgetting,
                               window=options.window, truth=truth, **adaptive)
    return OnlineEstimator(target, regression="force",
                           estimator="rls" if options.method == "rls" else "rls_logdet",
                           alpha=options.alpha, weight=1.0 / sigma**2, forgetting=options.forgetting,
                           truth=truth, min_speed=options.min_speed, **adaptive)


def replay(dataset: Dataset, target: Target, options: OnlineOptions, *,
           truth: np.ndarray | None = None, progress: Callable[[str], None] | None = None
           ) -> OnlineEstimator:
    """Run ``dataset`` through the online estimator as a live stream would arrive."""
    ds = dataset.for_model(target.model)
    fs = ds.sample_rate
    est = make_estimator(target, options, sample_period=1.0 / fs, truth=truth)
    # rows start once the filters' start-up transient is over (≈ 1/cutoff)
    cond = CausalConditioner(len(ds.joint_names), fs, min(options.cutoff, 0.45 * fs),
                             use_measured_velocity=ds.has_velocity, settle="auto")
    pending: list[tuple] = []
    say = progress or (lambda msg: log.info("%s", msg))
    tenth = max(1, len(ds) // 10)

    def flush():
        if pending:
            cols = list(zip(*pending, strict=True))
            est.push_batch(np.array(cols[0]), np.array(cols[1]), np.array(cols[2]), np.array(cols[3]),
                           np.array(cols[4]))
            pending.clear()

    for k in range(len(ds)):
        out = cond.push(ds.t[k], ds.q[k], ds.dq[k] if ds.has_velocity else None, ds.tau[k])
        if out is not None:
            pending.append(out)
        if len(pending) >= options.batch:
            flush()
        if (k + 1) % tenth == 0:
            flush()
            div = est.log.divergence[-1] if est.log.divergence else float("nan")
            say(f"{options.method}: {100 * (k + 1) // len(ds)} % ({ds.t[k]:.1f} s), "
                f"{est.samples} updates" + ("" if np.isnan(div) else f", divergence to truth {div:.4g}"))
    flush()
    return est


def write_trajectory(path: Path, est: OnlineEstimator) -> Path:
    """``estimates.csv``: time, divergence to truth, and every parameter over time."""
    header = ",".join(["time", "divergence_to_truth", *est.target.names])
    table = np.column_stack((est.log.t, est.log.divergence, np.array(est.log.theta)))
    tmp = path.with_suffix(".tmp")
    np.savetxt(tmp, table, delimiter=",", header=header, comments="")
    tmp.replace(path)
    return path


def plot_convergence(path: Path, est: OnlineEstimator) -> Path:
    """Estimates (normalised by their final values) and the divergence to truth over time."""
    plt = pyplot()

    t = np.array(est.log.t)
    theta = np.array(est.log.theta)
    final = np.where(np.abs(theta[-1]) > 1e-12, theta[-1], 1.0)
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    axes[0].plot(t, theta / final, lw=0.8)
    axes[0].set_ylabel("estimate / final")
    axes[0].set_ylim(-1, 3)
    axes[0].grid(alpha=0.3)
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
