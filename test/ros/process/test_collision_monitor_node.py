"""The collision_monitor node in the simulated closed loop, as node processes over real DDS:
mujoco_sim (lockstep, a 30 N push on link_6 at t = 1.5 s) ← trajectory_publisher, joint states →
collision_monitor, which the simulator waits for through its ``~/progress``. The node must report
the push within 20 ms of simulated time (DiagnosticArray events: joint, magnitude, time), nothing
before it, publish its residual and thresholds, and exit cleanly on SIGINT."""

from __future__ import annotations

import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray
from support.robots import DEFAULT_ROBOT
from support.ros import SpinningNode
from support.waits import wait_with_nodes

from sysid_ros.nodes.processes import NodeProcess
from sysid_ros.nodes.qos import LATCHED, PROGRESS

pytestmark = [pytest.mark.ros, pytest.mark.slow]

RATE = 500.0
PUSH_START = 1.5  # s, simulated
SIM_SECONDS = 1.8
THRESHOLD = 0.5  # N·m; a contact-free run of this robot stays below 0.15 (test_collision_monitor.py)
TIMEOUT = 150.0  # s wall, loaded 2-core machine


def test_node_reports_a_simulated_push_within_20ms(ros_domain_id, tmp_path):
    listener = SpinningNode("collision_monitor_test", ros_domain_id)
    node = listener.node
    events: list[DiagnosticArray] = []
    residuals: list[Float64MultiArray] = []
    thresholds: list[Float64MultiArray] = []
    progress = [-1.0]
    node.create_subscription(DiagnosticArray, "/collision_monitor/events", events.append,
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    node.create_subscription(Float64MultiArray, "/collision_monitor/residual", residuals.append, 1000)
    node.create_subscription(Float64MultiArray, "/collision_monitor/thresholds", thresholds.append, LATCHED)
    node.create_subscription(Time, "/collision_monitor/progress",
                             lambda m: progress.__setitem__(0, m.sec + 1e-9 * m.nanosec), PROGRESS)
    procs: dict[str, NodeProcess] = {}
    try:
        procs["collision_monitor"] = NodeProcess(
            "collision_monitor", config="collision_monitor", domain_id=ros_domain_id,
            log=tmp_path / "monitor.log",
            overrides={"model_path": str(DEFAULT_ROBOT), "thresholds": [THRESHOLD], "reliable_input": True})
        wait_with_nodes(lambda: "collision_monitor" in node.get_node_names(), 60,
                        "the collision_monitor node", procs.values())
        procs["trajectory_publisher"] = NodeProcess(
            "trajectory_publisher", config="trajectory_publisher", domain_id=ros_domain_id,
            log=tmp_path / "tp.log", overrides={
                "model_path": str(DEFAULT_ROBOT), "excitation_time": 10.0, "ramp_time": 0.5, "rate": RATE,
                "reliable_input": True, "lockstep": True, "lead_time": 0.02, "use_sim_time": True})
        procs["mujoco_sim"] = NodeProcess(
            "mujoco_sim", config="mujoco_sim", domain_id=ros_domain_id, log=tmp_path / "sim.log", overrides={
                "model_path": str(DEFAULT_ROBOT), "rate": RATE, "publish_every": 1, "real_time_factor": 0.0,
                "torque_noise": 0.02, "lockstep": True, "lockstep_wait_for": ["/collision_monitor/progress"],
                "lockstep_window": 0.02,
                "pushes": [f"body=link_6,force=0,0,-30,start={PUSH_START},duration=0.1"]})
        wait_with_nodes(lambda: progress[0] >= SIM_SECONDS, TIMEOUT, f"{SIM_SECONDS} s simulated",
                        procs.values())
    finally:
        codes = {name: p.stop() for name, p in procs.items()}
        for name, p in procs.items():  # shown by pytest if the test fails
            print(f"==== {name} (exit {codes[name]})\n{p.output[-3000:]}")
        listener.close()
    assert codes == dict.fromkeys(procs, 0)

    assert thresholds and list(thresholds[-1].data) == [THRESHOLD] * 6
    assert thresholds[-1].layout.dim[0].label == "joint1,joint2,joint3,joint4,joint5,joint6"
    assert len(residuals) >= SIM_SECONDS * RATE
    statuses = [(array.header.stamp.sec + 1e-9 * array.header.stamp.nanosec, s)
                for array in events for s in array.status]
    contacts = [(t, s) for t, s in statuses if s.message == "contact"]
    assert contacts, "no contact reported"
    assert all(t >= PUSH_START for t, _ in contacts), [(t, s.name) for t, s in contacts]
    first_t, first = min(contacts, key=lambda c: c[0])
    assert first_t - PUSH_START <= 0.020
    assert first.level == DiagnosticStatus.ERROR and first.name.startswith("collision_monitor: joint")
    values = {kv.key: kv.value for kv in first.values}
    assert float(values["time_s"]) == pytest.approx(first_t, abs=1e-9)
    assert abs(float(values["magnitude_nm"])) > THRESHOLD == float(values["threshold_nm"])
    assert values["joint"] == first.name.removeprefix("collision_monitor: ")
    released = [s for _, s in statuses if s.message == "released"]
    assert released and all(s.level == DiagnosticStatus.OK for s in released)  # the push ends at 1.6 s
    assert "contact on joint" in procs["collision_monitor"].output


def test_bad_parameters_stop_the_nodes_with_the_reason(ros_domain_id, tmp_path):
    monitor = NodeProcess("collision_monitor", config="collision_monitor", domain_id=ros_domain_id,
                          log=tmp_path / "monitor.log",
                          overrides={"model_path": str(DEFAULT_ROBOT), "thresholds": [0.1, 0.2]})
    sim = NodeProcess("mujoco_sim", config="mujoco_sim", domain_id=ros_domain_id, log=tmp_path / "sim.log",
                      overrides={"model_path": str(DEFAULT_ROBOT), "pushes": ["body=link_6,force=1,2,3"]})
    for proc in (monitor, sim):
        proc.proc.wait(timeout=120)
    assert (monitor.stop(), sim.stop()) == (1, 1)
    assert ("[CollisionMonitorNode] cannot start: expected 1 or 6 thresholds [N·m], got 2"
            in monitor.output), monitor.output[-1500:]
    assert ("[MujocoSimNode] cannot start: parameter pushes: expected a push body=NAME,force=FX,FY,FZ"
            "[,torque=TX,TY,TZ],start=S,duration=S [N, N·m, s], got 'body=link_6,force=1,2,3'"
            in sim.output), sim.output[-1500:]
