"""The estimator node running the EKF and the MHE (``method:=ekf|mhe``) as a real process, fed
over DDS with a simulated run in which the UR5e picks up a 1 kg payload 1.5 s in: the published
estimate ends at the payload's mass, physically consistent, with the method's name."""

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
from sysid_ros.core.sim.changes import simulate_change  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload  # noqa: E402
from sysid_ros.nodes.qos import LATCHED  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "ur5e.xml"
RATE = 250.0  # Hz


@pytest.fixture(scope="module")
def run():
    model = RobotModel.from_mjcf(MODEL)
    payload = Payload("wrist_3_link", 1.0, np.array([0.0, 0.0, 0.05]), np.eye(3) * 0.1**2 / 6)
    return simulate_change(model, duration=3.5, change_time=1.5, payload=payload, rate=RATE, seed=1,
                           sensor=SensorModel(position_noise=1e-3, velocity_noise=1e-2, torque_noise=0.05,
                                              seed=3)).dataset


@pytest.mark.parametrize("method", ["ekf", "mhe"])
def test_estimator_node_tracks_a_payload_picked_up(run, method, ros_domain_id):
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args",
         "-p", f"model_path:={MODEL}", "-p", "target:=wrist_3_link", "-p", f"method:={method}",
         "-p", f"sample_rate:={RATE}", "-p", "drift:=0.3", "-p", "horizon:=1.0",
         "-p", "reliable_input:=true", "-p", "publish_rate:=20.0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    replayer = SpinningNode("replayer", ros_domain_id)
    node = replayer.node
    estimates: list = []
    done = threading.Event()

    def on_estimate(msg):
        estimates.append(msg)
        if msg.sample_count >= len(run) - 100:  # every sample but the filters' start-up
            done.set()

    node.create_subscription(ParameterEstimate, "/estimator/estimate", on_estimate, LATCHED)
    replay = PacedReplay(node, run, per_tick=10)  # 10 samples per 10 ms tick: 4x the run's rate
    try:
        replay.wait(done.is_set, proc=proc,
                    what=lambda: f"no estimate of every sample (last {estimates[-1] if estimates else None})")
        final = estimates[-1]
        assert final.method == method and final.names[0] == "payload.m"
        assert final.values[0] == pytest.approx(1.0, rel=0.1)  # payload mass [kg]
        assert final.physically_consistent
        assert proc.poll() is None
    finally:
        replayer.close()
        log = stop_process(proc)
    assert proc.returncode == 0, log[-3000:]
