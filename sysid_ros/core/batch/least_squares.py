"""Least squares on base parameters: OLS and Gautier's weighted LS (overview seed, constrained-IV
seed §II-D): ``β̂ = (XᵀWX)⁻¹ XᵀW y`` with per-joint weights ``W = diag(1/σ_j²)``, ``σ_j`` from the
OLS residuals of joint j."""

from __future__ import annotations

import time

import mujoco
import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.errors import DataError, IdentificationError
from sysid_ros.core.model.base_params import BaseParameters
from sysid_ros.core.result import IdentificationResult, diagnostics_for


def regression_rows(y: np.ndarray, tau: np.ndarray, mask: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stack a regressor ``Y (N, nv, c)`` and torques ``τ (N, nv)`` into rows ``(m, c)``, ``(m,)``.

    ``mask (N, nv)`` selects rows (e.g. joints moving fast enough for a Coulomb model). Returns
    ``(W, y, joint_of_row)``. Raises :class:`DataError` on shape mismatch or non-finite values.
    """
    y, tau = np.asarray(y), np.asarray(tau, dtype=float)
    if y.ndim != 3 or tau.shape != y.shape[:2]:
        raise DataError("expected Y (N, nv, c) and tau (N, nv) with matching N, nv; "
                        f"got {y.shape}, {tau.shape}")
    if mask is None:
        mask = np.ones(tau.shape, dtype=bool)
    if mask.shape != tau.shape:
        raise DataError(f"expected a row mask of shape {tau.shape}, got {mask.shape}")
    bad = ~np.isfinite(tau)
    if bad.any():
        k = int(np.argwhere(bad)[0, 0])
        raise DataError(f"torque sample {k} is not finite: {tau[k].tolist()}")
    joint = np.broadcast_to(np.arange(tau.shape[1]), tau.shape)
    return y[mask], tau[mask], joint[mask]


#: a slide joint's rows are kept above this share of its top speed in the data (``min_speed`` is
#: in rad/s, which says nothing of a joint that moves in m/s)
SLIDE_SPEED_SHARE = 0.1


def coulomb_rows(model, dq: np.ndarray, min_speed: float) -> np.ndarray:
    """Rows ``(N, nv)`` to regress: all, or — when ``model`` identifies a Coulomb term — only those
    of joints faster than ``min_speed`` [rad/s] (the sign model fails near zero speed). A slide
    (prismatic) joint's threshold is the smaller of ``min_speed`` and :data:`SLIDE_SPEED_SHARE` of
    its top speed in ``dq`` [m/s]: a quill that never reaches 0.05 m/s kept only its rows in one
    direction, where sign(q̇)·Fc and the quill's weight are the same column (issue 22, scara4)."""
    if "Fc" in model.joint_terms and min_speed > 0:
        dq = np.asarray(dq, dtype=float)
        threshold = np.full(dq.shape[-1], float(min_speed))
        slide = _slide_dofs(model)
        if slide.any() and dq.size:
            top = np.max(np.abs(dq), axis=0)
            threshold[slide] = np.minimum(threshold[slide], SLIDE_SPEED_SHARE * top[slide])
        return np.abs(dq) >= threshold
    return np.ones(np.shape(dq), dtype=bool)


def _slide_dofs(model) -> np.ndarray:
    """``(nv,)`` bool: the model's degrees of freedom on slide joints."""
    mj = model.mj
    return np.array([int(mj.jnt_type[int(mj.dof_jntid[d])]) == int(mujoco.mjtJoint.mjJNT_SLIDE)
                     for d in range(mj.nv)], dtype=bool)


#: singular values of the column-scaled regressor below this fraction of the largest count as zero
RANK_TOLERANCE = 1e-9


def solve_weighted(w: np.ndarray, rhs: np.ndarray, weights: np.ndarray | None = None,
                   names: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """``(β, covariance)`` of ``min Σ weights·(w β − rhs)²``; covariance ``σ² (WᵀW)⁻¹``-style.

    Combinations of the parameters that the rows cannot see (e.g. the Coulomb friction and the
    offset of a joint that turned one way only) get the minimum-norm solution of the scaled
    problem and an infinite standard deviation for every parameter in them
    (:func:`inseparable` names them); more than a tenth of the parameters unseen is an
    :class:`IdentificationError` (the excitation is too poor).
    """
    m, r = w.shape
    if m <= r:
        raise IdentificationError(f"{m} regression rows for {r} base parameters: need more data")
    sw = np.ones(m) if weights is None else np.sqrt(weights)
    a, b = w * sw[:, None], rhs * sw
    norms = np.linalg.norm(a, axis=0)
    scale = np.where(norms > 0, norms, 1.0)
    u, sv, vt = rla.svd(a / scale)
    keep = sv > RANK_TOLERANCE * sv[0]
    rank = int(keep.sum())
    if r - rank > max(1, r // 10):
        raise IdentificationError(
            f"the regressor has rank {rank} < {r} base parameters (condition {sv[0] / sv[-1]:.3g}): "
            "the excitation is too poor" + (f"; unseen: {inseparable(w, names)}" if names else ""))
    inv_sv = np.where(keep, 1.0 / np.where(keep, sv, 1.0), 0.0)
    beta = (vt.T @ (inv_sv * (u.T @ b))) / scale
    resid = b - a @ beta
    sigma2 = float(resid @ resid) / (m - rank) if weights is None else 1.0
    cov = (vt.T * inv_sv**2) @ vt * sigma2 / np.outer(scale, scale)
    if rank < r:  # every parameter in an unseen combination: unknown
        unseen = np.any(np.abs(vt[~keep]) > 1e-6, axis=0)
        cov[unseen, :] = cov[:, unseen] = 0.0
        cov[unseen, unseen] = np.inf
    return beta, cov


def inseparable(w: np.ndarray, names: tuple[str, ...], *, tolerance: float = RANK_TOLERANCE
                ) -> list[str]:
    """The combinations of parameters ``names`` that the rows ``w (m, r)`` cannot determine, one
    string each (``"a.Fc - a.Fo"``: only what is orthogonal to it is seen; a single name: a
    parameter the rows never excite), from the null space of the column-scaled rows."""
    norms = np.linalg.norm(w, axis=0)
    scale = np.where(norms > 0, norms, 1.0)
    _, sv, vt = rla.svd(w / scale)
    out = []
    for v in vt[sv <= tolerance * sv[0]]:
        v = v / scale
        v = v / np.max(np.abs(v))
        terms = [(c, names[i]) for i, c in enumerate(v) if abs(c) > 1e-3]
        out.append(" ".join(f"{'-' if c < 0 else '+'} {abs(c):.3g}·{n}" if abs(abs(c) - 1) > 1e-3
                            else f"{'-' if c < 0 else '+'} {n}" for c, n in terms).lstrip("+ "))
    return out


def joint_variances(resid: np.ndarray, joint: np.ndarray, n_joints: int, dof: int) -> np.ndarray:
    """Per-joint residual variances ``σ_j²`` (Gautier), each with its share of the fit's dof."""
    out = np.ones(n_joints)
    for j in range(n_joints):
        sel = joint == j
        m_j = int(sel.sum())
        if m_j:
            out[j] = max(float(resid[sel] @ resid[sel]) / max(m_j - dof / n_joints, 1.0), 1e-300)
    return out


def ols(y: np.ndarray, tau: np.ndarray, base: BaseParameters, *,
        mask: np.ndarray | None = None, joint_names: tuple[str, ...] = ()) -> IdentificationResult:
    """Least squares for the base parameters from a full regressor ``Y (N, nv, p)``.

    Standard deviations from ``σ² (WᵀW)⁻¹`` with ``σ² = ‖y − Wβ̂‖² / (m − r)``.
    """
    start = time.perf_counter()
    w, rhs, joint = regression_rows(base.columns(y), tau, mask)
    beta, cov = solve_weighted(w, rhs, names=base.names)
    diag = diagnostics_for(w, rhs, joint, beta, n_joints=tau.shape[1], n_samples=tau.shape[0],
                           solve_time=time.perf_counter() - start)
    return IdentificationResult("ols", base, beta, np.sqrt(np.diag(cov)), diag, joint_names=joint_names)


def wls(y: np.ndarray, tau: np.ndarray, base: BaseParameters, *,
        mask: np.ndarray | None = None, joint_names: tuple[str, ...] = ()) -> IdentificationResult:
    """Gautier's weighted least squares: OLS, per-joint σ_j from its residuals, then WLS."""
    start = time.perf_counter()
    w, rhs, joint = regression_rows(base.columns(y), tau, mask)
    beta0, _ = solve_weighted(w, rhs, names=base.names)
    var = joint_variances(rhs - w @ beta0, joint, tau.shape[1], base.rank)
    beta, cov = solve_weighted(w, rhs, 1.0 / var[joint], names=base.names)
    diag = diagnostics_for(w, rhs, joint, beta, n_joints=tau.shape[1], n_samples=tau.shape[0],
                           solve_time=time.perf_counter() - start,
                           extra={"joint_sigma": np.sqrt(var).tolist()})
    return IdentificationResult("wls", base, beta, np.sqrt(np.diag(cov)), diag, joint_names=joint_names)
