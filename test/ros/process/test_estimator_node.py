"""The estimator node as a real process, fed over DDS by replaying a simulated run (Panda carrying
an unknown 5 kg payload in its hand); its published estimates must converge to the truth and be
physically consistent at every publication."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from support.replay import PacedReplay
from support.robots import TEST_ROBOTS
from support.ros import SpinningNode
from support.waits import stop_process

rclpy = pytest.importorskip("rclpy")
from sysid_ros.msg import ParameterEstimate  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.data.bag import dataset_topics, read_bag, write_bag  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402
from sysid_ros.nodes.qos import LATCHED  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "panda.xml"
TIMEOUT = 90.0


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
    side = SpinningNode("replayer", ros_domain_id)
    node = side.node
    estimates: list = []
    converged = threading.Event()

    def on_estimate(msg):
        estimates.append(msg)
        if msg.sample_count > 0.9 * len(run) and msg.divergence_to_truth < 0.05:
            converged.set()

    node.create_subscription(ParameterEstimate, "/estimator/estimate", on_estimate, LATCHED)
    truth_pub = node.create_publisher(ParameterEstimate, "/sim/true_parameters", LATCHED)
    truth = ParameterEstimate(method="truth", target="hand",
                              names=[f"payload.{f}" for f in ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Ixz",
                                                              "Iyy", "Iyz", "Izz")],
                              values=run.truth["payload"]["params"])
    truth_pub.publish(truth)
    replay: PacedReplay

    def bad_input(k: int) -> list:  # the node must reject it and survive: NaN, then a stale sample
        if k != 1000:
            return []
        poisoned = replay.message(k)
        poisoned.effort[2] = float("nan")
        return [poisoned, replay.message(k - 500)]

    # the estimator's ~/progress (data time processed) paces the replay (up to 20 samples per
    # 10 ms tick, twice real time): flow control, so that a loaded host slows the run down
    # instead of losing samples (as a lockstep simulator does)
    replay = PacedReplay(node, run, extra=bad_input)
    try:
        replay.wait(converged.is_set, proc=estimator_process,
                    what=lambda: f"no converged estimate (last {estimates[-1] if estimates else None})")
        assert all(m.physically_consistent for m in estimates)
        final = estimates[-1]
        assert final.values[0] == pytest.approx(5.0, rel=0.01)  # payload mass [kg]
        assert final.names[0] == "payload.m" and final.target == "hand"
        assert estimator_process.poll() is None
    finally:
        side.close()
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
