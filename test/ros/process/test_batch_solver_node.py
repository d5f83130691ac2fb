"""The batch_solver node as a real process, called over DDS from a client in its own context."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from support.robots import TEST_ROBOTS
from support.waits import stop_process

rclpy = pytest.importorskip("rclpy")
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402
from sysid_ros.srv import BatchSolve  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from sysid_ros.core import RobotModel, base_parameters  # noqa: E402
from sysid_ros.core.data.bag import dataset_topics, write_bag  # noqa: E402
from sysid_ros.core.sim.synthetic import simulate_dataset  # noqa: E402

pytestmark = pytest.mark.ros
TIMEOUT = 60.0  # s: discovery on a loaded 2-core machine
#: [s] a whole solve (a sigmoid shape search took over 60 s at load 14): a bound on a hang, not a timing
SOLVE_TIMEOUT = 300.0
MODEL = TEST_ROBOTS / "ur5e.xml"


@pytest.fixture
def roots(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    model = RobotModel.from_mjcf(MODEL)
    ds = simulate_dataset(model, duration=8.0, seed=3)
    write_bag(data / "run1", dataset_topics(ds), truth=ds.truth)
    (data / "models").mkdir()
    shutil.copy(MODEL, data / "models" / MODEL.name)  # a model a request may name (model_root = data_root)
    return data, out


def start_batch_solver(domain_id: int, data, out, *args: str, model=MODEL) -> subprocess.Popen:
    """The batch_solver node as a process on loopback in ``domain_id``: bags under ``data``,
    results under ``out``, ``model``, no plots; ``args``: more ``--ros-args`` (``-p ...``,
    ``--params-file ...``)."""
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    return subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.nodes.batch_solver", "--ros-args",
         "-p", f"data_root:={data}", "-p", f"output_root:={out}", "-p", f"model_path:={model}",
         "-p", "plots:=false", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def node_process(roots, ros_domain_id):
    data, out = roots
    proc = start_batch_solver(ros_domain_id, data, out)
    yield proc
    stop_process(proc)


class Client:
    """A service client node in a private context, spun by its own thread."""

    def __init__(self, domain_id: int):
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("batch_solve_client", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        self.cli = self.node.create_client(BatchSolve, "/batch_solve")

    def call(self, **fields) -> BatchSolve.Response:
        return self.wait(self.call_async(**fields))

    def call_async(self, **fields):
        done = threading.Event()
        future = self.cli.call_async(BatchSolve.Request(**fields))
        future.add_done_callback(lambda _: done.set())
        return future, done

    @staticmethod
    def wait(pending):
        future, done = pending
        assert done.wait(SOLVE_TIMEOUT), f"no BatchSolve response in {SOLVE_TIMEOUT:g} s"
        return future.result()

    def close(self):
        self.executor.shutdown()
        self.thread.join(timeout=5)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def client(node_process, ros_domain_id):
    c = Client(ros_domain_id)
    assert c.cli.wait_for_service(timeout_sec=TIMEOUT), "batch_solve service not discovered"
    yield c
    c.close()


def test_service_solves_a_bag_and_survives_bad_requests(client, roots, node_process):
    _, out = roots
    latched: list = []
    got = threading.Event()
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
    client.node.create_subscription(ParameterEstimate, "/batch_solver/estimate",
                                    lambda m: (latched.append(m), got.set()), qos)
    markers: list = []
    got_markers = threading.Event()
    client.node.create_subscription(MarkerArray, "/batch_solver/markers",
                                    lambda m: (markers.append(m), got_markers.set()), qos)

    ok = client.call(bag_path="run1", method="pc_ls", armature=True, output_dir="first")
    assert ok.success, ok.message
    model = RobotModel.from_mjcf(MODEL, joint_terms=("Ia",))
    assert ok.estimate.method == "pc_ls" and ok.estimate.physically_consistent
    assert list(ok.estimate.names) == list(model.param_names)
    beta_true = base_parameters(model).of(model.nominal)  # noise-free bag of the nominal robot
    assert ok.estimate.rank == len(ok.estimate.base_values) == len(beta_true)
    np.testing.assert_allclose(ok.estimate.base_values, beta_true, atol=1e-4 * np.abs(beta_true).max())
    files = [Path(f) for f in ok.output_files]
    assert {f.name for f in files} == {"result.json", "torques.npz", "report.html", "identified.xml",
                                       "identified.urdf"}
    assert all(f.is_file() and f.is_relative_to(out) for f in files)
    assert ok.solve_time > 0
    assert got.wait(TIMEOUT) and latched[-1].method == "pc_ls"
    # ~/markers: cleared, then per body an ellipsoid and a CoM sphere, identified and nominal, in
    # the link frames (the noise-free solve of the nominal robot: identified ≈ nominal masses)
    assert got_markers.wait(TIMEOUT)
    array = markers[-1].markers
    assert array[0].action == Marker.DELETEALL
    bodies = [model.body_name(b) for b in model.param_bodies]
    for ns in ("identified", "identified_com", "nominal", "nominal_com"):
        assert [m.header.frame_id for m in array[1:] if m.ns == ns] == bodies, ns
    assert all(m.type == Marker.SPHERE and m.frame_locked for m in array[1:])

    bad = client.call(bag_path="missing", method="ols")
    assert not bad.success and "not found" in bad.message
    bad = client.call(bag_path="run1", method="magic")
    assert not bad.success and "unknown method 'magic'" in bad.message
    bad = client.call(bag_path="run1", output_dir="no_method")  # no silent default method
    assert not bad.success, bad.message
    assert bad.message.startswith("method is empty: expected one of ['ols', "), bad.message
    assert not (out / "no_method").exists()
    for outside in ("../out", "/etc"):
        bad = client.call(bag_path=outside, method="ols")
        assert not bad.success and "outside" in bad.message, bad.message
    bad = client.call(bag_path="run1", method="ols", output_dir="../../escape")
    assert not bad.success and "outside" in bad.message
    assert not (out.parent.parent / "escape").exists()

    for outside in ("../out/x.xml", str(MODEL)):  # request models are confined to model_root
        bad = client.call(bag_path="run1", method="ols", model_path=outside)
        assert not bad.success and bad.message.startswith(f"model_path {outside!r} resolves to "), bad.message
        assert "outside" in bad.message and bad.message.endswith("; refused"), bad.message

    again = client.call(bag_path="run1", method="ols", output_dir="second", model_path="models/ur5e.xml")
    assert again.success, again.message
    assert node_process.poll() is None  # still serving


def test_concurrent_requests_are_refused_clearly(client):
    first = client.call_async(bag_path="run1", method="dual_metric", armature=True, output_dir="a")
    second = client.call_async(bag_path="run1", method="ols", output_dir="b")
    responses = [client.wait(first), client.wait(second)]
    assert sum(r.success for r in responses) == 1, [r.message for r in responses]
    refused = next(r for r in responses if not r.success)
    assert refused.message.startswith("busy: another solve is running")


def test_node_exits_cleanly_on_sigint(node_process, client):
    node_process.send_signal(signal.SIGINT)
    assert node_process.wait(timeout=20) == 0


def test_torque_calibration_and_plausibility_parameters_reach_the_solve(tmp_path, ros_domain_id):
    """A bag whose effort is half the torque (a current log, 2 N·m per unit) solved by a node
    started with ``torque_scale:=[2.0]`` and ``mass_factor:=1.5``: the base parameters are the
    nominal robot's, and every exported mass lies within the bounds."""
    from dataclasses import replace

    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    model = RobotModel.from_mjcf(MODEL, joint_terms=("Ia",))  # the MJCF's armature is simulated
    ds = simulate_dataset(model, duration=8.0, seed=3)
    write_bag(data / "current", dataset_topics(replace(ds, tau=ds.tau / 2.0)), truth=ds.truth)
    proc = start_batch_solver(ros_domain_id, data, out, "-p", "torque_scale:=[2.0]", "-p", "mass_factor:=1.5")
    c = Client(ros_domain_id)
    try:
        assert c.cli.wait_for_service(timeout_sec=TIMEOUT), "batch_solve service not discovered"
        ok = c.call(bag_path="current", method="ols", armature=True, output_dir="scaled")
        assert ok.success, ok.message
    finally:
        c.close()
        log = stop_process(proc)
    beta_true = base_parameters(model).of(model.nominal)
    np.testing.assert_allclose(ok.estimate.base_values, beta_true, atol=1e-4 * np.abs(beta_true).max())
    values = dict(zip(ok.estimate.names, ok.estimate.values, strict=True))
    for b in model.param_bodies:
        name = f"{model.body_name(b)}.m"
        m0 = model.nominal[model.index(name)]
        assert m0 / 1.5 * (1 - 1e-6) <= values[name] <= 1.5 * m0 * (1 + 1e-6), (name, log[-2000:])


def test_vendor_csv_with_column_map_and_controller_description_solves_pc_iv(tmp_path, ros_domain_id):
    """An RTDE-style log (currents, ms, space separated, no gains) solved by pc_iv through a node
    started with ``csv_columns``, ``time_unit``, ``torque_scale`` and a velocity ``controller``
    (params file): the payload's mass within 1 %."""
    from support.rtde_log import COLUMNS, KT, PAYLOAD, numbers, write_rtde_log

    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    kv = write_rtde_log(data / "robot_data.csv", duration=8.0)
    params = tmp_path / "params.yaml"
    params.write_text(
        "batch_solver:\n  ros__parameters:\n"
        f"    csv_columns: '{COLUMNS}'\n    time_unit: ms\n"
        f"    controller: 'velocity:kv={numbers(kv)}'\n    torque_scale: [{numbers(KT)}]\n")
    proc = start_batch_solver(ros_domain_id, data, out, "--params-file", str(params))
    c = Client(ros_domain_id)
    try:
        assert c.cli.wait_for_service(timeout_sec=TIMEOUT), "batch_solve service not discovered"
        ok = c.call(bag_path="robot_data.csv", method="pc_iv", payload_body="wrist_3_link", output_dir="iv")
    finally:
        c.close()
        log = stop_process(proc)
    assert ok.success, (ok.message, log[-2000:])
    values = dict(zip(ok.estimate.names, ok.estimate.values, strict=True))
    assert values["payload.m"] == pytest.approx(PAYLOAD.mass, rel=0.01)


def test_several_bags_with_known_payloads_identify_drive_gains(tmp_path, ros_domain_id):
    """Three bags of the 3-joint arm of ``test_multi_run`` carrying 0, 2 and 5 kg, logged with
    drive-gain errors, named comma-separated in one request to a node started with
    ``known_payloads`` and ``drive_gains``: the gains come back within 1 % (result.json)."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core" / "batch"))
    from test_multi_run import ARM, GAINS, PAYLOADS, SEEDS

    from sysid_ros.core.batch.multi_run import parse_payloads

    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    (data / "arm.xml").write_text(ARM)
    model = RobotModel.from_mjcf(data / "arm.xml", joint_terms=("Fc", "Fv", "Ia"))
    for i, payload in enumerate(parse_payloads(PAYLOADS, 3)):
        ds = simulate_dataset(model, duration=8.0, seed=SEEDS[i], payload=payload)
        write_bag(data / f"run{i}", dataset_topics(ds.with_torque_calibration(list(1.0 / GAINS), None)))
    params = tmp_path / "params.yaml"
    params.write_text("batch_solver:\n  ros__parameters:\n"
                      f"    known_payloads: '{json.dumps(PAYLOADS)}'\n    drive_gains: true\n")
    proc = start_batch_solver(ros_domain_id, data, out, "--params-file", str(params), model=data / "arm.xml")
    c = Client(ros_domain_id)
    try:
        assert c.cli.wait_for_service(timeout_sec=TIMEOUT), "batch_solve service not discovered"
        ok = c.call(bag_path="run0,run1,run2", method="ols", friction=["coulomb", "viscous"],
                    armature=True, output_dir="joint")
        bad = c.call(bag_path="run0,run1", method="ols", output_dir="bad")
    finally:
        c.close()
        log = stop_process(proc)
    assert ok.success, (ok.message, log[-2000:])
    doc = json.loads((out / "joint" / "result.json").read_text())
    gains = doc["diagnostics"]["drive_gains"]["gains"]
    np.testing.assert_allclose([gains[j] for j in ("j1", "j2", "j3")], GAINS, rtol=0.01)
    assert len(doc["diagnostics"]["runs"]) == 3
    assert not bad.success
    assert bad.message == ("known payloads: expected a JSON list with one entry per run (2), got a list of 3")


def test_sigmoid_friction_in_a_request_is_searched_and_identified(tmp_path, ros_domain_id):
    """A bag of the 3-joint arm with the Panda's published sigmoid friction (oracles.sigmoid_arm),
    solved with ``friction: [viscous, sigmoid]``: each joint's shape is searched as ``sysid
    identify`` does, φ1 comes back within 2 % and φ2, φ3 within 3 % (result.json)."""
    import json

    from oracles.sigmoid_arm import PHI_TRUE, SIGMOID_ARM

    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    (data / "arm.xml").write_text(SIGMOID_ARM)
    ds = simulate_dataset(RobotModel.from_mjcf(data / "arm.xml"), duration=20.0, seed=1)
    write_bag(data / "run", dataset_topics(ds))
    proc = start_batch_solver(ros_domain_id, data, out, model=data / "arm.xml")
    c = Client(ros_domain_id)
    try:
        assert c.cli.wait_for_service(timeout_sec=TIMEOUT), "batch_solve service not discovered"
        ok = c.call(bag_path="run", method="ols", friction=["viscous", "sigmoid"], armature=True,
                    output_dir="sigmoid")
    finally:
        c.close()
        log = stop_process(proc)
    assert ok.success, (ok.message, log[-2000:])
    values = dict(zip(ok.estimate.names, ok.estimate.values, strict=True))
    phi = json.loads((out / "sigmoid" / "result.json").read_text())["diagnostics"]["sigmoid"]["phi"]
    for joint, (p1, p2, p3) in PHI_TRUE.items():
        assert values[f"{joint}.Fsig"] == pytest.approx(p1, rel=0.02)
        assert phi[joint][0] == values[f"{joint}.Fsig"]
        assert phi[joint][1:] == pytest.approx([p2, p3], rel=0.03)


def test_a_request_and_the_command_with_the_same_options_give_the_same_result(tmp_path, ros_domain_id):
    """BatchSolve and ``sysid identify`` run one use case (sysid_ros.app.identify): a log whose
    effort is half the torque (``torque_scale: [2.0]`` in the request), a validation recording
    (``validation_path``), and options the node lacked before, as parameters (differentiator
    savgol, outliers dropped), give the result.json of the same command line:
    the same exported parameters, fit and validation figures, to the last digit."""
    import json

    from sysid_ros.cli import main as sysid

    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    model = RobotModel.from_mjcf(MODEL)
    for name, seed, duration in (("run", 3, 8.0), ("val", 4, 4.0)):
        ds = simulate_dataset(model, duration=duration, seed=seed).with_torque_calibration(0.5)
        write_bag(data / name, dataset_topics(ds))
    options = {"differentiator": "savgol", "drop_outliers": "true"}
    proc = start_batch_solver(ros_domain_id, data, out,
                              *[a for k, v in options.items() for a in ("-p", f"{k}:={v}")])
    c = Client(ros_domain_id)
    try:
        assert c.cli.wait_for_service(timeout_sec=TIMEOUT), "batch_solve service not discovered"
        ok = c.call(bag_path="run", method="ols", torque_scale=[2.0], validation_path="val",
                    output_dir="node")
    finally:
        c.close()
        log = stop_process(proc)
    assert ok.message.startswith("ols: rank "), (ok.message, log[-2000:])
    code = sysid(["identify", str(data / "run"), "--model", str(MODEL), "--method", "ols",
                  "--torque-scale", "2", "--validate", str(data / "val"), "--differentiator", "savgol",
                  "--drop-outliers", "--no-plots", "--out", str(tmp_path / "cli")])
    assert code in (0, 3) and (ok.success or "accept_cost keeps them" in ok.message)
    node_doc = json.loads((out / "node" / "result.json").read_text())
    cli_doc = json.loads((tmp_path / "cli" / "result.json").read_text())
    assert node_doc["exported_parameters"] == cli_doc["exported_parameters"]
    assert node_doc["fit"] == cli_doc["fit"] and node_doc["validation"] == cli_doc["validation"]
    assert node_doc["diagnostics"]["data"] == cli_doc["diagnostics"]["data"]  # segments, grid, outliers
    assert node_doc["diagnostics"]["data"]["outliers"]["dropped"] is True
    # the scale was applied: the arm's mass as simulated (about half of it without the scale)
    exported = node_doc["exported_parameters"]["values"]
    true_mass = sum(v for k, v in zip(model.param_names, model.nominal, strict=True) if k.endswith(".m"))
    assert sum(v for k, v in exported.items() if k.endswith(".m")) == pytest.approx(true_mass, rel=0.05)


def test_an_online_method_is_replayed_with_the_estimators_options(roots, tmp_path, ros_domain_id):
    """``method: rls_logdet`` replays the online estimator on the bag as ``sysid identify --method
    rls_logdet`` does, its options the node's parameters of the estimator's names (here
    ``forgetting``): the same estimate and the replay's trajectory file."""
    import json

    from sysid_ros.cli import main as sysid

    data, out = roots
    proc = start_batch_solver(ros_domain_id, data, out, "-p", "forgetting:=0.999")
    c = Client(ros_domain_id)
    try:
        assert c.cli.wait_for_service(timeout_sec=TIMEOUT), "batch_solve service not discovered"
        ok = c.call(bag_path="run1", method="rls_logdet", output_dir="online")
    finally:
        c.close()
        log = stop_process(proc)
    assert ok.message.startswith("rls_logdet: rank "), (ok.message, log[-2000:])
    assert str(out / "online" / "estimates.csv") in ok.output_files
    assert ok.estimate.method == "rls_logdet"
    code = sysid(["identify", str(data / "run1"), "--model", str(MODEL), "--method", "rls_logdet",
                  "--forgetting", "0.999", "--no-plots", "--out", str(tmp_path / "cli")])
    assert code in (0, 3)
    node_doc = json.loads((out / "online" / "result.json").read_text())
    cli_doc = json.loads((tmp_path / "cli" / "result.json").read_text())
    # forgetting 0.999 instead of the default 1 changes the estimate: equal only if the node applied it
    assert node_doc["exported_parameters"] == cli_doc["exported_parameters"]
    assert node_doc["diagnostics"]["online"]["updates"] == cli_doc["diagnostics"]["online"]["updates"]
