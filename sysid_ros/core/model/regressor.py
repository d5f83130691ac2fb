"""Regressors linear in the parameter vector θ of a :class:`RobotModel`.

* :func:`torque_regressor`: ``τ = Y(q, q̇, q̈) θ`` (joint torques/forces of inverse dynamics,
  gravity included, plus the joint terms Fc·sign(q̇) + Fv·q̇ + Fo + Ia·q̈ + Fs·exp(−|q̇|/q̇s)·sign(q̇)
  + Fsig·(σ(φ2(q̇ + φ3)) − σ(φ2 φ3)), σ the logistic function);
* :func:`body_regressor`: the columns of one body (or of a payload rigidly attached to it) and the
  torque of everything else, known;
* :func:`mass_matrix_regressor`: ``M(q) = Σ_p θ_p ∂M/∂θ_p`` (armature on the diagonal);
* :func:`momentum_regressors`: generalised momentum ``p = M(q) q̇`` and the terms of
  ``ṗ = τ + Cᵀ(q, q̇) q̇ − g(q) − τ_f`` (online-inertia seed, momentum regressor).

Method (spatial Newton–Euler, seed ``robot-sysid-spatial-regressor``): every body's wrench about its
own origin is linear in its 10 parameters,

    n = Ī ω̇ + ω × Ī ω − a × h,   f = m a + (ω̇× + ω×ω×) h,

with ω, ω̇, a (classical acceleration of the origin, minus gravity) in the body frame. The wrench
is projected on every supporting dof's motion vector. The regressors run the compiled one-pass
kernels of :mod:`.newton_euler` sample by sample (compiled on first use, cached on disk);
:func:`world_momentum_regressor` uses the numpy kinematics of :mod:`.kinematics`.

Inputs: ``q (N, nq)`` or ``(nq,)``, ``dq``/``ddq`` ``(N, nv)`` or ``(nv,)``; outputs keep the batch
axis only when the inputs had one. Units: SI (rad, m, s, kg, N·m).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sysid_ros.core.errors import DataError
from sysid_ros.core.model.kinematics import (
    TreeTopology,
    forward_poses,
    motion,
)
from sysid_ros.core.model.newton_euler import (
    KernelPlan,
    KernelTree,
    mass_matrix_columns,
    momentum_columns,
    plan,
    term_table,
    torque_columns,
)
from sysid_ros.core.model.robot import JOINT_FIELDS, RobotModel
from sysid_ros.core.model.spatial import inertia_times, skew

__all__ = [
    "MomentumRegressors",
    "body_regressor",
    "gravity_regressor",
    "mass_matrix_regressor",
    "momentum_regressors",
    "torque_regressor",
    "world_momentum_regressor",
]


def _topology(model: RobotModel) -> TreeTopology:
    return model.derived("topology", lambda: TreeTopology.of(model))


def _as_batch(model: RobotModel, q, *vs) -> tuple[bool, np.ndarray, list[np.ndarray]]:
    """Inputs as 2-D, C-contiguous, writeable float copies (one compiled kernel type for all)."""
    single = np.ndim(q) == 1
    q2 = np.array(q, dtype=float, order="C", ndmin=2)
    if q2.ndim != 2 or q2.shape[1] != model.nq:
        raise DataError(f"expected q of shape (N, {model.nq}) or ({model.nq},), got {np.shape(q)}")
    out = [np.array(v, dtype=float, order="C", ndmin=2) for v in vs]
    expected = (q2.shape[0], model.nv)
    for name, v, v2 in zip(("dq", "ddq"), vs, out, strict=False):  # vs: (dq,) or (dq, ddq)
        if v2.shape != expected:
            raise DataError(f"expected {name} of shape {expected}, got {np.shape(v)}")
    return single, q2, out


def stribeck_column(dq: np.ndarray, velocity: float) -> np.ndarray:
    """Stribeck regressor ``exp(−|q̇|/q̇s)·sign(q̇)`` of joint velocities ``dq`` [rad/s] (any
    shape) for Stribeck velocity ``velocity`` = q̇s [rad/s]: the friction torque is ``Fs`` times it."""
    return np.exp(-np.abs(dq) / velocity) * np.sign(dq)


def _stribeck_columns(model: RobotModel, dq: np.ndarray, out: np.ndarray) -> None:
    """Write the ``Fs`` columns of ``out (N, nv, p)`` (the compiled kernel writes the other joint
    terms; the Stribeck term depends on the model's q̇s, outside its term table)."""
    if "Fs" not in model.joint_terms or not model.term_joints:
        return
    dofs = np.asarray(model.term_dofs)
    cols = np.asarray(model.term_columns) + model.joint_terms.index("Fs")
    out[:, dofs, cols] = stribeck_column(dq[:, dofs], model.stribeck_velocity)


def sigmoid_column(dq: np.ndarray, steepness, offset) -> np.ndarray:
    """Sigmoid friction regressor ``σ(φ2(q̇ + φ3)) − σ(φ2 φ3)`` (σ(x) = 1/(1 + e^−x)) of joint
    velocities ``dq`` [rad/s] for steepness φ2 = ``steepness`` [s/rad] and offset φ3 = ``offset``
    [rad/s] (scalars, or arrays broadcasting against ``dq``, e.g. one per column): the friction
    torque is the amplitude φ1 (``Fsig`` [N·m]) times it, 0 at rest (Gaz et al., RA-L 2019)."""
    from scipy.special import expit  # here: its import is ~0.2 s of every command otherwise

    return expit(steepness * (dq + offset)) - expit(steepness * offset)


def _sigmoid_columns(model: RobotModel, dq: np.ndarray, out: np.ndarray) -> None:
    """Write the ``Fsig`` columns of ``out (N, nv, p)`` with each joint's (φ2, φ3) of
    ``model.sigmoid_shape`` (outside the compiled kernel's term table, like Stribeck's)."""
    if "Fsig" not in model.joint_terms or not model.term_joints:
        return
    dofs = np.asarray(model.term_dofs)
    cols = np.asarray(model.term_columns) + model.joint_terms.index("Fsig")
    shape = model.sigmoid_shape[dofs]
    out[:, dofs, cols] = sigmoid_column(dq[:, dofs], shape[:, 0], shape[:, 1])


def _finish(single: bool, y: np.ndarray) -> np.ndarray:
    return y[0] if single else y


def _plan(model: RobotModel, bodies: tuple[int, ...] | None = None,
          terms: tuple[str, ...] = JOINT_FIELDS, gravity: bool = True) -> KernelPlan:
    """The kernels' packed tree for the model's columns (``bodies=None``: every identified body
    and the joint ``terms``) or for ``bodies`` only (10 columns each, no joint terms); built once."""
    def build() -> KernelPlan:
        tree = KernelTree.of(model)
        if bodies is None:
            return plan(tree, tree.body_columns(model.param_bodies), term_table(model, terms),
                        gravity=gravity)
        return plan(tree, tree.body_columns(bodies), term_table(model, ()), gravity=gravity)

    return model.derived(("kernel_plan", bodies, terms, gravity), build)


def _torque_columns(model: RobotModel, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, *,
                    gravity: bool = True, bodies: tuple[int, ...] | None = None) -> np.ndarray:
    """``(N, nv, width)`` regressor of the model's columns, or of ``bodies`` only (no joint terms)."""
    width = model.n_params if bodies is None else 10 * len(bodies)
    out = np.zeros((q.shape[0], model.nv, width))
    ints, floats = _plan(model, bodies, gravity=gravity)
    torque_columns(ints, floats, q, dq, ddq, out)
    if bodies is None:
        _stribeck_columns(model, dq, out)
        _sigmoid_columns(model, dq, out)
    return out


def torque_regressor(model: RobotModel, q, dq, ddq, *, gravity: bool = True) -> np.ndarray:
    """Inverse-dynamics regressor ``Y (N, nv, p)``: ``τ = Y θ`` (``(nv, p)`` for one sample).

    One compiled pass per sample (:func:`.newton_euler.torque_columns`); C-contiguous result.
    """
    single, q2, (dq2, ddq2) = _as_batch(model, q, dq, ddq)
    return _finish(single, _torque_columns(model, q2, dq2, ddq2, gravity=gravity))


def gravity_regressor(model: RobotModel, q) -> np.ndarray:
    """Gravity-torque regressor ``(N, nv, p)``: ``g(q) = Y_g θ`` (joint-term columns are zero)."""
    single, q2, _ = _as_batch(model, q)
    zero = np.zeros((q2.shape[0], model.nv))
    y = _torque_columns(model, q2, zero, zero)
    y[..., model.n_body_params:] = 0.0
    return _finish(single, y)


def body_regressor(model: RobotModel, body: int | str, q, dq, ddq, *,
                   theta: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Regressor of one body's 10 parameters and the known torque of everything else.

    ``body`` is a moving body (name or MuJoCo id), e.g. the terminal link or the link a payload is
    rigidly attached to; a payload's parameters expressed in that body's frame about its origin use
    the same columns. Returns ``(Y_b (N, nv, 10), tau_rest (N, nv))`` with
    ``τ = Y_b φ_b + tau_rest``; ``tau_rest`` uses ``theta`` (default: nominal) for every other
    parameter. If the body is itself identified, its own nominal contribution is excluded.
    """
    bid = model.body_id(body) if isinstance(body, str) else int(body)
    if not 0 < bid <= len(model.bodies) or not model.bodies[bid - 1].moving:
        raise DataError(f"body {body!r} is not a moving body: no joint torque depends on it")
    single, q2, (dq2, ddq2) = _as_batch(model, q, dq, ddq)
    theta = model.check_theta(model.nominal if theta is None else theta)
    y_b = _torque_columns(model, q2, dq2, ddq2, bodies=(bid,))
    theta_rest = theta.copy()
    if bid in model.param_bodies:
        theta_rest[model.body_slice(bid)] = 0.0
    rest = _torque_columns(model, q2, dq2, ddq2) @ theta_rest
    return _finish(single, y_b), _finish(single, rest)


def mass_matrix_regressor(model: RobotModel, q, *, bodies: tuple[int, ...] | None = None
                          ) -> np.ndarray:
    """``Y_M (N, nv, nv, p)`` with ``M(q) = Y_M θ`` (MuJoCo's ``mj_fullM``, armature included).

    Column ``k`` of M is the torque of unit acceleration of dof ``k`` at rest without gravity.
    With ``bodies`` (MuJoCo ids), only those bodies' 10 columns each (no joint terms).
    """
    single, q2, _ = _as_batch(model, q)
    if bodies is not None:
        bodies = tuple(bodies)
    width = model.n_params if bodies is None else 10 * len(bodies)
    out = np.zeros((q2.shape[0], model.nv, model.nv, width))
    mass_matrix_columns(*_plan(model, bodies, ("Ia",), gravity=False), q2, out)
    return _finish(single, out)


class MomentumRegressors(NamedTuple):
    """Regressors ``(N, nv, p)`` of the momentum equation ``τ = d/dt(Yp θ) − Yc θ + Yg θ + Yf θ``.

    * ``Yp``: generalised momentum ``p = M(q) q̇`` (armature included);
    * ``Yc``: ``Cᵀ(q, q̇) q̇`` with Christoffel-consistent C (equals ``∂K/∂q``);
    * ``Yg``: gravity torque ``g(q)``;
    * ``Yf``: friction and offset ``Fc·sign(q̇) + Fv·q̇ + Fo + Fs·exp(−|q̇|/q̇s)·sign(q̇)``
      ``+ Fsig·(σ(φ2(q̇ + φ3)) − σ(φ2 φ3))``.

    Over a window ``[t_r, t_k]``: ``∫τ dt = (Yp(t_k) − Yp(t_r)) θ − ∫(Yc − Yg − Yf) dt θ``;
    no acceleration is needed.
    """

    Yp: np.ndarray
    Yc: np.ndarray
    Yg: np.ndarray
    Yf: np.ndarray


def momentum_regressors(model: RobotModel, q, dq, *, bodies: tuple[int, ...] | None = None
                        ) -> MomentumRegressors:
    """The four regressors of :class:`MomentumRegressors` at ``q (N, nq)``, ``dq (N, nv)``.

    With ``bodies`` (MuJoCo ids), only those bodies' 10 columns each (no joint terms; ``Yf`` is
    then zero): the momentum equation of a payload on a known arm.
    """
    single, q2, (dq2,) = _as_batch(model, q, dq)
    if bodies is not None:
        bodies = tuple(bodies)
    width = model.n_params if bodies is None else 10 * len(bodies)
    friction = model.derived(("friction_terms", bodies is None), lambda: term_table(
        model, ("Fc", "Fv", "Fo") if bodies is None else ()))
    ys = [np.zeros((q2.shape[0], model.nv, width)) for _ in range(4)]
    momentum_columns(*_plan(model, bodies, ("Ia",), gravity=True), friction, q2, dq2, *ys)
    if bodies is None:
        _stribeck_columns(model, dq2, ys[3])
        _sigmoid_columns(model, dq2, ys[3])
    return MomentumRegressors(*(_finish(single, y) for y in ys))


def world_momentum_regressor(model: RobotModel, body: int | str, q, dq) -> np.ndarray:
    """Total spatial momentum of one body about the world origin, world axes: ``(N, 6, 10)`` with
    rows ``[linear P; angular H_O]`` linear in the body's 10 parameters (online-inertia seed)::

        P   = m v + ω × (R h)
        H_O = p × P + (R h) × v + R Ī Rᵀ ω

    (``R``, ``p``: body pose; ``v``: velocity of its origin; ``ω``: angular velocity; world frame).
    On a free-floating system without external wrench the sum over all bodies is constant.
    """
    bid = model.body_id(body) if isinstance(body, str) else int(body)
    single, q2, (dq2,) = _as_batch(model, q, dq)
    n = q2.shape[0]
    poses = forward_poses(model, q2)
    mot = motion(model, _topology(model), poses, dq2, np.zeros((n, model.nv)), gravity=False)
    i = bid - 1
    rot = np.moveaxis(poses.rot[i], -1, 0)  # (N, 3, 3)
    pos = poses.pos[i].T  # (N, 3)
    w = mot.V[i, :3].T
    v = mot.V[i, 3:].T + np.cross(w, pos)  # velocity of the body origin
    out = np.zeros((n, 6, 10))
    # linear momentum: m v + ω × (R h)
    out[:, :3, 0] = v
    out[:, :3, 1:4] = skew(w) @ rot
    # angular momentum about the world origin: p × P + (R h) × v + R Ī Rᵀ ω
    out[:, 3:, 0] = np.cross(pos, v)
    out[:, 3:, 1:4] = skew(pos) @ skew(w) @ rot - skew(v) @ rot
    w_body = np.einsum("nji,nj->ni", rot, w)
    out[:, 3:, 4:10] = rot @ inertia_times(w_body)
    return out[0] if single else out
