"""Node ``damiao_bridge``: Damiao motors in MIT mode over python-can, as a managed lifecycle node.

* configure: start the bridge's own process (below), open the CAN bus there and run the register
  handshake (PMAX/VMAX/TMAX checked against the model table, CTRL_MODE = MIT and TIMEOUT written
  and read back); with ``use_emulator: true`` the bus is an emulated one instead
  (:class:`~sysid_ros.hardware.emulated_bus.EmulatedBus`: motors emulated in the bridge's process,
  shafts driven by MuJoCo, on a private ``virtual`` channel; parameters ``emulator.*``);
* activate: check every joint is inside its limits, enable every motor (confirmed) and start the
  control loop thread (``rate`` Hz): latest ``motor_command`` (or the ``replay_file``) → clamped
  MIT frames → replies → one ``sensor_msgs/JointState`` per cycle on ``joint_states``;
* deactivate / cleanup / shutdown / errors / SIGINT / exit: disable every motor and confirm.
* a trip (motor fault, missed replies, bus error, command watchdog, an exception in the loop):
  the motors are disabled in the same cycle (disable frames re-sent until every motor confirms;
  until then the log and diagnostics say they may be enabled) and the node goes to ``inactive``
  (no more joint states). The fault stays latched: ``activate`` fails until ``~/clear_fault``
  (``std_srvs/Trigger``, inactive only) has sent clear-error to the motors and every one reports
  a state without fault.

Topics (relative names: remap them in a launch file or with ``--ros-args -r``):

* ``motor_command`` (``sysid_ros/MotorCommand``, subscribed, RELIABLE depth 10);
* ``joint_states`` (``sensor_msgs/JointState``): joint space (direction, offset, gear ratio
  applied; effort = measured torque), stamped with the wall clock at the start of each cycle; a
  motor that did not reply in time has NaN in that cycle. With the emulator in ``lockstep``
  (default) the emulated physics advances one period per command round, so the stamps are
  activation time + rounds × period (emulated time);
* ``diagnostics`` (``diagnostic_msgs/DiagnosticArray``) at ``diagnostics_rate``: per motor the state
  code, MOSFET/rotor temperatures and missed replies; the loop's achieved rate, jitter and
  overruns, its scheduling (``SCHED_FIFO 50`` or ``SCHED_OTHER``), its measured wake-up latency
  and the deadlines sized from it (motor CAN timeout, command watchdog, heartbeat:
  :mod:`sysid_ros.hardware.deadlines`); the trip reason after a fault;
* ``~/replay_done`` (``std_msgs/Bool``, latched): when a replay finished;
* ``~/clear_fault`` (``std_srvs/Trigger``): acknowledge a trip (see above);
* ``sim/true_parameters`` (``sysid_ros/ParameterEstimate``, latched), with the emulator only: the
  emulated robot's true parameters.

The control loop runs in a process of its own (:mod:`sysid_ros.hardware.bridge_process`, started
at configure, ended at cleanup/shutdown): it shares no interpreter lock with this node's executor,
DDS or logging, which a busy host preempts. There its thread asks for real-time scheduling
(``realtime_priority``, ``lock_memory``; said once if the host refuses; the worker's other threads
at SCHED_FIFO 1), enables the motors, sends every cycle's frames and disables the motors on
deactivate. This node converts messages: commands go to the worker without waiting, joint states
come back for every cycle (none dropped: the worker queues what this node has not read yet). If
this node dies (even by SIGKILL) the worker disables every motor and ends; if the worker dies,
this node says so, leaves ``active`` and reports the motors as possibly enabled.

With ``autostart: true`` the node configures and activates itself; otherwise
``ros2 lifecycle set /damiao_bridge configure`` then ``activate``.
"""

from __future__ import annotations

import logging
import math
import threading

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_config import BUS_PARAMETERS, JOINT_PARAMETERS, NODE_NAME, BridgeConfig
from sysid_ros.hardware.bridge_process import BridgeProcess, EmulatorHandle
from sysid_ros.hardware.bridge_types import BridgeStatus
from sysid_ros.hardware.emulated_bus import EMULATOR_PARAMETERS, EmulatorOptions
from sysid_ros.hardware.safety import Trip
from sysid_ros.msg import MotorCommand, ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.nodes.conversions import to_truth_msg
from sysid_ros.nodes.parameters import declare_config_parameters, parameter_value
from sysid_ros.nodes.qos import LATCHED

COMMANDS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: reliable keep-last publisher: serves best-effort (sensor-data) and reliable subscribers alike;
#: 2,000 states (about 3 s at 700 Hz) of history so that a reliable reader that lags (an estimator
#: or recorder on a loaded host) loses nothing, while the control loop never blocks on a reader
STATES = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
WARN_INTERVAL = 2.0  # [s] between two reports of the same counted warning
#: ``use_emulator`` and the ``emulator.*`` group (:data:`.emulated_bus.EMULATOR_PARAMETERS`)
EMULATOR_GROUP = (
    ("use_emulator", False, "emulated motors on a private in-process bus instead of the configured one"),
    *((f"emulator.{name}", default, description) for name, default, description in EMULATOR_PARAMETERS))


class DamiaoBridgeNode(LifecycleNode):
    """Thin ROS facade over :class:`sysid_ros.hardware.bridge.Bridge`."""

    def __init__(self, **kwargs) -> None:
        super().__init__(NODE_NAME, **kwargs)
        # numbers may come as integers or floats from a YAML file (rate: 500, gear_ratios: [1, 1]):
        # dynamically typed here, converted and checked in one place (BridgeConfig.from_parameters);
        # switches take true/false or 1/0 (use_emulator:=1 from a launch file), as every node's do
        declare_config_parameters(self, (*BUS_PARAMETERS, *EMULATOR_GROUP))
        for p in JOINT_PARAMETERS:
            if p.kind is str:
                self.declare_parameter(f"joints.{p.key}", Parameter.Type.STRING_ARRAY,
                                       ParameterDescriptor(description=p.description))
            else:
                self.declare_parameter(f"joints.{p.key}", None,
                                       ParameterDescriptor(description=p.description, dynamic_typing=True))
        self.bridge: BridgeProcess | None = None
        self.emulated: EmulatorHandle | None = None  # the worker's emulated motors (use_emulator)
        self._warned: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._state_pub = self.create_publisher(JointState, "joint_states", STATES)
        self._diag_pub = self.create_publisher(DiagnosticArray, "diagnostics", 10)
        self._done_pub = self.create_publisher(Bool, "~/replay_done", LATCHED)
        self._truth_pub = None  # sim/true_parameters, only with the emulator
        self._sub = None
        self._diag_timer = None
        self._names: list[str] = []
        self._lock = threading.Lock()
        self._log = _RosLog(self.get_logger(), self.context)
        # a trip is seen in the loop thread; the lifecycle transition runs in the executor
        self._trip_guard = self.create_guard_condition(self._leave_active_after_trip)
        self.create_service(Trigger, "~/clear_fault", self._on_clear_fault)
        if parameter_value(self, "autostart"):
            if self.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                self.trigger_activate()
        else:
            name = self.get_fully_qualified_name()
            self.get_logger().info(f"ready, unconfigured: `ros2 lifecycle set {name} configure` starts the "
                                   f"bridge's loop process, then `ros2 lifecycle set {name} activate`")

    # ------------------------------------------------------------------------------ set-up
    def _parameter_snapshot(self) -> dict:
        """One snapshot of every parameter, flat (``"rate"``, ``"joints.names"``, ``"emulator.clock"``)."""
        params = {name: parameter_value(self, name) for name, _, _ in (*BUS_PARAMETERS, *EMULATOR_GROUP)}
        for p in JOINT_PARAMETERS:
            value = self.get_parameter(f"joints.{p.key}").value
            if value is not None:
                params[f"joints.{p.key}"] = list(value)
        return params

    def _publish_truth(self, truth: tuple[list[str], list[float]]) -> None:
        """The emulated robot's true parameters on ``sim/true_parameters`` (latched)."""
        if self._truth_pub is None:
            self._truth_pub = self.create_publisher(ParameterEstimate, "sim/true_parameters", LATCHED)
        self._truth_pub.publish(to_truth_msg(*truth))  # the arm's and payload.* parameters

    # ------------------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            params = self._parameter_snapshot()
            config = BridgeConfig.from_parameters(params)  # checked here first: no process for a typo
            if params["use_emulator"]:
                EmulatorOptions.from_parameters(params)
            self.bridge = BridgeProcess(config, params, on_sample=self._publish_state, on_trip=self._on_trip,
                                        on_replay_done=self._on_replay_done, on_warning=self._warn,
                                        on_exit=self._on_worker_exit, logger=self._log)
            self.bridge.configure()
            if params["use_emulator"]:
                self.emulated = EmulatorHandle(self.bridge)
                self._publish_truth(self.bridge.truth)
        except SysIdError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        self._names = list(config.names)
        if not config.replay_file:
            self._sub = self.create_subscription(MotorCommand, "motor_command", self._on_command, COMMANDS)
        self._diag_timer = self.create_timer(1.0 / config.diagnostics_rate, self._publish_diagnostics)
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.bridge.activate()
        except SysIdError as exc:
            self.get_logger().error(f"activate failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        if self.bridge.config.replay_file:
            self._done_pub.publish(Bool(data=False))
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.bridge.deactivate()
        except SysIdError as exc:  # the worker is gone: inactive anyway, and the log says why
            self.get_logger().error(f"deactivate: {exc}")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error("lifecycle error: disabling every motor")
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        """Motors disabled (confirmed), bus closed, emulator stopped; idempotent."""
        with self._lock:
            if self.bridge is not None:
                self.bridge.shutdown()
                self.bridge = None
            self.emulated = None
            if self._sub is not None:
                self.destroy_subscription(self._sub)
                self._sub = None
            if self._diag_timer is not None:
                self.destroy_timer(self._diag_timer)
                self._diag_timer = None

    def destroy_node(self) -> None:
        self._release()
        super().destroy_node()

    # ------------------------------------------------------------------------------ callbacks
    def _warn(self, key: str, text: str) -> None:
        """Count a warning; report it at most every WARN_INTERVAL seconds with its count."""
        self._counts[key] = self._counts.get(key, 0) + 1
        now = self.get_clock().now().nanoseconds * 1e-9
        if now - self._warned.get(key, -math.inf) >= WARN_INTERVAL:
            self._warned[key] = now
            self.get_logger().warning(f"{text} ({key}: {self._counts[key]})")

    def _on_command(self, msg: MotorCommand) -> None:
        bridge = self.bridge
        if bridge is None:
            return
        try:  # refused, ignored and unknown-joint commands come back as counted warnings (_warn)
            bridge.submit_command(msg.name, msg.position, msg.velocity, msg.effort, msg.kp, msg.kd)
        except SysIdError as exc:
            self._warn("ignored_commands", f"MotorCommand ignored: {exc}")

    def _publish_state(self, stamp: float, position: list, velocity: list, effort: list) -> None:
        """In the bridge process's event thread: one joint state per control cycle."""
        msg = JointState(name=self._names, position=position, velocity=velocity, effort=effort)
        sec, nsec = divmod(int(stamp * 1e9), 1_000_000_000)
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nsec
        try:
            self._state_pub.publish(msg)
        except Exception:
            if self.context.ok():
                raise

    def _on_trip(self, trip: Trip) -> None:
        """In the bridge process's event thread: hand the trip to the executor (lifecycle
        transitions run there)."""
        self._trip_guard.trigger()

    def _on_worker_exit(self, why: str) -> None:
        """The bridge's process ended without being asked (logged by the process handle): out of
        ``active`` as after a trip."""
        try:
            self._trip_guard.trigger()
        except Exception:  # the node is being destroyed
            pass

    def _leave_active_after_trip(self) -> None:
        """A trip moves the node out of ``active`` (the bridge has disabled the motors; it keeps
        re-sending disable frames until every motor confirms)."""
        self._publish_diagnostics()
        if self._state_machine.current_state[1] == "active":
            self.get_logger().error("tripped: deactivating (activate needs ~/clear_fault first)")
            self.trigger_deactivate()

    def _on_clear_fault(self, _request, response):
        bridge = self.bridge
        state = self._state_machine.current_state[1]
        if bridge is None or state != "inactive":
            response.success = False
            response.message = f"clear_fault needs the node configured and inactive, it is {state}"
            return response
        try:
            states = bridge.clear_fault()
        except SysIdError as exc:
            response.success, response.message = False, str(exc)
            return response
        self._publish_diagnostics()
        response.success, response.message = True, f"fault cleared: {states}"
        return response

    def _on_replay_done(self) -> None:
        self._done_pub.publish(Bool(data=True))

    def _publish_diagnostics(self) -> None:
        bridge = self.bridge
        if bridge is None:
            return
        try:
            status = diagnostics(bridge.status(), self.get_name())
        except SysIdError as exc:  # the worker ended or does not answer
            status = [DiagnosticStatus(level=DiagnosticStatus.ERROR, name=f"{self.get_name()}: control loop",
                                       hardware_id="", message=f"MOTORS MAY BE ENABLED: {exc}")]
        array = DiagnosticArray(status=status)
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)


def diagnostics(status: BridgeStatus, node: str) -> list[DiagnosticStatus]:
    """One ``DiagnosticStatus`` per motor plus one for the control loop."""
    out = []
    tripped_joint = status.trip.joint if status.trip else None
    for m in status.motors:
        level = DiagnosticStatus.OK
        if (m.state is not None and m.state.is_fault) or m.joint == tripped_joint:
            level = DiagnosticStatus.ERROR
        elif m.missed_consecutive > 0 or m.state is None:
            level = DiagnosticStatus.WARN
        values = {"state": m.state_text, "can_id": f"0x{m.can_id:02X}", "master_id": f"0x{m.master_id:02X}",
                  "motor": m.motor, "mosfet_temperature_C": str(m.t_mos),
                  "rotor_temperature_C": str(m.t_rotor),
                  "replies": str(m.replies), "missed_replies_consecutive": str(m.missed_consecutive),
                  "missed_replies_total": str(m.missed_total), "late_replies": str(m.late),
                  "bad_frames": str(m.bad_frames)}
        if m.limits is not None:
            values["pmax_vmax_tmax"] = f"{m.limits.pmax:g}/{m.limits.vmax:g}/{m.limits.tmax:g}"
        out.append(DiagnosticStatus(level=level, name=f"{node}: {m.joint}",
                                    hardware_id=f"{m.motor} 0x{m.can_id:02X}", message=m.state_text,
                                    values=_kv(values)))
    values = {"phase": status.phase, "mode": status.mode, "joint_states": str(status.cycles)}
    if status.timing is not None:
        t = status.timing
        values.update(rate_hz=f"{t.rate:.1f}", period_p50_us=f"{1e6 * t.p50:.1f}",
                      period_p99_us=f"{1e6 * t.p99:.1f}", period_max_us=f"{1e6 * t.max:.1f}",
                      jitter_us=f"{1e6 * t.jitter:.1f}", work_mean_us=f"{1e6 * t.work_mean:.1f}",
                      overruns=str(t.overruns), missed_cycles=str(t.missed),
                      loop_late_p50_us=f"{1e6 * t.late_p50:.1f}", loop_late_p99_us=f"{1e6 * t.late_p99:.1f}",
                      loop_late_max_us=f"{1e6 * t.late_max:.1f}")
    if status.deadlines is not None:  # scheduling, measured latency and the deadlines sized from it
        values.update(status.deadlines.values())
    values.update({k: str(v) for k, v in status.counters.items()})
    if status.replay:
        values["replay"] = status.replay
    values["disabled_confirmed"] = str(status.disabled)
    if status.trip is not None:
        values["trip"] = str(status.trip)
        level = DiagnosticStatus.ERROR
        message = (f"ALL MOTORS DISABLED: {status.trip}" if status.disabled
                   else f"MOTORS MAY BE ENABLED (disable not confirmed): {status.trip}")
    else:
        level, message = DiagnosticStatus.OK, f"{status.phase}, {status.mode}"
    out.append(DiagnosticStatus(level=level, name=f"{node}: control loop", hardware_id="", message=message,
                                values=_kv(values)))
    return out


def _kv(values: dict[str, str]) -> list[KeyValue]:
    return [KeyValue(key=k, value=v) for k, v in values.items()]


class _RosLog:
    """``logging.Logger``-style %-formatting onto the node's rclpy logger; once rclpy is shut down
    (SIGINT) the messages go to the standard ``logging`` module instead (stderr), since rclpy can no
    longer publish them on /rosout. One call site per severity (rclpy requires it)."""

    def __init__(self, logger, context) -> None:
        self._logger = logger
        self._context = context
        self._fallback = logging.getLogger(f"sysid_ros.{NODE_NAME}")
        if not logging.getLogger().handlers and not self._fallback.handlers:
            handler = logging.StreamHandler()
            fmt = f"[%(levelname)s] [%(created).9f] [{NODE_NAME}]: %(message)s"
            handler.setFormatter(logging.Formatter(fmt))
            self._fallback.addHandler(handler)
            self._fallback.setLevel(logging.INFO)

    def _ros(self) -> bool:
        return self._context.ok()

    def debug(self, msg: str, *args) -> None:
        if self._ros():
            self._logger.debug(msg % args if args else msg)
        else:
            self._fallback.debug(msg, *args)

    def info(self, msg: str, *args) -> None:
        if self._ros():
            self._logger.info(msg % args if args else msg)
        else:
            self._fallback.info(msg, *args)

    def warning(self, msg: str, *args) -> None:
        if self._ros():
            self._logger.warning(msg % args if args else msg)
        else:
            self._fallback.warning(msg, *args)

    def error(self, msg: str, *args) -> None:
        if self._ros():
            self._logger.error(msg % args if args else msg)
        else:
            self._fallback.error(msg, *args)


def main(args=None) -> None:
    spin(DamiaoBridgeNode, SingleThreadedExecutor, args)


if __name__ == "__main__":
    main()
