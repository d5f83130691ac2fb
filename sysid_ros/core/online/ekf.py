"""Extended Kalman filter on the augmented state ``x = [q, q̇, β]`` (overview seed, "EKF").

``β (r,)`` are the target's base parameters (``β = B θ``: the arm's base parameters, or a
payload's, all 10 when its body is excited enough). The torques and the mass matrix depend on
``θ`` only through ``β``, so the forward dynamics of the regressor model are::

    M(q; β) q̈ = τ − c(q, q̇; β),   M = Y_M(q) β + M_known(q),   c = Y(q, q̇, 0) β + τ_known(q, q̇, 0)

(``Y_M``: the mass-matrix regressor; ``*_known``: the arm's nominal part for a payload target).
Prediction over a sample step ``h`` with the torque ``τ_k`` held (zero-order hold, as the MIT law
and the simulator apply it), semi-implicit Euler as the simulator integrates::

    q̇_{k+1} = q̇_k + h q̈_k,   q_{k+1} = q_k + h q̇_{k+1},   β_{k+1} = β_k + w_β

Jacobians: ``∂q̈/∂β = −M⁻¹ Y(q, q̇, q̈)`` analytically (the dynamics are linear in β in the
inverse-dynamics form); ``∂q̈/∂q``, ``∂q̈/∂q̇`` by forward differences (one batched regressor call
of ``1 + 2n`` states). Process noise: the torque noise ``σ_τ`` through ``M⁻¹`` into ``q̈`` and the
parameter random walk of :mod:`.drift` (``w_β ~ N(0, drift² s_β² h)``). Measurement: ``q`` and
``q̇`` (``R = diag(σ_q², σ_q̇²)``), Joseph-form update. The parameter covariance is reported in the
standard layout as ``G P_β Gᵀ`` (:func:`~sysid_ros.core.online.drift.base_to_standard`).
"""

from __future__ import annotations

import time

import numpy as np

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.target import Target
from sysid_ros.core.online.drift import INITIAL_STD, base_scale, base_to_standard
from sysid_ros.core.online.estimator import OnlineLog

#: forward-difference steps of the state Jacobians [rad, rad/s]
FD_STEP = 1e-6


class AugmentedEKF:
    """The filter: :meth:`step` with each sample ``(t, q, q̇, q̈, τ)``.

    ``prior (p,)``: the target's standard parameters at the start (their base parameters are the
    initial β, with standard deviation ``INITIAL_STD × s_β``); ``torque_noise`` [N·m];
    ``position_noise`` [rad]; ``velocity_noise`` [rad/s]; ``drift`` [1/√s] the parameters'
    random walk relative to their scale.
    """

    def __init__(self, target: Target, prior: np.ndarray, *, torque_noise: float,
                 position_noise: float, velocity_noise: float, drift: float) -> None:
        for name, value in (("torque_noise", torque_noise), ("position_noise", position_noise),
                            ("velocity_noise", velocity_noise)):
            if not value > 0:
                raise DataError(f"{name} must be > 0, got {value}")
        if not drift >= 0:
            raise DataError(f"drift must be >= 0, got {drift}")
        self.target = target
        self.n = len(target.model.dof_joint_names)
        if target.model.nv != self.n:
            raise DataError(f"the EKF needs a fixed-base model (nv = {self.n} joints), got nv = "
                            f"{target.model.nv}")
        self.prior = np.asarray(prior, dtype=float)
        self._b = target.base.matrix
        self._indep = target.base.independent
        self._g = base_to_standard(target)
        scale = base_scale(target)
        self.beta0 = self._b @ self.prior
        self._p0 = np.diag((INITIAL_STD * scale) ** 2)
        self._drift = (drift * scale) ** 2  # [β² / s]
        self._sigma_tau = float(torque_noise)
        self._r = np.r_[np.full(self.n, position_noise**2), np.full(self.n, velocity_noise**2)]
        self.x: np.ndarray | None = None  # [q, q̇, β]
        self.covariance: np.ndarray | None = None  # (2n + r, 2n + r)
        self._beta = self.beta0.copy()
        self._p_beta = self._p0.copy()
        self._held: tuple[float, np.ndarray, np.ndarray] | None = None  # (t, τ, q̈ measured)
        self.samples = 0
        self.innovation = np.full(2 * self.n, np.nan)

    # ------------------------------------------------------------------ parameters out
    @property
    def beta(self) -> np.ndarray:
        return self._beta if self.x is None else self.x[2 * self.n:]

    @property
    def p_beta(self) -> np.ndarray:
        """``(r, r)`` covariance of the base parameters."""
        return self._p_beta if self.covariance is None else self.covariance[2 * self.n:, 2 * self.n:]

    @property
    def theta(self) -> np.ndarray:
        """``(p,)`` standard parameters: the prior moved only along what β determines."""
        return self.prior + self._g @ (self.beta - self.beta0)

    @property
    def P(self) -> np.ndarray:  # the covariance's usual name, as RecursiveLeastSquares.P
        """``(p, p)`` covariance of :attr:`theta` (``G P_β Gᵀ``; rank r)."""
        return self._g @ self.p_beta @ self._g.T

    @property
    def omega(self) -> np.ndarray:
        """``(p, p)`` information ``Bᵀ P_β⁻¹ B`` (the prior's included)."""
        return self._b.T @ np.linalg.solve(self.p_beta, self._b)

    # ------------------------------------------------------------------ filter
    def restart(self) -> None:
        """The joint state restarts from the next measurement (after a gap); β and its
        covariance are kept."""
        if self.x is not None:
            self._beta, self._p_beta = self.beta.copy(), self.p_beta.copy()
        self.x, self.covariance, self._held = None, None, None

    def step(self, t: float, q, dq, ddq, tau) -> float | None:
        """One sample: predict from the previous one under its held torque, correct with ``q``
        (n,) [rad] and ``q̇`` (n,) [rad/s]. Returns the previous sample's a-priori torque
        residual ``‖τ − Y(q, q̇, q̈) β − τ_known‖²`` [N²·m²] (with its measured q̈; None at the
        first sample). Raises :class:`DataError` (state unchanged) for non-finite input or a
        mass matrix that is not positive definite."""
        q, dq, ddq, tau = (np.asarray(a, dtype=float).reshape(self.n) for a in (q, dq, ddq, tau))
        if not all(np.all(np.isfinite(a)) for a in (q, dq, tau)) or not np.isfinite(t):
            raise DataError("non-finite time, q, q̇ or τ: sample rejected")
        residual = None
        if self.x is None:
            self.x = np.r_[q, dq, self._beta]
            self.covariance = np.zeros((self.x.size, self.x.size))
            self.covariance[:2 * self.n, :2 * self.n] = np.diag(self._r)
            self.covariance[2 * self.n:, 2 * self.n:] = self._p_beta
        else:
            t0, tau0, ddq0 = self._held
            h = t - t0
            if not h > 0:
                raise DataError(f"t={t:.6f} s is not after the previous sample's {t0:.6f} s")
            x, cov, residual = self._predict(h, tau0, ddq0)
            self.x, self.covariance = self._correct(x, cov, np.r_[q, dq])
        self._held = (float(t), tau, ddq if np.all(np.isfinite(ddq)) else np.zeros(self.n))
        self.samples += 1
        return residual

    def _predict(self, h: float, tau: np.ndarray, ddq_meas: np.ndarray):
        n, x, cov = self.n, self.x, self.covariance
        q, v, beta = x[:n], x[n:2 * n], x[2 * n:]
        eye = np.eye(n)
        qs = np.vstack((q, q + FD_STEP * eye, np.tile(q, (n, 1))))  # (1 + 2n, n)
        vs = np.vstack((v, np.tile(v, (n, 1)), v + FD_STEP * eye))
        y0, known = self.target.regressor(qs, vs, np.zeros_like(qs))
        ym, m_known = self.target.mass_matrix(qs[:n + 1])
        y0, ym = y0[..., self._indep], ym[..., self._indep]
        c = y0 @ beta + known  # (1 + 2n, n)
        mass = ym @ beta + m_known  # (1 + n, n, n)
        try:
            np.linalg.cholesky(mass)
        except np.linalg.LinAlgError:
            raise DataError("the mass matrix of the current estimate is not positive definite: "
                            "sample rejected") from None
        rhs = tau - c
        m0 = mass[0]
        acc = np.empty_like(rhs)
        acc[:n + 1] = np.linalg.solve(mass, rhs[:n + 1, :, None])[..., 0]
        acc[n + 1:] = np.linalg.solve(m0, rhs[n + 1:].T).T  # q̇ does not change M
        a0 = acc[0]
        j_q = ((acc[1:n + 1] - a0) / FD_STEP).T  # (n, n): column j = ∂q̈/∂q_j
        j_v = ((acc[n + 1:] - a0) / FD_STEP).T
        y_full = y0[0] + np.einsum("ijr,j->ir", ym[0], a0)  # Y(q, q̇, q̈) in β
        j_b = -np.linalg.solve(m0, y_full)  # (n, r)
        r = beta.size
        f = np.eye(2 * n + r)
        f[n:2 * n, :n] = h * j_q
        f[n:2 * n, n:2 * n] += h * j_v
        f[n:2 * n, 2 * n:] = h * j_b
        f[:n, :] = f[:n, :] + h * f[n:2 * n, :]  # q₊ = q + h q̇₊
        m_inv = np.linalg.inv(m0)
        sigma_a = self._sigma_tau**2 * m_inv @ m_inv.T
        g = np.vstack((h * h * eye, h * eye))
        process = np.zeros_like(f)
        process[:2 * n, :2 * n] = g @ sigma_a @ g.T
        process[2 * n:, 2 * n:] = np.diag(self._drift * h)
        v1 = v + h * a0
        x_pred = np.r_[q + h * v1, v1, beta]
        cov_pred = f @ cov @ f.T + process
        torque = y0[0] + np.einsum("ijr,j->ir", ym[0], ddq_meas)
        res = tau - torque @ beta - (known[0] + m_known[0] @ ddq_meas)
        return x_pred, 0.5 * (cov_pred + cov_pred.T), float(res @ res)

    def _correct(self, x: np.ndarray, cov: np.ndarray, z: np.ndarray):
        m = z.size
        s = cov[:m, :m] + np.diag(self._r)
        k = np.linalg.solve(s, cov[:m, :]).T  # (dim, m)
        self.innovation = z - x[:m]
        x = x + k @ self.innovation
        a = np.eye(cov.shape[0])
        a[:, :m] -= k
        cov = a @ cov @ a.T + (k * self._r) @ k.T  # Joseph form
        return x, 0.5 * (cov + cov.T)


class EKFEstimator:
    """:class:`AugmentedEKF` behind the interface of :class:`~.estimator.OnlineEstimator` (what
    :class:`~.session.OnlineSession`, the node and ``sysid identify`` use): ``push_batch`` of
    conditioned samples, ``theta``, ``information``, ``log``, counters, ``residual_rms`` [N·m]
    (a-priori torque residuals with the measured accelerations)."""

    estimator = "ekf"
    regression = "state"

    def __init__(self, target: Target, *, prior: np.ndarray | None = None, torque_noise: float = 0.05,
                 position_noise: float = 1e-3, velocity_noise: float = 1e-2, drift: float = 0.1,
                 truth: np.ndarray | None = None) -> None:
        self.target = target
        self.prior = target.prior if prior is None else np.asarray(prior, dtype=float)
        self.core = AugmentedEKF(target, self.prior, torque_noise=torque_noise,
                                 position_noise=position_noise, velocity_noise=velocity_noise,
                                 drift=drift)
        self.rows = self.core  # what the session restarts after a gap: the joint state
        self.truth = truth
        self.log = OnlineLog()
        self.rejected = 0
        self.last_rejection: tuple[float, str] | None = None
        self.residual_sq = 0.0
        self.residual_n = 0

    @property
    def theta(self) -> np.ndarray:
        return self.core.theta

    @property
    def samples(self) -> int:
        return self.core.samples

    @property
    def information(self) -> np.ndarray:
        return self.core.omega

    @property
    def covariance(self) -> np.ndarray:
        """``(p, p)`` covariance of :attr:`theta`."""
        return self.core.P

    def divergence(self, reference: np.ndarray) -> float:
        return self.target.divergence(self.theta, reference)

    def push(self, t: float, q, dq, ddq, tau, *, log: bool = True) -> bool:
        """One conditioned sample; returns whether the filter took it."""
        start = time.perf_counter()
        try:
            residual = self.core.step(t, q, dq, ddq, tau)
        except (SysIdError, np.linalg.LinAlgError) as exc:
            self.rejected += 1
            self.last_rejection = (float(t), str(exc))
            return False
        if residual is not None:
            self.residual_sq += residual
            self.residual_n += self.core.n
        if log:
            self.log.t.append(float(t))
            self.log.theta.append(self.core.theta.copy())
            self.log.divergence.append(self.divergence(self.truth) if self.truth is not None else np.nan)
            self.log.update_time.append(time.perf_counter() - start)
        return True

    def push_batch(self, t, q, dq, ddq, tau, *, log: bool = True) -> int:
        """``K`` samples in order; returns how many the filter took."""
        return sum(self.push(t[k], q[k], dq[k], ddq[k], tau[k], log=log) for k in range(len(t)))

    @property
    def residual_rms(self) -> float:
        return float(np.sqrt(self.residual_sq / self.residual_n)) if self.residual_n else float("nan")
