"""launch_testing: the real batch_solver launch file starts a node that serves BatchSolve and exits
cleanly. Runs on a ROS install with launch_testing (colcon test); skipped where it is absent."""

from __future__ import annotations

import os
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
from sysid_ros.srv import BatchSolve

import launch

pytestmark = pytest.mark.launch
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


@pytest.mark.launch_test
def generate_test_description():
    share = get_package_share_directory("sysid_ros")
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "batch_solver.launch.py")),
        launch_arguments={"data_root": "/tmp", "output_root": "/tmp/sysid_launch_test"}.items())
    return launch.LaunchDescription([include, launch_testing.actions.ReadyToTest()])


class TestBatchSolverServes(unittest.TestCase):
    def test_refuses_a_missing_bag_and_keeps_running(self, proc_output):
        rclpy.init()
        try:
            node = rclpy.create_node("launch_test_client")
            client = node.create_client(BatchSolve, "/batch_solve")
            self.assertTrue(client.wait_for_service(timeout_sec=30.0))
            future = client.call_async(BatchSolve.Request(bag_path="no_such_bag", method="ols"))
            rclpy.spin_until_future_complete(node, future, timeout_sec=30.0)
            self.assertFalse(future.result().success)
            self.assertIn("not found", future.result().message)
            node.destroy_node()
        finally:
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
