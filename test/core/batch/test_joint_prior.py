"""Issue 14: the regularised methods regularise joint terms toward a stated prior, weakly (not
pinned to the model file's values)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.cli import main
from sysid_ros.core.batch.identify import IdentifyOptions, identify
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel, joint_terms
from sysid_ros.core.model.target import arm_target, batch_target, joint_prior_spec, with_joint_prior
from sysid_ros.core.sim.synthetic import simulate_dataset

UR5E = TEST_ROBOTS / "ur5e.xml"  # armature 0.1 kg·m² per joint in the file (and in the simulation)


@pytest.fixture(scope="module")
def model():
    return RobotModel.from_mjcf(UR5E, joint_terms=joint_terms("viscous", True))


def test_a_stated_prior_replaces_the_model_files_values(model, tmp_path):
    target = arm_target(model)
    assert target.prior[model.index("elbow_joint.Ia")] == pytest.approx(0.1)
    zero = with_joint_prior(target, "zero")
    assert zero.prior[model.n_body_params:].tolist() == [0.0] * (model.n_params - model.n_body_params)
    np.testing.assert_array_equal(zero.prior[:model.n_body_params], target.prior[:model.n_body_params])
    given = with_joint_prior(target, {"Ia": 0.5, "elbow_joint.Fv": 2.0})
    assert given.prior[model.index("wrist_3_joint.Ia")] == 0.5
    assert given.prior[model.index("elbow_joint.Fv")] == 2.0
    pan = model.index("shoulder_pan_joint.Fv")
    assert given.prior[pan] == target.prior[pan]
    path = tmp_path / "prior.json"
    path.write_text(json.dumps({"Fv": 1.5}))
    assert joint_prior_spec(str(path)) == {"Fv": 1.5} and joint_prior_spec("zero") == "zero"


@pytest.mark.parametrize(("spec", "message"), [
    ({"Fc": 1.0}, "joint-term prior 'Fc' names no identified joint term; expected a term (Fv, Ia)"),
    ({"elbow_joint.Ia": -1.0}, "joint-term prior elbow_joint.Ia = -1.0: must be >= 0"),
    ({"Ia": "a lot"}, "joint-term prior 'Ia': expected a finite number, got 'a lot'"),
])
@pytest.mark.slow
def test_bad_priors_are_refused_with_what_was_expected(model, spec, message):
    with pytest.raises(SysIdError) as err:
        with_joint_prior(arm_target(model), spec)
    assert str(err.value).startswith(message)


@pytest.mark.slow
def test_a_wrong_prior_does_not_pin_the_regularised_estimate(model):
    """The simulated arm has armature 0.1 and no damping; priors of 0.5 kg·m² and 3 N·m·s/rad
    (far off) move the wls_logdet estimate of well-excited joint terms by little."""
    ds = simulate_dataset(model, duration=6.0, rate=500, seed=3)
    wrong = batch_target(model, joint_prior={"Ia": 0.5, "Fv": 3.0})
    result = identify(ds, wrong, IdentifyOptions(method="wls_logdet"))
    for joint in ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint"):
        assert result.parameters[f"{joint}.Ia"] == pytest.approx(0.1, abs=0.02)
        assert abs(result.parameters[f"{joint}.Fv"]) < 0.3


@pytest.mark.slow
def test_the_cli_states_the_prior_in_result_json(tmp_path):
    bag, out, prior = tmp_path / "bag", tmp_path / "out", tmp_path / "prior.json"
    assert main(["simulate", str(UR5E), "--out", str(bag), "--duration", "4", "--rate", "500"]) == 0
    prior.write_text(json.dumps({"Ia": 0.2}))
    assert main(["identify", str(bag), "--model", str(UR5E), "--armature", "--method", "wls_pullback",
                 "--friction-prior", str(prior), "--no-plots", "--out", str(out)]) == 0
    doc = json.loads((out / "result.json").read_text())
    assert doc["target"]["joint_term_prior"]["elbow_joint.Ia"] == 0.2
    assert main(["identify", str(bag), "--model", str(UR5E), "--friction-prior", "nope.json",
                 "--out", str(tmp_path / "x")]) == 1
