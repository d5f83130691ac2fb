"""A position-controlled industrial arm in MuJoCo, as a ros2_control stack presents it (no ROS here).

What a UR or Franka arm under ``joint_trajectory_controller`` does, as far as an identification
tool sees it: it takes joint trajectories (:class:`~sysid_ros.core.sim.joint_trajectory.TrajectoryFollower`:
the controller's splines, a new trajectory replacing the rest of the old one), tracks their
reference with the robot's own controller, and reports the measured position, velocity and joint
torque (``joint_state_broadcaster``'s ``effort``), or the motor current where a driver reports
that (``effort = τ / drive_gain + noise``).

The robot's controller — unknown to the estimator, which sees only the joint states — is the
usual computed-torque law of an industrial drive: the feed-forward torque of the controller's own
model (the bare arm: it does not know the payload) at the reference, plus a stiff PD loop on
the tracking error placed at ``bandwidth_hz`` per joint (``kp = M_jj ω²``, ``kd = 2 ω M_jj``),
saturated at the motors' torque limits (the plant, :class:`~sysid_ros.core.sim.plant.MitPlant`,
applies it each physics step through the MIT law with the reference as target). Before the first
trajectory it holds its initial pose.
"""

from __future__ import annotations

import mujoco
import numpy as np

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.joint_trajectory import TrajectoryFollower, TrajectoryPoints, limit_violation
from sysid_ros.core.sim.mit_simulator import JointSample, MitSimulator, SimOptions
from sysid_ros.core.sim.plant import JointCommand
from sysid_ros.core.sim.simulation import default_gains

__all__ = ["DriveOutput", "PositionControlledArm", "TrajectoryLimits"]


class TrajectoryLimits:
    """What a controller that refuses points beyond its limits checks: positions in
    ``[lower, upper] (n,)`` [rad], speeds up to ``velocity (n,)`` [rad/s], accelerations up to
    ``acceleration (n,)`` [rad/s²] (None: not checked)."""

    def __init__(self, lower, upper, velocity, acceleration=None) -> None:
        self.lower, self.upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
        self.velocity = np.asarray(velocity, dtype=float)
        self.acceleration = None if acceleration is None else np.asarray(acceleration, dtype=float)

    @classmethod
    def of(cls, model: RobotModel, acceleration: float | None = None) -> TrajectoryLimits:
        """The model's joint ranges and velocity limits (``inf`` where it has none) and one
        acceleration limit for every joint (None: unchecked)."""
        act = model.dof_indices
        lo, hi = (x[act] for x in model.joint_limits())
        vel = model.velocity_limits()[act]
        acc = None if acceleration is None else np.full(act.size, float(acceleration))
        return cls(np.where(np.isfinite(lo), lo, -np.inf), np.where(np.isfinite(hi), hi, np.inf),
                   np.where(np.isfinite(vel), vel, np.inf), acc)


class DriveOutput:
    """What the driver reports as ``effort``: the joint torque [N·m] (``drive_gain`` None), or the
    motor current ``τ / drive_gain`` [A] plus white noise of σ ``current_noise`` [A] (``drive_gain
    (n,)`` [N·m/A], e.g. UR's per-joint torque constants times gear ratio)."""

    def __init__(self, n: int, drive_gain=None, current_noise: float = 0.0, seed: int = 0) -> None:
        gain = None if drive_gain is None or np.size(drive_gain) == 0 else \
            np.broadcast_to(np.asarray(drive_gain, dtype=float), (n,)).copy()
        if gain is not None and not np.all(np.isfinite(gain) & (gain != 0)):
            raise SysIdError(f"drive_gain must be finite and non-zero per joint, got {gain.tolist()}")
        if not (np.isfinite(current_noise) and current_noise >= 0):
            raise SysIdError(f"current_noise must be a finite number >= 0 A, got {current_noise}")
        if gain is None and current_noise:
            raise SysIdError("current_noise needs a drive_gain (efforts are torques otherwise)")
        self.gain, self.noise = gain, float(current_noise)
        self._rng = np.random.default_rng(seed)

    def effort(self, tau: np.ndarray) -> np.ndarray:
        if self.gain is None:
            return tau
        current = tau / self.gain
        return current + self.noise * self._rng.standard_normal(tau.size) if self.noise else current


class PositionControlledArm:
    """A robot under joint_trajectory_controller-like control: :meth:`trajectory` takes
    waypoints, :meth:`step` advances one physics step and returns the measurement (``tau``: the
    joint torque) with :attr:`last_effort` what the driver reports (torque or current).

    ``model``: the bare robot (the controller's model); ``options``: the simulated robot
    (payload, friction, sensor noise, rate) as for :class:`MitSimulator`; ``bandwidth_hz``: the
    tracking loop; ``limits``: refuse whole trajectories with a waypoint beyond them (None:
    accept any, as joint_trajectory_controller does); ``output``: torque or current."""

    def __init__(self, model: RobotModel, options: SimOptions | None = None, *, bandwidth_hz: float = 10.0,
                 limits: TrajectoryLimits | None = None, output: DriveOutput | None = None) -> None:
        options = options or SimOptions()
        if options.floating_base:
            raise SysIdError("a position-controlled arm has a fixed base (floating_base must be false)")
        if not (np.isfinite(bandwidth_hz) and bandwidth_hz > 0):
            raise SysIdError(f"the tracking bandwidth must be a finite number > 0 Hz, got {bandwidth_hz}")
        if bandwidth_hz > 0.1 * options.rate:
            raise SysIdError(f"the tracking bandwidth {bandwidth_hz:g} Hz is above a tenth of the physics "
                             f"rate {options.rate:g} Hz (the loop would not be stable)")
        self.sim = MitSimulator(model, options)
        self.model = model
        self.joint_names = self.sim.joint_names
        n = len(self.joint_names)
        start = self.sim.plant.latest_command.position.copy()
        self.kp, self.kd = default_gains(model, start, bandwidth_hz=bandwidth_hz)
        self.follower = TrajectoryFollower(start)
        self.limits = limits
        self.output = output or DriveOutput(n)
        self.last_effort = np.zeros(n)
        self.rejected = 0
        # the controller's own model: inverse dynamics of the bare arm at the reference
        self._mj = model.mj
        self._data = mujoco.MjData(self._mj)
        self._qadr = model.joint_qpos_indices
        self._dofs = model.dof_indices

    @property
    def time(self) -> float:
        """Simulated time [s] of the next step."""
        return self.sim.time

    @property
    def horizon(self) -> float:
        """[s] end of the newest trajectory (-inf before any; +inf after a stop): how far the
        commands reach, what a lockstep simulation waits for."""
        return self.follower.horizon

    def trajectory(self, points: TrajectoryPoints, *, start: float = 0.0) -> None:
        """Execute ``points`` (already in :attr:`joint_names` order, see
        :meth:`TrajectoryPoints.from_message`) from ``start`` [s, simulated] (0: now). Refused
        whole (:class:`DataError`, counted in :attr:`rejected`) when a waypoint is beyond
        :attr:`limits`."""
        if self.limits is not None and not points.empty:
            why = limit_violation(points, self.limits.lower, self.limits.upper, self.limits.velocity,
                                  self.limits.acceleration, self.joint_names)
            if why:
                self.rejected += 1
                raise DataError(f"trajectory refused, beyond the controller's limits: {why}")
        self.follower.replace(points, start=start, now=self.time)

    def feedforward(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        """The controller's model's inverse dynamics ``(n,)`` [N·m] at one reference state."""
        d = self._data
        d.qpos[self._qadr], d.qvel[self._dofs], d.qacc[self._dofs] = q, dq, ddq
        mujoco.mj_inverse(self._mj, d)
        return d.qfrc_inverse[self._dofs].copy()

    def step(self) -> JointSample | None:
        """One physics step tracking the reference due now; the measurement (torque in ``tau``,
        :attr:`last_effort` as the driver reports it) or None while a measurement delay fills."""
        q, dq, ddq = self.follower.sample_one(self.time)
        tau_ff = self.feedforward(q, dq, ddq)
        self.sim.plant.send(JointCommand(q, dq, tau_ff, self.kp, self.kd))
        sample = self.sim.step()
        if sample is not None:
            self.last_effort = self.output.effort(sample.tau)
        return sample

    def reference(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The controller's reference ``(q, dq, ddq)`` each ``(n,)`` at ``t`` [s]."""
        q, dq, ddq = self.follower.sample(np.array([float(t)]))
        return q[0], dq[0], ddq[0]

