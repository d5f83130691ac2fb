"""A driver that publishes motor currents as effort (issue 26): the estimator converts them with
``torque_scale``/``torque_offset`` and identifies the payload as from torques; a scale of the
wrong length stops the node at start with one line. Real estimator process over DDS, fed by
replaying a simulated run (Panda carrying an unknown 5 kg payload) as currents."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from support.robots import TEST_ROBOTS
from support.ros import SpinningNode
from support.waits import stop_process, wait_with_nodes

rclpy = pytest.importorskip("rclpy")
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "panda.xml"
GAIN = np.array([4.0, 4.0, 4.0, 4.0, 2.0, 2.0, 2.0])  # [N·m/A] per joint (as a driver's torque constants)
OFFSET = 0.3  # [N·m] every joint's current reads this much low
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


def estimator(domain: int, *params: str) -> subprocess.Popen:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    args = [a for p in params for a in ("-p", p)]
    return subprocess.Popen([sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args",
                             "-p", f"model_path:={MODEL}", "-p", "target:=hand", "-p", "reliable_input:=true",
                             "-p", "publish_rate:=20.0", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.timeout(600)
def test_currents_are_converted_to_torques(ros_domain_id):
    model = RobotModel.from_mjcf(MODEL)
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)
    run = simulate_dataset(model, duration=8.0, seed=1, payload=payload,
                           sensor=SensorModel(torque_noise=0.05, seed=2))
    proc = estimator(ros_domain_id, f"torque_scale:={GAIN.tolist()}", f"torque_offset:=[{OFFSET}]")
    ros = SpinningNode("current_replayer", ros_domain_id)
    estimates: list[ParameterEstimate] = []
    try:
        ros.node.create_subscription(ParameterEstimate, "/estimator/estimate", estimates.append, LATCHED)
        pub = ros.node.create_publisher(JointState, "/joint_states",
                                        QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        wait_with_nodes(lambda: ros.node.count_subscribers("/joint_states") > 0, 120.0, "the estimator", ())
        names = list(reversed(run.joint_names))  # a broadcaster's order, not the model's
        for k in range(len(run)):
            current = (run.tau[k] - OFFSET) / GAIN
            msg = JointState(name=names, position=run.q[k][::-1].tolist(), velocity=run.dq[k][::-1].tolist(),
                             effort=current[::-1].tolist())
            stamp_ns = round((10.0 + run.t[k]) * 1e9)
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
            ros.publish(pub, msg)
        end = 10.0 + run.t[-1] - 0.5  # [s] estimates carry the data time of their last sample

        def covered() -> bool:
            return bool(estimates) and (estimates[-1].header.stamp.sec
                                        + 1e-9 * estimates[-1].header.stamp.nanosec) >= end

        wait_with_nodes(covered, 300.0, "the estimate covering the whole run", ())
    finally:
        ros.close()
        log = stop_process(proc)
    assert proc.returncode == 0, log[-3000:]
    values = dict(zip(estimates[-1].names, estimates[-1].values, strict=True))
    assert values["payload.m"] == pytest.approx(5.0, rel=0.02)
    assert values["payload.hz"] / values["payload.m"] == pytest.approx(0.1, abs=0.005)


def test_a_scale_of_the_wrong_length_is_refused(ros_domain_id):
    proc = estimator(ros_domain_id, "torque_scale:=[1.0, 2.0]")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert ("cannot start: torque_scale: expected one finite number or 7 (one per joint ['joint1', "
            in out)
    assert "got [1.0, 2.0]" in out
