"""The metrics module: torque errors, base-parameter errors and truth decoding, each checked
against a direct computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracles.arm_2r import ARM_2R

from sysid_ros.core import RobotModel
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.target import arm_target, payload_target
from sysid_ros.core.report.metrics import (
    base_parameter_errors,
    ncc,
    torque_errors,
    truth_parameters,
)
from sysid_ros.core.sim.synthetic import Payload


def test_torque_errors_match_a_direct_computation():
    rng = np.random.default_rng(0)
    measured = rng.normal(size=(200, 3))
    predicted = measured + 0.1 * rng.normal(size=(200, 3))
    mask = rng.uniform(size=(200, 3)) > 0.2
    mask[:, 2] = False  # a joint without rows
    e = torque_errors(measured, predicted, mask=mask)
    r = np.where(mask, measured - predicted, np.nan)
    np.testing.assert_allclose(e.rmse[:2], np.sqrt(np.nanmean(r[:, :2] ** 2, axis=0)), rtol=1e-13)
    assert math.isnan(e.rmse[2]) and math.isnan(e.ncc[2])
    assert e.rms == pytest.approx(np.sqrt(np.nanmean(r**2)), rel=1e-13)
    rel = 100 * np.sqrt(np.nansum(r**2)) / np.linalg.norm(measured[mask])
    assert e.relative == pytest.approx(rel, rel=1e-13)
    for j in range(2):
        m = mask[:, j]
        assert e.ncc[j] == pytest.approx(np.corrcoef(measured[m, j], predicted[m, j])[0, 1], rel=1e-12)
        assert e.relative_joint[j] == pytest.approx(
            100 * np.linalg.norm((measured - predicted)[m, j]) / np.linalg.norm(measured[m, j]), rel=1e-13)
    assert e.n_rows == int(mask.sum())
    # the same rows stacked, with their joint index: the same figures
    joint = np.broadcast_to(np.arange(3), measured.shape)[mask]
    rows = torque_errors(measured[mask], predicted[mask], joint=joint, n_joints=3)
    np.testing.assert_allclose(rows.rmse, e.rmse, rtol=1e-13)
    assert rows.rms == pytest.approx(e.rms, rel=1e-13)
    assert rows.relative == pytest.approx(e.relative, rel=1e-13)
    doc = e.as_dict()
    assert doc["torque_rmse"][2] is None and doc["relative_error_percent"] == pytest.approx(e.relative)
    with pytest.raises(SysIdError, match="differ in shape"):
        torque_errors(measured, predicted[:, :2])


def test_ncc_is_pearson_per_column_and_nan_without_variation():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(50, 2)), rng.normal(size=(50, 2))
    b[:, 1] = 1.0
    out = ncc(a, b)
    assert out[0] == pytest.approx(np.corrcoef(a[:, 0], b[:, 0])[0, 1], rel=1e-12)
    assert math.isnan(out[1])


def test_base_parameter_errors_leave_negligible_truths_out():
    true = np.array([2.0, -0.5, 1e-8, 0.001])
    est = np.array([2.02, -0.5, 3e-8, 0.0011])
    e = base_parameter_errors(est, true, names=("a", "b", "c", "d"))
    np.testing.assert_allclose(e.relative[[0, 1, 3]], [1.0, 0.0, 10.0], atol=1e-9)
    assert math.isnan(e.relative[2])  # |true| < 1e-6: absolute error only
    np.testing.assert_allclose(e.absolute, np.abs(est - true))
    assert e.max_relative == pytest.approx(10.0) and e.median_relative == pytest.approx(1.0)
    relative_floor = base_parameter_errors(est, true, atol=0.0, rtol=1e-3)  # 1e-3 of the largest
    assert np.isnan(relative_floor.relative[[2, 3]]).all()
    assert relative_floor.max_relative == pytest.approx(1.0)
    assert e.as_dict()["c"]["relative_error_percent"] is None


def test_truth_parameters_decode_a_truth_document():
    model = RobotModel.from_xml_string(ARM_2R)
    arm = arm_target(model)
    truth = {"parameters": {"upper.m": 1.5, "not_a_parameter": 3.0}, "payload": None}
    theta = truth_parameters(truth, arm)
    expected = model.nominal.copy()
    expected[model.index("upper.m")] = 1.5
    np.testing.assert_array_equal(theta, expected)  # unnamed parameters keep the nominal values
    payload = Payload.parse("body=fore,mass=0.4,com=0.01,0,0.02")
    target = payload_target(model, "fore")
    doc = {"parameters": {}, "payload": {"params": payload.params.tolist()}}
    np.testing.assert_array_equal(truth_parameters(doc, target), payload.params)
    assert truth_parameters(None, arm) is None
    assert truth_parameters({"payload": None}, target) is None
