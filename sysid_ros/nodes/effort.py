"""Effort to joint torque for drivers that publish motor current: the one rule shared by the nodes
that read ``joint_states`` effort (estimator, collision monitor).

``joint torque = torque_scale · effort + torque_offset`` per joint (model order), each parameter
one value for every joint or one per joint; unset = 1 and 0 (effort is the joint torque, as
``joint_state_broadcaster`` publishes it on most ros2_control arms).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from rclpy.parameter import Parameter

from sysid_ros.core.errors import SysIdError

__all__ = ["TORQUE_PARAMETERS", "torque_map"]

TORQUE_PARAMETERS = (
    ("torque_scale", Parameter.Type.DOUBLE_ARRAY,
     "joint torque = torque_scale · effort + torque_offset, per joint (model order) or one for all "
     "[N·m per effort unit] (unset = 1: effort is the joint torque; e.g. N·m/A for currents)"),
    ("torque_offset", Parameter.Type.DOUBLE_ARRAY, "[N·m] per joint or one for all (unset = 0)"),
)


def torque_map(get: Callable[[str], object], joint_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(scale (n,), offset (n,))`` from the parameter values ``get(name)``; :class:`SysIdError`
    naming the parameter, what was expected and what came."""
    names = list(joint_names)
    out = []
    for name, unset in (("torque_scale", 1.0), ("torque_offset", 0.0)):
        value = get(name)
        arr = np.asarray(value if value is not None and len(value) else [unset], dtype=float)
        if arr.size == 1:
            arr = np.full(len(names), float(arr[0]))
        if arr.shape != (len(names),) or not np.all(np.isfinite(arr)):
            raise SysIdError(f"{name}: expected one finite number or {len(names)} (one per joint "
                             f"{names}), got {list(value)}")
        out.append(arr)
    return out[0], out[1]
