"""The inertia markers' geometry (core/model/ellipsoid.py) against independent references:
MuJoCo's own principal inertia of every body of the test robots (``body_inertia``,
``body_iquat``, ``body_ipos``: its compiler's eigen decomposition), and a solid ellipsoid built
from known semi-axes and a known rotation (I1 = m (b² + c²) / 5, ...)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from oracles.ellipsoid import quat_xyzw_to_mat, solid_ellipsoid_moments
from support.robots import TEST_ROBOTS, robot_params

from sysid_ros.core.model.ellipsoid import BODY_FIELDS, body_ellipsoids, equivalent_ellipsoid
from sysid_ros.core.model.robot import RobotModel


@pytest.mark.parametrize("path", [*robot_params(),
                                  pytest.param(TEST_ROBOTS / "two_link.urdf", id="two_link")])
def test_ellipsoids_match_mujocos_principal_inertia(path):
    """Every identified body of the test robots: the ellipsoid's centre is MuJoCo's CoM, its
    moments MuJoCo's principal moments, its axes (rotation, and the quaternion sent in the
    marker) rebuild MuJoCo's inertia tensor about the CoM, det = +1, and a solid ellipsoid with
    its semi-axes has exactly those moments."""
    model = RobotModel.load(str(path))
    mj = model.mj
    ellipsoids = {e.name: e for e in body_ellipsoids(model.param_names, model.nominal)}
    assert set(ellipsoids) == {model.body_name(b) for b in model.param_bodies}
    for b in model.param_bodies:
        e = ellipsoids[model.body_name(b)]
        assert e.valid and e.realizable
        assert e.mass == pytest.approx(mj.body_mass[b], rel=1e-12)
        np.testing.assert_allclose(e.com, mj.body_ipos[b], atol=1e-12)
        np.testing.assert_allclose(np.sort(e.moments), np.sort(mj.body_inertia[b]), rtol=1e-9, atol=1e-15)
        iframe = np.empty(9)
        mujoco.mju_quat2Mat(iframe, mj.body_iquat[b])
        iframe = iframe.reshape(3, 3)
        tensor = iframe @ np.diag(mj.body_inertia[b]) @ iframe.T  # MuJoCo's, in the body frame
        scale = float(np.max(mj.body_inertia[b]))
        np.testing.assert_allclose(e.rotation @ np.diag(e.moments) @ e.rotation.T, tensor, atol=1e-9 * scale)
        rq = quat_xyzw_to_mat(e.quaternion)
        np.testing.assert_allclose(rq, e.rotation, atol=1e-12)
        assert np.linalg.det(rq) == pytest.approx(1.0, abs=1e-12)
        assert np.linalg.norm(e.quaternion) == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(solid_ellipsoid_moments(e.mass, e.semi_axes), e.moments,
                                   rtol=1e-9, atol=1e-12 * scale)


def test_known_ellipsoid_recovered():
    """A 2 kg solid ellipsoid with semi-axes (0.1, 0.2, 0.3) m turned by a known rotation, its CoM
    off the body origin: the semi-axes come back (ascending moments: the longest axis first),
    each along the rotated axis it was built on (up to sign)."""
    mass, semi = 2.0, np.array([0.1, 0.2, 0.3])
    angle = 0.7
    axis = np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    rot = np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k
    i_com = rot @ np.diag(solid_ellipsoid_moments(mass, semi)) @ rot.T
    com = np.array([0.05, -0.02, 0.3])
    i_origin = i_com + mass * (com @ com * np.eye(3) - np.outer(com, com))
    phi = [mass, *(mass * com), i_origin[0, 0], i_origin[0, 1], i_origin[0, 2], i_origin[1, 1],
           i_origin[1, 2], i_origin[2, 2]]
    (e,) = body_ellipsoids([f"box.{f}" for f in BODY_FIELDS], phi)
    np.testing.assert_allclose(e.com, com, atol=1e-14)
    np.testing.assert_allclose(e.semi_axes, semi[::-1], rtol=1e-10)  # smallest moment: longest axis
    for col, built in zip(e.rotation.T, rot.T[::-1], strict=True):
        assert abs(col @ built) == pytest.approx(1.0, abs=1e-10)


def test_unrealizable_moments_drawn_flat_and_reflection_made_proper():
    """Moments breaking the triangle inequality (1 + 1 < 3): not realizable, the impossible axis
    drawn at 2 % of the largest; eigenvectors that come out as a reflection are turned into a
    rotation (det +1)."""
    semi, rot, _moments, realizable = equivalent_ellipsoid(1.0, np.diag([1.0, 1.0, 3.0]))
    assert not realizable
    assert semi[2] == pytest.approx(0.02 * semi.max())
    assert np.linalg.det(rot) == pytest.approx(1.0)
    # a tensor whose eigh axes have det -1 on this platform or not: det is +1 either way
    flip = np.diag([1.0, -1.0, 1.0])
    for tensor in (np.diag([0.2, 0.3, 0.4]), flip @ np.diag([0.2, 0.3, 0.4]) @ flip.T):
        _, rot, _, ok = equivalent_ellipsoid(1.0, tensor)
        assert ok and np.linalg.det(rot) == pytest.approx(1.0)


def test_massless_body_not_drawn():
    names = [f"ghost.{f}" for f in BODY_FIELDS]
    (e,) = body_ellipsoids(names, np.zeros(10))
    assert not e.valid
