"""The ``damiao_emulator`` node as a real process (the installed executable): the truth over
DDS, a clean exit on SIGINT, and a one-line error (exit code 1) for a bad joint table."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from support.damiao_rig import CONFIG
from support.robots import ROOT
from support.waits import stop_process

rclpy = pytest.importorskip("rclpy")
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402

pytestmark = pytest.mark.ros
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
SCRIPT = str(ROOT / "scripts" / "damiao_emulator")


def test_node_process_publishes_truth_and_exits_cleanly(ros_domain_id):
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    bad = subprocess.run([sys.executable, SCRIPT, "--ros-args", "--params-file", str(CONFIG),
                          "-p", "joints.can_ids:=[1, 2]"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert "cannot start: joints.can_ids has 2 entries, expected 6" in bad.stderr
    # the same file as the bridge's: the wiring from its /** section, the node's own section
    proc = subprocess.Popen([sys.executable, SCRIPT, "--ros-args", "--params-file", str(CONFIG),
                             "-p", "interface:=virtual", "-p", "channel:=process-test"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    node = rclpy.create_node("truth_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    received = threading.Event()
    truth: list = []
    node.create_subscription(ParameterEstimate, "/sim/true_parameters",
                             lambda m: (truth.append(m), received.set()), LATCHED)
    try:
        end = time.monotonic() + 60.0
        while not received.is_set() and time.monotonic() < end and proc.poll() is None:
            executor.spin_once(timeout_sec=0.1)
        assert received.is_set(), "no /sim/true_parameters from the emulator process"
        assert truth[0].names[0] == "link_1.m" and len(truth[0].names) == len(truth[0].values)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        output = stop_process(proc)
    assert proc.returncode == 0, output
    assert "emulating 6 Damiao motors on virtual:process-test" in output
    assert "realtime clock" in output  # the node's section of the file
