"""Sigmoid friction ``φ1/(1 + exp(−φ2(q̇ + φ3))) − φ1/(1 + exp(−φ2 φ3))`` (Gaz, Cognetti, Oliva,
Robuffo Giordano, De Luca, "Dynamic Identification of the Franka Emika Panda Robot With Retrieval
of Feasible Parameters Using Penalty-Based Optimization", IEEE RA-L 4(4) 2019): simulated as the
truth, identified with each joint's shape (φ2, φ3) found by the separable least-squares search,
and exported.

The truth: the 3-joint test arm without Coulomb friction, with viscous 0.3 N·m·s/rad, rotor
inertia 0.01 kg·m² and, on its three joints, the sigmoid friction that Gaz et al. 2019 identified
on the Panda's joints 1–3 (test/oracles/sigmoid_arm.py: φ1 0.54615, 0.87224, 0.64068 N·m; φ2
5.1181, 9.0657, 10.136 s/rad; φ3 0.039533, 0.025882, −0.04607 rad/s).
Noise-free data. Tolerances: φ1 within 2 %, φ2 within 3 %, φ3 within 3 % (or 1 mrad/s), viscous
within 2 %; leaving the sigmoid out, or putting Coulomb friction in its place, makes the relative
torque residual at least 20 times larger.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from oracles.sigmoid_arm import PHI_TRUE, SIGMOID_ARM
from support.friction_fits import fits_by_terms

from sysid_ros.cli import main as sysid
from sysid_ros.core import RobotModel
from sysid_ros.core.batch.multi_run import prepare_runs
from sysid_ros.core.data.bag import dataset_topics, write_bag
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.regressor import sigmoid_column, torque_regressor
from sysid_ros.core.model.robot import joint_terms
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.model.urdf_export import write_urdf
from sysid_ros.core.sim.synthetic import simulate_dataset

pytestmark = pytest.mark.slow  # a module fixture of several seconds

ARM = SIGMOID_ARM
TERMS = ("Fv", "Ia", "Fsig")


def dof_of(model: RobotModel, joint: str) -> int:
    return next(j.dof_adr for j in model.joints if j.name == joint)


@pytest.fixture(scope="module")
def recording():
    return simulate_dataset(RobotModel.from_xml_string(ARM), duration=20.0, seed=1)


@pytest.fixture(scope="module")
def fits(recording):
    return fits_by_terms(ARM, recording, (("sigmoid", TERMS), ("without", ("Fv", "Ia")),
                                          ("coulomb", ("Fc", "Fv", "Ia"))))


def test_model_reads_the_sigmoid_numerics():
    model = RobotModel.from_xml_string(ARM)
    assert "Fsig" in model.joint_terms
    for joint, (p1, p2, p3) in PHI_TRUE.items():
        assert model.nominal[model.index(f"{joint}.Fsig")] == p1
        assert model.sigmoid_shape[dof_of(model, joint)].tolist() == [p2, p3]
    assert model.sigmoid_of(model.nominal) == {j: list(p) for j, p in PHI_TRUE.items()}
    assert joint_terms("viscous,sigmoid", True) == ("Fv", "Fsig", "Ia")
    bad = ARM.replace('data="0.64068 10.136 -0.04607"', 'data="0.64068 -1 0"')
    with pytest.raises(ModelError, match=r"custom numeric 'sigmoid:j3': expected 3 finite values 'phi1 "
                       r"\[N m\] phi2 \[s/rad\] phi3 \[rad/s\]' with phi2 > 0, got \[0.64068, -1.0, 0.0\]"):
        RobotModel.from_xml_string(bad)


def test_sigmoid_column_is_zero_at_rest_and_in_the_regressor():
    assert sigmoid_column(np.zeros(3), 5.0, 0.04) == pytest.approx(np.zeros(3), abs=1e-15)
    model = RobotModel.from_xml_string(ARM, joint_terms=TERMS)
    q, dq, ddq = np.zeros(3), np.array([0.05, -0.2, 1.0]), np.zeros(3)
    y = torque_regressor(model, q, dq, ddq)
    for j, (joint, (_, p2, p3)) in enumerate(PHI_TRUE.items()):
        expected = 1.0 / (1.0 + np.exp(-p2 * (dq[j] + p3))) - 1.0 / (1.0 + np.exp(-p2 * p3))
        assert y[j, model.index(f"{joint}.Fsig")] == pytest.approx(expected, rel=1e-12)


def test_sigmoid_shape_and_amplitude_recovered(fits):
    prep, result = fits["sigmoid"]
    doc = result.diagnostics.extra["sigmoid"]
    beta = dict(zip(result.base.names, result.beta, strict=True))
    for joint, (p1, p2, p3) in PHI_TRUE.items():
        search = doc["search"]["joints"][joint]
        assert not search["at_search_edge"]
        assert search["phi2"] == pytest.approx(p2, rel=0.03)
        assert search["phi3"] == pytest.approx(p3, rel=0.03, abs=1e-3)
        assert beta[f"{joint}.Fsig"] == pytest.approx(p1, rel=0.02)
        assert beta[f"{joint}.Fv"] == pytest.approx(0.3, rel=0.02)
        phi = doc["phi"][joint]  # result.json's [φ1, φ2, φ3]: the exported φ1, the searched shape
        assert phi[0] == pytest.approx(p1, rel=0.02)
        assert phi[1:] == [search["phi2"], search["phi3"]]
        assert prep.target.model.sigmoid_shape[dof_of(prep.target.model, joint)].tolist() == phi[1:]


def test_without_the_sigmoid_term_the_fit_is_worse(fits):
    with_sigmoid = fits["sigmoid"][1].diagnostics.relative_error
    for label in ("without", "coulomb"):
        other = fits[label][1].diagnostics.relative_error
        assert other > 20 * with_sigmoid, (label, with_sigmoid, other)
        assert "sigmoid" not in fits[label][1].diagnostics.extra


def test_exported_model_holds_the_sigmoid_terms(fits, tmp_path):
    prep, result = fits["sigmoid"]
    model = prep.target.model
    theta = result.parameters.values
    text = model.to_mjcf(theta, tmp_path / "identified.xml").read_text()
    assert "Sigmoid friction (Gaz et al., RA-L 2019) p1/(1+exp(-p2*(qdot+p3))) - p1/(1+exp(-p2*p3))" in text
    back = RobotModel.from_mjcf(tmp_path / "identified.xml", joint_terms=TERMS)
    assert back.sigmoid_of(back.nominal) == model.sigmoid_of(theta)
    assert np.array_equal(back.sigmoid_shape, model.sigmoid_shape)
    urdf = write_urdf(model, theta, tmp_path / "identified.urdf").read_text()  # a comment states them
    for joint, (p1, p2, p3) in model.sigmoid_of(theta).items():
        assert f"{joint}: phi2 = {p2!r} s/rad, phi3 = {p3!r} rad/s" in urdf
        assert f"{joint}.Fsig = {p1!r}" in urdf


def test_several_runs_search_the_shape_once_on_their_stacked_rows(recording):
    second = simulate_dataset(RobotModel.from_xml_string(ARM), duration=10.0, seed=2)
    model = RobotModel.from_xml_string(ARM, joint_terms=TERMS)
    multi = prepare_runs([recording, second], [None, None], arm_target(model), Preprocessing())
    joints = multi.prep.sigmoid["joints"]
    for joint, (_, p2, p3) in PHI_TRUE.items():
        assert joints[joint]["phi2"] == pytest.approx(p2, rel=0.03)
        assert joints[joint]["phi3"] == pytest.approx(p3, rel=0.03, abs=1e-3)
        found = multi.prep.target.model.sigmoid_shape[dof_of(model, joint)].tolist()
        assert found == [joints[joint]["phi2"], joints[joint]["phi3"]]


def test_cli_fixed_sigmoid_shape(recording, tmp_path):
    bag = write_bag(tmp_path / "bag", dataset_topics(recording), truth=recording.truth)
    model = tmp_path / "arm.xml"
    model.write_text(ARM)
    out = tmp_path / "out"
    args = ["identify", str(bag), "--model", str(model), "--friction", "viscous,sigmoid", "--armature",
            "--out", str(out), "--no-plots"]
    # joint 2's shape for every joint: right for j2, wrong for j1 and j3, whose misfit biases the
    # shared parameters (the fit's relative error is 2.5 %): j2's amplitude within 5 %
    code = sysid([*args, "--sigmoid-shape", "9.0657,0.025882"])
    assert code == 0
    doc = json.loads((out / "result.json").read_text())
    sigmoid = doc["diagnostics"]["sigmoid"]
    assert sigmoid["search"] is None
    assert sigmoid["phi"]["j2"] == pytest.approx(list(PHI_TRUE["j2"]), rel=0.05)
    assert sigmoid["phi"]["j1"][1:] == [9.0657, 0.025882]
    assert 'name="sigmoid:j2"' in (out / "identified.xml").read_text()


def test_cli_rejects_a_bad_sigmoid_shape(tmp_path, capsys):
    model = tmp_path / "arm.xml"
    model.write_text(ARM)
    code = sysid(["identify", str(tmp_path / "none.csv"), "--model", str(model), "--friction", "sigmoid",
                  "--out", str(tmp_path / "out"), "--sigmoid-shape", "9"])
    assert code == 1
    assert capsys.readouterr().err.strip() == ("sysid identify: error: --sigmoid-shape: expected PHI2,PHI3 "
                                               "(steepness [s/rad], offset [rad/s]), got '9'")
    code = sysid(["identify", str(tmp_path / "none.csv"), "--model", str(model), "--friction", "sigmoid",
                  "--out", str(tmp_path / "out"), "--sigmoid-shape=-1,0"])
    assert code == 1
    assert capsys.readouterr().err.strip() == (
        "sysid identify: error: the sigmoid shape must be (phi2 > 0 s/rad, phi3 rad/s), finite (or none: "
        "searched), got [-1.0, 0.0]")
    assert not (tmp_path / "out").exists()
