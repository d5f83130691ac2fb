"""Batched forward kinematics of a :class:`RobotModel`, vectorised over samples.

Everything is expressed in the world frame; spatial vectors are ``[angular, linear]`` about the
world origin. Arrays keep the sample axis **last** (contiguous over samples, which keeps numpy's
loops long). With ``N`` samples, ``nb`` MuJoCo bodies (world excluded, index ``id - 1``) and
``nv`` dofs:

* poses: ``rot (nb, 3, 3, N)``, ``pos (nb, 3, N)`` of every body frame;
* motion subspace: ``S (nv, 6, N)``, one spatial motion vector per dof (MuJoCo's ``cdof``);
* ``S_dot (nv, 6, N)``: its time derivative (MuJoCo's ``cdof_dot``);
* velocities ``V (nb, 6, N)`` and accelerations ``A (nb, 6, N)`` of every body, the base
  accelerating with ``-gravity`` when gravity is included (the usual Newton–Euler trick).

The recursion follows MuJoCo's own (``mj_kinematics``, ``mj_comPos``, ``mj_comVel``): joints
of a body are applied in order, hinge/slide rotate/translate by ``q - qpos0`` about/along the
axis through the joint anchor, ball/free use quaternions, a dof's ``S_dot`` uses the velocity
accumulated before its joint.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import mujoco
import numpy as np

from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.spatial import quat_to_mat, skew

#: below this many samples, poses come from MuJoCo's own mj_kinematics (less numpy overhead)
SMALL_BATCH = 8


# (a × b)_i = a_j b_k − a_k b_j over the cyclic (i, j, k): both products in one multiplication
_CROSS_A = np.array([1, 2, 0, 2, 0, 1])
_CROSS_B = np.array([2, 0, 1, 1, 2, 0])


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product over axis ``-2`` of ``(..., 3, N)`` arrays (broadcasting)."""
    prod = a[..., _CROSS_A, :] * b[..., _CROSS_B, :]
    return prod[..., :3, :] - prod[..., 3:, :]


def matvec3(r: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``R x`` for ``r (..., 3, 3, N)`` and ``x (..., 3, N)`` or a constant ``x (3,)``."""
    if x.ndim == 1:
        return r[..., 0, :] * x[0] + r[..., 1, :] * x[1] + r[..., 2, :] * x[2]
    return r[..., 0, :] * x[..., None, 0, :] + r[..., 1, :] * x[..., None, 1, :] \
        + r[..., 2, :] * x[..., None, 2, :]


def _times_const(r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``R C`` for ``r (3, 3, N)`` and a constant ``c (3, 3)``."""
    return np.einsum("ijn,jk->ikn", r, c, optimize=False)


def cross_motion(v: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Spatial motion cross product ``v × m`` of ``[ang, lin]`` vectors ``(..., 6, N)``."""
    w, v0 = v[..., :3, :], v[..., 3:, :]
    mw, m0 = m[..., :3, :], m[..., 3:, :]
    # [w × mw; w × m0 + v0 × mw] with two stacked cross products
    c = cross3(np.stack((w, w, v0)), np.stack((mw, m0, mw)))
    return np.concatenate((c[0], c[1] + c[2]), axis=-2)


@dataclass(frozen=True)
class TreeTopology:
    """Index structures of a model's tree, computed once per model."""

    body_dof_mask: np.ndarray  # (nb, nv) 1 where dof supports (is an ancestor-or-self of) body
    dof_before_mask: np.ndarray  # (nv, nv) dofs whose velocity precedes dof j's joint
    dof_body: np.ndarray  # (nv,) body index (id - 1) of each dof
    dof_type: np.ndarray  # (nv,) 0 hinge, 1 slide, 2 rotational of ball/free, 3 translation of free
    dof_joint: np.ndarray  # (nv,) joint index of each dof
    has_free: bool

    @classmethod
    def of(cls, model: RobotModel) -> TreeTopology:
        nb, nv = len(model.bodies), model.nv
        dof_body = np.zeros(nv, dtype=int)
        dof_joint = np.zeros(nv, dtype=int)
        dof_type = np.zeros(nv, dtype=int)
        for ji, j in enumerate(model.joints):
            for k in range(j.nv):
                d = j.dof_adr + k
                dof_body[d], dof_joint[d] = j.body - 1, ji
                dof_type[d] = {"hinge": 0, "slide": 1, "ball": 2}.get(j.type, 3 if k < 3 else 2)
        ancestor = np.zeros((nb, nb), dtype=bool)  # ancestor[b, a]: a is ancestor-or-self of b
        for b in model.bodies:
            i = b.id - 1
            ancestor[i, i] = True
            if b.parent > 0:
                ancestor[i] |= ancestor[b.parent - 1]
        body_dof = ancestor[:, dof_body].astype(float)
        before = np.zeros((nv, nv))
        for jd in range(nv):
            for kd in range(nv):
                bj, bk = dof_body[jd], dof_body[kd]
                if bk != bj:
                    before[jd, kd] = ancestor[bj, bk]
                elif dof_joint[kd] < dof_joint[jd]:
                    before[jd, kd] = 1.0
                elif dof_joint[kd] == dof_joint[jd] and dof_type[kd] == 3 and dof_type[jd] == 2:
                    before[jd, kd] = 1.0  # free joint: rotations see the joint's own translation
        return cls(body_dof, before, dof_body, dof_type, dof_joint, bool(np.any(dof_type == 3)))


@dataclass
class Poses:
    """Body poses and dof motion vectors at ``N`` configurations (see module docstring)."""

    rot: np.ndarray
    pos: np.ndarray
    S: np.ndarray


def forward_poses(model: RobotModel, q: np.ndarray) -> Poses:
    """Body poses and motion subspaces for configurations ``q (N, nq)``."""
    q = np.asarray(q, dtype=float)
    if q.shape[0] < SMALL_BATCH:
        return _poses_mujoco(model, q)
    return _poses_numpy(model, q)


def _poses_mujoco(model: RobotModel, q: np.ndarray) -> Poses:
    """Poses through ``mj_kinematics`` sample by sample (fast for a handful of samples)."""
    mj = model.mj
    data = model.scratch_data()
    n, nb = q.shape[0], len(model.bodies)
    xmat = np.empty((n, nb, 9))
    xpos = np.empty((n, nb, 3))
    xaxis = np.empty((n, mj.njnt, 3))
    xanchor = np.empty((n, mj.njnt, 3))
    for i in range(n):
        data.qpos[:] = q[i]
        mujoco.mj_kinematics(mj, data)
        xmat[i], xpos[i] = data.xmat[1:], data.xpos[1:]
        xaxis[i], xanchor[i] = data.xaxis, data.xanchor
    rot = xmat.transpose(1, 2, 0).reshape(nb, 3, 3, n)
    pos = xpos.transpose(1, 2, 0)
    axis, anchor = xaxis.transpose(1, 2, 0), xanchor.transpose(1, 2, 0)
    S = np.zeros((model.nv, 6, n))
    hinge, slide = _joint_groups(model)
    if len(hinge[0]):
        S[hinge[1], :3] = axis[hinge[0]]
        S[hinge[1], 3:] = cross3(anchor[hinge[0]], axis[hinge[0]])
    if len(slide[0]):
        S[slide[1], 3:] = axis[slide[0]]
    for ji, j in enumerate(model.joints):
        d = j.dof_adr
        if j.type in ("hinge", "slide"):
            continue
        else:
            if j.type == "free":
                S[d:d + 3, 3:] = np.eye(3)[:, :, None]
                d += 3
            axes = np.swapaxes(rot[j.body - 1], 0, 1)  # rows: the body's axes
            S[d:d + 3, :3] = axes
            S[d:d + 3, 3:] = cross3(anchor[ji][None], axes)
    return Poses(rot, pos, S)


def _joint_groups(model: RobotModel) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(joint indices, dof indices) of the hinge joints and of the slide joints."""
    return model.derived("joint_groups", lambda: tuple(
        (np.array([i for i, j in enumerate(model.joints) if j.type == kind], dtype=int),
         np.array([j.dof_adr for j in model.joints if j.type == kind], dtype=int))
        for kind in ("hinge", "slide")))


def _poses_numpy(model: RobotModel, q: np.ndarray) -> Poses:
    """Poses by the tree recursion, vectorised over samples."""
    n = q.shape[0]
    qt = np.ascontiguousarray(q.T)
    nb = len(model.bodies)
    rot = np.empty((nb, 3, 3, n))
    pos = np.empty((nb, 3, n))
    S = np.zeros((model.nv, 6, n))
    for body in model.bodies:
        i = body.id - 1
        if body.parent == 0:
            r = np.broadcast_to(body.rot[:, :, None], (3, 3, n))
            p = np.broadcast_to(body.pos[:, None], (3, n))
        else:
            rp, pp = rot[body.parent - 1], pos[body.parent - 1]
            r, p = _times_const(rp, body.rot), pp + matvec3(rp, body.pos)
        rot_dofs: list[tuple[int, np.ndarray]] = []
        for ji in body.joints:
            j = model.joints[ji]
            qa, d = j.qpos_adr, j.dof_adr
            if j.type == "free":
                p = qt[qa:qa + 3].copy()
                r = np.moveaxis(quat_to_mat(q[:, qa + 3:qa + 7]), 0, -1)
                S[d:d + 3, 3:] = np.eye(3)[:, :, None]
                rot_dofs.append((d + 3, p))
                continue
            axis_w = matvec3(r, j.axis)
            anchor = p + matvec3(r, j.pos)
            if j.type == "slide":
                S[d, 3:] = axis_w
                p = p + axis_w * (qt[qa] - j.qpos0)
            elif j.type == "hinge":
                S[d, :3] = axis_w
                S[d, 3:] = cross3(anchor, axis_w)
                # Rodrigues with constant K = skew(axis): R Rot = R + sin·(RK) + (1 - cos)·(RK²)
                k = skew(j.axis)
                angle = qt[qa] - j.qpos0
                r = r + np.sin(angle) * _times_const(r, k) + (1.0 - np.cos(angle)) * _times_const(r, k @ k)
                p = anchor - matvec3(r, j.pos)
            else:  # ball
                r = np.einsum("ijn,jkn->ikn", r, np.moveaxis(quat_to_mat(q[:, qa:qa + 4]), 0, -1))
                p = anchor - matvec3(r, j.pos)
                rot_dofs.append((d, anchor))
        for d, anchor in rot_dofs:  # ball/free rotations turn about the body's final axes
            axes = np.swapaxes(r, 0, 1)
            S[d:d + 3, :3] = axes
            S[d:d + 3, 3:] = cross3(anchor[None], axes)
        rot[i], pos[i] = r, p
    return Poses(rot, pos, S)


@dataclass
class Motion:
    """Poses plus velocities/accelerations of every body and dof (see module docstring)."""

    poses: Poses
    V: np.ndarray
    A: np.ndarray
    S_dot: np.ndarray

    @cached_property
    def classical(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Body-frame ``(omega, omega_dot, v_origin, a_origin)``, each ``(nb, 3, N)``.

        ``a_origin`` is the classical acceleration of the body origin (minus gravity when the
        motion was computed with gravity), ``v_origin`` its velocity.
        """
        rot, pos = self.poses.rot, self.poses.pos
        w, wd = self.V[:, :3], self.A[:, :3]
        wp = cross3(np.stack((w, wd)), pos)  # [ω × p, ω̇ × p]
        v = self.V[:, 3:] + wp[0]
        a = self.A[:, 3:] + wp[1] + cross3(w, v)
        # rotate all four at once: (nb, 3, 4, N)
        x = np.stack((w, wd, v, a), axis=2)  # (nb, 3, 4, N); out[b,k,c] = sum_i R[b,i,k] x[b,i,c]
        out = (rot[:, 0, :, None, :] * x[:, 0, None] + rot[:, 1, :, None, :] * x[:, 1, None]
               + rot[:, 2, :, None, :] * x[:, 2, None])
        return out[:, :, 0], out[:, :, 1], out[:, :, 2], out[:, :, 3]


def motion(
    model: RobotModel,
    topo: TreeTopology,
    poses: Poses,
    dq: np.ndarray,
    ddq: np.ndarray,
    *,
    gravity: bool = True,
) -> Motion:
    """Velocities and accelerations of every body for ``dq, ddq (N, nv)`` at ``poses``."""
    S = poses.S
    nv, n = S.shape[0], S.shape[-1]
    sdq = S * dq.T[:, None, :]  # (nv, 6, N)
    v_before = (topo.dof_before_mask @ sdq.reshape(nv, -1)).reshape(sdq.shape)
    S_dot = cross_motion(v_before, S)
    if topo.has_free:
        S_dot[topo.dof_type == 3] = 0.0  # free-joint translations are world-fixed directions
    V = (topo.body_dof_mask @ sdq.reshape(nv, -1)).reshape(-1, 6, n)
    acc = S * ddq.T[:, None, :] + S_dot * dq.T[:, None, :]
    A = (topo.body_dof_mask @ acc.reshape(nv, -1)).reshape(-1, 6, n)
    if gravity:
        A[:, 3:] -= model.gravity[:, None]
    return Motion(poses, V, A, S_dot)
