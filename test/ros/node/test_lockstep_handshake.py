"""The lockstep start handshake (``sysid_ros.nodes.lockstep``) between two DDS participants: the
rule for one endpoint (every peer its graph shows matched, at least one, the nodes it must reach
among them), a consumer's ``lockstep/ready`` and the simulator's start gate hearing it."""

from __future__ import annotations

import threading

import pytest
from support.ros import SpinningNode
from support.waits import wait_until

rclpy = pytest.importorskip("rclpy")
from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from sysid_ros.nodes.lockstep import ReadySignal, StartGate, unconnected  # noqa: E402
from sysid_ros.nodes.qos import PROGRESS  # noqa: E402

pytestmark = pytest.mark.ros
STREAM = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
WAIT = 60.0  # [s] discovery on a loaded host


def test_an_endpoint_is_connected_when_every_peer_in_its_graph_has_matched(ros_domain_id):
    sim, consumer = SpinningNode("sim", ros_domain_id), SpinningNode("consumer", ros_domain_id)
    incompatible = threading.Event()
    try:
        states = sim.node.create_publisher(JointState, "/joint_states", STREAM, event_callbacks=(
            PublisherEventCallbacks(incompatible_qos=lambda _info: incompatible.set())))
        assert unconnected(sim.node, states) == "a subscription on /joint_states in the graph"
        assert unconnected(sim.node, states, ["/consumer"]) == "a subscription of /consumer on /joint_states"
        reader = consumer.node.create_subscription(JointState, "/joint_states", lambda _m: None, STREAM)
        wait_until(lambda: unconnected(sim.node, states, ["/consumer"]) is None, WAIT, "the writer's match")
        wait_until(lambda: unconnected(consumer.node, reader) is None, WAIT, "the reader's match")
        # a peer that can never match (it asks for a latched topic) is in the graph: not connected
        consumer.node.create_subscription(JointState, "/joint_states", lambda _m: None, QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL),
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=lambda _info: None))
        wait_until(incompatible.is_set, WAIT, "the incompatible QoS event")
        wait_until(lambda: len(sim.node.get_subscriptions_info_by_topic("/joint_states")) == 2, WAIT,
                   "both subscriptions in the simulator's graph")
        assert unconnected(sim.node, states) == ("/joint_states: publisher matched with 1 of the 2 "
                                                 "subscription(s) in the graph")
    finally:
        consumer.close()
        sim.close()


def test_the_gate_opens_once_the_consumer_says_it_is_connected(ros_domain_id):
    sim, consumer = SpinningNode("sim", ros_domain_id), SpinningNode("consumer", ros_domain_id)
    woken = threading.Event()
    try:
        states = sim.node.create_publisher(JointState, "/joint_states", STREAM)
        progress = sim.node.create_subscription(Time, "/consumer/progress", lambda _m: None, PROGRESS)
        gate = StartGate(sim.node, states, [progress], notify=woken.set)
        assert gate.waits() == [
            "the node answering on /consumer/progress to say so on /lockstep/ready",
            "a subscription on /joint_states in the graph"]
        consumer.node.create_publisher(Time, "/consumer/progress", PROGRESS)
        reader = consumer.node.create_subscription(JointState, "/joint_states", lambda _m: None, STREAM)
        signal = ReadySignal(consumer.node, serves="/consumer/progress", states=reader)
        wait_until(woken.is_set, WAIT, "the consumer's ready message")
        assert signal.ready and signal.waits() == []
        wait_until(lambda: gate.waits() == [], WAIT, "the gate to open")
    finally:
        consumer.close()
        sim.close()


def test_a_controller_is_ready_only_once_its_commands_reach_the_simulator(ros_domain_id):
    """A subscription of another node (a test's, a viewer's) on the command topic does not make the
    trajectory publisher's command publisher connected: it must reach the node publishing the joint
    states."""
    sim, consumer = SpinningNode("sim", ros_domain_id), SpinningNode("controller", ros_domain_id)
    viewer = SpinningNode("viewer", ros_domain_id)
    try:
        sim.node.create_publisher(JointState, "/joint_states", STREAM)
        viewer.node.create_subscription(Time, "/command", lambda _m: None, STREAM)
        reader = consumer.node.create_subscription(JointState, "/joint_states", lambda _m: None, STREAM)
        command = consumer.node.create_publisher(Time, "/command", STREAM)
        signal = ReadySignal(consumer.node, serves="/command", states=reader, command=command)
        wait_until(lambda: signal.waits() == ["a subscription of /sim on /command"], WAIT,
                   "the controller to see the simulator and the viewer")
        assert not signal.ready
        sim.node.create_subscription(Time, "/command", lambda _m: None, STREAM)
        wait_until(lambda: signal.ready, WAIT, "the controller's ready message")
    finally:
        viewer.close()
        consumer.close()
        sim.close()
