"""Pseudo-inertia, physical-consistency checks and the log-det divergence."""

from __future__ import annotations

import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT

from sysid_ros.core import RobotModel, SysIdError, check_consistency, logdet_divergence, pseudo_inertia
from sysid_ros.core.model.consistency import body_params_from_pseudo_inertia, model_divergence
from sysid_ros.core.model.robot import body_params_from_inertial

CUBE = body_params_from_inertial(2.0, np.array([0.1, -0.05, 0.2]), np.diag([0.01, 0.012, 0.015]))


def test_pseudo_inertia_of_a_point_mass_and_round_trip():
    c = np.array([0.3, -0.2, 0.1])
    j = pseudo_inertia(body_params_from_inertial(1.5, c, np.zeros((3, 3))))
    np.testing.assert_allclose(j, 1.5 * np.outer(np.append(c, 1), np.append(c, 1)), atol=1e-15)
    np.testing.assert_allclose(body_params_from_pseudo_inertia(pseudo_inertia(CUBE)), CUBE)


def test_pseudo_inertia_second_moments():
    """Σ = ∫ r rᵀ dm about the origin: check against sampled point masses."""
    rng = np.random.default_rng(0)
    pts, masses = rng.normal(size=(50, 3)), rng.uniform(0.1, 1.0, 50)
    m = masses.sum()
    h = masses @ pts
    inertia = sum(mi * (p @ p * np.eye(3) - np.outer(p, p)) for mi, p in zip(masses, pts, strict=True))
    phi = np.concatenate(([m], h, inertia[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]))
    sigma = sum(mi * np.outer(p, p) for mi, p in zip(masses, pts, strict=True))
    np.testing.assert_allclose(pseudo_inertia(phi)[:3, :3], sigma, rtol=1e-12)


def test_consistency_flags_violations():
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    assert check_consistency(model, model.nominal).consistent
    bad = model.nominal.copy()
    bad[model.index("link_2.m")] = -0.1
    bad[model.index("joint3.Fv")] = -0.2
    report = check_consistency(model, bad)
    assert not report.consistent
    assert [b.body for b in report.bodies if not b.consistent] == ["link_2"]
    assert report.negative_joint_terms == ("joint3.Fv",)
    # triangle inequality violated: Izz about the CoM larger than Ixx + Iyy
    tri = model.nominal.copy()
    m, h = tri[model.index("link_4.m")], tri[model.body_slice("link_4")][1:4]
    c = h / m
    tri[model.body_slice("link_4")] = body_params_from_inertial(m, c, np.diag([1e-4, 1e-4, 3e-4]))
    assert not check_consistency(model, tri).bodies[3].consistent
    assert check_consistency(model, tri).as_dict()["bodies"]["link_4"]["consistent"] is False


def test_logdet_divergence_properties():
    assert logdet_divergence(CUBE, CUBE) == pytest.approx(0.0, abs=1e-12)
    other = CUBE * 1.1
    d = logdet_divergence(other, CUBE)
    assert d > 0
    # invariant to a rigid change of frame of both bodies (J -> X J Xᵀ)
    rot = np.linalg.qr(np.random.default_rng(2).normal(size=(3, 3)))[0]
    rot *= np.sign(np.linalg.det(rot))
    x = np.eye(4)
    x[:3, :3], x[:3, 3] = rot, [0.3, -0.1, 0.2]

    def moved(phi):
        return body_params_from_pseudo_inertia(x @ pseudo_inertia(phi) @ x.T)

    assert logdet_divergence(moved(other), moved(CUBE)) == pytest.approx(d, rel=1e-9)
    neg = CUBE.copy()
    neg[0] = -1.0
    assert logdet_divergence(neg, CUBE) == np.inf
    with pytest.raises(SysIdError, match="reference parameters are not physically consistent"):
        logdet_divergence(CUBE, neg)
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    assert model_divergence(model, model.nominal, model.nominal) == pytest.approx(0.0, abs=1e-10)
