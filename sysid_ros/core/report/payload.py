"""Payload estimates against the truth: physical quantities, a text table and plots (used by the
closed-loop demo; no ROS here). The figures of merit come from :mod:`~sysid_ros.core.report.metrics`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.base_params import BaseParameters
from sysid_ros.core.model.consistency import logdet_divergence
from sysid_ros.core.model.robot import inertial_from_body_params
from sysid_ros.core.report.metrics import BaseErrors, base_parameter_errors
from sysid_ros.core.report.plotting import pyplot, save_figure

__all__ = ["PAYLOAD_NEGLIGIBLE", "PayloadQuantities", "payload_base_errors", "payload_table",
           "plot_convergence", "plot_heldout"]


@dataclass(frozen=True)
class PayloadQuantities:
    """Mass [kg], CoM ``(3,)`` [m] in the body frame, inertia about the CoM ``(3, 3)`` [kg·m²]."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    @classmethod
    def of(cls, phi: Sequence[float]) -> PayloadQuantities:
        """From the 10 parameters ``[m, hx, hy, hz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` about the
        body origin."""
        phi = np.asarray(phi, dtype=float)
        if phi.shape != (10,) or not phi[0] > 0:
            raise SysIdError(f"expected 10 payload parameters with a positive mass, got {phi.tolist()}")
        mass, com, inertia = inertial_from_body_params(phi)
        return cls(float(mass), np.asarray(com), np.asarray(inertia))


def payload_table(truth: Sequence[float], estimates: Mapping[str, Sequence[float]],
                  rmse: Mapping[str, float] | None = None, base: BaseParameters | None = None) -> str:
    """A text table: true vs each estimate (mass, CoM, inertia about the CoM, log-det divergence
    to the truth, base-parameter errors when ``base`` is given, held-out torque RMSE)."""
    true_q = PayloadQuantities.of(truth)
    est_q = {k: PayloadQuantities.of(v) for k, v in estimates.items()}
    cols = ["true", *estimates]
    width = max(12, *(len(c) + 2 for c in cols))
    lines = ["".join([f"{'':<16}", *(f"{c:>{width}}" for c in cols)])]

    def row(label: str, values: Sequence[str]) -> None:
        lines.append("".join([f"{label:<16}", *(f"{v:>{width}}" for v in values)]))

    row("mass [kg]", [f"{true_q.mass:.4f}", *(f"{q.mass:.4f}" for q in est_q.values())])
    for i, axis in enumerate("xyz"):
        row(f"com {axis} [mm]", [f"{1e3 * true_q.com[i]:.2f}",
                                 *(f"{1e3 * q.com[i]:.2f}" for q in est_q.values())])
    for (i, j), name in zip(((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)),
                            ("Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz"), strict=True):
        row(f"{name} [g·m²]", [f"{1e3 * true_q.inertia[i, j]:.3f}",
                               *(f"{1e3 * q.inertia[i, j]:.3f}" for q in est_q.values())])
    row("mass error", ["", *(f"{100 * (q.mass - true_q.mass) / true_q.mass:+.2f} %" for q in est_q.values())])
    row("CoM error [mm]", ["", *(f"{1e3 * np.linalg.norm(q.com - true_q.com):.2f}" for q in est_q.values())])
    row("divergence", ["0", *(f"{_divergence(v, truth):.4g}" for v in estimates.values())])
    if base is not None:
        errors = {k: payload_base_errors(base, truth, v) for k, v in estimates.items()}
        row("base err median", ["", *(f"{e.median_relative:.2f} %" for e in errors.values())])
        row("base err max", ["", *(f"{e.max_relative:.2f} %" for e in errors.values())])
    if rmse:
        row("held-out RMSE", [f"{rmse.get('true', float('nan')):.4f}",
                              *(f"{rmse.get(k, float('nan')):.4f}" for k in estimates)])
    return "\n".join(lines)


#: a payload's base parameter is scored when its true magnitude is at least this fraction of the
#: largest (inertia products of a few 1e-5 kg·m² have no meaningful relative error)
PAYLOAD_NEGLIGIBLE = 1e-3


def payload_base_errors(base: BaseParameters, truth: Sequence[float], phi: Sequence[float]) -> BaseErrors:
    """:func:`~sysid_ros.core.report.metrics.base_parameter_errors` of payload parameters ``phi``
    against ``truth`` (10 values each), negligible below :data:`PAYLOAD_NEGLIGIBLE` of the largest."""
    estimated, true = base.of(np.asarray(phi, dtype=float)), base.of(np.asarray(truth, dtype=float))
    return base_parameter_errors(estimated, true, names=base.names, atol=0.0, rtol=PAYLOAD_NEGLIGIBLE)


def _divergence(phi, truth) -> float:
    try:
        return logdet_divergence(np.asarray(phi, dtype=float), np.asarray(truth, dtype=float))
    except SysIdError:
        return float("nan")


def plot_convergence(path: str | Path, times: np.ndarray, estimates: np.ndarray, truth: Sequence[float],
                     divergence: np.ndarray | None = None) -> Path:
    """PNG of online payload estimates over time: mass, CoM coordinates and (if given) the log-det
    divergence to the truth. ``times (K,)`` [s], ``estimates (K, 10)``."""
    plt = pyplot()

    true_q = PayloadQuantities.of(truth)
    masses, coms = [], []
    for phi in estimates:
        m = phi[0] if phi[0] > 1e-9 else np.nan
        masses.append(m)
        coms.append(np.asarray(phi[1:4]) / m)
    coms = np.array(coms)
    fig, axes = plt.subplots(3 if divergence is not None else 2, 1, figsize=(9.5, 8), sharex=True)
    outside = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "fontsize": "small", "frameon": False}
    axes[0].plot(times, masses, label="online")
    axes[0].axhline(true_q.mass, color="k", ls="--", label="true")
    axes[0].set_ylabel("mass [kg]")
    axes[0].legend(**outside)
    for i, axis in enumerate("xyz"):
        axes[1].plot(times, 1e3 * coms[:, i], color=f"C{i}", label=f"c{axis} online")
        axes[1].axhline(1e3 * true_q.com[i], color=f"C{i}", ls="--", label=f"c{axis} true")
    axes[1].set_ylabel("CoM [mm]")
    axes[1].legend(ncol=1, **outside)  # beside the data, never over it
    if divergence is not None:
        axes[2].semilogy(times, np.maximum(divergence, 1e-12))
        axes[2].set_ylabel("log-det divergence")
    axes[-1].set_xlabel("simulated time [s]")
    fig.suptitle("online payload estimate")
    return save_figure(fig, path, dpi=110)


def plot_heldout(path: str | Path, t: np.ndarray, measured: np.ndarray, predicted: Mapping[str, np.ndarray],
                 joint_names: Sequence[str]) -> Path:
    """PNG of measured vs predicted torques on a held-out trajectory, one panel per joint."""
    plt = pyplot()

    n = measured.shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.6 * n + 1), sharex=True)
    for j, ax in enumerate(np.atleast_1d(axes)):
        ax.plot(t, measured[:, j], color="k", lw=1.2, label="measured")
        for k, (name, tau) in enumerate(predicted.items()):
            ax.plot(t, tau[:, j], lw=0.8, ls="--", color=f"C{k}", label=name)
        ax.set_ylabel(f"{joint_names[j]}\n[N·m]")
    np.atleast_1d(axes)[0].legend(loc="upper right", fontsize=7, ncol=len(predicted) + 1)
    np.atleast_1d(axes)[-1].set_xlabel("time [s]")
    fig.suptitle("held-out trajectory: measured vs predicted joint torque")
    return save_figure(fig, path, dpi=110)
