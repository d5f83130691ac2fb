"""MJCF export of an identified model: the source MJCF with the identified inertials and joint
terms written at full precision, and a comment saying what was identified (identified.xml)."""

from __future__ import annotations

import logging
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.atomic import write_atomic
from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.layout import (
    SCALAR_JOINTS,
    SIGMOID_NUMERIC,
    STRIBECK_NUMERIC,
    inertial_from_body_params,
    sigmoid_numerics,
    stribeck_numerics,
)
from sysid_ros.core.model.spatial import (
    mat_to_quat,
)

log = logging.getLogger(__name__)


def write_mjcf(model, theta: np.ndarray, path: str | os.PathLike[str]) -> Path:
    """Write the source MJCF of ``model`` (a :class:`~sysid_ros.core.model.robot.RobotModel`) with
    the parameter vector ``theta``'s inertials and joint terms.

    Writes ``<inertial>`` (mass, pos, quat, diaginertia) of every identified body and
    ``armature``/``damping``/``frictionloss`` of every joint with terms. A hinge or slide joint
    term of the source that was *not* identified (no ``Ia``, ``Fv`` or ``Fc`` in this model's
    joint terms) is written as 0: the identified model has none (the regressor had no column
    for it), and the file must simulate the model that was identified (logged). The file is
    written atomically (a temporary file renamed into place). Raises :class:`ModelError` when
    a body's parameters are not physically consistent (MuJoCo could not load the result).
    """
    theta = model.check_theta(theta)
    spec = model.spec()
    inertials = {}
    for k, b in enumerate(model.param_bodies):
        name = model.body_name(b)
        mass, com, inertia, quat = principal_inertial(theta[10 * k:10 * k + 10], name)
        inertials[name] = {"mass": [mass], "pos": com, "quat": quat, "diaginertia": inertia}
        body = spec.body(name)
        body.explicitinertial = True
        body.mass, body.ipos, body.iquat, body.inertia = mass, com, quat, inertia
        body.fullinertia = [math.nan] * 6
    attr = {"Fc": "frictionloss", "Fv": "damping", "Ia": "armature"}
    joint_values: dict[str, dict[str, float]] = {}
    unwritten: list[str] = []
    stribeck: dict[str, list[float]] = {}
    sigmoid: dict[str, list[float]] = {}
    for (term, dof), value in model.joint_term_values(theta).items():
        joint = model.joints[int(model.mj.dof_jntid[dof])]
        if term == "Fs":
            stribeck[joint.name] = [value, model.stribeck_velocity]
        elif term == "Fsig":
            sigmoid[joint.name] = [value, *map(float, model.sigmoid_shape[dof])]
        elif term in attr:
            joint_values.setdefault(joint.name, {})[attr[term]] = max(value, 0.0)
            _set_scalar(spec.joint(joint.name), attr[term], max(value, 0.0))
        elif abs(value) > 0:
            log.info("%s.%s = %g has no MJCF counterpart; not written", joint.name, term, value)
            unwritten.append(f"{joint.name}.{term} = {value!r}")
    source = {key: getattr(model.mj, f"dof_{key}") for key in attr.values()}  # the MJCF's values
    identified = {(attr[term], dof) for term, dof in model.joint_term_values(theta) if term in attr}
    zeroed: dict[str, list[str]] = {}
    for dof in range(model.mj.nv):
        j = int(model.mj.dof_jntid[dof])
        if int(model.mj.jnt_type[j]) not in SCALAR_JOINTS:
            continue
        name = model.joints[j].name
        for key, values in source.items():
            if (key, dof) not in identified and values[dof] != 0:
                joint_values.setdefault(name, {})[key] = 0.0
                _set_scalar(spec.joint(name), key, 0.0)
                zeroed.setdefault(key, []).append(name)
    for dof, (fs, velocity) in stribeck_numerics(model.mj).items():
        name = model.joints[int(model.mj.dof_jntid[dof])].name
        if name not in stribeck and fs != 0:
            stribeck[name] = [0.0, velocity]
            zeroed.setdefault("stribeck", []).append(name)
    for dof, (amplitude, steepness, offset) in sigmoid_numerics(model.mj).items():
        name = model.joints[int(model.mj.dof_jntid[dof])].name
        if name not in sigmoid and amplitude != 0:
            sigmoid[name] = [0.0, steepness, offset]
            zeroed.setdefault("sigmoid", []).append(name)
    numerics = {STRIBECK_NUMERIC + k: v for k, v in stribeck.items()}
    numerics |= {SIGMOID_NUMERIC + k: v for k, v in sigmoid.items()}
    for name, data in numerics.items():
        numeric = spec.numeric(name)
        if numeric is None:
            spec.add_numeric(name=name, data=data)
        else:
            numeric.data = data
    if zeroed:
        log.info("joint terms of the source that were not identified written as 0 (the identified "
                 "model has none): %s", "; ".join(f"{k} of {v}" for k, v in zeroed.items()))
    try:
        spec.compile()
        xml = mjcf_full_precision(spec.to_xml(), inertials, joint_values)
        xml = _numerics_full_precision(xml, numerics)
        xml = _with_comment(xml, _export_note(model.joint_terms, zeroed, unwritten,
                                              stribeck=bool(stribeck), sigmoid=bool(sigmoid)))
        mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        raise ModelError(f"MuJoCo rejected the identified parameters: {exc}") from exc
    return write_atomic(Path(path), xml)


def _export_note(terms: Sequence[str], zeroed: dict[str, list[str]], unwritten: list[str], *,
                 stribeck: bool = False, sigmoid: bool = False) -> str:
    """The comment identified.xml carries about its joint terms."""
    lines = [f"Written by sysid_ros: inertials and joint terms {list(terms)} as identified."]
    if zeroed:
        lines.append("Joint terms of the source that were not identified are 0, as the identified "
                     "model assumed: " + "; ".join(f"{k} of {', '.join(v)}" for k, v in zeroed.items()) + ".")
    if unwritten:
        lines.append("Identified terms MJCF cannot hold (Fo: a constant torque offset [N m], add it "
                     "to the torque MuJoCo computes): " + "; ".join(unwritten) + ".")
    if stribeck:
        lines.append("Stribeck friction Fs*exp(-|qdot|/qs)*sign(qdot) [N m]: custom numerics "
                     f"{STRIBECK_NUMERIC}<joint> = 'Fs qs' (N m, rad/s). MuJoCo does not simulate them "
                     "(its frictionloss is Coulomb only); sysid_ros's plant applies them as a joint "
                     "torque, any other simulator must add -Fs*exp(-|qdot|/qs)*sign(qdot) itself.")
    if sigmoid:
        lines.append("Sigmoid friction (Gaz et al., RA-L 2019) p1/(1+exp(-p2*(qdot+p3))) - "
                     f"p1/(1+exp(-p2*p3)) [N m]: custom numerics {SIGMOID_NUMERIC}<joint> = 'p1 p2 p3' "
                     "(N m, s/rad, rad/s). MuJoCo does not simulate them; sysid_ros's plant applies "
                     "them as a joint torque, any other simulator must subtract that torque itself. "
                     "Away from qdot = -p3 (|qdot + p3| >> 1/p2) it is Coulomb friction p1/2 (MuJoCo "
                     "frictionloss, not written here: the plant would count it twice) plus a constant "
                     "p1*(1/2 - 1/(1+exp(-p2*p3))) [N m].")
    return "\n     ".join(lines)


def _numerics_full_precision(xml: str, values: dict[str, list[float]]) -> str:
    """``xml`` with the custom numerics named in ``values`` at full precision."""
    if not values:
        return xml
    root = ET.fromstring(xml)
    for numeric in root.iter("numeric"):
        data = values.get(numeric.get("name", ""))
        if data is not None:
            numeric.set("data", " ".join(repr(float(x)) for x in data))
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def _with_comment(xml: str, text: str) -> str:
    """``xml`` with ``text`` as a comment after the root element's opening tag."""
    end = xml.index(">", xml.index("<mujoco")) + 1
    return xml[:end] + "\n  <!-- " + text.replace("--", "- -") + " -->" + xml[end:]


def mjcf_full_precision(xml: str, inertials: dict[str, dict[str, np.ndarray]],
                    joints: dict[str, dict[str, float]]) -> str:
    """MuJoCo's XML writer keeps 6 significant digits; rewrite identified values at full precision."""
    root = ET.fromstring(xml)
    for body in root.iter("body"):
        values = inertials.get(body.get("name", ""))
        if values is None:
            continue
        inertial = body.find("inertial")
        if inertial is None:
            inertial = ET.SubElement(body, "inertial")
        inertial.attrib.pop("fullinertia", None)
        for key, v in values.items():
            inertial.set(key, " ".join(repr(float(x)) for x in np.ravel(v)))
    for joint in root.iter("joint"):
        for key, v in joints.get(joint.get("name", ""), {}).items():
            joint.set(key, repr(float(v)))
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def principal_inertial(phi: np.ndarray, body: str) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(mass, com, principal moments (3,), quat (4,)) of one body's 10 parameters."""
    try:
        mass, com, i_com = inertial_from_body_params(phi)
    except ModelError as exc:
        raise ModelError(f"body {body!r}: {exc}") from None
    moments, axes = rla.eigh(i_com)
    if np.linalg.det(axes) < 0:
        axes[:, 0] = -axes[:, 0]
    a, b, c = moments
    if not (moments.min() > 0 and a + b >= c and a + c >= b and b + c >= a):
        raise ModelError(f"body {body!r}: principal moments {moments} are not physically "
                         f"consistent (positive, triangle inequality)")
    return mass, com, moments, mat_to_quat(axes)


def _set_scalar(obj, attr: str, value: float) -> None:
    """Set a joint attribute that is a float in older MuJoCo and an array in newer (damping is
    ``[linear, ...]`` since MuJoCo 3.3): the first entry carries the linear coefficient."""
    current = getattr(obj, attr)
    if np.ndim(current):
        arr = np.array(current, dtype=float)
        arr[...] = 0.0
        arr.flat[0] = value
        setattr(obj, attr, arr)
    else:
        setattr(obj, attr, value)


