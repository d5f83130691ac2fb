"""The ``estimator`` node in process (private rclpy context and DDS domain) running the EKF on a
whole arm: the filter's own estimate of a short noisy run is inconsistent, yet the estimate the
node publishes is its projection, consistent, and ``~/save`` writes it with the projection's
report and an identified.xml."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from oracles.three_link_arm import three_link_arm
from support.ros import spin_in_background
from support.waits import wait_until

rclpy = pytest.importorskip("rclpy")
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.model.consistency import check_consistency  # noqa: E402
from sysid_ros.core.model.robot import joint_terms  # noqa: E402
from sysid_ros.core.online.projection import PROJECTED  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import simulate_dataset  # noqa: E402
from sysid_ros.nodes.estimator import EstimatorNode  # noqa: E402
from sysid_ros.nodes.qos import LATCHED  # noqa: E402

pytestmark = pytest.mark.ros
RATE = 250.0  # Hz
FRICTION = "coulomb,viscous"
TIMEOUT = 120.0  # s, a loaded 2-core machine


def test_the_estimator_node_publishes_and_saves_the_projected_arm(tmp_path, ros_domain_id):
    path = tmp_path / "three_link_arm.xml"
    path.write_text(three_link_arm())
    model = RobotModel.from_mjcf(str(path), joint_terms=joint_terms(FRICTION, False))
    # 2 s with the overview seed's test-stand noise (q 1 mrad, q̇ 0.01 rad/s, τ 0.05 N·m)
    ds = simulate_dataset(model, duration=2.0, seed=1, rate=RATE, sensor=SensorModel(
        position_noise=1e-3, velocity_noise=1e-2, torque_noise=0.05, seed=3))
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    params = {"model_path": str(path), "target": "arm", "friction": FRICTION, "method": "ekf",
              "sample_rate": RATE, "publish_rate": 20.0, "output_dir": str(tmp_path / "saved")}
    node = EstimatorNode(context=context,
                         parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    client = rclpy.create_node("ekf_projection_client", context=context)
    estimates: list = []
    client.create_subscription(ParameterEstimate, "/estimator/estimate", estimates.append, LATCHED)
    saver = client.create_client(Trigger, "/estimator/save")
    for k in range(len(ds)):  # the subscription's callback: queue the run, processed in one batch
        msg = JointState(name=list(ds.joint_names), position=ds.q[k].tolist(), velocity=ds.dq[k].tolist(),
                         effort=ds.tau[k].tolist())
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round((1.0 + ds.t[k]) * 1e9), 1_000_000_000)
        node._on_joint_state(msg, None)  # no MessageInfo: timed on arrival
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(client)
    stop_spinning = spin_in_background(executor)
    try:
        wait_until(lambda: node.backlog == 0 and estimates
                   and estimates[-1].sample_count == node.session.estimator.samples,
                   TIMEOUT, "the last estimate")
        raw = node.session.estimator.theta
        assert not check_consistency(model, raw).consistent  # the filter's own estimate
        final = estimates[-1]
        assert final.method == "ekf" and final.physically_consistent
        assert check_consistency(model, np.array(final.values)).consistent
        assert saver.wait_for_service(timeout_sec=TIMEOUT)
        future = saver.call_async(Trigger.Request())
        wait_until(future.done, TIMEOUT, "~/save")
        response = future.result()
        assert response.success, response.message
        result, mjcf = (Path(p) for p in response.message.split())
        doc = json.loads(result.read_text())
        projection = doc["diagnostics"]["online"]["projection"]  # the batch path's schema
        assert doc["diagnostics"]["consistency"]["consistent"] and projection["status"] == "optimal"
        assert projection["mahalanobis_distance"] > 0 and projection["violated_by_raw_estimate"]
        assert doc["diagnostics"]["status"] == "optimal" and doc["exported_parameters"]["from"] == PROJECTED
        saved = np.array([doc["exported_parameters"]["values"][n] for n in model.param_names])
        # the file says it identified from the samples the last message says (backlog 0: all processed)
        assert doc["diagnostics"]["n_samples"] == final.sample_count
        np.testing.assert_array_equal(saved, np.array(final.values))
        written = RobotModel.from_mjcf(str(mjcf), joint_terms=joint_terms(FRICTION, False))
        np.testing.assert_allclose(written.nominal, saved, rtol=1e-6, atol=1e-9)
    finally:
        stop_spinning()
        node.destroy_node()
        client.destroy_node()
        rclpy.try_shutdown(context=context)
