"""Stribeck friction ``Fs·exp(−|q̇|/q̇s)·sign(q̇)``: simulated as the truth, identified with its
velocity q̇s found by the separable least-squares search, and exported.

The truth: a 3-joint arm (masses and sizes of a small desk arm, written for this test) with
Coulomb 0.4 N·m, viscous 0.3 N·m·s/rad, rotor inertia 0.01 kg·m² and Stribeck terms of 0.6, 0.5,
0.3 N·m at q̇s = 0.08 rad/s (Stribeck velocities of 0.01–0.1 rad/s are typical of geared joints;
Gaz et al., RA-L 4(4) 2019, identify comparable magnitudes on the Panda). Noise-free data.
Tolerances: q̇s within 5 %, Fs within 10 %, Fc and Fv within 2 %; leaving the Stribeck term out
makes the relative torque residual at least 5 times larger.
"""

from __future__ import annotations

import json

import pytest
from oracles.three_link_arm import three_link_arm
from support.friction_fits import fits_by_terms

from sysid_ros.cli import main as sysid
from sysid_ros.core import RobotModel
from sysid_ros.core.data.bag import dataset_topics, write_bag
from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.robot import joint_terms
from sysid_ros.core.sim.synthetic import simulate_dataset

pytestmark = pytest.mark.slow  # a module fixture of several seconds

FS_TRUE = {"j1": 0.6, "j2": 0.5, "j3": 0.3}
QS_TRUE = 0.08
ARM = three_link_arm("""  <custom>
    <numeric name="stribeck:j1" data="0.6 0.08"/>
    <numeric name="stribeck:j2" data="0.5 0.08"/>
    <numeric name="stribeck:j3" data="0.3 0.08"/>
  </custom>
""")
TERMS = ("Fc", "Fv", "Ia", "Fs")


@pytest.fixture(scope="module")
def recording():
    return simulate_dataset(RobotModel.from_xml_string(ARM), duration=20.0, seed=1)


@pytest.fixture(scope="module")
def fits(recording):
    return fits_by_terms(ARM, recording, (("stribeck", TERMS), ("without", ("Fc", "Fv", "Ia"))))


def test_model_reads_the_stribeck_numerics():
    model = RobotModel.from_xml_string(ARM)
    assert model.stribeck_velocity == QS_TRUE
    for joint, fs in FS_TRUE.items():
        assert model.nominal[model.index(f"{joint}.Fs")] == fs
    assert joint_terms("coulomb,stribeck", False) == ("Fc", "Fs")
    bad = ARM.replace('data="0.3 0.08"', 'data="0.3"')
    with pytest.raises(ModelError, match=r"custom numeric 'stribeck:j3': expected 2 values 'Fs \[N m\] "
                       r"qs \[rad/s\]' with qs > 0, got \[0.3\]"):
        RobotModel.from_xml_string(bad)


def test_stribeck_velocity_and_friction_recovered(fits):
    prep, result = fits["stribeck"]
    doc = result.diagnostics.extra["stribeck"]
    assert doc["velocity"] == pytest.approx(QS_TRUE, rel=0.05)
    assert not doc["at_search_edge"]
    assert prep.target.model.stribeck_velocity == doc["velocity"]
    beta = dict(zip(result.base.names, result.beta, strict=True))
    for joint, fs in FS_TRUE.items():
        assert beta[f"{joint}.Fs"] == pytest.approx(fs, rel=0.10)
        assert beta[f"{joint}.Fc"] == pytest.approx(0.4, rel=0.02)
        assert beta[f"{joint}.Fv"] == pytest.approx(0.3, rel=0.02)


def test_without_the_stribeck_term_the_fit_is_worse(fits):
    with_fs = fits["stribeck"][1].diagnostics.relative_error
    without = fits["without"][1].diagnostics.relative_error
    assert without > 5 * with_fs, (with_fs, without)
    assert "stribeck" not in fits["without"][1].diagnostics.extra


def test_exported_model_holds_the_stribeck_terms(fits, tmp_path):
    prep, result = fits["stribeck"]
    model = prep.target.model
    theta = result.parameters.values
    path = model.to_mjcf(theta, tmp_path / "identified.xml")
    text = path.read_text()
    assert "Stribeck friction Fs*exp(-|qdot|/qs)*sign(qdot)" in text
    back = RobotModel.from_mjcf(path, joint_terms=TERMS)
    assert back.stribeck_velocity == model.stribeck_velocity
    for joint in FS_TRUE:
        assert back.nominal[back.index(f"{joint}.Fs")] == theta[model.index(f"{joint}.Fs")]


def test_cli_fixed_stribeck_velocity(recording, tmp_path):
    bag = write_bag(tmp_path / "bag", dataset_topics(recording), truth=recording.truth)
    model = tmp_path / "arm.xml"
    model.write_text(ARM)
    out = tmp_path / "out"
    code = sysid(["identify", str(bag), "--model", str(model), "--friction", "coulomb,viscous,stribeck",
                  "--armature", "--stribeck-velocity", "0.08", "--out", str(out), "--no-plots"])
    assert code == 0
    doc = json.loads((out / "result.json").read_text())
    assert doc["diagnostics"]["stribeck"] == {"velocity": 0.08, "searched": None}
    for joint, fs in FS_TRUE.items():  # at the true q̇s: as close as the search's
        assert doc["base_parameters"][f"{joint}.Fs"]["value"] == pytest.approx(fs, rel=0.10)
    assert 'name="stribeck:j1"' in (out / "identified.xml").read_text()


def test_online_replay_reports_the_stribeck_velocity_it_ran_with(recording, tmp_path):
    """An online replay (`--method rls_logdet`) with Stribeck terms says in result.json which q̇s
    its rows used, as the batch methods do."""
    bag = write_bag(tmp_path / "bag", dataset_topics(recording), truth=recording.truth)
    model = tmp_path / "arm.xml"
    model.write_text(ARM)
    out = tmp_path / "out"
    code = sysid(["identify", str(bag), "--model", str(model), "--friction", "coulomb,viscous,stribeck",
                  "--armature", "--stribeck-velocity", "0.08", "--method", "rls_logdet", "--out", str(out),
                  "--no-plots"])
    assert code == 0
    doc = json.loads((out / "result.json").read_text())
    assert doc["diagnostics"]["stribeck"] == {"velocity": 0.08, "searched": None}
