"""Robot models from MJCF: kinematic tree, parameter layout, nominal values, and MJCF export.

Parameters (SI units):

* per moving body, 10 standard parameters in the body frame about the body origin
  ``[m, hx, hy, hz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` with ``h = m * c`` (c the centre of mass),
  ``Ixy`` the tensor entry (``-∫xy dm``), named ``<body>.<field>``;
* per hinge/slide joint, optionally ``[Fc, Fv, Fo, Ia, Fs]``: Coulomb friction [N·m], viscous
  friction [N·m·s/rad], constant offset [N·m], rotor/armature inertia [kg·m²] and Stribeck friction
  [N·m] (the torque ``Fs·exp(−|q̇|/q̇s)·sign(q̇)``, with one Stribeck velocity q̇s [rad/s] per model:
  :attr:`RobotModel.stribeck_velocity`), named ``<joint>.<field>``. In MuJoCo these are
  ``frictionloss``, ``damping``, (none), ``armature`` and (none: MuJoCo has no Stribeck friction;
  custom numeric ``stribeck:<joint>`` = ``"Fs q̇s"`` holds it, and the package's plant applies it,
  :mod:`sysid_ros.core.sim.plant`);
* per hinge/slide joint, optionally ``Fsig``: the amplitude φ1 [N·m] of the sigmoid friction of Gaz
  et al. (RA-L 4(4) 2019, the Panda's identification), ``φ1/(1 + exp(−φ2(q̇ + φ3))) −
  φ1/(1 + exp(−φ2 φ3))``, with a shape (φ2 [s/rad] steepness, φ3 [rad/s] offset) per joint
  (:attr:`RobotModel.sigmoid_shape`); MuJoCo has none either: custom numeric ``sigmoid:<joint>``
  = ``"φ1 φ2 φ3"`` holds it, and the package's plant applies it.

The parameter vector is ordered body by body (MuJoCo body order), then joint by joint.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import mujoco
import numpy as np

from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.couplings import check_couplings
from sysid_ros.core.model.motors import DAMIAO_MOTORS, MotorModel
from sysid_ros.core.model.spatial import (
    inertia_mat_to_vec,
    inertia_vec_to_mat,
    mat_to_quat,
    quat_to_mat,
)
from sysid_ros.core.model.urdf import check_base, is_urdf, set_base, urdf_for_mujoco

log = logging.getLogger(__name__)
T = TypeVar("T")

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

_JOINT_TYPES: dict[int, JointType] = {
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
    for dof, i in _numeric_ids(mj, STRIBECK_NUMERIC, strict=True).items():
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
    for dof, i in _numeric_ids(mj, SIGMOID_NUMERIC, strict=True).items():
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


class RobotModel:
    """A rigid-body tree read from MJCF through MuJoCo, with its identification parameter layout.

    Build with :meth:`from_mjcf` or :meth:`from_xml_string`. Attributes of interest:

    * ``mj``: the compiled ``mujoco.MjModel`` (ground truth in simulation);
    * ``joints``/``bodies``: the tree (every MuJoCo body except the world);
    * ``param_bodies``: MuJoCo ids of the bodies whose 10 parameters are identified;
    * ``term_joints``: indices into ``joints`` of the hinge/slide joints carrying joint terms;
    * ``param_names``/``nominal``: the parameter vector layout and its values in the MJCF;
    * ``stribeck_velocity``: q̇s [rad/s] of the ``Fs`` columns;
    * ``sigmoid_shape (nv, 2)``: (φ2 [s/rad], φ3 [rad/s]) of each dof's ``Fsig`` column.

    ``joint_terms`` None: :data:`DEFAULT_JOINT_TERMS`, plus ``Fs`` when the MJCF has
    ``stribeck:<joint>`` numerics. ``stribeck_velocity`` None: the numerics' q̇s, else
    :data:`DEFAULT_STRIBECK_VELOCITY`. ``Fsig`` is a default term too where the MJCF has
    ``sigmoid:<joint>`` numerics; ``sigmoid_shape`` None: their (φ2, φ3), else
    :data:`DEFAULT_SIGMOID_SHAPE` (one pair for every joint, or ``(nv, 2)``).
    """

    def __init__(
        self,
        mj: mujoco.MjModel,
        *,
        joint_terms: Sequence[JointTerm] | None = None,
        include_massless: bool = False,
        source: str | None = None,
        xml: str | None = None,
        urdf: str | None = None,
        spec_factory: Callable[[], mujoco.MjSpec] | None = None,
        stribeck_velocity: float | None = None,
        sigmoid_shape: np.ndarray | Sequence[float] | None = None,
    ) -> None:
        if joint_terms is None:  # every term MuJoCo simulates, and Stribeck where the model has it
            joint_terms = DEFAULT_JOINT_TERMS + (("Fs",) if stribeck_numerics(mj) else ())
            joint_terms += ("Fsig",) if sigmoid_numerics(mj) else ()
        unknown = [t for t in joint_terms if t not in JOINT_FIELDS]
        if unknown:
            raise ModelError(f"joint terms must be among {JOINT_FIELDS}, got {unknown}")
        self.mj = mj
        self.source = source
        self._xml = xml
        #: the source URDF (geometry and URIs as written, base option applied), None for MJCF
        self.urdf = urdf
        self._spec_factory = spec_factory
        self.joint_terms: tuple[JointTerm, ...] = tuple(t for t in JOINT_FIELDS if t in joint_terms)
        self.gravity = np.array(mj.opt.gravity, dtype=float)
        self.nq, self.nv = int(mj.nq), int(mj.nv)
        if mj.njnt == 0:
            raise ModelError(f"{source or 'the model'} has no joints: no body moves, so there are no "
                             "dynamics to identify (expected at least one hinge, slide, ball or free joint)")

        self.joints: tuple[Joint, ...] = tuple(self._read_joint(mj, j) for j in range(mj.njnt))
        moving = np.zeros(mj.nbody, dtype=bool)
        for b in range(1, mj.nbody):
            moving[b] = moving[mj.body_parentid[b]] or mj.body_jntnum[b] > 0
        self.bodies: tuple[Body, ...] = tuple(
            Body(
                name=mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}",
                id=b,
                parent=int(mj.body_parentid[b]),
                pos=np.array(mj.body_pos[b]),
                rot=quat_to_mat(np.array(mj.body_quat[b])),
                joints=tuple(range(mj.body_jntadr[b], mj.body_jntadr[b] + mj.body_jntnum[b])),
                moving=bool(moving[b]),
            )
            for b in range(1, mj.nbody)
        )
        for j in self.joints:
            if j.type == "free" and mj.body_parentid[j.body] != 0:
                raise ModelError(f"free joint {j.name!r} must belong to a child of the world body")
        self.param_bodies: tuple[int, ...] = tuple(
            b.id for b in self.bodies if b.moving and (include_massless or mj.body_mass[b.id] > 0)
        )
        self.term_joints: tuple[int, ...] = (
            tuple(i for i, j in enumerate(self.joints) if j.type in ("hinge", "slide"))
            if self.joint_terms
            else ()
        )
        self.term_dofs = np.array([self.joints[j].dof_adr for j in self.term_joints], dtype=int)
        #: column of each term joint's first joint term in the parameter vector
        self.term_columns = 10 * len(self.param_bodies) + len(self.joint_terms) * np.arange(
            len(self.term_joints))
        self._check_unsupported()

        names = [f"{self.body_name(b)}.{f}" for b in self.param_bodies for f in BODY_FIELDS]
        names += [f"{self.joints[j].name}.{t}" for j in self.term_joints for t in self.joint_terms]
        self.param_names: tuple[str, ...] = tuple(names)
        self._index = {n: i for i, n in enumerate(names)}
        if len(self._index) != len(names):
            raise ModelError("body and joint names must be unique to name parameters")
        stribeck = stribeck_numerics(mj)
        velocities = sorted({v for _, v in stribeck.values()})
        if stribeck_velocity is None:
            stribeck_velocity = velocities[0] if velocities else DEFAULT_STRIBECK_VELOCITY
            if len(velocities) > 1:
                log.warning("the model's Stribeck velocities %s differ; the identified model has one "
                            "q̇s: %g rad/s", velocities, stribeck_velocity)
        if not (math.isfinite(stribeck_velocity) and stribeck_velocity > 0):
            raise ModelError("the Stribeck velocity must be a finite number > 0 rad/s, "
                             f"got {stribeck_velocity}")
        #: [rad/s] the Stribeck velocity q̇s of every joint's ``Fs`` column
        self.stribeck_velocity = float(stribeck_velocity)
        if sigmoid_shape is None:
            sigmoid_shape = np.tile(DEFAULT_SIGMOID_SHAPE, (self.nv, 1))
            for dof, (_, steepness, offset) in sigmoid_numerics(mj).items():
                sigmoid_shape[dof] = steepness, offset
        #: (nv, 2) sigmoid friction shape (φ2 [s/rad], φ3 [rad/s]) of each dof's ``Fsig`` column
        self.sigmoid_shape = check_sigmoid_shape(sigmoid_shape, self.nv)
        self.sigmoid_shape.setflags(write=False)
        self.nominal: np.ndarray = self.params_of(mj)
        self.nominal.setflags(write=False)
        self._derived: dict[object, object] = {}
        self._derived_lock = threading.Lock()
        self._thread_local = threading.local()

    # ------------------------------------------------------------------------------ construction
    @classmethod
    def load(cls, model: str | os.PathLike[str], *, base: str | None = None, **kwargs) -> RobotModel:
        """A model from a path to an MJCF or URDF file, or from its XML text (a string starting
        with ``<``): the one rule for every place a model is given (``--model``, ``model_path``,
        ``robot_description``). ``base``: see :meth:`from_mjcf`."""
        if isinstance(model, str) and model.lstrip().startswith("<"):
            return cls.from_xml_string(model, base=base, **kwargs)
        return cls.from_mjcf(model, base=base, **kwargs)

    @classmethod
    def from_mjcf(cls, path: str | os.PathLike[str], *, base: str | None = None, **kwargs) -> RobotModel:
        """Load an MJCF file, or a URDF (root ``<robot>``). Keyword options as in the constructor.

        URDF: ``<collision>`` elements are dropped; ``<visual>`` meshes are resolved
        (``package://`` against ``AMENT_PREFIX_PATH``/``ROS_PACKAGE_PATH``, relative paths against
        the file's folder) and kept for viewing as massless, non-colliding geoms, or dropped with
        one info line when they cannot be found or read (meshes carry no dynamics; see
        :mod:`sysid_ros.core.model.urdf`). MuJoCo's URDF import welds the root link to the world
        and merges links joined by fixed joints into their parent (``fusestatic``), so parameters
        are named by the moving links.

        ``base``: None keeps what the file says; "floating" puts a free joint on the root (URDF:
        a ``floating`` joint from an added ``world`` link; MJCF: a free joint on the first body
        under the world, which must have no joint); "fixed" removes such a free joint."""
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"expected an MJCF or URDF file, got {str(path)!r} (not found)")
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError:
            root = None  # MuJoCo's own parser says what is wrong
        source = str(path.resolve())
        if root is not None and is_urdf(root):
            return cls._from_urdf(root, base_dir=path.parent, base=base, source=source, **kwargs)
        if check_base(base) is not None:
            def factory() -> mujoco.MjSpec:
                return _mjcf_with_base(mujoco.MjSpec.from_file(str(path)), base)
            try:
                mj = factory().compile()
            except ValueError as exc:
                raise ModelError(f"MuJoCo could not load {str(path)!r}: {exc}") from exc
            return cls(mj, source=source, spec_factory=factory, **kwargs)
        try:
            mj = mujoco.MjModel.from_xml_path(str(path))
        except ValueError as exc:  # MuJoCo's parse/compile errors
            raise ModelError(f"MuJoCo could not load {str(path)!r}: {exc}") from exc
        return cls(mj, source=source, **kwargs)

    @classmethod
    def from_xml_string(cls, xml: str, *, base: str | None = None, **kwargs) -> RobotModel:
        """Load MJCF or URDF text (MJCF: no external assets; URDF: meshes as in :meth:`from_mjcf`,
        relative paths not resolved). ``base``: see :meth:`from_mjcf`."""
        try:
            root = ET.fromstring(xml)
        except ET.ParseError as exc:
            raise ModelError(f"expected MJCF or URDF XML text, got text that does not parse: {exc}") from None
        if is_urdf(root):
            return cls._from_urdf(root, base_dir=None, base=base, source=None, **kwargs)
        if check_base(base) is not None:
            xml = _mjcf_with_base(mujoco.MjSpec.from_string(xml), base).to_xml()
        try:
            mj = mujoco.MjModel.from_xml_string(xml)
        except ValueError as exc:
            raise ModelError(f"MuJoCo could not load the MJCF text: {exc}") from exc
        return cls(mj, xml=xml, **kwargs)

    @classmethod
    def _from_urdf(cls, root: ET.Element, *, base_dir: Path | None, base: str | None,
                   source: str | None, **kwargs) -> RobotModel:
        set_base(root, base)
        what = repr(source) if source else "the URDF text"
        text = urdf_for_mujoco(root, base_dir=base_dir)
        try:
            mj = mujoco.MjModel.from_xml_string(text)
        except ValueError as exc:
            bare = urdf_for_mujoco(root, base_dir=base_dir, geometry=False)
            try:
                mj = mujoco.MjModel.from_xml_string(bare)
            except ValueError:
                raise ModelError(f"MuJoCo could not load {what}: {exc}") from exc
            log.info("MuJoCo could not read the meshes of %s (%s): loaded without geometry", what, exc)
            text = bare
        return cls(mj, source=source, xml=text, urdf=ET.tostring(root, encoding="unicode"), **kwargs)

    def with_joint_terms(self, terms: Sequence[JointTerm]) -> RobotModel:
        """The same robot (same source) with other joint terms in its parameter vector."""
        return RobotModel(self.mj, joint_terms=terms, source=self.source, xml=self._xml, urdf=self.urdf,
                          spec_factory=self._spec_factory, stribeck_velocity=self.stribeck_velocity,
                          sigmoid_shape=self.sigmoid_shape)

    def with_stribeck_velocity(self, velocity: float) -> RobotModel:
        """The same robot with Stribeck velocity ``velocity`` [rad/s] in its ``Fs`` columns."""
        return RobotModel(self.mj, joint_terms=self.joint_terms, source=self.source, xml=self._xml,
                          urdf=self.urdf, spec_factory=self._spec_factory, stribeck_velocity=velocity,
                          sigmoid_shape=self.sigmoid_shape)

    def with_sigmoid_shape(self, shape: np.ndarray | Sequence[float]) -> RobotModel:
        """The same robot with sigmoid shape ``shape`` (φ2 [s/rad], φ3 [rad/s]): one pair ``(2,)``
        for every joint or ``(nv, 2)`` per dof) in its ``Fsig`` columns."""
        return RobotModel(self.mj, joint_terms=self.joint_terms, source=self.source, xml=self._xml,
                          urdf=self.urdf, spec_factory=self._spec_factory,
                          stribeck_velocity=self.stribeck_velocity, sigmoid_shape=shape)

    def sigmoid_of(self, theta: np.ndarray) -> dict[str, list[float]]:
        """``{joint: [φ1 [N·m], φ2 [s/rad], φ3 [rad/s]]}`` of the ``Fsig`` terms in ``theta``."""
        if "Fsig" not in self.joint_terms:
            return {}
        theta = self.check_theta(theta)
        return {self.joints[j].name: [float(theta[self.index(f"{self.joints[j].name}.Fsig")]),
                                      *map(float, self.sigmoid_shape[self.joints[j].dof_adr])]
                for j in self.term_joints}

    @staticmethod
    def _read_joint(mj: mujoco.MjModel, j: int) -> Joint:
        jtype = _JOINT_TYPES[int(mj.jnt_type[j])]
        limited = bool(mj.jnt_limited[j]) and jtype in ("hinge", "slide")
        return Joint(
            name=mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}",
            type=jtype,
            body=int(mj.jnt_bodyid[j]),
            qpos_adr=int(mj.jnt_qposadr[j]),
            dof_adr=int(mj.jnt_dofadr[j]),
            axis=np.array(mj.jnt_axis[j]),
            pos=np.array(mj.jnt_pos[j]),
            qpos0=float(mj.qpos0[mj.jnt_qposadr[j]]) if jtype in ("hinge", "slide") else 0.0,
            range=(float(mj.jnt_range[j, 0]), float(mj.jnt_range[j, 1])) if limited else None,
        )

    def _check_unsupported(self) -> None:
        mj = self.mj
        check_couplings(mj, self.source)
        if np.any(mj.body_gravcomp != 0):
            names = [self.body_name(b) for b in np.flatnonzero(mj.body_gravcomp)]
            log.warning("bodies %s have gravcomp: MuJoCo cancels their gravity with a passive force "
                        "that the regressor does not model", names)
        if np.any(mj.jnt_stiffness != 0):
            log.warning("joint stiffness (springs) is not part of the identified model")
        if mj.opt.density > 0 or mj.opt.viscosity > 0:
            log.warning("fluid forces (density/viscosity) are not part of the identified model")

    # ------------------------------------------------------------------------- derived data
    def derived(self, key: object, factory: Callable[[], T]) -> T:
        """Data computed once from this (immutable) model, e.g. index structures of the tree."""
        try:
            return self._derived[key]  # type: ignore[return-value]
        except KeyError:
            with self._derived_lock:
                if key not in self._derived:
                    self._derived[key] = factory()
                return self._derived[key]  # type: ignore[return-value]

    def scratch_data(self) -> mujoco.MjData:
        """An ``MjData`` of this model private to the calling thread (for per-sample MuJoCo calls)."""
        data = getattr(self._thread_local, "data", None)
        if data is None:
            data = self._thread_local.data = mujoco.MjData(self.mj)
        return data

    # ------------------------------------------------------------------------------- layout
    @property
    def n_params(self) -> int:
        """Length ``p`` of the parameter vector."""
        return len(self.param_names)

    @property
    def n_body_params(self) -> int:
        """Number of inertial parameters (10 per identified body); joint terms follow them."""
        return 10 * len(self.param_bodies)

    def body_name(self, body: int) -> str:
        return self.bodies[body - 1].name

    def body_id(self, name: str) -> int:
        """MuJoCo body id of a body name (:class:`ModelError` listing the bodies if unknown)."""
        for b in self.bodies:
            if b.name == name:
                return b.id
        raise ModelError(f"unknown body {name!r}; bodies are {[b.name for b in self.bodies]}")

    def index(self, name: str) -> int:
        """Position of a parameter name in the vector."""
        try:
            return self._index[name]
        except KeyError:
            raise ModelError(f"unknown parameter {name!r}; e.g. {list(self.param_names[:3])}") from None

    def body_slice(self, body: int | str) -> slice:
        """Slice of one body's 10 parameters in the vector."""
        bid = self.body_id(body) if isinstance(body, str) else body
        if bid not in self.param_bodies:
            raise ModelError(f"body {self.body_name(bid)!r} has no identified parameters "
                             f"(fixed to the world or massless)")
        k = self.param_bodies.index(bid)
        return slice(10 * k, 10 * k + 10)

    @property
    def dof_joint_names(self) -> tuple[str, ...]:
        """Joint names of the hinge/slide joints in dof order (the names in JointState messages)."""
        return tuple(j.name for j in self.joints if j.type in ("hinge", "slide"))

    def require_scalar_joints(self, what: str) -> None:
        """Raise :class:`ModelError` naming the ball and free joints of the model when ``what`` (e.g.
        "joint-state data") supports hinge and slide joints only."""
        other = [f"joint {j.name!r} is a {j.type} joint" for j in self.joints
                 if j.type not in ("hinge", "slide")]
        if other:
            raise ModelError(f"{what} supports hinge and slide joints only: {', '.join(other)} (a "
                             "free-floating base is supported by the online estimators in simulation: "
                             "sysid_ros.core.sim.synthetic.floating_base)")

    @property
    def joint_qpos_indices(self) -> np.ndarray:
        """qpos index of each hinge/slide joint, in ``dof_joint_names`` order."""
        return np.array([j.qpos_adr for j in self.joints if j.type in ("hinge", "slide")], dtype=int)

    @property
    def dof_indices(self) -> np.ndarray:
        """dof (qvel) index of each hinge/slide joint, in ``dof_joint_names`` order."""
        return np.array([j.dof_adr for j in self.joints if j.type in ("hinge", "slide")], dtype=int)

    def check_fixed_base(self, what: str) -> None:
        """:class:`ModelError` if the model has a free joint (a floating base): ``what`` (e.g.
        "joint-state data") holds the hinge/slide joints only, not the base's pose. (Ball joints
        elsewhere: :meth:`require_scalar_joints`.)"""
        floating = [f"{j.name} ({j.type})" for j in self.joints if j.type == "free"]
        if floating:
            raise ModelError(f"{what} hold(s) hinge/slide joint states only, but the model has "
                             f"{', '.join(floating)}: a floating base needs its pose and velocity; "
                             "load the model with a fixed base (--base fixed, node parameter base: fixed)")

    def joint_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower/upper position limits per dof ``(nv,)``; ``±inf`` where unlimited."""
        lo, hi = np.full(self.nv, -np.inf), np.full(self.nv, np.inf)
        for j in self.joints:
            if j.range is not None:
                lo[j.dof_adr], hi[j.dof_adr] = j.range
        return lo, hi

    @property
    def motors(self) -> dict[str, MotorModel]:
        """Motor model per joint name, from MJCF custom text ``motor:<joint>`` (may be empty)."""
        out = {}
        for t in range(self.mj.ntext):
            name = mujoco.mj_id2name(self.mj, mujoco.mjtObj.mjOBJ_TEXT, t) or ""
            if not name.startswith("motor:"):
                continue
            joint = name.split(":", 1)[1]
            adr, size = self.mj.text_adr[t], self.mj.text_size[t]
            model_name = bytes(self.mj.text_data[adr:adr + size - 1]).decode()
            if joint not in {j.name for j in self.joints}:
                raise ModelError(f"custom text {name!r} names no joint of the model")
            if model_name not in DAMIAO_MOTORS:
                raise ModelError(f"{name!r}: unknown motor {model_name!r}; known: {sorted(DAMIAO_MOTORS)}")
            out[joint] = DAMIAO_MOTORS[model_name]
        return out

    def torque_limits(self) -> np.ndarray:
        """Torque/force limit magnitude per dof ``(nv,)``: the joint's ``actuatorfrcrange`` if
        set, else its motor's TMAX, else ``inf``."""
        out = np.full(self.nv, np.inf)
        motors = self.motors
        for ji, j in enumerate(self.joints):
            if j.type not in ("hinge", "slide"):
                continue
            if self.mj.jnt_actfrclimited[ji]:
                out[j.dof_adr] = float(np.min(np.abs(self.mj.jnt_actfrcrange[ji])))
            elif j.name in motors:
                out[j.dof_adr] = motors[j.name].tmax
        return out

    def velocity_limits(self) -> np.ndarray:
        """Velocity limit magnitude per dof ``(nv,)`` from the motors' VMAX, else ``inf``."""
        out = np.full(self.nv, np.inf)
        for j in self.joints:
            if j.name in self.motors:
                out[j.dof_adr] = self.motors[j.name].vmax
        return out

    def as_dict(self, theta: np.ndarray) -> dict[str, float]:
        """``{name: value}`` for a parameter vector."""
        theta = self.check_theta(theta)
        return {n: float(v) for n, v in zip(self.param_names, theta, strict=True)}

    def from_dict(self, values: Mapping[str, float], *, base: np.ndarray | None = None) -> np.ndarray:
        """Parameter vector from ``{name: value}``; names not given keep ``base`` (default nominal)."""
        theta = np.array(self.nominal if base is None else base, dtype=float)
        for name, value in values.items():
            theta[self.index(name)] = float(value)
        return theta

    def check_theta(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ModelError(f"expected a parameter vector of shape ({self.n_params},), got {theta.shape}")
        return theta

    # ------------------------------------------------------------------ values <-> MuJoCo / MJCF
    def params_of(self, mj: mujoco.MjModel) -> np.ndarray:
        """The parameter vector held by a compiled MuJoCo model of this robot (same layout)."""
        theta = np.zeros(self.n_params)
        for k, b in enumerate(self.param_bodies):
            r = quat_to_mat(np.array(mj.body_iquat[b]))
            i_com = r @ np.diag(mj.body_inertia[b]) @ r.T
            theta[10 * k:10 * k + 10] = body_params_from_inertial(
                float(mj.body_mass[b]), np.array(mj.body_ipos[b]), i_com)
        values = {"Fc": mj.dof_frictionloss, "Fv": mj.dof_damping, "Ia": mj.dof_armature,
                  "Fs": np.zeros(mj.nv), "Fsig": np.zeros(mj.nv)}
        for dof, (fs, _) in stribeck_numerics(mj).items():
            values["Fs"][dof] = fs
        for dof, (amplitude, _, _) in sigmoid_numerics(mj).items():
            values["Fsig"][dof] = amplitude
        for k, j in enumerate(self.term_joints):
            dof = self.joints[j].dof_adr
            for t_i, term in enumerate(self.joint_terms):
                theta[self.n_body_params + k * len(self.joint_terms) + t_i] = (
                    values[term][dof] if term in values else 0.0)
        return theta

    def apply_to(self, mj: mujoco.MjModel, theta: np.ndarray) -> None:
        """Write a (physically consistent) parameter vector into a compiled MjModel in place.

        The inertia about the CoM is diagonalised into ``body_inertia``/``body_iquat`` as MuJoCo
        stores it (and the body's compile-time ``body_sameframe`` shortcut cleared: with it MuJoCo
        would ignore the new ``body_ipos``/``body_iquat``). Joint offsets ``Fo`` have no MuJoCo
        counterpart and are ignored; Stribeck terms ``Fs`` are written into existing
        ``stribeck:<joint>`` numerics (with this model's q̇s) and ignored where the model has none
        (a compiled model cannot grow one); so are sigmoid terms ``Fsig`` (φ1 with this model's
        φ2, φ3) into ``sigmoid:<joint>`` numerics.
        """
        theta = self.check_theta(theta)
        for k, b in enumerate(self.param_bodies):
            mass, com, inertia, quat = principal_inertial(theta[10 * k:10 * k + 10], self.body_name(b))
            mj.body_mass[b], mj.body_ipos[b], mj.body_inertia[b], mj.body_iquat[b] = mass, com, inertia, quat
            # the compiler's "inertial frame = body frame" shortcut no longer holds: off for this body
            mj.body_sameframe[b] = 0
        fields = {"Fc": mj.dof_frictionloss, "Fv": mj.dof_damping, "Ia": mj.dof_armature}
        numerics = _stribeck_numeric_ids(mj)
        sigmoids = _numeric_ids(mj, SIGMOID_NUMERIC)
        for (term, dof), value in self._joint_term_values(theta).items():
            if term in fields:
                fields[term][dof] = value
            elif term == "Fs" and dof in numerics:
                adr = int(mj.numeric_adr[numerics[dof]])
                mj.numeric_data[adr:adr + 2] = value, self.stribeck_velocity
            elif term == "Fsig" and dof in sigmoids:
                adr = int(mj.numeric_adr[sigmoids[dof]])
                mj.numeric_data[adr:adr + 3] = value, *self.sigmoid_shape[dof]

    def _joint_term_values(self, theta: np.ndarray) -> dict[tuple[str, int], float]:
        out = {}
        for k, j in enumerate(self.term_joints):
            for t_i, term in enumerate(self.joint_terms):
                out[(term, self.joints[j].dof_adr)] = float(
                    theta[self.n_body_params + k * len(self.joint_terms) + t_i])
        return out

    def spec(self) -> mujoco.MjSpec:
        """A fresh ``MjSpec`` of the source (MJCF or URDF, file or text) to edit."""
        if self._spec_factory is not None:
            return self._spec_factory()
        if self._xml is not None:
            return mujoco.MjSpec.from_string(self._xml)
        if self.source is not None:
            return mujoco.MjSpec.from_file(self.source)
        raise ModelError("this model was built from a compiled MjModel; no MJCF to edit")

    def to_mjcf(self, theta: np.ndarray, path: str | os.PathLike[str]) -> Path:
        """Write the source MJCF with this parameter vector's inertials and joint terms.

        Writes ``<inertial>`` (mass, pos, quat, diaginertia) of every identified body and
        ``armature``/``damping``/``frictionloss`` of every joint with terms. A hinge or slide joint
        term of the source that was *not* identified (no ``Ia``, ``Fv`` or ``Fc`` in this model's
        joint terms) is written as 0: the identified model has none (the regressor had no column
        for it), and the file must simulate the model that was identified (logged). The file is
        written atomically (a temporary file renamed into place). Raises :class:`ModelError` when
        a body's parameters are not physically consistent (MuJoCo could not load the result).
        """
        theta = self.check_theta(theta)
        spec = self.spec()
        inertials = {}
        for k, b in enumerate(self.param_bodies):
            name = self.body_name(b)
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
        for (term, dof), value in self._joint_term_values(theta).items():
            joint = self.joints[int(self.mj.dof_jntid[dof])]
            if term == "Fs":
                stribeck[joint.name] = [value, self.stribeck_velocity]
            elif term == "Fsig":
                sigmoid[joint.name] = [value, *map(float, self.sigmoid_shape[dof])]
            elif term in attr:
                joint_values.setdefault(joint.name, {})[attr[term]] = max(value, 0.0)
                _set_scalar(spec.joint(joint.name), attr[term], max(value, 0.0))
            elif abs(value) > 0:
                log.info("%s.%s = %g has no MJCF counterpart; not written", joint.name, term, value)
                unwritten.append(f"{joint.name}.{term} = {value!r}")
        source = {key: getattr(self.mj, f"dof_{key}") for key in attr.values()}  # the MJCF's values
        identified = {(attr[term], dof) for term, dof in self._joint_term_values(theta) if term in attr}
        zeroed: dict[str, list[str]] = {}
        for dof in range(self.mj.nv):
            j = int(self.mj.dof_jntid[dof])
            if int(self.mj.jnt_type[j]) not in _SCALAR_JOINTS:
                continue
            name = self.joints[j].name
            for key, values in source.items():
                if (key, dof) not in identified and values[dof] != 0:
                    joint_values.setdefault(name, {})[key] = 0.0
                    _set_scalar(spec.joint(name), key, 0.0)
                    zeroed.setdefault(key, []).append(name)
        for dof, (fs, velocity) in stribeck_numerics(self.mj).items():
            name = self.joints[int(self.mj.dof_jntid[dof])].name
            if name not in stribeck and fs != 0:
                stribeck[name] = [0.0, velocity]
                zeroed.setdefault("stribeck", []).append(name)
        for dof, (amplitude, steepness, offset) in sigmoid_numerics(self.mj).items():
            name = self.joints[int(self.mj.dof_jntid[dof])].name
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
            xml = _with_comment(xml, _export_note(self.joint_terms, zeroed, unwritten,
                                                  stribeck=bool(stribeck), sigmoid=bool(sigmoid)))
            mujoco.MjModel.from_xml_string(xml)
        except ValueError as exc:
            raise ModelError(f"MuJoCo rejected the identified parameters: {exc}") from exc
        return _write_atomic(Path(path), xml)


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


def _numeric_ids(mj: mujoco.MjModel, prefix: str, *, strict: bool = False) -> dict[int, int]:
    """``{dof: numeric id}`` of the model's custom numerics ``<prefix><joint>``; ``strict``:
    :class:`ModelError` when one names no hinge or slide joint (else it is skipped)."""
    out = {}
    for i in range(mj.nnumeric):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_NUMERIC, i) or ""
        if not name.startswith(prefix):
            continue
        joint = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, name[len(prefix):])
        if joint < 0 or int(mj.jnt_type[joint]) not in _SCALAR_JOINTS:
            if strict:
                raise ModelError(f"custom numeric {name!r} names no hinge or slide joint of the model")
            continue
        out[int(mj.jnt_dofadr[joint])] = i
    return out


def _stribeck_numeric_ids(mj: mujoco.MjModel) -> dict[int, int]:
    """``{dof: numeric id}`` of the model's ``stribeck:<joint>`` numerics (see :func:`stribeck_numerics`)."""
    return _numeric_ids(mj, STRIBECK_NUMERIC)


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
    moments, axes = np.linalg.eigh(i_com)
    if np.linalg.det(axes) < 0:
        axes[:, 0] = -axes[:, 0]
    a, b, c = moments
    if not (moments.min() > 0 and a + b >= c and a + c >= b and b + c >= a):
        raise ModelError(f"body {body!r}: principal moments {moments} are not physically "
                         f"consistent (positive, triangle inequality)")
    return mass, com, moments, mat_to_quat(axes)


def _mjcf_with_base(spec: mujoco.MjSpec, base: str | None) -> mujoco.MjSpec:
    """``spec`` with the first body under the world floating (a free joint added) or fixed (its
    free joint removed); see :meth:`RobotModel.from_mjcf`."""
    body = spec.worldbody.first_body()
    if check_base(base) is None or body is None:
        return spec
    free = [j for j in body.joints if j.type == mujoco.mjtJoint.mjJNT_FREE]
    if base == "fixed":
        for joint in free:
            spec.delete(joint)
    elif not free:
        if body.joints:
            raise ModelError(f"cannot float the MJCF: its first body {body.name!r} has joints "
                             f"{[j.name for j in body.joints]}; a free joint must be a body's only joint")
        body.add_freejoint().name = "floating_base"
    return spec


#: joint types with one dof whose armature/damping/frictionloss the identified model may set
_SCALAR_JOINTS = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


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


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it (``os.umask`` sets it,
    which another thread could see for a moment)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename: never a
    half-written file under the name. The file's mode is what ``open`` would give (0666 less the
    umask, e.g. 0644), not the temporary file's 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
