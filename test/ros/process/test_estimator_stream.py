"""The estimator node's time and loss accounting, as a real process over DDS: a stream that
starts at stamp 0, an unstamped driver, a burst faster than the node processes, parameters
changed while it runs. The estimate the node publishes for a stream must be the one the core
computes offline for the same samples (the node's batch sizes must not matter)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support.robots import TEST_ROBOTS
from support.ros import SpinningNode
from support.waits import stop_process, wait_until

rclpy = pytest.importorskip("rclpy")
from builtin_interfaces.msg import Time  # noqa: E402
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.model.target import payload_target  # noqa: E402
from sysid_ros.core.online import OnlineOptions  # noqa: E402
from sysid_ros.core.online.replay import replay  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402
from sysid_ros.nodes.qos import PROGRESS  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "panda.xml"
TIMEOUT = 120.0
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: the node's session (the same options reach the offline replay)
OPTIONS = OnlineOptions(method="rls_logdet", alpha=10.0, sample_rate=500.0)
PAYLOAD = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)


@pytest.fixture(scope="module")
def run():
    """6 s of the Panda carrying 5 kg in its hand, stamped from t = 0 exactly."""
    model = RobotModel.from_mjcf(MODEL)
    ds = simulate_dataset(model, duration=6.0, seed=3, payload=PAYLOAD,
                          sensor=SensorModel(torque_noise=0.05, seed=4))
    assert ds.t[0] == 0.0
    return ds


def start_estimator(domain_id: int, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    args = ["-p", f"model_path:={MODEL}", "-p", "target:=hand", "-p", f"method:={OPTIONS.method}",
            "-p", f"alpha:={OPTIONS.alpha}", "-p", "reliable_input:=true", "-p", "publish_rate:=20.0"]
    return subprocess.Popen([sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args", *args, *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stamp_ns(msg) -> int:
    return msg.sec * 1_000_000_000 + msg.nanosec


class Feeder(SpinningNode):
    """This test's side: a reliable KEEP_ALL joint-state publisher; the estimator's outputs."""

    def __init__(self, domain_id: int) -> None:
        super().__init__("feeder", domain_id)
        self.pub = self.node.create_publisher(
            JointState, "/joint_states",
            QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE))
        self.estimates: list[ParameterEstimate] = []
        self.progress_ns = -1
        self.lags: list[float] = []
        self.node.create_subscription(ParameterEstimate, "/estimator/estimate", self.estimates.append,
                                      LATCHED)
        self.node.create_subscription(Time, "/estimator/progress", self._on_progress, PROGRESS)
        self.node.create_subscription(Float64, "/estimator/lag", lambda m: self.lags.append(m.data), LATCHED)
        self.params = self.node.create_client(SetParameters, "/estimator/set_parameters")
        self.saver = self.node.create_client(Trigger, "/estimator/save")

    def _on_progress(self, msg: Time) -> None:
        self.progress_ns = max(self.progress_ns, stamp_ns(msg))

    def saved_counters(self) -> dict[str, int]:
        """The node's counters, from the JSON its ``~/save`` writes (a bounded service call)."""
        assert self.saver.wait_for_service(timeout_sec=TIMEOUT)
        future = self.saver.call_async(Trigger.Request())
        wait_until(future.done, TIMEOUT, "~/save")
        answer = future.result()
        assert answer.success, answer.message
        return json.loads(Path(answer.message.split()[0]).read_text())["diagnostics"]["online"]["counters"]

    def wait_for_estimator(self, proc) -> None:
        wait_until(lambda: self.pub.get_subscription_count() >= 1, TIMEOUT, "the estimator", proc)

    def send(self, ds, stamps_ns, rate: float = 0.0) -> int:
        """Every sample of ``ds`` with the given stamps, at ``rate`` [Hz] (0: as fast as DDS takes
        them, a burst); a write refused by back-pressure (the reader has not acknowledged yet) is
        retried. Returns the wall-clock time [ns] just before the last sample was published."""
        start = time.monotonic()
        for k in range(len(ds)):
            if rate and (ahead := start + k / rate - time.monotonic()) > 0.002:
                time.sleep(ahead)  # pacing of the stream, not synchronisation
            sent_ns = time.time_ns()
            msg = JointState(name=list(ds.joint_names), position=ds.q[k].tolist(),
                             velocity=ds.dq[k].tolist(), effort=ds.tau[k].tolist())
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamps_ns[k]), 1_000_000_000)
            self.publish(self.pub, msg)
        return sent_ns

    def send_all(self, ds, stamps_ns, proc) -> None:
        """:meth:`send` as a burst, then wait until the node has processed the last stamp."""
        self.send(ds, stamps_ns)
        wait_until(lambda: self.progress_ns == stamps_ns[-1], TIMEOUT, "progress to the last stamp", proc)

    def set_parameter(self, name: str, value) -> tuple[bool, str]:
        if isinstance(value, bool):
            v = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=value)
        elif isinstance(value, int):
            v = ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value)
        else:
            v = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)
        assert self.params.wait_for_service(timeout_sec=TIMEOUT)
        future = self.params.call_async(SetParameters.Request(parameters=[Parameter(name=name, value=v)]))
        wait_until(future.done, TIMEOUT, f"setting {name}")
        result = future.result().results[0]
        return result.successful, result.reason


@pytest.fixture
def feeder(ros_domain_id):
    made = []

    def make() -> Feeder:
        made.append(Feeder(ros_domain_id))
        return made[-1]

    yield make
    for f in made:
        f.close()


def counters(log: str) -> dict[str, int]:
    """The counters of the node's last words ("estimator stopping: received N, ...")."""
    line = re.findall(r"estimator stopping: (.*)", log)
    assert line, log[-3000:]
    return {k: int(v) for k, v in (item.rsplit(" ", 1) for item in line[-1].split(", "))}


@pytest.mark.timeout(300)
def test_a_burst_from_stamp_zero_gives_the_offline_estimate(run, feeder, ros_domain_id):
    """3,000 samples sent at once, the first stamped exactly 0: nothing is lost or rejected, the
    node's progress reaches the last stamp, the final estimate is stamped with the data time of
    the last sample folded into it and equals the offline replay of the same samples (the node's
    batch sizes do not matter: one solve per batch reaches the minimiser a solve per sample
    does), and the lag is published."""
    proc = start_estimator(ros_domain_id)
    f = feeder()
    try:
        f.wait_for_estimator(proc)
        stamps = np.round(run.t * 1e9).astype(np.int64)
        f.send_all(run, stamps, proc)
        offline = replay(run, payload_target(RobotModel.from_mjcf(MODEL), "hand"), OPTIONS).snapshot()
        last_ns = round(offline.time * 1e9)
        wait_until(lambda: f.estimates and stamp_ns(f.estimates[-1].header.stamp) == last_ns
                   and f.estimates[-1].sample_count == offline.updates, TIMEOUT, "the final estimate", proc)
        wait_until(lambda: len(f.lags) > 0, TIMEOUT, "a lag", proc)
    finally:
        log = stop_process(proc)
    assert proc.returncode == 0, log[-3000:]
    final = f.estimates[-1]
    # the node solves once per batch, the replay after every sample: the same minimiser, to
    # Newton's tolerance (1e-9 of the objective): 30 µg of the 5 kg, the first moments and
    # inertias to 5e-5 kg·m, kg·m² (the CoM to 10 µm)
    np.testing.assert_allclose(final.values, offline.theta, rtol=1e-5, atol=5e-5)
    assert final.values[0] == pytest.approx(PAYLOAD.mass, rel=0.01)
    assert 0.0 < stamps[-1] * 1e-9 - offline.time < 0.05  # the causal filters' delay
    assert all(np.isfinite(f.lags))
    seen = counters(log)
    assert seen["received"] == len(run) and seen["accepted"] == len(run), seen
    assert {k: v for k, v in seen.items() if k.startswith("rejected_") or k in ("gaps", "missing")} == {
        "gaps": 0, "missing": 0, "rejected_nan": 0, "rejected_stale": 0, "rejected_update": 0}, seen
    assert "not stamped" not in log


@pytest.mark.timeout(300)
def test_an_overflowing_queue_and_missing_samples_are_counted(run, feeder, ros_domain_id):
    """``max_queue`` 200 against a 3,000-sample burst with every 10th sample left out: what the
    queue dropped and what the stamps say is missing are counted, and every message sent is
    either received by the session or counted as dropped. The queue is drained every 2 s
    (``process_rate`` 0.5 Hz), so it overflows whenever the burst arrives faster than 100
    messages a second: on a loaded host the feeder can publish slower than the 1,000 a second
    a 5 Hz drain would need, and then nothing overflows."""
    proc = start_estimator(ros_domain_id, "-p", "max_queue:=200", "-p", "process_rate:=0.5")
    f = feeder()
    try:
        f.wait_for_estimator(proc)
        keep = np.arange(len(run)) % 10 != 5
        stamps = np.round(run.t * 1e9).astype(np.int64)
        f.send_all(_subset(run, keep), stamps[keep], proc)
    finally:
        log = stop_process(proc)
    assert proc.returncode == 0, log[-3000:]
    seen = counters(log)
    assert seen["rejected_dropped"] > 0 and "oldest queued sample dropped" in log, seen
    assert seen["received"] + seen["rejected_dropped"] == int(keep.sum()), seen
    # each sample left out is a step of two periods between received ones (drops add more)
    assert seen["missing"] >= seen["received"] // 10, seen


def _subset(ds, keep):
    """``ds`` with only the samples where ``keep``."""
    from dataclasses import replace

    return replace(ds, t=ds.t[keep], q=ds.q[keep], dq=ds.dq[keep], tau=ds.tau[keep])


@pytest.mark.timeout(300)
def test_an_unstamped_driver_is_detected_and_timed_on_receipt(run, feeder, ros_domain_id, tmp_path):
    proc = start_estimator(ros_domain_id, "-p", f"output_dir:={tmp_path}")
    f = feeder()
    try:
        f.wait_for_estimator(proc)
        part = _subset(run, np.arange(len(run)) < 1000)
        # a driver that stamps nothing, publishing at its rate: 2 s at 500 Hz
        last_sent = f.send(part, np.zeros(len(part), dtype=np.int64), rate=500.0)
        # the last message was received after it was sent: progress (its receive time) covers it;
        # under load earlier messages may also be received after it was sent, so the count of
        # received messages (the node's counters) says when every one has arrived
        wait_until(lambda: f.progress_ns >= last_sent, TIMEOUT, "progress on receive times", proc)
        wait_until(lambda: f.saved_counters()["received"] >= len(part), TIMEOUT, "every message", proc)
        wait_until(lambda: len(f.estimates) > 0, TIMEOUT, "an estimate", proc)
    finally:
        log = stop_process(proc)
    assert proc.returncode == 0, log[-3000:]
    assert "/joint_states: not stamped (header stamp 0 twice in a row)" in log
    seen = counters(log)
    # every message, the first included, is timed on receipt (wall clock): no jump from t = 0
    # to the wall clock (10^12 samples "missing"), so the gaps are the feeder's own pauses
    assert seen["received"] == 1000 and seen["rejected_nan"] == 0, seen
    assert seen["missing"] < 100_000, seen
    assert stamp_ns(f.estimates[-1].header.stamp) > 10**18  # a wall-clock time (after 2001), not 0


@pytest.mark.timeout(300)
def test_a_single_message_stamped_zero_is_a_sample_at_time_zero(run, feeder, ros_domain_id):
    """A stream of one message stamped 0 is stamped (0 is a time): at the end it is processed
    at t = 0, not on receipt, and no "not stamped" warning is given."""
    proc = start_estimator(ros_domain_id)
    f = feeder()
    try:
        f.wait_for_estimator(proc)
        f.send(_subset(run, np.arange(len(run)) < 1), np.zeros(1, dtype=np.int64))
        wait_until(lambda: f.progress_ns == 0, TIMEOUT, "progress at t = 0", proc)
    finally:
        log = stop_process(proc)
    assert proc.returncode == 0, log[-3000:]
    assert "not stamped" not in log
    assert counters(log)["received"] == 1, log[-3000:]


@pytest.mark.timeout(300)
def test_parameters_changed_at_run_time_apply_or_are_refused(run, feeder, ros_domain_id):
    proc = start_estimator(ros_domain_id)
    f = feeder()
    try:
        f.wait_for_estimator(proc)
        assert f.set_parameter("alpha", 20) == (True, "")  # an integer reaches a float option
        assert f.set_parameter("process_rate", 50) == (True, "")
        ok, reason = f.set_parameter("reliable_input", False)
        assert not ok and "read-only parameter: reliable_input" in reason
        ok, reason = f.set_parameter("forgetting", 1.5)
        assert not ok and "forgetting must be in (0, 1]" in reason
        stamps = np.round(run.t * 1e9).astype(np.int64)
        f.send_all(run, stamps, proc)
    finally:
        log = stop_process(proc)
    assert proc.returncode == 0, log[-3000:]
    assert "parameters ['alpha'] changed: the estimate restarts from its prior" in log
    assert "['process_rate'] changed: timers restarted" in log
    assert counters(log)["received"] == len(run)


@pytest.mark.timeout(300)
def test_a_stop_leaves_a_backlog_counted_instead_of_working_it_off(run, feeder, ros_domain_id):
    """A stop request works off a backlog for ``stop_budget`` s at most and counts the rest: behind
    by thousands of samples on a busy host, the estimator processed them all after the SIGINT and
    launch killed it (SIGTERM after 5 s, SIGKILL after 15 s: exit -9). Here nothing is processed
    while it runs (``process_rate`` 0.001 Hz), the queue is held at ``max_queue`` 2000 by a
    3,000-sample burst, and ``stop_budget`` 0: the node exits 0 saying 2000 unprocessed."""
    proc = start_estimator(ros_domain_id, "-p", "process_rate:=0.001", "-p", "max_queue:=2000",
                           "-p", "stop_budget:=0.0")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    f = feeder()
    try:
        f.wait_for_estimator(proc)
        f.send(run, np.round(run.t * 1e9).astype(np.int64))
        wait_until(lambda: any("oldest queued sample dropped" in line for line in lines), TIMEOUT,
                   "the queue to be full (the drop warning)", proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    log = "".join(lines)
    assert proc.returncode == 0, log[-3000:]
    seen = counters(log)
    assert seen["unprocessed"] == 2000 and seen["received"] == 0, seen
    assert "2000 queued samples left unprocessed: the backlog is worked off 0 s at most after a stop " \
           "request (stop_budget)" in log, log[-3000:]
