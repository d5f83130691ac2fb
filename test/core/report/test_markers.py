"""Inertia markers (core/report/markers.py): per body an ellipsoid and a CoM sphere, identified
and nominal, in the link frames or posed in the root frame; checked against MuJoCo's own
kinematics (``xipos``, ``ximat``: the CoM and the principal inertia frame in the world) and
principal inertia (``body_inertia``)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from oracles.ellipsoid import quat_xyzw_to_mat, solid_ellipsoid_moments
from support.robots import DEFAULT_ROBOT, TEST_ROBOTS

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import arm_target, payload_target
from sysid_ros.core.report.markers import COM_DIAMETER, inertia_markers, precision_alpha, target_markers

ROBOTS = [pytest.param(TEST_ROBOTS / "panda.xml", id="panda"), pytest.param(DEFAULT_ROBOT, id="default")]


def _tensor(spec) -> np.ndarray:
    """The inertia a marker draws: rotation · diag(moments of a solid ellipsoid of its semi-axes)
    · rotationᵀ, per unit mass."""
    r = quat_xyzw_to_mat(spec.orientation)
    return r @ np.diag(solid_ellipsoid_moments(1.0, spec.scale / 2)) @ r.T


@pytest.mark.slow
@pytest.mark.parametrize("path", ROBOTS)
def test_link_frame_markers_are_mujocos_inertia(path):
    model = RobotModel.load(str(path))
    mj = model.mj
    nominal, frames = target_markers(arm_target(model))
    std = np.full(model.n_params, np.nan)
    specs = inertia_markers(model.param_names, model.nominal, std=std, nominal=nominal)
    by = {(s.ns, s.frame): s for s in specs}
    assert len(specs) == 4 * len(model.param_bodies) and not frames
    for b in model.param_bodies:
        name = model.body_name(b)
        ell, com = by[("identified", name)], by[("identified_com", name)]
        assert by[("nominal", name)].id == ell.id == com.id
        np.testing.assert_allclose(ell.position, mj.body_ipos[b], atol=1e-12)
        np.testing.assert_allclose(com.scale, COM_DIAMETER)
        iframe = np.empty(9)
        mujoco.mju_quat2Mat(iframe, mj.body_iquat[b])
        iframe = iframe.reshape(3, 3)
        expected = iframe @ np.diag(mj.body_inertia[b] / mj.body_mass[b]) @ iframe.T
        np.testing.assert_allclose(_tensor(ell), expected, atol=1e-9 * np.max(expected))
        assert ell.rgba[3] == pytest.approx(precision_alpha(np.nan))


@pytest.mark.slow
@pytest.mark.parametrize("path", ROBOTS)
def test_base_frame_markers_follow_forward_kinematics(path):
    """``frame="base"`` at a random configuration: every marker in the root body's frame, at
    MuJoCo's CoM (``xipos``) with MuJoCo's inertia axes (``ximat``), both expressed in the root
    body's frame."""
    model = RobotModel.load(str(path))
    mj = model.mj
    rng = np.random.default_rng(3)
    q = rng.uniform(-1.0, 1.0, len(model.dof_joint_names))
    data = mujoco.MjData(mj)
    data.qpos[model.joint_qpos_indices] = q
    mujoco.mj_kinematics(mj, data)
    r0, p0 = data.xmat[1].reshape(3, 3), data.xpos[1]
    nominal, _ = target_markers(arm_target(model))
    specs = inertia_markers(model.param_names, model.nominal, nominal=nominal, frame="base", model=model,
                            joint_positions=q)
    root = model.body_name(1)
    for s in specs:
        assert s.frame == root
    by = {(s.ns, s.id): s for s in specs}
    for k, b in enumerate(model.param_bodies):
        ell = by[("identified", k)]
        np.testing.assert_allclose(ell.position, r0.T @ (data.xipos[b] - p0), atol=1e-9)
        ximat = r0.T @ data.ximat[b].reshape(3, 3)
        expected = ximat @ np.diag(mj.body_inertia[b] / mj.body_mass[b]) @ ximat.T
        np.testing.assert_allclose(_tensor(ell), expected, atol=1e-9 * np.max(expected))
        np.testing.assert_allclose(by[("nominal", k)].position, ell.position, atol=1e-12)


def test_colour_and_alpha_say_precision_and_realizability():
    model = RobotModel.load(str(DEFAULT_ROBOT))
    theta = model.nominal.copy()
    std = np.full(model.n_params, np.nan)
    s0 = model.body_slice(model.param_bodies[0])
    std[s0] = 0.01 * np.abs(theta[s0])  # 1 %: opaque
    s1 = model.body_slice(model.param_bodies[1])
    std[s1] = 5.0 * np.abs(theta[s1])  # 500 %: faint
    i = s1.start + 4  # Ixx far above Iyy + Izz: no body realises it -> red
    theta[i] = 10 * (theta[i + 3] + theta[i + 5]) + 1.0
    specs = [s for s in inertia_markers(model.param_names, theta, std=std) if s.ns == "identified"]
    assert specs[0].rgba[3] == pytest.approx(0.9) and specs[1].rgba[3] == pytest.approx(0.2)
    assert specs[0].rgba[:3] != specs[1].rgba[:3] and specs[1].rgba[0] > 0.8
    assert 0.2 < precision_alpha(0.1) < 0.9


def test_payload_markers_live_on_the_carrying_link():
    model = RobotModel.load(str(DEFAULT_ROBOT))
    body = model.body_name(model.param_bodies[-1])
    target = payload_target(model, body)
    nominal, frames = target_markers(target)
    assert nominal is None and frames == {"payload": body}
    theta = np.array([0.5, 0.0, 0.0, 0.025, 2e-3, 0, 0, 2e-3, 0, 1e-3])
    specs = inertia_markers(target.names, theta, frames=frames)
    assert [s.ns for s in specs] == ["identified", "identified_com"] and {s.frame for s in specs} == {body}
    np.testing.assert_allclose(specs[0].position, [0, 0, 0.05])


def test_bad_frame_refused():
    model = RobotModel.load(str(DEFAULT_ROBOT))
    with pytest.raises(SysIdError, match=r"markers_frame must be one of \['links', 'base'\], got 'world'"):
        inertia_markers(model.param_names, model.nominal, frame="world")
    with pytest.raises(SysIdError, match="expected 6 joint positions"):
        inertia_markers(model.param_names, model.nominal, frame="base", model=model, joint_positions=[0.0])
