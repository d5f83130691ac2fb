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
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import mujoco
import numpy as np

from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.couplings import check_couplings
from sysid_ros.core.model.layout import (
    BODY_FIELDS,
    DEFAULT_JOINT_TERMS,
    DEFAULT_SIGMOID_SHAPE,
    DEFAULT_STRIBECK_VELOCITY,
    JOINT_FIELDS,
    JOINT_TYPES,
    SIGMOID_NUMERIC,
    STRIBECK_NUMERIC,
    Body,
    Joint,
    JointTerm,
    JointType,
    body_params_from_inertial,
    check_sigmoid_shape,
    inertial_from_body_params,
    joint_terms,
    numeric_ids,
    sigmoid_numerics,
    stribeck_numeric_ids,
    stribeck_numerics,
)
from sysid_ros.core.model.mjcf_export import principal_inertial, write_mjcf
from sysid_ros.core.model.motors import DAMIAO_MOTORS, MotorModel
from sysid_ros.core.model.spatial import (
    quat_to_mat,
)
from sysid_ros.core.model.urdf import check_base, is_urdf, set_base, urdf_for_mujoco

#: the layout's names, importable from here where callers have always found them
__all__ = [
    "BODY_FIELDS", "DEFAULT_JOINT_TERMS", "DEFAULT_SIGMOID_SHAPE", "DEFAULT_STRIBECK_VELOCITY",
    "JOINT_FIELDS", "SIGMOID_NUMERIC", "STRIBECK_NUMERIC", "Body", "Joint", "JointTerm", "JointType",
    "RobotModel", "body_params_from_inertial", "check_sigmoid_shape", "inertial_from_body_params",
    "joint_terms", "principal_inertial", "sigmoid_numerics", "stribeck_numerics",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        jtype = JOINT_TYPES[int(mj.jnt_type[j])]
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
        numerics = stribeck_numeric_ids(mj)
        sigmoids = numeric_ids(mj, SIGMOID_NUMERIC)
        for (term, dof), value in self.joint_term_values(theta).items():
            if term in fields:
                fields[term][dof] = value
            elif term == "Fs" and dof in numerics:
                adr = int(mj.numeric_adr[numerics[dof]])
                mj.numeric_data[adr:adr + 2] = value, self.stribeck_velocity
            elif term == "Fsig" and dof in sigmoids:
                adr = int(mj.numeric_adr[sigmoids[dof]])
                mj.numeric_data[adr:adr + 3] = value, *self.sigmoid_shape[dof]

    def joint_term_values(self, theta: np.ndarray) -> dict[tuple[str, int], float]:
        """``{(term, dof): value}`` of ``theta``'s joint terms."""
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
        """Write the source MJCF with this parameter vector's inertials and joint terms
        (:func:`~sysid_ros.core.model.mjcf_export.write_mjcf`)."""
        return write_mjcf(self, theta, path)


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
