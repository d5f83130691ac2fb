"""URDF robots: mesh URIs resolved or dropped, the base fixed or floating, models from XML text,
and identified.urdf (written by core/model/urdf.py) loading back to the same inverse dynamics."""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core import ModelError, RobotModel
from sysid_ros.core.model.base_params import random_states
from sysid_ros.core.model.regressor import torque_regressor
from sysid_ros.core.model.urdf import resolve_uri
from sysid_ros.core.model.urdf_export import write_urdf
from sysid_ros.core.sim.synthetic import randomize, simulate_dataset

TWO_LINK = TEST_ROBOTS / "two_link.urdf"
#: a unit cube as Wavefront OBJ (8 vertices, 12 triangles)
CUBE_OBJ = "\n".join(
    [f"v {x} {y} {z}" for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)]
    + ["f 1 3 4", "f 1 4 2", "f 5 6 8", "f 5 8 7", "f 1 2 6", "f 1 6 5",
       "f 3 7 8", "f 3 8 4", "f 1 5 7", "f 1 7 3", "f 2 4 8", "f 2 8 6"]) + "\n"
#: two hinges whose axes pass off their bodies' origins (joint pos), turned bodies: the URDF
#: writer must move each link frame to its joint
OFFSET_MJCF = """<mujoco model="offset">
  <worldbody>
    <body name="a" pos="0.1 0 0.2" quat="0.9238795 0 0.3826834 0">
      <joint name="ja" axis="0 0 1" pos="0.05 -0.02 0.1" range="-2 2" damping="0.3"/>
      <inertial pos="0.1 0.02 0.03" mass="1.5" fullinertia="0.02 0.03 0.025 0.001 -0.002 0.0015"/>
      <body name="b" pos="0.3 0 0" quat="0.7071068 0.7071068 0 0">
        <joint name="jb" axis="0 1 0" pos="-0.04 0.03 0" frictionloss="0.2"/>
        <inertial pos="0.15 0 -0.01" mass="0.8" diaginertia="0.004 0.01 0.011"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _package(tmp_path, folder: str, name: str):
    """A ROS package folder ``folder`` named ``name`` (package.xml) holding meshes/cube.obj."""
    pkg = tmp_path / folder
    (pkg / "meshes").mkdir(parents=True)
    (pkg / "meshes" / "cube.obj").write_text(CUBE_OBJ)
    manifest = f'<?xml version="1.0"?>\n<package format="3"><name>{name}</name></package>'
    (pkg / "package.xml").write_text(manifest)
    return pkg


def test_package_uris_resolve_against_ament_prefix_path_and_ros_package_path(tmp_path):
    ament = _package(tmp_path, "install/share/arm_description", "arm_description")
    ros1 = _package(tmp_path, "src/some/where/gripper_pkg_folder", "gripper_description")
    env = {"AMENT_PREFIX_PATH": str(tmp_path / "install"), "ROS_PACKAGE_PATH": str(tmp_path / "src")}
    assert resolve_uri("package://arm_description/meshes/cube.obj", None, env) == ament / "meshes/cube.obj"
    # found by the name in its package.xml, not by its folder's name
    assert resolve_uri("package://gripper_description/meshes/cube.obj", None, env) == ros1 / "meshes/cube.obj"
    assert resolve_uri("package://arm_description/meshes/missing.obj", None, env) is None
    assert resolve_uri("package://unknown_pkg/meshes/cube.obj", None, env) is None
    assert resolve_uri("package://arm_description/meshes/cube.obj", None, {}) is None
    assert resolve_uri(f"file://{ament}/meshes/cube.obj", None, {}) == ament / "meshes/cube.obj"
    assert resolve_uri("meshes/cube.obj", ament, {}) == ament / "meshes/cube.obj"
    assert resolve_uri("meshes/cube.obj", None, {}) is None


def test_resolved_meshes_are_kept_for_viewing_and_the_others_dropped_with_one_info_line(
        tmp_path, monkeypatch, caplog):
    """The upper arm's visual mesh is found under AMENT_PREFIX_PATH and kept (a massless,
    non-colliding geom, in identified.xml too); the other meshes (.dae, missing packages) are
    dropped with one info line; the dynamics are those of the geometry-free load."""
    _package(tmp_path, "install/share/two_link_description", "two_link_description")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "install"))
    text = TWO_LINK.read_text().replace("package://two_link_description/meshes/upper.dae",
                                        "package://two_link_description/meshes/cube.obj")
    urdf = tmp_path / "two_link.urdf"
    urdf.write_text(text)
    bare = RobotModel.from_mjcf(TWO_LINK)
    with caplog.at_level(logging.INFO, logger="sysid_ros.core.model.urdf"):
        model = RobotModel.from_mjcf(urdf)
    dropped = [r.getMessage() for r in caplog.records if "not found or not readable" in r.getMessage()]
    assert dropped == ["2 visual mesh(es) not found or not readable by MuJoCo (e.g. "
                       "package://two_link_description/meshes/base.dae): their geometry is dropped "
                       "(meshes carry no dynamics)"]
    assert model.mj.nmesh == 1 and model.mj.ngeom == 1
    assert model.mj.geom_contype[0] == 0 and model.mj.geom_conaffinity[0] == 0
    np.testing.assert_array_equal(model.nominal, bare.nominal)
    np.testing.assert_array_equal(model.mj.body_mass, bare.mj.body_mass)
    written = model.to_mjcf(model.nominal, tmp_path / "identified.xml").read_text()
    assert str(tmp_path / "install/share/two_link_description/meshes/cube.obj") in written
    assert RobotModel.from_mjcf(tmp_path / "identified.xml").mj.nmesh == 1


def test_models_load_from_xml_text_as_from_files():
    for path in (TWO_LINK, TEST_ROBOTS / "ur5e.xml"):
        from_text = RobotModel.load(path.read_text())
        from_file = RobotModel.load(str(path))
        assert from_text.param_names == from_file.param_names
        np.testing.assert_array_equal(from_text.nominal, from_file.nominal)
    with pytest.raises(ModelError, match="expected MJCF or URDF XML text, got text that does not parse"):
        RobotModel.load("<robot><link></robot>")


def test_the_base_option_floats_or_fixes_the_root():
    floating = RobotModel.from_mjcf(TWO_LINK, base="floating")
    assert [(j.name, j.type) for j in floating.joints] == [
        ("floating_base", "free"), ("shoulder", "hinge"), ("elbow", "hinge")]
    assert floating.nq == 9 and floating.nv == 8
    # the root link is no longer welded into the world: its 5 kg are identified
    assert floating.nominal[floating.index("base_link.m")] == pytest.approx(5.0)
    # a URDF that floats its root (as written above) is fixed again by base="fixed"
    fixed = RobotModel.from_xml_string(floating.urdf, base="fixed")
    assert fixed.nq == 2 and fixed.dof_joint_names == ("shoulder", "elbow")
    assert RobotModel.from_xml_string(floating.urdf).nq == 9  # as the file says
    mjcf = RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml", base="floating")
    assert (mjcf.joints[0].name, mjcf.joints[0].type, mjcf.body_name(mjcf.joints[0].body)) == (
        "floating_base", "free", "base")
    assert RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml", base="fixed").nq == 6
    with pytest.raises(ModelError, match=r"cannot float the MJCF: its first body 'a' has joints \['ja'\]"):
        RobotModel.from_xml_string(OFFSET_MJCF, base="floating")
    with pytest.raises(ModelError, match=r"base must be 'fixed' or 'floating' .* got 'loose'"):
        RobotModel.from_mjcf(TWO_LINK, base="loose")


def test_joint_state_data_refuse_a_floating_base():
    floating = RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml", base="floating")
    with pytest.raises(ModelError, match=r"a simulated dataset hold\(s\) hinge/slide joint states only, "
                       r"but the model has floating_base \(free\): .* \(--base fixed, node parameter "
                       r"base: fixed\)"):
        simulate_dataset(floating, duration=0.1)
    ds = simulate_dataset(RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml"), duration=0.02)
    with pytest.raises(ModelError, match="joint-state data hold"):
        ds.for_model(floating)


def _load_offset(tmp_path):
    path = tmp_path / "offset.xml"
    path.write_text(OFFSET_MJCF)
    return path


@pytest.mark.parametrize("source", ["panda.xml", "ur5e.xml", "two_link.urdf", "offset"])
def test_identified_urdf_has_the_inverse_dynamics_of_the_identified_model(source, tmp_path):
    """Random (consistent) parameters written as URDF and read back through the project's loader:
    the torques at random states equal the identified model's (regressor × θ) to 1e-9 of their
    scale. Joint terms Fc, Fv (URDF <dynamics friction damping>)."""
    path = _load_offset(tmp_path) if source == "offset" else TEST_ROBOTS / source
    terms = ("Fc", "Fv")
    model = RobotModel.from_mjcf(path, joint_terms=terms)
    theta = randomize(model, model.nominal, 0.3, np.random.default_rng(3))
    out = write_urdf(model, theta, tmp_path / "identified.urdf")
    back = RobotModel.from_mjcf(out, joint_terms=terms)
    assert back.dof_joint_names == model.dof_joint_names
    q, dq, ddq = random_states(model, 40, seed=5)
    expected = torque_regressor(model, q, dq, ddq) @ theta
    got = torque_regressor(back, q, dq, ddq) @ back.nominal
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9 * np.abs(expected).max())
    for name in model.dof_joint_names:  # friction written as <dynamics>
        written = back.nominal[back.index(f"{name}.Fv")]
        assert written == pytest.approx(max(theta[model.index(f"{name}.Fv")], 0))


def test_identified_urdf_of_a_urdf_keeps_its_names_frames_and_meshes(tmp_path):
    model = RobotModel.from_mjcf(TWO_LINK, joint_terms=("Fv", "Ia"))
    theta = model.nominal.copy()
    theta[model.index("elbow.Ia")] = 0.01
    root = ET.parse(write_urdf(model, theta, tmp_path / "identified.urdf")).getroot()
    assert [link.get("name") for link in root.findall("link")] == ["base_link", "upper_arm", "forearm",
                                                                    "tool_flange"]
    assert [j.get("name") for j in root.findall("joint")] == ["shoulder", "elbow", "flange"]
    flange = root.find("link[@name='tool_flange']")
    assert flange.find("inertial") is None  # its 0.2 kg are in the forearm's identified inertial
    assert float(root.find("link[@name='forearm']/inertial/mass").get("value")) == pytest.approx(1.2)
    assert root.find("link[@name='upper_arm']/visual/geometry/mesh").get("filename") == (
        "package://two_link_description/meshes/upper.dae")
    assert root.find("joint[@name='elbow']/dynamics").attrib == {"damping": "0.3", "friction": "0.0"}
    text = (tmp_path / "identified.urdf").read_text()
    assert "elbow.Ia = 0.01" in text  # no URDF counterpart: said in a comment
