"""Simulated identification data: a robot (optionally carrying a payload) excited in MuJoCo under
the MIT law, returned as a :class:`~sysid_ros.core.data.dataset.Dataset` with commands and the true
parameters, ready to be written as a bag."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from sysid_ros.core.data.dataset import CommandLog, Dataset
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import ModelError, SysIdError
from sysid_ros.core.model.robot import RobotModel, body_params_from_inertial, inertial_from_body_params
from sysid_ros.core.model.spatial import axis_angle_to_mat, mat_to_quat
from sysid_ros.core.sim.simulation import SensorModel, simulate_mit

CUBE_SIDE = 0.05  # m, default payload shape: a solid cube


@dataclass(frozen=True)
class Payload:
    """A rigid payload attached to ``body``: ``mass`` [kg], ``com (3,)`` in the body's frame [m],
    ``inertia (3, 3)`` about the CoM in the body's axes [kg·m²] (default: a 5 cm solid cube)."""

    body: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray

    @classmethod
    def parse(cls, spec: str) -> Payload:
        """From ``body=NAME,mass=KG,com=X,Y,Z[,inertia=Ixx,Iyy,Izz,Ixy,Ixz,Iyz]``."""
        fields = dict(re.findall(r"(\w+)=([^=]+?)(?=,\w+=|$)", spec.strip()))
        unknown = set(fields) - {"body", "mass", "com", "inertia"}
        if unknown or not {"body", "mass", "com"} <= set(fields):
            raise SysIdError("expected a payload body=NAME,mass=KG,com=X,Y,Z"
                             f"[,inertia=Ixx,Iyy,Izz,Ixy,Ixz,Iyz], got {spec!r}")
        try:
            mass = float(fields["mass"])
            com = np.array([float(x) for x in fields["com"].split(",")])
            ine = [float(x) for x in fields["inertia"].split(",")] if "inertia" in fields else None
        except ValueError as exc:
            raise SysIdError(f"payload {spec!r}: {exc}") from None
        if com.shape != (3,) or not mass > 0 or (ine is not None and len(ine) != 6):
            raise SysIdError(f"payload {spec!r}: need mass > 0, 3 CoM values and 6 inertia values")
        if ine is None:
            inertia = np.eye(3) * mass * CUBE_SIDE**2 / 6.0
        else:
            xx, yy, zz, xy, xz, yz = ine
            inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        return cls(fields["body"], mass, com, inertia)

    @property
    def params(self) -> np.ndarray:
        """The payload's 10 parameters in the body's frame about the body origin."""
        return body_params_from_inertial(self.mass, self.com, self.inertia)

    def as_dict(self) -> dict[str, Any]:
        return {"body": self.body, "mass": self.mass, "com": self.com.tolist(),
                "inertia": self.inertia.tolist(), "params": self.params.tolist()}


def payload_spec(model: RobotModel, payload: Payload, *, name: str = "sysid_payload") -> mujoco.MjSpec:
    """The model's MJCF (as an ``MjSpec``) with ``payload`` welded to its body as body ``name``."""
    model.body_id(payload.body)  # clear error for an unknown body
    spec = model.spec()
    moments, axes = np.linalg.eigh(payload.inertia)
    if np.linalg.det(axes) < 0:
        axes[:, 0] *= -1
    if not moments.min() > 0:
        raise ModelError(f"payload principal moments {moments} must be positive")
    child = spec.body(payload.body).add_body(name=name)
    child.explicitinertial = True
    child.mass, child.ipos, child.inertia = payload.mass, payload.com, moments
    child.iquat = mat_to_quat(axes)
    return spec


def with_payload(model: RobotModel, payload: Payload) -> mujoco.MjModel:
    """The model's MuJoCo model with ``payload`` welded to its body (for simulation)."""
    try:
        return payload_spec(model, payload).compile()
    except ValueError as exc:
        raise ModelError(f"MuJoCo rejected the payload on {payload.body!r}: {exc}") from exc


def floating_base(model: RobotModel, *, base_mass: float = 100.0, base_inertia: float = 10.0,
                  gravity: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> RobotModel:
    """The robot on a free-floating base (orbital case): a free joint on the first body under the
    world, that body given ``base_mass`` [kg] and an isotropic ``base_inertia`` [kg·m²], and
    ``gravity`` (zero by default)."""
    spec = model.spec()
    spec.option.gravity = list(gravity)
    base = spec.worldbody.first_body()
    if base is None:
        raise ModelError("the model has no body under the world to float")
    base.add_freejoint()
    base.explicitinertial = True
    base.mass, base.ipos, base.iquat = base_mass, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
    base.fullinertia = [math.nan] * 6
    base.inertia = [base_inertia] * 3
    return RobotModel.from_xml_string(spec.to_xml(), joint_terms=model.joint_terms)


def randomize(model: RobotModel, theta: np.ndarray, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Robot parameters with ``ratio`` relative errors, after the online seed's §IV-A2: per body
    the mass, the CoM coordinates and the principal moments scaled by ``1 + U(−ratio, ratio)``
    (moments redrawn until they satisfy the triangle inequality), the principal axes turned by
    ``U(−ratio, ratio)·π`` about a random axis; joint terms scaled alike."""
    out = np.array(theta, dtype=float)
    for b in model.param_bodies:
        sl = model.body_slice(b)
        mass, com, i_com = inertial_from_body_params(out[sl])
        moments, axes = np.linalg.eigh(i_com)
        while True:
            new = moments * (1 + rng.uniform(-ratio, ratio, 3))
            a, b_, c = new
            if a + b_ > c and a + c > b_ and b_ + c > a and new.min() > 0:
                break
        axis = rng.normal(size=3)
        turn = axis_angle_to_mat(axis / np.linalg.norm(axis), rng.uniform(-ratio, ratio) * np.pi)
        rot = turn @ axes
        out[sl] = body_params_from_inertial(mass * (1 + rng.uniform(-ratio, ratio)),
                                            com * (1 + rng.uniform(-ratio, ratio, 3)),
                                            rot @ np.diag(new) @ rot.T)
    rest = slice(model.n_body_params, None)
    out[rest] = out[rest] * (1 + rng.uniform(-ratio, ratio, out[rest].shape))
    return out


def true_parameters(model: RobotModel, payload: Payload | None) -> np.ndarray:
    """True parameters in the bare model's layout: the payload merged into its body."""
    theta = model.nominal.copy()
    if payload is not None:
        theta[model.body_slice(payload.body)] += payload.params
    return theta


def simulate_dataset(model: RobotModel, *, duration: float = 30.0, seed: int = 0,
                     sensor: SensorModel | None = None, payload: Payload | None = None,
                     rate: float | None = None, harmonics: int = 5, period: float = 10.0,
                     trajectory: FourierTrajectory | None = None) -> Dataset:
    """Excite and simulate the robot; return measurements, commands and the truth.

    ``rate`` [Hz]: physics and recording rate (default: the model's timestep). The feed-forward
    torque uses the bare model (the payload is unknown to the controller).
    """
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise SysIdError(f"the rate must be a finite number > 0 Hz, got {rate}")
    model.check_fixed_base("a simulated dataset")
    model.require_scalar_joints("a simulated recording")
    truth_mj = with_payload(model, payload) if payload is not None else None
    traj = trajectory or FourierTrajectory.random(Limits.of(model), harmonics=harmonics,
                                                  period=period, seed=seed)
    rec = simulate_mit(model, traj, duration, truth=truth_mj, sensor=sensor,
                       timestep=None if rate is None else 1.0 / rate)
    n = len(rec)
    command = CommandLog(rec.t, rec.q_ref, rec.dq_ref, rec.tau_ff, np.tile(rec.kp, (n, 1)),
                         np.tile(rec.kd, (n, 1)))
    theta = true_parameters(model, payload)
    truth = {
        "model": model.source,
        "parameters": model.as_dict(theta),
        "payload": None if payload is None else payload.as_dict(),
        "sensor": (sensor or SensorModel()).as_dict(),
        "gains": {"kp": rec.kp.tolist(), "kd": rec.kd.tolist()},
        "trajectory": {"q0": traj.q0.tolist(), "a": traj.a.tolist(), "b": traj.b.tolist(),
                       "period": traj.period},
        "duration": duration,
        "seed": seed,
    }
    return Dataset(rec.t, model.dof_joint_names, rec.q, rec.dq, rec.tau,
                   source=f"simulation of {Path(model.source or 'model').name}", command=command,
                   truth=truth, meta={"q_true": rec.q_true, "dq_true": rec.dq_true, "ddq_true": rec.ddq})
