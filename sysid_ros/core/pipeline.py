"""The offline identification pipeline on a simulated robot, end to end.

Excite (Fourier series within limits) → simulate in MuJoCo under the MIT law → regress (rows of
slowly moving joints dropped where a Coulomb term is identified) → least squares on base
parameters → compare with the truth and predict torques on a held-out trajectory.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sysid_ros.core.batch.least_squares import coulomb_rows, ols
from sysid_ros.core.excitation.fourier import FourierTrajectory, Limits
from sysid_ros.core.model.base_params import BaseParameters, base_parameters
from sysid_ros.core.model.regressor import torque_regressor
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.result import IdentificationResult
from sysid_ros.core.sim.simulation import simulate_mit

log = logging.getLogger(__name__)

#: base parameters whose true magnitude is below this are scored by absolute error only
TINY = 1e-6


@dataclass(frozen=True)
class PipelineReport:
    """Outcome of :func:`run_offline_pipeline`."""

    model_source: str
    result: IdentificationResult
    beta_true: np.ndarray
    validation_rmse: np.ndarray  # (nv,) [N·m]
    validation_relative_error: float  # [%]
    excitation_condition: float
    durations: dict[str, float]

    @property
    def base(self) -> BaseParameters:
        return self.result.base

    def base_errors(self) -> tuple[np.ndarray, np.ndarray]:
        """(relative error [%] where ``|β| ≥ TINY`` else NaN, absolute error) per base parameter."""
        err = np.abs(self.result.beta - self.beta_true)
        big = np.abs(self.beta_true) >= TINY
        rel = np.full_like(err, np.nan)
        rel[big] = 100.0 * err[big] / np.abs(self.beta_true[big])
        return rel, err

    @property
    def max_relative_error(self) -> float:
        rel, _ = self.base_errors()
        return float(np.nanmax(rel))

    def as_dict(self) -> dict:
        rel, err = self.base_errors()
        return {
            "model": self.model_source,
            "identification": self.result.as_dict(),
            "truth_comparison": {
                name: {"true": float(t), "estimated": float(e),
                       "relative_error_percent": None if np.isnan(r) else float(r),
                       "absolute_error": float(a)}
                for name, t, e, r, a in zip(self.base.names, self.beta_true, self.result.beta, rel, err,
                                            strict=True)
            },
            "max_relative_error_percent": self.max_relative_error,
            "validation": {"torque_rmse": self.validation_rmse.tolist(),
                           "relative_error_percent": self.validation_relative_error},
            "excitation_condition_number": self.excitation_condition,
            "durations_s": self.durations,
        }

    def table(self, *, width: int = 60) -> str:
        """Human-readable summary: true vs estimated base parameters and validation errors."""
        rel, _err = self.base_errors()
        lines = [f"model: {self.model_source}",
                 f"base parameters: {self.base.rank} of {len(self.base.param_names)} standard "
                 f"(regressor condition number {self.result.diagnostics.condition_number:.3g})",
                 f"{'base parameter':<{width}} {'true':>12} {'estimated':>12} {'rel.err %':>10}"]
        for name, t, e, r in zip(self.base.names, self.beta_true, self.result.beta, rel, strict=True):
            short = name if len(name) <= width else name[:width - 3] + "..."
            lines.append(f"{short:<{width}} {t:12.6g} {e:12.6g} {'-' if np.isnan(r) else f'{r:10.2e}':>10}")
        joints = self.result.joint_names or tuple(f"dof{i}" for i in range(len(self.validation_rmse)))
        lines.append(f"max relative error (|true| >= {TINY:g}): {self.max_relative_error:.3e} %")
        lines.append("held-out trajectory torque RMSE [N·m]: " + ", ".join(
            f"{j} {v:.3e}" for j, v in zip(joints, self.validation_rmse, strict=True)))
        lines.append(f"held-out relative error: {self.validation_relative_error:.3e} %")
        return "\n".join(lines)


def run_offline_pipeline(
    model_path: str | Path,
    *,
    duration: float = 30.0,
    validation_duration: float = 10.0,
    seed: int = 0,
    harmonics: int = 5,
    period: float = 10.0,
    kp: float | np.ndarray | None = None,
    kd: float | np.ndarray | None = None,
    min_speed: float = 0.1,
    decimation: int = 2,
) -> PipelineReport:
    """Identify the base parameters of the robot in ``model_path`` from a simulated excitation.

    ``min_speed`` [rad/s]: rows of joints slower than this are not regressed (MuJoCo's friction
    loss is a soft constraint that departs from ``Fc·sign(q̇)`` near zero speed).
    """
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    model = RobotModel.from_mjcf(model_path)
    limits = Limits.of(model)
    excitation = FourierTrajectory.random(limits, harmonics=harmonics, period=period, seed=seed)
    held_out = FourierTrajectory.random(limits, harmonics=harmonics, period=period, seed=seed + 1000)
    base = base_parameters(model, seed=seed)
    times["setup"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    rec = simulate_mit(model, excitation, duration, kp=kp, kd=kd, decimation=decimation)
    val = simulate_mit(model, held_out, validation_duration, kp=kp, kd=kd, decimation=decimation)
    times["simulate"] = time.perf_counter() - t0
    log.info("simulated %d + %d samples", len(rec), len(val))

    t0 = time.perf_counter()
    y = torque_regressor(model, rec.q, rec.dq, rec.ddq)
    result = ols(y, rec.tau, base, mask=coulomb_rows(model, rec.dq, min_speed),
                 joint_names=model.dof_joint_names)
    times["identify"] = time.perf_counter() - t0

    y_val = base.columns(torque_regressor(model, val.q, val.dq, val.ddq))
    mask = coulomb_rows(model, val.dq, min_speed)
    resid = np.where(mask, val.tau - y_val @ result.beta, np.nan)
    rmse = np.sqrt(np.nanmean(resid ** 2, axis=0))
    rel = 100.0 * np.sqrt(np.nansum(resid ** 2)) / np.linalg.norm(val.tau[mask])
    return PipelineReport(
        model_source=str(model_path), result=result, beta_true=base.of(model.nominal),
        validation_rmse=rmse, validation_relative_error=float(rel),
        excitation_condition=result.diagnostics.condition_number, durations=times)
