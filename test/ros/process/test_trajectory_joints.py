"""``trajectory_publisher`` with ``joints`` (a ros2_control controller that commands some of the
model's joints, e.g. an arm controller beside a URDF's gripper joints): a real process over DDS
sends ``JointTrajectory`` messages naming only those joints, in that order, with one value per
named joint, the named joints moving; the others stay out of every message. An unknown joint is
refused at start in one line."""

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
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "ur5e.xml"
ALL = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
       "wrist_3_joint"]
COMMANDED = ["wrist_3_joint", "shoulder_pan_joint", "elbow_joint"]  # a subset, in another order
START = np.array([0.1, -1.2, 1.0, -1.4, -1.5, 0.2])  # [rad] the arm's pose (held by this test)
TIMEOUT = 240.0  # [s] node start-up and first message on a loaded 2-core host


def _publisher(domain_id: int, *params: str) -> subprocess.Popen:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    cmd = [sys.executable, "-m", "sysid_ros.nodes.trajectory_publisher", "--ros-args",
           "-p", f"model_path:={MODEL}", "-p", "interface:=joint_trajectory", "-p", "excitation_time:=10.0"]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_only_the_controller_s_joints_are_commanded(ros_domain_id):
    proc = _publisher(ros_domain_id, f"joints:={','.join(COMMANDED)}")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    node = rclpy.create_node("controller_stand_in", context=context)
    received: list[JointTrajectory] = []
    got = threading.Event()

    def on_trajectory(msg: JointTrajectory) -> None:
        received.append(msg)
        if sum(len(m.points) for m in received) >= 150:  # the approach and excitation under way
            got.set()

    node.create_subscription(JointTrajectory, "/joint_trajectory_controller/joint_trajectory", on_trajectory,
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    pub = node.create_publisher(JointState, "/joint_states", 10)

    def publish_state() -> None:  # joint_state_broadcaster of an arm at rest: every model joint
        msg = JointState(name=ALL, position=START.tolist(), velocity=[0.0] * 6, effort=[0.0] * 6)
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)

    node.create_timer(0.01, publish_state)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while not got.wait(0.1):
            assert proc.poll() is None, f"the trajectory publisher exited {proc.returncode}"
            assert time.monotonic() < deadline, f"{len(received)} trajectory messages in {TIMEOUT:.0f} s"
    finally:
        executor.shutdown()
        thread.join(timeout=5)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        log = stop_process(proc)
    print(log[-3000:])
    with_points = [m for m in received if m.points]
    assert with_points and all(list(m.joint_names) == COMMANDED for m in received)
    positions = np.array([p.positions for m in with_points for p in m.points])  # (N, 3)
    assert positions.shape[1] == len(COMMANDED)
    assert all(len(p.velocities) == len(p.accelerations) == 3 for m in with_points for p in m.points)
    # the approach starts at the arm's pose and the named joints move from there
    np.testing.assert_allclose(positions[0], START[[ALL.index(n) for n in COMMANDED]], atol=0.05)
    assert np.all(np.ptp(positions, axis=0) > 0.01), np.ptp(positions, axis=0)


def test_an_unknown_joint_is_refused_in_one_line(ros_domain_id):
    proc = _publisher(ros_domain_id, "joints:=wrist_3_joint,gripper_joint")
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1
    assert out.strip().splitlines() == [
        f"[TrajectoryPublisherNode] cannot start: joints must be distinct joints of the model {ALL}, "
        "got ['wrist_3_joint', 'gripper_joint']"], out
