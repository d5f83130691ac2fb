"""Trajectory tracking in MuJoCo closed loop: computed-torque control with a model's parameters, or
a joint PD alone, driving a (true) simulated robot along a reference.

Computed torque (the overview seed's control-impact section: feed-forward cancellation of
``M(q) q̈_d + C q̇ + g`` with π̂)::

    τ = M̂(q) (q̈_d + Kp e + Kd ė) + Ĉ(q, q̇) q̇ + ĝ(q) + F̂(q̇),    e = q_d − q

with ``M̂, Ĉ, ĝ`` of the controller's parameter vector (MuJoCo's inverse dynamics, ``mj_inverse``, on a
copy of the robot with the parameters applied: :meth:`RobotModel.apply_to`; armature and viscous
friction included) and ``F̂ = Fc·sign(q̇) + Fo`` its Coulomb friction and offsets. ``Kp = ω²``,
``Kd = 2ζω`` (per joint, acceleration units) place the error dynamics at ``bandwidth_hz`` when the
model is exact. The PD alone is ``τ = kp e + kd ė`` with per-joint gains in torque units.

The plant is :class:`~sysid_ros.core.sim.plant.MitPlant` in torque mode (kp = kd = 0 in the MIT
law, the controller's torque as feed-forward, saturated at the motors' limits), read at its true
state every step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from sysid_ros.core.data.fourier import FourierTrajectory
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.plant import JointCommand, MitPlant
from sysid_ros.core.sim.simulation import check_steps

__all__ = ["Controller", "ModelTorque", "TrackingRun", "computed_torque", "pd_alone", "track"]

#: ``controller(q, dq, q_ref, dq_ref, ddq_ref) -> τ``, every vector ``(n,)`` in dof order [SI]
Controller = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class ModelTorque:
    """Inverse dynamics ``τ = M(q) q̈ + C(q, q̇) q̇ + g(q) + F(q̇)`` of ``model`` with parameters
    ``theta (p,)`` (the model's layout, physically consistent), for a fixed-base robot of
    hinge/slide joints. MuJoCo's ``mj_inverse`` on a copy with ``theta`` applied and its constraints
    disabled (friction loss and joint limits are soft constraints there, not model terms);
    ``Fc·sign(q̇) + Fo`` added."""

    def __init__(self, model: RobotModel, theta: np.ndarray) -> None:
        model.check_fixed_base("computed-torque control")
        model.require_scalar_joints("computed-torque control")
        theta = model.check_theta(theta)
        self.mj = copy.deepcopy(model.mj)
        model.apply_to(self.mj, theta)
        # no constraint forces: friction loss is added as Fc·sign(q̇), joint limits are no model term
        self.mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
        self.data = mujoco.MjData(self.mj)
        n = model.nv
        self.coulomb, self.offset = np.zeros(n), np.zeros(n)
        for j in model.term_joints:
            joint = model.joints[j]
            for term, out in (("Fc", self.coulomb), ("Fo", self.offset)):
                if term in model.joint_terms:
                    out[joint.dof_adr] = theta[model.index(f"{joint.name}.{term}")]

    def __call__(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        d = self.data
        d.qpos[:], d.qvel[:], d.qacc[:] = q, dq, ddq
        mujoco.mj_inverse(self.mj, d)
        return d.qfrc_inverse + self.coulomb * np.sign(dq) + self.offset


def computed_torque(model: RobotModel, theta: np.ndarray, *, bandwidth_hz: float,
                    damping_ratio: float = 1.0) -> Controller:
    """The computed-torque law (module docstring) with ``model``'s parameters ``theta``; outer
    loop at ``bandwidth_hz`` [Hz] with ``damping_ratio``."""
    _check_bandwidth(bandwidth_hz)
    inverse = ModelTorque(model, theta)
    omega = 2.0 * np.pi * bandwidth_hz
    kp, kd = omega**2, 2.0 * damping_ratio * omega

    def law(q, dq, q_ref, dq_ref, ddq_ref):
        return inverse(q, dq, ddq_ref + kp * (q_ref - q) + kd * (dq_ref - dq))

    return law


def pd_alone(kp: np.ndarray, kd: np.ndarray) -> Controller:
    """``τ = kp (q_d − q) + kd (q̇_d − q̇)`` per joint, ``kp`` [N·m/rad], ``kd`` [N·m·s/rad] ``(n,)``:
    no model, no feed-forward."""
    kp, kd = np.asarray(kp, dtype=float), np.asarray(kd, dtype=float)

    def law(q, dq, q_ref, dq_ref, ddq_ref):
        return kp * (q_ref - q) + kd * (dq_ref - dq)

    return law


@dataclass(frozen=True)
class TrackingRun:
    """A tracked run: ``t (K,)`` [s], reference ``q_ref (K, n)`` and the true ``q (K, n)`` [rad],
    applied torque ``tau (K, n)`` [N·m]; ``saturated_steps``: steps where a motor limit clipped."""

    t: np.ndarray
    q_ref: np.ndarray
    q: np.ndarray
    tau: np.ndarray
    saturated_steps: int

    @property
    def error(self) -> np.ndarray:
        """``q_ref − q (K, n)`` [rad]."""
        return self.q_ref - self.q

    @property
    def rms(self) -> float:
        """RMS tracking error over every sample and joint [rad]."""
        return float(np.sqrt(np.mean(self.error**2)))

    @property
    def rms_joint(self) -> np.ndarray:
        """RMS tracking error per joint ``(n,)`` [rad]."""
        return np.sqrt(np.mean(self.error**2, axis=0))

    @property
    def max_error(self) -> float:
        """Largest ``|q_ref − q|`` [rad]."""
        return float(np.abs(self.error).max())


def track(plant_model: RobotModel, plant_mj: mujoco.MjModel, trajectory: FourierTrajectory,
          duration: float, controller: Controller, *, timestep: float | None = None) -> TrackingRun:
    """Drive ``plant_mj`` (the true robot: ``plant_model``'s joints, e.g. with a payload welded on)
    along ``trajectory`` for ``duration`` [s] with ``controller``, from the reference's initial
    state; one controller evaluation per physics step of ``timestep`` [s] (default: the model's),
    at the plant's true state. The motors' torque limits saturate the commands."""
    dt = float(plant_mj.opt.timestep if timestep is None else timestep)
    steps = check_steps(duration, dt)
    if trajectory.q0.shape != (plant_model.nv,):
        raise SysIdError(f"expected a trajectory of the {plant_model.nv} joints, got "
                         f"{trajectory.q0.shape[0]}")
    t = np.arange(steps) * dt
    q_ref, dq_ref, ddq_ref = trajectory.evaluate(t)
    plant = MitPlant.of(plant_model, plant_mj, timestep=dt)
    plant.set_state(q=q_ref[0], dq=dq_ref[0])
    data, qadr, dofs = plant.data, plant.qpos_indices, plant.dof_indices
    n = plant.n
    zero = np.zeros(n)
    q_log, tau_log = np.empty((steps, n)), np.empty((steps, n))
    for k in range(steps):
        q, dq = data.qpos[qadr].copy(), data.qvel[dofs].copy()
        tau = np.asarray(controller(q, dq, q_ref[k], dq_ref[k], ddq_ref[k]), dtype=float)
        if not np.all(np.isfinite(tau)):
            raise SysIdError(f"the controller returned a non-finite torque at t = {t[k]:.3f} s")
        q_log[k] = q
        sample = plant.step(JointCommand(q, dq, tau, zero, zero), measure_torque=False)
        tau_log[k] = sample.tau if sample is not None else tau
    return TrackingRun(t, q_ref, q_log, tau_log, plant.counters["saturated_steps"])


def _check_bandwidth(bandwidth_hz: float) -> None:
    if not (np.isfinite(bandwidth_hz) and bandwidth_hz > 0):
        raise SysIdError(f"the tracking bandwidth must be a finite number > 0 Hz, got {bandwidth_hz}")
