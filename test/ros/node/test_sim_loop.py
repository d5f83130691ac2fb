"""The closed loop in simulation as separate node processes over real DDS, started with the same
parameter files as ``launch/sim_identify.launch.py``: mujoco_sim ← trajectory_publisher, joint
states → estimator and recorder, in lockstep (the simulator waits for the commands and for the
estimator's and recorder's progress, so the run does not depend on the machine's load). The online
payload estimate must converge to the simulator's truth, the bag must be complete and without a
gap, and every process must exit cleanly on SIGINT."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from support.robots import DEFAULT_ROBOT
from support.ros import spin_in_background
from support.waits import wait_with_nodes
from sysid_ros.msg import MotorCommand, ParameterEstimate

from sysid_ros.core.data.bag import read_bag
from sysid_ros.core.model.consistency import logdet_divergence
from sysid_ros.core.report.payload import PayloadQuantities
from sysid_ros.core.sim.synthetic import Payload
from sysid_ros.nodes.processes import NodeProcess

pytestmark = [pytest.mark.ros, pytest.mark.slow]

PAYLOAD = "body=link_6,mass=0.6,com=0.01,-0.015,0.045"
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


@pytest.mark.timeout(1200)  # the bounded waits below: 16 simulated s of lockstep took >150 s at load 19
def test_processes_converge_record_and_exit_cleanly(tmp_path, ros_domain_id):
    bag = tmp_path / "bags" / "run"
    sim_time = {"use_sim_time": True}
    specs = {
        "recorder": {**sim_time, "output": str(bag)},
        "estimator": {**sim_time, "target": "link_6", "prior": "uninformative", "alpha": 100.0,
                      "torque_noise": 0.02, "reliable_input": True, "model_path": str(DEFAULT_ROBOT)},
        "trajectory_publisher": {**sim_time, "excitation_time": 16.0, "reliable_input": True,
                                 "model_path": str(DEFAULT_ROBOT), "lockstep": True, "lead_time": 0.02},
        "mujoco_sim": {"real_time_factor": 0.0, "payload": PAYLOAD, "torque_noise": 0.02,
                       "encoder_resolution": 3.8e-4, "model_path": str(DEFAULT_ROBOT), "lockstep": True,
                       "lockstep_wait_for": ["/estimator/progress", "/recorder/progress"]},
    }
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    node = rclpy.create_node("sim_loop_test", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    estimates: list[ParameterEstimate] = []
    done = threading.Event()
    node.create_subscription(ParameterEstimate, "/estimator/estimate", estimates.append, 10)
    node.create_subscription(Bool, "/trajectory_publisher/done", lambda m: m.data and done.set(), LATCHED)
    bad_command = node.create_publisher(MotorCommand, "/motor_command", 10)
    stop_spinning = spin_in_background(executor)
    procs: dict[str, NodeProcess] = {}
    try:
        for name, overrides in specs.items():  # consumers first, the simulator last
            procs[name] = NodeProcess(name, config=name, overrides=overrides, domain_id=ros_domain_id,
                                      log=tmp_path / f"{name}.log")
            if name != "mujoco_sim":
                wait_with_nodes(lambda n=name: n in node.get_node_names(), 120, f"node {name}",
                                procs.values())
        wait_with_nodes(lambda: len(estimates) > 0, 300, "a first estimate", procs.values())
        # a malformed command: refused with a reason, the simulator keeps running
        wait_with_nodes(lambda: bad_command.get_subscription_count() >= 2, 30,
                        "the simulator and recorder to match")
        bad_command.publish(MotorCommand(name=["elbow"], position=[0.0], velocity=[0.0], effort=[0.0]))
        wait_with_nodes(done.is_set, 600, "the end of the excitation", procs.values())
        # estimates are stamped with data time: wait for one covering a second past the end
        sim_end = estimates[-1].header.stamp.sec
        wait_with_nodes(lambda: estimates[-1].header.stamp.sec >= sim_end + 1, 60,
                        "the estimator to catch up")

        truth = Payload.parse(PAYLOAD)
        final = PayloadQuantities.of(estimates[-1].values)
        assert all(e.physically_consistent for e in estimates)
        assert estimates[-1].names[0] == "payload.m"
        assert abs(final.mass - truth.mass) / truth.mass < 0.03, final
        assert np.linalg.norm(final.com - truth.com) < 0.010, final
        scored = [e for e in estimates if np.isfinite(e.divergence_to_truth)]
        assert len(scored) > 0.9 * len(estimates)  # the simulator's latched truth reached the estimator
        # ... and the node scores each estimate against it (log-det divergence of the pseudo-inertias)
        assert scored[-1].divergence_to_truth == pytest.approx(
            logdet_divergence(np.array(scored[-1].values), truth.params), rel=1e-9)

        client = node.create_client(Trigger, "/recorder/stop")
        assert client.wait_for_service(timeout_sec=10)
        future = client.call_async(Trigger.Request())
        wait_with_nodes(future.done, 30, "the recorder to finish the bag")
        assert future.result().success and future.result().message == str(bag)
    finally:
        codes = {name: p.stop() for name, p in procs.items()}
        for name, p in procs.items():  # shown by pytest if the test fails
            print(f"==== {name} (exit {codes[name]})\n{p.output[-3000:]}")
        stop_spinning()
        rclpy.try_shutdown(context=context)
    assert codes == dict.fromkeys(specs, 0), {n: procs[n].output[-1500:] for n, c in codes.items() if c}
    assert "command rejected" in procs["mujoco_sim"].output and "elbow" in procs["mujoco_sim"].output

    data = read_bag(bag)
    assert sorted(p.name for p in bag.parent.iterdir()) == ["run"]  # no partial bag left
    assert data.joint_names == ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6")
    assert np.median(np.diff(data.t)) == pytest.approx(0.002, abs=1e-6)  # every 500 Hz state
    assert data.gaps() == [] and np.max(np.diff(data.t)) == pytest.approx(0.002, abs=1e-6)
    # the whole 20 s run of commands (the recorder subscribed before the first was published)
    assert data.command is not None and data.command.t[-1] - data.command.t[0] > 19.5
    np.testing.assert_allclose(data.truth["payload"]["params"], Payload.parse(PAYLOAD).params, rtol=1e-12)


@pytest.mark.parametrize("module, overrides, message", [
    ("mujoco_sim", {"payload": "body=gripper,mass=1,com=0,0,0"}, "unknown body 'gripper'"),
    ("mujoco_sim", {"payload": "mass=1"}, "expected a payload body=NAME"),
    ("trajectory_publisher", {"coefficients_file": "/nonexistent/c.json"},
     "expected JSON with q0, a, b, period"),
    ("recorder", {"storage": "zip"}, "storage must be 'mcap' or 'sqlite3', got 'zip'"),
    ("recorder", {"types": ["sensor_msgs/msg/JointState"]}, "types: expected one per topic (4"),
    ("recorder", {"types": ["nope/msg/X", "", "", ""]}, "'nope/msg/X' is not an importable message type"),
    ("estimator", {"weighting": "robust"}, "weighting must be one of ['fixed', 'adaptive'], got 'robust'"),
])
def test_bad_parameters_stop_a_node_with_the_reason(module, overrides, message, ros_domain_id, tmp_path):
    if module == "recorder":
        overrides = {**overrides, "output": str(tmp_path / "bag")}
    proc = NodeProcess(module, config=module, overrides=overrides, domain_id=ros_domain_id)
    try:
        proc.proc.wait(timeout=60)
    finally:
        code = proc.stop()
    assert code == 1 and message in proc.output and "Traceback" not in proc.output, proc.output
    assert list(tmp_path.iterdir()) == []
