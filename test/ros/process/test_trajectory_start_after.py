"""``trajectory_publisher`` with ``start_after`` (what hardware_identify.launch.py sets): on a busy
host the estimator may start tens of seconds after the bridge and the trajectory publisher (117 s
was seen beside two CPU hogs at load 21), and an excitation started at the first joint state was
then over before the estimator listened: no estimate at all. A real process over DDS, fed joint
states by this test, says once that it waits for the named node, sends no command while it waits,
and starts the run once that node says on ``lockstep/ready`` that it is connected."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from support.robots import TEST_ROBOTS
from support.waits import stop_process, wait_until

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import KeyValue  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from sysid_ros.msg import MotorCommand  # noqa: E402

from sysid_ros.nodes.lockstep import READY  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "ur5e.xml"
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
START = np.array([0.1, -1.2, 1.0, -1.4, -1.5, 0.2])  # [rad] the arm's pose (held by this test)
TIMEOUT = 240.0  # [s] node start-up and first message on a loaded 2-core host
HELD_STATES = 200  # joint states (2 s at 100 Hz) answered by no command while the estimator is not ready


def test_the_run_waits_for_the_named_consumers(ros_domain_id):
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "sysid_ros.nodes.trajectory_publisher", "--ros-args",
                             "-p", f"model_path:={MODEL}", "-p", "excitation_time:=4.0", "-p", "rate:=100.0",
                             "-p", "start_after:=estimator"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    node = rclpy.create_node("bridge_stand_in", context=context)
    commands: list[MotorCommand] = []
    node.create_subscription(MotorCommand, "/motor_command", commands.append,
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    pub = node.create_publisher(JointState, "/joint_states", 10)
    ready = node.create_publisher(KeyValue, "/lockstep/ready", READY)
    sent = [0]

    def publish_state() -> None:  # an arm at rest, every joint
        msg = JointState(name=JOINTS, position=START.tolist(), velocity=[0.0] * 6, effort=[0.0] * 6)
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)
        sent[0] += 1

    node.create_timer(0.01, publish_state)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()

    def wait(condition, what: str) -> None:
        wait_until(condition, TIMEOUT, what, proc, output=lambda: "".join(lines))

    try:
        wait(lambda: any("the excitation waits for /estimator" in line for line in lines),
             "the trajectory publisher to say it waits for the estimator")
        held_from = sent[0]
        wait(lambda: sent[0] >= held_from + HELD_STATES, f"{HELD_STATES} more joint states")
        held = list(commands)
        ready.publish(KeyValue(key="/estimator/progress", value="/estimator"))
        wait(lambda: any(m.kp and max(m.kp) > 0 for m in commands), "the excitation's commands")
    finally:
        executor.shutdown()
        thread.join(timeout=5)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        stop_process(proc)
        reader.join(timeout=5)
    log = "".join(lines)
    assert held == [], f"{len(held)} commands sent before the estimator was ready"
    assert log.count("the excitation waits for /estimator to be connected to the joint states "
                     "(/lockstep/ready)") == 1, log
    assert "/estimator connected: the excitation may start" in log, log
    assert "excitation started" in log, log
