"""The parameter layout of a robot model: the fields of a body (10 standard parameters) and of a
joint (friction, armature), the tree's :class:`Joint` and :class:`Body`, the joint terms a model can
identify, the MJCF custom numerics that carry Stribeck and sigmoid friction, and the conversion
between a body's 10 parameters and its inertial (mass, centre of mass, inertia about it).

See :mod:`sysid_ros.core.model.robot` for the units and the order of the parameter vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import mujoco
import numpy as np

from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.spatial import (
    inertia_mat_to_vec,
    inertia_vec_to_mat,
)

BODY_FIELDS: tuple[str, ...] = ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")
JOINT_FIELDS: tuple[str, ...] = ("Fc", "Fv", "Fo", "Ia", "Fs", "Fsig")
JointTerm = Literal["Fc", "Fv", "Fo", "Ia", "Fs", "Fsig"]
#: joint terms of a model built without naming them (plus ``Fs`` when its MJCF has Stribeck numerics)
DEFAULT_JOINT_TERMS: tuple[str, ...] = ("Fc", "Fv", "Fo", "Ia")
#: [rad/s] Stribeck velocity q̇s of a model whose MJCF has no ``stribeck:<joint>`` numeric
DEFAULT_STRIBECK_VELOCITY = 0.1
#: prefix of the MJCF custom numerics ``stribeck:<joint>`` = ``"Fs q̇s"`` (N·m, rad/s)
STRIBECK_NUMERIC = "stribeck:"
#: sigmoid friction shape (φ2 [s/rad], φ3 [rad/s]) of a joint whose MJCF has no ``sigmoid:<joint>``
#: numeric (a transition 0.1 rad/s wide centred on q̇ = 0; Gaz et al. 2019 find φ2 of 5–17 s/rad)
DEFAULT_SIGMOID_SHAPE = (10.0, 0.0)
#: prefix of the MJCF custom numerics ``sigmoid:<joint>`` = ``"φ1 φ2 φ3"`` (N·m, s/rad, rad/s)
SIGMOID_NUMERIC = "sigmoid:"
JointType = Literal["free", "ball", "slide", "hinge"]

JOINT_TYPES: dict[int, JointType] = {
    int(mujoco.mjtJoint.mjJNT_FREE): "free",
    int(mujoco.mjtJoint.mjJNT_BALL): "ball",
    int(mujoco.mjtJoint.mjJNT_SLIDE): "slide",
    int(mujoco.mjtJoint.mjJNT_HINGE): "hinge",
}
_JOINT_NV = {"free": 6, "ball": 3, "slide": 1, "hinge": 1}
_JOINT_NQ = {"free": 7, "ball": 4, "slide": 1, "hinge": 1}


@dataclass(frozen=True)
class Joint:
    """One MuJoCo joint. ``axis``/``pos`` are in the body frame; ``body`` is a MuJoCo body id."""

    name: str
    type: JointType
    body: int
    qpos_adr: int
    dof_adr: int
    axis: np.ndarray
    pos: np.ndarray
    qpos0: float
    range: tuple[float, float] | None

    @property
    def nv(self) -> int:
        return _JOINT_NV[self.type]

    @property
    def nq(self) -> int:
        return _JOINT_NQ[self.type]


@dataclass(frozen=True)
class Body:
    """One MuJoCo body (id > 0). ``pos``/``rot`` place it in its parent's frame."""

    name: str
    id: int
    parent: int
    pos: np.ndarray
    rot: np.ndarray
    joints: tuple[int, ...]
    moving: bool


_FRICTION = {"coulomb": "Fc", "viscous": "Fv", "offset": "Fo", "stribeck": "Fs", "sigmoid": "Fsig"}


def joint_terms(friction: str | Sequence[str] | None, armature: bool) -> tuple[JointTerm, ...]:
    """Joint terms from user options: ``friction`` a comma list (or list) of coulomb, viscous,
    offset, stribeck, sigmoid; ``armature`` adds rotor inertia."""
    items = friction.split(",") if isinstance(friction, str) else list(friction or [])
    items = [i.strip() for i in items if i.strip()]
    unknown = [i for i in items if i not in _FRICTION]
    if unknown:
        raise ModelError(f"friction terms are {sorted(_FRICTION)}, got {unknown}")
    return tuple(_FRICTION[i] for i in items) + (("Ia",) if armature else ())


def stribeck_numerics(mj: mujoco.MjModel) -> dict[int, tuple[float, float]]:
    """``{dof: (Fs [N·m], q̇s [rad/s])}`` from the model's custom numerics ``stribeck:<joint>``
    (hinge/slide joints). :class:`ModelError` when one names no such joint, has not 2 values or
    a q̇s that is not positive."""
    out = {}
    for dof, i in numeric_ids(mj, STRIBECK_NUMERIC, strict=True).items():
        adr, size = int(mj.numeric_adr[i]), int(mj.numeric_size[i])
        data = mj.numeric_data[adr:adr + size]
        if size != 2 or not data[1] > 0:
            name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_NUMERIC, i)
            raise ModelError(f"custom numeric {name!r}: expected 2 values 'Fs [N m] qs [rad/s]' with "
                             f"qs > 0, got {data.tolist()}")
        out[dof] = (float(data[0]), float(data[1]))
    return out


def sigmoid_numerics(mj: mujoco.MjModel) -> dict[int, tuple[float, float, float]]:
    """``{dof: (φ1 [N·m], φ2 [s/rad], φ3 [rad/s])}`` from the model's custom numerics
    ``sigmoid:<joint>`` (hinge/slide joints). :class:`ModelError` when one names no such joint,
    has not 3 finite values or a steepness φ2 that is not positive."""
    out = {}
    for dof, i in numeric_ids(mj, SIGMOID_NUMERIC, strict=True).items():
        adr, size = int(mj.numeric_adr[i]), int(mj.numeric_size[i])
        data = mj.numeric_data[adr:adr + size]
        if size != 3 or not (np.all(np.isfinite(data)) and data[1] > 0):
            name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_NUMERIC, i)
            raise ModelError(f"custom numeric {name!r}: expected 3 finite values 'phi1 [N m] phi2 [s/rad] "
                             f"phi3 [rad/s]' with phi2 > 0, got {data.tolist()}")
        out[dof] = (float(data[0]), float(data[1]), float(data[2]))
    return out


def check_sigmoid_shape(shape: np.ndarray | Sequence[float], nv: int) -> np.ndarray:
    """Sigmoid shapes as an ``(nv, 2)`` array of (φ2 [s/rad], φ3 [rad/s]) per dof from one pair
    ``(2,)`` (every joint) or ``(nv, 2)``; :class:`ModelError` unless finite with φ2 > 0."""
    arr = np.array(shape, dtype=float)
    if arr.shape == (2,):
        arr = np.tile(arr, (nv, 1))
    if arr.shape != (nv, 2) or not (np.all(np.isfinite(arr)) and np.all(arr[:, 0] > 0)):
        raise ModelError(f"a sigmoid shape is (phi2 [s/rad] > 0, phi3 [rad/s]) finite, for every joint "
                         f"or as ({nv}, 2) per dof; got {np.array(shape).tolist()}")
    return arr


def body_params_from_inertial(mass: float, com: np.ndarray, inertia_com: np.ndarray) -> np.ndarray:
    """10 standard parameters from mass [kg], CoM (3,) [m] and the (3, 3) inertia about the CoM.

    The inertia is shifted to the body origin with the parallel-axis theorem.
    """
    c = np.asarray(com, dtype=float)
    i_origin = np.asarray(inertia_com, dtype=float) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.concatenate(([mass], mass * c, inertia_mat_to_vec(i_origin)))


def inertial_from_body_params(phi: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Inverse of :func:`body_params_from_inertial`: ``(mass, com (3,), inertia about CoM (3, 3))``.

    Raises :class:`ModelError` when the mass is not positive (no CoM exists).
    """
    phi = np.asarray(phi, dtype=float)
    m = float(phi[0])
    if not m > 0.0:
        raise ModelError(f"a body needs a positive mass to have a centre of mass, got m={m!r}")
    c = phi[1:4] / m
    i_com = inertia_vec_to_mat(phi[4:10]) - m * (c @ c * np.eye(3) - np.outer(c, c))
    return m, c, i_com




#: joint types with one dof whose armature/damping/frictionloss the identified model may set
SCALAR_JOINTS = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))




def numeric_ids(mj: mujoco.MjModel, prefix: str, *, strict: bool = False) -> dict[int, int]:
    """``{dof: numeric id}`` of the model's custom numerics ``<prefix><joint>``; ``strict``:
    :class:`ModelError` when one names no hinge or slide joint (else it is skipped)."""
    out = {}
    for i in range(mj.nnumeric):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_NUMERIC, i) or ""
        if not name.startswith(prefix):
            continue
        joint = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, name[len(prefix):])
        if joint < 0 or int(mj.jnt_type[joint]) not in SCALAR_JOINTS:
            if strict:
                raise ModelError(f"custom numeric {name!r} names no hinge or slide joint of the model")
            continue
        out[int(mj.jnt_dofadr[joint])] = i
    return out


def stribeck_numeric_ids(mj: mujoco.MjModel) -> dict[int, int]:
    """``{dof: numeric id}`` of the model's ``stribeck:<joint>`` numerics (see :func:`stribeck_numerics`)."""
    return numeric_ids(mj, STRIBECK_NUMERIC)


