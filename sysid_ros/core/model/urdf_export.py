"""URDF export of an identified model: the source URDF with the identified inertials (and joint
dynamics) where the model came from a URDF, else a URDF of the MuJoCo model (identified.urdf)."""

from __future__ import annotations

import logging
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from sysid_ros.core.atomic import write_atomic
from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.layout import inertial_from_body_params
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.spatial import quat_to_mat
from sysid_ros.core.model.urdf import WORLD_LINK

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------- writing
_TERM_COMMENT = ("joint <dynamics>: damping = identified viscous friction Fv [N m s/rad], friction = "
                 "identified Coulomb friction Fc [N m]; 0 where not identified (as in identified.xml)")


def write_urdf(model: RobotModel, theta: np.ndarray, path: str | os.PathLike[str], *,
               origin: str = "identified by sysid_ros") -> Path:
    """Write ``theta`` (the parameter vector of ``model``, a
    :class:`~sysid_ros.core.model.robot.RobotModel`, physically consistent) as a URDF at ``path``
    (atomically); ``origin``: what the file's first comment says the parameters are. Raises
    :class:`ModelError` when the model has no URDF form (a body with more than one joint, a ball
    joint, a free joint below the root) or a body is not consistent."""
    theta = model.check_theta(theta)
    inertials = {}
    for k, b in enumerate(model.param_bodies):
        try:
            inertials[model.body_name(b)] = inertial_from_body_params(theta[10 * k:10 * k + 10])
        except ModelError as exc:
            raise ModelError(f"body {model.body_name(b)!r}: {exc}") from None
    terms = model.as_dict(theta)
    dynamics = {j.name: (max(terms.get(f"{j.name}.Fv", 0.0), 0.0), max(terms.get(f"{j.name}.Fc", 0.0), 0.0))
                for j in model.joints if j.type in ("hinge", "slide")}
    unwritten = {n: v for n, v in terms.items() if n.endswith((".Ia", ".Fo", ".Fs", ".Fsig")) and v != 0}
    if model.urdf is not None:
        root = _identified_source(model, ET.fromstring(model.urdf), inertials, dynamics)
    else:
        root = _urdf_of_mujoco(model, inertials, dynamics)
    root.insert(0, ET.Comment(f" {origin}; {_TERM_COMMENT} "))
    if unwritten:
        root.insert(1, ET.Comment(" identified terms without a URDF counterpart (rotor inertia Ia "
                                  "[kg m^2], torque offset Fo [N m], Stribeck friction Fs [N m] in "
                                  f"Fs*exp(-|qdot|/qs)*sign(qdot) with qs = {model.stribeck_velocity!r} "
                                  "rad/s, sigmoid friction amplitude Fsig = phi1 [N m] in "
                                  "phi1/(1+exp(-phi2*(qdot+phi3))) - phi1/(1+exp(-phi2*phi3))"
                                  + "".join(f", {j}: phi2 = {p2!r} s/rad, phi3 = {p3!r} rad/s"
                                            for j, (_, p2, p3) in model.sigmoid_of(theta).items())
                                  + "; see identified.xml): "
                                  + ", ".join(f"{n} = {v!r}" for n, v in unwritten.items()) + " "))
    if np.linalg.norm(model.gravity - np.array([0.0, 0.0, -9.81])) > 1e-9:
        root.insert(1, ET.Comment(f" the model's gravity {model.gravity.tolist()} m/s^2 has no URDF "
                                  "counterpart "))
    ET.indent(root, space="  ")
    return write_atomic(Path(path), '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n")


def _inertial(mass: float, com: np.ndarray, i_com: np.ndarray) -> ET.Element:
    inertial = ET.Element("inertial")
    ET.SubElement(inertial, "origin", xyz=_vec(com), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=repr(float(mass)))
    ET.SubElement(inertial, "inertia", ixx=repr(float(i_com[0, 0])), ixy=repr(float(i_com[0, 1])),
                  ixz=repr(float(i_com[0, 2])), iyy=repr(float(i_com[1, 1])),
                  iyz=repr(float(i_com[1, 2])), izz=repr(float(i_com[2, 2])))
    return inertial


def _set_dynamics(joint: ET.Element, damping: float, friction: float) -> None:
    for old in joint.findall("dynamics"):
        joint.remove(old)
    ET.SubElement(joint, "dynamics", damping=repr(float(damping)), friction=repr(float(friction)))


def _identified_source(model: RobotModel, root: ET.Element, inertials, dynamics) -> ET.Element:
    """The source URDF with identified inertials: each identified link's ``<inertial>`` replaced,
    the inertials of fixed links MuJoCo merged into an identified body removed (their mass is in
    it), joint ``<dynamics>`` set."""
    parent_of = {j.find("child").get("link"): j.find("parent").get("link")
                 for j in root.findall("joint") if j.find("child") is not None}
    bodies = {b.name for b in model.bodies}

    def body_of(link: str | None) -> str | None:
        while link is not None and link not in bodies:
            link = parent_of.get(link)
        return link

    for link in root.findall("link"):
        name = link.get("name")
        owner = body_of(name)
        if owner not in inertials:
            continue
        for old in link.findall("inertial"):
            link.remove(old)
        if owner == name:
            link.insert(0, _inertial(*inertials[name]))
        else:
            link.insert(0, ET.Comment(f" inertial merged into {owner!r} (joined by fixed joints), "
                                      "identified there "))
    for joint in root.findall("joint"):
        if joint.get("name") in dynamics:
            _set_dynamics(joint, *dynamics[joint.get("name")])
    return root


def _urdf_of_mujoco(model: RobotModel, inertials, dynamics) -> ET.Element:
    """A URDF of the MuJoCo model: link ``world`` for the world body, one link per body whose
    frame is the body frame moved to its joint's anchor (URDF joints turn about the child link's
    origin), the inertial about the CoM in that frame."""
    mj = model.mj
    root = ET.Element("robot", name=_model_name(model))
    ET.SubElement(root, "link", name=WORLD_LINK)
    anchor = {0: np.zeros(3)}
    names = {0: WORLD_LINK}
    for body in model.bodies:
        if len(body.joints) > 1:
            raise ModelError(f"body {body.name!r} has {len(body.joints)} joints; a URDF link has one")
        joint = model.joints[body.joints[0]] if body.joints else None
        if joint is not None and joint.type == "ball":
            raise ModelError(f"joint {joint.name!r} is a ball joint; URDF has none")
        p = np.zeros(3) if joint is None or joint.type == "free" else joint.pos
        anchor[body.id], names[body.id] = p, body.name
        link = ET.SubElement(root, "link", name=body.name)
        if body.name in inertials:
            mass, com, i_com = inertials[body.name]
        else:
            mass, com = float(mj.body_mass[body.id]), np.array(mj.body_ipos[body.id])
            r = quat_to_mat(np.array(mj.body_iquat[body.id]))
            i_com = r @ np.diag(mj.body_inertia[body.id]) @ r.T
        if mass > 0:
            link.append(_inertial(mass, com - p, i_com))
        xyz = -anchor[body.parent] + body.pos + body.rot @ p
        kind = ("fixed" if joint is None else "floating" if joint.type == "free"
                else "prismatic" if joint.type == "slide"
                else "revolute" if joint.range is not None else "continuous")
        element = ET.SubElement(root, "joint", name=joint.name if joint else f"{body.name}_fixed",
                                type=kind)
        ET.SubElement(element, "parent", link=names[body.parent])
        ET.SubElement(element, "child", link=body.name)
        ET.SubElement(element, "origin", xyz=_vec(xyz), rpy=_vec(mat_to_rpy(body.rot)))
        if joint is None or joint.type == "free":
            continue
        ET.SubElement(element, "axis", xyz=_vec(joint.axis))
        if joint.range is not None:
            effort = model.torque_limits()[joint.dof_adr]
            velocity = model.velocity_limits()[joint.dof_adr]
            ET.SubElement(element, "limit", lower=repr(joint.range[0]), upper=repr(joint.range[1]),
                          effort=repr(float(effort)) if np.isfinite(effort) else "0",
                          velocity=repr(float(velocity)) if np.isfinite(velocity) else "0")
        _set_dynamics(element, *dynamics[joint.name])
    root.insert(0, ET.Comment(" limit effort/velocity 0: not known to the model "))
    return root


def _model_name(model: RobotModel) -> str:
    return Path(model.source).stem if model.source else "robot"


def mat_to_rpy(r: np.ndarray) -> np.ndarray:
    """URDF roll, pitch, yaw [rad] of a rotation matrix: ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    r = np.asarray(r, dtype=float)
    pitch = math.atan2(-r[2, 0], math.hypot(r[0, 0], r[1, 0]))
    if math.hypot(r[0, 0], r[1, 0]) < 1e-12:  # gimbal lock: yaw taken as 0
        return np.array([math.atan2(-r[1, 2], r[1, 1]), pitch, 0.0])
    return np.array([math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])])


def _vec(v) -> str:
    return " ".join(repr(float(x)) for x in np.ravel(v))


