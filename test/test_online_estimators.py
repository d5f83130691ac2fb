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


def test_causal_conditioner_is_exact_on_simulated_samples():
    """Semi-implicit Euler samples: the forward velocity difference is the acceleration of the
    previous sample, so the conditioner's (one-sample-late) output reproduces the truth."""
    model = RobotModel.from_mjcf(SHARED_ROBOTS / "ur5e.xml")
    ds = simulate_dataset(model, duration=1.0, seed=3)
    from sysid_ros.core.online import CausalConditioner

    cond = CausalConditioner(6, 500.0, 200.0)  # filter well above the motion: nearly transparent
    outs = [cond.push(ds.t[k], ds.q[k], ds.dq[k], ds.tau[k]) for k in range(len(ds))]
    assert outs[0] is None and outs[1] is not None and outs[1][0] == ds.t[0]
    raw = CausalConditioner(6, 500.0, 249.0)
    with pytest.raises(DataError, match="does not follow"):
        raw.push(1.0, ds.q[0], ds.dq[0], ds.tau[0])
        raw.push(1.0, ds.q[1], ds.dq[1], ds.tau[1])
    accel = np.array([o[3] for o in outs[1:]])
    true = ds.meta["ddq_true"][: len(accel)]
    assert np.abs(accel[50:] - true[50:]).max() < 0.05 * np.abs(true).max()


def test_momentum_rows_recover_a_payload_without_accelerations(panda_payload):
    """Fixed base, generalised-momentum windows (no q̈ used): noise-free rows are exact."""
    from sysid_ros.core.online import MomentumRows

    model = RobotModel.from_mjcf(SHARED_ROBOTS / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)
    ds = simulate_dataset(model, duration=6.0, seed=1, payload=payload)
    rows = MomentumRows(payload_target(model, "hand"), window=0.5)
    built = [r for r in rows.push_batch(ds.t, ds.q, ds.dq, None, ds.tau) if r is not None]
    a = np.concatenate([r[0] for r in built])
    y = np.concatenate([r[1] for r in built])
    sol = np.linalg.lstsq(a, y, rcond=None)[0]
    # trapezoidal integration of sampled torque: accurate to the discretisation
    np.testing.assert_allclose(sol, payload.params, atol=2e-3 * np.abs(payload.params).max())


def test_conservation_rows_identify_a_payload_on_a_floating_robot():
    from sysid_ros.core.excitation import FourierTrajectory, Limits
    from sysid_ros.core.online import ConservationRows
    from sysid_ros.core.simulation import simulate_mit
    from sysid_ros.core.synthetic import floating_base, with_payload

    robot = floating_base(RobotModel.from_mjcf(SHARED_ROBOTS / "panda.xml"))
    assert (robot.nq, robot.nv) == (14, 13) and not robot.gravity.any()
    payload = Payload("hand", 10.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 10.0 * 0.2**2 / 6)
    traj = FourierTrajectory.random(Limits.of(robot), seed=2)
    rec = simulate_mit(robot, traj, 6.0, truth=with_payload(robot, payload), integrator="rk4")
    target = payload_target(robot, "hand")
    rows = ConservationRows(target)
    est = RLSLogDet(target.prior, [slice(0, 10)], alpha=1.0, weight=1e4)
    for k in range(0, len(rec.t), 5):
        r = rows.push(rec.t[k], rec.q[k], rec.dq[k], None, None)
        if r is not None:
            est.update(*r)
    assert logdet_divergence(est.theta, payload.params) < 1e-3
