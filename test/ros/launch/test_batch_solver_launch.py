"""launch_testing: the real batch_solver launch file starts a node that serves BatchSolve and exits
cleanly. Runs on a ROS install with launch_testing (colcon test); skipped where it is absent."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

import pytest
import rclpy
from sysid_ros.srv import BatchSolve

# what every launch test shares (test/ros/launch/launch_support.py): skipped where launch,
# launch_ros or launch_testing is absent; DDS on this machine only, in this process's own domain
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_support import launch_test, launch_testing, package_launch, ready

pytestmark = pytest.mark.launch

WORK = Path(tempfile.mkdtemp(prefix="sysid_batch_launch_"))


@launch_test(timeout=600)  # [s] the run's own bounded waits come first
def generate_test_description():
    include = package_launch("batch_solver.launch.py", {
        "data_root": str(WORK / "bags"), "output_root": str(WORK / "results")})
    return ready(include)


class TestBatchSolverServes(unittest.TestCase):
    def test_refuses_a_missing_bag_and_keeps_running(self, proc_output):
        rclpy.init()
        try:
            node = rclpy.create_node("launch_test_client")
            client = node.create_client(BatchSolve, "/batch_solve")
            self.assertTrue(client.wait_for_service(timeout_sec=300.0))  # start-up at load 30: 25-45 s
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
        try:
            launch_testing.asserts.assertExitCodes(proc_info)  # 0: one SIGINT ends the node
        finally:
            shutil.rmtree(WORK, ignore_errors=True)
