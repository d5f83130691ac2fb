"""Every interface of the package crosses real DDS between two nodes in separate contexts.

Each node has its own rclpy context (its own DDS participant) on this test's own domain id,
with discovery limited to localhost. Waits are bounded; nothing sleeps blindly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from support.ros import SpinningNode

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

try:
    from sysid_ros.msg import MotorCommand, ParameterEstimate
    from sysid_ros.srv import BatchSolve
except ImportError as exc:  # the interfaces come from `colcon build` (make test does it)
    raise ImportError(f"sysid_ros interfaces are not built or not on PYTHONPATH ({exc}); "
                      "run `make test` or `source tools/env.sh`") from exc

pytestmark = pytest.mark.ros
TIMEOUT = 20.0  # s, discovery plus delivery on a loaded 2-core machine
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


@contextmanager
def ros_node(name: str, domain_id: int) -> Iterator:
    """A node in a private context, spun by its own executor thread; torn down on exit (the spin
    thread stopped and joined before the executor and context go: support.ros.SpinningNode)."""
    ros = SpinningNode(name, domain_id)
    try:
        yield ros.node
    finally:
        ros.close()


def _receive(publisher_node, subscriber_node, msg_type, topic, message, qos):
    """Publish ``message`` periodically until the other node receives one; return it."""
    got: list = []
    event = threading.Event()

    def on_message(msg):
        got.append(msg)
        event.set()

    subscriber_node.create_subscription(msg_type, topic, on_message, qos)
    pub = publisher_node.create_publisher(msg_type, topic, qos)
    timer = publisher_node.create_timer(0.05, lambda: pub.publish(message))
    try:
        assert event.wait(TIMEOUT), f"no {msg_type.__name__} on {topic} within {TIMEOUT} s"
    finally:
        timer.cancel()
    return got[0]


def test_messages_cross_dds(ros_domain_id):
    with ros_node("sysid_test_sender", ros_domain_id) as a, \
            ros_node("sysid_test_receiver", ros_domain_id) as b:
        cmd = MotorCommand(name=["joint1", "joint2"], position=[0.1, -0.2], velocity=[1.0, 0.0],
                           effort=[0.5, -1.5], kp=[30.0, 20.0], kd=[1.0, 0.5])
        cmd.header.frame_id = "arm"
        got = _receive(a, b, MotorCommand, "/motor_command",
                       cmd, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        assert list(got.name) == ["joint1", "joint2"]
        assert list(got.position) == [0.1, -0.2] and list(got.effort) == [0.5, -1.5]
        assert list(got.kp) == [30.0, 20.0] and list(got.kd) == [1.0, 0.5]

        est = ParameterEstimate(method="rls_logdet", target="payload", names=["payload.m", "payload.hx"],
                                values=[5.0, 0.1], std_dev=[0.01, float("nan")], base_names=["payload.m"],
                                base_values=[5.0], rank=10, condition_number=12.5, residual_rms=0.03,
                                sample_count=1000, physically_consistent=True, divergence_to_prior=0.2,
                                divergence_to_truth=0.01)
        got = _receive(a, b, ParameterEstimate, "/parameter_estimate", est, LATCHED)
        assert got.method == "rls_logdet" and got.target == "payload"
        assert list(got.values) == [5.0, 0.1] and got.rank == 10 and got.sample_count == 1000
        assert got.physically_consistent and got.divergence_to_truth == 0.01

        js = JointState(name=["joint1"], position=[0.3], velocity=[0.1], effort=[2.5])
        got = _receive(a, b, JointState, "/joint_states", js, qos_profile_sensor_data)
        assert list(got.effort) == [2.5]

        diag = DiagnosticArray(status=[DiagnosticStatus(level=DiagnosticStatus.WARN, name="joint1",
                                                        message="temperature",
                                                        values=[KeyValue(key="mos_temp", value="71")])])
        got = _receive(a, b, DiagnosticArray, "/diagnostics", diag, QoSProfile(depth=10))
        assert got.status[0].values[0].value == "71"


def test_batch_solve_service_crosses_dds(ros_domain_id):
    with ros_node("sysid_test_server", ros_domain_id) as server, \
            ros_node("sysid_test_client", ros_domain_id) as client:
        def handle(request, response):
            response.success = request.method == "ols"
            response.message = f"solved {request.bag_path} with {request.method}"
            response.estimate.method = request.method
            response.estimate.names = list(request.friction)
            response.output_files = [f"/out/{request.output_dir}/result.json"]
            response.solve_time = 0.25
            return response

        server.create_service(BatchSolve, "/batch_solve", handle)
        cli = client.create_client(BatchSolve, "/batch_solve")
        assert cli.wait_for_service(timeout_sec=TIMEOUT), "BatchSolve service not discovered"
        request = BatchSolve.Request(bag_path="run1", method="ols", joint_states_topic="/joint_states",
                                     friction=["coulomb", "viscous"], armature=True, payload_body="",
                                     regularization_weight=0.1, output_dir="r1")
        done = threading.Event()
        future = cli.call_async(request)
        future.add_done_callback(lambda _: done.set())
        assert done.wait(TIMEOUT), "no BatchSolve response"
        response = future.result()
        assert response.success and response.message == "solved run1 with ols"
        assert list(response.estimate.names) == ["coulomb", "viscous"]
        assert list(response.output_files) == ["/out/r1/result.json"] and response.solve_time == 0.25
