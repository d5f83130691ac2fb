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
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.model.base_params import BaseParameters, base_parameters
from sysid_ros.core.model.regressor import torque_regressor
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.report.metrics import (
    NEGLIGIBLE,
    BaseErrors,
    TorqueErrors,
    base_parameter_errors,
    torque_errors,
)
from sysid_ros.core.result import IdentificationResult
from sysid_ros.core.sim.simulation import simulate_mit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PipelineReport:
    """Outcome of :func:`run_offline_pipeline`: the result, its base-parameter errors against the
    simulated truth and its torque errors on a held-out trajectory."""

    model_source: str
    result: IdentificationResult
    truth: BaseErrors
    validation: TorqueErrors
    excitation_condition: float
    durations: dict[str, float]

    @property
    def base(self) -> BaseParameters:
        return self.result.base

    @property
    def beta_true(self) -> np.ndarray:
        return self.truth.true

    @property
    def validation_rmse(self) -> np.ndarray:
        """``(nv,)`` held-out torque RMSE per joint [N·m]."""
        return self.validation.rmse

    def base_errors(self) -> tuple[np.ndarray, np.ndarray]:
        """(relative error [%] where ``|β| ≥ NEGLIGIBLE`` else NaN, absolute error) per base parameter."""
        return self.truth.relative, self.truth.absolute

    @property
    def max_relative_error(self) -> float:
        return self.truth.max_relative

    def as_dict(self) -> dict:
        return {
            "model": self.model_source,
            "identification": self.result.as_dict(),
            "truth_comparison": self.truth.as_dict(),
            "max_relative_error_percent": self.max_relative_error,
            "validation": self.validation.as_dict(),
            "excitation_condition_number": self.excitation_condition,
            "durations_s": self.durations,
        }

    def table(self, *, width: int = 60) -> str:
        """Human-readable summary: true vs estimated base parameters and validation errors."""
        rel = self.truth.relative
        lines = [f"model: {self.model_source}",
                 f"base parameters: {self.base.rank} of {len(self.base.param_names)} standard "
                 f"(regressor condition number {self.result.diagnostics.condition_number:.3g})",
                 f"{'base parameter':<{width}} {'true':>12} {'estimated':>12} {'rel.err %':>10}"]
        for name, t, e, r in zip(self.base.names, self.beta_true, self.result.beta, rel, strict=True):
            short = name if len(name) <= width else name[:width - 3] + "..."
            lines.append(f"{short:<{width}} {t:12.6g} {e:12.6g} {'-' if np.isnan(r) else f'{r:10.2e}':>10}")
        joints = self.result.joint_names or tuple(f"dof{i}" for i in range(len(self.validation_rmse)))
        lines.append(f"max relative error (|true| >= {NEGLIGIBLE:g}): {self.max_relative_error:.3e} %")
        lines.append("held-out trajectory torque RMSE [N·m]: " + ", ".join(
            f"{j} {v:.3e}" for j, v in zip(joints, self.validation_rmse, strict=True)))
        lines.append(f"held-out relative error: {self.validation.relative:.3e} %")
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
    validation = torque_errors(val.tau, y_val @ result.beta, mask=coulomb_rows(model, val.dq, min_speed))
    truth = base_parameter_errors(result.beta, base.of(model.nominal), names=base.names)
    return PipelineReport(
        model_source=str(model_path), result=result, truth=truth, validation=validation,
        excitation_condition=result.diagnostics.condition_number, durations=times)
