"""A vendor log to read through a column map: a velocity-controlled UR5e carrying a payload the
controller does not know, written like a Universal Robots RTDE recording.

Facts used (UR's RTDE guide and its client library, UniversalRobots/RTDE_Python_Client_Library
``rtde/csv_writer.py``): fields ``timestamp`` [s], ``actual_q`` [rad], ``actual_qd`` [rad/s],
``actual_current`` [A], ``target_q``, ``target_qd``; a 6-vector field ``X`` is written as
columns ``X_0 .. X_5``, values separated by a space. Here the time is written in ms (to exercise
``--time-unit``), the current is the torque over an illustrative torque constant × gear per joint
(:data:`KT`, not UR's figures), and the feed-forward torque is an extra column ``ff_0 .. ff_5``.

The loop: ``τ = kv (dq_ref − dq) + τ_ff`` (the MIT law with kp = 0), ``kv`` each joint's 3 Hz
critical damping alone, ``τ_ff`` the inverse dynamics of the reference with the bare arm's
parameters, so the arm drifts off ``target_q`` under the payload.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sysid_ros.core import RobotModel
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.sim.simulation import SensorModel, default_gains, simulate_mit
from sysid_ros.core.sim.synthetic import Payload, with_payload

MODEL = Path(__file__).resolve().parents[1] / "robots" / "ur5e.xml"
PAYLOAD = Payload.parse("body=wrist_3_link,mass=1.0,com=0,0.02,0.05")
#: illustrative torque constant × gear ratio per joint [N·m/A]
KT = np.array([12.625, 12.625, 12.625, 9.3425, 9.3425, 9.3425])
#: the column map of the file
COLUMNS = ("time=timestamp,q=actual_q_{i},dq=actual_qd_{i},tau=actual_current_{i},q_ref=target_q_{i},"
           "dq_ref=target_qd_{i},tau_ff=ff_{i}")


def numbers(values) -> str:
    """Comma-separated, as the command line and the node's parameters take them."""
    return ",".join(repr(float(v)) for v in values)


def write_rtde_log(path: Path, *, duration: float = 10.0, seed: int = 0) -> np.ndarray:
    """Write the recording (500 Hz, noise: 1e-4 rad, 2e-3 rad/s, 0.3 N·m) to ``path``; returns
    the velocity gains ``kv (6,)`` [N·m·s/rad] (not in the file)."""
    model = RobotModel.from_mjcf(MODEL)
    kv = np.round(default_gains(model)[1], 1)
    traj = FourierTrajectory.random(Limits.of(model), harmonics=5, period=10.0, seed=seed)
    sensor = SensorModel(position_noise=1e-4, velocity_noise=2e-3, torque_noise=0.3, seed=seed)
    rec = simulate_mit(model, traj, duration, kp=0.0, kd=kv, truth=with_payload(model, PAYLOAD),
                       timestep=0.002, sensor=sensor)
    header = ["timestamp"] + [f"{k}_{i}" for k in ("actual_q", "actual_qd", "actual_current", "target_q",
                                                   "target_qd", "ff") for i in range(6)]
    table = np.column_stack((rec.t * 1e3, rec.q, rec.dq, rec.tau / KT, rec.q_ref, rec.dq_ref, rec.tau_ff))
    path.write_text(" ".join(header) + "\n" + "\n".join(" ".join(repr(float(x)) for x in row)
                                                      for row in table) + "\n")
    return kv
