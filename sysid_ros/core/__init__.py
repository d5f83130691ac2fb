"""The dynamics and identification core: numpy/scipy/cvxpy/MuJoCo only, no ROS.

Public API (see each module for shapes and units)::

    from sysid_ros.core import RobotModel, torque_regressor, base_parameters
    model = RobotModel.from_mjcf("robot.xml")
    Y = torque_regressor(model, q, dq, ddq)        # (N, nv, p); tau = Y @ model.nominal
"""

from .base_params import BaseParameters, base_parameters, random_states
from .consistency import (
    ConsistencyReport,
    check_consistency,
    logdet_divergence,
    model_divergence,
    pseudo_inertia,
)
from .errors import DataError, IdentificationError, ModelError, SysIdError
from .estimators import ols
from .excitation import FourierTrajectory, Limits
from .model import BODY_FIELDS, JOINT_FIELDS, RobotModel
from .pipeline import PipelineReport, run_offline_pipeline
from .regressor import (
    MomentumRegressors,
    body_regressor,
    gravity_regressor,
    mass_matrix_regressor,
    momentum_regressors,
    torque_regressor,
)
from .result import Diagnostics, IdentificationResult
from .simulation import Recording, default_gains, simulate_mit

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
