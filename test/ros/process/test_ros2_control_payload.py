"""Issue 26 end to end over DDS: a UR5e-like arm under a simulated ros2_control stack carrying a
1.2 kg payload the estimator does not know, excited through JointTrajectory messages until the
payload's mass and CoM are determined to 2 %, the payload handed over as geometry_msgs/Inertia,
the recorded bag batch-solved by BatchSolve; and the ros2_control path's failure modes (a new
trajectory replacing a running one, joint names in another order, a controller that refuses
points beyond its limits, joint states that stop).

Real processes (``python -m sysid_ros.nodes.<node>``), real MuJoCo, real rosbag2 files. The main
run is lockstep (the simulator waits for the trajectory publisher, the estimator and the
recorder), so machine load slows it down without changing it; waits are bounded."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from support.robots import TEST_ROBOTS
from support.ros import SpinningNode
from support.waits import wait_with_nodes

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import Inertia  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Bool  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from sysid_ros.msg import ParameterEstimate, Precision  # noqa: E402
from sysid_ros.srv import BatchSolve  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from sysid_ros.core.model.robot import inertial_from_body_params  # noqa: E402
from sysid_ros.nodes.processes import NodeProcess  # noqa: E402

pytestmark = pytest.mark.ros
UR5E = str(TEST_ROBOTS / "ur5e.xml")
HOME = [0.0, -1.5, 1.5, -1.5, -1.5, 0.0]  # [rad] upright working pose
MODEL_ORDER = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
               "wrist_3_joint"]
# what a joint_state_broadcaster may publish: alphabetical, not the model's order
ALPHABETICAL = sorted(MODEL_ORDER)
MASS, COM = 1.2, np.array([0.02, -0.03, 0.06])  # [kg], [m] in wrist_3_link's frame
PAYLOAD = f"body=wrist_3_link,mass={MASS},com={','.join(str(c) for c in COM)}"
VMAX, AMAX = 1.2, 4.0  # [rad/s], [rad/s²] the controller's limits (the publisher is given the same)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
MAX_DURATION = 60.0  # [s, simulated] the run must stop by itself well before
BUDGET = 600.0  # [s wall] the whole lockstep run on a loaded 2-core machine


def sim_params(**extra) -> dict:
    return {"model_path": UR5E, "input": "joint_trajectory", "rate": 500.0, "publish_every": 1,
            "initial_position": HOME, "payload": PAYLOAD, "torque_noise": 0.05, "noise_seed": 4,
            "reject_beyond_limits": True, "max_velocity": VMAX, "max_acceleration": AMAX,
            "joint_order": ALPHABETICAL, **extra}


def publisher_params(**extra) -> dict:
    return {"model_path": UR5E, "interface": "joint_trajectory", "reliable_input": True,
            "max_velocity": VMAX, "max_acceleration": AMAX, "center": HOME, "seed": 1, **extra}


class Watcher:
    """The test's own node: every trajectory message sent, the done flag, the estimator's outputs."""

    def __init__(self, domain_id: int) -> None:
        self.ros = SpinningNode("ros2_control_test", domain_id)
        node = self.ros.node
        self.trajectories: list[JointTrajectory] = []
        self.done = threading.Event()
        self.estimate: ParameterEstimate | None = None
        self.precision: Precision | None = None
        self.payloads: list[Inertia] = []
        self.states: list[JointState] = []
        node.create_subscription(JointTrajectory, "/joint_trajectory_controller/joint_trajectory",
                                 self.trajectories.append, RELIABLE)
        node.create_subscription(Bool, "/trajectory_publisher/done",
                                 lambda m: self.done.set() if m.data else None, LATCHED)
        node.create_subscription(ParameterEstimate, "/estimator/estimate", self._on_estimate, LATCHED)
        node.create_subscription(Precision, "/estimator/precision", self._on_precision, LATCHED)
        node.create_subscription(Inertia, "/estimator/payload", self.payloads.append, LATCHED)
        node.create_subscription(JointState, "/joint_states", self.states.append, RELIABLE)
        self.trajectory_pub = node.create_publisher(
            JointTrajectory, "/joint_trajectory_controller/joint_trajectory", RELIABLE)

    def _on_estimate(self, msg) -> None:
        self.estimate = msg

    def _on_precision(self, msg) -> None:
        self.precision = msg

    def call(self, srv_type, name: str, request, procs, timeout: float = 120.0):
        client = self.ros.node.create_client(srv_type, name)
        wait_with_nodes(lambda: client.service_is_ready(), timeout, f"service {name}", procs)
        future = client.call_async(request)
        wait_with_nodes(future.done, timeout, f"the answer of {name}", procs)
        return future.result()

    def close(self) -> None:
        self.ros.close()


def start(name: str, domain: int, params: dict, tmp_path) -> NodeProcess:
    return NodeProcess(name, config=name, overrides=params, domain_id=domain, log=tmp_path / f"{name}.log")


@pytest.mark.timeout(BUDGET + 300)
def test_payload_identified_until_precision_and_handed_over(ros_domain_id, tmp_path):
    bag = tmp_path / "bag"
    watcher = Watcher(ros_domain_id)
    procs: dict[str, NodeProcess] = {}
    try:
        procs["recorder"] = start("recorder", ros_domain_id, {
            "output": str(bag), "topics": ["/joint_states", "/sim/true_parameters"],
            "types": ["sensor_msgs/msg/JointState", "sysid_ros/msg/ParameterEstimate"]}, tmp_path)
        procs["estimator"] = start("estimator", ros_domain_id, {
            "model_path": UR5E, "target": "wrist_3_link", "method": "rls_logdet", "prior": "uninformative",
            "weighting": "adaptive", "sample_rate": 500.0, "reliable_input": True,
            "payload_precision": 0.02}, tmp_path)
        procs["trajectory_publisher"] = start("trajectory_publisher", ros_domain_id, publisher_params(
            lockstep=True, until_precision=0.02, max_duration=MAX_DURATION), tmp_path)
        procs["batch_solver"] = start("batch_solver", ros_domain_id, {
            "data_root": str(tmp_path), "output_root": str(tmp_path / "out"), "model_path": UR5E,
            "plots": False}, tmp_path)
        procs["mujoco_sim"] = start("mujoco_sim", ros_domain_id, sim_params(
            # no lockstep_timeout: the recorder is stopped before the batch solve
            lockstep=True, real_time_factor=0.0, lockstep_timeout=0.0,
            lockstep_wait_for=["/estimator/progress", "/recorder/progress"]), tmp_path)
        live = list(procs.values())
        wait_with_nodes(watcher.done.is_set, BUDGET, "the trajectory publisher's done", live)
        # the simulator stops at the end of the last trajectory: the estimate is final once its
        # sample count has not changed for 3 s
        seen = [-1, time.monotonic()]

        def final() -> bool:
            count = -1 if watcher.estimate is None else watcher.estimate.sample_count
            if count != seen[0]:
                seen[:] = [count, time.monotonic()]
            return count > 0 and time.monotonic() - seen[1] > 3.0 and len(watcher.payloads) >= 1

        wait_with_nodes(final, 120.0, "the final estimate and the payload", live)
        commit = watcher.call(Trigger, "/estimator/commit_payload", Trigger.Request(), live)
        assert commit.success, commit.message
        wait_with_nodes(lambda: len(watcher.payloads) >= 2, 60.0, "the committed payload", live)
        assert watcher.estimate.sample_count == seen[0]  # the estimate the payload was made of
        # negative control: the controller refuses a waypoint beyond its speed limit
        n_sent = len(watcher.trajectories)
        fast = JointTrajectory(joint_names=MODEL_ORDER)
        fast.points.append(JointTrajectoryPoint(positions=HOME, velocities=[VMAX + 0.1] + [0.0] * 5))
        fast.points[0].time_from_start.sec = 1
        watcher.ros.publish(watcher.trajectory_pub, fast)
        stopped = watcher.call(Trigger, "/recorder/stop", Trigger.Request(), live)
        assert stopped.success, stopped.message
        bag_path = stopped.message.partition("; ")[0]
        solved = watcher.call(BatchSolve, "/batch_solve", BatchSolve.Request(
            bag_path=os.path.relpath(bag_path, tmp_path), method="ols", payload_body="wrist_3_link"), live,
            timeout=300.0)
    finally:
        codes = {name: proc.stop(timeout=90.0) for name, proc in procs.items()}  # slow exits under load
        watcher.close()
    logs = {name: proc.output for name, proc in procs.items()}
    assert all(code == 0 for code in codes.values()), (codes, {k: v[-3000:] for k, v in logs.items()})

    # the run stopped by itself once the payload was determined, well before max_duration
    pub_log = logs["trajectory_publisher"]
    assert "precision 0.02 reached by every required direction" in pub_log, pub_log[-3000:]
    assert "every required direction reached 0.02" in pub_log
    # the publisher's messages (the test's own refused one came after); in lockstep the last is an
    # empty trajectory: hold at rest for good, so the simulator goes on
    sent, hold = watcher.trajectories[:n_sent - 1], watcher.trajectories[n_sent - 1]
    assert not hold.points and all(msg.points for msg in sent)
    end = max(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec + msg.points[-1].time_from_start.sec
              + 1e-9 * msg.points[-1].time_from_start.nanosec for msg in sent)
    assert end < MAX_DURATION
    # every waypoint sent names the model's joints, carries positions, velocities and accelerations
    # within the controller's limits; the controller refused none of them, and did refuse the test's
    for msg in sent:
        assert list(msg.joint_names) == MODEL_ORDER
        v = np.array([p.velocities for p in msg.points])
        a = np.array([p.accelerations for p in msg.points])
        assert v.shape == a.shape == (len(msg.points), 6)
        assert np.abs(v).max() <= VMAX + 1e-9 and np.abs(a).max() <= AMAX + 1e-9
    sim_log = logs["mujoco_sim"]
    assert sim_log.count("trajectory rejected") == 1, sim_log[-3000:]
    assert ("trajectory rejected (1 so far): trajectory refused, beyond the controller's limits: point 0 "
            "(t=1.000 s): shoulder_pan_joint velocity 1.3 outside ±1.2 rad/s") in sim_log
    # the arm is back at the start pose (joint states name the joints alphabetically)
    last = watcher.states[-1]
    assert list(last.name) == ALPHABETICAL
    q = dict(zip(last.name, last.position, strict=True))
    np.testing.assert_allclose([q[n] for n in MODEL_ORDER], HOME, atol=0.01)

    # the online estimate: mass within 2 %, CoM within 5 mm; ~/payload equals it
    est = watcher.estimate
    theta = np.array(est.values)
    assert list(est.names[:1]) == ["payload.m"]
    assert theta[0] == pytest.approx(MASS, rel=0.02)
    assert np.linalg.norm(theta[1:4] / theta[0] - COM) < 0.005
    precision = watcher.precision
    assert precision.reached
    assert all(r <= 0.02 for r, q in zip(precision.relative_std, precision.required, strict=True) if q)
    m, com, inertia = inertial_from_body_params(theta)
    committed = watcher.payloads[-1]
    assert committed.m == pytest.approx(m, rel=1e-12)
    np.testing.assert_allclose([committed.com.x, committed.com.y, committed.com.z], com, atol=1e-12)
    np.testing.assert_allclose([committed.ixx, committed.ixy, committed.ixz, committed.iyy, committed.iyz,
                                committed.izz], inertia[np.triu_indices(3)], atol=1e-12)
    first = watcher.payloads[0]  # published by itself once the precision was reached
    assert first.m == pytest.approx(MASS, rel=0.02)
    assert np.linalg.norm([first.com.x - COM[0], first.com.y - COM[1], first.com.z - COM[2]]) < 0.005

    # the same bag, batch-solved by BatchSolve, within the same bounds
    assert solved.success, solved.message
    values = dict(zip(solved.estimate.names, solved.estimate.values, strict=True))
    mass = values["payload.m"]
    assert mass == pytest.approx(MASS, rel=0.02)
    com_b = np.array([values["payload.hx"], values["payload.hy"], values["payload.hz"]]) / mass
    assert np.linalg.norm(com_b - COM) < 0.005


def test_running_trajectory_replaced_and_names_in_any_order(ros_domain_id, tmp_path):
    """The simulated controller, alone in real time: a trajectory moving the shoulder to +0.5 rad
    over 3 s is replaced 1 s in by one (joint names in reverse order) going to -0.3 rad: the arm
    turns back before reaching +0.5 and settles at -0.3."""
    watcher = Watcher(ros_domain_id)
    sim = start("mujoco_sim", ros_domain_id, sim_params(payload="", lockstep=False), tmp_path)
    try:
        wait_with_nodes(lambda: len(watcher.states) > 10, 60.0, "joint states", [sim])

        def stamp_of(msg: JointState) -> float:
            return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec

        def trajectory(names, target, start: float, duration: float) -> JointTrajectory:
            msg = JointTrajectory(joint_names=names)
            pose = dict(zip(MODEL_ORDER, HOME, strict=True))
            pose["shoulder_pan_joint"] = target
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round(start * 1e9), 1_000_000_000)
            point = JointTrajectoryPoint(positions=[pose[n] for n in names], velocities=[0.0] * 6,
                                         accelerations=[0.0] * 6)
            point.time_from_start.sec, point.time_from_start.nanosec = divmod(round(duration * 1e9),
                                                                              1_000_000_000)
            msg.points.append(point)
            return msg

        t0 = stamp_of(watcher.states[-1]) + 0.5
        watcher.ros.publish(watcher.trajectory_pub, trajectory(MODEL_ORDER, 0.5, t0, 3.0))
        replacement = trajectory(list(reversed(MODEL_ORDER)), -0.3, t0 + 1.0, 1.5)
        watcher.ros.publish(watcher.trajectory_pub, replacement)

        def pan(msg: JointState) -> float:
            return dict(zip(msg.name, msg.position, strict=True))["shoulder_pan_joint"]

        wait_with_nodes(lambda: stamp_of(watcher.states[-1]) > t0 + 4.0, 120.0, "4 s of motion", [sim])
        during = [pan(m) for m in list(watcher.states) if t0 <= stamp_of(m) <= t0 + 4.0]
    finally:
        sim.stop(timeout=90.0)
        watcher.close()
    assert "trajectory rejected" not in sim.output
    # the first trajectory (quintic to 0.5 over 3 s) is at 0.5·(10·(1/3)³ − 15·(1/3)⁴ + 6·(1/3)⁵)
    # = 0.105 rad after 1 s; replaced then, the arm never gets near 0.5 and ends at -0.3
    assert max(during) < 0.2
    assert during[-1] == pytest.approx(-0.3, abs=0.01)


def test_publisher_stops_when_joint_states_stop(ros_domain_id, tmp_path):
    """Joint states silent for more than 1 s during a run (the simulator process is frozen): the
    trajectory publisher stops the run with an empty trajectory (the controller holds) and says
    why."""
    watcher = Watcher(ros_domain_id)
    sim = start("mujoco_sim", ros_domain_id, sim_params(payload="", lockstep=False), tmp_path)
    pub = start("trajectory_publisher", ros_domain_id, publisher_params(excitation_time=30.0), tmp_path)
    try:
        wait_with_nodes(lambda: len(watcher.trajectories) >= 1, 120.0, "the first trajectory", [sim, pub])
        os.kill(sim.proc.pid, signal.SIGSTOP)
        try:
            wait_with_nodes(lambda: any(not m.points for m in watcher.trajectories), 60.0,
                            "an empty (stop) trajectory", [pub])
        finally:
            os.kill(sim.proc.pid, signal.SIGCONT)
        count = len(watcher.trajectories)
        resumed = len(watcher.states)
        # 3 s of states at 500 Hz: the simulator takes the stop trajectory and the arm comes to rest
        wait_with_nodes(lambda: len(watcher.states) > resumed + 1500, 90.0, "joint states again", [sim, pub])
    finally:
        pub.stop(timeout=90.0)
        sim.stop(timeout=90.0)
        watcher.close()
    assert "no joint_states for 1." in pub.output or "no joint_states for" in pub.output, pub.output[-2000:]
    assert ("excitation stopped (an empty trajectory sent: the controller holds its position)"
            in pub.output)
    assert len(watcher.trajectories) == count  # nothing sent after the stop, even with states back
    # the frozen wall time is not simulated in a burst ahead of the stop trajectory: it is said
    assert "behind wall time (the process was stalled; stall 1)" in sim.output, sim.output[-2000:]
    stop = next(m for m in watcher.trajectories if not m.points)
    assert list(stop.joint_names) == MODEL_ORDER
    # the arm holds: the last second of joint states barely moves
    tail = np.array([m.velocity for m in watcher.states[-250:]])
    assert np.abs(tail).max() < 0.05


def test_follow_joint_trajectory_needs_control_msgs(ros_domain_id, tmp_path):
    """interface follow_joint_trajectory where control_msgs is not installed: the node says so in
    one line and exits with status 1 (where it is installed, this check does not apply)."""
    try:
        import control_msgs.action  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("control_msgs is installed here: the action interface is available")
    pub = start("trajectory_publisher", ros_domain_id, publisher_params(interface="follow_joint_trajectory"),
                tmp_path)
    try:
        pub.proc.wait(timeout=120)
    finally:
        code = pub.stop(timeout=90.0)
    assert code == 1, pub.output[-2000:]
    assert ("cannot start: interface follow_joint_trajectory needs control_msgs (the FollowJointTrajectory "
            "action), which is not installed here: install ros-$ROS_DISTRO-control-msgs, or use interface "
            "joint_trajectory") in pub.output
