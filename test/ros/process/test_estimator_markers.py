"""The estimator's ``~/markers`` (visualization_msgs/MarkerArray) as a real process over DDS: fed a
replayed simulated run (Panda carrying an unknown 5 kg payload in its hand), every marker array
it publishes must draw the estimate it published with the same stamp — the payload's CoM sphere at
h/m in the hand's frame, the ellipsoid's pose and diameters giving back the estimate's inertia
about the CoM (a solid ellipsoid of mass m and semi-axes a, b, c has the principal moments
m(b²+c²)/5, m(a²+c²)/5, m(a²+b²)/5) — computed here from the published numbers, not with the
package's marker code."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from support.replay import PacedReplay
from support.robots import TEST_ROBOTS
from support.ros import SpinningNode
from support.waits import stop_process

rclpy = pytest.importorskip("rclpy")
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.data.bag import dataset_topics, read_bag, write_bag  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402
from sysid_ros.nodes.qos import LATCHED  # noqa: E402

pytestmark = pytest.mark.ros
MODEL = TEST_ROBOTS / "panda.xml"
WANTED = 3  # marker arrays checked against their estimates


def _rotation(x: float, y: float, z: float, w: float) -> np.ndarray:
    """The rotation matrix of a unit quaternion (x, y, z, w)."""
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _expected(estimate: ParameterEstimate) -> tuple[float, np.ndarray, np.ndarray]:
    """``(m [kg], com (3,) [m], inertia about the CoM (3, 3) [kg·m²])`` of the payload estimate
    (``payload.{m,hx,hy,hz,Ixx,Ixy,Ixz,Iyy,Iyz,Izz}``: first moments and inertia about the hand's
    origin, in its frame)."""
    v = dict(zip(estimate.names, estimate.values, strict=True))
    m = v["payload.m"]
    com = np.array([v["payload.hx"], v["payload.hy"], v["payload.hz"]]) / m
    i_o = np.array([[v["payload.Ixx"], v["payload.Ixy"], v["payload.Ixz"]],
                    [v["payload.Ixy"], v["payload.Iyy"], v["payload.Iyz"]],
                    [v["payload.Ixz"], v["payload.Iyz"], v["payload.Izz"]]])
    return m, com, i_o - m * (com @ com * np.eye(3) - np.outer(com, com))  # parallel axes


def _check(markers: MarkerArray, estimate: ParameterEstimate) -> None:
    by_ns = {m.ns: m for m in markers.markers if m.action == Marker.ADD}
    assert markers.markers[0].action == Marker.DELETEALL
    assert set(by_ns) == {"identified", "identified_com"}, sorted(by_ns)  # a payload: no nominal
    m, com, i_com = _expected(estimate)
    for marker in by_ns.values():
        assert marker.header.frame_id == "hand" and marker.header.stamp == estimate.header.stamp
        p = marker.pose.position
        np.testing.assert_allclose([p.x, p.y, p.z], com, atol=1e-9)
        assert f"{m:.4g} kg" in marker.text
    sphere = by_ns["identified_com"]
    assert (sphere.scale.x, sphere.scale.y, sphere.scale.z) == (0.02, 0.02, 0.02)
    ellipsoid = by_ns["identified"]
    q = ellipsoid.pose.orientation
    assert np.hypot.reduce([q.x, q.y, q.z, q.w]) == pytest.approx(1.0, abs=1e-9)
    a2, b2, c2 = (np.array([ellipsoid.scale.x, ellipsoid.scale.y, ellipsoid.scale.z]) / 2) ** 2
    moments = m / 5 * np.array([b2 + c2, a2 + c2, a2 + b2])
    rot = _rotation(q.x, q.y, q.z, q.w)
    drawn = rot @ np.diag(moments) @ rot.T
    np.testing.assert_allclose(drawn, i_com, atol=1e-9 + 1e-6 * np.abs(i_com).max())
    assert ellipsoid.color.b > ellipsoid.color.r  # blue: a realizable body (red would say it is not)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A simulated run written as a real bag and read back (what gets replayed)."""
    model = RobotModel.from_mjcf(MODEL)
    payload = Payload("hand", 5.0, np.array([0.01, -0.02, 0.1]), np.diag([0.02, 0.03, 0.015]))
    ds = simulate_dataset(model, duration=6.0, seed=3, payload=payload,
                          sensor=SensorModel(torque_noise=0.05, seed=4))
    bag = write_bag(tmp_path_factory.mktemp("bags") / "payload_run", dataset_topics(ds), truth=ds.truth)
    return read_bag(bag)


def test_markers_draw_the_published_estimate(run, ros_domain_id):
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args",
         "-p", f"model_path:={MODEL}", "-p", "target:=hand", "-p", "method:=rls_logdet",
         "-p", "reliable_input:=true", "-p", "publish_rate:=20.0", "-p", "markers_rate:=5.0",
         "-p", "markers_frame:=links"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    side = SpinningNode("marker_check", ros_domain_id)
    node = side.node
    estimates: dict[tuple[int, int], ParameterEstimate] = {}
    pairs: list[tuple[MarkerArray, ParameterEstimate]] = []
    lock = threading.Lock()

    def on_estimate(msg: ParameterEstimate) -> None:
        with lock:
            estimates[(msg.header.stamp.sec, msg.header.stamp.nanosec)] = msg

    def on_markers(msg: MarkerArray) -> None:
        stamp = next((m.header.stamp for m in msg.markers if m.action == Marker.ADD), None)
        with lock:
            match = estimates.get((stamp.sec, stamp.nanosec)) if stamp is not None else None
            if match is not None and match.sample_count > 500:
                pairs.append((msg, match))

    node.create_subscription(ParameterEstimate, "/estimator/estimate", on_estimate,
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    node.create_subscription(MarkerArray, "/estimator/markers", on_markers, LATCHED)
    replay = PacedReplay(node, run)  # paced by the estimator's progress: nothing lost on a loaded host
    try:
        replay.wait(lambda: len(pairs) >= WANTED, proc=proc,
                    what=lambda: f"{len(pairs)} marker arrays matched an estimate of {len(estimates)}")
        with lock:
            checked = list(pairs)
        for markers, estimate in checked:
            _check(markers, estimate)
        final = checked[-1][1]  # and the estimate drawn is the payload's (truth: 5 kg)
        assert final.physically_consistent and final.values[0] == pytest.approx(5.0, rel=0.05)
    finally:
        side.close()
        print(stop_process(proc)[-4000:])
    assert proc.returncode == 0
