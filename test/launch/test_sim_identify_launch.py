"""launch_testing: the real sim_identify launch file runs the closed loop; the online payload
estimate converges and every process exits cleanly. Runs on a ROS install with launch_testing
(colcon test); skipped where it is absent (the same graph is tested as processes in
test_sim_loop.py)."""

from __future__ import annotations

import os
import time
import unittest

import pytest

pytest.importorskip("launch_testing")
pytest.importorskip("launch")
pytest.importorskip("launch_ros")

import launch_testing.actions
import launch_testing.asserts
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from sysid_ros.msg import ParameterEstimate

import launch

pytestmark = pytest.mark.launch
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
MASS = 0.6


@pytest.mark.launch_test
def generate_test_description():
    share = get_package_share_directory("sysid_ros")
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "sim_identify.launch.py")),
        launch_arguments={"payload": f"body=link_6,mass={MASS},com=0.01,-0.015,0.045", "target": "link_6",
                          "real_time_factor": "2.0", "excitation_time": "16.0", "record": "true",
                          "bag": f"/tmp/sysid_launch_test_{os.getpid()}"}.items())
    return launch.LaunchDescription([include, launch_testing.actions.ReadyToTest()])


class TestEstimateConverges(unittest.TestCase):
    def test_online_payload_mass_within_3_percent(self, proc_output):
        rclpy.init()
        try:
            node = rclpy.create_node("launch_test_listener")
            latest: list = []
            node.create_subscription(ParameterEstimate, "/estimator/estimate", latest.append, 10)
            deadline = time.monotonic() + 120.0
            while time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.5)
                done = latest and latest[-1].sample_count > 8000
                if done and abs(latest[-1].values[0] - MASS) < 0.03 * MASS:
                    break
            self.assertTrue(latest, "no estimate was published")
            self.assertTrue(all(m.physically_consistent for m in latest))
            self.assertLess(abs(latest[-1].values[0] - MASS), 0.03 * MASS)
            node.destroy_node()
        finally:
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_process_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
