"""The dynamics and identification core: numpy/scipy/cvxpy/MuJoCo only, no ROS.

Public API (see each module for shapes and units)::

    from sysid_ros.core import RobotModel, torque_regressor, base_parameters
    model = RobotModel.from_mjcf("robot.xml")
    Y = torque_regressor(model, q, dq, ddq)        # (N, nv, p); tau = Y @ model.nominal
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

#: where each public name lives; imported on first use, so that importing one submodule (e.g. the
#: bag reader in the recorder node) does not import MuJoCo, SciPy and the rest of the core
_PUBLIC = {
    "ols": "sysid_ros.core.batch.least_squares",
    **dict.fromkeys(("DataError", "IdentificationError", "ModelError", "SysIdError"),
                    "sysid_ros.core.errors"),
    **dict.fromkeys(("FourierTrajectory", "Limits"), "sysid_ros.core.data.fourier"),
    **dict.fromkeys(("BaseParameters", "base_parameters", "random_states"),
                    "sysid_ros.core.model.base_params"),
    **dict.fromkeys(("ConsistencyReport", "check_consistency", "logdet_divergence", "model_divergence",
                     "pseudo_inertia"), "sysid_ros.core.model.consistency"),
    **dict.fromkeys(("MomentumRegressors", "body_regressor", "gravity_regressor",
                     "mass_matrix_regressor", "momentum_regressors", "torque_regressor"),
                    "sysid_ros.core.model.regressor"),
    **dict.fromkeys(("BODY_FIELDS", "JOINT_FIELDS", "RobotModel"), "sysid_ros.core.model.robot"),
    **dict.fromkeys(("PipelineReport", "run_offline_pipeline"), "sysid_ros.core.pipeline"),
    **dict.fromkeys(("Diagnostics", "IdentificationResult"), "sysid_ros.core.result"),
    **dict.fromkeys(("Recording", "default_gains", "simulate_mit"), "sysid_ros.core.sim.simulation"),
}


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


if TYPE_CHECKING:
    from sysid_ros.core.batch.least_squares import ols
    from sysid_ros.core.data.fourier import FourierTrajectory, Limits
    from sysid_ros.core.errors import DataError, IdentificationError, ModelError, SysIdError
    from sysid_ros.core.model.base_params import BaseParameters, base_parameters, random_states
    from sysid_ros.core.model.consistency import (
        ConsistencyReport,
        check_consistency,
        logdet_divergence,
        model_divergence,
        pseudo_inertia,
    )
    from sysid_ros.core.model.regressor import (
        MomentumRegressors,
        body_regressor,
        gravity_regressor,
        mass_matrix_regressor,
        momentum_regressors,
        torque_regressor,
    )
    from sysid_ros.core.model.robot import BODY_FIELDS, JOINT_FIELDS, RobotModel
    from sysid_ros.core.pipeline import PipelineReport, run_offline_pipeline
    from sysid_ros.core.result import Diagnostics, IdentificationResult
    from sysid_ros.core.sim.simulation import Recording, default_gains, simulate_mit

__all__ = [
    "BODY_FIELDS",
    "JOINT_FIELDS",
    "BaseParameters",
    "ConsistencyReport",
    "DataError",
    "Diagnostics",
    "FourierTrajectory",
    "IdentificationError",
    "IdentificationResult",
    "Limits",
    "ModelError",
    "MomentumRegressors",
    "PipelineReport",
    "Recording",
    "RobotModel",
    "SysIdError",
    "base_parameters",
    "body_regressor",
    "check_consistency",
    "default_gains",
    "gravity_regressor",
    "logdet_divergence",
    "mass_matrix_regressor",
    "model_divergence",
    "momentum_regressors",
    "ols",
    "pseudo_inertia",
    "random_states",
    "run_offline_pipeline",
    "simulate_mit",
    "torque_regressor",
]
