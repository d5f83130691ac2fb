"""Regressors linear in the parameter vector θ of a :class:`RobotModel`.

* :func:`torque_regressor`: ``τ = Y(q, q̇, q̈) θ`` (joint torques/forces of inverse dynamics,
  gravity included, plus the joint terms Fc·sign(q̇) + Fv·q̇ + Fo + Ia·q̈);
* :func:`body_regressor`: the columns of one body (or of a payload rigidly attached to it) and the
  torque of everything else, known;
* :func:`mass_matrix_regressor`: ``M(q) = Σ_p θ_p ∂M/∂θ_p`` (armature on the diagonal);
* :func:`momentum_regressors`: generalised momentum ``p = M(q) q̇`` and the terms of
  ``ṗ = τ + Cᵀ(q, q̇) q̇ − g(q) − τ_f`` (online-inertia seed, momentum regressor).

Method (spatial Newton–Euler, seed ``robot-sysid-spatial-regressor``): every body's wrench about its
own origin is linear in its 10 parameters,

    n = Ī ω̇ + ω × Ī ω − a × h,   f = m a + (ω̇× + ω×ω×) h,

with ω, ω̇, a (classical acceleration of the origin, minus gravity) in the body frame. The wrench
is projected on every supporting dof's motion vector. The torque, gravity, body and mass-matrix
regressors run the compiled one-pass kernels of :mod:`.newton_euler` sample by sample; the
momentum regressors process all samples at once with numpy (:mod:`.kinematics`).

Inputs: ``q (N, nq)`` or ``(nq,)``, ``dq``/``ddq`` ``(N, nv)`` or ``(nv,)``; outputs keep the batch
axis only when the inputs had one. Units: SI (rad, m, s, kg, N·m).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sysid_ros.core.errors import DataError
from sysid_ros.core.model.kinematics import (
    Motion,
    TreeTopology,
    cross3,
    cross_motion,
    forward_poses,
    motion,
)
from sysid_ros.core.model.newton_euler import KernelTree, mass_matrix_columns, term_table, torque_columns
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
    out = []
    for name, v in zip(("dq", "ddq")[:len(vs)], vs, strict=True):
        v2 = np.array(v, dtype=float, order="C", ndmin=2)
        if v2.shape != (q2.shape[0], model.nv):
            raise DataError(f"expected {name} of shape ({q2.shape[0]}, {model.nv}), got {np.shape(v)}")
        out.append(v2)
    return single, q2, out


@dataclass(frozen=True)
class _Pairs:
    """(dof, body) pairs where the dof supports the body, for a tuple of bodies."""

    dof: np.ndarray  # (P,) dof index
    body: np.ndarray  # (P,) body index (MuJoCo id - 1)
    slot: np.ndarray  # (P,) position of the pair's body in the bodies tuple
    col: np.ndarray  # (P, 10) column of each pair's 10 values relative to the bodies' block


def _pairs(model: RobotModel, topo: TreeTopology, bodies: tuple[int, ...]) -> _Pairs:
    def build() -> _Pairs:
        dofs, bods, slots, cols = [], [], [], []
        for k, b in enumerate(bodies):
            for d in np.flatnonzero(topo.body_dof_mask[b - 1]):
                dofs.append(d)
                bods.append(b - 1)
                slots.append(k)
                cols.append(10 * k + np.arange(10))
        return _Pairs(np.array(dofs, dtype=int), np.array(bods, dtype=int),
                      np.array(slots, dtype=int), np.array(cols, dtype=int).reshape(-1, 10))

    return model.derived(("pairs", bodies), build)


def body_wrench_columns(w: np.ndarray, wd: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Wrench regressor ``(6, 10)`` of one body (rows ``[n; f]`` about its origin, body frame).

    ``w``, ``wd``: angular velocity and acceleration; ``a``: classical acceleration of the origin
    minus gravity; all ``(3,)`` in the body frame. Spatial Newton–Euler (seed eqs. for G_a):

        n = Ī ω̇ + ω × Ī ω − a × h,   f = m a + (ω̇× + ω×ω×) h.

    With ``w = 0, wd = ω, a = v`` it gives the body's momentum ``[Ī ω + h × v; m v + ω × h]``.
    """
    out = np.zeros((6, 10))
    out[3:, 0] = a
    out[:3, 1:4] = -skew(a)
    sw = skew(w)
    out[3:, 1:4] = skew(wd) + sw @ sw
    out[:3, 4:10] = inertia_times(wd) + sw @ inertia_times(w)
    return out


# body_wrench_columns is linear in the 12 features [a, ω̇, ω0ω0, ω0ω1, ω0ω2, ω1ω1, ω1ω2, ω2ω2];
# _FEATURES (60, 12) holds its coefficients, so a whole batch is one matrix product.
_W_I = np.array([0, 0, 0, 1, 1, 2])
_W_J = np.array([0, 1, 2, 1, 2, 2])


def _feature_matrix() -> np.ndarray:
    e, z = np.eye(3), np.zeros(3)
    cols = [body_wrench_columns(z, z, e[i]) for i in range(3)]
    cols += [body_wrench_columns(z, e[i], z) for i in range(3)]
    for i, j in zip(_W_I, _W_J, strict=True):
        if i == j:
            cols.append(body_wrench_columns(e[i], z, z))
        else:  # polarisation: the ω_i ω_j coefficient
            cols.append(body_wrench_columns(e[i] + e[j], z, z) - body_wrench_columns(e[i], z, z)
                        - body_wrench_columns(e[j], z, z))
    return np.stack([c.ravel() for c in cols], axis=1)


_FEATURES = _feature_matrix()

#: below this many samples, contractions use einsum (fewer calls); above, broadcast products
_SMALL = 64


def _rotate_t(rot: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``out[p, k, c] = Σ_i rot[p, i, k] x[p, i, c]`` for ``rot (P, 3, 3, N)``, ``x (P, 3, C, N)``."""
    if x.shape[-1] < _SMALL:
        return np.einsum("pikn,picn->pkcn", rot, x)
    return (rot[:, 0, :, None] * x[:, 0, None] + rot[:, 1, :, None] * x[:, 1, None]
            + rot[:, 2, :, None] * x[:, 2, None])


def _contract(s: np.ndarray, wrench: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """``out[p, c] = Σ_k s[p, k] wrench[slot[p], k, c]``; ``s (P, 6, N)``, ``wrench (B, 6, 10, N)``."""
    if s.shape[-1] < _SMALL:
        return np.einsum("pkn,pkcn->pcn", s, wrench[slot])
    out = np.empty((s.shape[0], 10, s.shape[-1]))
    for b in range(wrench.shape[0]):  # per body: no copy of its wrench per pair
        rows = np.flatnonzero(slot == b)
        acc = s[rows, 0, None] * wrench[b, 0]
        for k in range(1, 6):
            acc += s[rows, k, None] * wrench[b, k]
        out[rows] = acc
    return out


def _project(model: RobotModel, vecs: np.ndarray, mot: Motion, bodies: tuple[int, ...],
             buf: np.ndarray, sl: slice = slice(None), *, momentum: bool = False) -> None:
    """Write joint-space columns of the bodies' wrenches (or momenta) into a buffer.

    ``buf (nv, width, N_total)`` receives body ``k``'s 10 columns at ``10k`` for the samples
    ``sl`` (the ``N`` samples of ``vecs (nv, 6, N)`` and ``mot``). For a dof with motion vector
    ``s = (u, t)`` (world, about the origin) and a body it supports, the torque is
    ``s_bᵀ W_b θ_b`` with ``s_b`` the same motion at the body origin in body axes and ``W_b`` the
    body's :func:`body_wrench_columns`. With ``momentum=True`` the body momentum replaces the
    wrench; projecting it on ``S_dot`` then gives ``Cᵀq̇``.
    """
    pairs = _pairs(model, _topology(model), bodies)
    n = vecs.shape[-1]
    sel = vecs[pairs.dof]
    u = sel[:, :3]
    t = sel[:, 3:] + cross3(u, mot.poses.pos[pairs.body])
    s = _rotate_t(mot.poses.rot[pairs.body], np.stack((u, t), axis=2))  # (P, 3, 2, N)
    s = s.transpose(0, 2, 1, 3).reshape(-1, 6, n)  # [u_b; t_b]
    w, wd, v, a = mot.classical
    idx = np.asarray(bodies) - 1
    if momentum:
        feats = np.concatenate((v[idx], w[idx]), axis=1)  # (B, 6, N)
        wrench = np.matmul(_FEATURES[:, :6], feats)
    else:
        wb = w[idx]
        feats = np.concatenate((a[idx], wd[idx], wb[:, _W_I] * wb[:, _W_J]), axis=1)
        wrench = np.matmul(_FEATURES, feats)
    cols = _contract(s, wrench.reshape(len(bodies), 6, 10, n), pairs.slot)
    rows = (pairs.dof[:, None] * buf.shape[1] + pairs.col).reshape(-1)
    buf.reshape(-1, buf.shape[-1])[rows, sl] = cols.reshape(-1, n)


def _joint_terms(model: RobotModel, dq: np.ndarray, ddq: np.ndarray, buf: np.ndarray, *,
                 terms: tuple[str, ...] = JOINT_FIELDS) -> None:
    """Write the joint-term columns (only ``terms``) into ``buf (nv, p, N)`` at their columns."""
    if not model.term_joints:
        return
    dofs = model.term_dofs
    base = model.term_columns
    for t_i, term in enumerate(model.joint_terms):
        if term not in terms:
            continue
        if term == "Fc":
            value = np.sign(dq[:, dofs].T)
        elif term == "Fv":
            value = dq[:, dofs].T
        elif term == "Fo":
            value = 1.0
        else:
            value = ddq[:, dofs].T
        buf[dofs, base + t_i] = value


def _new_buffer(model: RobotModel, n: int, width: int | None = None) -> np.ndarray:
    return np.zeros((model.nv, model.n_params if width is None else width, n))


def _batch_major(buf: np.ndarray) -> np.ndarray:
    """``(nv, p, N)`` buffer as an ``(N, nv, p)`` regressor (a view, not a copy)."""
    return buf.transpose(2, 0, 1)


def _finish(single: bool, y: np.ndarray) -> np.ndarray:
    return y[0] if single else y


class _Kernel(NamedTuple):
    """A model's tree and column tables for the compiled kernels, built once per model."""

    tree: KernelTree
    body_col: np.ndarray  # (nb,) first column of each identified body, −1 if none
    terms: np.ndarray  # (T, 3) all joint terms
    armature: np.ndarray  # (T', 3) the Ia terms only
    no_gravity: np.ndarray  # (3,) zeros


def _kernel(model: RobotModel) -> _Kernel:
    def build() -> _Kernel:
        tree = KernelTree.of(model)
        return _Kernel(tree, tree.body_columns(model.param_bodies), term_table(model, JOINT_FIELDS),
                       term_table(model, ("Ia",)), np.zeros(3))

    return model.derived("kernel", build)


def _torque_columns(model: RobotModel, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, *,
                    gravity: bool = True, bodies: tuple[int, ...] | None = None) -> np.ndarray:
    """``(N, nv, width)`` regressor of the model's columns, or of ``bodies`` only (no joint terms)."""
    k = _kernel(model)
    t = k.tree
    if bodies is None:
        body_col, terms, width = k.body_col, k.terms, model.n_params
    else:
        body_col, terms, width = t.body_columns(bodies), k.terms[:0], 10 * len(bodies)
    out = np.zeros((q.shape[0], model.nv, width))
    torque_columns(t.body_i, t.body_f, t.jnt_i, t.jnt_f, t.gravity if gravity else k.no_gravity,
                   body_col, terms, q, dq, ddq, out)
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
    k = _kernel(model)
    t = k.tree
    if bodies is None:
        body_col, terms, width = k.body_col, k.armature, model.n_params
    else:
        body_col, terms, width = t.body_columns(tuple(bodies)), k.armature[:0], 10 * len(bodies)
    out = np.zeros((q2.shape[0], model.nv, model.nv, width))
    mass_matrix_columns(t.body_i, t.body_f, t.jnt_i, t.jnt_f, body_col, terms, q2, out)
    return _finish(single, out)


class MomentumRegressors(NamedTuple):
    """Regressors ``(N, nv, p)`` of the momentum equation ``τ = d/dt(Yp θ) − Yc θ + Yg θ + Yf θ``.

    * ``Yp``: generalised momentum ``p = M(q) q̇`` (armature included);
    * ``Yc``: ``Cᵀ(q, q̇) q̇`` with Christoffel-consistent C (equals ``∂K/∂q``);
    * ``Yg``: gravity torque ``g(q)``;
    * ``Yf``: friction and offset ``Fc·sign(q̇) + Fv·q̇ + Fo``.

    Over a window ``[t_r, t_k]``: ``∫τ dt = (Yp(t_k) − Yp(t_r)) θ − ∫(Yc − Yg − Yf) dt θ``;
    no acceleration is needed.
    """

    Yp: np.ndarray
    Yc: np.ndarray
    Yg: np.ndarray
    Yf: np.ndarray


def _true_s_dot(topo: TreeTopology, s: np.ndarray, s_dot: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """Time derivatives ``(nv, 6, N)`` of the individual motion vectors.

    ``Motion.S_dot`` is MuJoCo's ``cdof_dot`` (velocity before the joint × S), which is all an
    acceleration needs. The rotational dofs of a ball/free joint are axes fixed in the child body,
    so each one also turns with its own joint's rotation: ``Ṡ_i = (V_before + ω_joint) × S_i``.
    (Summed with weights q̇ that extra term is ω × ω = 0, which is why accelerations do not see
    it, but ``Cᵀq̇ = Ṡᵀh`` projects each dof separately.)
    """
    rot = np.flatnonzero(topo.dof_type == 2)
    if rot.size == 0:
        return s_dot
    out = s_dot.copy()
    for joint in np.unique(topo.dof_joint[rot]):
        dofs = rot[topo.dof_joint[rot] == joint]
        own = np.einsum("dkn,nd->kn", s[dofs], dq[:, dofs])  # (6, N) the joint's own rotation
        out[dofs] += cross_motion(np.broadcast_to(own, s[dofs].shape), s[dofs])
    return out


def momentum_regressors(model: RobotModel, q, dq, *, bodies: tuple[int, ...] | None = None
                        ) -> MomentumRegressors:
    """The four regressors of :class:`MomentumRegressors` at ``q (N, nq)``, ``dq (N, nv)``.

    With ``bodies`` (MuJoCo ids), only those bodies' 10 columns each (no joint terms; ``Yf`` is
    then zero): the momentum equation of a payload on a known arm.
    """
    single, q2, (dq2,) = _as_batch(model, q, dq)
    topo = _topology(model)
    n = q2.shape[0]
    zero = np.zeros((n, model.nv))
    poses = forward_poses(model, q2)
    mot = motion(model, topo, poses, dq2, zero, gravity=False)
    which = model.param_bodies if bodies is None else bodies
    width = None if bodies is None else 10 * len(bodies)
    yp, yc, yg, yf = (_new_buffer(model, n, width) for _ in range(4))
    _project(model, poses.S, mot, which, yp, momentum=True)
    _project(model, _true_s_dot(topo, poses.S, mot.S_dot, dq2), mot, which, yc, momentum=True)
    g_mot = motion(model, topo, poses, zero, zero, gravity=True)
    _project(model, poses.S, g_mot, which, yg)
    if bodies is None:
        _joint_terms(model, zero, dq2, yp, terms=("Ia",))
        _joint_terms(model, dq2, zero, yf, terms=("Fc", "Fv", "Fo"))
    return MomentumRegressors(*(_finish(single, _batch_major(y)) for y in (yp, yc, yg, yf)))


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
