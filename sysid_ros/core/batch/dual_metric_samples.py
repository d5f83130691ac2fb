"""The samples of the dual-metric program: every sample, its unusable joints marginalised.

The dual metric weighs a sample's torque residual r_k (n,) by the inverse mass matrix,
r_kᵀ M_k⁻¹ r_k (dual-metric seed eq. 28), which couples the joints. A joint whose row is unusable at
a sample (slower than ``min_speed`` while its Coulomb friction is identified: sign(q̇) is noise
there, ``Prepared.mask``) cannot simply lose its row, and dropping the whole sample (as this
project first did) throws away most of a log where one joint rests or barely moves. Instead the
unusable residuals are left free: minimising r_kᵀ M_k⁻¹ r_k over the free components gives
r_Sᵀ (M_k,SS)⁻¹ r_S, the dual metric of the usable joints S (the Schur complement of M⁻¹ is the
inverse of M's block). The same holds with the free rows of r_k set to 0 and M_k's free rows and
columns replaced by the prior's diagonal (a constant: M_k stays affine in θ and the sample's term
separates into S and a zero), which is what :func:`marginalised` returns.
"""

from __future__ import annotations

import numpy as np

__all__ = ["marginalised", "spread"]


def spread(n_samples: int, limit: int) -> np.ndarray:
    """Indices of at most ``limit`` of ``n_samples`` samples, evenly spread (all if fewer)."""
    if n_samples <= limit:
        return np.arange(n_samples)
    return np.unique(np.linspace(0, n_samples - 1, limit).round().astype(int))


def marginalised(x: np.ndarray, y: np.ndarray, ym: np.ndarray, m_known: np.ndarray, mask: np.ndarray,
                 prior: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, ym, m_known, keep)`` with each sample's unusable joints marginalised (see the
    module's docstring): ``x (K, n, p)`` regressor, ``y (K, n)`` torque, ``ym (K, n, n, p)`` and
    ``m_known (K, n, n)`` the mass matrix's regressor and known part, ``mask (K, n)`` usable
    rows, ``prior (p,)`` the parameters whose mass-matrix diagonal stands in for the free joints.
    ``keep (K,)``: samples with at least one usable joint (the returned arrays hold only those)."""
    keep = mask.any(axis=1)
    x, y, ym, m_known, mask = (a[keep].copy() for a in (x, y, ym, m_known, mask))
    free = ~mask
    if free.any():
        diag = np.einsum("kiip,p->ki", ym, prior) + np.einsum("kii->ki", m_known)
        k_idx, j_idx = np.nonzero(free)
        x[k_idx, j_idx] = 0.0
        y[k_idx, j_idx] = 0.0
        ym[k_idx, j_idx] = 0.0
        ym[k_idx, :, j_idx] = 0.0
        m_known[k_idx, j_idx] = 0.0
        m_known[k_idx, :, j_idx] = 0.0
        m_known[k_idx, j_idx, j_idx] = np.abs(diag[k_idx, j_idx]) + 1e-12
    return x, y, ym, m_known, keep
