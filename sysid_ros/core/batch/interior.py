"""The unconstrained minimiser of the plausible fit's objective, by linear algebra alone.

:func:`~sysid_ros.core.batch.convex.least_squares_program` (no regulariser) minimises, in the
solver's scaled variables θ̃ (θ = scale ⊙ θ̃),

    f(θ̃) = ‖A θ̃ − c‖ + ρ ‖L (θ̃ − θ̃₀)‖²        (A (m, p), c (m,), L (q, p), ρ > 0)

over the consistent set (``‖L d‖² = TIE_BREAK·‖Nᵀd‖² + PRIOR_WEIGHT·‖w ⊙ d‖²``, its tie-break
and prior pull). f is convex, so its unconstrained minimiser, when it lies strictly inside every
constraint, is the program's optimum (KKT with all multipliers zero): no conic solver needed.

With d = θ̃ − θ̃₀, r₀ = c − A θ̃₀ and the residual e = A d − r₀, stationarity at s = ‖e‖ > 0 is
``Aᵀe/s + 2ρ LᵀL d = 0``: the normal equations of the ridge problem

    d(μ) = argmin ‖A d − r₀‖² + μ ‖L d‖²,   μ = 2ρs,

so the minimiser is d(2ρs*) at the root of the scalar equation ``‖e(s)‖ = s``. For L of full
column rank (L = Q R_L), y = R_L d and the SVD ``A R_L⁻¹ = U diag(σ) Vᵀ`` make it explicit,
with β = Uᵀr₀ and γ² = ‖r₀ − Uβ‖²:

    y(μ) = V diag(σ/(σ² + μ)) β,    ‖e(s)‖² = Σ_i (μ β_i/(σ_i² + μ))² + γ²,

and ``ψ(s) = ‖e(s)‖²/s² − 1`` decreases strictly in s, so its one root is found by bisection on
scalars (no further solve). At s → 0, ψ → Σ_i (2ρβ_i/σ_i²)² − 1 when the data are fitted exactly
(γ = 0 and no β on a zero σ): if that is ≤ 0 the optimum is the norm's kink e = 0 (s* → 0), the
exact fit closest to the prior in L's metric (the multiplier u of ``Aᵀu = −2ρ LᵀL d`` has
‖u‖ ≤ 1).

Without a prior pull (L = √TIE_BREAK·Nᵀ, N a basis of A's null space) the two terms decouple:
the least-squares fit without a component along N minimises both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from sysid_ros.core import linalg as rla

#: bisection steps on log s (each halves log(hi/lo): from 1e-300..1 to a ratio 1 + 1e-15 in 60)
BISECTION_STEPS = 80


@dataclass(frozen=True)
class InteriorCandidate:
    """The unconstrained minimiser of f: ``theta_scaled (p,)``, ``objective`` f(θ̃) and the
    residual norm ``residual`` = ‖A θ̃ − c‖ (s*; 0 at the kink of an exact fit)."""

    theta_scaled: np.ndarray
    objective: float
    residual: float


def unconstrained_minimiser(a: np.ndarray, c: np.ndarray, prior_scaled: np.ndarray, rho: float,
                            l_root: np.ndarray, null: np.ndarray) -> InteriorCandidate | None:
    """argmin_θ̃ ‖A θ̃ − c‖ + ρ ‖L (θ̃ − θ̃₀)‖² over all θ̃ (see the module's docstring).

    ``a (m, p)``, ``c (m,)``; ``prior_scaled`` θ̃₀ (p,); ``rho`` ρ > 0; ``l_root`` L (q, p) (q may
    be 0); ``null (p, k)`` an orthonormal basis of A's numerical null space. Returns None where
    this function cannot give the minimiser (L neither of full column rank nor confined to A's
    null space; non-finite figures); the caller then solves the program.
    """
    a, c = np.asarray(a, dtype=float), np.asarray(c, dtype=float)
    prior_scaled = np.asarray(prior_scaled, dtype=float)
    p = a.shape[1]
    l_root = np.asarray(l_root, dtype=float).reshape(-1, p)
    r0 = c - a @ prior_scaled
    r_l = np.linalg.qr(l_root, mode="r") if l_root.shape[0] >= p else None  # LᵀL = R_Lᵀ R_L
    pivots = np.abs(np.diag(r_l)) if r_l is not None else np.zeros(0)
    if r_l is None or pivots.min() <= 1e-12 * pivots.max():  # L is not of full column rank
        return _decoupled(a, r0, prior_scaled, rho, l_root, null)
    b = scipy.linalg.solve_triangular(r_l, a.T, trans="T").T  # A R_L⁻¹
    u, sigma, vt = rla.svd(b)
    beta = u.T @ r0
    gamma2 = float(np.sum((r0 - u @ beta) ** 2))  # residual outside A's range, whatever d
    sig2 = sigma**2

    def psi(s: float) -> float:
        """‖e(s)‖²/s² − 1 (strictly decreasing in s > 0)."""
        return float(np.sum((2.0 * rho * beta / (sig2 + 2.0 * rho * s)) ** 2)) + gamma2 / s**2 - 1.0

    # bracket: ‖e‖ ≥ γ, so ψ(γ) ≥ 0; ‖e‖ ≤ ‖r₀‖ (d = 0 is a candidate), so ψ(‖r₀‖) ≤ 0. An exact
    # fit with ‖u‖ < 1 has ψ < 0 down to s → 0: the bisection ends at the lower end, the kink
    lo = max(np.sqrt(gamma2), 1e-300)
    hi = max(float(np.linalg.norm(r0)), lo)
    for _ in range(BISECTION_STEPS):
        if hi <= lo * (1.0 + 1e-15):
            break
        mid = np.sqrt(lo * hi)
        if psi(mid) >= 0.0:
            lo = mid
        else:
            hi = mid
    mu = 2.0 * rho * 0.5 * (lo + hi)
    y = vt.T @ (sigma / (sig2 + mu) * beta)
    d = scipy.linalg.solve_triangular(r_l, y)
    return _candidate(d, prior_scaled, a, r0, rho, l_root)


def _decoupled(a: np.ndarray, r0: np.ndarray, prior_scaled: np.ndarray, rho: float,
               l_root: np.ndarray, null: np.ndarray) -> InteriorCandidate | None:
    """The minimiser when L acts on A's null space only (tie-break without prior pull): the
    least-squares fit with no component along N; None when L is not so confined."""
    d = rla.lstsq(a, r0)
    if null.shape[1]:
        d = d - null @ (null.T @ d)
    if l_root.size and float(np.linalg.norm(l_root @ d)) > 1e-12 * float(np.linalg.norm(l_root)) * max(
            float(np.linalg.norm(d)), 1e-300):
        return None
    return _candidate(d, prior_scaled, a, r0, rho, l_root)


def _candidate(d: np.ndarray, prior_scaled: np.ndarray, a: np.ndarray, r0: np.ndarray, rho: float,
               l_root: np.ndarray) -> InteriorCandidate | None:
    if not np.all(np.isfinite(d)):
        return None
    residual = float(np.linalg.norm(a @ d - r0))
    objective = residual + rho * float(np.sum((l_root @ d) ** 2))
    return InteriorCandidate(prior_scaled + d, objective, residual)
