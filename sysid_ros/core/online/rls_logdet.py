"""RLS with log-determinant divergence regularisation (Cho, Lee & Shin, ICRA 2024;
the online-inertia seed).

Objective after ``k`` samples::

    J_k(θ) = ½ Σ_i λ^{k−i} (y_i − A_i θ)ᵀ W (y_i − A_i θ)
             + α [Σ_b D(J(φ_b) ‖ J(φ_b⁰)) + (β/2) ‖ψ − ψ⁰‖² + Σ_j β s_j² d(x_j ‖ s_j)]

with ``d(x ‖ s) = x/s − log(x/s) − 1`` the 1×1 log-det divergence for the joint terms ``x`` that
must stay ≥ 0 (Coulomb and viscous friction, rotor inertia; ``s``: their prior, floored above 0):
curvature β at the prior like the quadratic pull of the other terms ``ψ``, and a barrier at 0.

kept in information form ``Ω_k = λ Ω_{k−1} + Aᵀ W A``, ``b_k = λ b_{k−1} + Aᵀ W y`` (exact for any
λ). Each sample runs Newton on ``Ω θ − b + α ∇R(θ) = 0`` warm-started at the previous estimate:
per body ``∂D/∂θ_n = tr(J₀⁻¹Eₙ) − tr(J⁻¹Eₙ)``, ``H_mn = tr(J⁻¹E_m J⁻¹Eₙ)``; steps are cut by a
fraction-to-boundary rule so that every pseudo-inertia stays positive definite and every
non-negative joint term positive after every update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.consistency import PSEUDO_INERTIA_BASIS, pseudo_inertia

_E16 = PSEUDO_INERTIA_BASIS.reshape(10, 16)
#: every estimate keeps each pseudo-inertia ``J ≻ INTERIOR_MARGIN·tr(J)·1`` (relative, dimensionless)
INTERIOR_MARGIN = 1e-10
#: prior used for a non-negative joint term whose prior is ≤ 0 (the barrier needs s > 0), in the
#: term's units (N·m, N·m·s/rad, kg·m²)
JOINT_TERM_FLOOR = 1e-3


def _lapack():
    """SciPy's LAPACK bindings, imported on the first update (~0.25 s of CPU: not at a node's
    start)."""
    from scipy.linalg import lapack

    return lapack


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
        return rla.eigvalsh(self.pseudo_inertias)[:, 0]


class RLSLogDet:
    """Online estimator of ``p`` parameters; ``blocks``: slices of 10-parameter bodies.

    ``alpha``: regularisation strength; ``beta``: weight of the quadratic term for parameters
    outside the bodies (friction, rotor inertia; scalar or one per parameter of θ, only the entries
    outside the bodies used); ``nonnegative``: indices of θ outside the bodies that stay > 0 (their
    regulariser is β s² d(x ‖ s) about the prior s, floored at ``floor`` > 0; the estimate starts
    at the floored prior); ``block_weights``: a factor per body on its divergence;
    ``weight``: scalar or per-row weight W;
    ``forgetting`` λ; ``max_iter``/``tol``: Newton bounds (stop when the Newton decrement λ²/2 is below
    ``tol`` relative to the data term); ``fraction``: of the distance to the boundary a step may go.
    """

    def __init__(self, prior: np.ndarray, blocks: Sequence[slice], *, alpha: float = 0.1,
                 beta: float | np.ndarray = 1e-3, weight: float | np.ndarray = 1.0, forgetting: float = 1.0,
                 max_iter: int = 10, tol: float = 1e-9, fraction: float = 0.99,
                 block_weights: Sequence[float] | None = None, nonnegative: Sequence[int] = (),
                 floor: float = JOINT_TERM_FLOOR) -> None:
        prior = np.asarray(prior, dtype=float)
        self.prior = prior.copy()
        self.blocks = tuple(blocks)
        # per-body factor w_b on D_b (default 1): a body known to ~ε relative accuracy has
        # α·w_b ≈ 1/ε² in units of the weighted data term, D ≈ ½‖J₀^{-½} ΔJ J₀^{-½}‖²_F being
        # quadratic in the relative error
        self.block_weights = (np.ones(len(self.blocks)) if block_weights is None
                              else np.asarray(block_weights, dtype=float).copy())
        # f/α = data/α + Σ w_b(tr − log det) + quadratic terms is self-concordant when every w_b ≥ 1
        self._self_concordant = bool(np.all(self.block_weights >= 1.0))
        if self.block_weights.shape != (len(self.blocks),) or np.any(self.block_weights <= 0):
            raise SysIdError(f"block_weights must be {len(self.blocks)} positive numbers")
        self.alpha, self.weight = float(alpha), weight
        self.beta = float(beta) if np.ndim(beta) == 0 else np.asarray(beta, dtype=float).copy()
        if not 0.0 < forgetting <= 1.0:
            raise DataError(f"the forgetting factor must be in (0, 1], got {forgetting}")
        self.forgetting = float(forgetting)
        self.max_iter, self.tol, self.fraction = int(max_iter), float(tol), float(fraction)
        p = prior.shape[0]
        self._body_idx = np.array([np.arange(sl.start, sl.stop) for sl in self.blocks], dtype=int)
        covered = np.zeros(p, dtype=bool)
        covered[self._body_idx.ravel()] = True
        self.nonnegative = np.unique(np.asarray(nonnegative, dtype=int))
        if self.nonnegative.size and (self.nonnegative.min() < 0 or self.nonnegative.max() >= p
                                      or covered[self.nonnegative].any()):
            raise SysIdError(f"nonnegative must index parameters outside the bodies (0..{p - 1}), "
                             f"got {self.nonnegative.tolist()}")
        if not floor > 0:
            raise SysIdError(f"the floor of the non-negative terms must be > 0, got {floor}")
        self.floor = float(floor)
        positive = np.zeros(p, dtype=bool)
        positive[self.nonnegative] = True
        self._rest = np.flatnonzero(~covered & ~positive)  # quadratic pull
        self._pos = self.nonnegative  # barrier-divergence pull, kept > 0
        self._pos_prior = np.where(prior[self._pos] > 0, prior[self._pos], self.floor)
        self._start = prior.copy()
        self._start[self._pos] = self._pos_prior
        # flat positions of every body's 10×10 Hessian block in the p×p Hessian
        self._block_flat = np.concatenate([(idx[:, None] * p + idx[None, :]).ravel()
                                           for idx in self._body_idx]) if len(self.blocks) else \
            np.zeros(0, dtype=int)
        j0 = pseudo_inertia(prior[self._body_idx])
        if np.any(rla.eigvalsh(j0)[:, 0] <= 0):
            raise SysIdError("the prior is not physically consistent (a pseudo-inertia is not ≻ 0)")
        self._j0_inv = np.linalg.inv(j0)
        self._grad0 = np.einsum("nk,bk->bn", _E16, self._j0_inv.reshape(-1, 16))  # tr(J0⁻¹ E_n)
        self.reset()

    def reset(self, prior: np.ndarray | None = None) -> None:
        """Forget all data; restart from ``prior`` (default: the current prior)."""
        if prior is not None:
            self.__init__(prior, self.blocks, alpha=self.alpha, beta=self.beta, weight=self.weight,
                          forgetting=self.forgetting, max_iter=self.max_iter, tol=self.tol,
                          fraction=self.fraction, block_weights=self.block_weights,
                          nonnegative=self.nonnegative, floor=self.floor)
            return
        p = self.prior.shape[0]
        self.omega = np.zeros((p, p))
        self.b = np.zeros(p)
        self._anchor = (self.omega.copy(), self.b.copy())  # (Ω, b) θ is the minimiser for
        self.theta = self._start.copy()
        self._theta_chol = self._chol(self.theta)
        self._reg_at: tuple | None = None  # (θ, g, H) of α⁻¹R at the last θ it was computed for
        self._reference: tuple | None = None  # (θ_ref, log det J_ref, tr(J_ref⁻¹ E_n)) per body
        self.samples = 0

    def _beta(self, idx: np.ndarray) -> float | np.ndarray:
        """β of the parameters ``idx``."""
        return self.beta if np.ndim(self.beta) == 0 else np.asarray(self.beta)[idx]

    # ------------------------------------------------------------------ regulariser pieces
    def _pseudo(self, theta: np.ndarray) -> np.ndarray:
        """Pseudo-inertias ``(B, 4, 4)`` of the bodies of ``theta``."""
        return (theta[self._body_idx] @ _E16).reshape(-1, 4, 4)

    def _chol(self, theta: np.ndarray) -> np.ndarray | None:
        """Cholesky factors ``(B, 4, 4)`` of every J, or None if ``theta`` is outside the domain
        (a J not ≻ 0, or a non-negative joint term not > 0)."""
        if self._pos.size and not np.all(theta[self._pos] > 0):
            return None
        try:
            return np.linalg.cholesky(self._pseudo(theta))
        except np.linalg.LinAlgError:
            return None

    def _interior(self, theta: np.ndarray, chol: np.ndarray) -> bool:
        """Every ``J ≻ ε·tr(J)·1`` (``ε`` = :data:`INTERIOR_MARGIN`), given J's Cholesky factors. A
        Cholesky factorisation alone also succeeds for J with eigenvalues at round-off level
        (e.g. −1e-17), where the barrier's Hessian is meaningless and the divergence to any
        reference infinite. Quick test first: ``λ_min ≥ det J / λ_max³ ≥ det J / tr(J)³``."""
        trace = np.einsum("bij,bij->b", chol, chol)  # tr(J) = ‖L‖²_F
        det = np.prod(np.diagonal(chol, axis1=1, axis2=2), axis=1) ** 2
        if np.all(det > INTERIOR_MARGIN * trace**4):
            return True
        j = self._pseudo(theta)
        try:
            np.linalg.cholesky(j - INTERIOR_MARGIN * trace[:, None, None] * np.eye(4))
        except np.linalg.LinAlgError:
            return False
        return True

    def _grad_hess(self, theta: np.ndarray, l_inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and Hessian of α⁻¹·R at θ, with ``l_inv = L⁻¹`` of every body's J."""
        j_inv = np.swapaxes(l_inv, 1, 2) @ l_inv  # J⁻¹ = L⁻ᵀ L⁻¹
        g = np.zeros(theta.shape[0])
        wb = self.block_weights[:, None]
        g[self._body_idx] = wb * (self._grad0 - j_inv.reshape(-1, 16) @ _E16.T)
        # H_mn = tr(P E_m P E_n) = vec(E_m)ᵀ (P ⊗ P) vec(E_n)
        kron = (j_inv[:, :, None, :, None] * j_inv[:, None, :, None, :]).reshape(-1, 16, 16)
        h = np.zeros((theta.shape[0], theta.shape[0]))
        h.reshape(-1)[self._block_flat] = (wb[:, :, None] * (_E16 @ kron @ _E16.T)).reshape(-1)
        if self._rest.size:
            beta = self._beta(self._rest)
            g[self._rest] = beta * (theta[self._rest] - self.prior[self._rest])
            h[self._rest, self._rest] = beta
        if self._pos.size:  # β s² d(x‖s): gradient β s (1 − s/x), Hessian β s²/x²
            c, x = self._beta(self._pos) * self._pos_prior**2, theta[self._pos]
            g[self._pos] = c * (1.0 / self._pos_prior - 1.0 / x)
            h[self._pos, self._pos] = c / x**2
        return g, h

    def _regulariser(self, theta: np.ndarray, chol: np.ndarray) -> float:
        """α·R(θ) up to a constant: α[Σ_b w_b (tr(J₀⁻¹J_b) − log det J_b) + β/2‖ψ−ψ⁰‖²], with
        ``chol`` the Cholesky factors of θ's pseudo-inertias."""
        logdet = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        trace = np.einsum("bn,bn->b", self._grad0, theta[self._body_idx])
        reg = float(self.block_weights @ (trace - logdet))
        if self._rest.size:
            dev = theta[self._rest] - self.prior[self._rest]
            reg += 0.5 * float(np.sum(self._beta(self._rest) * dev**2))
        if self._pos.size:
            r = theta[self._pos] / self._pos_prior
            reg += float(np.sum(self._beta(self._pos) * self._pos_prior**2 * (r - np.log(r) - 1.0)))
        return self.alpha * reg

    def _objective(self, theta: np.ndarray, chol: np.ndarray) -> float:
        """J_k(θ) up to a constant (data term ½θᵀΩθ − bᵀθ plus :meth:`_regulariser`)."""
        data = 0.5 * float(theta @ self.omega @ theta) - float(self.b @ theta)
        return data + self._regulariser(theta, chol)

    def _step_length(self, theta: np.ndarray, delta: np.ndarray, l_inv: np.ndarray) -> float:
        """min(1, fraction·s_max) with s_max the largest s keeping every J(θ + s δ) ⪰ 0 and every
        non-negative joint term ≥ 0."""
        if self._chol(theta + delta / self.fraction) is not None:
            return 1.0  # the full step stays well inside: no eigenvalues needed
        m = l_inv @ self._pseudo(delta) @ np.swapaxes(l_inv, 1, 2)  # L⁻¹ J(δ) L⁻ᵀ
        worst = float(np.max(rla.eigvalsh(-m)[:, -1])) if len(self.blocks) else 0.0
        if self._pos.size:  # x + s δ ≥ 0 for s ≤ x/(−δ)
            worst = max(worst, float(np.max(-delta[self._pos] / theta[self._pos])))
        return 1.0 if worst <= 0 else min(1.0, self.fraction / worst)

    # ------------------------------------------------------------------------------- update
    def update(self, a: np.ndarray, y: np.ndarray, *, solve: bool = True) -> LogDetStep | None:
        """Fold in one sample's rows ``a (m, p)``, ``y (m,)`` and move θ to the new minimiser;
        ``solve=False``: only fold them in (Ω, b, the sample count; θ stays until the next solve,
        which minimises the objective of every row folded: the minimiser does not depend on how
        often it is sought). Returns the step's diagnostics (None without a solve). Rows
        :meth:`refusals` names raise :class:`DataError` and leave the state as it was."""
        a = np.asarray(a, dtype=float)
        y = np.asarray(y, dtype=float)
        if a.ndim == 1:
            a, y = a[None], np.atleast_1d(y)
        for _, why in self.refusals(a[None], y[None]):
            raise DataError(why)
        self.fold(a[None], y[None])
        return self.solve() if solve else None

    @staticmethod
    def refusals(a: np.ndarray, y: np.ndarray) -> list[tuple[int, str]]:
        """``(k, why)`` for each sample ``k`` of ``a (K, m, p)``, ``y (K, m)`` whose rows must not be
        folded in: a non-finite value, or an implausible magnitude (beyond 1e12)."""
        with np.errstate(invalid="ignore"):  # NaN compares False: caught as non-finite
            big_a, big_y = np.abs(a).max(axis=(1, 2), initial=0.0), np.abs(y).max(axis=1, initial=0.0)
            if np.all(big_a <= 1e12) and np.all(big_y <= 1e12):
                return []  # (every value finite and plausible: the common case, two reductions)
        finite = np.isfinite(big_a) & np.isfinite(big_y)
        return [(int(k), "non-finite regressor row or output: sample rejected" if not finite[k] else
                 f"implausible regressor row (max |A| = {big_a[k]:.3g}, max |y| = {big_y[k]:.3g}): "
                 "sample rejected")
                for k in np.flatnonzero(~finite | (big_a > 1e12) | (big_y > 1e12))]

    def fold(self, a: np.ndarray, y: np.ndarray) -> None:
        """Fold ``K`` consecutive samples' rows ``a (K, m, p)``, ``y (K, m)`` into the information at
        once: ``Ω ← λ^K Ω + Σ_k λ^{K−1−k} A_kᵀ W A_k`` (and ``b`` alike), exactly what ``K``
        one-sample folds give (forgetting per sample), in one product. θ stays (see :meth:`solve`).
        The rows must have passed :meth:`refusals`."""
        a = np.asarray(a, dtype=float)
        y = np.asarray(y, dtype=float)
        k, m, p = a.shape
        if not k:
            return
        scale = np.broadcast_to(np.asarray(self.weight, dtype=float), (m,))[None, :]
        if self.forgetting < 1.0:
            scale = scale * (self.forgetting ** np.arange(k - 1, -1, -1, dtype=float))[:, None]
            self.omega *= self.forgetting**k
            self.b *= self.forgetting**k
        flat = a.reshape(k * m, p)
        weighted = (a * scale[..., None]).reshape(k * m, p)
        self.omega += weighted.T @ flat
        self.b += weighted.T @ y.reshape(k * m)
        self.samples += k

    def solve(self) -> LogDetStep:
        """Move θ to the minimiser of the objective of every row folded so far (Newton from the
        current θ, from the prior when that stalls); returns the step's diagnostics."""
        chol = self._theta_chol
        if chol is None:  # cannot happen after a successful update; be safe after a reset
            raise SysIdError("the current estimate left the physically consistent set")
        theta, chol, iterations, decrement, cut, done = self._newton(self.theta, chol)
        if not done:
            # many rows since the last solve (a node's batch) can move the minimiser far from the
            # warm start: follow the path from the objective the current θ minimises to this one
            follow = self._follow()
            iterations += follow[2]
            if follow[5] or self._objective(follow[0], follow[1]) < self._objective(theta, chol):
                theta, chol, _, decrement, cut_follow, done = follow
                cut |= cut_follow
        if not done:
            # Warm starts near the boundary (where earlier data put the minimiser) can need very
            # many barrier-damped steps once the minimiser has moved inside: the barrier's
            # Hessian there dwarfs Ω and the steps shrink to nothing. Newton from the (floored)
            # prior (well inside) reaches an interior minimiser in a few steps; keep the better end point.
            alt = self._newton(self._start, self._chol(self._start))
            iterations += alt[2]
            if self._objective(alt[0], alt[1]) < self._objective(theta, chol):
                theta, chol, _, decrement, cut_alt, _ = alt
                cut |= cut_alt
        if cut and not self._interior(theta, chol):
            # only a shortened step (fraction-to-boundary or line search) approaches the boundary;
            # the set {J ⪰ ε·tr(J)·1} is convex and holds the previous estimate: move back along
            # the segment until inside (checked once per update: the line search stays cheap)
            previous = self.theta
            for _ in range(60):
                theta = previous + 0.5 * (theta - previous)
                chol = self._chol(theta)
                if chol is not None and self._interior(theta, chol):
                    break
            else:
                theta = previous
            chol, cut = self._chol(theta), True
        self.theta, self._theta_chol = theta, chol
        self._anchor = (self.omega.copy(), self.b.copy())
        return LogDetStep(iterations, decrement, self._pseudo(theta), cut)

    #: most Newton runs of :meth:`_follow`
    FOLLOW_RUNS = 40

    def _follow(self):
        """Newton along ``Ω(s) = Ω₀ + s (Ω − Ω₀)``, ``b(s)`` alike, ``s`` from 0 (``(Ω₀, b₀)`` of the
        last solve, whose minimiser θ is) to 1, each run warm-started at the previous run's
        minimiser: the path one solve per sample follows, in as few runs as converge (the step
        in ``s`` doubles after a run that converged, halves after one that did not). Returns
        :meth:`_newton`'s tuple at the last ``s`` reached (converged only if that is 1)."""
        omega0, b0 = self._anchor
        d_omega, d_b = self.omega - omega0, self.b - b0
        theta, chol = self.theta, self._theta_chol
        s, step, iterations, cut, decrement = 0.0, 0.25, 0, False, np.inf
        for _ in range(self.FOLLOW_RUNS):
            to = min(1.0, s + step)
            run = self._newton(theta, chol, omega0 + to * d_omega, b0 + to * d_b)
            iterations += run[2]
            if run[5]:
                theta, chol, decrement, s = run[0], run[1], run[3], to
                cut |= run[4]
                if s >= 1.0:
                    return theta, chol, iterations, decrement, cut, True
                step *= 2.0
            else:
                step *= 0.5
        return theta, chol, iterations, decrement, cut, False

    def _newton(self, theta: np.ndarray, chol: np.ndarray, omega: np.ndarray | None = None,
                b: np.ndarray | None = None):
        """Newton iterations from ``theta`` on the objective of ``(Ω, b)`` (default: every row
        folded): ``(θ, chol, iterations, decrement, cut, converged)``."""
        omega = self.omega if omega is None else omega
        b = self.b if b is None else b
        cut = False
        decrement = np.inf
        iterations = 0
        while iterations < self.max_iter:
            iterations += 1
            l_inv = np.linalg.inv(chol)
            if self._reg_at is not None and self._reg_at[0] is theta:
                g_r, h_r = self._reg_at[1:]  # θ unchanged since the last update: R's terms too
            else:
                g_r, h_r = self._grad_hess(theta, l_inv)
                self._reg_at = (theta, g_r, h_r)
            g_data = omega @ theta - b
            grad = g_data + self.alpha * g_r
            hess = omega + self.alpha * h_r
            _, delta, info = _lapack().dposv(hess, -grad, lower=1)  # H ≻ 0: Cholesky
            if info != 0:  # numerically not positive definite: minimum-norm step
                delta = -rla.lstsq(hess, grad)
            slope = float(grad @ delta)
            decrement = -slope / 2.0
            if decrement <= self.tol * max(1.0, abs(float(b @ theta))):
                return theta, chol, iterations, decrement, cut, True
            step = self._step_length(theta, delta, l_inv)
            cut |= step < 1.0
            if (step == 1.0 and self._self_concordant and 2.0 * decrement / self.alpha < 0.0625
                    and np.all(np.abs(delta[self._pos]) <= 0.25 * theta[self._pos])):
                # f/α is self-concordant and its Newton decrement is below 1/4: the full step is
                # feasible and decreases f (Nesterov), no line search needed (the common update);
                # the joint terms' barriers are weak (β s² < 1), so their steps must also be small
                # relative to the distance to 0, where −log is close to its quadratic model
                candidate = theta + delta
                new_chol = self._chol(candidate)
                if new_chol is not None:
                    theta, chol = candidate, new_chol
                    continue
            # backtracking (Armijo) on the objective keeps every step a descent step; the change
            # of the quadratic data term is computed exactly (no cancellation of large values)
            lin, quad = float(g_data @ delta), float(delta @ omega @ delta)
            reg0 = self._regulariser(theta, chol)
            for _ in range(60):
                candidate = theta + step * delta
                new_chol = self._chol(candidate)
                if new_chol is not None:
                    change = step * lin + 0.5 * step**2 * quad + self._regulariser(candidate, new_chol) - reg0
                    if change <= 1e-4 * step * slope:
                        break
                step *= 0.5
                cut = True
            else:  # no decrease along δ (numerically at the minimum): stop here
                return theta, chol, iterations, decrement, cut, True
            theta, chol = candidate, new_chol
        return theta, chol, iterations, decrement, cut, False

    def divergence_to(self, reference: np.ndarray) -> float:
        """Σ_b D(J(φ̂_b) ‖ J(φ_b^ref)) of the current estimate from ``reference`` parameters
        (the reference's J⁻¹ and log det kept while it is the same: one dot product per update).
        Raises :class:`SysIdError` when the reference is not physically consistent."""
        ref = np.asarray(reference, dtype=float)
        cached = self._reference
        if cached is None or not np.array_equal(cached[0], ref):
            try:
                l0 = np.linalg.cholesky(self._pseudo(ref))
            except np.linalg.LinAlgError:
                raise SysIdError("the reference parameters are not physically consistent "
                                 "(J not ≻ 0)") from None
            l0_inv = np.linalg.inv(l0)
            j0_inv = np.swapaxes(l0_inv, 1, 2) @ l0_inv
            logdet0 = 2.0 * np.log(np.diagonal(l0, axis1=1, axis2=2)).sum(axis=1)
            trace0 = np.einsum("nk,bk->bn", _E16, j0_inv.reshape(-1, 16))
            cached = self._reference = (ref.copy(), logdet0, trace0)
        _, logdet0, trace0 = cached  # tr(J₀⁻¹ J) = Σ_n θ_n tr(J₀⁻¹ E_n)
        logdet = 2.0 * np.log(np.diagonal(self._theta_chol, axis1=1, axis2=2)).sum(axis=1)
        trace = np.einsum("bn,bn->b", trace0, self.theta[self._body_idx])
        return float(np.sum(trace - logdet + logdet0 - 4.0))
