"""launch_testing: the real ros2_control_identify launch file with ``use_sim:=true`` (the package's
simulated ros2_control arm standing in for a running UR stack: JointTrajectory on
``joint_trajectory_controller/joint_trajectory``, joint states with effort = joint torque) excites
the UR5e-like test arm until its 1.2 kg payload is determined to 2 %, publishes the payload as
``geometry_msgs/Inertia`` within 2 % (mass) and 5 mm (CoM), says the run is done, and every process
exits with status 0 on the one SIGINT launch sends. Lockstep (``lockstep:=true``): the simulated arm
waits for the trajectory publisher and the estimator, so a busy machine slows the run down
without changing it. Runs on a ROS install with launch_testing
(``colcon test``, or ``launch_test``); skipped where it is absent (the same graph is tested as
processes in test/ros/process/test_ros2_control_payload.py)."""

from __future__ import annotations

import os
import sys
import unittest
from pathlib import Path

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import Inertia
from std_msgs.msg import Bool

from sysid_ros.nodes.qos import LATCHED

# what every launch test shares (test/ros/launch/launch_support.py): skipped where launch,
# launch_ros or launch_testing is absent; DDS on this machine only, in this process's own domain
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_support import launch_test, launch_testing, package_launch, ready, spin_until

pytestmark = pytest.mark.launch

UR5E = Path(__file__).resolve().parents[2] / "robots" / "ur5e.xml"
MASS, COM = 1.2, np.array([0.02, -0.03, 0.06])  # [kg], [m] in wrist_3_link's frame
TIMEOUT = 480.0  # [s] for the whole run on a loaded 2-core machine (start-up alone took 60 s at load 24)


@launch_test(timeout=900)  # [s] the run's own bounded waits come first
def generate_test_description():
    include = package_launch("ros2_control_identify.launch.py", {
        "use_sim": "true", "model_path": str(UR5E), "target": "wrist_3_link",
        "sim_payload": f"body=wrist_3_link,mass={MASS},com=0.02,-0.03,0.06", "until_precision": "0.02",
        "max_duration": "60", "record": "false", "lockstep": "true"})
    return ready(include)


class TestPayloadOnARos2ControlArm(unittest.TestCase):
    def test_payload_published_and_run_done(self, proc_output):
        rclpy.init()
        try:
            node = rclpy.create_node("ros2_control_launch_test")
            payloads: list[Inertia] = []
            done = [False]
            node.create_subscription(Inertia, "/estimator/payload", payloads.append, LATCHED)
            node.create_subscription(Bool, "/trajectory_publisher/done",
                                     lambda m: done.__setitem__(0, done[0] or m.data), LATCHED)
            spin_until(node, lambda: done[0] and payloads, TIMEOUT, "the payload and the end of the run")
            node.destroy_node()
        finally:
            rclpy.shutdown()
        payload = payloads[-1]
        self.assertLess(abs(payload.m - MASS) / MASS, 0.02, payload)
        self.assertLess(np.linalg.norm([payload.com.x, payload.com.y, payload.com.z] - COM), 0.005, payload)
        proc_output.assertWaitFor("precision 0.02 reached by every required direction", timeout=5)
        proc_output.assertWaitFor("a position-controlled arm on "
                                  "/joint_trajectory_controller/joint_trajectory", timeout=5)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_process_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)  # 0: one SIGINT ends every node
