"""Node ``estimator``: online identification from live joint states.

Subscribes to ``sensor_msgs/JointState`` (effort = measured torque), conditions each sample
causally, builds force or momentum regression rows and updates RLS or RLS log-det-div. Samples
are queued by the subscription and processed in batches by a timer (one batched regressor call),
so a burst never drops data; when the queue grows the node says so. NaN, stale and out-of-order
samples are rejected with counted, throttled warnings. Publishes ``ParameterEstimate`` (latched)
at ``publish_rate``; services ``~/reset`` and ``~/save`` (JSON + MJCF).
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from datetime import datetime
from pathlib import Path

import numpy as np
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import RobotModel, joint_terms
from sysid_ros.core.model.target import Target, arm_target, payload_target
from sysid_ros.core.online import WEIGHTINGS, CausalConditioner, OnlineEstimator
from sysid_ros.core.online.replay import ONLINE_METHODS, OnlineOptions, make_estimator
from sysid_ros.msg import ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.resources import default_robot_path

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: a step between joint states longer than this many nominal periods is a gap
GAP_PERIODS = 3.0
PARAMETERS = (
    ("model_path", "", "MJCF of the robot ('' = the package's default robot)"),
    ("method", "rls_logdet", "rls | rls_logdet | momentum"),
    ("target", "arm", "'arm' for every parameter, or a body name for a payload on that body"),
    ("friction", "", "arm target: comma list of coulomb, viscous, offset"),
    ("armature", False, "arm target: identify rotor inertia per joint"),
    ("prior", "nominal", "'nominal' (the MJCF), 'uninformative' (payload) or a result.json path"),
    ("forgetting", 1.0, "forgetting factor λ in (0, 1]"),
    ("alpha", 1.0, "log-det regularisation strength"),
    ("torque_noise", 0.05, "torque noise σ [N·m]: row weight 1/σ²"),
    ("weighting", "fixed", "row weights: 'fixed' (1/torque_noise²) or 'adaptive' (estimated online per row)"),
    ("weight_memory", 1.0, "adaptive weighting: memory of the row-error estimate [s]"),
    ("cutoff", 50.0, "causal low-pass cut-off [Hz]"),
    ("window", 0.5, "momentum window [s]"),
    ("min_speed", 0.05, "force rows of joints slower than this [rad/s] are not used (Coulomb friction)"),
    ("sample_rate", 500.0, "nominal joint-state rate [Hz] (filter design)"),
    ("publish_rate", 10.0, "estimate publication rate [Hz]"),
    ("process_rate", 100.0, "batch processing rate [Hz]"),
    ("max_queue", 20000, "queued samples before the oldest are reported and dropped"),
    ("reliable_input", False, "RELIABLE deep-queue joint states (bag replay) instead of sensor QoS"),
    ("joint_states_topic", "/joint_states", "sensor_msgs/JointState input"),
    ("truth_topic", "/sim/true_parameters", "ParameterEstimate with the true parameters (simulation)"),
    ("output_dir", "sysid_estimates", "where ~/save writes"),
)


class EstimatorNode(Node):
    """Thin ROS facade over :class:`sysid_ros.core.online.estimator.OnlineEstimator`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("estimator", **kwargs)
        for name, default, description in PARAMETERS:
            self.declare_parameter(name, default, ParameterDescriptor(description=description))
        self.add_on_set_parameters_callback(self._validate)
        self._lock = threading.Lock()
        self._queue: deque = deque()
        self.counters = {"received": 0, "rejected_nan": 0, "rejected_stale": 0,
                         "rejected_names": 0, "dropped": 0, "gaps": 0}
        self._reported: dict[str, float] = {}
        self._last_stamp = -math.inf
        self._truth: np.ndarray | None = None
        self._build()
        io_group, work_group = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        # best effort (matches any publisher) with a queue deep enough for bursts
        qos = QoSProfile(depth=500, reliability=ReliabilityPolicy.BEST_EFFORT)
        if self._get("reliable_input"):  # replayed data: no sample may be lost
            qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_ALL)
        self.create_subscription(JointState, self._get("joint_states_topic"), self._on_joint_state,
                                 qos, callback_group=io_group)
        self.create_subscription(ParameterEstimate, self._get("truth_topic"), self._on_truth,
                                 LATCHED, callback_group=io_group)
        self._publisher = self.create_publisher(ParameterEstimate, "~/estimate", LATCHED)
        self.create_timer(1.0 / float(self._get("process_rate")), self._process,
                          callback_group=work_group)
        self.create_timer(1.0 / float(self._get("publish_rate")), self._publish,
                          callback_group=work_group)
        self.create_service(Trigger, "~/reset", self._on_reset, callback_group=work_group)
        self.create_service(Trigger, "~/save", self._on_save, callback_group=work_group)
        self.get_logger().info(f"estimating {self.target.kind} parameters ({self.target.n_params}) "
                               f"with {self._get('method')} on {self._get('joint_states_topic')}")

    @property
    def backlog(self) -> int:
        """Joint states received and not processed yet."""
        return len(self._queue)

    def _new_conditioner(self) -> CausalConditioner:
        """Causal filters for a fresh segment; rows wait until the filters have settled."""
        fs = float(self._get("sample_rate"))
        return CausalConditioner(len(self.joint_names), fs, min(self.options.cutoff, 0.45 * fs),
                                 settle="auto")

    # ------------------------------------------------------------------------------ set-up
    def _get(self, name: str):
        return self.get_parameter(name).value

    def _validate(self, params) -> SetParametersResult:
        for prm in params:
            reason = None
            if prm.name == "method" and prm.value not in ONLINE_METHODS:
                reason = f"method must be one of {list(ONLINE_METHODS)}, got {prm.value!r}"
            elif prm.name == "forgetting" and not 0.0 < prm.value <= 1.0:
                reason = f"forgetting must be in (0, 1], got {prm.value}"
            elif prm.name == "weighting" and prm.value not in WEIGHTINGS:
                reason = f"weighting must be one of {list(WEIGHTINGS)}, got {prm.value!r}"
            elif prm.name in ("alpha", "torque_noise", "cutoff", "window", "sample_rate",
                              "publish_rate", "process_rate", "weight_memory") and not prm.value > 0:
                reason = f"{prm.name} must be > 0, got {prm.value}"
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _build(self) -> None:
        model_path = self._get("model_path") or str(default_robot_path())
        kind = self._get("target")
        terms = joint_terms(self._get("friction"), bool(self._get("armature"))) if kind == "arm" else ()
        model = RobotModel.from_mjcf(model_path, joint_terms=terms)
        prior = self._prior(model, kind)
        self.target: Target = (arm_target(model, prior=prior) if kind == "arm"
                               else payload_target(model, kind, prior=prior))
        self.joint_names = model.dof_joint_names
        self.options = OnlineOptions(method=self._get("method"), alpha=float(self._get("alpha")),
                                     forgetting=float(self._get("forgetting")),
                                     torque_noise=float(self._get("torque_noise")),
                                     cutoff=float(self._get("cutoff")), window=float(self._get("window")),
                                     min_speed=float(self._get("min_speed")),
                                     weighting=self._get("weighting"),
                                     weight_memory=float(self._get("weight_memory")))
        fs = float(self._get("sample_rate"))
        self.estimator: OnlineEstimator = make_estimator(self.target, self.options, sample_period=1.0 / fs)
        self.conditioner = self._new_conditioner()

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
        """Count and report a rejection; at most one report per counter every 2 s."""
        self.counters[key] += 1
        now = self.get_clock().now().nanoseconds * 1e-9
        if now - self._reported.get(key, -math.inf) >= 2.0:
            self._reported[key] = now
            self.get_logger().warning(f"{text} ({key}: {self.counters[key]})")

    def _on_joint_state(self, msg: JointState) -> None:
        """Only queue: parsing and checks run in the batch step (rclpy callbacks are costly)."""
        self.counters["received"] += 1
        if len(self._queue) >= int(self._get("max_queue")):
            self._queue.popleft()
            self._warn("dropped", "the estimator is too far behind: oldest queued sample dropped")
        self._queue.append(msg)

    def _parse(self, msg: JointState) -> tuple | None:
        """``(stamp, q, dq, tau)`` of a valid joint state, a gap marker ``None`` first when the
        stamp jumps; rejected samples are counted and give ``()``."""
        names = list(msg.name)
        try:
            cols = [names.index(j) for j in self.joint_names]
        except ValueError:
            missing = [j for j in self.joint_names if j not in names]
            self._warn("rejected_names", f"joint state lacks joints {missing}; it names {names}")
            return ()
        if len(msg.position) != len(names) or len(msg.effort) != len(names):
            self._warn("rejected_names", "joint state with position/effort lengths unlike its names")
            return ()
        q = np.asarray(msg.position, dtype=float)[cols]
        tau = np.asarray(msg.effort, dtype=float)[cols]
        dq = np.asarray(msg.velocity, dtype=float)[cols] if len(msg.velocity) == len(names) else None
        finite = np.all(np.isfinite(q)) and np.all(np.isfinite(tau))
        if not finite or (dq is not None and not np.all(np.isfinite(dq))):
            self._warn("rejected_nan", "non-finite joint state rejected")
            return ()
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if stamp == 0.0:
            stamp = self.get_clock().now().nanoseconds * 1e-9
        if stamp <= self._last_stamp:
            self._warn("rejected_stale", f"stale or out-of-order joint state at t={stamp:.6f} s rejected")
            return ()
        gap = math.isfinite(self._last_stamp) and \
            stamp - self._last_stamp > GAP_PERIODS / float(self._get("sample_rate"))
        if gap:  # differences across a gap would be wrong: restart the filters and windows there
            self._warn("gaps", f"gap of {1e3 * (stamp - self._last_stamp):.1f} ms before t={stamp:.6f} s")
        self._last_stamp = stamp
        return gap, (stamp, q, dq, tau)

    def _on_truth(self, msg: ParameterEstimate) -> None:
        values = dict(zip(msg.names, msg.values, strict=False))
        if all(n in values for n in self.target.names):
            self._truth = np.array([values[n] for n in self.target.names])
            self.estimator.truth = self._truth
            self.get_logger().info("true parameters received: publishing the divergence to truth")

    def _process(self) -> None:
        backlog = len(self._queue)
        if backlog == 0:
            return
        if backlog > 5 * float(self._get("sample_rate")) / float(self._get("process_rate")):
            self.get_logger().warning(f"behind by {backlog} samples: processing them in one batch",
                                      throttle_duration_sec=2.0)
        segment: list[tuple] = []
        for _ in range(backlog):
            parsed = self._parse(self._queue.popleft())
            if not parsed:
                continue
            gap, item = parsed
            if gap:  # process what came before the gap, then restart
                self._condition_and_update(segment)
                segment = []
                self.conditioner = self._new_conditioner()
                self.estimator.rows.restart()
            segment.append(item)
        self._condition_and_update(segment)

    def _condition_and_update(self, segment: list[tuple]) -> None:
        """Condition a run of consecutive samples in one batch and update the estimate."""
        if not segment:
            return
        t = np.array([s[0] for s in segment])
        q = np.array([s[1] for s in segment])
        tau = np.array([s[3] for s in segment])
        velocities = [s[2] for s in segment]
        dq = None if any(v is None for v in velocities) else np.array(velocities)
        try:
            out = self.conditioner.push_batch(t, q, dq, tau)
        except DataError as exc:
            self._warn("rejected_stale", str(exc))
            return
        if len(out[0]):
            self._update(out)

    def _update(self, cols) -> None:
        """``cols = (t, q, dq, ddq, tau)`` arrays of conditioned samples."""
        if len(cols[0]):
            with self._lock:
                try:
                    self.estimator.push_batch(*cols, log=False)
                except (DataError, SysIdError, np.linalg.LinAlgError) as exc:
                    self._warn("rejected_nan", f"update of {len(cols[0])} samples rejected: {exc}; "
                                               f"t={cols[0][0]:.4f}..{cols[0][-1]:.4f} s, "
                                               f"max |ddq| {np.abs(np.array(cols[3])).max():.3g}")

    # ------------------------------------------------------------------------------ outputs
    def _estimate_message(self) -> ParameterEstimate:
        from sysid_ros.core.result import SolverStatus, estimate_result
        from sysid_ros.nodes.conversions import to_estimate_msg

        est, target = self.estimator, self.target
        with self._lock:
            theta = est.theta.copy()
            info = getattr(est.core, "omega", None)
            cov = getattr(est.core, "P", None)
            samples, residual = est.samples, est.residual_rms
        if cov is not None:
            std = np.sqrt(np.maximum(np.diag(cov), 0.0))
        elif info is not None and samples:
            std = np.sqrt(np.maximum(np.diag(np.linalg.pinv(info)), 0.0))
        else:
            std = np.full_like(theta, np.nan)
        rank, condition = 0, math.nan
        if info is not None and samples:
            sv = np.linalg.eigvalsh(target.base.matrix @ info @ target.base.matrix.T)[::-1]
            rank = int(np.sum(sv > 1e-12 * max(sv[0], 1e-300)))
            condition = float(np.sqrt(sv[0] / sv[rank - 1])) if rank else math.inf
        result = estimate_result(target, theta, method=self.options.method, std=std, rank=rank,
                                 condition_number=condition, residual_rms=residual, n_samples=samples,
                                 solver=SolverStatus(solver=est.estimator), joint_names=self.joint_names)
        truth = target.divergence(theta, self._truth) if self._truth is not None else math.nan
        return to_estimate_msg(result, divergence_to_prior=target.divergence(theta, target.prior),
                               divergence_to_truth=truth, stamp=self.get_clock().now().to_msg())

    def _publish(self) -> None:
        if self.estimator.samples:
            self._publisher.publish(self._estimate_message())

    def _on_reset(self, request, response):
        with self._lock:
            self._build()
            if self._truth is not None:
                self.estimator.truth = self._truth
        self._queue.clear()
        self._last_stamp = -math.inf
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
                   "divergence_to_prior": msg.divergence_to_prior, "counters": dict(self.counters)}
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
