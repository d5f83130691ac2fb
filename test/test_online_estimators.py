"""Recursive estimators (core of the online issue): RLS with forgetting and RLS log-det-div."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHARED_ROBOTS

from sysid_ros.core import DataError, RobotModel, SysIdError, logdet_divergence
from sysid_ros.core.estimators.rls import RecursiveLeastSquares
from sysid_ros.core.estimators.rls_logdet import RLSLogDet
from sysid_ros.core.model import body_params_from_inertial
from sysid_ros.core.synthetic import Payload, simulate_dataset
from sysid_ros.core.target import payload_target

SIGMA = 0.05  # N·m torque noise: the online seed's "5 % of unit-magnitude" noise


@pytest.fixture(scope="module")
def panda_payload():
    """Panda carrying a 5 kg, 10 cm cube in its hand; payload-only regression rows."""
    model = RobotModel.from_mjcf(SHARED_ROBOTS / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)
    ds = simulate_dataset(model, duration=20.0, seed=1, payload=payload)
    target = payload_target(model, "hand")
    rows, known = target.regressor(ds.q, ds.dq, ds.meta["ddq_true"])
    tau = ds.tau + SIGMA * np.random.default_rng(0).standard_normal(ds.tau.shape)
    return ds.t, rows, tau - known, payload.params


def test_rls_logdet_payload_converges_and_stays_consistent(panda_payload):
    t, rows, y, truth = panda_payload
    prior = body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.3**2 / 6)  # broad, unknown payload
    est = RLSLogDet(prior, [slice(0, 10)], alpha=10.0, weight=1 / SIGMA**2)
    first_below = None
    for k in range(len(t)):
        step = est.update(rows[k], y[k])
        assert step.min_eigenvalues.min() > 0  # every estimate physically consistent
        if first_below is None and logdet_divergence(est.theta, truth) < 0.05:
            first_below = t[k]
    assert first_below is not None and first_below < 20.0
    assert logdet_divergence(est.theta, truth) < 0.01
    assert est.theta[0] == pytest.approx(5.0, rel=1e-3)
    assert est.divergence_to(truth) == pytest.approx(logdet_divergence(est.theta, truth))


def test_rls_converges_and_tracks_with_forgetting():
    rng = np.random.default_rng(1)
    theta = np.array([2.0, -1.0, 0.5])
    est = RecursiveLeastSquares(np.zeros(3), 100.0, forgetting=0.99, noise=0.01)
    for _ in range(500):
        a = rng.normal(size=(2, 3))
        est.update(a, a @ theta + 0.01 * rng.normal(size=2))
    np.testing.assert_allclose(est.theta, theta, atol=5e-3)
    changed = theta + np.array([0.0, 0.5, 0.0])  # the plant changes: forgetting follows it
    for _ in range(800):
        a = rng.normal(size=(2, 3))
        est.update(a, a @ changed + 0.01 * rng.normal(size=2))
    np.testing.assert_allclose(est.theta, changed, atol=5e-3)


def test_rls_windup_guard_bounds_the_covariance():
    est = RecursiveLeastSquares(np.zeros(2), 1.0, forgetting=0.9, trace_max=50.0)
    a = np.array([[1.0, 0.0]])  # only the first parameter is excited
    guards = [est.update(a, np.array([1.0])).windup_guard for _ in range(200)]
    assert any(guards) and np.trace(est.P) <= 50.0 + 1e-9


def test_bad_input_is_rejected_without_corrupting_the_state():
    est = RLSLogDet(body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.01), [slice(0, 10)])
    before = est.theta.copy()
    with pytest.raises(DataError, match="non-finite"):
        est.update(np.full((3, 10), np.nan), np.zeros(3))
    np.testing.assert_array_equal(est.theta, before)
    assert est.samples == 0
    bad_prior = np.zeros(10)
    with pytest.raises(SysIdError, match="prior is not physically consistent"):
        RLSLogDet(bad_prior, [slice(0, 10)])
    with pytest.raises(DataError, match="forgetting factor"):
        RecursiveLeastSquares(np.zeros(2), 1.0, forgetting=1.5)
