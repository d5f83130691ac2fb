"""The joint_trajectory_controller-like follower (core/sim/joint_trajectory.py): its splines
reproduce the polynomials they are built from exactly, a new trajectory replaces the remaining
one from its start time, joint names come in any order, bad waypoints are refused with one line."""

from __future__ import annotations

import numpy as np
import pytest

from sysid_ros.core.errors import DataError
from sysid_ros.core.sim.joint_trajectory import TrajectoryFollower, TrajectoryPoints, limit_violation

NAMES = ("a", "b")


def poly(coeffs: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, dq, ddq (N, n) of per-joint polynomials ``coeffs (deg+1, n)`` (independent reference)."""
    q = sum(c * t[:, None] ** k for k, c in enumerate(coeffs))
    dq = sum(k * c * t[:, None] ** (k - 1) for k, c in enumerate(coeffs) if k >= 1)
    ddq = sum(k * (k - 1) * c * t[:, None] ** (k - 2) for k, c in enumerate(coeffs) if k >= 2)
    return q, dq + 0 * q, ddq + 0 * q


@pytest.mark.parametrize(("degree", "fields"), [(5, 3), (3, 2), (1, 1)])
def test_splines_reproduce_their_polynomial(degree, fields):
    """Quintic with position/velocity/acceleration, cubic with position/velocity, linear with
    positions only: a polynomial of that degree sampled at the waypoints comes back exactly
    between them (as joint_trajectory_controller's spline interpolation does)."""
    rng = np.random.default_rng(degree)
    coeffs = rng.normal(size=(degree + 1, 2)) * 0.3
    knots = np.array([0.0, 0.4, 1.0, 1.3])
    q, dq, ddq = poly(coeffs, knots)
    follower = TrajectoryFollower(np.zeros(2))
    # waypoints 1 s after the start (t = 5 s): the approach from the hold is another segment
    points = TrajectoryPoints(1.0 + knots, q, dq if fields >= 2 else None, ddq if fields == 3 else None)
    follower.replace(points, start=5.0, now=0.0)
    t = np.linspace(1e-6, 1.3, 57)  # (at a waypoint's own time the piece before it is sampled)
    got = follower.sample(6.0 + t)
    want = poly(coeffs, t)
    for g, w in list(zip(got, want, strict=True))[: {3: 3, 2: 2, 1: 2}[fields]]:
        np.testing.assert_allclose(g, w, atol=1e-9)
    # after the last waypoint: hold it at rest
    q_end, dq_end, _ = follower.sample(np.array([9.0]))
    np.testing.assert_allclose(q_end[0], q[-1], atol=1e-12)
    assert np.all(dq_end == 0.0)


def test_scalar_sampling_equals_vector_sampling():
    follower = TrajectoryFollower(np.zeros(2))
    points = TrajectoryPoints(np.array([0.5, 1.0]), np.array([[0.1, 0.2], [0.3, -0.1]]),
                              np.array([[0.5, 0.0], [0.0, 0.0]]), np.zeros((2, 2)))
    follower.replace(points, start=0.0, now=1.0)
    for t in (0.2, 1.0, 1.2, 1.7, 2.0, 3.0):
        one = follower.sample_one(t)
        many = [x[0] for x in follower.sample(np.array([t]))]
        for a, b in zip(one, many, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-12)


def test_new_trajectory_replaces_the_rest_from_its_start_time():
    follower = TrajectoryFollower(np.zeros(2))
    first = TrajectoryPoints(np.array([1.0, 2.0]), np.array([[1.0, 1.0], [2.0, 2.0]]))
    follower.replace(first, start=10.0, now=9.0)
    assert follower.horizon == 12.0
    before = follower.sample(np.array([10.5, 11.4]))[0].copy()
    # the second starts at 11.5: what was due before stays, from there it goes to -1
    follower.replace(TrajectoryPoints(np.array([0.5]), np.array([[-1.0, -1.0]])), start=11.5, now=10.2)
    np.testing.assert_allclose(follower.sample(np.array([10.5, 11.4]))[0], before)
    q, _, _ = follower.sample(np.array([11.5, 11.75, 12.0, 15.0]))
    np.testing.assert_allclose(q[0], [1.5, 1.5])  # taken over where the first one was at 11.5
    np.testing.assert_allclose(q[1], [0.25, 0.25])  # linear from 1.5 to -1 over 0.5 s
    np.testing.assert_allclose(q[2:], [[-1.0, -1.0]] * 2)
    assert follower.horizon == 12.0
    # start 0 = now; an empty trajectory stops: hold where the reference is, for good
    follower.replace(TrajectoryPoints(np.zeros(0), np.zeros((0, 2))), start=0.0, now=11.75)
    np.testing.assert_allclose(follower.sample(np.array([11.8, 20.0]))[0], [[0.25, 0.25]] * 2)
    assert follower.horizon == np.inf


def test_names_in_any_order_are_reordered():
    points = TrajectoryPoints.from_message(("a", "b"), ("b", "a"), [0.5], [[2.0, 1.0]], [[0.2, 0.1]], [])
    np.testing.assert_array_equal(points.positions, [[1.0, 2.0]])
    np.testing.assert_array_equal(points.velocities, [[0.1, 0.2]])
    assert points.accelerations is None


@pytest.mark.parametrize(("names", "times", "positions", "message"), [
    (("a", "c"), [0.5], [[1.0, 2.0]], "expected the joints ['a', 'b'] (any order), got ['a', 'c']: "
                                      "unknown ['c'], missing ['b']"),
    (("a",), [0.5], [[1.0]], "missing ['b']"),
    (("a", "b"), [0.5, 0.5], [[1.0, 2.0], [1.0, 2.0]], "time_from_start must be finite, >= 0 and strictly "
                                                       "increasing, got [0.5, 0.5]"),
    (("a", "b"), [0.5], [[1.0]], "positions: expected 1 points of 2 values (one per joint name), got [1]"),
    (("a", "b"), [0.5], [[1.0, float("nan")]], "positions: non-finite values"),
])
def test_bad_waypoints_are_refused_with_one_line(names, times, positions, message):
    with pytest.raises(DataError) as info:
        TrajectoryPoints.from_message(NAMES, names, times, positions)
    assert message in str(info.value)


def test_limit_violation_names_the_first_point_beyond():
    points = TrajectoryPoints(np.array([0.1, 0.2]), np.array([[0.0, 0.0], [0.0, 0.5]]),
                              np.array([[0.0, 0.0], [1.5, 0.0]]), np.zeros((2, 2)))
    lower, upper, vel = np.array([-1.0, -1.0]), np.array([1.0, 1.0]), np.array([1.0, 1.0])
    assert limit_violation(points, lower, upper, vel, np.array([5.0, 5.0]), NAMES) == (
        "point 1 (t=0.200 s): a velocity 1.5 outside ±1 rad/s (1 value(s) beyond the limits)")
    assert limit_violation(points, lower, upper, vel * 2, None, NAMES) == ""
    assert "b position 0.5 outside [-1, 0.4] rad" in limit_violation(points, lower, np.array([1.0, 0.4]),
                                                                      vel * 2, None, NAMES)
