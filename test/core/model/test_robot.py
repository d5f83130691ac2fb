"""RobotModel: MJCF reading, parameter layout, nominal values, MJCF export, bad input."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT, TEST_ROBOTS, robot_params

from sysid_ros.core import ModelError, RobotModel, check_consistency
from sysid_ros.core.model.robot import body_params_from_inertial, inertial_from_body_params
from sysid_ros.core.model.spatial import quat_to_mat


@pytest.mark.parametrize("path", robot_params())
def test_nominal_values_are_mujoco_ground_truth(path):
    model = RobotModel.from_mjcf(path)
    mj = model.mj
    for b in model.param_bodies:
        phi = model.nominal[model.body_slice(b)]
        mass, com, i_com = inertial_from_body_params(phi)
        r = quat_to_mat(mj.body_iquat[b])
        assert mass == pytest.approx(mj.body_mass[b], rel=1e-12)
        np.testing.assert_allclose(com, mj.body_ipos[b], atol=1e-12)
        np.testing.assert_allclose(i_com, r @ np.diag(mj.body_inertia[b]) @ r.T, atol=1e-12)
    for j in model.term_joints:
        dof = model.joints[j].dof_adr
        name = model.joints[j].name
        assert model.nominal[model.index(f"{name}.Fc")] == mj.dof_frictionloss[dof]
        assert model.nominal[model.index(f"{name}.Fv")] == mj.dof_damping[dof]
        assert model.nominal[model.index(f"{name}.Fo")] == 0.0
        assert model.nominal[model.index(f"{name}.Ia")] == mj.dof_armature[dof]
    assert check_consistency(model, model.nominal).consistent


def test_parameter_names_are_stable_strings():
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    assert model.param_names[:10] == tuple(
        f"link_1.{f}" for f in ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz"))
    assert model.param_names[-4:] == ("joint6.Fc", "joint6.Fv", "joint6.Fo", "joint6.Ia")
    assert model.n_params == 6 * 10 + 6 * 4
    assert model.dof_joint_names == tuple(f"joint{i}" for i in range(1, 7))
    rigid = RobotModel.from_mjcf(DEFAULT_ROBOT, joint_terms=())
    assert rigid.n_params == 60
    theta = model.from_dict({"link_2.m": 2.0})
    assert theta[model.index("link_2.m")] == 2.0
    assert model.as_dict(theta)["link_2.m"] == 2.0


def test_fixed_and_massless_bodies_have_no_parameters():
    xml = """<mujoco><worldbody>
      <body name="base"><inertial pos="0 0 0" mass="3" diaginertia="1 1 1"/>
        <body name="frame">
          <body name="arm"><joint name="j" axis="0 0 1"/>
            <inertial pos="0.1 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
            <body name="dummy"/>
          </body>
        </body>
      </body></worldbody></mujoco>"""
    model = RobotModel.from_xml_string(xml)
    assert [model.body_name(b) for b in model.param_bodies] == ["arm"]
    with pytest.raises(ModelError, match="'base' has no identified parameters"):
        model.body_slice("base")


def test_motor_table_gives_torque_and_velocity_limits():
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    assert {j: m.name for j, m in model.motors.items()} == {
        "joint1": "DM4340", "joint2": "DM4340", "joint3": "DM4340",
        "joint4": "DM4310", "joint5": "DM4310", "joint6": "DM4310"}
    np.testing.assert_array_equal(model.torque_limits(), [28, 28, 28, 10, 10, 10])
    np.testing.assert_array_equal(model.velocity_limits(), [10, 10, 10, 30, 30, 30])
    panda = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    assert np.all(np.isinf(panda.torque_limits()))


def test_mjcf_round_trip_writes_the_given_parameters(tmp_path):
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    rng = np.random.default_rng(3)
    theta = model.nominal.copy()
    for b in model.param_bodies:  # a different, still consistent, inertial per body
        mass, com, i_com = inertial_from_body_params(theta[model.body_slice(b)])
        rot = quat_to_mat(rng.normal(size=4))
        theta[model.body_slice(b)] = body_params_from_inertial(
            mass * 1.3, com + 0.01, rot @ (i_com * 1.2) @ rot.T)
    theta[model.index("joint3.Fv")] = 0.25
    theta[model.index("joint2.Ia")] = 0.05
    out = model.to_mjcf(theta, tmp_path / "identified.xml")
    again = RobotModel.from_mjcf(out)
    np.testing.assert_allclose(again.nominal, theta, rtol=1e-9, atol=1e-12)
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_inconsistent_parameters_are_refused_for_mjcf(tmp_path):
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    theta = model.nominal.copy()
    theta[model.index("link_3.m")] = -1.0
    with pytest.raises(ModelError, match="link_3"):
        model.to_mjcf(theta, tmp_path / "bad.xml")
    assert list(tmp_path.iterdir()) == []


def test_bad_models_give_clear_errors(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        RobotModel.from_mjcf(tmp_path / "missing.xml")
    broken = tmp_path / "broken.xml"
    broken.write_text("<mujoco><worldbody><body name='a'><joint/></worldbody></mujoco>")
    with pytest.raises(ModelError, match="MuJoCo could not load"):
        RobotModel.from_mjcf(broken)
    with pytest.raises(ModelError, match="joint terms must be among"):
        RobotModel.from_mjcf(DEFAULT_ROBOT, joint_terms=("Fx",))
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    with pytest.raises(ModelError, match="unknown body 'gripper'"):
        model.body_id("gripper")
    with pytest.raises(ModelError, match=r"shape \(84,\)"):
        model.check_theta(np.zeros(3))
    with pytest.raises(ModelError, match="unknown motor"):
        _ = RobotModel.from_xml_string(
            """<mujoco><custom><text name="motor:j" data="DM9999"/></custom><worldbody>
            <body><joint name="j"/><inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body>
            </worldbody></mujoco>""").motors


def test_model_of_compiled_mjmodel_reads_mujoco_directly():
    mj = mujoco.MjModel.from_xml_path(str(DEFAULT_ROBOT))
    model = RobotModel(mj)
    assert model.n_params == 84
    with pytest.raises(ModelError, match="no MJCF to edit"):
        model.to_mjcf(model.nominal, "/tmp/never.xml")


def test_identified_mjcf_simulates_the_identified_model_not_the_sources_joint_terms(tmp_path):
    """The Panda-like test arm has armature 0.1 and damping on every joint. Identified without
    joint terms (rigid bodies only), the written MJCF carries no armature or damping: MuJoCo's
    inverse dynamics on it is exactly the identified model's τ = Y(q, q̇, q̈) θ̂ (the source's terms
    left in would add 0.1–2 N·m)."""
    import mujoco

    from sysid_ros.core.model.regressor import torque_regressor

    rigid = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml", joint_terms=())  # rigid bodies only
    assert rigid.mj.dof_armature.max() > 0 and rigid.mj.dof_damping.max() > 0
    out = rigid.to_mjcf(rigid.nominal, tmp_path / "identified.xml")
    written = mujoco.MjModel.from_xml_path(str(out))
    assert np.all(written.dof_armature == 0) and np.all(written.dof_damping == 0)
    rng = np.random.default_rng(0)
    low, high = rigid.mj.jnt_range[:, 0], rigid.mj.jnt_range[:, 1]  # inside the limits: no limit force
    q = low + (high - low) * rng.uniform(0.1, 0.9, size=(5, rigid.nv))
    dq, ddq = (rng.normal(size=(5, rigid.nv)) for _ in range(2))
    expected = torque_regressor(rigid, q, dq, ddq) @ rigid.nominal
    data = mujoco.MjData(written)
    for k in range(5):
        data.qpos[:], data.qvel[:], data.qacc[:] = q[k], dq[k], ddq[k]
        mujoco.mj_inverse(written, data)
        np.testing.assert_allclose(data.qfrc_inverse, expected[k], rtol=1e-7, atol=1e-7)
    # identified with armature: the armature is written, damping (not identified) is not
    with_ia = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml", joint_terms=("Ia",))
    written = mujoco.MjModel.from_xml_path(str(with_ia.to_mjcf(with_ia.nominal, tmp_path / "ia.xml")))
    assert np.allclose(written.dof_armature, rigid.mj.dof_armature) and np.all(written.dof_damping == 0)


def test_a_urdf_with_package_meshes_loads_and_exports_mjcf(tmp_path):
    """``test/robots/two_link.urdf`` names its meshes ``package://two_link_description/...``
    (nothing resolves them here): it loads all the same, geometry dropped, kinematics and
    inertials kept; the fixed tool flange is merged into the forearm (1.0 + 0.2 kg); the
    identified model is written as MJCF that loads back to the same parameters."""
    model = RobotModel.from_mjcf(TEST_ROBOTS / "two_link.urdf", joint_terms=("Fv",))
    assert model.dof_joint_names == ("shoulder", "elbow")
    assert [model.body_name(b) for b in model.param_bodies] == ["upper_arm", "forearm"]
    assert model.nominal[model.index("upper_arm.m")] == pytest.approx(2.0)
    assert model.nominal[model.index("forearm.m")] == pytest.approx(1.2)
    assert model.nominal[model.index("shoulder.Fv")] == pytest.approx(0.5)  # <dynamics damping>
    out = model.to_mjcf(model.nominal, tmp_path / "identified.xml")
    again = RobotModel.from_mjcf(out, joint_terms=("Fv",))
    np.testing.assert_allclose(again.nominal, model.nominal, rtol=1e-9, atol=1e-12)
