"""Compiled spatial Newton–Euler regressor kernels (numba, one pass per sample).

The regressor is linear in θ, so one forward pass over the tree per sample gives every column:

1. poses: each body's rotation ``R`` and origin ``p`` (world frame) and each dof's motion vector
   ``S = [u; t]`` about the world origin, by MuJoCo's own recursion (joints of a body in order;
   hinge/slide rotate/translate by ``q − qpos0`` about/along the axis through the joint anchor;
   ball/free use normalised quaternions ``[w, x, y, z]``);
2. motion: body velocity ``V`` and acceleration ``A`` (spatial, world, about the origin),
   ``A += S q̈ + (V_before × S) q̇`` with ``V_before`` the velocity before the dof's joint (a free
   joint's rotations see its translations), the base accelerating with ``−gravity``;
3. columns: each identified body's wrench regressor ``W (6, 10)`` in its own frame (seed
   ``robot-sysid-spatial-regressor``),

       n = Ī ω̇ + ω × Ī ω − a × h,   f = m a + (ω̇× + ω×ω×) h,

   projected on every supporting dof: ``Y[d, 10k:10k+10] = s_bᵀ W`` with ``s_b = Rᵀ[u; t + u × p]``
   (the dof's motion at the body origin, in body axes);
4. joint terms ``Fc·sign(q̇) + Fv·q̇ + Fo + Ia·q̈`` at their columns.

The work per sample is a few thousand floating-point operations for a 7-DOF arm, written once
into the output: no intermediate arrays over the batch (nothing memory-bound but the result).
Kernels are compiled on first use and cached on disk (``cache=True``), and release the GIL.

Tree arrays (:class:`KernelTree`): bodies in MuJoCo order (parents first, index ``id − 1``).
Units: SI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sysid_ros.core.jit import numba
from sysid_ros.core.model.robot import RobotModel

__all__ = [
    "KernelPlan",
    "KernelTree",
    "compile_kernels",
    "mass_matrix_columns",
    "momentum_columns",
    "plan",
    "term_table",
    "torque_columns",
]

HINGE, SLIDE, BALL, FREE = 0, 1, 2, 3
_TYPE_CODE = {"hinge": HINGE, "slide": SLIDE, "ball": BALL, "free": FREE}
#: joint-term codes in the kernels' term table
TERM_CODE = {"Fc": 0, "Fv": 1, "Fo": 2, "Ia": 3}


@dataclass(frozen=True)
class KernelTree:
    """A :class:`RobotModel`'s tree as flat arrays for the kernels (built once per model)."""

    body_i: np.ndarray  # (nb, 3) int64: parent index (−1 = world), first joint, joint count
    body_f: np.ndarray  # (nb, 12): position (3) and row-major rotation (9) in the parent frame
    jnt_i: np.ndarray  # (nj, 3) int64: type code, qpos address, dof address
    jnt_f: np.ndarray  # (nj, 7): axis (3), anchor (3) in the body frame, qpos0
    gravity: np.ndarray  # (3,) m/s²

    @classmethod
    def of(cls, model: RobotModel) -> KernelTree:
        body_i = np.array([[b.parent - 1, b.joints[0] if b.joints else 0, len(b.joints)]
                           for b in model.bodies], dtype=np.int64).reshape(-1, 3)
        body_f = np.array([np.concatenate((b.pos, b.rot.ravel())) for b in model.bodies],
                          dtype=float).reshape(-1, 12)
        jnt_i = np.array([[_TYPE_CODE[j.type], j.qpos_adr, j.dof_adr] for j in model.joints],
                         dtype=np.int64).reshape(-1, 3)
        jnt_f = np.array([np.concatenate((j.axis, j.pos, [j.qpos0])) for j in model.joints],
                         dtype=float).reshape(-1, 7)
        return cls(body_i, body_f, jnt_i, jnt_f, np.array(model.gravity, dtype=float))

    def body_columns(self, bodies: tuple[int, ...]) -> np.ndarray:
        """``(nb,)`` int64: first column of each body's 10 (``10k`` for ``bodies[k]``), else −1."""
        col = np.full(len(self.body_i), -1, dtype=np.int64)
        for k, b in enumerate(bodies):
            col[b - 1] = 10 * k
        return col


def term_table(model: RobotModel, terms: tuple[str, ...]) -> np.ndarray:
    """``(T, 3)`` int64 rows ``[dof, column, term code]`` of the model's joint terms in ``terms``
    (the Stribeck term ``Fs`` is not the kernel's: ``regressor._stribeck_columns`` writes it;
    nor is the sigmoid term ``Fsig``: ``regressor._sigmoid_columns``)."""
    rows = [(d, c + t_i, TERM_CODE[t]) for d, c in zip(model.term_dofs, model.term_columns, strict=True)
            for t_i, t in enumerate(model.joint_terms) if t in terms and t in TERM_CODE]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


class KernelPlan(NamedTuple):
    """A tree and its column plan packed into two arrays: a kernel's call overhead grows with its
    number of arguments, and a single-sample call is mostly overhead.

    ``ints`` = ``[nb, nj, T, body_i (nb·3), jnt_i (nj·3), terms (T·3), body_col (nb)]``;
    ``floats`` = ``[body_f (nb·12), jnt_f (nj·7), gravity (3)]`` (see :class:`KernelTree`).
    """

    ints: np.ndarray
    floats: np.ndarray


def plan(tree: KernelTree, body_col: np.ndarray, terms: np.ndarray, *, gravity: bool = True
         ) -> KernelPlan:
    """Pack ``tree``, the body columns ``body_col (nb,)`` and the term table ``terms (T, 3)``."""
    head = np.array([len(tree.body_i), len(tree.jnt_i), len(terms)], dtype=np.int64)
    ints = np.concatenate((head, tree.body_i.ravel(), tree.jnt_i.ravel(),
                           np.asarray(terms, dtype=np.int64).ravel(), body_col)).astype(np.int64)
    g = tree.gravity if gravity else np.zeros(3)
    floats = np.concatenate((tree.body_f.ravel(), tree.jnt_f.ravel(), g)).astype(float)
    return KernelPlan(ints, floats)


_jit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")


@_jit
def _quat_mat(q: np.ndarray, a: int, r: np.ndarray) -> None:
    """``r (3, 3)`` = rotation of the quaternion ``q[a:a+4]`` (normalised here)."""
    n = np.sqrt(q[a] ** 2 + q[a + 1] ** 2 + q[a + 2] ** 2 + q[a + 3] ** 2)
    w, x, y, z = q[a] / n, q[a + 1] / n, q[a + 2] / n, q[a + 3] / n
    r[0, 0] = 1 - 2 * (y * y + z * z)
    r[0, 1] = 2 * (x * y - w * z)
    r[0, 2] = 2 * (x * z + w * y)
    r[1, 0] = 2 * (x * y + w * z)
    r[1, 1] = 1 - 2 * (x * x + z * z)
    r[1, 2] = 2 * (y * z - w * x)
    r[2, 0] = 2 * (x * z - w * y)
    r[2, 1] = 2 * (y * z + w * x)
    r[2, 2] = 1 - 2 * (x * x + y * y)


@_jit
def _times(r: np.ndarray, m: np.ndarray, tmp: np.ndarray) -> None:
    """``r ← r m`` for ``(3, 3)`` matrices (``tmp (3, 3)`` scratch)."""
    for i in range(3):
        for k in range(3):
            tmp[i, k] = r[i, 0] * m[0, k] + r[i, 1] * m[1, k] + r[i, 2] * m[2, k]
    for i in range(3):  # explicit loops: numba copies an array right-hand side of a slice
        for k in range(3):
            r[i, k] = tmp[i, k]


@_jit
def _poses(tree_bi, tree_bf, tree_ji, tree_jf, q, rot, pos, S, m, tmp, anc) -> None:
    """Fill ``rot (nb, 3, 3)``, ``pos (nb, 3)``, ``S (nv, 6)`` for one configuration ``q (nq,)``
    (``m``, ``tmp (3, 3)``, ``anc (nj, 3)``: scratch)."""
    S[:, :] = 0.0
    for b in range(tree_bi.shape[0]):
        par = tree_bi[b, 0]
        r = rot[b]
        p = pos[b]
        if par < 0:
            for i in range(3):
                for k in range(3):
                    r[i, k] = tree_bf[b, 3 + 3 * i + k]
                p[i] = tree_bf[b, i]
        else:
            rp = rot[par]
            for i in range(3):
                p[i] = pos[par, i] + rp[i, 0] * tree_bf[b, 0] + rp[i, 1] * tree_bf[b, 1] \
                    + rp[i, 2] * tree_bf[b, 2]
                for k in range(3):
                    r[i, k] = rp[i, 0] * tree_bf[b, 3 + k] + rp[i, 1] * tree_bf[b, 6 + k] \
                        + rp[i, 2] * tree_bf[b, 9 + k]
        first = tree_bi[b, 1]
        for j in range(first, first + tree_bi[b, 2]):
            typ, qa, d = tree_ji[j, 0], tree_ji[j, 1], tree_ji[j, 2]
            if typ == FREE:
                for i in range(3):
                    p[i] = q[qa + i]
                    S[d + i, 3 + i] = 1.0
                    anc[j, i] = p[i]
                _quat_mat(q, qa + 3, r)
                continue
            ax0 = r[0, 0] * tree_jf[j, 0] + r[0, 1] * tree_jf[j, 1] + r[0, 2] * tree_jf[j, 2]
            ax1 = r[1, 0] * tree_jf[j, 0] + r[1, 1] * tree_jf[j, 1] + r[1, 2] * tree_jf[j, 2]
            ax2 = r[2, 0] * tree_jf[j, 0] + r[2, 1] * tree_jf[j, 1] + r[2, 2] * tree_jf[j, 2]
            an0 = p[0] + r[0, 0] * tree_jf[j, 3] + r[0, 1] * tree_jf[j, 4] + r[0, 2] * tree_jf[j, 5]
            an1 = p[1] + r[1, 0] * tree_jf[j, 3] + r[1, 1] * tree_jf[j, 4] + r[1, 2] * tree_jf[j, 5]
            an2 = p[2] + r[2, 0] * tree_jf[j, 3] + r[2, 1] * tree_jf[j, 4] + r[2, 2] * tree_jf[j, 5]
            if typ == SLIDE:
                S[d, 3], S[d, 4], S[d, 5] = ax0, ax1, ax2
                x = q[qa] - tree_jf[j, 6]
                p[0] += ax0 * x
                p[1] += ax1 * x
                p[2] += ax2 * x
                continue
            if typ == HINGE:
                S[d, 0], S[d, 1], S[d, 2] = ax0, ax1, ax2
                S[d, 3] = an1 * ax2 - an2 * ax1
                S[d, 4] = an2 * ax0 - an0 * ax2
                S[d, 5] = an0 * ax1 - an1 * ax0
                # Rodrigues about the body-frame axis k: I + sin K + (1 − cos) K²
                angle = q[qa] - tree_jf[j, 6]
                s, c1 = np.sin(angle), 1.0 - np.cos(angle)
                k0, k1, k2 = tree_jf[j, 0], tree_jf[j, 1], tree_jf[j, 2]
                m[0, 0] = 1.0 - c1 * (k1 * k1 + k2 * k2)
                m[1, 1] = 1.0 - c1 * (k0 * k0 + k2 * k2)
                m[2, 2] = 1.0 - c1 * (k0 * k0 + k1 * k1)
                m[0, 1] = -s * k2 + c1 * k0 * k1
                m[1, 0] = s * k2 + c1 * k0 * k1
                m[0, 2] = s * k1 + c1 * k0 * k2
                m[2, 0] = -s * k1 + c1 * k0 * k2
                m[1, 2] = -s * k0 + c1 * k1 * k2
                m[2, 1] = s * k0 + c1 * k1 * k2
            else:  # ball
                _quat_mat(q, qa, m)
                anc[j, 0], anc[j, 1], anc[j, 2] = an0, an1, an2
            _times(r, m, tmp)
            p[0] = an0 - (r[0, 0] * tree_jf[j, 3] + r[0, 1] * tree_jf[j, 4] + r[0, 2] * tree_jf[j, 5])
            p[1] = an1 - (r[1, 0] * tree_jf[j, 3] + r[1, 1] * tree_jf[j, 4] + r[1, 2] * tree_jf[j, 5])
            p[2] = an2 - (r[2, 0] * tree_jf[j, 3] + r[2, 1] * tree_jf[j, 4] + r[2, 2] * tree_jf[j, 5])
        # rotational dofs of ball/free joints: the body's final axes through the joint's anchor
        for j in range(first, first + tree_bi[b, 2]):
            typ, d = tree_ji[j, 0], tree_ji[j, 2]
            if typ != BALL and typ != FREE:
                continue
            if typ == FREE:
                d += 3
            an0, an1, an2 = anc[j, 0], anc[j, 1], anc[j, 2]
            for k in range(3):
                u0, u1, u2 = r[0, k], r[1, k], r[2, k]
                S[d + k, 0], S[d + k, 1], S[d + k, 2] = u0, u1, u2
                S[d + k, 3] = an1 * u2 - an2 * u1
                S[d + k, 4] = an2 * u0 - an0 * u2
                S[d + k, 5] = an0 * u1 - an1 * u0


@_jit
def _motion(tree_bi, tree_ji, S, dq, ddq, g0, g1, g2, V, A, vb) -> None:
    """Fill body velocities ``V (nb, 6)`` and accelerations ``A (nb, 6)`` (base at ``−g``)."""
    for b in range(tree_bi.shape[0]):
        par = tree_bi[b, 0]
        if par < 0:
            for i in range(6):
                V[b, i] = 0.0
                A[b, i] = 0.0
            A[b, 3], A[b, 4], A[b, 5] = -g0, -g1, -g2
        else:
            for i in range(6):
                V[b, i] = V[par, i]
                A[b, i] = A[par, i]
        first = tree_bi[b, 1]
        for j in range(first, first + tree_bi[b, 2]):
            typ, d = tree_ji[j, 0], tree_ji[j, 2]
            start, count = d, 1
            if typ == FREE:  # world-fixed translations: no S_dot, seen by the rotations
                for i in range(3):
                    V[b, 3 + i] += dq[d + i]
                    A[b, 3 + i] += ddq[d + i]
                start, count = d + 3, 3
            elif typ == BALL:
                count = 3
            for i in range(6):
                vb[i] = V[b, i]
            for dd in range(start, start + count):
                v, a = dq[dd], ddq[dd]
                u0, u1, u2, t0, t1, t2 = S[dd, 0], S[dd, 1], S[dd, 2], S[dd, 3], S[dd, 4], S[dd, 5]
                # S_dot = V_before × S = [w × u; w × t + v × u]
                A[b, 0] += u0 * a + (vb[1] * u2 - vb[2] * u1) * v
                A[b, 1] += u1 * a + (vb[2] * u0 - vb[0] * u2) * v
                A[b, 2] += u2 * a + (vb[0] * u1 - vb[1] * u0) * v
                A[b, 3] += t0 * a + (vb[1] * t2 - vb[2] * t1 + vb[4] * u2 - vb[5] * u1) * v
                A[b, 4] += t1 * a + (vb[2] * t0 - vb[0] * t2 + vb[5] * u0 - vb[3] * u2) * v
                A[b, 5] += t2 * a + (vb[0] * t1 - vb[1] * t0 + vb[3] * u1 - vb[4] * u0) * v
                for i in range(6):
                    V[b, i] += S[dd, i] * v


@_jit
def _project(tree_bi, tree_ji, rot, pos, S, V, A, body_col, out) -> None:
    """Write each selected body's 10 columns ``out[d, col:col + 10]`` for its supporting dofs.

    With the body-frame ``ω, ω̇, a`` (``a``: classical acceleration of the origin) and the dof's
    motion at the body origin in body axes ``s = [σ; λ]``, ``sᵀ W`` of the wrench regressor
    ``W`` (module docstring) is, column by column,

        m:  λ · a
        h:  a × σ + λ × ω̇ + ω (ω · λ) − |ω|² λ
        Ī:  L(ω̇)ᵀ σ + L(ω)ᵀ (σ × ω),   L(x)ᵀ y = [x0y0, x1y0 + x0y1, x2y0 + x0y2, x1y1,
                                                  x2y1 + x1y2, x2y2]
    """
    for b in range(tree_bi.shape[0]):
        c0 = body_col[b]
        if c0 < 0:
            continue
        p0, p1, p2 = pos[b, 0], pos[b, 1], pos[b, 2]
        x0, x1, x2 = V[b, 0], V[b, 1], V[b, 2]
        y0, y1, y2 = A[b, 0], A[b, 1], A[b, 2]
        # velocity and classical acceleration of the body origin (world)
        v0 = V[b, 3] + x1 * p2 - x2 * p1
        v1 = V[b, 4] + x2 * p0 - x0 * p2
        v2 = V[b, 5] + x0 * p1 - x1 * p0
        z0 = A[b, 3] + y1 * p2 - y2 * p1 + x1 * v2 - x2 * v1
        z1 = A[b, 4] + y2 * p0 - y0 * p2 + x2 * v0 - x0 * v2
        z2 = A[b, 5] + y0 * p1 - y1 * p0 + x0 * v1 - x1 * v0
        # to body axes: Rᵀ x
        w0 = rot[b, 0, 0] * x0 + rot[b, 1, 0] * x1 + rot[b, 2, 0] * x2
        w1 = rot[b, 0, 1] * x0 + rot[b, 1, 1] * x1 + rot[b, 2, 1] * x2
        w2 = rot[b, 0, 2] * x0 + rot[b, 1, 2] * x1 + rot[b, 2, 2] * x2
        d0 = rot[b, 0, 0] * y0 + rot[b, 1, 0] * y1 + rot[b, 2, 0] * y2
        d1 = rot[b, 0, 1] * y0 + rot[b, 1, 1] * y1 + rot[b, 2, 1] * y2
        d2 = rot[b, 0, 2] * y0 + rot[b, 1, 2] * y1 + rot[b, 2, 2] * y2
        a0 = rot[b, 0, 0] * z0 + rot[b, 1, 0] * z1 + rot[b, 2, 0] * z2
        a1 = rot[b, 0, 1] * z0 + rot[b, 1, 1] * z1 + rot[b, 2, 1] * z2
        a2 = rot[b, 0, 2] * z0 + rot[b, 1, 2] * z1 + rot[b, 2, 2] * z2
        ww = w0 * w0 + w1 * w1 + w2 * w2
        a = b
        while a >= 0:
            first = tree_bi[a, 1]
            for j in range(first, first + tree_bi[a, 2]):
                d, typ = tree_ji[j, 2], tree_ji[j, 0]
                count = 1 if typ <= SLIDE else (3 if typ == BALL else 6)
                for dd in range(d, d + count):
                    u0, u1, u2 = S[dd, 0], S[dd, 1], S[dd, 2]
                    t0 = S[dd, 3] + u1 * p2 - u2 * p1
                    t1 = S[dd, 4] + u2 * p0 - u0 * p2
                    t2 = S[dd, 5] + u0 * p1 - u1 * p0
                    s0 = rot[b, 0, 0] * u0 + rot[b, 1, 0] * u1 + rot[b, 2, 0] * u2
                    s1 = rot[b, 0, 1] * u0 + rot[b, 1, 1] * u1 + rot[b, 2, 1] * u2
                    s2 = rot[b, 0, 2] * u0 + rot[b, 1, 2] * u1 + rot[b, 2, 2] * u2
                    l0 = rot[b, 0, 0] * t0 + rot[b, 1, 0] * t1 + rot[b, 2, 0] * t2
                    l1 = rot[b, 0, 1] * t0 + rot[b, 1, 1] * t1 + rot[b, 2, 1] * t2
                    l2 = rot[b, 0, 2] * t0 + rot[b, 1, 2] * t1 + rot[b, 2, 2] * t2
                    wl = w0 * l0 + w1 * l1 + w2 * l2
                    e0 = s1 * w2 - s2 * w1  # σ × ω
                    e1 = s2 * w0 - s0 * w2
                    e2 = s0 * w1 - s1 * w0
                    out[dd, c0] = l0 * a0 + l1 * a1 + l2 * a2
                    out[dd, c0 + 1] = a1 * s2 - a2 * s1 + l1 * d2 - l2 * d1 + w0 * wl - ww * l0
                    out[dd, c0 + 2] = a2 * s0 - a0 * s2 + l2 * d0 - l0 * d2 + w1 * wl - ww * l1
                    out[dd, c0 + 3] = a0 * s1 - a1 * s0 + l0 * d1 - l1 * d0 + w2 * wl - ww * l2
                    out[dd, c0 + 4] = d0 * s0 + w0 * e0
                    out[dd, c0 + 5] = d1 * s0 + d0 * s1 + w1 * e0 + w0 * e1
                    out[dd, c0 + 6] = d2 * s0 + d0 * s2 + w2 * e0 + w0 * e2
                    out[dd, c0 + 7] = d1 * s1 + w1 * e1
                    out[dd, c0 + 8] = d2 * s1 + d1 * s2 + w2 * e1 + w1 * e2
                    out[dd, c0 + 9] = d2 * s2 + w2 * e2
            a = tree_bi[a, 0]


@_jit
def _terms(terms, dq, ddq, out) -> None:
    """Joint-term columns: rows ``[dof, column, code]`` of ``terms (T, 3)``."""
    for t in range(terms.shape[0]):
        d, c, code = terms[t, 0], terms[t, 1], terms[t, 2]
        if code == 0:
            out[d, c] = np.sign(dq[d])
        elif code == 1:
            out[d, c] = dq[d]
        elif code == 2:
            out[d, c] = 1.0
        else:
            out[d, c] = ddq[d]


@_jit
def _unpack(ints, floats):
    """The arrays of a :class:`KernelPlan` (views)."""
    nb, nj, nt = ints[0], ints[1], ints[2]
    o = 3
    body_i = ints[o:o + 3 * nb].reshape((nb, 3))
    o += 3 * nb
    jnt_i = ints[o:o + 3 * nj].reshape((nj, 3))
    o += 3 * nj
    terms = ints[o:o + 3 * nt].reshape((nt, 3))
    o += 3 * nt
    body_col = ints[o:o + nb]
    body_f = floats[:12 * nb].reshape((nb, 12))
    jnt_f = floats[12 * nb:12 * nb + 7 * nj].reshape((nj, 7))
    gravity = floats[12 * nb + 7 * nj:12 * nb + 7 * nj + 3]
    return body_i, body_f, jnt_i, jnt_f, gravity, body_col, terms


@_jit
def torque_columns(ints, floats, q, dq, ddq, out) -> None:
    """Inverse-dynamics regressor ``out (N, nv, width)`` (zeroed by the caller) of ``q (N, nq)``,
    ``dq``, ``ddq (N, nv)`` for the :class:`KernelPlan` ``(ints, floats)`` (its gravity is the
    base's ``−acceleration``)."""
    tree_bi, tree_bf, tree_ji, tree_jf, gravity, body_col, terms = _unpack(ints, floats)
    nb, nv = tree_bi.shape[0], dq.shape[1]
    rot, pos = np.empty((nb, 3, 3)), np.empty((nb, 3))
    S = np.empty((nv, 6))
    V, A = np.empty((nb, 6)), np.empty((nb, 6))
    m, tmp, vb = np.empty((3, 3)), np.empty((3, 3)), np.empty(6)
    anc = np.empty((tree_ji.shape[0], 3))
    g0, g1, g2 = gravity[0], gravity[1], gravity[2]
    for n in range(q.shape[0]):
        _poses(tree_bi, tree_bf, tree_ji, tree_jf, q[n], rot, pos, S, m, tmp, anc)
        _motion(tree_bi, tree_ji, S, dq[n], ddq[n], g0, g1, g2, V, A, vb)
        _project(tree_bi, tree_ji, rot, pos, S, V, A, body_col, out[n])
        _terms(terms, dq[n], ddq[n], out[n])


@_jit
def mass_matrix_columns(ints, floats, q, out) -> None:
    """Mass-matrix regressor ``out (N, nv, nv, width)`` (zeroed by the caller): column ``k`` of
    ``M(q)`` is the torque of unit ``q̈_k`` at rest without gravity (the plan's terms: armature)."""
    tree_bi, tree_bf, tree_ji, tree_jf, _, body_col, terms = _unpack(ints, floats)
    nb, nv = tree_bi.shape[0], out.shape[1]
    rot, pos = np.empty((nb, 3, 3)), np.empty((nb, 3))
    S = np.empty((nv, 6))
    V, A = np.empty((nb, 6)), np.empty((nb, 6))
    m, tmp, vb = np.empty((3, 3)), np.empty((3, 3)), np.empty(6)
    anc = np.empty((tree_ji.shape[0], 3))
    zero, unit = np.zeros(nv), np.zeros(nv)
    col = np.empty((nv, out.shape[3]))
    for n in range(q.shape[0]):
        _poses(tree_bi, tree_bf, tree_ji, tree_jf, q[n], rot, pos, S, m, tmp, anc)
        for k in range(nv):
            unit[k] = 1.0
            _motion(tree_bi, tree_ji, S, zero, unit, 0.0, 0.0, 0.0, V, A, vb)
            col[:, :] = 0.0
            _project(tree_bi, tree_ji, rot, pos, S, V, A, body_col, col)
            _terms(terms, zero, unit, col)
            for d in range(nv):
                for c in range(col.shape[1]):
                    out[n, d, k, c] = col[d, c]
            unit[k] = 0.0


@_jit
def _velocity_and_s_dot(tree_bi, tree_ji, S, dq, V, Sd, vb) -> None:
    """Body velocities ``V (nb, 6)`` and each dof's own ``Ṡ`` in ``Sd (nv, 6)``.

    ``Ṡ = V_before × S``; a ball/free joint's rotational dofs are axes fixed in the child body, so
    they also turn with the joint's own rotation: ``Ṡ_i = (V_before + Σ_k S_k q̇_k) × S_i``
    (free-joint translations are world-fixed: ``Ṡ = 0``). Projected one dof at a time,
    ``Ṡᵀ h`` is ``Cᵀ q̇`` (with weights q̇ the extra term is ω × ω = 0, which accelerations use).
    """
    for b in range(tree_bi.shape[0]):
        par = tree_bi[b, 0]
        for i in range(6):
            V[b, i] = 0.0 if par < 0 else V[par, i]
        first = tree_bi[b, 1]
        for j in range(first, first + tree_bi[b, 2]):
            typ, d = tree_ji[j, 0], tree_ji[j, 2]
            start, count = d, 1
            if typ == FREE:
                for i in range(3):
                    for k in range(6):
                        Sd[d + i, k] = 0.0
                    V[b, 3 + i] += dq[d + i]
                start, count = d + 3, 3
            elif typ == BALL:
                count = 3
            for i in range(6):
                vb[i] = V[b, i]
            if typ == BALL or typ == FREE:
                for dd in range(start, start + count):
                    for i in range(6):
                        vb[i] += S[dd, i] * dq[dd]
            for dd in range(start, start + count):
                u0, u1, u2, t0, t1, t2 = S[dd, 0], S[dd, 1], S[dd, 2], S[dd, 3], S[dd, 4], S[dd, 5]
                Sd[dd, 0] = vb[1] * u2 - vb[2] * u1
                Sd[dd, 1] = vb[2] * u0 - vb[0] * u2
                Sd[dd, 2] = vb[0] * u1 - vb[1] * u0
                Sd[dd, 3] = vb[1] * t2 - vb[2] * t1 + vb[4] * u2 - vb[5] * u1
                Sd[dd, 4] = vb[2] * t0 - vb[0] * t2 + vb[5] * u0 - vb[3] * u2
                Sd[dd, 5] = vb[0] * t1 - vb[1] * t0 + vb[3] * u1 - vb[4] * u0
                for i in range(6):
                    V[b, i] += S[dd, i] * dq[dd]


@_jit
def momentum_columns(ints, floats, friction, q, dq, yp, yc, yg, yf) -> None:
    """Momentum-equation regressors ``yp, yc, yg, yf (N, nv, width)`` (zeroed by the caller) of
    ``q (N, nq)``, ``dq (N, nv)``: ``p = M q̇``, ``Cᵀ q̇``, ``g(q)``, friction and offset.

    A body's momentum ``[Ī ω + h × v; m v + ω × h]`` is its wrench regressor with ``ω → 0``,
    ``ω̇ → ω``, ``a → v``, i.e. :func:`_project` with ``V = 0`` and ``A = V``; projected on ``S``
    it gives ``p``, on the dofs' own ``Ṡ`` it gives ``Cᵀ q̇``. The plan's terms are the Ia
    columns, ``friction (T, 3)`` the Fc/Fv/Fo columns.
    """
    tree_bi, tree_bf, tree_ji, tree_jf, gravity, body_col, armature = _unpack(ints, floats)
    nb, nv = tree_bi.shape[0], dq.shape[1]
    rot, pos = np.empty((nb, 3, 3)), np.empty((nb, 3))
    S, Sd = np.empty((nv, 6)), np.empty((nv, 6))
    V, Z, G = np.empty((nb, 6)), np.zeros((nb, 6)), np.zeros((nb, 6))
    for b in range(nb):
        G[b, 3], G[b, 4], G[b, 5] = -gravity[0], -gravity[1], -gravity[2]
    m, tmp, vb = np.empty((3, 3)), np.empty((3, 3)), np.empty(6)
    anc = np.empty((tree_ji.shape[0], 3))
    zero = np.zeros(nv)
    for n in range(q.shape[0]):
        _poses(tree_bi, tree_bf, tree_ji, tree_jf, q[n], rot, pos, S, m, tmp, anc)
        _velocity_and_s_dot(tree_bi, tree_ji, S, dq[n], V, Sd, vb)
        _project(tree_bi, tree_ji, rot, pos, S, Z, V, body_col, yp[n])
        _project(tree_bi, tree_ji, rot, pos, Sd, Z, V, body_col, yc[n])
        _project(tree_bi, tree_ji, rot, pos, S, Z, G, body_col, yg[n])
        _terms(armature, zero, dq[n], yp[n])
        _terms(friction, dq[n], zero, yf[n])


def compile_kernels() -> None:
    """Compile (or load from the on-disk cache) the kernels for the argument types the
    regressors pass, on a one-hinge tree: a process that calls this first (the test session, a
    node at start-up) does not pay the first compilation (seconds) inside a timed section."""
    tree = KernelTree(np.array([[-1, 0, 1]], dtype=np.int64),
                      np.array([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]]),
                      np.array([[HINGE, 0, 0]], dtype=np.int64),
                      np.array([[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]]), np.array([0.0, 0.0, -9.81]))
    terms = np.array([[0, 10, TERM_CODE["Ia"]]], dtype=np.int64)
    p = plan(tree, tree.body_columns((1,)), terms)
    q = np.zeros((1, 1))
    torque_columns(*p, q, q.copy(), q.copy(), np.zeros((1, 1, 11)))
    mass_matrix_columns(*p, q, np.zeros((1, 1, 1, 11)))
    momentum_columns(*p, terms[:0], q, q.copy(), *(np.zeros((1, 1, 11)) for _ in range(4)))
