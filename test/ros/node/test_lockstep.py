"""Lockstep simulation: ``mujoco_sim`` advances only when the graph has caught up, so a run gives
the same samples whatever the load. Two runs of the real node processes (mujoco_sim in lockstep
+ trajectory_publisher in lockstep) are recorded by this test's own subscriber, which the
simulator waits for through its progress topic; in the second run that consumer is slow and
bursty (as a loaded machine makes it). The samples must be bit-identical and none may be missing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from support.robots import DEFAULT_ROBOT
from support.ros import spin_in_background

from sysid_ros.nodes.lockstep import ReadySignal
from sysid_ros.nodes.processes import NodeProcess
from sysid_ros.nodes.qos import PROGRESS as PROGRESS_QOS

pytestmark = [pytest.mark.ros, pytest.mark.slow]

PAYLOAD = "body=link_6,mass=0.6,com=0.01,-0.015,0.045"
PROGRESS = "/lockstep_test/progress"
RATE = 500.0
SIM_SECONDS = 3.0  # ramp in (0.5 s) and part of the excitation
TIMEOUT = 240.0    # s wall for one run on a loaded 2-core machine


class _Consumer:
    """Records every joint state and reports progress; ``slow``: answers in bursts, late."""

    def __init__(self, context, slow: bool) -> None:
        self.node = rclpy.create_node("lockstep_consumer", context=context)
        self.slow = slow
        self.samples: list[tuple[int, tuple, tuple, tuple]] = []
        self.enough = threading.Event()
        self._progress = self.node.create_publisher(Time, PROGRESS, PROGRESS_QOS)
        states = self.node.create_subscription(JointState, "/joint_states", self._on_state,
                                               QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                                                          history=HistoryPolicy.KEEP_ALL))
        # a consumer of one's own takes part in the simulator's start handshake as the nodes do
        self.ready = ReadySignal(self.node, serves=PROGRESS, states=states)

    def _on_state(self, msg: JointState) -> None:
        ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self.samples.append((ns, tuple(msg.position), tuple(msg.velocity), tuple(msg.effort)))
        if self.slow and len(self.samples) % 7 != 1:
            return  # progress every 7th sample only (within the 10-sample window): the sim waits
        if self.slow:
            time.sleep(0.01)  # a consumer that works in bursts (load emulation, not synchronisation)
        self._progress.publish(msg.header.stamp)
        if ns >= SIM_SECONDS * 1e9:
            self.enough.set()


def _run(domain_id: int, slow: bool, log_dir) -> list:
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    consumer = _Consumer(context, slow)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(consumer.node)
    stop_spinning = spin_in_background(executor)
    procs = []
    try:
        procs.append(NodeProcess("trajectory_publisher", config="trajectory_publisher", domain_id=domain_id,
                                 log=log_dir / f"tp_{slow}.log", overrides={
                                     "model_path": str(DEFAULT_ROBOT), "excitation_time": 10.0,
                                     "ramp_time": 0.5, "rate": RATE, "reliable_input": True,
                                     "lockstep": True, "lead_time": 0.02, "use_sim_time": True}))
        procs.append(NodeProcess("mujoco_sim", config="mujoco_sim", domain_id=domain_id,
                                 log=log_dir / f"sim_{slow}.log", overrides={
                                     "model_path": str(DEFAULT_ROBOT), "rate": RATE, "publish_every": 1,
                                     "real_time_factor": 0.0, "payload": PAYLOAD, "torque_noise": 0.02,
                                     "noise_seed": 3, "lockstep": True, "lockstep_wait_for": [PROGRESS],
                                     "lockstep_window": 0.02}))
        deadline = time.monotonic() + TIMEOUT
        while not consumer.enough.wait(0.2):
            for p in procs:
                p.check_running()
            assert time.monotonic() < deadline, f"{SIM_SECONDS} s simulated not reached in {TIMEOUT} s"
    finally:
        codes = [p.stop() for p in procs]
        stop_spinning()
        rclpy.try_shutdown(context=context)
    assert codes == [0, 0], [p.output[-2000:] for p in procs]
    return [s for s in consumer.samples if s[0] <= SIM_SECONDS * 1e9]


def test_lockstep_runs_are_identical_however_slow_the_consumer(ros_domain_id, tmp_path):
    fast = _run(ros_domain_id, slow=False, log_dir=tmp_path)
    slow = _run(ros_domain_id, slow=True, log_dir=tmp_path)
    expected = int(SIM_SECONDS * RATE) + 1
    for run in (fast, slow):
        stamps = np.array([s[0] for s in run])
        assert stamps.size == expected, f"{stamps.size} samples, expected {expected} (none lost)"
        assert stamps[0] == 0 and np.all(np.diff(stamps) == round(1e9 / RATE))
    q = np.array([s[1] for s in fast])
    assert np.ptp(q[int(RATE):], axis=0).max() > 0.05, "the arm did not move: no excitation reached the sim"
    assert q[0].tolist() == list(slow[0][1]) and not np.allclose(q[0], q[int(RATE)])  # motion from t = 0
    for a, b in zip(fast, slow, strict=True):
        assert a == b, f"runs differ at t = {a[0] * 1e-9:.3f} s"
