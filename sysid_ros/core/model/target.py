"""What a batch or online method identifies: the whole arm, or one payload on a known arm.

A :class:`Target` gives the regressor of the identified parameters, the torque (and mass matrix)
of everything known, the prior, the base-parameter reduction and the blocks that must stay
physically consistent (pseudo-inertia LMIs, non-negative friction and rotor inertia).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.base_params import (
    BaseParameters,
    base_parameters,
    body_base_parameters,
    reduce_regressor,
)
from sysid_ros.core.model.consistency import (
    check_consistency,
    logdet_divergence,
    model_divergence,
    pseudo_inertia,
)
from sysid_ros.core.model.robot import (
    BODY_FIELDS,
    JOINT_FIELDS,
    RobotModel,
    body_params_from_inertial,
    inertial_from_body_params,
)

#: side [m] of the solid cube (1 kg) used as the prior of an unknown payload
UNKNOWN_PAYLOAD_SIDE = 0.3


@dataclass(frozen=True)
class Target:
    """``kind`` "arm": θ = the model's whole vector; "payload": θ = 10 parameters of a rigid
    payload on ``body`` (its frame, about its origin), the arm's nominal parameters known;
    "coefficients": non-negative coefficients of a model without rigid bodies (``model`` None,
    :func:`coefficient_target`; for the convex programs only)."""

    model: RobotModel | None
    kind: Literal["arm", "payload", "coefficients"]
    body: int | None
    names: tuple[str, ...]
    prior: np.ndarray
    body_blocks: tuple[tuple[str, slice], ...]
    nonnegative: np.ndarray
    base: BaseParameters
    #: ``(parameter index, lower, upper)`` of body masses [kg] bounded for plausibility
    #: (:func:`with_mass_bounds`); the constrained programs add them to the consistency LMIs
    mass_bounds: tuple[tuple[int, float, float], ...] = ()
    #: ``(index of the body's mass, nominal CoM (3,) [m], radius [m])``: the body's CoM stays in
    #: the box of that half-side around the nominal CoM (:func:`with_com_bounds`), i.e.
    #: ``|h − m·c₀| ≤ m·r`` per axis, linear in (m, h)
    com_bounds: tuple[tuple[int, np.ndarray, float], ...] = ()
    #: ``(index of the body's mass, centre (3,) [m], radius [m])``: all of the body's mass lies in
    #: that sphere (body frame), ``tr(Q J) ≥ 0`` with the sphere's ``Q`` (:func:`with_extent_bounds`),
    #: linear in the body's 10 parameters; it bounds the CoM and the inertia
    extent_bounds: tuple[tuple[int, np.ndarray, float], ...] = ()
    #: the settings the bounds above came from (``None``: no plausibility bounds)
    plausibility: Plausibility | None = None
    #: ``(label, slice)`` of coefficients that are the diagonal of a positive matrix P (a
    #: :func:`coefficient_target`'s drag coefficients, dual-metric seed §II-B2): the regularisers
    #: measure them as P, Bregman Σ (c/c₀ − log(c/c₀) − 1), pull-back Σ ((c − c₀)/c₀)²
    coefficient_blocks: tuple[tuple[str, slice], ...] = ()

    @property
    def n_params(self) -> int:
        return len(self.names)

    def regressor(self, q, dq, ddq) -> tuple[np.ndarray, np.ndarray]:
        """``(Y (N, n, p), τ_known (N, n))`` with ``τ = Y θ + τ_known``."""
        from sysid_ros.core.model.regressor import body_regressor, torque_regressor  # (compiled kernels)

        if self.kind == "arm":
            y = torque_regressor(self.model, q, dq, ddq)
            return y, np.zeros(y.shape[:2])
        y_b, _ = body_regressor(self.model, self.body, q, dq, ddq)
        known = torque_regressor(self.model, q, dq, ddq) @ self.model.nominal
        return y_b, known

    def consistency(self, theta: np.ndarray) -> dict:
        """Physical consistency of ``theta`` (per body, and the joint-term signs for an arm)."""
        if self.kind == "arm":
            return check_consistency(self.model, theta).as_dict()
        lam = float(rla.eigvalsh(pseudo_inertia(theta))[0])
        return {"consistent": lam > 0, "bodies": {"payload": {"min_eigenvalue": lam, "consistent": lam > 0}},
                "negative_joint_terms": []}

    def divergence(self, theta: np.ndarray, reference: np.ndarray) -> float:
        """Σ_b log-det divergence of ``theta`` from ``reference`` (inf if ``theta`` is not
        consistent, NaN if ``reference`` is not)."""
        theta, reference = np.asarray(theta, dtype=float), np.asarray(reference, dtype=float)
        try:
            if self.kind == "arm":
                return model_divergence(self.model, theta, reference)
            return logdet_divergence(theta, reference)
        except SysIdError:
            return float("nan")

    def mass_matrix(self, q) -> tuple[np.ndarray, np.ndarray]:
        """``(Y_M (N, n, n, p), M_known (N, n, n))`` with ``M = Y_M θ + M_known``."""
        from sysid_ros.core.model.regressor import mass_matrix_regressor  # (compiled kernels: when used)

        if self.kind == "arm":
            ym = mass_matrix_regressor(self.model, q)
            return ym, np.zeros(ym.shape[:3])
        ym = mass_matrix_regressor(self.model, q, bodies=(self.body,))
        known = mass_matrix_regressor(self.model, q) @ self.model.nominal
        return ym, known


def arm_target(model: RobotModel, *, prior: np.ndarray | None = None, seed: int = 0) -> Target:
    """Identify every parameter of ``model`` (prior: its nominal values)."""
    blocks = tuple((model.body_name(b), model.body_slice(b)) for b in model.param_bodies)
    nonneg = np.array([i for i, n in enumerate(model.param_names)
                       if n.rsplit(".", 1)[1] in ("Fc", "Fv", "Ia", "Fs", "Fsig")], dtype=int)
    return Target(model, "arm", None, model.param_names,
                  model.nominal.copy() if prior is None else model.check_theta(prior),
                  blocks, nonneg, base_parameters(model, seed=seed))


def coefficient_target(names: tuple[str, ...], prior: np.ndarray, rows: np.ndarray) -> Target:
    """Identify non-negative coefficients ``names`` of a model linear in them (no rigid bodies),
    e.g. the viscous drag coefficients of τ = D(q) q̇ with D affine in them (dual-metric seed
    eq. 4): each is the diagonal entry of a drag matrix P ⪰ 0 (seed §II-B2), so consistency is
    c ≥ 0. ``prior (p,)`` (> 0, the regularisers' nominal), ``rows (..., p)``: a well-excited
    regressor for the base-parameter reduction."""
    prior = np.asarray(prior, dtype=float)
    if prior.shape != (len(names),) or not np.all(prior > 0):
        raise SysIdError(f"the coefficients' prior must be {len(names)} values > 0, got {prior}")
    return Target(None, "coefficients", None, tuple(names), prior.copy(), (),
                  np.arange(len(names)), reduce_regressor(rows, tuple(names)),
                  coefficient_blocks=(("coefficients", slice(0, len(names))),))


def with_mass_bounds(target: Target, factor: float) -> Target:
    """``target`` with every body's mass bounded to [m₀ / factor, m₀ · factor] around its nominal
    (prior) mass m₀ > 0: consistency alone lets unexcited directions take any mass (a 16 kg arm
    identified at 969 kg), the bounds keep the exported parameters plausible. ``factor`` ≤ 0:
    no bounds. Arm targets only (a payload's prior is a placeholder, not a nominal)."""
    if not (math.isfinite(factor) and factor >= 0):
        raise SysIdError(f"the mass factor must be a finite number > 1 (or 0 for none), got {factor}")
    if factor == 0:
        return target
    if factor <= 1:
        raise SysIdError(f"the mass factor must be > 1 (or 0 for none), got {factor}")
    if target.kind != "arm":
        raise SysIdError("mass bounds apply to the arm target (a payload has no nominal mass)")
    bounds = []
    for _label, sl in target.body_blocks:
        i = sl.start  # the body's mass (BODY_FIELDS order: m first)
        m0 = float(target.prior[i])
        if m0 > 0:
            bounds.append((i, m0 / factor, m0 * factor))
    return replace(target, mass_bounds=tuple(bounds))


def with_com_bounds(target: Target, radius: float) -> Target:
    """``target`` with every body's centre of mass kept within ``radius`` [m] (per axis, in the
    body frame) of its nominal (prior) CoM: an unexcited direction cannot push a CoM metres out
    of its link. ``radius`` ≤ 0: no bounds. Arm targets only."""
    if not (math.isfinite(radius) and radius >= 0):
        raise SysIdError(f"the CoM radius must be a finite number >= 0 m (0 for none), got {radius}")
    if radius == 0:
        return target
    if target.kind != "arm":
        raise SysIdError("CoM bounds apply to the arm target (a payload has no nominal CoM)")
    bounds = []
    for _label, sl in target.body_blocks:
        m0 = float(target.prior[sl.start])
        if m0 > 0:
            bounds.append((sl.start, target.prior[sl.start + 1:sl.start + 4] / m0, float(radius)))
    return replace(target, com_bounds=tuple(bounds))


def sphere_slack(phi, centre: np.ndarray, radius: float):
    """``m r² − ∫‖x − c‖² dm`` [kg·m²] of body parameters ``phi (10,)`` (inertia about the body
    origin; a NumPy array or a cvxpy expression: linear in ``phi``), with
    ``∫‖x − c‖² dm = ½ tr(I_O) − 2 cᵀh + m‖c‖²``: ≥ 0 when all the mass can lie in the sphere of
    ``centre (3,)`` [m] and ``radius`` [m] (:func:`with_extent_bounds`)."""
    c = np.asarray(centre, dtype=float)
    # written term by term: ndarray @ cvxpy-expression would make an object array
    first = sum(float(c[k]) * phi[1 + k] for k in range(3))
    moment = 0.5 * (phi[4] + phi[7] + phi[9]) - 2.0 * first + phi[0] * float(c @ c)
    return phi[0] * radius**2 - moment


def nominal_extent(model: RobotModel, body: int, phi: np.ndarray) -> tuple[np.ndarray, float]:
    """``(centre (3,), radius [m])`` of the sphere a body's mass lies in by its nominal parameters
    ``phi (10,)``: centred on the nominal CoM, reaching the body's origin (its joint), the origins
    of its child bodies (the next joints) and the semi-axes of the uniform solid ellipsoid with the
    nominal inertia (``a_x² = 5 (I_yy + I_zz − I_xx) / (2m)`` about the CoM, principal axes)."""
    mass, com, inertia = inertial_from_body_params(phi)
    moments = rla.eigvalsh(inertia)
    semi_sq = 2.5 / mass * (moments.sum() - 2.0 * moments)
    reach = [float(np.sqrt(max(float(semi_sq.max()), 0.0))), float(np.linalg.norm(com))]
    children = np.flatnonzero(model.mj.body_parentid == body)
    reach += [float(np.linalg.norm(model.mj.body_pos[c] - com)) for c in children if c != body]
    return com, max(reach)


def with_extent_bounds(target: Target, factor: float) -> Target:
    """``target`` with every body's mass kept inside a sphere of ``factor`` × its nominal extent
    (:func:`nominal_extent`): the bounding-volume constraint of Wensing, Kim & Slotine (IEEE
    RA-L 3(1), 2018, eq. 13) for a sphere of centre ``c`` and radius ``r``,
    ``m r² − ∫‖x − c‖² dm ≥ 0``. It keeps the CoM within the sphere and caps the inertia a mass
    can have (consistency alone lets an unexcited link hold metres-long inertia). ``factor`` ≤ 0:
    none. Arm targets only."""
    if factor <= 0:
        return target
    if factor < 1:
        raise SysIdError(f"the extent factor must be >= 1 (or 0 for none), got {factor}")
    if target.kind != "arm":
        raise SysIdError("extent bounds apply to the arm target (a payload has no nominal extent)")
    bounds = []
    for body, (_label, sl) in zip(target.model.param_bodies, target.body_blocks, strict=True):
        if float(target.prior[sl.start]) > 0:
            centre, radius = nominal_extent(target.model, body, target.prior[sl])
            bounds.append((sl.start, centre, factor * max(radius, MIN_EXTENT)))
    return replace(target, extent_bounds=tuple(bounds))


#: [m] smallest nominal extent radius (a point-mass body still has a size)
MIN_EXTENT = 0.01


@dataclass(frozen=True)
class Plausibility:
    """Bounds that keep an arm's exported standard parameters physically plausible around its
    nominal model, on top of consistency (the default of every arm solve, ``sysid identify`` and
    ``BatchSolve``): ``mass_factor`` K (each mass in [m₀/K, m₀·K]), ``extent_factor`` (each body's
    mass inside that many times its nominal extent), ``com_radius`` [m] (each CoM within it of the
    nominal, per axis). 0 turns one off; :meth:`off` all."""

    mass_factor: float = 2.0
    extent_factor: float = 1.5
    com_radius: float = 0.0

    @classmethod
    def off(cls) -> Plausibility:
        return cls(0.0, 0.0, 0.0)

    def apply(self, target: Target) -> Target:
        """``target`` with these bounds (see :func:`with_mass_bounds`, :func:`with_extent_bounds`,
        :func:`with_com_bounds`)."""
        target = with_mass_bounds(target, self.mass_factor)
        target = with_extent_bounds(target, self.extent_factor)
        return replace(with_com_bounds(target, self.com_radius), plausibility=self)

    def as_dict(self) -> dict[str, float]:
        return {"mass_factor": self.mass_factor, "extent_factor": self.extent_factor,
                "com_radius": self.com_radius}

    @classmethod
    def or_default(cls, target: Target) -> Target:
        """``target`` as given if it has bounds or is not an arm; else with the default bounds
        (constrained estimators given a bare arm target, e.g. the estimator node's)."""
        if target.kind == "arm" and target.plausibility is None:
            return cls().apply(target)
        return target


def with_joint_prior(target: Target, spec: str | Mapping[str, float] = "model") -> Target:
    """``target`` with the prior of its joint terms (friction ``Fc``/``Fv``/``Fo``/``Fs``/``Fsig``, rotor
    inertia ``Ia``) as stated: ``"model"`` (the model file's values, 0 where it has none: MJCF
    frictionloss/damping/armature, URDF dynamics), ``"zero"``, or values by name,
    ``{"<joint>.<term>": v}`` or ``{"<term>": v}`` for every joint (a JSON file's content; SI
    units). Every method that uses the prior (the regularised ones, the plausibility pull, the
    tie-break) pulls toward it, weakly: the regularisers weigh joint terms against what the data
    say of each. Arm targets only."""
    if spec == "model":
        return target
    if target.kind != "arm":
        raise SysIdError("a joint-term prior applies to the arm target (a payload has no joint terms)")
    prior = target.prior.copy()
    model = target.model
    term_index = {name: i for i, name in enumerate(target.names)
                  if name.rsplit(".", 1)[-1] in JOINT_FIELDS and i >= model.n_body_params}
    if spec == "zero":
        prior[list(term_index.values())] = 0.0
        return replace(target, prior=prior)
    if not isinstance(spec, Mapping):
        raise SysIdError(f"a joint-term prior is 'model', 'zero' or values by name, got {spec!r}")
    for key, value in spec.items():
        if not isinstance(value, (int, float)) or not np.isfinite(value):
            raise SysIdError(f"joint-term prior {key!r}: expected a finite number, got {value!r}")
        if key in JOINT_FIELDS:
            hits = [i for name, i in term_index.items() if name.endswith(f".{key}")]
        else:
            hits = [term_index[key]] if key in term_index else []
        if not hits:
            raise SysIdError(f"joint-term prior {key!r} names no identified joint term; expected a term "
                             f"({', '.join(t for t in JOINT_FIELDS if t in model.joint_terms)}) or one of "
                             f"{sorted(term_index)[:6]}{' ...' if len(term_index) > 6 else ''}")
        for i in hits:
            if value < 0 and target.names[i].rsplit(".", 1)[-1] in ("Fc", "Fv", "Ia", "Fs", "Fsig"):
                raise SysIdError(f"joint-term prior {target.names[i]} = {value}: must be >= 0")
            prior[i] = float(value)
    return replace(target, prior=prior)


def batch_target(model: RobotModel, payload_body: str = "", *,
                 plausibility: Plausibility | None = None,
                 joint_prior: str | Mapping[str, float] = "model") -> Target:
    """What ``sysid identify`` and ``BatchSolve`` identify: the payload on ``payload_body`` if
    given, else the whole arm with its joint-term prior (:func:`with_joint_prior`) within
    ``plausibility``'s bounds (default :class:`Plausibility`)."""
    if payload_body:
        return payload_target(model, payload_body)
    target = with_joint_prior(arm_target(model), joint_prior)
    return (plausibility or Plausibility()).apply(target)


def joint_prior_spec(text: str) -> str | dict[str, float]:
    """A joint-term prior as given on the command line or as a node parameter: ``"model"``,
    ``"zero"`` or the path of a JSON file of values by name (see :func:`with_joint_prior`)."""
    import json
    from pathlib import Path

    text = (text or "model").strip()
    if text in ("model", "zero"):
        return text
    path = Path(text)
    if not path.is_file():
        raise SysIdError(f"a joint-term prior is 'model', 'zero' or a JSON file of values, got "
                         f"{text!r} (no such file)")
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise SysIdError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SysIdError(f"{path}: expected an object of values by name, e.g. "
                         '{"Fc": 0.5, "shoulder_pan_joint.Fv": 2.0}, got ' + type(doc).__name__)
    return doc


def payload_target(model: RobotModel, body: int | str, *, prior: np.ndarray | None = None,
                   seed: int = 0) -> Target:
    """Identify a payload rigidly attached to ``body``.

    The default prior stands for an unknown payload: 1 kg spread as a 30 cm solid cube centred on
    the body origin — broad, so that log-det regularisation does not pull small.

    The arm is known: its torque uses every parameter of the MJCF, joint terms included
    (armature, damping, friction loss), whatever joint terms ``model`` was built with.
    """
    if set(model.joint_terms) != set(JOINT_FIELDS):
        model = model.with_joint_terms(JOINT_FIELDS)
    bid = model.body_id(body) if isinstance(body, str) else int(body)
    names = tuple(f"payload.{f}" for f in BODY_FIELDS)
    if prior is None:
        prior = body_params_from_inertial(1.0, np.zeros(3), np.eye(3) * UNKNOWN_PAYLOAD_SIDE**2 / 6.0)
    return Target(model, "payload", bid, names, np.asarray(prior, dtype=float),
                  (("payload", slice(0, 10)),), np.zeros(0, dtype=int),
                  body_base_parameters(model, bid, names, seed=seed))
