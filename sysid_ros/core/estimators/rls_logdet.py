"""RLS with log-determinant divergence regularisation (Cho, Lee & Shin, ICRA 2024; online seed;
``docs/rls-logdet.md`` §2–3).

Objective after ``k`` samples::

    J_k(θ) = ½ Σ_i λ^{k−i} (y_i − A_i θ)ᵀ W (y_i − A_i θ)
             + α [Σ_b D(J(φ_b) ‖ J(φ_b⁰)) + (β/2) ‖ψ − ψ⁰‖²]

kept in information form ``Ω_k = λ Ω_{k−1} + Aᵀ W A``, ``b_k = λ b_{k−1} + Aᵀ W y`` (exact for any
λ). Each sample runs Newton on ``Ω θ − b + α ∇R(θ) = 0`` warm-started at the previous estimate:
per body ``∂D/∂θ_n = tr(J₀⁻¹Eₙ) − tr(J⁻¹Eₙ)``, ``H_mn = tr(J⁻¹E_m J⁻¹Eₙ)``; steps are cut by a
fraction-to-boundary rule so that every pseudo-inertia stays positive definite after every update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..consistency import PSEUDO_INERTIA_BASIS, pseudo_inertia
from ..errors import DataError, SysIdError

_E16 = PSEUDO_INERTIA_BASIS.reshape(10, 16)


@dataclass(frozen=True)
class LogDetStep:
    """Diagnostics of one update (the eigenvalues are computed when first read)."""

    iterations: int
    decrement: float  # Newton decrement λ²/2 at exit
    pseudo_inertias: np.ndarray  # (B, 4, 4) J per body after the update
    step_cut: bool  # a fraction-to-boundary cut happened

    @cached_property
    def min_eigenvalues(self) -> np.ndarray:
        """Smallest eigenvalue of J per body after the update (> 0: consistent)."""
        return np.linalg.eigvalsh(self.pseudo_inertias)[:, 0]


class RLSLogDet:
    """Online estimator of ``p`` parameters; ``blocks``: slices of 10-parameter bodies.

    ``alpha``: regularisation strength; ``beta``: weight of the quadratic term for parameters
    outside the bodies (friction, rotor inertia); ``weight``: scalar or per-row weight W;
    ``forgetting`` λ; ``max_iter``/``tol``: Newton bounds (stop when the Newton decrement λ²/2 is below
    ``tol`` relative to the data term); ``fraction``: of the distance to the boundary a step may go.
    """

    def __init__(self, prior: np.ndarray, blocks: Sequence[slice], *, alpha: float = 0.1,
                 beta: float = 1e-3, weight: float | np.ndarray = 1.0, forgetting: float = 1.0,
                 max_iter: int = 10, tol: float = 1e-9, fraction: float = 0.99) -> None:
        prior = np.asarray(prior, dtype=float)
        self.prior = prior.copy()
        self.blocks = tuple(blocks)
        self.alpha, self.beta, self.weight = float(alpha), float(beta), weight
        if not 0.0 < forgetting <= 1.0:
            raise DataError(f"the forgetting factor must be in (0, 1], got {forgetting}")
        self.forgetting = float(forgetting)
        self.max_iter, self.tol, self.fraction = int(max_iter), float(tol), float(fraction)
        p = prior.shape[0]
        self._body_idx = np.array([np.arange(sl.start, sl.stop) for sl in self.blocks], dtype=int)
        covered = np.zeros(p, dtype=bool)
        covered[self._body_idx.ravel()] = True
        self._rest = np.flatnonzero(~covered)
        # flat positions of every body's 10×10 Hessian block in the p×p Hessian
        self._block_flat = np.concatenate([(idx[:, None] * p + idx[None, :]).ravel()
                                           for idx in self._body_idx]) if len(self.blocks) else \
            np.zeros(0, dtype=int)
        j0 = pseudo_inertia(prior[self._body_idx])
        if np.any(np.linalg.eigvalsh(j0)[:, 0] <= 0):
            raise SysIdError("the prior is not physically consistent (a pseudo-inertia is not ≻ 0)")
        self._j0_inv = np.linalg.inv(j0)
        self._grad0 = np.einsum("nk,bk->bn", _E16, self._j0_inv.reshape(-1, 16))  # tr(J0⁻¹ E_n)
        self.reset()

    def reset(self, prior: np.ndarray | None = None) -> None:
        """Forget all data; restart from ``prior`` (default: the current prior)."""
        if prior is not None:
            self.__init__(prior, self.blocks, alpha=self.alpha, beta=self.beta, weight=self.weight,
                          forgetting=self.forgetting, max_iter=self.max_iter, tol=self.tol,
                          fraction=self.fraction)
            return
        p = self.prior.shape[0]
        self.omega = np.zeros((p, p))
        self.b = np.zeros(p)
        self.theta = self.prior.copy()
        self._theta_chol = self._chol(self.theta)
        self.samples = 0

    # ------------------------------------------------------------------ regulariser pieces
    def _pseudo(self, theta: np.ndarray) -> np.ndarray:
        """Pseudo-inertias ``(B, 4, 4)`` of the bodies of ``theta``."""
        return (theta[self._body_idx] @ _E16).reshape(-1, 4, 4)

    def _chol(self, theta: np.ndarray) -> np.ndarray | None:
        """Cholesky factors ``(B, 4, 4)`` of every J, or None if one is not ≻ 0."""
        try:
            return np.linalg.cholesky(self._pseudo(theta))
        except np.linalg.LinAlgError:
            return None

    def _grad_hess(self, theta: np.ndarray, l_inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and Hessian of α⁻¹·R at θ, with ``l_inv = L⁻¹`` of every body's J."""
        j_inv = np.swapaxes(l_inv, 1, 2) @ l_inv  # J⁻¹ = L⁻ᵀ L⁻¹
        g = np.zeros(theta.shape[0])
        g[self._body_idx] = self._grad0 - j_inv.reshape(-1, 16) @ _E16.T
        # H_mn = tr(P E_m P E_n) = vec(E_m)ᵀ (P ⊗ P) vec(E_n)
        kron = (j_inv[:, :, None, :, None] * j_inv[:, None, :, None, :]).reshape(-1, 16, 16)
        h = np.zeros((theta.shape[0], theta.shape[0]))
        h.reshape(-1)[self._block_flat] = (_E16 @ kron @ _E16.T).reshape(-1)
        if self._rest.size:
            g[self._rest] = self.beta * (theta[self._rest] - self.prior[self._rest])
            h[self._rest, self._rest] = self.beta
        return g, h

    def _step_length(self, theta: np.ndarray, delta: np.ndarray, l_inv: np.ndarray) -> float:
        """min(1, fraction·s_max) with s_max the largest s keeping every J(θ + s δ) ⪰ 0."""
        if self._chol(theta + delta / self.fraction) is not None:
            return 1.0  # the full step stays well inside: no eigenvalues needed
        m = l_inv @ self._pseudo(delta) @ np.swapaxes(l_inv, 1, 2)  # L⁻¹ J(δ) L⁻ᵀ
        worst = float(np.max(np.linalg.eigvalsh(-m)[:, -1]))
        return 1.0 if worst <= 0 else min(1.0, self.fraction / worst)

    # ------------------------------------------------------------------------------- update
    def update(self, a: np.ndarray, y: np.ndarray) -> LogDetStep:
        """Fold in rows ``a (m, p)``, ``y (m,)`` and move θ to the new minimiser."""
        a = np.asarray(a, dtype=float)
        y = np.asarray(y, dtype=float)
        if a.ndim == 1:
            a, y = a[None], np.atleast_1d(y)
        if not (np.isfinite(a).all() and np.isfinite(y).all()):
            raise DataError("non-finite regressor row or output: sample rejected")
        if np.abs(a).max() > 1e12 or np.abs(y).max() > 1e12:
            raise DataError(f"implausible regressor row (max |A| = {np.abs(a).max():.3g}, "
                            f"max |y| = {np.abs(y).max():.3g}): sample rejected")
        aw = a.T * self.weight if np.ndim(self.weight) == 0 else a.T * np.asarray(self.weight)
        if self.forgetting < 1.0:
            self.omega *= self.forgetting
            self.b *= self.forgetting
        self.omega += aw @ a
        self.b += aw @ y
        self.samples += 1
        theta = self.theta
        chol = self._theta_chol
        if chol is None:  # cannot happen after a successful update; be safe after a reset
            raise SysIdError("the current estimate left the physically consistent set")
        cut = False
        decrement = np.inf
        iterations = 0
        while iterations < self.max_iter:
            iterations += 1
            l_inv = np.linalg.inv(chol)
            g_r, h_r = self._grad_hess(theta, l_inv)
            grad = self.omega @ theta - self.b + self.alpha * g_r
            hess = self.omega + self.alpha * h_r
            try:
                delta = -np.linalg.solve(hess, grad)
            except np.linalg.LinAlgError:  # numerically singular: minimum-norm step
                delta = -np.linalg.lstsq(hess, grad, rcond=None)[0]
            decrement = float(-grad @ delta) / 2.0
            step = self._step_length(theta, delta, l_inv)
            cut |= step < 1.0
            candidate = theta + step * delta
            new_chol = self._chol(candidate)
            while new_chol is None:  # numerical safety: halve until strictly inside
                step *= 0.5
                cut = True
                candidate = theta + step * delta
                new_chol = self._chol(candidate)
            theta, chol = candidate, new_chol
            if decrement <= self.tol * max(1.0, abs(float(self.b @ theta))):
                break
        self.theta, self._theta_chol = theta, chol
        return LogDetStep(iterations, decrement, self._pseudo(theta), cut)

    def divergence_to(self, reference: np.ndarray) -> float:
        """Σ_b D(J(φ̂_b) ‖ J(φ_b^ref)) of the current estimate from ``reference`` parameters."""
        from ..consistency import logdet_divergence

        return float(sum(logdet_divergence(self.theta[idx], np.asarray(reference)[idx])
                         for idx in self._body_idx))
