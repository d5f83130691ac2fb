"""Node ``collision_monitor``: unexpected contacts from live joint states, by the generalised-momentum
residual observer on the (identified) model.

A thin facade over :class:`sysid_ros.core.monitor.CollisionMonitor` (the same observer, thresholds
and events as ``sysid monitor``). Subscribes ``joint_states`` (``sensor_msgs/JointState``:
position, velocity and effort = measured torque of the model's joints, any order; times and names
by the estimator's stream policy, :mod:`~sysid_ros.core.online.stream`; a driver's motor currents
converted by ``torque_scale``/``torque_offset``, :mod:`~sysid_ros.nodes.effort`). The model is
the robot model's parameters (``model_path`` ..., e.g. ``identify``'s ``identified.xml``) with
``result_path``'s exported parameters written over them (friction offsets come only from there).
Thresholds [N·m]: ``thresholds`` when set, else derived from the residual over the first
``calibration_time`` seconds of data, which must be free of contact (``max(sigma_factor · rms,
peak_factor · peak) + margin`` per joint).

Publishes, on relative topics:

* ``~/events`` (``diagnostic_msgs/DiagnosticArray``, RELIABLE, depth 100): one status per event,
  stamped with the sample's time; ``name`` "collision_monitor: <joint>", level ERROR with
  message "contact" at an onset, OK with "released" at its end; ``values``: ``joint``,
  ``time_s``, ``magnitude_nm`` (the signed residual at the onset; the peak |r| at the end),
  ``threshold_nm``, ``duration_s``. A standard, typed message that diagnostic tools
  (``rqt_robot_monitor``, ``diagnostic_aggregator``) already show, with no message of our own.
* ``~/residual`` (``std_msgs/Float64MultiArray``, one per sample when ``publish_residual``): r
  [N·m] in the model's joint order (the layout's dimension label lists the joints).
* ``~/thresholds`` (``std_msgs/Float64MultiArray``, latched): the thresholds in use [N·m].
* ``~/progress`` (``builtin_interfaces/Time``, latched): data time processed, what a lockstep
  ``mujoco_sim`` waits for (its start handshake: ``lockstep/ready``, :mod:`~sysid_ros.nodes.lockstep`).

Bad samples (other joints, missing velocity or effort, time not increasing, NaN) are counted and
reported in throttled warnings; the node keeps running. A gap longer than ``1/gain`` between
samples (lost messages) restarts the observer, with a warning. Parameters are read at start.
The observer's compiled kernels are set up in a thread of its own once the node is ready (``ready
to process`` in the log); joint states that arrive before wait for them.
"""

from __future__ import annotations

import math

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.monitor import CollisionMonitor, ContactEvent, Thresholds, parameters_from_result
from sysid_ros.core.monitor import detector as contact
from sysid_ros.core.monitor.observer import DEFAULT_GAIN
from sysid_ros.core.online.stream import JointStream
from sysid_ros.nodes import spin
from sysid_ros.nodes.background_setup import BackgroundSetUp
from sysid_ros.nodes.conversions import joint_message
from sysid_ros.nodes.effort import TORQUE_PARAMETERS, torque_map
from sysid_ros.nodes.lockstep import ReadySignal
from sysid_ros.nodes.parameters import declare_parameters, parameter_value
from sysid_ros.nodes.qos import LATCHED, PROGRESS
from sysid_ros.nodes.robot_model import MODEL_PARAMETERS, RobotModelSource

PARAMETERS = (
    *MODEL_PARAMETERS,
    ("result_path", "", "result.json of an identification: its exported parameters replace the "
                        "model's ('' = the model's own values)"),
    ("gain", DEFAULT_GAIN, "observer gain K [1/s] (time constant 1/K)"),
    ("thresholds", Parameter.Type.DOUBLE_ARRAY,
     "detection thresholds [N·m], one value or one per joint (unset = calibrate)"),
    ("calibration_time", 10.0, "without thresholds: seconds of contact-free data to derive them from [s]"),
    ("sigma_factor", contact.DEFAULT_SIGMA_FACTOR, "threshold = max(k·rms, f·peak) + margin: k"),
    ("peak_factor", contact.DEFAULT_PEAK_FACTOR, "f"),
    ("margin", contact.DEFAULT_MARGIN, "margin [N·m]"),
    ("release", contact.DEFAULT_RELEASE, "a contact ends below this fraction of the threshold"),
    ("publish_residual", True, "publish ~/residual with every sample"),
    ("reliable_input", False, "RELIABLE joint states (simulation, bag replay) instead of best effort"),
    *TORQUE_PARAMETERS,
)
EVENTS_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
_LEVEL = {"contact": DiagnosticStatus.ERROR, "released": DiagnosticStatus.OK}


class CollisionMonitorNode(Node):
    """Thin ROS facade over :class:`CollisionMonitor`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("collision_monitor", **kwargs)
        declare_parameters(self, PARAMETERS)
        self.add_on_set_parameters_callback(self._refuse_changes)
        model = RobotModelSource(self).load()
        result = str(self._get("result_path") or "")
        theta = parameters_from_result(model, result) if result else model.nominal
        given = self._get("thresholds")
        self.monitor = CollisionMonitor(
            model, theta, thresholds=Thresholds.given(given, model.nv) if given else None,
            calibration_time=float(self._get("calibration_time")), gain=float(self._get("gain")),
            sigma_factor=float(self._get("sigma_factor")), peak_factor=float(self._get("peak_factor")),
            margin=float(self._get("margin")), release=float(self._get("release")))
        self.joint_names = model.dof_joint_names
        scale, offset = torque_map(lambda name: parameter_value(self, name), self.joint_names)
        self._stream = JointStream(self.joint_names, scale=scale, offset=offset, velocity=True,
                                   where=self.resolve_topic_name("joint_states"),
                                   warn=self.get_logger().warning)
        self.counters = {"contacts": 0, "rejected": 0}
        self._publish_residual = bool(self._get("publish_residual"))
        self._events = self.create_publisher(DiagnosticArray, "~/events", EVENTS_QOS)
        self._residual = self.create_publisher(Float64MultiArray, "~/residual", 10)
        self._thresholds = self.create_publisher(Float64MultiArray, "~/thresholds", LATCHED)
        self._progress = self.create_publisher(Time, "~/progress", PROGRESS)
        reliability = (ReliabilityPolicy.RELIABLE if self._get("reliable_input")
                       else ReliabilityPolicy.BEST_EFFORT)  # best effort matches any publisher
        states = self.create_subscription(JointState, "joint_states", self._on_joint_state,
                                          QoSProfile(depth=1000, reliability=reliability))
        self._ready = ReadySignal(self, serves=self._progress.topic_name, states=states)  # lockstep start
        self._residual_msg = self._array()
        self._thresholds_sent = False
        self._send_thresholds()
        self.get_logger().info(
            f"monitoring {len(self.joint_names)} joints of {model.source or 'the model'}"
            + (f" with {result}" if result else "") + f", observer gain {self._get('gain'):g} 1/s, "
            + ("thresholds " + _nm(self.monitor.thresholds.values) if given
               else f"thresholds from the first {self._get('calibration_time'):g} s"))
        self._setup = BackgroundSetUp(self.get_logger(), self.monitor.prepare)  # kernels after the ready line

    def destroy_node(self) -> None:
        if hasattr(self, "_setup"):
            self._setup.close()
        super().destroy_node()

    def _get(self, name: str):
        return parameter_value(self, name)

    def _refuse_changes(self, params) -> SetParametersResult:
        mine = {name for name, _, _ in PARAMETERS}
        for prm in params:
            if prm.name in mine:
                return SetParametersResult(successful=False, reason=f"{prm.name} is read at start: "
                                           "restart the node to change it")
        return SetParametersResult(successful=True)

    def _array(self) -> Float64MultiArray:
        msg = Float64MultiArray()
        msg.layout.dim = [MultiArrayDimension(label=",".join(self.joint_names), size=len(self.joint_names),
                                              stride=len(self.joint_names))]
        return msg

    def _send_thresholds(self) -> None:
        thresholds = self.monitor.thresholds
        if thresholds is None or self._thresholds_sent:
            return
        msg = self._array()
        msg.data = thresholds.values.tolist()
        self._thresholds.publish(msg)
        self._thresholds_sent = True
        if math.isfinite(thresholds.rms[0]):
            self.get_logger().info(f"calibrated over {thresholds.samples} samples: thresholds "
                                   f"{_nm(thresholds.values)} (residual rms {_nm(thresholds.rms)})")

    # --------------------------------------------------------------------------- callbacks
    def _reject(self, why: str) -> None:
        self.counters["rejected"] += 1
        self.get_logger().warning(f"joint state ignored ({self.counters['rejected']} so far): {why}",
                                  throttle_duration_sec=2.0)

    def _on_joint_state(self, msg: JointState) -> None:
        """Through the core's stream policy (stamps, columns, torque map) to the monitor."""
        batch = self._stream.batch([joint_message(msg, self.get_clock().now().nanoseconds)])
        for why in batch.refused:
            self._reject(why)
        for k in range(len(batch)):
            self._update(int(batch.ns[k]), batch.q[k], batch.dq[k], batch.tau[k])
        progress = self._stream.progress_ns
        if progress >= 0:
            self._progress.publish(_time(progress))

    def _update(self, ns: int, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> None:
        """One sample at data time ``ns`` [ns]: the observer, then residual, events, thresholds."""
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(dq)) and np.all(np.isfinite(tau))):
            self._reject("non-finite position, velocity or effort")
            return
        t = ns // 1_000_000_000 + 1e-9 * (ns % 1_000_000_000)  # as the stamp's sec + 1e-9·nanosec
        restarts = self.monitor.observer.restarts
        try:
            residual, events = self.monitor.update(t, q, dq, tau)
        except SysIdError as exc:
            self._reject(str(exc))
            return
        if self.monitor.observer.restarts > restarts:
            self.get_logger().warning(
                f"t = {t:.6f} s: a gap longer than 1/gain = {1.0 / self.monitor.observer.gain:g} s restarted "
                f"the observer ({self.monitor.observer.restarts} so far; lost samples?)",
                throttle_duration_sec=2.0)
        if self._publish_residual:
            self._residual_msg.data = residual.tolist()
            self._residual.publish(self._residual_msg)
        if events:
            self._publish_events(_time(ns), events)
        self._send_thresholds()

    def _publish_events(self, stamp, events: list[ContactEvent]) -> None:
        out = DiagnosticArray()
        out.header.stamp = stamp
        for event in events:
            if event.kind == "contact":
                self.counters["contacts"] += 1
                self.get_logger().warning(event.describe())
            out.status.append(DiagnosticStatus(
                level=_LEVEL[event.kind], name=f"collision_monitor: {event.joint}", message=event.kind,
                values=[KeyValue(key=k, value=str(v)) for k, v in event.as_dict().items() if k != "kind"]))
        self._events.publish(out)


def _time(ns: int) -> Time:
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _nm(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "] N·m"


def main(args=None) -> None:
    spin(CollisionMonitorNode, SingleThreadedExecutor, args)


if __name__ == "__main__":
    main()
