"""launch_testing: the real sim_identify launch file under a pushed namespace ``/arm`` (what
``-r __ns:=/arm`` does for one node, for the whole graph): every topic, service and lockstep
progress moves under ``/arm``, nothing is published at the root, the recorder records the
namespaced topics, and every process exits with status 0. Runs on a ROS install with launch_testing
(``colcon test``, ``launch_test``); skipped where it is absent."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

import pytest
import rclpy
from rosbags.rosbag2 import Reader
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from sysid_ros.msg import ParameterEstimate

from sysid_ros.core.data.bag import partial_folders
from sysid_ros.nodes.qos import LATCHED

# what every launch test shares (test/ros/launch/launch_support.py): skipped where launch,
# launch_ros or launch_testing is absent; DDS on this machine only, in this process's own domain
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_support import launch, launch_ros, launch_test, launch_testing, package_launch, ready, spin_until

pytestmark = pytest.mark.launch

WORK = Path(tempfile.mkdtemp(prefix="sysid_ns_launch_"))
BAG = WORK / "run"
TIMEOUT = 900.0  # [s] for the whole run on a 2-core host at load 30


@launch_test(timeout=1200)  # [s] the run's own bounded waits come first
def generate_test_description():
    include = package_launch("sim_identify.launch.py", {
        "real_time_factor": "0", "excitation_time": "4", "bag": str(BAG)})
    graph = launch.actions.GroupAction([launch_ros.actions.PushRosNamespace("arm"), include])
    return ready(graph)


class TestNamespacedGraph(unittest.TestCase):
    def test_the_whole_graph_runs_under_the_namespace(self, proc_output):
        rclpy.init()
        try:
            node = rclpy.create_node("namespace_test")
            done, estimates = [], []
            node.create_subscription(Bool, "/arm/trajectory_publisher/done",
                                     lambda m: done.append(m.data), LATCHED)
            node.create_subscription(ParameterEstimate, "/arm/estimator/estimate", estimates.append, LATCHED)
            spin_until(node, lambda: True in done, TIMEOUT, "the end of the excitation under /arm")
            spin_until(node, lambda: bool(estimates), 60.0, "an estimate on /arm/estimator/estimate")
            topics = {name for name, _ in node.get_topic_names_and_types()}
            stop = node.create_client(Trigger, "/arm/recorder/stop")
            self.assertTrue(stop.wait_for_service(timeout_sec=30.0))
            future = stop.call_async(Trigger.Request())
            spin_until(node, future.done, 60.0, "the recorder to finish the bag")
            node.destroy_node()
        finally:
            rclpy.shutdown()
        ours = {t for t in topics if not t.startswith(("/rosout", "/parameter_events", "/clock"))}
        self.assertTrue(ours, topics)
        self.assertEqual({t for t in ours if not t.startswith("/arm/")}, set(), topics)
        for topic in ("/arm/joint_states", "/arm/motor_command", "/arm/estimator/progress",
                      "/arm/recorder/progress", "/arm/sim/true_parameters"):
            self.assertIn(topic, topics)
        self.assertTrue(future.result().success, future.result().message)
        with Reader(BAG) as reader:
            counts = {c.topic: c.msgcount for c in reader.connections}
        wanted = {"/arm/joint_states", "/arm/motor_command", "/arm/sim/true_parameters"}
        self.assertLessEqual(wanted, set(counts))
        self.assertEqual({t for t in counts if not t.startswith("/arm/")}, set(), counts)
        self.assertGreater(counts["/arm/joint_states"], 2000)  # 4 s of excitation at 500 Hz, and ramps


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_process_exits_cleanly_and_the_bag_stays(self, proc_info):
        try:
            launch_testing.asserts.assertExitCodes(proc_info)
            self.assertTrue((BAG / "metadata.yaml").is_file())
            self.assertEqual(partial_folders(BAG), [])
        finally:
            shutil.rmtree(WORK, ignore_errors=True)
