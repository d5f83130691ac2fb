"""``trajectory_publisher``'s command thread (MIT commands, not lockstep) as a real process over
DDS, fed joint states by this test from a simulator's time base running at half speed: the
commands carry the states' time (not the wall clock's), stop once the states have been silent for
``state_timeout`` (the motors' watchdog then holds the arm) while the node keeps running, resume
with the states, and SIGINT ends the node and its thread with status 0. The node's parameter
service answers meanwhile (test_graph_lifecycle sets parameters during a run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from support.robots import TEST_ROBOTS
from support.waits import wait_until

rclpy = pytest.importorskip("rclpy")
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from sysid_ros.msg import MotorCommand  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "ur5e.xml"
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
START = np.array([0.1, -1.2, 1.0, -1.4, -1.5, 0.2])  # [rad] the arm's pose (held by this test)
TIMEOUT = 240.0  # [s] node start-up and first message on a loaded 2-core host
FACTOR = 0.5     # the states' seconds per wall second (a simulator at half speed)
STATE_TIMEOUT = 1.0  # [s, wall] the node's state_timeout
RATE = 200.0     # [Hz] commands


def _stamp(msg) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


@pytest.mark.timeout(900)
def test_commands_follow_the_states_clock_stop_with_the_states_and_end_with_the_node(ros_domain_id):
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "sysid_ros.nodes.trajectory_publisher", "--ros-args",
                             "-p", f"model_path:={MODEL}", "-p", "excitation_time:=30.0",
                             "-p", f"rate:={RATE}", "-p", f"state_timeout:={STATE_TIMEOUT}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    node = rclpy.create_node("bridge_stand_in", context=context)
    commands: list[tuple[float, float]] = []  # (command stamp [s, states' time], received [s, monotonic])
    node.create_subscription(MotorCommand, "/motor_command",
                             lambda m: commands.append((_stamp(m), time.monotonic())),
                             QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    pub = node.create_publisher(JointState, "/joint_states", 10)
    origin = time.monotonic()

    def states_time(at: float) -> float:
        return 1000.0 + FACTOR * (at - origin)

    silent = threading.Event()
    last_state = [0.0]
    stop = threading.Event()

    def publish_states() -> None:  # an arm at rest at 100 Hz, stamped on the simulator's time
        while not stop.wait(0.01):
            if silent.is_set():
                continue
            msg = JointState(name=JOINTS, position=START.tolist(), velocity=[0.0] * 6, effort=[0.0] * 6)
            last_state[0] = stamp = states_time(time.monotonic())
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round(stamp * 1e9), 1_000_000_000)
            pub.publish(msg)

    states = threading.Thread(target=publish_states, daemon=True)
    states.start()
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    def wait(condition, what: str) -> None:
        wait_until(condition, TIMEOUT, what, proc, output=lambda: "".join(lines))

    try:
        wait(lambda: any("excitation started" in line for line in lines), "the run to start")
        wait(lambda: len(commands) >= 2 * RATE, f"{2 * RATE:.0f} commands")
        first = commands[-1]
        wait(lambda: commands[-1][1] - first[1] >= 3.0, "3 s more of commands")
        running = list(commands)
        # silence: the commands stop within state_timeout of the last state, the node stays
        silent.set()
        quiet_from = time.monotonic()
        wait(lambda: time.monotonic() - max(quiet_from, commands[-1][1]) > 2.0, "the commands to stop")
        stopped = list(commands)
        last = last_state[0]
        silent.clear()
        wait(lambda: commands[-1][0] > last, "the commands to resume with the states")
        assert proc.poll() is None
        proc.send_signal(2)
        status = proc.wait(timeout=60.0)
    finally:
        stop.set()
        states.join(timeout=5)
        executor.shutdown()
        spinner.join(timeout=5)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
    log = "".join(lines)
    assert status == 0, log
    assert "Traceback" not in log and "did not end" not in log, log
    # the commands carry the states' time: half a second per wall second, measured between the
    # least-delayed commands of the window's first and last second (this test's own executor
    # delivers them late on a busy host, and in bursts)
    stamps = np.array([c[0] for c in running])
    received = np.array([c[1] for c in running])
    delay = states_time(received) - stamps  # [s of states' time] >= 0: sent before received
    ends = [np.flatnonzero((received >= first[1]) & (received <= first[1] + 1.0)),
            np.flatnonzero(received >= received[-1] - 1.0)]
    a, b = (i[np.argmin(delay[i])] for i in ends)
    slope = (stamps[b] - stamps[a]) / (received[b] - received[a])
    assert slope == pytest.approx(FACTOR, rel=0.1), slope
    assert np.all(np.diff(stamps) >= 0.0)  # never back in time
    # never more than StateClock's jump (0.25 s) ahead of the states: the time follows a lower
    # estimate within its slew (measured here at half speed and load 13-15: up to 0.15 s)
    assert np.all(stamps <= states_time(received) + 0.25), np.max(stamps - states_time(received))
    # silence: nothing stamped later than state_timeout of the states' time after the last state
    latest = max(c[0] for c in stopped)
    assert latest <= last + FACTOR * STATE_TIMEOUT + 0.02, (latest, last)
    assert len(stopped) > len(running)  # sent on until the timeout, then stopped
    assert re.search(r"excitation started: \d", log), log
