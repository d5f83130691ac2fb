"""Joint identification of an arm from runs with different known payloads (0, 2 and 5 kg, the
seed's multi-payload test) whose logged torque has a per-joint drive-gain error.

The arm: 3 joints (masses and sizes of a small desk arm, written for this test), payloads on its
last link. The logged torque is the true torque divided by gains 1.00, 1.06, 0.95 (torque
constants and gear ratios are known to a few per cent; the seed's table gives ±5 % for gear
ratios, ±2 % for calibrated current-to-torque). One run (with or without a payload) cannot
separate the gains from the inertial parameters: a common scale is free (Gautier & Briot,
J. Dyn. Sys., Meas., Control 136(5), 2014). Noise-free data. Tolerances: gains within 1 %;
significant base parameters (contribution >= 1e-3 of the torque norm) with a median error at
least 3 times below the best single run's; the scaled condition number of the rows with gain
columns at least 10 times below every single run's, whose least-squares gains collapse to 0 (the
trivial exact fit gains 0, β = −Bφ_L).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from oracles.three_link_arm import three_link_arm

from sysid_ros.cli import main as sysid
from sysid_ros.core import RobotModel
from sysid_ros.core.batch.identify import IdentifyOptions
from sysid_ros.core.batch.multi_run import (
    bare_truth,
    drive_gains,
    gain_rows,
    identify_runs,
    parse_payloads,
    prepare_runs,
    scaled_condition,
)
from sysid_ros.core.data.bag import dataset_topics, write_bag
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import DataError, IdentificationError
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset

ARM = three_link_arm()
GAINS = np.array([1.0, 1.06, 0.95])
PAYLOADS = [None, {"body": "link3", "mass": 2.0, "com": [0.3, 0.0, 0.0]},
            {"body": "link3", "mass": 5.0, "com": [0.3, 0.0, 0.0]}]
TERMS = ("Fc", "Fv", "Ia")
#: excitation seed of each run: every joint stays inside its ±2.5 rad range (a joint limit's
#: constraint force is not in the regressor)
SEEDS = (1, 2, 7)


@pytest.fixture(scope="module")
def runs():
    model = RobotModel.from_xml_string(ARM, joint_terms=TERMS)
    payloads = parse_payloads(PAYLOADS, 3)
    datasets = [simulate_dataset(model, duration=15.0, seed=seed, payload=p).with_torque_calibration(
        list(1.0 / GAINS), None) for seed, p in zip(SEEDS, payloads, strict=True)]
    return model, datasets, payloads


@pytest.fixture(scope="module")
def prepared(runs):
    model, datasets, payloads = runs
    target = arm_target(model)
    single = [prepare_runs([d], [p], target, Preprocessing())
              for d, p in zip(datasets, payloads, strict=True)]
    return target, single, prepare_runs(datasets, payloads, target, Preprocessing())


def _errors(target, multi, beta):
    """Relative errors [%] of the significant base parameters (contribution >= 1e-3)."""
    truth = target.base.of(target.model.nominal)
    w, rhs, _ = multi.prep.rows()
    significant = np.linalg.norm(w * truth, axis=0) / np.linalg.norm(rhs) >= 1e-3
    return 100 * np.abs(beta - truth)[significant] / np.abs(truth[significant])


def test_payload_list_is_checked():
    with pytest.raises(DataError, match=r"known payloads: expected a JSON list with one entry per run "
                       r"\(3\), got a list of 2"):
        parse_payloads([None, None], 3)
    with pytest.raises(DataError, match=r"known payload of run 2: expected keys body, mass, com\[, "
                       r"inertia\], got \['body', 'weight'\]"):
        parse_payloads([None, {"body": "link3", "weight": 2}], 2)
    assert parse_payloads(["body=link3,mass=2,com=0.3,0,0"], 1)[0].mass == 2.0
    assert isinstance(parse_payloads([PAYLOADS[1]], 1)[0], Payload)


def test_truth_of_a_payload_run_is_the_bare_arm(runs):
    """The stacked rows compare with the bare arm, whichever run comes first."""
    model, datasets, _ = runs
    truth = bare_truth(datasets[2].truth)["parameters"]
    assert datasets[2].truth["parameters"]["link3.m"] == pytest.approx(5.8)
    for name in ("link3.m", "link3.hx", "link3.Iyy"):
        assert truth[name] == pytest.approx(model.nominal[model.index(name)], abs=1e-12)


def test_gains_need_two_different_payloads(prepared):
    _, single, _ = prepared
    with pytest.raises(IdentificationError, match=r"drive gains need runs with at least two different "
                       r"known payloads .* got 1 run\(s\) with 1 distinct payload\(s\)"):
        drive_gains(single[2])


@pytest.mark.slow
def test_joint_identification_separates_gains_and_beats_single_runs(prepared):
    target, single, multi = prepared
    options = IdentifyOptions(method="ols")
    result, _, gains = identify_runs(multi, options, gains=True)
    np.testing.assert_allclose(gains, GAINS, rtol=0.01)
    doc = result.diagnostics.extra["drive_gains"]
    assert doc["gains"]["j2"] == pytest.approx(1.06, rel=0.01)
    masses = [r["payload"] and r["payload"]["mass"] for r in result.diagnostics.extra["runs"]]
    assert masses == [None, 2.0, 5.0]
    joint_err = np.median(_errors(target, multi, result.beta))
    single_err = [np.median(_errors(target, s, identify_runs(s, options)[0].beta)) for s in single]
    assert joint_err * 3 < min(single_err), (joint_err, single_err)
    # the rows with gain columns: nearly singular for one run, well conditioned for the three
    joint_cond = scaled_condition(gain_rows(multi)[0])
    single_cond = [scaled_condition(gain_rows(s)[0]) for s in single]
    assert joint_cond * 10 < min(single_cond), (joint_cond, single_cond)
    # one run: gains 0 and β = −Bφ_L fit its rows exactly, so least squares finds no gains at all
    for s in single:
        w, rhs, _ = gain_rows(s)
        estimate = 1.0 + np.linalg.lstsq(w, rhs, rcond=None)[0][target.base.rank:]
        assert np.all(np.abs(estimate) < 0.1), estimate
    assert doc["condition_number"] == pytest.approx(joint_cond)


@pytest.mark.slow
def test_cli_several_runs_with_known_payloads(runs, tmp_path):
    _, datasets, _ = runs
    (tmp_path / "arm.xml").write_text(ARM)
    bags = [str(write_bag(tmp_path / f"run{i}", dataset_topics(d))) for i, d in enumerate(datasets)]
    known = tmp_path / "known.json"
    known.write_text(json.dumps(PAYLOADS))
    out = tmp_path / "out"
    code = sysid(["identify", *bags, "--model", str(tmp_path / "arm.xml"), "--payloads", str(known),
                  "--drive-gains", "--friction", "coulomb,viscous", "--armature", "--out", str(out),
                  "--no-plots"])
    assert code == 0
    doc = json.loads((out / "result.json").read_text())
    gains = doc["diagnostics"]["drive_gains"]["gains"]
    np.testing.assert_allclose([gains[j] for j in ("j1", "j2", "j3")], GAINS, rtol=0.01)
    assert (out / "identified.xml").is_file()
    known.write_text(json.dumps(PAYLOADS[:2]))
    code = sysid(["identify", *bags, "--model", str(tmp_path / "arm.xml"), "--payloads", str(known),
                  "--out", str(tmp_path / "bad")])
    assert code == 1
    assert not (tmp_path / "bad").exists()
