"""Node ``estimator``: online identification from live joint states.

A thin facade over :class:`sysid_ros.core.online.session.OnlineSession` (the same session, with
the same options, as ``sysid identify --method rls|rls_logdet|momentum``). Subscribes to
``sensor_msgs/JointState`` (effort = measured torque); the subscription only queues, a timer hands
the queue to the session in one batch (so a burst never drops data; when the queue grows the node
says so). The session rejects NaN, stale and out-of-order samples and restarts its filters across
gaps; the node counts messages naming other joints and queue overflows, and reports every
rejection in counted, throttled warnings. Publishes ``ParameterEstimate`` (latched) at
``publish_rate``; services ``~/reset`` and ``~/save`` (JSON + MJCF).

Topics are relative names, set by remapping (``-r joint_states:=/arm/joint_states``): subscribes
``joint_states`` and ``sim/true_parameters`` (latched truth from a simulator, for scoring),
publishes ``~/estimate``.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel, joint_terms
from sysid_ros.core.model.target import Target, arm_target, payload_target
from sysid_ros.core.online.session import OPTION_HELP, OnlineOptions, OnlineSession, StreamEvent
from sysid_ros.core.result import SolverStatus, estimate_result
from sysid_ros.msg import ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.nodes.conversions import to_estimate_msg
from sysid_ros.nodes.parameters import declare_parameters, parameter_value, requested_value
from sysid_ros.resources import default_robot_path

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: the session's options, named, defaulted and described as in the core (and the CLI)
SESSION_PARAMETERS = tuple((name, getattr(OnlineOptions(), name), OPTION_HELP[name])
                           for name in OnlineOptions.names())
NODE_PARAMETERS = (
    ("model_path", "", "MJCF of the robot ('' = the package's default robot)"),
    ("target", "arm", "'arm' for every parameter, or a body name for a payload on that body"),
    ("friction", "", "arm target: comma list of coulomb, viscous, offset"),
    ("armature", False, "arm target: identify rotor inertia per joint"),
    ("prior", "nominal", "'nominal' (the MJCF), 'uninformative' (payload) or a result.json path"),
    ("publish_rate", 10.0, "estimate publication rate [Hz]"),
    ("process_rate", 100.0, "batch processing rate [Hz]"),
    ("max_queue", 20000, "queued samples before the oldest are reported and dropped"),
    ("reliable_input", False, "RELIABLE deep-queue joint states (bag replay) instead of sensor QoS"),
    ("output_dir", "sysid_estimates", "where ~/save writes"),
)
PARAMETERS = SESSION_PARAMETERS + NODE_PARAMETERS
#: log line of each kind of rejection (the counter is appended)
_TEXT = {
    "nan": lambda e: "non-finite joint state rejected",
    "stale": lambda e: f"stale or out-of-order joint state at t={e.t:.6f} s rejected ({e.detail})",
    "gap": lambda e: f"{e.detail} before t={e.t:.6f} s: filters restarted",
    "update": lambda e: f"{e.count} update(s) rejected, the last at t={e.t:.4f} s: {e.detail}",
}


class EstimatorNode(Node):
    """Thin ROS facade over :class:`sysid_ros.core.online.session.OnlineSession`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("estimator", **kwargs)
        declare_parameters(self, PARAMETERS)
        self._lock = threading.Lock()
        self._queue: deque = deque()
        self._reported: dict[str, float] = {}
        self._columns: dict[tuple[str, ...], list[int] | None] = {}
        self._truth: np.ndarray | None = None
        self._build()
        self.add_on_set_parameters_callback(self._validate)
        io_group, work_group = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        # best effort (matches any publisher) with a queue deep enough for bursts
        qos = QoSProfile(depth=500, reliability=ReliabilityPolicy.BEST_EFFORT)
        if self._get("reliable_input"):  # replayed data: no sample may be lost
            qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_ALL)
        self.create_subscription(JointState, "joint_states", self._on_joint_state,
                                 qos, callback_group=io_group)
        self.create_subscription(ParameterEstimate, "sim/true_parameters", self._on_truth,
                                 LATCHED, callback_group=io_group)
        self._publisher = self.create_publisher(ParameterEstimate, "~/estimate", LATCHED)
        self.create_timer(1.0 / float(self._get("process_rate")), self._process,
                          callback_group=work_group)
        self.create_timer(1.0 / float(self._get("publish_rate")), self._publish,
                          callback_group=work_group)
        self.create_service(Trigger, "~/reset", self._on_reset, callback_group=work_group)
        self.create_service(Trigger, "~/save", self._on_save, callback_group=work_group)
        topic = self.resolve_topic_name("joint_states")
        self.get_logger().info(f"estimating {self.target.kind} parameters ({self.target.n_params}) "
                               f"with {self.options.method} on {topic} (low-pass "
                               f"{self.options.effective_cutoff:g} Hz at {self.options.sample_rate:g} Hz)")

    @property
    def backlog(self) -> int:
        """Joint states received and not processed yet."""
        return len(self._queue)

    # ------------------------------------------------------------------------------ set-up
    def _get(self, name: str):
        return parameter_value(self, name)

    def _validate(self, params) -> SetParametersResult:
        """Session options are checked by :class:`OnlineOptions` itself; they apply at ``~/reset``."""
        session = {p.name: requested_value(self, p) for p in params if p.name in OnlineOptions.names()}
        try:
            replace(self.options, **session)
        except (SysIdError, TypeError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        for prm in params:
            value = requested_value(self, prm)
            if prm.name in ("publish_rate", "process_rate", "max_queue") and not value > 0:
                return SetParametersResult(successful=False,
                                           reason=f"{prm.name} must be > 0, got {prm.value}")
        return SetParametersResult(successful=True)

    def _build(self) -> None:
        """The target and a fresh session from the parameters (at start and on ``~/reset``)."""
        model_path = self._get("model_path") or str(default_robot_path())
        kind = self._get("target")
        terms = joint_terms(self._get("friction"), bool(self._get("armature"))) if kind == "arm" else ()
        model = RobotModel.from_mjcf(model_path, joint_terms=terms)
        prior = self._prior(model, kind)
        self.target: Target = (arm_target(model, prior=prior) if kind == "arm"
                               else payload_target(model, kind, prior=prior))
        self.joint_names = model.dof_joint_names
        self._columns.clear()
        self.options = OnlineOptions(**{name: self._get(name) for name, _, _ in SESSION_PARAMETERS})
        self.session = OnlineSession(self.target, self.options, truth=self._truth)

    def _prior(self, model: RobotModel, kind: str) -> np.ndarray | None:
        prior = self._get("prior")
        if prior in ("nominal", "uninformative", ""):  # the target's default prior
            return None
        path = Path(prior).expanduser()
        if not path.is_file():
            raise SysIdError(f"prior must be 'nominal', 'uninformative' or a result.json path, got {prior!r}")
        values = json.loads(path.read_text())["exported_parameters"]["values"]
        if kind == "arm":
            return model.from_dict({k: v for k, v in values.items() if k in set(model.param_names)})
        return np.array([values[f"payload.{f}"] for f in
                         ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")])

    # --------------------------------------------------------------------------- callbacks
    def _warn(self, key: str, text: str) -> None:
        """Report a counted event; at most one report per counter every 2 s."""
        now = self.get_clock().now().nanoseconds * 1e-9
        if now - self._reported.get(key, -math.inf) >= 2.0:
            self._reported[key] = now
            self.get_logger().warning(f"{text} ({key}: {self.session.counters.get(key, 0)})")

    def _report(self, event: StreamEvent) -> None:
        key = "gaps" if event.reason == "gap" else f"rejected_{event.reason}"
        self._warn(key, _TEXT[event.reason](event))

    def _on_joint_state(self, msg: JointState) -> None:
        """Only queue: conversion runs in the batch step (rclpy callbacks are costly)."""
        if len(self._queue) >= int(self._get("max_queue")):
            self._queue.popleft()
            self.session.reject("dropped")
            self._warn("rejected_dropped", "the estimator is too far behind: oldest queued sample dropped")
        self._queue.append(msg)

    def _columns_of(self, names: tuple[str, ...]) -> list[int] | None:
        """Where the model's joints are in a message naming ``names`` (None: some are missing)."""
        cols = self._columns.get(names, False)
        if cols is False:
            index = {n: i for i, n in enumerate(names)}
            cols = [index[j] for j in self.joint_names] if all(j in index for j in self.joint_names) else None
            self._columns[names] = cols
        return cols

    def _arrays(self, msgs: list[JointState]) -> tuple | None:
        """``(t (K,), q, dq or None, tau (K, n))`` of the messages naming the model's joints; an
        unstamped message (stamp 0) gets the time it is processed."""
        t, q, dq, tau = [], [], [], []
        velocities = True
        for msg in msgs:
            names = tuple(msg.name)
            cols = self._columns_of(names)
            if cols is None or len(msg.position) != len(names) or len(msg.effort) != len(names):
                self.session.reject("names")
                missing = [j for j in self.joint_names if j not in names]
                self._warn("rejected_names", f"joint state rejected: it names {list(names)} with "
                           f"{len(msg.position)} positions and {len(msg.effort)} efforts"
                           + (f"; missing {missing}" if missing else ""))
                continue
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            t.append(stamp if stamp != 0.0 else self.get_clock().now().nanoseconds * 1e-9)
            q.append(np.asarray(msg.position, dtype=float)[cols])
            tau.append(np.asarray(msg.effort, dtype=float)[cols])
            if velocities and len(msg.velocity) == len(names):
                dq.append(np.asarray(msg.velocity, dtype=float)[cols])
            else:
                velocities = False  # one message without velocities: differentiate the batch
        if not t:
            return None
        return np.array(t), np.array(q), np.array(dq) if velocities else None, np.array(tau)

    def _on_truth(self, msg: ParameterEstimate) -> None:
        values = dict(zip(msg.names, msg.values, strict=False))
        if all(n in values for n in self.target.names):
            self._truth = np.array([values[n] for n in self.target.names])
            with self._lock:
                self.session.truth = self._truth
            self.get_logger().info("true parameters received: publishing the divergence to truth")

    def _process(self) -> None:
        backlog = len(self._queue)
        if backlog == 0:
            return
        if backlog > 5 * self.options.sample_rate / float(self._get("process_rate")):
            self.get_logger().warning(f"behind by {backlog} samples: processing them in one batch",
                                      throttle_duration_sec=2.0)
        batch = self._arrays([self._queue.popleft() for _ in range(backlog)])
        if batch is None:
            return
        with self._lock:
            events = self.session.push_batch(*batch)
        for event in events:
            self._report(event)

    # ------------------------------------------------------------------------------ outputs
    def _estimate_message(self) -> ParameterEstimate:
        with self._lock:
            est = self.session.snapshot()
        result = estimate_result(self.target, est.theta, method=est.method, std=est.std, rank=est.rank,
                                 condition_number=est.condition_number, residual_rms=est.residual_rms,
                                 n_samples=est.updates, solver=SolverStatus(solver=self.options.estimator),
                                 joint_names=self.joint_names)
        return to_estimate_msg(result, divergence_to_prior=est.divergence_to_prior,
                               divergence_to_truth=est.divergence_to_truth,
                               stamp=self.get_clock().now().to_msg())

    def _publish(self) -> None:
        if self.session.estimator.samples:
            self._publisher.publish(self._estimate_message())

    def _on_reset(self, request, response):
        with self._lock:
            self._build()
        self._queue.clear()
        response.success, response.message = True, "estimator reset to its prior"
        return response

    def _on_save(self, request, response):
        out = Path(self._get("output_dir")).expanduser() / datetime.now().strftime("estimate-%Y%m%d-%H%M%S")
        try:
            msg = self._estimate_message()
            out.mkdir(parents=True, exist_ok=True)
            doc = {"method": msg.method, "target": msg.target, "samples": msg.sample_count,
                   "exported_parameters": {"values": dict(zip(msg.names, msg.values, strict=True))},
                   "std_dev": dict(zip(msg.names, msg.std_dev, strict=True)),
                   "physically_consistent": msg.physically_consistent,
                   "divergence_to_prior": msg.divergence_to_prior, "counters": self.session.counters,
                   "options": self.options.as_dict()}
            tmp = out / ".result.json.tmp"
            tmp.write_text(json.dumps(doc, indent=2) + "\n")
            tmp.replace(out / "result.json")
            files = [str(out / "result.json")]
            if self.target.kind == "arm" and msg.physically_consistent:
                files.append(str(self.target.model.to_mjcf(np.array(msg.values), out / "identified.xml")))
            response.success, response.message = True, " ".join(files)
        except (SysIdError, OSError) as exc:
            response.success, response.message = False, f"could not save: {exc}"
        return response


def main(args=None) -> None:
    spin(EstimatorNode, SingleThreadedExecutor, args)  # callbacks are short: batches keep up


if __name__ == "__main__":
    main()
