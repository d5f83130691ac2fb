"""Fourier excitation: exact derivatives, limits, periodicity."""

from __future__ import annotations

import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT, TEST_ROBOTS

from sysid_ros.core import FourierTrajectory, Limits, RobotModel, SysIdError


def test_derivatives_are_exact():
    traj = FourierTrajectory.random(Limits.of(RobotModel.from_mjcf(DEFAULT_ROBOT)), seed=4)
    t = np.linspace(0.3, 9.7, 40)
    h = 1e-5
    q, dq, ddq = traj.evaluate(t)
    qp, dqp, _ = traj.evaluate(t + h)
    qm, dqm, _ = traj.evaluate(t - h)
    np.testing.assert_allclose((qp - qm) / (2 * h), dq, atol=1e-8)
    np.testing.assert_allclose((dqp - dqm) / (2 * h), ddq, atol=1e-7)
    q2, _, ddq2 = traj.evaluate(t + traj.period)
    np.testing.assert_allclose(q2, q, atol=1e-12)
    np.testing.assert_allclose(ddq2, ddq, atol=1e-10)


@pytest.mark.parametrize("path", [DEFAULT_ROBOT, TEST_ROBOTS / "panda.xml"], ids=lambda p: p.stem)
def test_random_trajectories_respect_the_limits(path):
    model = RobotModel.from_mjcf(path)
    limits = Limits.of(model, acceleration=6.0)
    for seed in range(5):
        traj = FourierTrajectory.random(limits, seed=seed, margin=0.1)
        q, dq, ddq = traj.evaluate(np.linspace(0, traj.period, 5001))
        span = limits.upper - limits.lower
        assert np.all(q >= limits.lower + 0.1 * span - 1e-9)
        assert np.all(q <= limits.upper - 0.1 * span + 1e-9)
        assert np.all(np.abs(dq) <= limits.velocity + 1e-9)
        assert np.all(np.abs(ddq) <= 6.0 + 1e-9)
        assert np.all(np.abs(dq).max(0) > 0.05 * limits.velocity.min())  # every joint moves


def test_bad_trajectories_are_refused():
    with pytest.raises(SysIdError, match="expected a, b of shape"):
        FourierTrajectory(np.zeros(2), np.zeros((2, 3)), np.zeros((3, 3)), 10.0)
    with pytest.raises(SysIdError, match="period must be positive"):
        FourierTrajectory(np.zeros(2), np.zeros((2, 3)), np.zeros((2, 3)), 0.0)
    limits = Limits(np.zeros(2), np.ones(2), np.ones(2), np.ones(2), np.full(2, np.inf))
    traj = FourierTrajectory(np.array([2.0, 0.5]), np.ones((2, 1)), np.ones((2, 1)), 5.0)
    with pytest.raises(SysIdError, match=r"centre positions of dofs \[0\]"):
        traj.fit_to(limits)
