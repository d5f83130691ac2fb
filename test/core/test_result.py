"""Results as data: ParameterSet, the exported parameters of every method, result files that hold
exactly those parameters (and solve nothing), and the ParameterEstimate conversions."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from oracles.arm_2r import ARM_2R

from sysid_ros.core import RobotModel
from sysid_ros.core.batch.convex import CLOSED_FORM
from sysid_ros.core.batch.identify import PROJECTED, IdentifyOptions, prepare, run_method
from sysid_ros.core.batch.plausible import MOVED
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.report.files import summary, write_outputs
from sysid_ros.core.report.metrics import evaluate, truth_parameters
from sysid_ros.core.result import ParameterSet, estimate_result
from sysid_ros.core.sim.synthetic import simulate_dataset

pytestmark = pytest.mark.slow  # a module fixture of several seconds


@pytest.fixture(scope="module")
def prepared():
    # no Coulomb terms: a Coulomb friction of 0 sits on its bound, where a conic solver's answer
    # may be -1e-9 and the strict check says "not consistent"
    model = RobotModel.from_xml_string(ARM_2R, joint_terms=("Fv", "Ia"))
    ds = simulate_dataset(model, duration=6.0, seed=0)
    return prepare(ds, arm_target(model), Preprocessing())


def test_parameter_set_round_trip_and_blocks():
    ps = ParameterSet.of(["link1.m", "link1.hx", "joint1.Fv", "joint1.Ia"], [1.0, 0.1, 0.2, 0.01],
                         [0.01, math.nan, 0.001, 0.0])
    back = ParameterSet.from_dict(json.loads(json.dumps(ps.to_dict())))
    assert back == ps
    assert ps.blocks == {"link1": slice(0, 2), "joint1": slice(2, 4)}
    assert ps["link1.hx"] == 0.1
    assert np.isnan(ParameterSet.of(["a"], [1.0]).std).all()
    assert ParameterSet.from_dict({"a": 2.0})["a"] == 2.0
    with pytest.raises(SysIdError, match="as many names, values and std"):
        ParameterSet.of(["a", "b"], [1.0])
    with pytest.raises(SysIdError, match="unique"):
        ParameterSet.of(["a", "a"], [1.0, 2.0])
    with pytest.raises(KeyError):
        ps["nope"]


@pytest.mark.parametrize("method", ["ols", "pc_ls", "iv"])
def test_every_method_exports_consistent_parameters_that_reproduce_its_base_parameters(prepared, method):
    result = run_method(prepared, IdentifyOptions(method=method))
    target = prepared.target
    assert result.parameters.names == target.names and result.target == "arm"
    assert result.consistent and result.consistency.consistent
    # each method's own estimate (a base-parameter method's: its consistent fit), then moved within
    # its noise to the parameters nearest the model file (core.batch.plausible)
    assert result.parameters_from == f"{PROJECTED if method in ('ols', 'iv') else method}, {MOVED}"
    # the exported θ reproduces β within the estimate's noise: its torque on the rows differs from
    # the estimate's by no more than the confidence ellipsoid allows, its large base parameters by < 1 %
    export = result.diagnostics.extra["exported_model"]
    assert export["torque_change"] <= export["allowed_torque_change"] * (1 + 1e-6)
    big_hat = np.abs(result.beta) > 1e-2 * np.abs(result.beta).max()
    np.testing.assert_allclose(target.base.of(result.parameters.values)[big_hat], result.beta[big_hat],
                               rtol=1e-2)
    assert result.solver.optimal
    # pc_ls: noise-free data of a consistent truth, its optimum strictly inside the constraints
    assert result.solver.solver == (CLOSED_FORM if method == "pc_ls" else "lstsq")
    assert (result.solver.iterations is not None) == (method == "iv")
    # noise-free: the true base parameters, every one reproduced
    beta_true = target.base.of(truth_parameters(prepared.dataset.truth, target))
    big = np.abs(beta_true) > 1e-3 * np.abs(beta_true).max()
    np.testing.assert_allclose(result.beta[big], beta_true[big], rtol=1e-2)


def test_result_files_hold_exactly_the_exported_parameters_and_solve_nothing(prepared, tmp_path,
                                                                            monkeypatch):
    result = run_method(prepared, IdentifyOptions(method="ols"))
    evaluation = evaluate(result, prepared, validation=prepared)

    def no_solving(*args, **kwargs):
        raise AssertionError("the report writer must not solve anything")

    # (identify imports the convex programs where it solves one: patching their module covers it)
    monkeypatch.setattr("sysid_ros.core.batch.convex.least_squares_program", no_solving)
    paths, doc = write_outputs(tmp_path, result, prepared.target, evaluation, plots=False)
    assert {p.name for p in paths} == {"result.json", "identified.xml", "identified.urdf", "report.html",
                                       "torques.npz"}
    on_disk = json.loads((tmp_path / "result.json").read_text())
    assert on_disk == doc
    assert ParameterSet.from_dict(doc["parameters"]) == result.parameters
    assert list(doc["exported_parameters"]["values"].values()) == result.parameters.values.tolist()
    assert doc["exported_parameters"]["from"] == f"{PROJECTED}, {MOVED}"
    assert doc["diagnostics"]["consistency"]["consistent"] and doc["diagnostics"]["status"] == "optimal"
    assert doc["fit"] == doc["validation"] == evaluation.fit.errors.as_dict()
    # the fit figures: the exported parameters on every kept sample of every joint
    assert doc["fit"]["rows"] == prepared.y.size
    predicted = result.base.columns(prepared.x) @ result.base.of(result.parameters.values)
    assert doc["fit"]["relative_error_percent"] == pytest.approx(
        100 * np.linalg.norm(prepared.y - predicted) / np.linalg.norm(prepared.y), rel=1e-9)
    assert doc["truth_comparison"]["base"] and "divergence_to_truth" in doc["truth_comparison"]
    # MuJoCo reads back the exported parameters from identified.xml
    written = RobotModel.from_mjcf(tmp_path / "identified.xml", joint_terms=("Fv", "Ia"))
    np.testing.assert_allclose(written.nominal, result.parameters.values, rtol=1e-9, atol=1e-12)
    text = summary(result, evaluation)
    assert "physically consistent" in text and "validation relative error" in text and "vs truth" in text


def test_estimate_result_of_an_online_state(prepared):
    target = prepared.target
    theta = target.prior * 1.01
    result = estimate_result(target, theta, method="rls_logdet", std=np.full(target.n_params, 0.1),
                             rank=5, condition_number=12.0, residual_rms=0.03, n_samples=100)
    assert result.parameters.values.tolist() == theta.tolist() and result.consistent
    np.testing.assert_allclose(result.beta, target.base.of(theta))
    assert result.diagnostics.fit.rms == 0.03 and np.isnan(result.diagnostics.fit.rmse).all()
    assert result.diagnostics.n_samples == 100 and result.solver.solver == "rls_logdet"


def test_parameter_estimate_messages(prepared):
    pytest.importorskip("rclpy")
    msg_module = pytest.importorskip("sysid_ros.msg")
    from sysid_ros.nodes.conversions import to_estimate_msg, to_truth_msg, truth_from_msg

    result = run_method(prepared, IdentifyOptions(method="pc_ls"))
    msg = to_estimate_msg(result, divergence_to_prior=0.5, divergence_to_truth=0.25)
    assert isinstance(msg, msg_module.ParameterEstimate)
    assert list(msg.names) == list(result.parameters.names)
    assert list(msg.values) == result.parameters.values.tolist()
    assert len(msg.std_dev) == len(msg.values)
    assert list(msg.base_values) == result.beta.tolist() and msg.rank == result.diagnostics.rank
    assert msg.residual_rms == result.diagnostics.fit.rms  # pooled over every fitted row
    assert msg.physically_consistent and msg.method == "pc_ls" and msg.target == "arm"
    assert (msg.divergence_to_prior, msg.divergence_to_truth) == (0.5, 0.25)

    target = prepared.target
    theta = truth_parameters(prepared.dataset.truth, target)
    truth = to_truth_msg(target.names, theta)
    assert truth.method == "truth" and truth.physically_consistent and math.isnan(truth.residual_rms)
    np.testing.assert_array_equal(truth_parameters(truth_from_msg(truth), target), theta)
