"""The inertia markers through a recorded MCAP bag: a node publishes the MarkerArray of the panda's
nominal inertias (latched, on /estimator/markers as the estimator does) over real DDS, the
recorder node (its default topics: it records /estimator/markers) writes an MCAP bag, and the bag
read back with rosbags holds every marker as built: frames, namespaces, ids, poses, sizes,
colours — what Foxglove draws from the bag."""

from __future__ import annotations

import numpy as np
import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from rosbags.rosbag2 import Reader
from support.robots import TEST_ROBOTS
from support.ros import spin_in_background
from support.waits import wait_until

from sysid_ros.core.data.bag import typestore
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.report.markers import inertia_markers, target_markers
from sysid_ros.nodes.markers import to_marker_array
from sysid_ros.nodes.qos import LATCHED
from sysid_ros.nodes.recorder import RecorderNode

pytestmark = pytest.mark.ros
TOPIC = "/estimator/markers"


def test_marker_array_round_trips_through_a_recorded_mcap_bag(tmp_path, ros_domain_id):
    from visualization_msgs.msg import MarkerArray

    model = RobotModel.load(str(TEST_ROBOTS / "panda.xml"))
    nominal, _ = target_markers(arm_target(model))
    std = 0.05 * np.abs(model.nominal)
    specs = inertia_markers(model.param_names, model.nominal * 1.1, std=std, nominal=nominal)
    sent = to_marker_array(specs)

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    executor = MultiThreadedExecutor(context=context)
    recorder = publisher = None
    stop_spinning = executor.shutdown  # until a thread spins it
    try:
        bag = tmp_path / "markers"
        recorder = RecorderNode(context=context, parameter_overrides=[
            Parameter("output", value=str(bag)), Parameter("discovery_period", value=0.05)])
        assert "estimator/markers" in recorder.get_parameter("topics").value  # recorded by default
        publisher = rclpy.create_node("estimator", context=context)
        pub = publisher.create_publisher(MarkerArray, "~/markers", LATCHED)
        executor.add_node(recorder)
        executor.add_node(publisher)
        stop_spinning = spin_in_background(executor)
        pub.publish(sent)  # latched: the recorder gets it whenever it subscribes
        wait_until(lambda: TOPIC in recorder._stats and recorder._stats[TOPIC].written >= 1, 60,
                   "the markers written into the bag")
        path = recorder.finish()
    finally:
        stop_spinning()
        for node in (recorder, publisher):
            if node is not None:
                node.destroy_node()
        rclpy.try_shutdown(context=context)

    store = typestore()
    with Reader(path) as reader:
        assert list(path.glob("*.mcap"))  # an MCAP file
        conns = [c for c in reader.connections if c.topic == TOPIC]
        assert len(conns) == 1 and conns[0].msgtype == "visualization_msgs/msg/MarkerArray"
        got = [store.deserialize_cdr(raw, conns[0].msgtype)
               for _, _, raw in reader.messages(connections=conns)]
    assert len(got) == 1
    markers = got[0].markers
    assert len(markers) == len(sent.markers) == 1 + 4 * len(model.param_bodies)
    assert markers[0].action == 3  # DELETEALL
    for m, spec in zip(markers[1:], specs, strict=True):
        assert (m.header.frame_id, m.ns, m.id, m.type, m.action) == (spec.frame, spec.ns, spec.id, 2, 0)
        p, o = m.pose.position, m.pose.orientation
        np.testing.assert_allclose([p.x, p.y, p.z], spec.position, rtol=0, atol=0)
        np.testing.assert_allclose([o.x, o.y, o.z, o.w], spec.orientation, rtol=0, atol=0)
        np.testing.assert_allclose([m.scale.x, m.scale.y, m.scale.z], spec.scale, rtol=0, atol=0)
        np.testing.assert_allclose([m.color.r, m.color.g, m.color.b, m.color.a], spec.rgba, rtol=1e-7)
        assert m.frame_locked and m.text == spec.text
