"""The validation suite (`sysid validate`, sysid_ros.core.report.validation) and computed-torque
tracking (sysid_ros.core.sim.tracking): a good identification passes all six checks, a deliberately
wrong one fails recovery and tracking; the controller's inverse dynamics against the regressor."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT

from sysid_ros.cli import main
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.regressor import torque_regressor
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.report.validation import (
    CHECKS,
    Identified,
    Truth,
    ValidationOptions,
    check_names,
)
from sysid_ros.core.sim.simulation import default_gains
from sysid_ros.core.sim.synthetic import Payload, randomize, simulate_dataset, true_parameters
from sysid_ros.core.sim.tracking import ModelTorque, computed_torque, pd_alone, track

PAYLOAD = "body=link_6,mass=0.5,com=0,0,0.04"


def test_controller_inverse_dynamics_is_the_regressor():
    # τ = Y(q, q̇, q̈) θ with every joint term (Fc sign(q̇), Fv q̇, Fo, Ia q̈): the regressor
    # reproduces mj_inverse (test_regressor.py), the controller must reproduce the regressor
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    rng = np.random.default_rng(4)
    theta = randomize(model, model.nominal, 0.3, rng)
    for name in model.param_names:
        if name.endswith(".Fo"):
            theta[model.index(name)] = rng.uniform(-0.2, 0.2)
    inverse = ModelTorque(model, theta)
    q, dq, ddq = (rng.uniform(-1.0, 1.0, (5, model.nv)) for _ in range(3))
    expected = torque_regressor(model, q, dq, ddq) @ theta
    got = np.array([inverse(*row) for row in zip(q, dq, ddq, strict=True)])
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_computed_torque_with_the_true_parameters_tracks_far_better_than_pd():
    # the plant is the model itself without friction loss (MuJoCo's soft constraint is not the
    # model's sign(q̇) term): computed torque with its exact parameters leaves only the 2 ms
    # step's discretisation error
    model = RobotModel.from_mjcf(DEFAULT_ROBOT, joint_terms=("Fv", "Ia"))
    plant = copy.deepcopy(model.mj)
    plant.dof_frictionloss[:] = 0.0
    traj = FourierTrajectory.random(Limits.of(model), seed=5)
    exact = track(model, plant, traj, 2.0, computed_torque(model, model.nominal, bandwidth_hz=2.0))
    kp, kd = default_gains(model, bandwidth_hz=2.0)
    pd = track(model, plant, traj, 2.0, pd_alone(kp, kd))
    assert exact.rms < 1e-3  # rad
    assert exact.rms < 0.05 * pd.rms
    assert exact.q.shape == (1000, model.nv) and exact.saturated_steps == 0


def test_truth_from_a_simulated_bags_truth_json(tmp_path):
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    payload = Payload.parse(PAYLOAD)
    doc = simulate_dataset(model, duration=0.2, payload=payload).truth
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(doc))
    truth = Truth.load(path)
    assert truth.payload is not None and truth.payload.mass == 0.5
    assert np.allclose(truth.theta(model), true_parameters(model, payload), atol=1e-12)
    doc["parameters"]["link_2.m"] += 0.1
    path.write_text(json.dumps(doc))
    with pytest.raises(SysIdError, match=r"differ from its model file .* \(link_2\.m\): give the true "
                       "robot as an MJCF"):
        Truth.load(path)


def test_bad_inputs_are_refused_with_one_line(tmp_path, capsys):
    with pytest.raises(SysIdError, match="repeatability needs at least 2 experiments, got 1"):
        ValidationOptions(experiments=1)
    with pytest.raises(SysIdError, match="duration must be a finite number > 0, got -1"):
        ValidationOptions(duration=-1.0)
    payload_result = tmp_path / "payload.json"
    payload_result.write_text(json.dumps({"method": "pc_ls", "parameters": {"payload.m": 1.0},
                                          "target": {"kind": "payload", "body": "link_6"}}))
    with pytest.raises(SysIdError, match="the suite validates arm results, got a payload result "
                       r"\(identified on 'link_6'\)"):
        Identified.from_result(payload_result, DEFAULT_ROBOT)
    wrong = tmp_path / "result.json"
    wrong.write_text(json.dumps({"method": "ols", "parameters": {"link_1.m": 1.0}}))
    with pytest.raises(SysIdError, match=r"its parameters do not match .* with joint terms \[\] "
                       r"\(expected 60 names"):
        Identified.from_result(wrong, DEFAULT_ROBOT)
    assert main(["validate", "--truth", str(wrong), "--out", str(tmp_path / "v")]) == 1
    assert capsys.readouterr().err.strip() == ("sysid validate: error: --truth describes the robot a "
                                               "--result was identified on; give --result too")
    assert not (tmp_path / "v").exists()
    with pytest.raises(SysIdError, match=r"expected checks among \['parameter_recovery', .*\], got "
                       r"\['speed'\]"):
        check_names(["speed"])
    assert main(["validate", "--only", "recovery", "--out", str(tmp_path / "v")]) == 1
    assert "expected checks among" in capsys.readouterr().err
    assert not (tmp_path / "v").exists()


@pytest.mark.slow
def test_quick_suite_passes_a_good_identification_and_fails_a_wrong_one(tmp_path, capsys):
    out = tmp_path / "good"
    # a randomised truth (20 % off the nominal, 0.5 kg payload), identified with ols on 12 s
    assert main(["validate", "--quick", "--method", "ols", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    checks = [line for line in lines if line.startswith(("PASS", "FAIL"))]
    assert [c.split()[1] for c in checks] == list(CHECKS) and all(c.startswith("PASS") for c in checks)
    doc = json.loads((out / "validation.json").read_text())
    assert doc["passed"] and [c["name"] for c in doc["checks"]] == list(CHECKS)
    fig = {c["name"]: c["figure"] for c in doc["checks"]}
    assert fig["parameter_recovery"] < 15.0 and fig["torque_prediction"] < 3.0
    assert fig["computed_torque_tracking"] > 40.0 and fig["feedforward_vs_pd"] > 40.0
    assert fig["payload_generalisation"] < 5.0 and fig["repeatability"] < 10.0
    for name in ("tracking.png", "torque_prediction.png", "parameters.png", "truth.xml",
                 "identified/result.json"):
        assert (out / name).stat().st_size > 0

    # the same result with every link half as heavy (mass, first moment and inertia halved)
    result = json.loads((out / "identified" / "result.json").read_text())
    for name, item in result["parameters"].items():
        if name.startswith("link_"):
            item["value"] *= 0.5
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(result))
    code = main(["validate", "--quick", "--result", str(wrong), "--truth", str(out / "truth.xml"),
                 "--payload", PAYLOAD, "--out", str(tmp_path / "wrong"),
                 "--only", "parameter_recovery,computed_torque_tracking"])
    captured = capsys.readouterr()
    assert code == 1
    checks = [line for line in captured.out.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert [c.split()[:2] for c in checks] == [["FAIL", "parameter_recovery"],
                                               ["FAIL", "computed_torque_tracking"]]
    assert captured.err.strip().endswith("sysid validate: 2 of 2 checks failed: parameter_recovery, "
                                         "computed_torque_tracking")
    doc = json.loads((tmp_path / "wrong" / "validation.json").read_text())
    bad = {c["name"]: c["figure"] for c in doc["checks"]}
    assert bad["parameter_recovery"] > 40.0  # every mass-carrying base parameter off by about half
    assert bad["computed_torque_tracking"] < 40.0
