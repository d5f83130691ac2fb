"""Batched 3-D / spatial-vector helpers (numpy, any leading batch shape).

Spatial motion vectors are ``[angular(3), linear(3)]``; when expressed in the world frame they
refer to the world origin (Featherstone's convention, as MuJoCo's ``cdof``/``cvel`` do about a
different point).
"""

from __future__ import annotations

import numpy as np


def skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrices: ``skew(v) @ x == cross(v, x)``. ``(..., 3) -> (..., 3, 3)``."""
    v = np.asarray(v, dtype=float)
    out = np.zeros((*v.shape, 3))
    out[..., 0, 1] = -v[..., 2]
    out[..., 0, 2] = v[..., 1]
    out[..., 1, 0] = v[..., 2]
    out[..., 1, 2] = -v[..., 0]
    out[..., 2, 0] = -v[..., 1]
    out[..., 2, 1] = v[..., 0]
    return out


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product over the last axis, broadcasting; faster than ``np.cross`` for small batches."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    """Rotation matrices from quaternions ``[w, x, y, z]`` (normalised here). ``(..., 4) -> (..., 3, 3)``."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    out = np.empty((*q.shape[:-1], 3, 3))
    out[..., 0, 0] = 1 - 2 * (y * y + z * z)
    out[..., 0, 1] = 2 * (x * y - w * z)
    out[..., 0, 2] = 2 * (x * z + w * y)
    out[..., 1, 0] = 2 * (x * y + w * z)
    out[..., 1, 1] = 1 - 2 * (x * x + z * z)
    out[..., 1, 2] = 2 * (y * z - w * x)
    out[..., 2, 0] = 2 * (x * z - w * y)
    out[..., 2, 1] = 2 * (y * z + w * x)
    out[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return out


def mat_to_quat(r: np.ndarray) -> np.ndarray:
    """Quaternion ``[w, x, y, z]`` (w >= 0) of one proper rotation matrix ``(3, 3)``."""
    r = np.asarray(r, dtype=float)
    tr = np.trace(r)
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = np.array([0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k])
        q = np.empty(4)
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def axis_angle_to_mat(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rodrigues: rotations by ``angle (...)`` about one unit ``axis (3,)``. Returns ``(..., 3, 3)``."""
    k = skew(axis)
    k2 = k @ k
    s = np.sin(angle)[..., None, None]
    c = np.cos(angle)[..., None, None]
    return np.eye(3) + s * k + (1.0 - c) * k2


def inertia_vec_to_mat(i6: np.ndarray) -> np.ndarray:
    """``[Ixx, Ixy, Ixz, Iyy, Iyz, Izz] (..., 6)`` to symmetric tensors ``(..., 3, 3)``."""
    i6 = np.asarray(i6, dtype=float)
    xx, xy, xz, yy, yz, zz = (i6[..., k] for k in range(6))
    return np.stack(
        (np.stack((xx, xy, xz), -1), np.stack((xy, yy, yz), -1), np.stack((xz, yz, zz), -1)), -2
    )


def inertia_mat_to_vec(i33: np.ndarray) -> np.ndarray:
    """Symmetric tensors ``(..., 3, 3)`` to ``[Ixx, Ixy, Ixz, Iyy, Iyz, Izz] (..., 6)``."""
    i33 = np.asarray(i33, dtype=float)
    return np.stack(
        (i33[..., 0, 0], i33[..., 0, 1], i33[..., 0, 2], i33[..., 1, 1], i33[..., 1, 2], i33[..., 2, 2]),
        axis=-1,
    )


def inertia_times(w: np.ndarray) -> np.ndarray:
    """Matrices ``L(w) (..., 3, 6)`` with ``L(w) @ [Ixx, Ixy, Ixz, Iyy, Iyz, Izz] == I @ w``."""
    w = np.asarray(w, dtype=float)
    out = np.zeros((*w.shape[:-1], 3, 6))
    wx, wy, wz = w[..., 0], w[..., 1], w[..., 2]
    out[..., 0, 0], out[..., 0, 1], out[..., 0, 2] = wx, wy, wz
    out[..., 1, 1], out[..., 1, 3], out[..., 1, 4] = wx, wy, wz
    out[..., 2, 2], out[..., 2, 4], out[..., 2, 5] = wx, wy, wz
    return out
