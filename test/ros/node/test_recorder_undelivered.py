"""A recorder stopped before its executor delivered anything keeps what DDS had received.

On a busy host a signal can reach the recorder while the joint states it subscribed to are in
DDS's history but its executor has not taken one yet: the bag must hold them, not "nothing was
recorded" (seen: `sysid demo` beside stress-ng --cpu 4, SIGTERM after the first progress line).
Here the recorder node is never spun: a publisher in another context sends states until every one
is acknowledged by the recorder's reliable reader, then the node is destroyed as
:func:`sysid_ros.nodes.spin` does after a signal, and the bag read back with rosbags holds them all,
in order. The effort lag the recorder was told (the Damiao bridge's) is in the bag's metadata."""

from __future__ import annotations

import pytest
import rclpy
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import Reader
from support.waits import wait_until

from sysid_ros.core.data.bag import bag_custom_data, typestore
from sysid_ros.core.data.effort_timing import BAG_KEY, DAMIAO_REPLY, declared_lag
from sysid_ros.nodes.recorder import RecorderNode

pytestmark = pytest.mark.ros
N = 50


def test_states_received_but_not_delivered_are_in_the_bag_after_destroy(tmp_path, ros_domain_id):
    from sensor_msgs.msg import JointState

    contexts = [rclpy.Context(), rclpy.Context()]
    for context in contexts:
        rclpy.init(context=context, domain_id=ros_domain_id)
    recorder = talker = None
    bag = tmp_path / "run"
    try:
        recorder = RecorderNode(context=contexts[0], parameter_overrides=[
            Parameter("output", value=str(bag)), Parameter("topics", value=["joint_states"]),
            Parameter("types", value=["sensor_msgs/msg/JointState"]),  # declared: subscribed at start
            Parameter("effort_lag", value=DAMIAO_REPLY)])
        talker = rclpy.create_node("talker", context=contexts[1])
        pub = talker.create_publisher(JointState, "/joint_states",
                                      QoSProfile(depth=N, reliability=ReliabilityPolicy.RELIABLE))
        wait_until(lambda: pub.get_subscription_count() >= 1, 60, "the recorder's reader matched")
        for k in range(N):
            msg = JointState(name=["j1"], position=[0.01 * k])
            msg.header.stamp.sec, msg.header.stamp.nanosec = 100, 2_000_000 * k
            pub.publish(msg)
        assert pub.wait_for_all_acked(rclpy.duration.Duration(seconds=60)), "not acknowledged"
        assert recorder._stats["/joint_states"].received == 0  # nothing delivered: never spun
        recorder.destroy_node()  # what spin does after SIGINT/SIGTERM
        path = recorder.finish()  # idempotent: the path of the bag destroy_node finished
        recorder = None
    finally:
        for node in (recorder, talker):
            if node is not None:
                node.destroy_node()
        for context in contexts:
            rclpy.try_shutdown(context=context)
    assert path is not None and path == bag and (bag / "metadata.yaml").is_file()
    store = typestore()
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.topic == "/joint_states"]
        got = [store.deserialize_cdr(raw, conns[0].msgtype)
               for _, _, raw in reader.messages(connections=conns)]
    assert [m.position[0] for m in got] == pytest.approx([0.01 * k for k in range(N)], abs=0)
    declared = bag_custom_data(bag)
    assert declared[BAG_KEY] == "0.5" and declared_lag({"effort_lag": declared[BAG_KEY]}) == DAMIAO_REPLY
