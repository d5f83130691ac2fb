"""Node ``recorder``: configured topics into a rosbag2 bag (MCAP by default) with ``rosbags``.

For machines without ``ros2 bag record`` (on a ROS install that is an equally valid choice).
Topic types are discovered from the ROS graph (a topic is subscribed as soon as a publisher
appears); messages are stored as they come off the wire (raw CDR, no deserialisation), stamped
with the node's clock (simulated time under ``use_sim_time``). The bag is written under a
temporary name and renamed into place when recording stops (service ``~/stop``, shutdown or
SIGINT), so a half-written bag never carries the final name; ``ros2 bag info`` reads it.
"""

from __future__ import annotations

import functools
import importlib
import threading
import time
from datetime import datetime
from pathlib import Path

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from std_srvs.srv import Trigger

from sysid_ros.core.data.bag import BagRecording
from sysid_ros.core.errors import DataError
from sysid_ros.nodes import spin
from sysid_ros.nodes.parameters import declare_parameters, parameter_value

PARAMETERS = (
    ("output", "", "bag directory to write ('' = sysid_bags/run_<date-time>)"),
    ("topics", ["/joint_states", "/motor_command", "/sim/true_parameters"], "topics to record"),
    ("types", Parameter.Type.STRING_ARRAY,
     "message type per topic, e.g. sensor_msgs/msg/JointState: subscribed at start ('' or unset = "
     "discovered from the graph once a publisher appears)"),
    ("latched_topics", ["/sim/true_parameters"], "declared topics recorded with TRANSIENT_LOCAL durability"),
    ("storage", "mcap", "mcap | sqlite3"),
    ("discovery_period", 0.2, "how often the graph is checked for the topics' publishers [s]"),
)


def message_class(type_name: str):
    """The Python class of a ROS message type ``pkg/msg/Name``."""
    pkg, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def _message_class_or_error(type_name: str):
    try:
        return message_class(type_name)
    except (ValueError, ImportError, AttributeError):
        raise DataError(f"types: {type_name!r} is not an importable message type "
                        "(expected e.g. sensor_msgs/msg/JointState)") from None


class RecorderNode(Node):
    """Records raw messages of the configured topics into a :class:`BagRecording`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("recorder", **kwargs)
        declare_parameters(self, PARAMETERS)
        output = self._get("output") or f"sysid_bags/run_{datetime.now():%Y%m%d_%H%M%S}"
        storage = self._get("storage")
        if storage not in ("mcap", "sqlite3"):
            raise DataError(f"storage must be 'mcap' or 'sqlite3', got {storage!r}")
        self._wanted = [t for t in self._get("topics") if t]
        types = parameter_value(self, "types") or []
        if types and len(types) != len(self._wanted):
            raise DataError(f"types: expected one per topic ({len(self._wanted)}: {self._wanted}), "
                            f"got {len(types)}")
        declared = {topic: kind for topic, kind in zip(self._wanted, types, strict=False) if kind}
        classes = {topic: _message_class_or_error(kind) for topic, kind in declared.items()}
        self._lock = threading.Lock()
        self._last_ns = 0
        self._recorded: dict[str, object] = {}
        self.bag = BagRecording(Path(output).expanduser(), storage=storage)
        try:  # declared topics: subscribed now, so nothing published from the start is missed
            latched = set(self._get("latched_topics"))
            for topic, kind in declared.items():
                self.bag.add_topic(topic, kind)
                qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL if topic in latched
                                 else DurabilityPolicy.VOLATILE)
                self._subscribe(topic, classes[topic], qos)
        except BaseException:
            self.bag.abort()  # nothing left behind
            raise
        self._stop_at: int | None = None  # wall time [ns] of a stop request
        self._last_arrival = time.monotonic()
        self._caught_up: set[str] = set()
        # its own group: the messages keep flowing while a stop request waits for the backlog
        self.create_service(Trigger, "~/stop", self._on_stop, callback_group=ReentrantCallbackGroup())
        # graph discovery runs on the wall clock: it must not wait for a simulator's /clock
        self._discovery = self.create_timer(float(self._get("discovery_period")), self._discover,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._discover()
        self.get_logger().info(f"recording {self._wanted} into {self.bag.path} ({storage})")

    def _get(self, name: str):
        return parameter_value(self, name)

    def _discover(self) -> None:
        if self.bag.closed:
            return
        types = dict(self.get_topic_names_and_types())
        for topic in self._wanted:
            if topic in self._recorded or topic not in types:
                continue
            if not self.get_publishers_info_by_topic(topic):
                continue  # only subscribers so far: wait for a publisher to match its QoS (latched)
            type_name = types[topic][0]
            try:
                cls = message_class(type_name)
                with self._lock:
                    self.bag.add_topic(topic, type_name)
            except (DataError, ImportError, AttributeError, ValueError) as exc:
                self.get_logger().error(f"not recording {topic}: {exc}")
                self._recorded[topic] = None
                continue
            self._subscribe(topic, cls, self._qos_for(topic))
            self.get_logger().info(f"recording {topic} ({type_name})")

    def _subscribe(self, topic: str, cls, qos: QoSProfile) -> None:
        # (data, info): rclpy passes the MessageInfo (receive time) to two-argument callbacks
        self._recorded[topic] = self.create_subscription(
            cls, topic, functools.partial(self._on_message, topic), qos, raw=True)

    def _qos_for(self, topic: str) -> QoSProfile:
        """Match the publishers: reliable and/or transient-local only if every publisher is."""
        infos = self.get_publishers_info_by_topic(topic)
        reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
        latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                                      for i in infos)
        rel = ReliabilityPolicy
        dur = DurabilityPolicy
        return QoSProfile(depth=1000, reliability=rel.RELIABLE if reliable else rel.BEST_EFFORT,
                          durability=dur.TRANSIENT_LOCAL if latched else dur.VOLATILE)

    def _on_message(self, topic: str, data: bytes, info) -> None:
        self._last_arrival = time.monotonic()
        if self._stop_at is not None and info["received_timestamp"] >= self._stop_at:
            self._caught_up.add(topic)  # received after the stop request: not part of the bag
            return
        with self._lock:
            if not self.bag.closed:
                # log times never go back and never tie: readers order a bag by log time, and on
                # simulated time everything received before the first /clock would log at 0
                self._last_ns = max(self.get_clock().now().nanoseconds, self._last_ns + 1)
                self.bag.write(topic, self._last_ns, data)

    def finish(self) -> Path | None:
        """Close the bag (idempotent). Returns its path, ``None`` if nothing was recorded."""
        with self._lock:
            if self.bag.closed:
                return self.bag.path if self.bag.path.exists() else None
            if not any(self.bag.counts.values()):
                self.bag.abort()
                self.get_logger().warning(f"nothing was recorded: no bag written at {self.bag.path}")
                return None
            path = self.bag.close()
        counts = ", ".join(f"{t}: {n}" for t, n in self.bag.counts.items())
        self.get_logger().info(f"bag finished: {path} ({counts})")
        return path

    async def _on_stop(self, _request, response):
        """Record what was received before the request (the queues may lag behind), then close."""
        if self._stop_at is None:
            self._stop_at = time.time_ns()  # the clock of MessageInfo's received_timestamp
        done = Future(executor=self.executor)
        done.add_done_callback(lambda _f: None)  # wakes the executor when set
        started = time.monotonic()
        streams = {t for t, n in self.bag.counts.items() if n > 1}  # not the latched one-offs

        def check() -> None:
            idle = time.monotonic() - self._last_arrival > 0.3
            if done.done() or not (streams <= self._caught_up or idle or time.monotonic() - started > 10.0):
                return
            timer.cancel()
            done.set_result(True)

        timer = self.create_timer(0.02, check, clock=Clock(clock_type=ClockType.STEADY_TIME))
        await done
        self.destroy_timer(timer)
        path = self.finish()
        response.success = path is not None
        response.message = str(path) if path is not None else "nothing was recorded"
        return response

    def destroy_node(self):
        self.finish()
        return super().destroy_node()


def main(args=None) -> None:
    spin(RecorderNode, SingleThreadedExecutor, args=args)


if __name__ == "__main__":
    main()
