"""launch_testing: the real sim_identify launch file runs the closed loop in lockstep; the online
payload estimate converges, the recorded bag holds every joint state without a gap, and every
process exits with status 0 on the one SIGINT launch sends. Arguments in the forms a user types
(``real_time_factor:=0``, ``lockstep:=1``, ``record:=True``). Runs on a ROS install with
launch_testing (``colcon test``, or ``launch_test``); skipped where it is absent (the same graph
is tested as processes in test/ros/node/test_sim_loop.py)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import pytest
import rclpy
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from sysid_ros.msg import ParameterEstimate

from sysid_ros.core.data.bag import partial_folders, read_bag
from sysid_ros.core.report.payload import PayloadQuantities
from sysid_ros.nodes.qos import LATCHED

# what every launch test shares (test/ros/launch/launch_support.py): skipped where launch,
# launch_ros or launch_testing is absent; DDS on this machine only, in this process's own domain
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_support import launch_test, launch_testing, package_launch, ready, spin_until

pytestmark = pytest.mark.launch

MASS, COM = 0.6, np.array([0.01, -0.015, 0.045])
EXCITATION = 12  # [s] of excitation, given as an integer
WORK = Path(tempfile.mkdtemp(prefix="sysid_sim_launch_"))
BAG = WORK / "run"
TIMEOUT = 900.0  # [s] for the whole run on a 2-core host at load 30 (lockstep: ~0.05 of real time)


@launch_test(timeout=1200)  # [s] the run's own bounded waits come first
def generate_test_description():
    include = package_launch("sim_identify.launch.py", {
        "payload": f"body=link_6,mass={MASS},com=0.01,-0.015,0.045", "target": "link_6",
        "real_time_factor": "0", "lockstep": "1", "alpha": "100", "excitation_time": str(EXCITATION),
        "record": "True", "bag": str(BAG)})
    return ready(include)


class TestClosedLoop(unittest.TestCase):
    def test_estimate_converges_and_the_bag_is_whole(self, proc_output):
        rclpy.init()
        try:
            node = rclpy.create_node("launch_test_listener")
            estimates: list = []
            clock, done = [0.0], [None]
            node.create_subscription(ParameterEstimate, "/estimator/estimate", estimates.append, 10)
            node.create_subscription(Clock, "/clock",
                                     lambda m: clock.__setitem__(0, m.clock.sec + 1e-9 * m.clock.nanosec), 10)

            def on_done(msg: Bool) -> None:
                if msg.data and done[0] is None:
                    done[0] = clock[0]

            node.create_subscription(Bool, "/trajectory_publisher/done", on_done, LATCHED)
            spin_until(node, lambda: done[0] is not None, TIMEOUT, "the end of the excitation")
            # estimates carry the data time of their last sample: wait for one covering the end
            spin_until(node, lambda: estimates and _stamp(estimates[-1]) >= done[0] + 1.0, 120.0,
                  "the estimate covering the end of the run")
            stop = node.create_client(Trigger, "/recorder/stop")
            self.assertTrue(stop.wait_for_service(timeout_sec=30.0))
            future = stop.call_async(Trigger.Request())
            spin_until(node, future.done, 60.0, "the recorder to finish the bag")
            node.destroy_node()
        finally:
            rclpy.shutdown()
        self.assertTrue(all(m.physically_consistent for m in estimates))
        final = PayloadQuantities.of(estimates[-1].values)
        self.assertLess(abs(final.mass - MASS) / MASS, 0.02, final)
        self.assertLess(np.linalg.norm(final.com - COM), 0.005, final)
        self.assertTrue(future.result().success)
        self.assertEqual(future.result().message, str(BAG))  # "; LOST DATA ..." if anything was lost
        data = read_bag(BAG)
        steps = np.diff(data.t)
        self.assertEqual(data.gaps(), [])
        self.assertAlmostEqual(float(steps.max()), 0.002, delta=1e-6)
        self.assertEqual(len(data), round((data.t[-1] - data.t[0]) / 0.002) + 1)  # every 500 Hz state
        self.assertGreater(data.t[-1] - data.t[0], EXCITATION)


def _stamp(msg: ParameterEstimate) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_process_exits_cleanly_and_the_bag_stays(self, proc_info):
        try:
            launch_testing.asserts.assertExitCodes(proc_info)  # 0: one SIGINT ends every node
            self.assertTrue((BAG / "metadata.yaml").is_file())
            self.assertEqual(partial_folders(BAG), [])
        finally:
            shutil.rmtree(WORK, ignore_errors=True)
