"""Node ``trajectory_publisher``: an excitation run published as MIT-mode ``MotorCommand``.

Waits for the first ``JointState`` (the measured pose), then plays a quintic ramp to the
excitation, the finite Fourier series (exact analytic derivatives; coefficients from a seed, a
JSON file or optimised for the base regressor's condition number) and a ramp back to rest, all
clamped to the joint and motor limits, with the nominal model's feed-forward torque.

Commands follow the joint states' time, sent by a command thread of their own: it wakes at
``rate`` [Hz] on a fixed schedule (``SCHED_FIFO`` at ``realtime_priority`` where the host allows
it, said once if not) and commands the trajectory at the states' time *now*, read from the
monotonic clock through the received stamps (:class:`~sysid_ros.core.excitation.state_clock.StateClock`:
the least-delayed recent state gives the offset, their slope the real-time factor). So the run
follows simulated time at any real-time factor without ``/clock``, one command per cycle however
the states are delivered (a subscriber paced by the states it gets commanded at ~55 Hz in steps on
a busy host). The thread takes the newest state itself each cycle (no state wakes the executor,
which plans a run from a timer), and the node's other threads run at ``SCHED_FIFO 1`` when the
thread is real-time (:mod:`~sysid_ros.nodes.trajectory_states`). When the measurements stop for
``state_timeout`` the commands stop too (the
motors' or simulator's command watchdog then takes over: fail-safe). A wake-up later than a
period skips the cycles it missed (never a burst of catch-up commands) and counts them: the count
is logged when the run is done. When the run is over the node says so on ``~/done`` (latched
``std_msgs/Bool``) and keeps commanding the rest pose.

With ``lockstep: true`` (a ``mujoco_sim`` in lockstep mode waits for this node) the run is
deterministic: it starts at the stamp of the joint state it was planned from (the simulator
waits while the plan is computed), commands are stamped on the grid ``t0 + j/rate`` and sent up
to ``lead_time`` [s] ahead of the newest joint state (at least up to its stamp, so every state is
answered), and before a run starts each state is answered by an empty command (nothing changes,
time may pass). The simulator applies each command at its stamp, so which states this node
happened to see does not change the motion. Once its ``joint_states`` subscription and its command
publisher (``motor_command`` or ``NAME/joint_trajectory``) have matched the simulator, the node says
so on ``lockstep/ready``: the simulator's start handshake (:mod:`~sysid_ros.nodes.lockstep`).
Service ``~/start`` (``std_srvs/Trigger``) plays the run again from the current pose.
``start_after: estimator,recorder`` (hardware_identify.launch.py sets it): a run starts only once
those nodes have said on ``lockstep/ready`` that their ``joint_states`` subscription is connected,
so a consumer still starting on a busy host misses nothing of the excitation (said once, in one
line, while it waits).

Topics (relative names: remap them, e.g. ``--ros-args -r joint_states:=/arm/joint_states``):
subscribes ``joint_states`` (``sensor_msgs/JointState``), publishes ``motor_command``
(``sysid_ros/MotorCommand``) and ``~/done``.

ros2_control arms (``interface: joint_trajectory``, ``controller: NAME``): the same run goes to
the arm's joint_trajectory_controller as ``trajectory_msgs/JointTrajectory`` on
``NAME/joint_trajectory`` (``interface: follow_joint_trajectory``: as goals of the
``control_msgs/FollowJointTrajectory`` action ``NAME/follow_joint_trajectory``, where control_msgs
is installed), in chunks of waypoints (:class:`~sysid_ros.core.excitation.waypoints.WaypointStream`:
positions, velocities, accelerations, ``time_from_start``; joint names from the model; within the
limits; from the measured pose with a smooth approach), each stamped to start where the previous one
ends and sent ``send_ahead`` [s] before the arm needs it, so an arm whose commander stops stops at
the end of what it got. With ``until_precision: P`` the excitation repeats until every required
direction of the estimator's ``estimator/precision`` (``sysid_ros/Precision``) has a relative
standard deviation ≤ P, or ``max_duration`` [s] has passed, then returns to the start pose and says
which directions stayed above P. Outside lockstep, a run whose joint states stop for
``state_timeout`` [s] (wall clock) is stopped: an empty trajectory (the controller holds where it
is) and an error naming the silence.
"""

from __future__ import annotations

import threading

import numpy as np
from diagnostic_msgs.msg import KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.excitation.design import choose_excitation
from sysid_ros.core.excitation.plan import ExcitationPlan
from sysid_ros.core.excitation.waypoints import Chunk, WaypointStream
from sysid_ros.msg import MotorCommand, Precision
from sysid_ros.nodes import spin
from sysid_ros.nodes.command_thread import CommandThread
from sysid_ros.nodes.intake import PolledGroup
from sysid_ros.nodes.lockstep import READY, READY_TOPIC, ReadySignal
from sysid_ros.nodes.parameters import declare_parameters, parameter_value
from sysid_ros.nodes.qos import LATCHED
from sysid_ros.nodes.robot_model import MODEL_PARAMETERS, RobotModelSource
from sysid_ros.nodes.trajectory_states import JointStateIntake

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
    ("start_after", "", "comma-separated nodes (names relative to this node's namespace, e.g. "
                        "estimator,recorder) that must say on lockstep/ready that their joint_states "
                        "subscription is connected before a run starts: none misses the excitation while "
                        "it starts on a busy host ('' = start at once)"),
    ("reliable_input", False, "RELIABLE joint-state subscription (simulation; false matches any publisher)"),
    ("lockstep", False,
     "a lockstep simulator waits for this node: deterministic start, grid commands sent ahead"),
    ("lead_time", 0.02, "lockstep: send commands this far [s] ahead of the newest joint state"),
    ("interface", "motor_command",
     "motor_command (MIT commands: Damiao motors, mujoco_sim) | joint_trajectory | "
     "follow_joint_trajectory (a ros2_control joint_trajectory_controller)"),
    ("controller", "joint_trajectory_controller",
     "ros2_control: the controller (topic <controller>/joint_trajectory, action "
     "<controller>/follow_joint_trajectory)"),
    ("joints", "", "ros2_control: the controller's joints, comma-separated model joint names ('' = every "
                   "joint of the model); only these are excited and named in the trajectories, the "
                   "others stay at their start pose"),
    ("waypoint_spacing", 0.02, "ros2_control: time between waypoints [s]"),
    ("chunk_time", 2.0, "ros2_control: waypoints per trajectory message [s]"),
    ("send_ahead", 1.0, "ros2_control: send the next message this long [s] before the arm needs it"),
    ("until_precision", 0.0,
     "ros2_control: excite until every required direction of estimator/precision has a relative "
     "std <= this (0 = excitation_time)"),
    ("max_duration", 120.0, "until_precision: longest approach + excitation [s] before returning"),
    ("state_timeout", 1.0, "not lockstep: stop commanding (MIT) or stop the run (ros2_control) after "
                           "this silence of the joint states [s, wall clock]"),
    ("realtime_priority", 40, "MIT commands, not lockstep: SCHED_FIFO priority of the command thread "
                              "(0 = normal scheduling; below the bridge's control loop)"),
)
#: [s] outside lockstep, a ros2_control run starts this long after the newest joint state (the
#: first message reaches the controller before it is due)
START_DELAY = 0.25
#: [s] polled states (MIT commands, not lockstep): how often the executor looks for a run to plan
START_POLL = 0.05

#: read at start-up (the trajectory, limits, pacing, QoS): read-only at run time; the others
#: (ramp, excitation time, rest pose, gains, feed-forward) apply to the next run (``~/start``)
READ_ONLY = {name for name, _, _ in PARAMETERS} - {
    "excitation_time", "ramp_time", "rest_position", "kp", "kd", "feedforward"}


class TrajectoryPublisherNode(JointStateIntake, Node):
    """Thin ROS facade over :class:`sysid_ros.core.excitation.plan.ExcitationPlan`."""

    #: [s] a callback (planning, a backlog batch) still running this long after a stop request is
    #: left unfinished: nothing of this node's needs finishing, and launch escalates after 5 s
    STOP_GRACE = 1.0

    def __init__(self, **kwargs) -> None:
        super().__init__("trajectory_publisher", **kwargs)
        declare_parameters(self, PARAMETERS, read_only=READ_ONLY)
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
        self.lockstep = bool(self._get("lockstep"))
        self.interface = str(self._get("interface"))
        # MIT commands outside lockstep: the command thread takes the states itself, the newest
        # once per cycle (PolledGroup: the executor never wakes for one), so the executor holds
        # neither the GIL nor the node's lock per state (docs/damiao-bridge.md)
        self._polled = self.interface == "motor_command" and not self.lockstep and PolledGroup.supported()
        states = self.create_subscription(JointState, "joint_states", self._on_state,
                                          QoSProfile(depth=1, reliability=reliability),
                                          callback_group=PolledGroup(events=False) if self._polled else None)
        self._states = states
        self.create_service(Trigger, "~/start", self._on_start)
        self._period = 1.0 / float(self._get("rate"))
        self._last_sent = -np.inf
        self.lead_time = float(self._get("lead_time"))
        if not self.lead_time >= 0:
            raise SysIdError(f"lead_time must be >= 0 s, got {self.lead_time}")
        self._grid = 0  # lockstep: index of the next command on the grid t0 + j/rate
        self.commanded = self._commanded()  # indices (into self.names) of the controller's joints
        self.stream: WaypointStream | None = None  # ros2_control: the run's waypoints
        self._precision: Precision | None = None  # the estimator's newest
        self._last_state_wall = None  # steady time of the newest joint state (ros2_control watchdog)
        self._aborted = False
        if self.interface != "motor_command":
            self._setup_ros2_control()
        command = self._pub if self.interface == "motor_command" else getattr(self, "_trajectory_pub", None)
        if command is not None:  # a lockstep simulator's start handshake (not through an action)
            self._ready = ReadySignal(self, serves=command.topic_name, states=states, command=command)
        self._awaited = self._start_after()  # fully qualified names of the nodes to wait for
        self._ready_nodes: frozenset[str] = frozenset()
        self._waiting_said = False
        if self._awaited:
            self.create_subscription(KeyValue, READY_TOPIC, self._on_ready, READY)
        self._latest: tuple[np.ndarray, float] | None = None  # newest (pose, stamp)
        self._unstamped = False  # set when two states in a row are stamped 0: the node's clock is used
        self._others_raised = False
        # MIT commands outside lockstep: a thread of their own at `rate` on the states' clock,
        # started last (nothing after it can fail and leave it running)
        self.commands: CommandThread | None = None
        if self.interface == "motor_command" and not self.lockstep:
            self.commands = CommandThread(self, rate=float(self._get("rate")),
                                          priority=int(self._get("realtime_priority")),
                                          state_timeout=float(self._get("state_timeout")), lock=self._lock,
                                          command=self._command_now,
                                          poll=self._take_states if self._polled else None)
            if self._polled:  # a run is planned here, in the executor, from the newest state taken
                self.create_timer(START_POLL, self._start_if_asked,
                                  clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(f"excitation ready for {list(self.names)}: period "
                               f"{self.trajectory.period:g} s; waiting for joint states")
        if self.commands is not None:
            self.commands.start()

    def _get(self, name: str):
        return parameter_value(self, name)

    def _commanded(self) -> list[int]:
        """Indices of ``joints`` among the model's joints (all when unset); SysIdError naming an
        unknown joint, or ``joints`` given for ``motor_command`` (every motor is commanded)."""
        text = str(self._get("joints")).strip()
        if not text:
            return list(range(len(self.names)))
        if self.interface == "motor_command":
            raise SysIdError("joints applies to the ros2_control interfaces (joint_trajectory, "
                             "follow_joint_trajectory), not motor_command")
        wanted = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in self.names]
        if unknown or len(set(wanted)) != len(wanted):
            raise SysIdError(f"joints must be distinct joints of the model {list(self.names)}, got {wanted}")
        return [self.names.index(n) for n in wanted]

    def _start_after(self) -> frozenset[str]:
        """The fully qualified names of the ``start_after`` nodes."""
        names = [n.strip() for n in str(self._get("start_after")).split(",") if n.strip()]
        here = self.get_namespace().rstrip("/")
        return frozenset(n if n.startswith("/") else f"{here}/{n}" for n in names)

    def _on_ready(self, msg: KeyValue) -> None:
        self._ready_nodes = self._ready_nodes | {msg.value}  # a new set: read without the lock

    def _consumers_missing(self) -> list[str]:
        """``start_after`` nodes not ready yet (said once while a run waits for them, once when it may go)."""
        missing = sorted(self._awaited - self._ready_nodes)
        if missing and not self._waiting_said:
            self._waiting_said = True
            self.get_logger().info(f"the excitation waits for {', '.join(missing)} to be connected to "
                                   f"the joint states ({self.resolve_topic_name(READY_TOPIC)})")
        elif not missing and self._awaited and self._waiting_said:
            self._waiting_said = False
            self.get_logger().info(f"{', '.join(sorted(self._awaited))} connected: the excitation may start")
        return missing

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
    def _on_start(self, _request, response):
        with self._lock:
            if self.interface != "motor_command":
                if self.stream is not None and not self._done and not self._aborted:
                    response.success, response.message = False, "busy: a run is in progress"
                    return response
                self._start_requested, self.stream, self._done, self._aborted = True, None, False, False
                self._precision = None
                response.success, response.message = True, "starting from the next measured pose"
                self._done_pub.publish(Bool(data=False))
                return response
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
        if self.interface != "motor_command":
            self._tick_waypoints(measured, stamp)
            return
        if self.plan is None:
            if not self._start_requested or self._consumers_missing():
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
            if self.commands is not None:
                self.commands.reset()
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
        # not lockstep: the command thread sends (_command_now)

    def _command_now(self, t: float) -> bool:
        """The command thread's cycle (``self._lock`` held): the command at the states' time ``t``
        [s] once a run has started (then the rest pose once it is done). True while a run's
        commands are sent (the cycles counted)."""
        if self.plan is None or self._t0 is None:
            return False
        running = not self._done
        self._send(max(t, self._t0))
        return running

    def destroy_node(self) -> None:
        """The command thread ends first (no command after this); then the node (also a node whose
        constructor failed, which rclpy's context destroys: it may have no thread yet)."""
        commands = getattr(self, "commands", None)
        if commands is not None and not commands.stop():
            self.get_logger().error("the command thread did not end within 2 s of the stop")
        super().destroy_node()

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
            cycles = "" if self.commands is None else f"; {self.commands.summary()}"
            self.get_logger().info(f"excitation done ({self.plan.clamps.summary()}{cycles}); "
                                   "holding the rest pose")

    # -------------------------------------------------------------------------- ros2_control
    def _setup_ros2_control(self) -> None:
        """Publisher (or action client) to the controller, the precision subscription, the
        joint-state watchdog."""
        if self.interface not in ("joint_trajectory", "follow_joint_trajectory"):
            raise SysIdError(f"parameter interface: expected motor_command, joint_trajectory or "
                             f"follow_joint_trajectory, got {self.interface!r}")
        controller = str(self._get("controller"))
        self._action = None
        if self.interface == "follow_joint_trajectory":
            try:
                from control_msgs.action import FollowJointTrajectory
            except ImportError:
                raise SysIdError("interface follow_joint_trajectory needs control_msgs (the "
                                 "FollowJointTrajectory action), which is not installed here: install "
                                 "ros-$ROS_DISTRO-control-msgs, or use interface joint_trajectory") from None
            from rclpy.action import ActionClient

            self._action_type = FollowJointTrajectory
            self._action = ActionClient(self, FollowJointTrajectory, f"{controller}/follow_joint_trajectory")
        else:
            self._trajectory_pub = self.create_publisher(
                JointTrajectory, f"{controller}/joint_trajectory",
                QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.until_precision = float(self._get("until_precision"))
        self.max_duration = float(self._get("max_duration"))
        self.state_timeout = float(self._get("state_timeout"))
        for name in ("waypoint_spacing", "chunk_time", "max_duration", "state_timeout"):
            if not float(self._get(name)) > 0:
                raise SysIdError(f"{name} must be > 0 s, got {self._get(name)}")
        if not self.until_precision >= 0:
            raise SysIdError(f"until_precision must be >= 0 (0 = off), got {self.until_precision}")
        self.create_subscription(Precision, "estimator/precision", self._on_precision, LATCHED)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        if not self.lockstep:  # a lockstep simulator pauses on purpose: no watchdog there
            self.create_timer(0.1, self._watchdog, clock=self._steady)

    def _tick_waypoints(self, measured: np.ndarray, stamp: float) -> None:
        """ros2_control: plan from the first state, then send each chunk of waypoints when due."""
        if not self.lockstep:
            self._last_state_wall = self._steady.now().nanoseconds
        if self._aborted or self._done:
            return
        if self.stream is None:
            if not self._start_requested or self._consumers_missing():
                return
            self._start_requested = False
            try:
                self.stream = self._waypoint_stream(measured)
            except SysIdError as exc:
                self.get_logger().error(f"cannot plan the excitation: {exc}")
                return
            self._t0 = stamp if self.lockstep else stamp + START_DELAY
            self.get_logger().info(
                f"excitation started on {self._controller_name()}: approach "
                f"{self.stream.plan.ramp_in:.1f} s, "
                + (f"excitation until every required direction reaches {self.until_precision:g} or "
                   f"{self.max_duration:g} s" if self.until_precision > 0 else
                   f"excitation {self.stream.plan.excitation_time:.1f} s")
                + f", return {self.stream.plan.ramp_out:.1f} s")
        now = stamp - self._t0
        self._check_precision(now)
        try:
            chunk = self.stream.due(now)
        except SysIdError as exc:  # a waypoint beyond the limits: never sent
            self._abort(f"excitation stopped: {exc}")
            return
        if chunk is not None:
            self._send_chunk(chunk)
        if self.stream.finished and now >= self.stream.duration and not self._done:
            self._done = True
            if self.lockstep:  # hold at rest for good (no waypoints): a lockstep simulator goes on,
                # as it does after an MIT run under the rest-pose commands
                self._publish_trajectory(JointTrajectory(joint_names=self._commanded_names()))
            self._done_pub.publish(Bool(data=True))
            self.get_logger().info(f"excitation done after {self.stream.duration:.1f} s, back at the start "
                                   f"pose ({self.stream.plan.clamps.summary()}); {self._precision_report()}")

    def _waypoint_stream(self, start: np.ndarray) -> WaypointStream:
        rest = self._get("rest_position")
        excitation = self.max_duration if self.until_precision > 0 else \
            float(self._get("excitation_time")) or self.trajectory.period
        trajectory = self.trajectory
        held = [i for i in range(len(self.names)) if i not in self.commanded]
        if held:  # joints the controller does not command: constant at their start pose
            q0, a, b = trajectory.q0.copy(), trajectory.a.copy(), trajectory.b.copy()
            q0[held], a[held], b[held] = start[held], 0.0, 0.0
            trajectory = FourierTrajectory(q0, a, b, trajectory.period)
        stream = WaypointStream(
            self.model, trajectory, self.limits, start, excitation_time=excitation,
            ramp_time=float(self._get("ramp_time")),
            rest=None if rest is None or len(rest) == 0 else np.asarray(rest, dtype=float),
            spacing=float(self._get("waypoint_spacing")), chunk=float(self._get("chunk_time")),
            lead=float(self._get("send_ahead")))
        if self.until_precision > 0:
            stream.limit_to(self.max_duration)  # approach + excitation within max_duration
        return stream

    def _commanded_names(self) -> list[str]:
        return [self.names[i] for i in self.commanded]

    def _controller_name(self) -> str:
        if self._action is not None:
            return f"action {self._action._action_name}"
        return self._trajectory_pub.topic_name

    def _send_chunk(self, chunk: Chunk) -> None:
        msg = JointTrajectory()
        # a stamp of 0 would mean "start now" to the controller: a run starting at t = 0 says 1 ns
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(max(1, round((self._t0 + chunk.start) * 1e9)),
                                                                1_000_000_000)
        msg.joint_names = self._commanded_names()
        pts, j = chunk.points, self.commanded
        for k in range(pts.times.size):
            point = JointTrajectoryPoint(positions=pts.positions[k, j].tolist(),
                                         velocities=pts.velocities[k, j].tolist(),
                                         accelerations=pts.accelerations[k, j].tolist())
            point.time_from_start.sec, point.time_from_start.nanosec = divmod(round(pts.times[k] * 1e9),
                                                                              1_000_000_000)
            msg.points.append(point)
        self._publish_trajectory(msg)

    def _publish_trajectory(self, msg: JointTrajectory) -> None:
        if self._action is None:
            self._trajectory_pub.publish(msg)
            return
        goal = self._action_type.Goal()
        goal.trajectory = msg  # a new goal preempts the running one (the controller merges them)
        self._action.send_goal_async(goal)

    def _on_precision(self, msg: Precision) -> None:
        with self._lock:
            self._precision = msg

    def _reached(self) -> bool:
        msg = self._precision
        if msg is None:
            return False
        rel = [r for r, q in zip(msg.relative_std, msg.required, strict=False) if q]
        return bool(rel) and all(r <= self.until_precision for r in rel)

    def _check_precision(self, now: float) -> None:
        """until_precision: once every required direction reaches it, return to rest."""
        stream = self.stream
        if self.until_precision <= 0 or stream.stopped_early or stream.finished:
            return
        if self._reached():
            end = stream.stop_at(now)
            self.get_logger().info(f"precision {self.until_precision:g} reached by every required direction "
                                   f"at t = {now:.1f} s: returning to the start pose from t = {end:.1f} s")

    def _precision_report(self) -> str:
        msg = self._precision
        if self.until_precision <= 0:
            return "no precision target"
        if msg is None:
            return f"no precision received on {self.resolve_topic_name('estimator/precision')}"
        poor = [f"{n} ({r:.3g})" for n, r, q in zip(msg.names, msg.relative_std, msg.required, strict=False)
                if q and not r <= self.until_precision]
        if not poor:
            return f"every required direction reached {self.until_precision:g}"
        return f"poorly determined (relative std above {self.until_precision:g}): " + ", ".join(poor)

    def _watchdog(self) -> None:
        """Outside lockstep: joint states silent for ``state_timeout`` during a run stop it."""
        with self._lock:
            if self.stream is None or self._done or self._aborted or self._last_state_wall is None:
                return
            silence = (self._steady.now().nanoseconds - self._last_state_wall) * 1e-9
            if silence > self.state_timeout:
                self._abort(f"no joint_states for {silence:.1f} s (state_timeout {self.state_timeout:g} s): "
                            "excitation stopped (an empty trajectory sent: the controller holds its "
                            "position)")

    def _abort(self, why: str) -> None:
        self._aborted = True
        msg = JointTrajectory()
        msg.joint_names = self._commanded_names()  # no points: joint_trajectory_controller stops and holds
        self._publish_trajectory(msg)
        self.get_logger().error(why)

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
