"""Node ``trajectory_publisher``: an excitation run published as MIT-mode ``MotorCommand``.

Waits for the first ``JointState`` (the measured pose), then plays a quintic ramp to the
excitation, the finite Fourier series (exact analytic derivatives; coefficients from a seed, a
JSON file or optimised for the base regressor's condition number) and a ramp back to rest, all
clamped to the joint and motor limits, with the nominal model's feed-forward torque.

Commands are paced by the joint states themselves: each state (decimated to ``rate`` [Hz] by its
stamp) gets the command of its time since the start. So the run follows simulated time at any
real-time factor without ``/clock``, and when the measurements stop the commands stop too (the
motors' or simulator's command watchdog then takes over: fail-safe). When the run is over the
node says so on ``~/done`` (latched ``std_msgs/Bool``) and keeps commanding the rest pose.

With ``lockstep: true`` (a ``mujoco_sim`` in lockstep mode waits for this node) the run is
deterministic: it starts at the stamp of the joint state it was planned from (the simulator
waits while the plan is computed), commands are stamped on the grid ``t0 + j/rate`` and sent up
to ``lead_time`` [s] ahead of the newest joint state (at least up to its stamp, so every state is
answered), and before a run starts each state is answered by an empty command (nothing changes,
time may pass). The simulator applies each command at its stamp, so which states this node
happened to see does not change the motion.
Service ``~/start`` (``std_srvs/Trigger``) plays the run again from the current pose.

Topics (relative names: remap them, e.g. ``--ros-args -r joint_states:=/arm/joint_states``):
subscribes ``joint_states`` (``sensor_msgs/JointState``), publishes ``motor_command``
(``sysid_ros/MotorCommand``) and ``~/done``.
"""

from __future__ import annotations

import threading

import numpy as np
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.excitation.design import choose_excitation
from sysid_ros.core.excitation.fourier import FourierTrajectory, Limits
from sysid_ros.core.excitation.plan import ExcitationPlan
from sysid_ros.msg import MotorCommand
from sysid_ros.nodes import spin
from sysid_ros.nodes.parameters import declare_parameters, parameter_value
from sysid_ros.nodes.qos import LATCHED
from sysid_ros.nodes.robot_model import MODEL_PARAMETERS, RobotModelSource

STREAM = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
PARAMETERS = (
    *MODEL_PARAMETERS,
    ("rate", 500.0, "command rate [Hz]"),
    ("harmonics", 5, "Fourier harmonics per joint"),
    ("period", 10.0, "Fourier base period [s]"),
    ("seed", 0, "random coefficients' seed (also the optimiser's start)"),
    ("optimize", False, "optimise the coefficients for the base regressor's condition number"),
    ("coefficients_file", "", "JSON {q0, a, b, period} of the coefficients ('' = seed/optimise)"),
    ("excitation_time", 0.0, "length of the excitation [s] (0 = one period)"),
    ("ramp_time", 2.0, "shortest ramp in/out [s] (lengthened to respect the limits)"),
    ("margin", 0.1, "fraction of each joint range kept free at both ends"),
    ("max_velocity", 0.0, "cap on joint speed [rad/s] (0 = the motors' limits)"),
    ("max_acceleration", 8.0, "joint acceleration limit [rad/s²]"),
    ("center", Parameter.Type.DOUBLE_ARRAY, "excitation centre [rad] (unset = middle of the ranges)"),
    ("rest_position", Parameter.Type.DOUBLE_ARRAY, "pose at the end [rad] (unset = the start pose)"),
    ("kp", Parameter.Type.DOUBLE_ARRAY, "position gains [N·m/rad] (unset = 3 Hz per joint)"),
    ("kd", Parameter.Type.DOUBLE_ARRAY, "velocity gains [N·m·s/rad] (unset = critically damped)"),
    ("feedforward", True, "add the nominal model's inverse dynamics as feed-forward torque"),
    ("autostart", True, "start as soon as the first joint state arrives"),
    ("reliable_input", False, "RELIABLE joint-state subscription (simulation; false matches any publisher)"),
    ("lockstep", False,
     "a lockstep simulator waits for this node: deterministic start, grid commands sent ahead"),
    ("lead_time", 0.02, "lockstep: send commands this far [s] ahead of the newest joint state"),
)


class TrajectoryPublisherNode(Node):
    """Thin ROS facade over :class:`sysid_ros.core.excitation.plan.ExcitationPlan`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("trajectory_publisher", **kwargs)
        declare_parameters(self, PARAMETERS)
        self.model = RobotModelSource(self).load()
        self.names = self.model.dof_joint_names
        self.limits = self._limits()
        self.trajectory = self._trajectory()
        self.plan: ExcitationPlan | None = None
        self._t0 = None
        self._done = False
        self._lock = threading.Lock()
        self._start_requested = bool(self._get("autostart"))
        self._cmd = MotorCommand()
        self._cmd.name = list(self.names)
        self._pub = self.create_publisher(MotorCommand, "motor_command", STREAM)
        self._done_pub = self.create_publisher(Bool, "~/done", LATCHED)
        self._done_pub.publish(Bool(data=False))
        # only the newest state matters (commands are a function of time): a queue of one never
        # lets the commands lag behind the robot; best effort matches any publisher
        reliability = (ReliabilityPolicy.RELIABLE if self._get("reliable_input")
                       else ReliabilityPolicy.BEST_EFFORT)
        self.create_subscription(JointState, "joint_states", self._on_state,
                                 QoSProfile(depth=1, reliability=reliability))
        self.create_service(Trigger, "~/start", self._on_start)
        self._period = 1.0 / float(self._get("rate"))
        self._last_sent = -np.inf
        self.lockstep = bool(self._get("lockstep"))
        self.lead_time = float(self._get("lead_time"))
        if not self.lead_time >= 0:
            raise SysIdError(f"lead_time must be >= 0 s, got {self.lead_time}")
        self._grid = 0  # lockstep: index of the next command on the grid t0 + j/rate
        self._latest: tuple[np.ndarray, float] | None = None  # newest (pose, stamp)
        self._unstamped = False  # set when two states in a row are stamped 0: the node's clock is used
        self.get_logger().info(f"excitation ready for {list(self.names)}: period "
                               f"{self.trajectory.period:g} s; waiting for joint states")

    def _get(self, name: str):
        return parameter_value(self, name)

    def _limits(self) -> Limits:
        vmax = float(self._get("max_velocity"))
        return Limits.of(self.model, velocity=vmax if vmax > 0 else None,
                         acceleration=float(self._get("max_acceleration")))

    def _trajectory(self) -> FourierTrajectory:
        center = self._get("center")
        return choose_excitation(
            self.model, self.limits, coefficients_file=self._get("coefficients_file"),
            optimize=bool(self._get("optimize")), harmonics=int(self._get("harmonics")),
            period=float(self._get("period")), seed=int(self._get("seed")),
            q0=None if center is None or len(center) == 0 else np.asarray(center, dtype=float),
            margin=float(self._get("margin")), say=self.get_logger().info)

    # ------------------------------------------------------------------------------ callbacks
    def _on_state(self, msg: JointState) -> None:
        values = dict(zip(msg.name, msg.position, strict=False))
        missing = [n for n in self.names if n not in values]
        if missing:
            self.get_logger().warning(f"joint states lack joints {missing} (got {list(msg.name)})",
                                      throttle_duration_sec=5.0)
            return
        q = np.array([values[n] for n in self.names])
        if not np.all(np.isfinite(q)):
            self.get_logger().warning(f"non-finite joint positions {q.tolist()}: ignored",
                                      throttle_duration_sec=5.0)
            return
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self._lock:
            if self._latest is not None and stamp == self._latest[1] == 0.0:
                self._unstamped = True  # a driver that never stamps: the node's clock
            if self._unstamped:
                stamp = self.get_clock().now().nanoseconds * 1e-9
            self._latest = (q, stamp)
            self._tick(q, stamp)

    def _on_start(self, _request, response):
        with self._lock:
            if self.plan is not None and not self._done:
                response.success, response.message = False, "busy: a run is in progress"
                return response
            self._start_requested, self.plan, self._done = True, None, False
        self._done_pub.publish(Bool(data=False))
        if self.lockstep and self._latest is not None:  # a lockstep simulator waits: start now
            with self._lock:
                self._tick(*self._latest)
            response.success, response.message = True, "started from the newest measured pose"
            return response
        response.success, response.message = True, "starting from the next measured pose"
        return response

    def _tick(self, measured: np.ndarray, stamp: float) -> None:
        """One joint state at ``stamp`` [s]: start a run if asked, publish the command due."""
        if self.plan is None:
            if not self._start_requested:
                if self.lockstep:
                    self._heartbeat(stamp)
                return
            try:
                self.plan = self._plan(measured)
            except SysIdError as exc:
                self.get_logger().error(f"cannot plan the excitation: {exc}")
                self._start_requested = False
                if self.lockstep:
                    self._heartbeat(stamp)
                return
            # the whole run sampled once (feed-forward included); each state then interpolates.
            # Real time: time starts at the next state (the arm holds still while this is
            # computed); lockstep: at this state (the simulator waits for the first command)
            self._samples = self.plan.sampled(max(1000.0, 2.0 / self._period))
            self._t0, self._last_sent, self._start_requested = None, -np.inf, False
            self._grid = 0
            if not self.lockstep:
                return
        if self._t0 is None:
            self._t0 = stamp
            self.get_logger().info(f"excitation started: {self.plan.duration:.1f} s "
                                   f"(ramp in {self.plan.ramp_in:.1f} s, excitation "
                                   f"{self.plan.excitation_time:.1f} s, ramp out {self.plan.ramp_out:.1f} s)")
        if self.lockstep:
            # the grid up to lead_time ahead, and at least up to this state (every state answered)
            while True:
                g = self._t0 + self._grid * self._period
                if g > stamp + self.lead_time + 1e-9 and self._last_sent >= stamp - 1e-9:
                    break
                self._send(g)
                self._grid += 1
            return
        if stamp - self._last_sent < 0.75 * self._period:
            return  # decimate the state stream down to the command rate (and drop out-of-order states)
        self._send(stamp)

    def _heartbeat(self, stamp: float) -> None:
        """Lockstep, no run: an empty command (nothing changes) so the simulator may go on."""
        msg = MotorCommand()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round(stamp * 1e9), 1_000_000_000)
        self._pub.publish(msg)

    def _send(self, stamp: float) -> None:
        """Publish the plan's command at ``stamp`` [s] (time since the run's start: stamp − t0)."""
        self._last_sent = stamp
        t = stamp - self._t0
        q, dq, tau, kp, kd = self._samples.sample(t)
        msg = self._cmd
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round(stamp * 1e9), 1_000_000_000)
        msg.position, msg.velocity, msg.effort = q.tolist(), dq.tolist(), tau.tolist()
        msg.kp, msg.kd = kp.tolist(), kd.tolist()
        self._pub.publish(msg)
        if t >= self.plan.duration and not self._done:
            self._done = True
            self._done_pub.publish(Bool(data=True))
            self.get_logger().info(f"excitation done ({self.plan.clamps.summary()}); holding the rest pose")

    def _plan(self, start: np.ndarray) -> ExcitationPlan:
        rest = self._get("rest_position")
        kp, kd = self._get("kp"), self._get("kd")
        return ExcitationPlan.build(
            self.model, self.trajectory, start,
            excitation_time=float(self._get("excitation_time")) or None,
            ramp_time=float(self._get("ramp_time")),
            rest=None if rest is None or len(rest) == 0 else np.asarray(rest, dtype=float),
            limits=self.limits,
            kp=None if kp is None or len(kp) == 0 else np.asarray(kp, dtype=float),
            kd=None if kd is None or len(kd) == 0 else np.asarray(kd, dtype=float),
            feedforward=bool(self._get("feedforward")))


def main(args=None) -> None:
    spin(TrajectoryPublisherNode, SingleThreadedExecutor, args=args)


if __name__ == "__main__":
    main()
