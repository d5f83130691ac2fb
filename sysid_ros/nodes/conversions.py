"""Message <-> core conversions (no mathematics here).

``sysid_ros/ParameterEstimate`` is built only here: :func:`to_estimate_msg` from an
:class:`~sysid_ros.core.result.IdentificationResult` (batch solver, estimator node) and
:func:`to_truth_msg` for a simulator's true parameters (method ``"truth"``); :func:`truth_from_msg`
reads such a message back as a truth document. So are ``sysid_ros/Precision``
(:func:`to_precision_msg`) and the payload's ``geometry_msgs/Inertia`` (:func:`to_inertia_msg`).
A ``sensor_msgs/JointState`` enters the core as a :class:`~sysid_ros.core.online.stream.JointMessage`
(:func:`joint_message`).

Every node imports this module; the core modules a conversion needs (bags, the robot model: MuJoCo)
are imported by that conversion, so that a node that never makes it does not pay for them at start.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from geometry_msgs.msg import Inertia

from sysid_ros.msg import ParameterEstimate, Precision

if TYPE_CHECKING:
    from sysid_ros.core.online.precision import Precision as EstimatePrecision
    from sysid_ros.core.online.stream import JointMessage
    from sysid_ros.core.result import IdentificationResult

__all__ = ["joint_message", "stamp_ns", "to_estimate_msg", "to_inertia_msg", "to_precision_msg",
           "to_truth_msg", "truth_from_msg"]


def stamp_ns(stamp) -> int:
    """A ``builtin_interfaces/Time`` as nanoseconds."""
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def joint_message(msg, received_ns: int) -> JointMessage:
    """A ``sensor_msgs/JointState`` received at ``received_ns`` [ns] (the node's clock) as the
    core's plain :class:`~sysid_ros.core.online.stream.JointMessage`."""
    from sysid_ros.core.online.stream import JointMessage  # (the online package: its nodes only)

    return JointMessage(tuple(msg.name), msg.position, msg.velocity, msg.effort,
                        stamp_ns(msg.header.stamp), received_ns)


def to_estimate_msg(result: IdentificationResult, *, divergence_to_prior: float = math.nan,
                    divergence_to_truth: float = math.nan, stamp=None) -> ParameterEstimate:
    """The message of ``result``: its exported parameters (``result.parameters``, with std),
    base parameters, rank and condition number, ``residual_rms`` = ``result.diagnostics.fit.rms``
    (the pooled torque residual RMS, see ParameterEstimate.msg), samples, the consistency of the
    exported parameters, and the given divergences (computed by the caller's core code)."""
    d = result.diagnostics
    params = result.parameters
    msg = ParameterEstimate()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.method = result.method
    msg.target = result.target
    msg.names = list(params.names) if params is not None else []
    msg.values = params.values.tolist() if params is not None else []
    msg.std_dev = params.std.tolist() if params is not None else []
    msg.base_names = list(result.base.names)
    msg.base_values = [float(v) for v in result.beta]
    msg.rank = int(d.rank)
    msg.condition_number = float(d.condition_number)
    msg.residual_rms = float(d.fit.rms)
    msg.sample_count = int(d.n_samples)
    msg.physically_consistent = result.consistent
    msg.divergence_to_prior = float(divergence_to_prior)
    msg.divergence_to_truth = float(divergence_to_truth)
    return msg


def to_truth_msg(names: Sequence[str], values: Sequence[float], *, target: str = "arm",
                 stamp=None) -> ParameterEstimate:
    """A simulator's true parameters as a ``ParameterEstimate`` with method ``"truth"``: exact
    (std 0, consistent, divergence to truth 0), nothing estimated (rank = the number of values,
    condition number, residual RMS and divergence to prior NaN, no samples)."""
    msg = ParameterEstimate()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.method = "truth"
    msg.target = target
    msg.names = [str(n) for n in names]
    msg.values = [float(v) for v in values]
    msg.std_dev = [0.0] * len(msg.values)
    msg.rank = len(msg.values)
    msg.condition_number = math.nan
    msg.residual_rms = math.nan
    msg.sample_count = 0
    msg.physically_consistent = True
    msg.divergence_to_prior = math.nan
    msg.divergence_to_truth = 0.0
    return msg


def truth_from_msg(msg: ParameterEstimate) -> dict[str, Any]:
    """The truth document (as in a simulated bag's ``truth.json``) of a truth message; decode a
    target's vector from it with :func:`sysid_ros.core.report.metrics.truth_parameters`."""
    from sysid_ros.core.data.bag import truth_from_estimate

    return truth_from_estimate(msg.names, msg.values)


def to_inertia_msg(theta) -> Inertia:
    """``geometry_msgs/Inertia`` of a payload's 10 parameters ``θ = [m, h, I_origin]`` (body frame,
    about the body origin): mass [kg], CoM ``c = h/m`` [m] in the payload body's frame, inertia
    about the CoM [kg·m²] (what UR's ``set_payload`` and Franka's ``setLoad`` take)."""
    from sysid_ros.core.model.robot import inertial_from_body_params

    m, com, i_com = inertial_from_body_params(theta)
    msg = Inertia(m=float(m))
    msg.com.x, msg.com.y, msg.com.z = (float(v) for v in com)
    msg.ixx, msg.ixy, msg.ixz = float(i_com[0, 0]), float(i_com[0, 1]), float(i_com[0, 2])
    msg.iyy, msg.iyz, msg.izz = float(i_com[1, 1]), float(i_com[1, 2]), float(i_com[2, 2])
    return msg


def to_precision_msg(precision: EstimatePrecision, *, target: str, target_precision: float,
                     sample_count: int, stamp=None) -> Precision:
    """``sysid_ros/Precision`` of :class:`~sysid_ros.core.online.precision.Precision`."""
    msg = Precision(target=target, names=list(precision.names), values=precision.values.tolist(),
                    std_dev=precision.std.tolist(), relative_std=precision.relative_std.tolist(),
                    required=[bool(r) for r in precision.required], target_precision=float(target_precision),
                    reached=bool(target_precision > 0 and precision.reached(target_precision)),
                    sample_count=int(sample_count))
    if stamp is not None:
        msg.header.stamp = stamp
    return msg
