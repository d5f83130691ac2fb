"""Core of the ros2_control path: waypoints of an excitation run (within the limits, continuous,
from the measured pose, stopped early without changing what was sent), the position-controlled
arm tracking them with its own controller (torque or current out, trajectories beyond its limits
refused), and the precision of a payload estimate (first-order propagation checked against finite
differences; the estimate from a run through the arm within the issue's bounds)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core import RobotModel
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.excitation.waypoints import WaypointStream
from sysid_ros.core.model.robot import body_params_from_inertial
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.online.precision import estimate_precision, payload_jacobian
from sysid_ros.core.online.session import OnlineOptions, OnlineSession
from sysid_ros.core.sim.joint_trajectory import TrajectoryPoints
from sysid_ros.core.sim.mit_simulator import SimOptions
from sysid_ros.core.sim.plant import SensorModel
from sysid_ros.core.sim.position_controlled import DriveOutput, PositionControlledArm, TrajectoryLimits
from sysid_ros.core.sim.synthetic import Payload

UR5E = TEST_ROBOTS / "ur5e.xml"
HOME = np.array([0.0, -1.5, 1.5, -1.5, -1.5, 0.0])  # [rad] an upright working pose
# the issue's acceptance payload: 1.2 kg, CoM off every axis of the flange
PAYLOAD = Payload.parse("body=wrist_3_link,mass=1.2,com=0.02,-0.03,0.06")


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return RobotModel.from_mjcf(UR5E)


def stream(model, limits, **kw) -> WaypointStream:
    traj = FourierTrajectory.random(limits, harmonics=5, period=10.0, seed=0)
    return WaypointStream(model, traj, limits, HOME, **kw)


def test_waypoints_stay_within_limits_start_at_the_pose_and_join(model):
    limits = Limits.of(model, velocity=1.2, acceleration=4.0)
    ws = stream(model, limits, excitation_time=12.0, chunk=2.0, spacing=0.02)
    chunks = []
    while not ws.finished:
        chunks.append(ws.next_chunk())
    assert chunks[-1].last and ws.sent_until == pytest.approx(ws.duration)
    t = np.concatenate([c.start + c.points.times for c in chunks])
    q = np.concatenate([c.points.positions for c in chunks])
    dq = np.concatenate([c.points.velocities for c in chunks])
    ddq = np.concatenate([c.points.accelerations for c in chunks])
    assert np.all(np.diff(t) > 0) and t[0] == pytest.approx(0.02)
    assert np.all(q >= limits.lower - 1e-12) and np.all(q <= limits.upper + 1e-12)
    assert np.all(np.abs(dq) <= limits.velocity + 1e-12)
    assert np.all(np.abs(ddq) <= limits.acceleration + 1e-12)
    # each chunk starts where the one before ended; the first at the run's start (the measured pose)
    assert chunks[0].start == 0.0
    for a, b in itertools.pairwise(chunks):
        assert b.start == pytest.approx(a.start + a.points.times[-1])
    np.testing.assert_allclose(q[0], HOME, atol=2e-3)  # 20 ms into a quintic from rest at HOME
    np.testing.assert_allclose(q[-1], HOME, atol=1e-12)
    assert np.all(dq[-1] == 0) and np.all(ddq[-1] == 0)


def test_stop_at_keeps_what_was_sent_and_returns_to_rest(model):
    limits = Limits.of(model, velocity=1.2, acceleration=4.0)
    long_run = stream(model, limits, excitation_time=60.0)
    sent = [long_run.next_chunk() for _ in range(3)]
    ref = stream(model, limits, excitation_time=60.0)
    ref_chunks = [ref.next_chunk() for _ in range(3)]
    end = long_run.stop_at(2.5)  # earlier than sent: the return starts after the 6 s sent
    assert end == pytest.approx(6.0) and long_run.duration < 20.0
    for a, b in zip(sent, ref_chunks, strict=True):
        np.testing.assert_array_equal(a.points.positions, b.points.positions)
    rest = []
    while not long_run.finished:
        rest.append(long_run.next_chunk())
    np.testing.assert_allclose(rest[-1].points.positions[-1], HOME, atol=1e-12)
    # the first waypoint after the stop continues the excitation smoothly (no jump in velocity)
    dq_gap = np.abs(rest[0].points.velocities[0] - sent[-1].points.velocities[-1]).max()
    assert dq_gap < 4.0 * 0.02 + 1e-9  # at most the acceleration limit over one spacing


@pytest.mark.slow
def test_arm_tracks_refuses_beyond_limits_and_reports_current(model):
    limits = TrajectoryLimits.of(model, acceleration=4.0)
    limits.velocity[:] = 1.2
    gain = np.array([10.0, 10.0, 10.0, 2.0, 2.0, 2.0])
    arm = PositionControlledArm(model, SimOptions(rate=1000.0, initial_position=HOME, payload=PAYLOAD),
                                limits=limits, output=DriveOutput(6, drive_gain=gain))
    ws = stream(model, Limits.of(model, velocity=1.2, acceleration=4.0), excitation_time=3.0)
    errors, ratio = [], []
    while arm.time < ws.duration + 0.5:
        chunk = ws.due(arm.time)
        if chunk is not None:
            arm.trajectory(chunk.points, start=chunk.start if chunk.start > 0 else 1e-9)
        sample = arm.step()
        errors.append(np.abs(sample.q - arm.reference(sample.t)[0]).max())
        ratio.append(arm.last_effort * gain - sample.tau)
    assert max(errors) < 0.01  # [rad] a stiff industrial loop: within 10 mrad of the reference
    assert np.abs(ratio).max() < 1e-9  # current = torque / drive gain (no noise asked)
    # back at rest at the start pose, bent by the payload its controller does not know (PD, no integral)
    np.testing.assert_allclose(sample.q, HOME, atol=5e-3)
    fast = TrajectoryPoints(np.array([1.0]), HOME[None], np.full((1, 6), 1.3), np.zeros((1, 6)))
    with pytest.raises(DataError, match=r"trajectory refused, beyond the controller's limits: point 0 "
                                        r"\(t=1.000 s\): shoulder_pan_joint velocity 1.3 outside ±1.2 rad/s"):
        arm.trajectory(fast)
    assert arm.rejected == 1
    with pytest.raises(SysIdError, match="current_noise needs a drive_gain"):
        DriveOutput(6, None, 0.1)


def test_payload_jacobian_matches_finite_differences():
    inertia = np.array([[3e-3, 1e-4, -2e-4], [1e-4, 2e-3, 5e-5], [-2e-4, 5e-5, 4e-3]])
    theta = body_params_from_inertial(1.2, np.array([0.02, -0.03, 0.06]), inertia)
    x, jac = payload_jacobian(theta)
    np.testing.assert_allclose(x[:4], [1.2, 0.02, -0.03, 0.06], atol=1e-12)
    np.testing.assert_allclose(x[4:], [3e-3, 1e-4, -2e-4, 2e-3, 5e-5, 4e-3], atol=1e-12)
    eps = 1e-7
    numeric = np.column_stack([(payload_jacobian(theta + eps * e)[0] - payload_jacobian(theta - eps * e)[0])
                               / (2 * eps) for e in np.eye(10)])
    np.testing.assert_allclose(jac, numeric, atol=1e-6)


@pytest.mark.slow
def test_payload_through_the_arm_reaches_the_issue_bounds(model):
    """The loop the graph runs, without ROS: waypoints -> the arm (1.2 kg payload unknown to the
    estimator, torque noise 0.05 N·m) -> an online session; the run stops once the payload's mass
    and CoM reach 2 % relative std; the estimate is then within 2 % (mass) and 5 mm (CoM)."""
    arm = PositionControlledArm(model, SimOptions(rate=1000.0, initial_position=HOME, payload=PAYLOAD,
                                                  sensor=SensorModel(torque_noise=0.05, seed=3)))
    ws = stream(model, Limits.of(model, velocity=1.2, acceleration=4.0), excitation_time=40.0)
    session = OnlineSession(payload_target(model, "wrist_3_link"),
                            OnlineOptions(sample_rate=500.0, weighting="adaptive"))
    stopped_at, rows = None, []
    while not (ws.finished and arm.time > ws.duration):
        chunk = ws.due(arm.time)
        if chunk is not None:
            arm.trajectory(chunk.points, start=chunk.start if chunk.start > 0 else 1e-9)
        arm.step()
        sample = arm.step()
        rows.append((sample.t, sample.q, sample.dq, arm.last_effort))
        if len(rows) == 250:
            session.push_batch(*(np.array(x) for x in zip(*rows, strict=True)))
            rows = []
            precision = estimate_precision(session.target, session.snapshot().theta, session.information())
            if stopped_at is None and precision.reached(0.02):
                stopped_at = ws.stop_at(arm.time)
    assert stopped_at is not None and ws.stopped_early and ws.duration < 30.0
    theta = session.snapshot().theta
    assert theta[0] == pytest.approx(1.2, rel=0.02)
    assert np.linalg.norm(theta[1:4] / theta[0] - PAYLOAD.com) < 0.005
    assert precision.poorly_determined(0.02) == []


def test_precision_of_undetermined_directions_is_infinite(model):
    """Rows that excite only part of the payload leave the rest undetermined: those directions
    have an infinite standard deviation (never reached), the determined ones their σ from the
    information; with full information every σ matches an independent inverse."""
    target = payload_target(model, "wrist_3_link")
    theta = PAYLOAD.params
    rng = np.random.default_rng(0)
    rows = 100.0 * rng.normal(size=(50, 10))
    rows[:, 4:] = 0.0  # inertia columns never excited: mass and h only
    partial = estimate_precision(target, theta, rows.T @ rows)
    assert np.all(np.isinf(partial.std[4:])) and np.all(np.isfinite(partial.std[:4]))
    assert partial.reached(0.05) and partial.poorly_determined(0.05) == []  # mass, CoM determined
    assert estimate_precision(target, theta, rows.T @ rows, inertia_required=True).poorly_determined(1e9) == [
        f"payload.inertia.{n}" for n in ("xx", "xy", "xz", "yy", "yz", "zz")]
    nothing = estimate_precision(target, theta, np.zeros((10, 10)))
    assert np.all(np.isinf(nothing.std)) and not nothing.reached(1e9)
    full = rng.normal(size=(200, 10))
    omega = full.T @ full
    precision = estimate_precision(target, theta, omega)
    _, jac = payload_jacobian(theta)
    np.testing.assert_allclose(precision.std ** 2, np.diag(jac @ np.linalg.inv(omega) @ jac.T), rtol=1e-8)
    assert precision.relative_std[0] == pytest.approx(precision.std[0] / 1.2)


@pytest.mark.slow
def test_arm_precision_per_base_direction(model):
    """Arm target: one direction per base parameter, σ from the base columns' information."""
    from sysid_ros.core.model.target import arm_target

    target = arm_target(model)
    idx = target.base.independent
    rng = np.random.default_rng(1)
    y = rng.normal(size=(500, idx.size))
    omega = np.zeros((target.n_params, target.n_params))
    omega[np.ix_(idx, idx)] = y.T @ y
    precision = estimate_precision(target, target.prior, omega)
    assert len(precision.names) == target.base.rank and precision.required.all()
    np.testing.assert_allclose(precision.std ** 2, np.diag(np.linalg.inv(y.T @ y)), rtol=1e-8)
    assert estimate_precision(target, target.prior, np.zeros_like(omega)).poorly_determined(1e9) == list(
        precision.names)
