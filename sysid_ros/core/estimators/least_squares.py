"""Ordinary least squares on base parameters (overview seed: τ = W β, β̂ = W⁺ τ)."""

from __future__ import annotations

import time

import numpy as np

from ..base_params import BaseParameters
from ..errors import DataError, IdentificationError
from ..result import Diagnostics, IdentificationResult


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


def ols(y: np.ndarray, tau: np.ndarray, base: BaseParameters, *,
        mask: np.ndarray | None = None, joint_names: tuple[str, ...] = ()) -> IdentificationResult:
    """Least squares for the base parameters from a full regressor ``Y (N, nv, p)``.

    Standard deviations from ``σ² (WᵀW)⁻¹`` with ``σ² = ‖y − Wβ̂‖² / (m − r)``. Raises
    :class:`IdentificationError` when the data do not excite every base parameter.
    """
    start = time.perf_counter()
    w, rhs, joint = regression_rows(base.columns(y), tau, mask)
    m, r = w.shape
    if m <= r:
        raise IdentificationError(f"{m} regression rows for {r} base parameters: need more data")
    scale = np.linalg.norm(w, axis=0)
    if np.any(scale == 0):
        dead = [base.names[i] for i in np.flatnonzero(scale == 0)]
        raise IdentificationError(f"the data do not excite base parameters {dead}")
    ws = w / scale
    sol, _, rank, sv = np.linalg.lstsq(ws, rhs, rcond=None)
    if rank < r:
        raise IdentificationError(
            f"the regressor has rank {rank} < {r} base parameters (condition {sv[0] / sv[-1]:.3g}): "
            "the excitation is too poor")
    beta = sol / scale
    resid = rhs - w @ beta
    sigma2 = float(resid @ resid) / (m - r)
    cov_s = np.linalg.inv(ws.T @ ws) * sigma2
    beta_std = np.sqrt(np.diag(cov_s)) / scale
    nv = tau.shape[1]
    rms = np.array([np.sqrt(np.mean(resid[joint == j] ** 2)) if np.any(joint == j) else np.nan
                    for j in range(nv)])
    diag = Diagnostics(
        rank=int(rank), condition_number=float(sv[0] / sv[-1]), residual_rms=rms,
        relative_error=float(100.0 * np.linalg.norm(resid) / np.linalg.norm(rhs)),
        n_samples=int(tau.shape[0]), n_rows=int(m), solve_time=time.perf_counter() - start)
    return IdentificationResult("ols", base, beta, beta_std, diag, joint_names=joint_names)
