"""Node ``recorder``: configured topics into a rosbag2 bag (MCAP by default) with ``rosbags``.

For machines without ``ros2 bag record`` (on a ROS install that is an equally valid choice).
Topic types are discovered from the ROS graph (a topic is subscribed as soon as a publisher
appears); messages are stored as they come off the wire (raw CDR, no deserialisation), stamped
with the node's clock (simulated time under ``use_sim_time``). The bag is written under a
temporary name and renamed into place when recording stops (service ``~/stop``, shutdown or
SIGINT), so a half-written bag never carries the final name; ``ros2 bag info`` reads it.

Lossless: subscriptions keep all messages (reliable where the publishers are); the subscription
callback only queues ``(topic, log time, bytes)`` and a writer thread writes the bag, so writing
never stalls reception. Losses it can see are counted per topic: DDS "message lost" events and
gaps in the header stamps of stamped streams (the one gap rule,
:class:`~sysid_ros.core.data.stream_time.GapTracker`); both
go into the bag's metadata (``sysid_ros.lost.<topic>``, ``sysid_ros.gaps.<topic>``), one line
per topic at stop, a WARNING and ``~/stop``'s message if anything was lost.

Start-up: the bag file is opened, and the declared topics' connections are made (the rosbags type
store: ~0.6 s of CPU), by the writer thread once the node is ready; messages received meanwhile are
queued. A declared type the bag's type store does not know ends the node (status 1) with one line
saying which, as a refused start does. A stop before the bag is opened, with nothing received,
makes no file and does not wait for the opening. On SIGINT/SIGTERM (``destroy_node``, the
executor stopped) what DDS had received but the executor not delivered yet is taken and written
too (:meth:`RecorderNode.take_undelivered`): a signal on a busy host can come before the executor
took the first message of a running stream.

``~/progress`` (``builtin_interfaces/Time``) is the header stamp of the newest ``progress_topic``
message that is in the bag file (flushed: it survives ``kill -9``, see ``sysid bag recover``),
published when it advanced by ``progress_period`` of data time and whenever the writer is idle,
for a lockstep simulator (``mujoco_sim`` ``lockstep_wait_for``); once the ``progress_topic``
subscription has matched its publisher the node says so on ``lockstep/ready`` (the simulator's start
handshake, :mod:`~sysid_ros.nodes.lockstep`).
"""

from __future__ import annotations

import functools
import importlib
import math
import queue
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from builtin_interfaces.msg import Time
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from std_srvs.srv import Trigger

from sysid_ros.core.data.bag import BagRecording, header_stamp_ns, typestore
from sysid_ros.core.data.effort_timing import BAG_KEY as EFFORT_LAG_BAG_KEY
from sysid_ros.core.data.effort_timing import check_effort_lag
from sysid_ros.core.data.stream_time import GapTracker
from sysid_ros.core.errors import DataError
from sysid_ros.core.output_paths import check_file
from sysid_ros.nodes import spin
from sysid_ros.nodes.intake import take_pending
from sysid_ros.nodes.lockstep import ReadySignal
from sysid_ros.nodes.parameters import declare_parameters, parameter_value
from sysid_ros.nodes.qos import PROGRESS

PARAMETERS = (
    ("output", "", "bag directory to write ('' = sysid_bags/run_<date-time>)"),
    ("topics", ["joint_states", "motor_command", "sim/true_parameters", "estimator/markers"],
     "topics to record (relative names resolve in the node's namespace)"),
    ("types", Parameter.Type.STRING_ARRAY,
     "message type per topic, e.g. sensor_msgs/msg/JointState: subscribed at start ('' or unset = "
     "discovered from the graph once a publisher appears)"),
    ("latched_topics", ["sim/true_parameters", "estimator/markers"],
     "declared topics recorded with TRANSIENT_LOCAL durability"),
    ("storage", "mcap", "mcap | sqlite3"),
    ("discovery_period", 0.2, "how often the graph is checked for the topics' publishers [s]"),
    ("progress_topic", "joint_states", "stamped topic whose recorded data time ~/progress publishes"),
    ("progress_period", 0.01, "~/progress: publish when the data time advanced this much [s]"),
    ("effort_lag", math.nan,
     "how late the joint states' effort is [sample periods] (0.5: the Damiao bridge), written into "
     "the bag's metadata for `sysid identify` (NaN: not stated)"),
)
_END = object()  # ends the writer thread once the queue before it is written
#: messages of one topic taken per executor wake-up at most (the others' turn comes after)
PENDING_PER_WAKEUP = 1000


class TopicStats:
    """What happened to one topic's messages: received, written, lost (DDS events), gaps."""

    def __init__(self, stamped: bool) -> None:
        self.received = 0
        self.written = 0
        self.lost = 0
        self.gaps = GapTracker() if stamped else None

    @property
    def missing(self) -> int:
        return self.lost + (self.gaps.missing if self.gaps is not None else 0)

    def line(self, topic: str) -> str:
        gaps = f", {self.gaps.missing} missing in stamp gaps" if self.gaps is not None else ""
        return f"{topic}: received {self.received}, written {self.written}, lost {self.lost} (DDS){gaps}"


def _stamped(cls) -> bool:
    """Messages of class ``cls`` begin with a ``std_msgs/Header`` (their stamps are checked for gaps)."""
    first = next(iter(cls.get_fields_and_field_types().items()), (None, None))
    return first[1] == "std_msgs/Header"


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
        declare_parameters(self, PARAMETERS, read_only=True)  # all read once, at start
        output = self._get("output") or f"sysid_bags/run_{datetime.now():%Y%m%d_%H%M%S}"
        storage = self._get("storage")
        if storage not in ("mcap", "sqlite3"):
            raise DataError(f"storage must be 'mcap' or 'sqlite3', got {storage!r}")
        # fully qualified (relative names in this node's namespace): the graph's and the bag's names
        self._wanted = [self.resolve_topic_name(t) for t in (self._get("topics") or []) if t]
        if not self._wanted:
            raise DataError("topics: expected at least one topic to record (e.g. ['/joint_states']), "
                            "got none")
        output_path = Path(output).expanduser()
        if output_path.exists():
            raise DataError(f"output {output_path} exists; choose another output or remove it")
        check_file(output_path, "output")  # a writable place, checked before anything is subscribed
        types = parameter_value(self, "types") or []
        if types and len(types) != len(self._wanted):
            raise DataError(f"types: expected one per topic ({len(self._wanted)}: {self._wanted}), "
                            f"got {len(types)}")
        self._progress_topic = self.resolve_topic_name(self._get("progress_topic"))
        self._progress_ns = round(float(self._get("progress_period")) * 1e9)
        lag = float(self._get("effort_lag"))
        self._effort_lag = None if math.isnan(lag) else check_effort_lag(lag)
        declared = {topic: kind for topic, kind in zip(self._wanted, types, strict=False) if kind}
        classes = {topic: _message_class_or_error(kind) for topic, kind in declared.items()}
        self._lock = threading.Lock()  # the bag (writer thread, discovery, finish) and the stats
        self._last_ns = 0
        self._recorded: dict[str, object] = {}
        self._stats: dict[str, TopicStats] = {}
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._progress = self.create_publisher(Time, "~/progress", PROGRESS)
        #: the bag, opened by the writer thread (None until then, and if it could not be)
        self.bag: BagRecording | None = None
        self._bag_path, self._storage, self._declared = output_path.absolute(), storage, declared
        self._failed = self.create_guard_condition(self._raise_failure)  # its failure, to spin()
        self._failure: DataError | None = None
        self._abandoned = False  # stopped before the bag was opened, nothing received: none is made
        # declared topics: subscribed now, so nothing published from the start is missed (queued
        # until the writer thread has opened the bag)
        latched = {self.resolve_topic_name(t) for t in self._get("latched_topics") if t}
        for topic in declared:
            self._stats[topic] = TopicStats(_stamped(classes[topic]))
            qos = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL if topic in latched
                             else DurabilityPolicy.VOLATILE)
            self._subscribe(topic, classes[topic], qos)
        self._stop_at: int | None = None  # wall time [ns] of a stop request
        self._last_arrival = time.monotonic()
        self._caught_up: set[str] = set()
        self._writer = threading.Thread(target=self._write_loop, name="bag writer", daemon=True)
        # its own group: the messages keep flowing while a stop request waits for the backlog
        self.create_service(Trigger, "~/stop", self._on_stop, callback_group=ReentrantCallbackGroup())
        # graph discovery runs on the wall clock: it must not wait for a simulator's /clock
        self._discovery = self.create_timer(float(self._get("discovery_period")), self._discover,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._discover()
        # lockstep start: once the progress topic's subscription (declared or discovered) has matched
        self._ready = ReadySignal(self, serves=self._progress.topic_name,
                                  states=lambda: self._recorded.get(self._progress_topic))
        self.get_logger().info(f"recording {self._wanted} into {self._bag_path} ({storage})")
        self._writer.start()  # (after the line: opening the bag is its first job)

    def _get(self, name: str):
        return parameter_value(self, name)

    def _open(self) -> bool:
        """The writer thread's start: the bag opened and the declared topics' connections made
        (False if the recording was abandoned meanwhile, or, the failure handed to the executor,
        if that cannot be done). The slow part (the type store and the writer's import) runs
        before any file exists, so a stop meanwhile (:meth:`_finish`) needs no wait for it."""
        try:
            typestore()
            import rosbags.rosbag2  # noqa: F401  (BagRecording's writer)

            with self._lock:  # (milliseconds from here)
                if self._abandoned:
                    return False
                bag = BagRecording(self._bag_path, storage=self._storage)
                try:
                    for topic, kind in self._declared.items():
                        bag.add_topic(topic, kind)
                    if self._effort_lag is not None:  # from the start: a killed recording recovers it
                        bag.set_metadata(EFFORT_LAG_BAG_KEY, repr(self._effort_lag))
                except BaseException:
                    bag.abort()  # nothing left behind
                    raise
                self.bag = bag
            return True
        except (DataError, OSError) as exc:
            self._failure = (exc if isinstance(exc, DataError)
                             else DataError(f"cannot write {self._bag_path}: {exc}"))
            self._failed.trigger()
            return False

    def _raise_failure(self) -> None:
        """(executor) The bag could not be opened: the node ends, :func:`spin` says why (status 1)."""
        raise self._failure

    def _add_topic(self, topic: str, type_name: str, cls) -> None:
        with self._lock:
            self.bag.add_topic(topic, type_name)
            self._stats[topic] = TopicStats(_stamped(cls))

    def _discover(self) -> None:
        if self.bag is None or self.bag.closed:  # (not open yet: the next round)
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
                self._add_topic(topic, type_name, cls)
            except (DataError, ImportError, AttributeError, ValueError) as exc:
                self.get_logger().error(f"not recording {topic}: {exc}")
                self._recorded[topic] = None
                continue
            self._subscribe(topic, cls, self._qos_for(topic))
            self.get_logger().info(f"recording {topic} ({type_name})")

    def _subscribe(self, topic: str, cls, qos: QoSProfile) -> None:
        # (data, info): rclpy passes the MessageInfo (receive time) to two-argument callbacks
        events = SubscriptionEventCallbacks(message_lost=functools.partial(self._on_lost, topic))
        self._recorded[topic] = self.create_subscription(
            cls, topic, functools.partial(self._on_message, topic), qos, raw=True,
            event_callbacks=events)

    def _qos_for(self, topic: str) -> QoSProfile:
        """Match the publishers: reliable and/or transient-local only if every publisher is."""
        infos = self.get_publishers_info_by_topic(topic)
        reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
        latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                                      for i in infos)
        rel = ReliabilityPolicy
        dur = DurabilityPolicy
        return QoSProfile(history=HistoryPolicy.KEEP_ALL,
                          reliability=rel.RELIABLE if reliable else rel.BEST_EFFORT,
                          durability=dur.TRANSIENT_LOCAL if latched else dur.VOLATILE)

    def _on_lost(self, topic: str, info) -> None:
        with self._lock:
            self._stats[topic].lost += int(info.total_count_change)
            lost = {t: s.lost for t, s in self._stats.items()}
            if self.bag is not None and not self.bag.closed:
                self.bag.save_state({"lost": lost})  # for `sysid bag recover` after a kill

    def _on_message(self, topic: str, data: bytes, info) -> None:
        """Queue ``data`` and what else the subscription holds now (one executor wake-up for a
        burst: at 500 Hz the executor's per-message cost alone outran a loaded host's share);
        a burst is logged at the time it was taken."""
        if self._abandoned:  # finished before anything came: nothing is recorded any more
            return
        self._last_arrival = time.monotonic()
        subscription = self._recorded.get(topic)
        more = take_pending(subscription, PENDING_PER_WAKEUP, info=True) if subscription is not None else []
        self._queue_received(topic, [(data, info), *more])

    def _queue_received(self, topic: str, taken: list) -> None:
        """Queue ``(payload, MessageInfo)`` pairs of ``topic`` for the writer, counted; those
        received after a stop request are left out (not part of the bag)."""
        now = self.get_clock().now().nanoseconds
        for payload, received in taken:
            if self._stop_at is not None and received["received_timestamp"] >= self._stop_at:
                self._caught_up.add(topic)  # received after the stop request: not part of the bag
                continue
            self._stats[topic].received += 1  # (only this executor thread counts receptions)
            self._queue.put((topic, now, payload))

    def _write_loop(self) -> None:
        if not self._open():
            return
        try:
            self._write_queue()
        except Exception as exc:  # e.g. a full disk: say so (the bag so far stays recoverable)
            self.get_logger().error(f"writing {self.bag.path} failed, recording stopped: {exc!r}")

    def _write_queue(self) -> None:
        """The writer thread: queue → bag; flushes and publishes ~/progress (see the module)."""
        published = None  # progress stamp last published
        newest = None  # newest progress stamp written
        pending = False  # written since the last flush
        while True:
            try:
                item = self._queue.get(timeout=0.005 if pending else 0.1)
            except queue.Empty:
                item = None
            if item is _END:
                break
            if item is not None:
                topic, ns, data = item
                stamp = self._write(topic, ns, data)
                pending = True
                if stamp is not None and topic == self._progress_topic:
                    newest = stamp if newest is None else max(newest, stamp)
                due = newest is not None and (published is None or newest - published >= self._progress_ns)
                if not due:
                    continue
            elif not pending:
                continue
            with self._lock:  # idle, or the progress is due: into the file, then say so
                if self.bag.closed:
                    break
                self.bag.flush()
            pending = False
            if newest is not None and newest != published:
                published = newest
                self._publish_progress(newest)

    def _write(self, topic: str, ns: int, data: bytes) -> int | None:
        """One message into the bag; returns its header stamp (stamped topics)."""
        with self._lock:
            stats = self._stats[topic]
            if self.bag.closed:
                return None
            # log times never go back and never tie: readers order a bag by log time, and on
            # simulated time everything received before the first /clock would log at 0
            self._last_ns = max(ns, self._last_ns + 1)
            self.bag.write(topic, self._last_ns, data)
            stats.written += 1
            if stats.gaps is None:
                return None
            stamp = header_stamp_ns(data)
            if stamp is not None:
                stats.gaps.add(stamp)
            return stamp

    def _publish_progress(self, stamp: int) -> None:
        try:
            self._progress.publish(Time(sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000))
        except Exception:  # the context is shutting down: nobody is waiting any more
            pass

    def finish(self) -> Path | None:
        """Write what is queued, then close the bag (idempotent). Returns its path, ``None`` if
        nothing was recorded. A Ctrl-C cannot cut it short: the bag is finished in a thread of its
        own (signals interrupt only the main thread) and waited for. Under :func:`spin` a signal
        only asks the node to stop; where the node runs under a KeyboardInterrupt-raising handler,
        the interrupt is noted and then ends the node as usual."""
        outcome: dict[str, object] = {}
        done = threading.Event()

        def run() -> None:
            try:
                outcome["path"] = self._finish()
            except BaseException as exc:  # handed to the caller below
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="bag finisher").start()
        interrupted = False
        while not done.is_set():  # (an Event: Thread.join cut short by a signal misreports)
            try:
                done.wait()
            except KeyboardInterrupt:
                interrupted = True
                print("[SIGINT] already stopping: finishing the bag first", file=sys.stderr, flush=True)
        if interrupted and self.context.ok():
            self.context.try_shutdown()  # the interrupt still ends the node
        if "error" in outcome:
            raise outcome["error"]
        return outcome["path"]

    def _finish(self) -> Path | None:
        # stopped before the writer thread opened the bag, with nothing to write: no file is made,
        # and the stop does not wait for the opener (seconds of CPU share on a busy host)
        with self._lock:
            abandon = (not self._abandoned and self.bag is None
                       and not any(s.received for s in self._stats.values()))
            self._abandoned |= abandon
        if abandon:
            self.get_logger().warning(f"nothing was recorded: no bag written at {self._bag_path}")
        if self._abandoned:
            return None
        if self._writer.is_alive():
            self._queue.put(_END)
            self._writer.join()
        with self._lock:
            if self.bag is None:  # it could not be opened (said): nothing to finish
                return None
            if self.bag.closed:
                return self.bag.path if self.bag.path.exists() else None
            if not any(self.bag.counts.values()):
                self.bag.abort()
                self.get_logger().warning(f"nothing was recorded: no bag written at {self.bag.path}")
                return None
            self.get_logger().info(f"finishing bag {self.bag.path}")
            for topic, stats in self._stats.items():
                self.bag.set_metadata(f"sysid_ros.lost.{topic}", str(stats.lost))
                if stats.gaps is not None:
                    self.bag.set_metadata(f"sysid_ros.gaps.{topic}", str(stats.gaps.missing))
            path = self.bag.close()
        counts = ", ".join(f"{t}: {n}" for t, n in self.bag.counts.items())
        self.get_logger().info(f"bag finished: {path} ({counts})")
        for topic, stats in self._stats.items():
            self.get_logger().info(stats.line(topic))
        lost = self.losses()
        if lost:
            self.get_logger().warning(f"the recording lost data: {lost}")
        return path

    def losses(self) -> str:
        """'' if nothing was seen lost, else what was lost per topic."""
        return "; ".join(f"{t}: {s.lost} lost (DDS), {s.gaps.missing if s.gaps else 0} missing in "
                         "stamp gaps" for t, s in self._stats.items() if s.missing)

    async def _on_stop(self, _request, response):
        """Record what was received before the request (the queues may lag behind), then close."""
        if self._stop_at is None:
            self._stop_at = time.time_ns()  # the clock of MessageInfo's received_timestamp
        done = Future(executor=self.executor)
        done.add_done_callback(lambda _f: None)  # wakes the executor when set
        started = time.monotonic()
        streams = {t for t, n in self._stats.items() if n.received > 1}  # not the latched one-offs

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
        lost = self.losses()
        response.message = (str(path) if path is not None else "nothing was recorded") + (
            f"; LOST DATA: {lost}" if lost else "")
        return response

    def take_undelivered(self) -> int:
        """Queue what the subscriptions received but the executor has not delivered yet (a signal
        on a busy host can come while DDS holds states the executor never got to); only while no
        executor spins this node (``destroy_node``'s path: :func:`~sysid_ros.nodes.spin` has
        stopped it). Returns how many were queued."""
        if self._abandoned:
            return 0
        queued = 0
        for topic, subscription in list(self._recorded.items()):
            while taken := take_pending(subscription, PENDING_PER_WAKEUP, info=True):
                self._queue_received(topic, taken)
                queued += len(taken)
        return queued

    def destroy_node(self):
        if hasattr(self, "_writer"):  # (a node refused while starting has no bag to finish)
            if not self._writer_finished():
                self.take_undelivered()
            self.finish()
        return super().destroy_node()

    def _writer_finished(self) -> bool:
        return self.bag is not None and self.bag.closed


def main(args=None) -> None:
    spin(RecorderNode, SingleThreadedExecutor, args=args)  # (late signals are ignored from there on)


if __name__ == "__main__":
    main()
