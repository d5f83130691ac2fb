"""The estimator node as a real process, fed over DDS by replaying a simulated run (Panda carrying
an unknown 5 kg payload in its hand); its published estimates must converge to the truth and be
physically consistent at every publication."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from support.robots import TEST_ROBOTS
from support.waits import stop_process

rclpy = pytest.importorskip("rclpy")
from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.data.bag import dataset_topics, read_bag, write_bag  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "panda.xml"
TIMEOUT = 90.0
#: [samples] the replayer keeps at most this many samples ahead of the estimator's ``~/progress``
#: (below the publisher's 1,000-deep history: DDS never drops one however loaded the host is)
WINDOW = 500
STALL = 60.0  # [s] without progress of the estimator: the test fails
CAP = 600.0  # [s] the whole replay at most (a loaded 2-core host processes it at ~0.05-1x real time)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A simulated run written as a real bag and read back (what gets replayed)."""
    model = RobotModel.from_mjcf(MODEL)
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)
    ds = simulate_dataset(model, duration=12.0, seed=1, payload=payload,
                          sensor=SensorModel(torque_noise=0.05, seed=2))
    bag = write_bag(tmp_path_factory.mktemp("bags") / "payload_run", dataset_topics(ds), truth=ds.truth)
    return read_bag(bag)


@pytest.fixture
def estimator_process(ros_domain_id):
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args",
         "-p", f"model_path:={MODEL}", "-p", "target:=hand", "-p", "method:=rls_logdet",
         "-p", "alpha:=10.0", "-p", "reliable_input:=true", "-p", "publish_rate:=20.0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield proc
    print(stop_process(proc)[-4000:])  # shown by pytest when the test fails


def test_estimator_converges_on_a_replayed_run(run, estimator_process, ros_domain_id):
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    node = rclpy.create_node("replayer", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    estimates: list = []
    converged = threading.Event()

    def on_estimate(msg):
        estimates.append(msg)
        if msg.sample_count > 0.9 * len(run) and msg.divergence_to_truth < 0.05:
            converged.set()

    node.create_subscription(ParameterEstimate, "/estimator/estimate", on_estimate, LATCHED)
    # the estimator's ~/progress (data time processed) paces the replay: flow control, so that a
    # loaded host slows the run down instead of losing samples (as a lockstep simulator does)
    stamps = 100.0 + np.asarray(run.t)  # [s] the replayed stamps (below)
    processed = [0]

    def on_progress(msg: Time) -> None:
        processed[0] = int(np.searchsorted(stamps, msg.sec + 1e-9 * msg.nanosec, side="right"))

    node.create_subscription(Time, "/estimator/progress", on_progress, LATCHED)
    truth_pub = node.create_publisher(ParameterEstimate, "/sim/true_parameters", LATCHED)
    truth = ParameterEstimate(method="truth", target="hand",
                              names=[f"payload.{f}" for f in ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Ixz",
                                                              "Iyy", "Iyz", "Izz")],
                              values=run.truth["payload"]["params"])
    truth_pub.publish(truth)
    pub = node.create_publisher(JointState, "/joint_states",
                                QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    sent = [0]

    def state(k: int, *, poison: bool = False) -> JointState:
        msg = JointState(name=list(run.joint_names), position=run.q[k].tolist(),
                         velocity=run.dq[k].tolist(), effort=run.tau[k].tolist())
        if poison:
            msg.effort[2] = float("nan")
        stamp_ns = round((100.0 + run.t[k]) * 1e9)  # an unstamped (zero) time would mean "now"
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        return msg

    def send_batch():  # up to 20 samples per 10 ms tick (twice real time), WINDOW ahead at most
        if node.count_subscribers("/joint_states") == 0:
            return
        for _ in range(20):
            k = sent[0]
            if k >= len(run) or k - processed[0] >= WINDOW:
                return
            if k == 1000:  # bad input the node must reject and survive: NaN, then a stale sample
                pub.publish(state(k, poison=True))
                pub.publish(state(k - 500))
            pub.publish(state(k))
            sent[0] += 1

    node.create_timer(0.01, send_batch)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        start = last_change = time.monotonic()
        seen = -1
        while not converged.wait(0.1):  # bounded: while the estimator makes progress, at most CAP
            now = time.monotonic()
            if processed[0] != seen or sent[0] == 0:  # (the node's start-up: bounded by CAP)
                seen, last_change = processed[0], now
            assert now - last_change < STALL and now - start < CAP, (
                f"no converged estimate: sent {sent[0]}, processed {processed[0]}, "
                f"last {estimates[-1] if estimates else None}")
        assert all(m.physically_consistent for m in estimates)
        final = estimates[-1]
        assert final.values[0] == pytest.approx(5.0, rel=0.01)  # payload mass [kg]
        assert final.names[0] == "payload.m" and final.target == "hand"
        assert estimator_process.poll() is None
    finally:
        executor.shutdown()
        thread.join(timeout=5)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    log = stop_process(estimator_process)
    assert estimator_process.returncode == 0
    assert "non-finite joint state rejected (rejected_nan: 1)" in log
    assert "stale or out-of-order joint state" in log and "(rejected_stale: 1)" in log


def test_estimator_refuses_bad_session_options(ros_domain_id):
    """The node's session parameters are checked by the core's OnlineOptions: a bad value stops
    the node at start with the reason (exit status 1)."""
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    out = subprocess.run(
        [sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args", "-p", f"model_path:={MODEL}",
         "-p", "target:=hand", "-p", "gap_periods:=0.5"],
        env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cannot start: gap_periods must be > 1" in out.stderr
