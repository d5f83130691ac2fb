"""Node ``estimator``: online identification from live joint states.

A thin facade over :class:`sysid_ros.core.online.session.OnlineSession` (the same session, with
the same options, as ``sysid identify --method rls|rls_logdet|momentum|ekf|mhe``). Subscribes to
``sensor_msgs/JointState`` (effort = measured torque) with a KEEP_ALL history; the executor never
wakes for it: a timer on the steady clock (so it runs whatever ``/clock`` does) takes what the
subscription holds (``nodes/intake.py``) and hands the queue to the session in one batch, so a
burst is processed whole (its rows folded in one product, one solve at its end: the session's
``solve_per_batch``; the further behind, the cheaper a sample). Every loss the node can see is
counted and reported in throttled warnings, in ``~/save`` and in the log at exit: messages DDS reports
lost (``rejected_lost``), queue overflows beyond ``max_queue`` (``rejected_dropped``), messages
naming other joints (``rejected_names``), samples missing between stamps (``missing``: a step of
``k`` periods misses ``k − 1``), NaN, stale and out-of-order samples. Stationary samples (every
joint slower than 0.01 rad/s) add no row (``stationary_cut``, counted ``stationary``).

Time: an estimate is stamped with the data time (header stamp) of the last sample folded into it,
so "the estimate covering t" can be waited for. The stream's rules (stamps, names, torque map)
are the core's :class:`~sysid_ros.core.online.stream.JointStream`. A stamp of 0 is a valid time; a
driver that does not stamp at all is told apart by the stream's first two messages: a first
message stamped 0 is held until the second arrives; if that one is stamped 0 too, every message
of the stream (the first included) gets the time it was received (node clock), with a warning,
otherwise 0 is the first sample's time. After each batch ``~/progress``
(``builtin_interfaces/Time``, the data time of the newest sample processed; what a lockstep
``mujoco_sim`` waits for) is published; with each estimate ``~/lag`` (``std_msgs/Float64``,
[s]): node clock minus the estimate's stamp. Once the ``joint_states`` subscription has matched, the
node says so on ``lockstep/ready`` (a lockstep simulator's start handshake,
:mod:`~sysid_ros.nodes.lockstep`).

Start-up: the constructor builds the target (base parameters from their disk cache when computed
before) and the session without loading a compiled kernel; the kernels the first samples need are
set up in a thread of its own from then on (``ready to process`` in the log, ~1-1.5 s of CPU), and
samples that arrive meanwhile are queued and processed as soon as it is done.

Parameters changed at run time apply at once: session options and the model rebuild the session
(the estimate restarts from its prior, said in the log), rates re-create their timers;
``reliable_input`` (the subscription's QoS) is read-only (set at start). Services ``~/reset`` and
``~/save`` (``result.json`` through ``ResultFile``, the batch schema, and the MJCF).

Topics are relative names, set by remapping (``-r joint_states:=/arm/joint_states``): subscribes
``joint_states`` and ``sim/true_parameters`` (latched truth from a simulator, for scoring),
publishes ``~/estimate``, ``~/progress`` and ``~/lag``.

ros2_control arms: ``joint_states`` from ``joint_state_broadcaster`` are taken as they are (names
in any order, effort as joint torque); a driver that publishes motor currents is converted with
``torque_scale`` and ``torque_offset`` (τ = scale · effort + offset, per joint or one for all).
With each estimate ``~/precision`` (``sysid_ros/Precision``, latched: the relative standard
deviation of each identified direction, :mod:`~sysid_ros.core.online.precision`) is published;
what ``trajectory_publisher``'s ``until_precision`` waits for. A payload target publishes its
estimate as ``geometry_msgs/Inertia`` (mass, CoM in the payload body's frame, inertia about the
CoM) on the latched ``~/payload`` once every required direction reaches ``payload_precision``;
service ``~/commit_payload`` (``std_srvs/Trigger``) publishes the current one on demand.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from datetime import datetime
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Inertia
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from std_srvs.srv import Trigger

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import joint_terms
from sysid_ros.core.model.target import Target, arm_target, payload_target
from sysid_ros.core.online.publication import Publication, publication
from sysid_ros.core.online.session import (
    OPTION_HELP,
    OnlineOptions,
    OnlineSession,
    StreamEvent,
)
from sysid_ros.core.online.stream import JointStream, load_prior
from sysid_ros.core.result_file import ResultFile
from sysid_ros.msg import ParameterEstimate, Precision
from sysid_ros.nodes import spin
from sysid_ros.nodes.background_setup import BackgroundSetUp
from sysid_ros.nodes.conversions import joint_message, to_estimate_msg, to_inertia_msg, to_precision_msg
from sysid_ros.nodes.effort import TORQUE_PARAMETERS, torque_map
from sysid_ros.nodes.intake import PolledGroup, take_pending
from sysid_ros.nodes.lockstep import ReadySignal
from sysid_ros.nodes.markers import MARKER_PARAMETERS, InertiaMarkerPublisher, check_markers_frame
from sysid_ros.nodes.parameters import declare_parameters, parameter_value, requested_value
from sysid_ros.nodes.qos import LATCHED, PROGRESS
from sysid_ros.nodes.robot_model import MODEL_PARAMETER_NAMES, MODEL_PARAMETERS, RobotModelSource

#: the session's options, named, defaulted and described as in the core (and the CLI)
SESSION_PARAMETERS = tuple((name, getattr(OnlineOptions(), name), OPTION_HELP[name])
                           for name in OnlineOptions.names())
NODE_PARAMETERS = (
    *MODEL_PARAMETERS,
    ("target", "arm", "'arm' for every parameter, or a body name for a payload on that body"),
    ("friction", "", "arm target: comma list of coulomb, viscous, offset, stribeck, sigmoid (its "
                     "shapes from the model's sigmoid:<joint> numerics, not searched online)"),
    ("stribeck_velocity", 0.0, "arm target with stribeck: its velocity qs [rad/s] (0: the model's "
                               "stribeck:<joint> numerics, else 0.1; online estimators do not search it)"),
    ("armature", False, "arm target: identify rotor inertia per joint"),
    ("prior", "nominal", "'nominal' (the MJCF), 'uninformative' (payload) or a result.json path"),
    ("publish_rate", 10.0, "estimate publication rate [Hz]"),
    ("process_rate", 25.0, "batch processing rate [Hz] (each wake-up costs ~0.5-1 ms of executor: "
                           "larger batches cost less per sample)"),
    ("max_queue", 20000, "queued samples before the oldest are reported and dropped"),
    ("stop_budget", 0.5, "[s of wall time] a backlog left at a stop request is worked off this long at "
                         "most, the rest counted as unprocessed (launch escalates to SIGTERM after 5 s)"),
    ("reliable_input", False, "RELIABLE joint states (simulation, bag replay) instead of best effort "
                              "(set at start)"),
    ("output_dir", "sysid_estimates", "where ~/save writes"),
    *TORQUE_PARAMETERS,
    ("payload_precision", 0.02,
     "payload target: ~/payload is published once every required direction's relative std is at "
     "or below this (0 = only on ~/commit_payload)"),
    ("precision_inertia", False,
     "payload target: the inertia about the CoM is required too (Franka setLoad), not only mass and "
     "CoM (UR set_payload)"),
    *MARKER_PARAMETERS,
    ("markers_rate", 1.0, "~/markers publication rate [Hz] (0: none); each array is the latest estimate's"),
)
PARAMETERS = SESSION_PARAMETERS + NODE_PARAMETERS
#: what a change of each parameter at run time does (session options: rebuild the session)
_REBUILD = {*OnlineOptions.names(), *MODEL_PARAMETER_NAMES, "target", "friction", "armature", "prior",
            "stribeck_velocity"}
_TIMERS = {"publish_rate", "process_rate", "markers_rate"}
_AT_START = {"reliable_input"}
#: log line of each kind of rejection (the counter is appended)
_TEXT = {
    "nan": lambda e: "non-finite joint state rejected",
    "stale": lambda e: f"stale or out-of-order joint state at t={e.t:.6f} s rejected ({e.detail})",
    "gap": lambda e: f"{e.detail} before t={e.t:.6f} s: filters restarted",
    "update": lambda e: f"{e.count} update(s) rejected, the last at t={e.t:.4f} s: {e.detail}",
}


class EstimatorNode(Node):
    """Thin ROS facade over :class:`sysid_ros.core.online.session.OnlineSession`."""

    #: [s] a callback (planning, a backlog batch) still running this long after a stop request is
    #: left unfinished: nothing of this node's needs finishing, and launch escalates after 5 s
    STOP_GRACE = 1.0
    #: [s of data at the nominal rate] most samples one processing step takes from a backlog
    CHUNK = 0.5
    #: [Hz] the joint states the subscription holds are queued this often (and by every processing
    #: step): the executor does not wake for each message
    INTAKE_RATE = 25.0

    def __init__(self, **kwargs) -> None:
        super().__init__("estimator", **kwargs)
        declare_parameters(self, PARAMETERS, read_only=_AT_START)
        self._lock = threading.Lock()
        self._queue: deque = deque()  # (JointState, receive time [ns] on the node clock)
        self._taken = 0  # messages off the queue in a processing step not finished yet (see backlog)
        self._reported: dict[str, float] = {}
        self._truth: dict[str, float] | None = None  # the simulator's true parameters, by name
        self._stream: JointStream | None = None  # stamps, columns, torque map (core: one policy)
        self._models = RobotModelSource(self)
        self._max_queue = int(self._get("max_queue"))  # (read per message: kept, set on change)
        self._build()
        self.add_on_set_parameters_callback(self._validate)
        self.add_post_set_parameters_callback(self._apply)
        self._io_group, self._work_group = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        reliability = (ReliabilityPolicy.RELIABLE if self._get("reliable_input")
                       else ReliabilityPolicy.BEST_EFFORT)  # best effort matches any publisher
        # the processing timer takes the joint states (PolledGroup: no executor wake-up per
        # message; ~0.5 ms each was most of this node's CPU at 250-500 Hz when it kept up)
        self._polled = PolledGroup.supported()
        self._states = self.create_subscription(
            JointState, "joint_states", self._on_joint_state,
            QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=reliability),
            callback_group=PolledGroup() if self._polled else self._io_group,
            event_callbacks=SubscriptionEventCallbacks(message_lost=self._on_lost))
        self.create_subscription(ParameterEstimate, "sim/true_parameters", self._on_truth,
                                 LATCHED, callback_group=self._io_group)
        self._publisher = self.create_publisher(ParameterEstimate, "~/estimate", LATCHED)
        self._precision_pub = self.create_publisher(Precision, "~/precision", LATCHED)
        self._payload_pub = self.create_publisher(Inertia, "~/payload", LATCHED)
        self._progress = self.create_publisher(Time, "~/progress", PROGRESS)
        # a lockstep simulator's start handshake
        self._ready = ReadySignal(self, serves=self._progress.topic_name, states=self._states)
        self._lag = self.create_publisher(Float64, "~/lag", LATCHED)
        self._markers = InertiaMarkerPublisher(self)
        self._last_q: np.ndarray | None = None  # joint positions of the newest sample (markers_frame base)
        self._last_estimate: ParameterEstimate | None = None  # the newest published (for ~/markers)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._rate_timers: dict[str, object] = {}
        self._start_timers()
        if self._polled:  # the queue is filled (and held at max_queue) however slowly it is processed
            self.create_timer(1.0 / self.INTAKE_RATE, self._intake, callback_group=self._io_group,
                              clock=self._steady)
        self.create_service(Trigger, "~/reset", self._on_reset, callback_group=self._work_group)
        self.create_service(Trigger, "~/save", self._on_save, callback_group=self._work_group)
        self.create_service(Trigger, "~/commit_payload", self._on_commit_payload,
                            callback_group=self._work_group)
        self._announce()
        self._setup = BackgroundSetUp(self.get_logger(), self.session.prepare)  # kernels after the ready line

    @property
    def backlog(self) -> int:
        """Joint states received and not processed yet: queued, or taken off the queue by a
        processing step that has not finished (0 only once the session holds every one)."""
        return len(self._queue) + self._taken

    def destroy_node(self) -> None:
        """Process what is queued (for ``stop_budget`` s at most), then say what the session saw
        (and lost, and left unprocessed) before leaving."""
        if hasattr(self, "_setup"):
            self._setup.close()
        if not hasattr(self, "session"):  # refused while starting (its one line is said): nothing ran
            return super().destroy_node()
        try:
            chunk = max(int(self.CHUNK * self.options.sample_rate), 1)
            # behind by thousands of samples on a busy host, finishing them all took past launch's
            # SIGTERM and SIGKILL (exit -9): stop_budget [s] at most, the rest counted
            budget = float(self._get("stop_budget"))
            deadline = time.monotonic() + budget
            while len(self._queue) > chunk and time.monotonic() < deadline:
                self._process(intake=False)  # one chunk of the backlog
            left = len(self._queue) if len(self._queue) > chunk else 0
            if not left:
                self._process(final=True)
            self.get_logger().info("estimator stopping: " + ", ".join(
                f"{k} {v}" for k, v in {**self.session.counters, "unprocessed": left}.items()))
            if left:
                self.get_logger().warning(f"{left} queued samples left unprocessed: the backlog is worked "
                                          f"off {budget:g} s at most after a stop request (stop_budget)")
        except Exception as exc:
            self.get_logger().error(f"could not process the last samples: {exc}")
        super().destroy_node()

    # ------------------------------------------------------------------------------ set-up
    def _get(self, name: str):
        return parameter_value(self, name)

    def _announce(self) -> None:
        topic = self.resolve_topic_name("joint_states")
        self.get_logger().info(f"estimating {self.target.kind} parameters ({self.target.n_params}) "
                               f"with {self.options.method} on {topic} (low-pass "
                               f"{self.options.effective_cutoff:g} Hz at {self.options.sample_rate:g} Hz)")

    def _start_timers(self) -> None:
        """The processing and publication timers, on the steady clock: they run whatever
        ``/clock`` does (a lockstep simulator waits for this node's progress)."""
        for timer in self._rate_timers.values():
            self.destroy_timer(timer)
        self._rate_timers = {
            "process_rate": self.create_timer(1.0 / float(self._get("process_rate")), self._process,
                                              callback_group=self._work_group, clock=self._steady),
            "publish_rate": self.create_timer(1.0 / float(self._get("publish_rate")), self._publish,
                                              callback_group=self._work_group, clock=self._steady)}
        if float(self._get("markers_rate")) > 0:
            self._rate_timers["markers_rate"] = self.create_timer(
                1.0 / float(self._get("markers_rate")), self._publish_markers,
                callback_group=self._work_group, clock=self._steady)

    def _validate(self, params) -> SetParametersResult:
        """A change is refused unless the session it describes can be built (the options are
        checked by :class:`OnlineOptions`, the model by loading it)."""
        requested = {p.name: requested_value(self, p) for p in params}
        if set(requested) & _REBUILD:
            try:
                self._target_and_options(lambda name: requested.get(name, self._get(name)))
            except (SysIdError, TypeError, KeyError, ValueError, OSError) as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        for prm in params:
            value = requested_value(self, prm)
            if prm.name in ("torque_scale", "torque_offset"):
                try:
                    torque_map(lambda name, p=prm, v=value: v if name == p.name else self._get(name),
                               self.joint_names)
                except SysIdError as exc:
                    return SetParametersResult(successful=False, reason=str(exc))
            if prm.name == "payload_precision" and not value >= 0:
                return SetParametersResult(successful=False,
                                           reason=f"payload_precision must be >= 0, got {value}")
            if prm.name in ("publish_rate", "process_rate", "max_queue") and not value > 0:
                return SetParametersResult(successful=False,
                                           reason=f"{prm.name} must be > 0, got {prm.value}")
            if prm.name == "markers_rate" and not value >= 0:
                return SetParametersResult(successful=False,
                                           reason=f"markers_rate must be >= 0 Hz, got {prm.value}")
            if prm.name == "markers_frame":
                try:
                    check_markers_frame(value)
                except SysIdError as exc:
                    return SetParametersResult(successful=False, reason=str(exc))
            if prm.name in _AT_START and value != self._get(prm.name):
                return SetParametersResult(successful=False, reason=(
                    f"{prm.name} is set at start (it chooses the subscription's QoS); restart the node"))
        return SetParametersResult(successful=True)

    def _apply(self, params) -> None:
        """Changes take effect now: a new session (from the prior) or new timers."""
        names = {p.name for p in params}
        if names & _REBUILD:
            with self._lock:
                self._build()
            self.get_logger().info(f"parameters {sorted(names & _REBUILD)} changed: the estimate "
                                   "restarts from its prior")
            self._announce()
        if "max_queue" in names:
            self._max_queue = int(self._get("max_queue"))
        if names & _TIMERS:
            self._start_timers()
            self.get_logger().info(f"{sorted(names & _TIMERS)} changed: timers restarted")

    def _build(self) -> None:
        """The target and a fresh session from the parameters (at start, on ``~/reset`` and when
        they change)."""
        self.target, self.options = self._target_and_options(self._get)
        self.joint_names = self.target.model.dof_joint_names
        scale, offset = torque_map(self._get, self.joint_names)
        if self._stream is None:
            self._stream = JointStream(self.joint_names, scale=scale, offset=offset,
                                       where=self.resolve_topic_name("joint_states"),
                                       warn=self.get_logger().warning)
        else:  # the stream goes on (its stamps and progress): only the model's joints may change
            self._stream.configure(self.joint_names, scale=scale, offset=offset)
        self._payload_sent = False  # ~/payload published for this session
        # a batch's rows folded at once, one solve at its end (the estimate a solve at every
        # sample gives there): a backlog costs less per sample, the larger it is
        self.session = OnlineSession(self.target, self.options, truth=self._truth_for(self.target),
                                     solve_per_batch=True)
        self._published: tuple | None = None  # what the last publication showed (see _publish)

    def _target_and_options(self, get) -> tuple[Target, OnlineOptions]:
        """What the parameter values ``get(name)`` describe; raises :class:`SysIdError` naming
        what is wrong (so a change at run time can be refused before it is made)."""
        kind = get("target")
        terms = joint_terms(get("friction"), bool(get("armature"))) if kind == "arm" else ()
        model = self._models.load(get, joint_terms=terms)
        if float(get("stribeck_velocity")) != 0.0:
            model = model.with_stribeck_velocity(float(get("stribeck_velocity")))
        model.check_fixed_base("the estimator's joint states")
        prior = load_prior(model, kind, get("prior"))
        target = (arm_target(model, prior=prior) if kind == "arm"
                  else payload_target(model, kind, prior=prior))
        return target, OnlineOptions(**{name: get(name) for name, _, _ in SESSION_PARAMETERS})

    def _truth_for(self, target: Target) -> np.ndarray | None:
        """The simulator's true parameters in ``target``'s layout (None when unknown)."""
        values = self._truth
        if values is None or not all(n in values for n in target.names):
            return None
        return np.array([values[n] for n in target.names])

    # --------------------------------------------------------------------------- callbacks
    def _warn(self, key: str, text: str) -> None:
        """Report a counted event; at most one report per counter every 2 s (steady clock)."""
        now = time.monotonic()
        if now - self._reported.get(key, -math.inf) >= 2.0:
            self._reported[key] = now
            self.get_logger().warning(f"{text} ({key}: {self.session.counters.get(key, 0)})")

    def _report(self, event: StreamEvent) -> None:
        key = "gaps" if event.reason == "gap" else f"rejected_{event.reason}"
        self._warn(key, _TEXT[event.reason](event))

    def _on_joint_state(self, msg: JointState, info) -> None:
        """(Where the subscription cannot be polled: an rclpy without ``take_message``.) Only
        queue, with the receive time: conversion runs in the batch step (rclpy callbacks are
        costly); every further message the subscription holds is queued now too (one executor
        wake-up for a burst, not one each)."""
        self._enqueue([(msg, info), *take_pending(self._states, self._max_queue, info=True)])

    def _intake(self) -> None:
        self._enqueue(take_pending(self._states, self._max_queue, info=True))

    def _enqueue(self, taken: list) -> None:
        """Queue ``(message, MessageInfo)`` pairs, each timed on the node clock when DDS received
        it (a burst taken at once keeps its messages' own receive times: an unstamped driver is
        timed by them); beyond ``max_queue`` the oldest are dropped, counted."""
        if not taken:
            return
        now, wall = self.get_clock().now().nanoseconds, time.time_ns()
        for msg, info in taken:
            age = wall - int(info["received_timestamp"]) if info is not None else 0
            self._queue.append((msg, now - age if 0 <= age < 60_000_000_000 else now))  # (rmw: system clock)
        excess = len(self._queue) - self._max_queue
        if excess > 0:
            for _ in range(excess):
                self._queue.popleft()
            self.session.reject("dropped", excess)
            self._warn("rejected_dropped", f"the estimator is too far behind: oldest queued sample dropped "
                       f"({excess} at once)")

    def _on_lost(self, info) -> None:
        """DDS says messages were lost before they reached this node."""
        self.session.reject("lost", info.total_count_change)
        self._warn("rejected_lost", f"{info.total_count_change} joint state(s) lost by DDS before the "
                   "estimator (QoS message-lost event)")

    def _on_truth(self, msg: ParameterEstimate) -> None:
        self._truth = dict(zip(msg.names, msg.values, strict=False))
        truth = self._truth_for(self.target)
        if truth is not None:
            with self._lock:
                self.session.truth = truth
            self.get_logger().info("true parameters received: publishing the divergence to truth")

    def _process(self, final: bool = False, intake: bool = True) -> None:
        """Hand the queue to the session; then publish how far the data has been processed (a
        held first message stamped 0 counts as processed at 0: a lockstep simulator waits for it).
        ``final``: the stream has ended (a held message is a sample at t = 0). Behind, at most
        :attr:`CHUNK` [s] of data per call: the estimate and progress go on being published
        while a backlog is worked off (the timers share one callback group). ``intake``: first
        take what the subscription holds (not while stopping: the publisher may still run)."""
        if intake and not final:
            self._enqueue(take_pending(self._states, self._max_queue, info=True))  # arrived meanwhile
        backlog = len(self._queue)
        if backlog == 0 and not (final and self._stream.stamps.holding):
            return
        if backlog > 5 * self.options.sample_rate / float(self._get("process_rate")):
            self.get_logger().warning(f"behind by {backlog} samples: processing them in batches",
                                      throttle_duration_sec=2.0)
        if not final:
            backlog = min(backlog, max(int(self.CHUNK * self.options.sample_rate), 1))
        self._taken = backlog  # counted in backlog until the session holds them
        try:
            messages = [joint_message(*self._queue.popleft()) for _ in range(backlog)]
            with self._lock:
                batch = self._stream.batch(messages, final=final)
                if batch.refused:
                    self.session.reject("names", len(batch.refused))
                events = self.session.push_batch(batch.t, batch.q, batch.dq, batch.tau) if len(batch) else ()
                if len(batch):
                    self._last_q = batch.q[-1]
        finally:
            self._taken = 0
        if batch.refused:
            self._warn("rejected_names", batch.refused[-1])
        for event in events:
            self._report(event)
        progress = self._stream.progress_ns
        if progress >= 0:
            self._progress.publish(Time(sec=progress // 1_000_000_000, nanosec=progress % 1_000_000_000))

    # ------------------------------------------------------------------------------ outputs
    def _publication(self) -> Publication:
        """The session's estimate now, with its result and precision (one call into the core)."""
        with self._lock:
            return publication(self.session, inertia_required=bool(self._get("precision_inertia")),
                               joint_names=self.joint_names)

    @staticmethod
    def _estimate_message(pub: Publication) -> ParameterEstimate:
        """``pub``'s estimate, stamped with the data time of the last sample folded into it."""
        ns = pub.stamp_ns
        return to_estimate_msg(pub.result, divergence_to_prior=pub.estimate.divergence_to_prior,
                               divergence_to_truth=pub.estimate.divergence_to_truth,
                               stamp=Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000))

    def _publish(self) -> None:
        """The estimate, its precision (and a payload's inertia) and the lag, when the estimate
        changed since the last publication (each costs ~5 ms of CPU for an arm; the latched
        topics hold the last one)."""
        shown = (id(self.session), self.session.estimator.samples, self.session.truth is not None)
        if not self.session.estimator.samples or shown == self._published:
            return
        self._published = shown
        pub = self._publication()
        msg = self._estimate_message(pub)
        self._publisher.publish(msg)
        goal = float(self._get("payload_precision"))
        self._precision_pub.publish(to_precision_msg(pub.precision, target=pub.estimate.target,
                                                     target_precision=goal, sample_count=pub.estimate.updates,
                                                     stamp=msg.header.stamp))
        if not self._payload_sent and pub.payload_ready(goal):
            self._payload_sent = True
            inertia = to_inertia_msg(pub.estimate.theta)
            self._payload_pub.publish(inertia)
            self.get_logger().info(f"payload published on {self._payload_pub.topic_name} (every required "
                                   f"direction within {goal:g}): {_describe(inertia)}")
        self._last_estimate = msg
        self._lag.publish(Float64(data=(self.get_clock().now().nanoseconds - pub.stamp_ns) * 1e-9))

    def _on_commit_payload(self, request, response):
        """Publish the current payload estimate on ``~/payload`` now."""
        if self.target.kind != "payload":
            response.success, response.message = False, "no payload: the target is the whole arm"
            return response
        pub = self._publication()
        est = pub.estimate
        if not est.updates or not est.theta[0] > 0:
            response.success = False
            response.message = f"no payload estimate yet ({est.updates} updates, mass {est.theta[0]:.4g} kg)"
            return response
        inertia = to_inertia_msg(est.theta)
        self._payload_pub.publish(inertia)
        self._payload_sent = True
        worst, rel = pub.precision.worst()
        response.success = True
        response.message = f"published {_describe(inertia)}; least precise required: {worst} {rel:.3g}"
        self.get_logger().info(f"payload committed on {self._payload_pub.topic_name}: {response.message}")
        return response

    def _publish_markers(self) -> None:
        """~/markers of the latest published estimate (each array costs ~30 Marker messages)."""
        msg, q = self._last_estimate, self._last_q
        if msg is None or list(msg.names) != list(self.target.names):  # none yet, or a rebuilt target
            return
        self._markers.publish(self.target, msg.names, msg.values, std=msg.std_dev, joint_positions=q,
                              stamp=msg.header.stamp)

    def _on_reset(self, request, response):
        with self._lock:
            self._build()
        self._queue.clear()
        self._stream.reset()
        response.success, response.message = True, "estimator reset to its prior"
        return response

    def _on_save(self, request, response):
        """``result.json`` (the batch path's schema: the session's estimate as its typed result)
        and, for a consistent arm estimate, ``identified.xml`` in a new folder of ``output_dir``."""
        out = Path(self._get("output_dir")).expanduser() / datetime.now().strftime("estimate-%Y%m%d-%H%M%S")
        try:
            result = self._publication().result
            files = [str(ResultFile.write(out, ResultFile.document(result, self.target)))]
            if self.target.kind == "arm" and result.consistent:
                files.append(str(self.target.model.to_mjcf(result.parameters.values, out / "identified.xml")))
            response.success, response.message = True, " ".join(files)
        except (SysIdError, OSError) as exc:
            response.success, response.message = False, f"could not save: {exc}"
        return response


def _describe(inertia: Inertia) -> str:
    return (f"m = {inertia.m:.4f} kg, CoM = ({inertia.com.x:.4f}, {inertia.com.y:.4f}, "
            f"{inertia.com.z:.4f}) m, "
            f"I_c = [{inertia.ixx:.3g}, {inertia.iyy:.3g}, {inertia.izz:.3g}, {inertia.ixy:.3g}, "
            f"{inertia.ixz:.3g}, {inertia.iyz:.3g}] kg·m²")


def main(args=None) -> None:
    spin(EstimatorNode, SingleThreadedExecutor, args)  # callbacks are short: batches keep up


if __name__ == "__main__":
    main()
