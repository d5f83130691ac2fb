"""Nodes take the robot model from the latched ``/robot_description`` topic, as
``robot_state_publisher`` publishes it (std_msgs/String, reliable, transient local): a real
publisher in this process, the real estimator executable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.waits import stop_process

pytestmark = pytest.mark.ros
ROBOT = Path(__file__).resolve().parents[2] / "robots" / "two_link.urdf"


def _estimator(domain_id: int, *params: str) -> subprocess.Popen:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args"]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.timeout(120)
def test_estimator_takes_the_model_from_the_latched_robot_description_topic(ros_domain_id):
    import rclpy
    from std_msgs.msg import String

    from sysid_ros.nodes.qos import LATCHED

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    node = rclpy.create_node("robot_state_publisher_stand_in", context=context)
    proc = None
    try:
        # published (latched) before the estimator starts, as robot_state_publisher does
        node.create_publisher(String, "/robot_description", LATCHED).publish(String(data=ROBOT.read_text()))
        proc = _estimator(ros_domain_id, "robot_description_topic:=/robot_description",
                          "robot_description_timeout:=60")
        lines = []
        for line in proc.stdout:  # bounded by the test timeout
            lines.append(line)
            if "estimating" in line:
                break
        text = "".join(lines)
        assert "waiting up to 60 s for the robot model on /robot_description" in text, text
        assert "robot model from the /robot_description topic: joints ['shoulder', 'elbow']" in text, text
        # the two moving links of the URDF, 10 parameters each (no joint terms asked for)
        assert "estimating arm parameters (20)" in text, text
    finally:
        out = stop_process(proc) if proc is not None else ""
        node.destroy_node()
        rclpy.shutdown(context=context)
    assert proc.returncode == 0, out


@pytest.mark.timeout(60)
def test_estimator_without_a_robot_description_says_so_and_exits_1(ros_domain_id):
    proc = _estimator(ros_domain_id, "robot_description_topic:=/robot_description",
                      "robot_description_timeout:=1.5")
    out, _ = proc.communicate(timeout=50)
    assert proc.returncode == 1, out
    assert ("cannot start: no robot model on /robot_description within 1.5 s: set model_path or "
            "robot_description, or start the node that publishes it (robot_state_publisher)") in out, out
