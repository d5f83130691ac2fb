"""Recursive estimators (core of the online issue): RLS with forgetting and RLS log-det-div."""

from __future__ import annotations

import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT, TEST_ROBOTS

from sysid_ros.core import DataError, RobotModel, SysIdError, logdet_divergence
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.model.robot import body_params_from_inertial
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.online.rls import RecursiveLeastSquares
from sysid_ros.core.online.rls_logdet import RLSLogDet
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset

SIGMA = 0.05  # N·m torque noise: the online seed's "5 % of unit-magnitude" noise


@pytest.fixture(scope="module")
def panda_payload():
    """Panda carrying a 5 kg, 10 cm cube in its hand; payload-only regression rows."""
    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)
    ds = simulate_dataset(model, duration=20.0, seed=1, payload=payload)
    target = payload_target(model, "hand")
    rows, known = target.regressor(ds.q, ds.dq, ds.meta["ddq_true"])
    tau = ds.tau + SIGMA * np.random.default_rng(0).standard_normal(ds.tau.shape)
    return ds.t, rows, tau - known, payload.params


@pytest.mark.slow
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
    model = RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml")
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

    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)
    ds = simulate_dataset(model, duration=6.0, seed=1, payload=payload)
    rows = MomentumRows(payload_target(model, "hand"), window=0.5)
    built = [r for r in rows.push_batch(ds.t, ds.q, ds.dq, None, ds.tau) if r is not None]
    a = np.concatenate([r[0] for r in built])
    y = np.concatenate([r[1] for r in built])
    sol = np.linalg.lstsq(a, y, rcond=None)[0]
    # the simulator steps by semi-implicit Euler at the sample rate: the rows are its exact sums
    assert rows.windows == {"trapezoidal": 0, "euler": 12}
    np.testing.assert_allclose(sol, payload.params, atol=1e-8 * np.abs(payload.params).max())


def test_momentum_rows_take_the_discretisation_the_samples_kinematics_fit():
    """Semi-implicit Euler at the sample rate: the summed rows hold to rounding, the trapezoidal
    rule's are off by ~1e-3; an RK4 simulation (continuous-time motion sampled): "auto" takes the
    trapezoidal rule, which (torque held over each step, as simulated) is two orders closer. Any
    cut of the stream into batches gives the same rows, bit for bit."""
    from sysid_ros.core.online import MomentumRows
    from sysid_ros.core.sim.simulation import simulate_mit
    from sysid_ros.core.sim.synthetic import with_payload

    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    payload = Payload("hand", 2.0, np.array([0.02, 0.0, 0.05]), np.eye(3) * 2.0 * 0.08**2 / 6)
    target = payload_target(model, "hand")
    traj = FourierTrajectory.random(Limits.of(model), seed=4)

    def error(rec, scheme, hold=False):
        rows = MomentumRows(target, window=0.25, discretisation=scheme, torque_hold=hold)
        built = [r for r in rows.push_batch(rec.t, rec.q, rec.dq, None, rec.tau) if r is not None]
        scale = max(np.abs(y).max() for _, y in built)
        return max(np.abs(a @ payload.params - y).max() for a, y in built) / scale, rows.windows

    euler = simulate_mit(model, traj, 1.0, truth=with_payload(model, payload), integrator="euler")
    assert error(euler, "euler")[0] < 1e-10
    assert error(euler, "trapezoidal")[0] > 1e-4
    assert error(euler, "auto") == (error(euler, "euler")[0], {"trapezoidal": 0, "euler": 4})
    rk4 = simulate_mit(model, traj, 1.0, truth=with_payload(model, payload), integrator="rk4")
    assert error(rk4, "auto")[1] == {"trapezoidal": 4, "euler": 0}
    # the simulator holds each torque over its step: with that said, the trapezoidal rows hold
    assert error(rk4, "auto", hold=True)[0] < 0.01 * error(rk4, "euler", hold=True)[0]
    whole = MomentumRows(target, window=0.25).push_batch(euler.t, euler.q, euler.dq, None, euler.tau)
    cut = MomentumRows(target, window=0.25)
    pieces, k = [], 0
    for n in np.random.default_rng(0).integers(1, 37, size=len(euler.t)):
        if k >= len(euler.t):
            break
        part = slice(k, k + n)
        pieces += cut.push_batch(euler.t[part], euler.q[part], euler.dq[part], None, euler.tau[part])
        k += n
    assert [r is None for r in pieces] == [r is None for r in whole]
    for got, want in zip(pieces, whole, strict=True):
        if want is not None:
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    with pytest.raises(SysIdError, match="unknown momentum discretisation 'midpoint'; expected auto, "
                                         "trapezoidal, euler"):
        MomentumRows(target, discretisation="midpoint")


@pytest.mark.slow
def test_conservation_rows_identify_a_payload_on_a_floating_robot():
    from sysid_ros.core.data.fourier import FourierTrajectory, Limits
    from sysid_ros.core.online import ConservationRows
    from sysid_ros.core.sim.simulation import simulate_mit
    from sysid_ros.core.sim.synthetic import floating_base, with_payload

    robot = floating_base(RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml"))
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
    # the constant momentum as 6 unknowns, rows low-passed (exact rows stay exact); batch == push
    from sysid_ros.core.online import RowFilter

    fs = 1.0 / (rec.t[1] - rec.t[0])
    sub = slice(0, len(rec.t), 5)
    batched = RowFilter(ConservationRows(target, unknown_initial=True), fs / 5, 5.0).push_batch(
        rec.t[sub], rec.q[sub], rec.dq[sub], None, None)
    single = RowFilter(ConservationRows(target, unknown_initial=True), fs / 5, 5.0)
    first = [single.push(rec.t[k], rec.q[k], rec.dq[k], None, None) for k in range(0, 15, 5)]
    np.testing.assert_allclose(first[2][0], batched[2][0], atol=1e-12)
    est = RLSLogDet(np.concatenate((target.prior, np.zeros(6))), [slice(0, 10)], alpha=1.0, beta=1e-6,
                    weight=1e4)
    for a, y in batched:
        assert a.shape == (6, 16)
        est.update(a, y)
    assert logdet_divergence(est.theta[:10], payload.params) < 1e-3


def test_causal_conditioner_starts_without_a_noise_transient():
    """Noisy measured velocity at constant speed: every emitted acceleration is near zero from the
    first sample on (a filter started on one raw difference quotient, noise·√2/h ≈ 7 rad/s², kept
    that error for many time constants), and batched conditioning gives the same samples."""
    from sysid_ros.core.online import CausalConditioner

    rng = np.random.default_rng(4)
    fs, k = 500.0, 1500
    t = np.arange(k) / fs
    dq = 0.3 + 0.01 * rng.standard_normal((k, 3))
    q = 0.3 * t[:, None] + np.zeros((k, 3))
    tau = np.ones((k, 3))
    cond = CausalConditioner(3, fs, 5.0)
    outs = [o for o in (cond.push(t[i], q[i], dq[i], tau[i]) for i in range(k)) if o is not None]
    accel = np.array([o[3] for o in outs])
    assert len(outs) == k - 1 and np.abs(accel).max() < 0.5  # steady-state σ ≈ 0.05 rad/s²
    batched = CausalConditioner(3, fs, 5.0)
    cuts = (slice(0, 1), slice(1, 700), slice(700, k))
    parts = [batched.push_batch(t[s], q[s], dq[s], tau[s]) for s in cuts]
    np.testing.assert_allclose(np.concatenate([p[3] for p in parts]), accel, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([p[2] for p in parts]), [o[2] for o in outs], atol=1e-12)
    settled = CausalConditioner(3, fs, 5.0, settle="auto")
    assert settled.settle == pytest.approx(1.0 / 5.0, rel=0.3)  # ~1/cutoff for this filter
    late = settled.push_batch(t, q, dq, tau)
    assert late[0][0] >= settled.settle and len(late[0]) == k - 1 - round(settled.settle * fs)
    np.testing.assert_allclose(late[3], accel[-len(late[0]):], atol=1e-12)  # same filter states


def test_causal_conditioner_renormalises_a_floating_base_quaternion():
    from sysid_ros.core.online import CausalConditioner

    fs, k = 500.0, 400
    t = np.arange(k) / fs
    half = 0.25 * t  # base turning at 0.5 rad/s about z
    q = np.column_stack((np.zeros((k, 3)), np.cos(half), np.zeros((k, 2)), np.sin(half), 0.1 * t))
    dq = np.zeros((k, 7))
    dq[:, 5], dq[:, 6] = 0.5, 0.1
    cond = CausalConditioner(7, fs, 5.0, nq=8, quaternions=(3,))
    out = cond.push_batch(t, q, dq, np.zeros((k, 7)))
    assert out[1].shape == (k - 1, 8) and out[3].shape == (k - 1, 7)
    np.testing.assert_allclose(np.linalg.norm(out[1][:, 3:7], axis=1), 1.0, atol=1e-12)
    with pytest.raises(DataError, match="need measured velocities"):
        CausalConditioner(7, fs, 5.0, nq=8, quaternions=(3,), use_measured_velocity=False)


def test_generalised_momentum_balance_holds_for_a_free_joint():
    """d/dt(M q̇) = M q̈ + c(q, q̇) + Cᵀq̇ ... in regressor form: Yp θ differentiated along a path
    equals (M q̈ + bias) + Yc θ for every dof, the base's rotational dofs included (their axes turn
    with the base, which MuJoCo's cdof_dot leaves out)."""
    import mujoco

    from sysid_ros.core.model.regressor import momentum_regressors
    from sysid_ros.core.sim.synthetic import floating_base

    robot = floating_base(RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml"))
    rng = np.random.default_rng(5)
    mj, data = robot.mj, mujoco.MjData(robot.mj)
    q = robot.mj.qpos0.copy()
    q[3:7] = rng.normal(size=4)
    q[3:7] /= np.linalg.norm(q[3:7])
    q[7:] = rng.uniform(-1.0, 1.0, 7)
    dq, ddq = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
    eps = 1e-5
    p = []
    for s in (-1.0, 1.0):
        qs = q.copy()
        mujoco.mj_integratePos(mj, qs, dq + 0.5 * s * eps * ddq, s * eps)  # mid-point velocity
        p.append(momentum_regressors(robot, qs, dq + s * eps * ddq).Yp @ robot.nominal)
    p_dot = (p[1] - p[0]) / (2 * eps)
    data.qpos[:], data.qvel[:], data.qacc[:] = q, dq, ddq
    mujoco.mj_forward(mj, data)
    m_ddq = np.zeros(robot.nv)
    mujoco.mj_mulM(mj, data, m_ddq, ddq)
    yc = momentum_regressors(robot, q, dq).Yc @ robot.nominal
    np.testing.assert_allclose(p_dot, m_ddq + data.qfrc_bias + yc, atol=1e-5 * np.abs(p_dot).max())


@pytest.mark.slow
def test_rls_logdet_leaves_the_boundary_when_the_minimiser_moves_inside():
    """Start-up rows of an infeasible payload (negative mass) drive the estimate to the edge of
    the consistent set; consistent rows then move the minimiser inside. The update must follow
    it (before the fix warm-started Newton steps, dwarfed by the barrier's Hessian, froze at the
    edge: divergence ~90). The estimate equals the batch minimiser (α negligible here)."""
    rng = np.random.default_rng(0)
    truth = body_params_from_inertial(5.0, np.array([0, 0, 0.1]), np.eye(3) * 5.0 * 0.2**2 / 6)
    prior = body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.3**2 / 6)
    est = RLSLogDet(prior, [slice(0, 10)], alpha=10.0, weight=400.0)
    bad = truth.copy()
    bad[0] = -5.0
    a_all, y_all = [], []
    for k in range(2005):
        a = rng.normal(size=(7, 10))
        y = a @ bad if k < 5 else a @ truth + SIGMA * rng.normal(size=7)
        step = est.update(a, y)
        assert step.min_eigenvalues.min() > 0
        a_all.append(a)
        y_all.append(y)
    batch = np.linalg.lstsq(np.concatenate(a_all), np.concatenate(y_all), rcond=None)[0]
    assert logdet_divergence(est.theta, batch) < 1e-3
    assert logdet_divergence(est.theta, truth) < 1.0


def test_rls_logdet_block_weights_and_per_parameter_beta():
    """A body weighted w_b behaves as if α were α·w_b for that body; β may be per parameter."""
    rng = np.random.default_rng(3)
    truth = body_params_from_inertial(2.0, np.array([0.01, 0, 0.05]), np.eye(3) * 0.004)
    prior = body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.01)
    a = rng.normal(size=(40, 10))
    y = a @ truth
    weighted = RLSLogDet(prior, [slice(0, 10)], alpha=1.0, block_weights=[50.0])
    plain = RLSLogDet(prior, [slice(0, 10)], alpha=50.0)
    for k in range(0, 40, 4):
        weighted.update(a[k:k + 4], y[k:k + 4])
        plain.update(a[k:k + 4], y[k:k + 4])
    np.testing.assert_allclose(weighted.theta, plain.theta, rtol=1e-8, atol=1e-10)
    extra = RLSLogDet(np.concatenate((prior, [0.0, 0.0])), [slice(0, 10)], alpha=1.0,
                      beta=np.r_[np.zeros(10), 1e6, 1e-9])
    rows = np.hstack((a, np.ones((40, 1)), np.ones((40, 1))))
    extra.update(rows, y + 3.0)
    assert abs(extra.theta[10]) < 1e-3 and extra.theta[11] == pytest.approx(3.0, rel=1e-3)
    with pytest.raises(SysIdError, match="block_weights"):
        RLSLogDet(prior, [slice(0, 10)], block_weights=[1.0, 2.0])


def test_nuisance_links_are_exact_columns_of_force_and_momentum_rows():
    """With the arm's separable links as unknowns, [payload, nominal links] solves noise-free rows
    exactly, ground (force) and free-floating (total momentum, h₀ unknown) alike."""
    from sysid_ros.core.data.fourier import FourierTrajectory, Limits
    from sysid_ros.core.online import ConservationRows, ForceRows, Nuisance, separable_links
    from sysid_ros.core.sim.simulation import simulate_mit
    from sysid_ros.core.sim.synthetic import floating_base, with_payload

    base = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.2**2 / 6)
    ds = simulate_dataset(base, duration=1.0, seed=2, payload=payload)
    target = payload_target(base, "hand")
    links = separable_links(target.model, "hand")
    assert [target.model.body_name(b) for b in links] == [f"link{i}" for i in range(1, 7)]
    nuisance = Nuisance(links)
    prior, blocks, weights = nuisance.setup(target, alpha=10.0)
    assert prior.shape == (70,) and len(blocks) == 7 and weights[1] == pytest.approx(1 / (10 * 0.025**2))
    theta = np.concatenate((payload.params, prior[10:]))
    force = ForceRows(target, nuisance=nuisance)
    for a, y in force.push_batch(ds.t, ds.q, ds.dq, ds.meta["ddq_true"], ds.tau):
        np.testing.assert_allclose(a @ theta, y, atol=1e-6 * max(1.0, np.abs(y).max()))

    robot = floating_base(base)
    rec = simulate_mit(robot, FourierTrajectory.random(Limits.of(robot), seed=2), 1.0,
                       truth=with_payload(robot, payload), integrator="rk4")
    target = payload_target(robot, "hand")
    nuisance = Nuisance(separable_links(target.model, "hand"))
    assert len(nuisance.bodies) == 6  # the floating base stays known
    rows = ConservationRows(target, unknown_initial=True, nuisance=nuisance).push_batch(
        rec.t, rec.q, rec.dq, None, None)
    prior, _, _ = nuisance.setup(target, alpha=10.0, extra=6)
    a0, y0 = rows[0]
    rest = y0 - a0[:, :10] @ payload.params - a0[:, 16:] @ prior[16:]
    h0 = np.linalg.lstsq(a0[:, 10:16], rest, rcond=None)[0]
    theta = np.concatenate((payload.params, h0, prior[16:]))
    for a, y in rows:
        assert a.shape == (6, 76)
        np.testing.assert_allclose(a @ theta, y, atol=1e-6)


def test_force_rows_of_joints_near_rest_carry_no_information_with_coulomb_friction():
    from sysid_ros.core.online import ForceRows

    model = RobotModel.from_mjcf(DEFAULT_ROBOT)  # friction loss 0.1 N·m: Coulomb terms known
    target = payload_target(model, "link_6")
    rng = np.random.default_rng(3)
    q, dq, ddq = rng.normal(size=(3, 4, 6))
    dq[:, 2] = 0.01  # joint3 barely moving
    tau = rng.normal(size=(4, 6))
    gated = ForceRows(target, min_speed=0.05).push_batch(np.arange(4.0), q, dq, ddq, tau)
    plain = ForceRows(target).push_batch(np.arange(4.0), q, dq, ddq, tau)
    for (a_g, y_g), (a_p, y_p) in zip(gated, plain, strict=True):
        assert np.all(a_g[2] == 0) and y_g[2] == 0  # the slow joint's row is dropped
        np.testing.assert_array_equal(np.delete(a_g, 2, 0), np.delete(a_p, 2, 0))
        np.testing.assert_array_equal(np.delete(y_g, 2), np.delete(y_p, 2))


@pytest.mark.slow
def test_momentum_rows_of_a_floating_arm_with_nuisance_links():
    """The joints' generalised-momentum rows of a free-floating arm (torque integrals over windows;
    the base rows have zero force) with the arm's separable links as columns: the true payload and
    nominal links satisfy every row — to 1e-5 when the torque is integrated as the simulator holds
    it (zero-order hold), to the trapezoidal rule's error otherwise; batch == push; with the
    conservation rows they identify the payload without accelerations."""
    from sysid_ros.core.data.fourier import FourierTrajectory, Limits
    from sysid_ros.core.online import ConservationRows, MomentumRows, Nuisance, separable_links
    from sysid_ros.core.sim.simulation import simulate_mit
    from sysid_ros.core.sim.synthetic import floating_base, with_payload

    robot = floating_base(RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml"))
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.2**2 / 6)
    rec = simulate_mit(robot, FourierTrajectory.random(Limits.of(robot), seed=2), 1.2,
                       truth=with_payload(robot, payload), integrator="rk4")
    target = payload_target(robot, "hand")
    nuisance = Nuisance(separable_links(target.model, "hand"))
    built = MomentumRows(target, window=0.5, nuisance=nuisance, torque_hold=True).push_batch(
        rec.t, rec.q, rec.dq, None, rec.tau)
    assert built[0] is None and sum(r is None for r in built) == 3  # each window's first sample
    prior, _, _ = nuisance.setup(target, alpha=10.0)
    theta = np.concatenate((payload.params, prior[10:]))
    scale = max(np.abs(r[1]).max() for r in built if r is not None)
    for r in filter(None, built):
        assert r[0].shape == (13, 70)
        assert np.abs(r[0] @ theta - r[1]).max() < 1e-5 * scale
    trapezoid = MomentumRows(target, window=0.5, nuisance=nuisance).push_batch(
        rec.t, rec.q, rec.dq, None, rec.tau)
    error = max(np.abs(r[0] @ theta - r[1]).max() for r in filter(None, trapezoid))
    assert 1e-4 * scale < error < 5e-3 * scale  # the trapezoidal rule on a held torque
    single = MomentumRows(target, window=0.5, nuisance=nuisance, torque_hold=True)
    for k in (0, 1, 2):
        row = single.push(rec.t[k], rec.q[k], rec.dq[k], None, rec.tau[k])
    np.testing.assert_allclose(row[0], built[2][0], atol=1e-12)
    # conservation rows (payload + h₀) and the joints' momentum rows, folded in alternately
    est = RLSLogDet(np.concatenate((target.prior, np.zeros(6))), [slice(0, 10)], alpha=1.0, beta=1e-6)
    joints = robot.dof_indices
    conservation = ConservationRows(target, unknown_initial=True).push_batch(rec.t, rec.q, rec.dq, None, None)
    momentum = MomentumRows(target, window=0.5).push_batch(rec.t, rec.q, rec.dq, None, rec.tau)
    for (a_c, y_c), r in zip(conservation, momentum, strict=True):
        est.update(a_c * 100.0, y_c * 100.0)
        if r is not None:
            est.update(np.hstack((r[0][joints], np.zeros((joints.size, 6)))) * 300.0, r[1][joints] * 300.0)
    assert logdet_divergence(est.theta[:10], payload.params) < 0.1
    assert est.theta[0] == pytest.approx(5.0, rel=0.01)


@pytest.mark.slow
def test_residual_weights_estimate_each_rows_error_and_weigh_by_it():
    """Two rows, one 40× noisier than its sensor σ says: the adaptive weights find both errors
    (the floor holds the clean row at its sensor σ) and the estimate beats sensor weighting."""
    from sysid_ros.core.online.row_weights import ResidualWeights

    rng = np.random.default_rng(4)
    truth = body_params_from_inertial(2.0, np.array([0.01, 0, 0.05]), np.eye(3) * 0.004)
    prior = body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.01)
    sigma = np.array([0.05, 2.0])
    fixed = RLSLogDet(prior, [slice(0, 10)], alpha=1.0, weight=SIGMA**-2)
    adaptive = RLSLogDet(prior, [slice(0, 10)], alpha=1.0, weight=1.0)
    weights = ResidualWeights(SIGMA, time_constant=1.0, fs=500.0)
    for _ in range(3000):
        a = rng.normal(size=(2, 10))
        y = a @ truth + sigma * rng.normal(size=2)
        fixed.update(a, y)
        adaptive.update(*weights.whiten(a, y, adaptive.theta))
        weights.observe(a, y, adaptive.theta)
    assert weights.sigma[0] == pytest.approx(0.05, rel=0.2)
    assert weights.sigma[1] == pytest.approx(2.0, rel=0.3)
    assert logdet_divergence(adaptive.theta, truth) < 0.5 * logdet_divergence(fixed.theta, truth)
    with pytest.raises(DataError, match="positive"):
        ResidualWeights(0.0)


@pytest.mark.slow
def test_rls_logdet_keeps_a_relative_margin_inside_the_consistent_set():
    """Heavily weighted rows of an infeasible body (a point mass with Ixx lowered: J has a negative
    eigenvalue) under weak regularisation put the minimiser outside the consistent set. Every
    estimate keeps J ≻ 1e-10·tr(J), so its divergence to any body stays finite (a Cholesky test
    alone let λ_min/tr(J) reach round-off, −3e-16 here, and D = inf)."""
    from sysid_ros.core.model.consistency import pseudo_inertia
    from sysid_ros.core.online.rls_logdet import INTERIOR_MARGIN

    rng = np.random.default_rng(5)
    bad = np.zeros(10)
    c = np.array([0.02, -0.01, 0.1])
    bad[0], bad[1:4] = 50.0, 50.0 * c
    inertia = 50.0 * (c @ c * np.eye(3) - np.outer(c, c))
    bad[4:] = inertia[0, 0] - 0.01, inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2], inertia[2, 2]
    assert np.linalg.eigvalsh(pseudo_inertia(bad))[0] < 0
    prior = body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.3**2 / 6)
    est = RLSLogDet(prior, [slice(0, 10)], alpha=1e-3, weight=4e5)
    reference = body_params_from_inertial(50.0, c, np.eye(3) * 0.1)
    for _ in range(500):
        a = rng.normal(size=(13, 10)) * 10.0
        est.update(a, a @ bad)
        j = pseudo_inertia(est.theta)
        assert np.linalg.eigvalsh(j)[0] > 0.99 * INTERIOR_MARGIN * np.trace(j)
    assert np.isfinite(logdet_divergence(est.theta, reference))


@pytest.mark.slow
def test_online_estimator_with_adaptive_weights_converges_on_noisy_torques():
    """OnlineEstimator(weighting="adaptive") on the simulated Panda + 5 kg payload with noisy
    torques: it converges like the fixed weights and learns each joint row's error (≥ the sensor
    σ, which is its floor); an unknown weighting is refused with the choices."""
    from sysid_ros.core.online import OnlineEstimator

    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)
    ds = simulate_dataset(model, duration=10.0, seed=1, payload=payload)
    tau = ds.tau + SIGMA * np.random.default_rng(0).standard_normal(ds.tau.shape)
    target = payload_target(model, "hand")
    est = OnlineEstimator(target, alpha=10.0, weight=1 / SIGMA**2, weighting="adaptive", sample_rate=500.0)
    est.push_batch(ds.t, ds.q, ds.dq, ds.meta["ddq_true"], tau, log=False)
    assert logdet_divergence(est.theta, payload.params) < 0.05
    assert np.all(est.row_weights.sigma >= SIGMA) and np.all(est.row_weights.sigma < 5 * SIGMA)
    with pytest.raises(DataError, match="expected fixed or adaptive"):
        OnlineEstimator(target, weighting="robust")


def test_rls_logdet_keeps_joint_terms_positive_when_the_data_push_them_below_zero():
    """A friction-like term that is truly 0 (prior 0 too): the noise pushes the unconstrained
    estimate below 0, the kept one stays > 0 at every update and near 0, and the body beside it
    is recovered as well as without the bound (issue 14: Fv < 0, Ia = −92.3 from rls_logdet)."""
    rng = np.random.default_rng(4)
    truth = body_params_from_inertial(2.0, np.array([0.01, 0, 0.05]), np.eye(3) * 0.04)
    prior = np.r_[body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.01), 0.0]
    kept = RLSLogDet(prior, [slice(0, 10)], alpha=1.0, weight=SIGMA**-2, nonnegative=[10])
    free = RLSLogDet(prior, [slice(0, 10)], alpha=1.0, weight=SIGMA**-2)
    assert kept.theta[10] == pytest.approx(1e-3)  # starts at the floored prior
    lowest = np.inf
    for _ in range(300):
        a = np.hstack((rng.normal(size=(7, 10)), np.abs(rng.normal(size=(7, 1)))))
        y = a @ np.r_[truth, 0.0] + SIGMA * rng.normal(size=7)
        kept.update(a, y)
        free.update(a, y)
        assert kept.theta[10] > 0
        lowest = min(lowest, free.theta[10])
    assert lowest < -1e-3
    assert 0 < kept.theta[10] < 2e-3
    assert logdet_divergence(kept.theta[:10], truth) < 0.05
    assert logdet_divergence(kept.theta[:10], truth) < 1.5 * logdet_divergence(free.theta[:10], truth) + 1e-4
    with pytest.raises(SysIdError, match=r"nonnegative must index parameters outside the bodies \(0..10\), "
                                         r"got \[3\]"):
        RLSLogDet(prior, [slice(0, 10)], nonnegative=[3])


@pytest.mark.slow
def test_whole_arm_replay_keeps_friction_non_negative_and_every_estimate_consistent():
    """The Panda's joints have no Coulomb friction (prior and truth 0) and viscous friction
    0.69-1.95 N·m·s/rad; with 0.05 N·m torque noise the unconstrained update drove Coulomb terms
    and consistency checks negative within seconds. Every estimate must now be consistent and
    the viscous terms within 10 % of the truth, Coulomb ones below 0.1 N·m, the torque fit at
    the noise level."""
    from sysid_ros.core.model.consistency import check_consistency
    from sysid_ros.core.model.target import arm_target
    from sysid_ros.core.online import OnlineOptions, OnlineSession
    from sysid_ros.core.sim.simulation import SensorModel

    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml", joint_terms=("Fc", "Fv"))
    ds = simulate_dataset(model, duration=4.0, rate=1000.0, seed=0, sensor=SensorModel(torque_noise=SIGMA))
    target = arm_target(model)
    session = OnlineSession(target, OnlineOptions(sample_rate=1000.0, torque_noise=SIGMA, history=True))
    for k in range(0, len(ds), 100):
        session.push_batch(ds.t[k:k + 100], ds.q[k:k + 100], ds.dq[k:k + 100], ds.tau[k:k + 100])
    log = np.array(session.estimator.log.theta)
    assert len(log) > 3000
    assert log[:, target.nonnegative].min() > 0
    assert all(check_consistency(model, theta).consistent for theta in log[::20])
    final = session.snapshot()
    assert final.consistent
    names = np.array(target.names)
    fv = np.char.endswith(names, ".Fv")
    np.testing.assert_allclose(final.theta[fv], model.nominal[fv], rtol=0.10)
    assert final.theta[np.char.endswith(names, ".Fc")].max() < 0.1
    y, known = target.regressor(ds.q, ds.dq, ds.meta["ddq_true"])
    assert np.sqrt(np.mean((y @ final.theta + known - ds.tau) ** 2)) < 1.5 * SIGMA


def test_rls_logdet_block_fold_is_the_information_of_one_row_folds(panda_payload):
    """K samples folded at once (one product, forgetting per sample) hold the same Ω, b and count
    as K one-sample folds: the seeds' Ω_k = λΩ_{k−1} + A_kᵀWA_k, summed in another order."""
    _, rows, y, _ = panda_payload
    prior = body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * 0.3**2 / 6)
    weight = 1.0 / (SIGMA * np.linspace(1.0, 2.0, rows.shape[1])) ** 2  # a weight per row of a sample
    one, block = (RLSLogDet(prior, [slice(0, 10)], alpha=10.0, weight=weight, forgetting=0.995)
                  for _ in range(2))
    for k in range(500):
        one.update(rows[k], y[k], solve=False)
    for a, b in ((0, 7), (7, 200), (200, 201), (201, 500)):
        block.fold(rows[a:b], y[a:b])
    assert block.samples == one.samples == 500
    np.testing.assert_allclose(block.omega, one.omega, rtol=1e-12, atol=1e-12 * np.abs(one.omega).max())
    np.testing.assert_allclose(block.b, one.b, rtol=1e-12, atol=1e-12 * np.abs(one.b).max())
    one.solve(), block.solve()
    np.testing.assert_allclose(block.theta, one.theta, rtol=1e-9)
    # rows a sample must not bring: named one by one, the state untouched by update
    bad = rows[:3].copy()
    bad[1, 0, 0], bad[2, 0, 0] = np.nan, 1e13
    assert [k for k, _ in RLSLogDet.refusals(bad, y[:3])] == [1, 2]
    assert "non-finite" in RLSLogDet.refusals(bad, y[:3])[0][1]
    assert "implausible" in RLSLogDet.refusals(bad, y[:3])[1][1]
    omega = one.omega.copy()
    with pytest.raises(DataError, match="implausible regressor row"):
        one.update(bad[2], y[2])
    np.testing.assert_array_equal(one.omega, omega)
