"""What a batch or online method identifies: the whole arm, or one payload on a known arm.

A :class:`Target` gives the regressor of the identified parameters, the torque (and mass matrix)
of everything known, the prior, the base-parameter reduction and the blocks that must stay
physically consistent (pseudo-inertia LMIs, non-negative friction and rotor inertia).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.base_params import (
    BaseParameters,
    base_parameters,
    random_states,
    reduce_regressor,
)
from sysid_ros.core.model.consistency import (
    check_consistency,
    logdet_divergence,
    model_divergence,
    pseudo_inertia,
)
from sysid_ros.core.model.regressor import body_regressor, mass_matrix_regressor, torque_regressor
from sysid_ros.core.model.robot import BODY_FIELDS, JOINT_FIELDS, RobotModel, body_params_from_inertial

#: side [m] of the solid cube (1 kg) used as the prior of an unknown payload
UNKNOWN_PAYLOAD_SIDE = 0.3


@dataclass(frozen=True)
class Target:
    """``kind`` "arm": θ = the model's whole vector; "payload": θ = 10 parameters of a rigid
    payload on ``body`` (its frame, about its origin), the arm's nominal parameters known."""

    model: RobotModel
    kind: Literal["arm", "payload"]
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

    @property
    def n_params(self) -> int:
        return len(self.names)

    def regressor(self, q, dq, ddq) -> tuple[np.ndarray, np.ndarray]:
        """``(Y (N, n, p), τ_known (N, n))`` with ``τ = Y θ + τ_known``."""
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
        lam = float(np.linalg.eigvalsh(pseudo_inertia(theta))[0])
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
                       if n.rsplit(".", 1)[1] in ("Fc", "Fv", "Ia")], dtype=int)
    return Target(model, "arm", None, model.param_names,
                  model.nominal.copy() if prior is None else model.check_theta(prior),
                  blocks, nonneg, base_parameters(model, seed=seed))


def with_mass_bounds(target: Target, factor: float) -> Target:
    """``target`` with every body's mass bounded to [m₀ / factor, m₀ · factor] around its nominal
    (prior) mass m₀ > 0: consistency alone lets unexcited directions take any mass (a 16 kg arm
    identified at 969 kg), the bounds keep the exported parameters plausible. ``factor`` ≤ 0:
    no bounds. Arm targets only (a payload's prior is a placeholder, not a nominal)."""
    if factor <= 0:
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
    if radius <= 0:
        return target
    if target.kind != "arm":
        raise SysIdError("CoM bounds apply to the arm target (a payload has no nominal CoM)")
    bounds = []
    for _label, sl in target.body_blocks:
        m0 = float(target.prior[sl.start])
        if m0 > 0:
            bounds.append((sl.start, target.prior[sl.start + 1:sl.start + 4] / m0, float(radius)))
    return replace(target, com_bounds=tuple(bounds))


def batch_target(model: RobotModel, payload_body: str = "", *, mass_factor: float = 0.0,
                 com_radius: float = 0.0) -> Target:
    """What ``sysid identify`` and ``BatchSolve`` identify: the payload on ``payload_body`` if
    given, else the whole arm with its plausibility bounds (:func:`with_mass_bounds`,
    :func:`with_com_bounds`; 0 = none)."""
    if payload_body:
        return payload_target(model, payload_body)
    return with_com_bounds(with_mass_bounds(arm_target(model), mass_factor), com_radius)


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
    q, dq, ddq = random_states(model, 300, seed=seed)
    y_b, _ = body_regressor(model, bid, q, dq, ddq)
    return Target(model, "payload", bid, names, np.asarray(prior, dtype=float),
                  (("payload", slice(0, 10)),), np.zeros(0, dtype=int), reduce_regressor(y_b, names))
