"""Node ``mujoco_sim``: the robot in MuJoCo under the motors' MIT law, standing in for hardware.

Subscribes ``motor_command`` (``sysid_ros/MotorCommand``; a command takes effect one physics
period after its header stamp, see :class:`~sysid_ros.core.sim.mit_simulator.MitSimulator`); steps
physics at ``rate`` [Hz] in a thread of its own, so the executor is free to take every command as
it arrives. Two clock modes:

* real time (``lockstep: false``, interactive use): physics paced at ``real_time_factor`` × wall
  time (0 = as fast as the machine goes), whatever the other nodes do; a lag under 0.5 s is caught
  up gradually, a longer stall of the process is not simulated (the clock is re-based and a warning
  says by how much);
* lockstep (``lockstep: true``, the demo, tests, launch tests): physics advances only when the
  graph has caught up, so a run gives the same samples on a busy machine as on an idle one —
  before the step that follows the state stamped ``t``, the newest command stamp must be ≥ ``t``
  (``lockstep_command``: the controller has answered that state; commands sent ahead, e.g.
  ``trajectory_publisher``'s ``lead_time``, keep it from waiting) and every topic of
  ``lockstep_wait_for`` (``builtin_interfaces/Time``: the data time a consumer has finished, such
  as ``estimator/progress`` and ``recorder/progress``, relative names) must be within ``lockstep_window`` [s]
  of ``t``. Stepping starts after the start handshake of :mod:`sysid_ros.nodes.lockstep`: every
  consumer waited for (the controller on the command topic, the node behind each progress topic)
  has said on the latched ``lockstep/ready`` that its own ``joint_states`` subscription (and the
  controller's command publisher) has matched, and this node's subscriptions on those topics and
  its ``joint_states`` publisher have matched every peer the graph shows, those nodes among them.
  DDS matches the two sides of a publisher–subscription pair separately and a reliable volatile
  subscription misses what was published before both had: so the one first state and the first
  command reach their consumers on a busy host as on an idle one. ``real_time_factor`` > 0
  still caps the speed. A wait longer than 5 s is logged with what it waits for; a wait longer
  than ``lockstep_timeout`` [s of wall time] once stepping (a consumer that died), or than
  ``start_timeout`` before the first step (one that never started), ends the run: the node says
  what it waited for and exits with status 1 (a launch then stops the graph, and the recorder
  finishes the bag written so far).

The start gate (the handshake) also holds in real-time mode when ``lockstep_wait_for`` names
consumers, so a recorder started beside the simulator gets the run from its first state; it too
ends the run after ``start_timeout``.

Every parameter takes effect at start-up only and is declared read-only (``ros2 param set`` is
refused instead of reporting a change that does nothing).

Publishes ``joint_states``
(``sensor_msgs/JointState``, effort = applied torque) every ``publish_every`` steps, ``/clock``
(other nodes run with ``use_sim_time``) and, latched, ``sim/true_parameters``
(``sysid_ros/ParameterEstimate``): the simulated robot's true parameters, so estimates can be
scored. ``pushes`` apply external wrenches to named bodies at given simulated times (unexpected
contacts, for the ``collision_monitor``).
Commands with non-finite values or magnitudes above 1e6 (gains, targets, torques) are
refused with a counted warning. Should the physics diverge all the same (MuJoCo flags a NaN, infinite
or huge state and resets the robot to its reference pose), the node logs it and stops stepping: no
reset state is published. Topic names are relative (``/joint_states`` ... in the root namespace): move them by
namespace or remapping (``--ros-args -r joint_states:=/arm/joint_states``). The physics lives in
:class:`sysid_ros.core.sim.mit_simulator.MitSimulator` (stepping
:class:`sysid_ros.core.sim.plant.MitPlant`).

``input: joint_trajectory`` makes the robot a position-controlled industrial arm as a ros2_control
stack presents it (:class:`~sysid_ros.core.sim.position_controlled.PositionControlledArm`): it
takes ``trajectory_msgs/JointTrajectory`` on ``<controller>/joint_trajectory``, interpolates it
as joint_trajectory_controller does (a new message replaces the rest of the running trajectory
from its header stamp on; stamp 0 = now; no waypoints = stop and hold), tracks it with its own
controller (the bare arm's inverse dynamics plus a stiff PD loop at ``tracking_bandwidth``,
unknown to the estimator) and publishes ``joint_states`` with effort = joint torque, or motor
current ``τ / drive_gain`` plus ``current_noise`` where ``drive_gain`` is set. With
``reject_beyond_limits`` it refuses (whole, with a warning) a trajectory with a waypoint beyond
the joint ranges, ``max_velocity`` and ``max_acceleration``. In lockstep, a state stamped ``t`` is
followed by the next step once the trajectories received reach ``t``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.sim.joint_trajectory import TrajectoryPoints
from sysid_ros.core.sim.mit_simulator import MitSimulator, SimOptions
from sysid_ros.core.sim.plant import Push, SensorModel, SimulationError
from sysid_ros.core.sim.position_controlled import DriveOutput, PositionControlledArm, TrajectoryLimits
from sysid_ros.core.sim.synthetic import Payload
from sysid_ros.msg import MotorCommand, ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.nodes.conversions import to_truth_msg
from sysid_ros.nodes.lockstep import StartGate
from sysid_ros.nodes.parameters import declare_parameters, parameter_value
from sysid_ros.nodes.qos import LATCHED, PROGRESS
from sysid_ros.nodes.robot_model import MODEL_PARAMETERS, RobotModelSource

# deep enough that a reliable subscriber that falls behind for a few seconds loses nothing
STREAM = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
#: longest sleep [s] of the stepping loop while it is ahead of its real-time factor
TICK = 0.002
#: real time: a lag [s of wall time] beyond which the stepping loop does not catch up (it would run
#: a burst of physics faster than real time, ahead of the commands meant for it) but re-bases its clock
MAX_LAG = 0.5
PARAMETERS = (
    *MODEL_PARAMETERS,
    ("rate", 1000.0, "physics rate [Hz]"),
    ("real_time_factor", 1.0, "simulated seconds per wall second (0 = as fast as possible)"),
    ("publish_every", 1, "publish a JointState every this many physics steps"),
    ("clock_every", 10, "publish /clock every this many physics steps (every node using sim time "
                        "processes each /clock message)"),
    ("duration", 0.0, "stop stepping after this simulated time [s] (0 = run until shut down)"),
    ("payload", "", "payload 'body=NAME,mass=KG,com=X,Y,Z[,inertia=Ixx,Iyy,Izz,Ixy,Ixz,Iyz]' or ''"),
    ("floating_base", False, "free-floating base in zero gravity (orbital case)"),
    ("joint_friction", True, "keep the MJCF's friction loss and damping (false: frictionless joints)"),
    ("armature", True, "keep the MJCF's rotor (armature) inertia"),
    ("position_noise", 0.0, "position measurement noise σ [rad]"),
    ("velocity_noise", 0.0, "velocity measurement noise σ [rad/s]"),
    ("torque_noise", 0.0, "torque measurement noise σ [N·m]"),
    ("encoder_resolution", 0.0, "encoder quantisation [rad/count] (0 = ideal)"),
    ("noise_seed", 0, "seed of the measurement noise"),
    ("command_delay", 0.0, "delay before a command takes effect [s]"),
    ("measurement_delay", 0.0, "delay of the published measurements [s]"),
    ("command_timeout", 0.5, "silence after which the joints go limp [s] (simulated time)"),
    ("limp_damping", 0.5, "damping of limp joints [N·m·s/rad]"),
    ("initial_position", Parameter.Type.DOUBLE_ARRAY,
     "initial joint positions [rad] (unset = middle of the ranges)"),
    ("integrator", "euler", "euler (semi-implicit) | rk4"),
    ("pushes", Parameter.Type.STRING_ARRAY,
     "external pushes (unexpected contacts), each 'body=NAME,force=FX,FY,FZ[,torque=TX,TY,TZ],"
     "start=S,duration=S' [N, N·m, s simulated; world axes, at the body's centre of mass]"),
    ("input", "motor_command",
     "motor_command (MIT commands, Damiao motors) | joint_trajectory (a ros2_control arm: "
     "JointTrajectory on <controller>/joint_trajectory)"),
    ("controller", "joint_trajectory_controller", "joint_trajectory input: the controller's name"),
    ("tracking_bandwidth", 10.0, "joint_trajectory input: the arm's own tracking loop [Hz]"),
    ("drive_gain", Parameter.Type.DOUBLE_ARRAY,
     "joint_trajectory input: effort published as current τ/drive_gain [A] with this gain [N·m/A] "
     "per joint (or one for all; unset = effort is the joint torque [N·m])"),
    ("current_noise", 0.0, "joint_trajectory input with drive_gain: current noise σ [A]"),
    ("reject_beyond_limits", False,
     "joint_trajectory input: refuse trajectories with a waypoint beyond the joint ranges, "
     "max_velocity, max_acceleration"),
    ("max_velocity", 0.0, "joint_trajectory input: the controller's speed limit [rad/s] (0 = the model's)"),
    ("max_acceleration", 0.0, "joint_trajectory input: the controller's acceleration limit [rad/s²] "
                              "(0 = unchecked)"),
    ("joint_order", Parameter.Type.STRING_ARRAY,
     "the order joint_states names the joints (as a joint_state_broadcaster may: e.g. alphabetical; "
     "unset = the model's)"),
    ("lockstep", False, "advance physics only when the graph has caught up (deterministic runs)"),
    ("lockstep_command", True, "lockstep: wait for a command stamped at or after each published state"),
    ("lockstep_wait_for", Parameter.Type.STRING_ARRAY,
     "lockstep: progress topics (builtin_interfaces/Time, data time finished) to wait for"),
    ("lockstep_window", 0.2, "lockstep: how far [s, simulated] the progress topics may lag"),
    ("lockstep_timeout", 60.0, "lockstep: [s of wall time] a wait for a consumer's progress or a command "
                               "longer than this ends the run with an error (0 = no limit)"),
    ("start_timeout", 300.0, "[s of wall time] a wait for the consumers to connect before the first step "
                             "longer than this ends the run with an error (0 = no limit)"),
)
#: topics (relative: remap them, not parameters)
JOINT_STATES, MOTOR_COMMAND, CLOCK, TRUTH = "joint_states", "motor_command", "/clock", "sim/true_parameters"


class MujocoSimNode(Node):
    """Thin ROS facade over :class:`MitSimulator`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("mujoco_sim", **kwargs)
        declare_parameters(self, PARAMETERS, read_only=True)  # all read once, at start
        models = RobotModelSource(self)
        self.model = models.load()
        model_path = models.origin
        self.trajectory_input = self._get("input") == "joint_trajectory"
        if self._get("input") not in ("motor_command", "joint_trajectory"):
            raise SysIdError(f"parameter input: expected motor_command or joint_trajectory, got "
                             f"{self._get('input')!r}")
        self.arm = self._arm() if self.trajectory_input else None
        self.sim = self.arm.sim if self.arm is not None else MitSimulator(self.model, self._options())
        self.rate = float(self._get("rate"))
        self.rtf = float(self._get("real_time_factor"))
        self.publish_every = max(1, int(self._get("publish_every")))
        self.clock_every = max(1, int(self._get("clock_every")))
        self.duration = float(self._get("duration"))
        self.rejected = 0
        self._joint_msg = JointState()
        order = [n for n in (self._get("joint_order") or []) if n]
        if order and sorted(order) != sorted(self.sim.joint_names):
            raise SysIdError(f"parameter joint_order: expected the joints {list(self.sim.joint_names)} "
                             f"in any order, got {order}")
        self._joint_msg.name = order or list(self.sim.joint_names)
        self._order = [list(self.sim.joint_names).index(n) for n in self._joint_msg.name]
        self._clock_msg = Clock()
        self._state_pub = self.create_publisher(JointState, JOINT_STATES, STREAM)
        self._clock_pub = self.create_publisher(Clock, CLOCK, 10)
        self._truth_pub = self.create_publisher(ParameterEstimate, TRUTH, LATCHED)
        if self.arm is not None:
            self._command_sub = self.create_subscription(
                JointTrajectory, f"{self._get('controller')}/joint_trajectory", self._on_trajectory,
                QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        else:
            self._command_sub = self.create_subscription(MotorCommand, MOTOR_COMMAND, self._on_command,
                                                         STREAM)
        self._lock = threading.Lock()
        self._caught_up = threading.Condition(self._lock)
        self.lockstep = bool(self._get("lockstep"))
        self.lockstep_command = bool(self._get("lockstep_command"))
        self.window = float(self._get("lockstep_window"))
        if self.lockstep and not self.window >= 0:
            raise SysIdError(f"lockstep_window must be >= 0 s, got {self.window}")
        self.timeouts = {name: float(self._get(name)) for name in ("start_timeout", "lockstep_timeout")}
        for name, value in self.timeouts.items():
            if not value >= 0:
                raise SysIdError(f"{name} must be >= 0 s (0 = no limit), got {value}")
        # the stepping thread ends the run through the executor (spin() then exits with status 1)
        self._failure: SysIdError | None = None
        self._fail_guard = self.create_guard_condition(self._raise_failure)
        self.progress: dict[str, float] = {}
        self._progress_subs = []
        for given in (t for t in (self._get("lockstep_wait_for") or []) if t):
            topic = self.resolve_topic_name(given)  # relative names: in this node's namespace
            self.progress[topic] = -float("inf")
            self._progress_subs.append(self.create_subscription(
                Time, topic, self._progress_callback(topic), PROGRESS))
        self._gate = StartGate(self, self._state_pub, notify=self._wake, awaited=[
            *self._progress_subs, *([self._command_sub] if self.lockstep_command else [])])
        self._stop = threading.Event()
        self._stalls = 0  # real time: how often the clock was re-based after a stall (see MAX_LAG)
        self._thread = threading.Thread(target=self._run, name="mujoco_sim_stepping", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"simulating {model_path} ({len(self.sim.joint_names)} joints) at {self.rate:g} Hz, "
            f"real-time factor {'max' if self.rtf <= 0 else f'{self.rtf:g}'}"
            + (f", lockstep with {'the commands and ' if self.lockstep_command else ''}"
               f"{list(self.progress) or 'no progress topic'}" if self.lockstep else "")
            + (f", a position-controlled arm on {self._command_sub.topic_name}" if self.arm else "")
            + (f", payload {self._get('payload')}" if self._get("payload") else "")
            + (f", pushes {list(self._get('pushes'))}" if self._get("pushes") else ""))
        self._publish_truth()  # last: the latched truth says the simulator is running

    def _get(self, name: str):
        return parameter_value(self, name)

    def _options(self) -> SimOptions:
        try:
            payload = Payload.parse(self._get("payload")) if self._get("payload") else None
        except SysIdError as exc:
            raise SysIdError(f"parameter payload: {exc}") from None
        try:
            pushes = tuple(Push.parse(spec) for spec in (self._get("pushes") or []) if spec)
        except SysIdError as exc:
            raise SysIdError(f"parameter pushes: {exc}") from None
        initial = self._get("initial_position")
        sensor = SensorModel(self._get("position_noise"), self._get("velocity_noise"),
                             self._get("torque_noise"), self._get("encoder_resolution"),
                             int(self._get("noise_seed")))
        return SimOptions(
            rate=float(self._get("rate")), payload=payload, floating_base=bool(self._get("floating_base")),
            joint_friction=bool(self._get("joint_friction")), armature=bool(self._get("armature")),
            sensor=sensor, command_delay=float(self._get("command_delay")),
            measurement_delay=float(self._get("measurement_delay")),
            command_timeout=float(self._get("command_timeout")),
            limp_damping=float(self._get("limp_damping")),
            initial_position=None if initial is None or len(initial) == 0 else np.array(initial, dtype=float),
            integrator=str(self._get("integrator")), pushes=pushes)

    def _arm(self) -> PositionControlledArm:
        """The position-controlled arm of the ``joint_trajectory`` input."""
        limits = None
        if self._get("reject_beyond_limits"):
            acc = float(self._get("max_acceleration"))
            limits = TrajectoryLimits.of(self.model, acceleration=acc if acc > 0 else None)
            vmax = float(self._get("max_velocity"))
            if vmax > 0:
                limits.velocity = np.minimum(limits.velocity, vmax)
        n = len(self.model.dof_joint_names)
        gain = self._get("drive_gain")
        output = DriveOutput(n, None if gain is None or len(gain) == 0 else np.asarray(gain, dtype=float),
                             float(self._get("current_noise")), int(self._get("noise_seed")) + 1)
        return PositionControlledArm(self.model, self._options(), limits=limits, output=output,
                                     bandwidth_hz=float(self._get("tracking_bandwidth")))

    def _publish_truth(self) -> None:
        self._truth_pub.publish(to_truth_msg(*self.sim.true_parameters()))

    # ------------------------------------------------------------------------------ callbacks
    def _on_command(self, msg: MotorCommand) -> None:
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        try:
            with self._lock:
                self.sim.command(msg.name, msg.position, msg.velocity, msg.effort, msg.kp, msg.kd,
                                 stamp=stamp)
                self._caught_up.notify_all()
        except SysIdError as exc:
            self.rejected += 1
            self.get_logger().warning(f"command rejected ({self.rejected} so far): {exc}",
                                      throttle_duration_sec=2.0)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        """A JointTrajectory: replaces the rest of the running one from its stamp (0: now)."""
        start = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        try:
            points = TrajectoryPoints.from_message(
                self.sim.joint_names, msg.joint_names,
                [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points],
                [p.positions for p in msg.points], [p.velocities for p in msg.points],
                [p.accelerations for p in msg.points])
            with self._lock:
                self.arm.trajectory(points, start=start)
                self._caught_up.notify_all()
        except SysIdError as exc:
            self.rejected += 1
            self.get_logger().warning(f"trajectory rejected ({self.rejected} so far): {exc}",
                                      throttle_duration_sec=2.0)

    def _progress_callback(self, topic: str) -> Callable[[Time], None]:
        def on_progress(msg: Time) -> None:
            with self._lock:
                self.progress[topic] = max(self.progress[topic], msg.sec + 1e-9 * msg.nanosec)
                self._caught_up.notify_all()
        return on_progress

    # --------------------------------------------------------------------------- lockstep
    def _lockstep_blockers(self) -> list[str]:
        """What the next physics step waits for (empty: it may go). Called with the lock held."""
        if self.sim.step_count == 0:
            return self._unmatched()
        last_state = (self.sim.step_count - 1) / self.rate  # stamp of the newest published state
        waits = []
        horizon = self.arm.horizon if self.arm is not None else self.sim.command_horizon
        if self.lockstep_command and horizon < last_state - 1e-9:
            waits.append(f"a command reaching {last_state:.3f} s (newest {horizon:.3f} s)")
        for topic, done in self.progress.items():
            if done < last_state - self.window - 1e-9:
                waits.append(f"{topic} >= {last_state - self.window:.3f} s (at {done:.3f} s)")
        return waits

    def _unmatched(self) -> list[str]:
        """Before the first step: the start handshake (:mod:`sysid_ros.nodes.lockstep`)."""
        return self._gate.waits()

    def _wake(self) -> None:
        """A consumer said it is ready: the start gate looks again."""
        with self._lock:
            self._caught_up.notify_all()

    def _wait_for_graph(self, blockers: Callable[[], list[str]] | None = None) -> bool:
        """Lockstep (or the start gate, ``blockers``): block until the next step may go; False when
        the node is stopping or the wait outlasted ``lockstep_timeout`` (then the run is failed)."""
        blockers = blockers or self._lockstep_blockers
        since = time.monotonic()
        with self._lock:
            while True:
                waits = blockers()
                if not waits:
                    return True
                if self._stop.is_set() or not self.context.ok():
                    return False
                waited = time.monotonic() - since
                limit = "start_timeout" if self.sim.step_count == 0 else "lockstep_timeout"
                if 0 < self.timeouts[limit] < waited:
                    self._fail(f"t = {self.sim.time:.3f} s: waited {waited:.0f} s of wall time "
                               f"({limit}) for {'; '.join(waits)}: a consumer died or did not "
                               "start; the run ends")
                    return False
                if waited > 5.0:
                    self.get_logger().warning(f"t = {self.sim.time:.3f} s: lockstep waiting for "
                                              + "; ".join(waits), throttle_duration_sec=5.0)
                # woken by every command and progress message; the timeout re-checks the graph
                self._caught_up.wait(0.05)

    def _run(self) -> None:
        """Stepping loop: as many physics steps as the real-time factor makes due, then sleep
        until the next one (no sleep at factor 0); in lockstep each step first waits for the graph."""
        try:
            if not self.lockstep and self._progress_subs and not self._wait_for_graph(self._unmatched):
                return  # real time: the consumers connected before the first state (or the run failed)
        except Exception as exc:
            self._fail(f"start gate: {exc}")
            return
        wall0, steps0 = time.monotonic(), self.sim.step_count
        last_report = wall0
        try:
            while not self._stop.is_set() and self.context.ok():
                now = time.monotonic()
                if self.rtf > 0:
                    due = int((now - wall0) * self.rtf * self.rate) - (self.sim.step_count - steps0)
                    if due <= 0:
                        time.sleep(min(TICK, -due / (self.rtf * self.rate) + 1.0 / (self.rtf * self.rate)))
                        continue
                    if due > MAX_LAG * self.rtf * self.rate:  # the process was stalled (host, SIGSTOP)
                        self._stalls += 1
                        self.get_logger().warning(
                            f"t = {self.sim.time:.3f} s: physics fell {due / (self.rtf * self.rate):.2f} s "
                            f"behind wall time (the process was stalled; stall {self._stalls}); the "
                            "real-time clock is re-based: that wall time is not simulated")
                        wall0, steps0 = now, self.sim.step_count
                        continue
                    due = min(due, max(1, int(0.05 * self.rtf * self.rate)))  # catch up gradually
                else:
                    due = 50
                for _ in range(due):
                    if self.lockstep and not self._wait_for_graph():
                        return
                    self._step_once()
                    if self.duration > 0 and self.sim.time >= self.duration:
                        self.get_logger().info(f"simulated {self.duration:g} s: stepping stopped")
                        return
                if now - last_report > 5.0:
                    taken = (f"{self.sim.counters['commands']} commands" if self.arm is None else
                             f"{self.arm.follower.accepted} trajectories, {self.rejected} rejected")
                    self.get_logger().info(
                        f"t = {self.sim.time:.1f} s, real-time factor "
                        f"{(self.sim.step_count - steps0) / self.rate / max(now - wall0, 1e-9):.2f}, "
                        f"mode {self.sim.mode}, {taken}")
                    last_report = now
        except SimulationError as exc:  # diverged: MuJoCo reset the robot; publish no reset state
            self.get_logger().fatal(f"simulation stopped, no more joint states are published: {exc}")
        except Exception as exc:  # a crash of the physics must not go unnoticed
            if self.context.ok():
                self.get_logger().fatal(f"simulation stopped: {exc}")
                raise

    def _fail(self, reason: str) -> None:
        """End the run from the stepping thread: the executor raises it (exit status 1)."""
        self.get_logger().error(reason)
        self._failure = SysIdError(reason)
        self._fail_guard.trigger()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def destroy_node(self):
        stop, thread = getattr(self, "_stop", None), getattr(self, "_thread", None)
        if stop is not None:
            stop.set()
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        return super().destroy_node()

    def _step_once(self) -> None:
        k = self.sim.step_count
        with self._lock:
            sample = self.sim.step() if self.arm is None else self.arm.step()
        if k % self.clock_every == 0:
            sec, nsec = _split(self.sim.time)
            self._clock_msg.clock.sec, self._clock_msg.clock.nanosec = sec, nsec
            self._clock_pub.publish(self._clock_msg)
        if sample is not None and k % self.publish_every == 0:
            msg = self._joint_msg
            msg.header.stamp.sec, msg.header.stamp.nanosec = _split(sample.t)
            order = self._order
            msg.position = sample.q[order].tolist()
            msg.velocity = sample.dq[order].tolist()
            msg.effort = (sample.tau if self.arm is None else self.arm.last_effort)[order].tolist()
            self._state_pub.publish(msg)


def _split(t: float) -> tuple[int, int]:
    ns = round(t * 1e9)
    return ns // 1_000_000_000, ns % 1_000_000_000


def main(args=None) -> None:
    spin(MujocoSimNode, SingleThreadedExecutor, args=args)


if __name__ == "__main__":
    main()
