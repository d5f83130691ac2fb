"""Extended Kalman filter on the augmented state ``x = [q, q̇, β]`` (overview seed, "EKF").

``β (r,)`` are the target's base parameters (``β = B θ``: the arm's base parameters, or a
payload's, all 10 when its body is excited enough). The torques and the mass matrix depend on
``θ`` only through ``β``, so the forward dynamics of the regressor model are::

    M(q; β) q̈ = τ − c(q, q̇; β),   M = Y_M(q) β + M_known(q),   c = Y(q, q̇, 0) β + τ_known(q, q̇, 0)

(``Y_M``: the mass-matrix regressor; ``*_known``: the arm's nominal part for a payload target).
Prediction over a sample step ``h`` with the torque ``τ_k`` held (zero-order hold, as the MIT law
and the simulator apply it), semi-implicit Euler as the simulator integrates::

    q̇_{k+1} = q̇_k + h q̈_k,   q_{k+1} = q_k + h q̇_{k+1},   β_{k+1} = β_k + w_β

``M`` and ``c`` come from one batched call of the torque regressor (τ is linear in q̈, so
``M e_j = τ(q, 0, e_j) − τ(q, 0, 0)``). Jacobians: ``∂q̈/∂β = −M⁻¹ Y(q, q̇, q̈)`` analytically (the
dynamics are linear in β in the inverse-dynamics form); ``∂q̈/∂q``, ``∂q̈/∂q̇ = −M⁻¹ ∂τ_id/∂(q, q̇)``
by forward differences of the inverse dynamics (one batched call of ``1 + 2n`` states), refreshed
every :data:`STATE_JACOBIAN_PERIOD` of data. Process noise: the torque noise ``σ_τ`` through
``M⁻¹`` into ``q̈`` and the parameter random walk of :mod:`.drift` (``w_β ~ N(0, drift² s_β²
h)``). Measurement: ``q`` and ``q̇`` (``R = diag(σ_q², σ_q̇²)``), Joseph-form update. When
every standard parameter is a base parameter (a payload on an excited body: ``θ`` is ``β``
reordered), the estimate is then projected onto the physically consistent set (estimate
projection, Simon & Chia, IEEE TAES 38(2), 2002): each body's pseudo-inertia eigenvalues raised
to at least :data:`MARGIN` × its scale, negative friction and rotor inertia set to 0; the
covariance is kept. An arm's base parameters have no such closed-form projection (the standard
vector they map to is one of many: see below); a step whose mass matrix is not positive definite
is refused.
The parameter covariance is reported in the standard layout as ``G P_β Gᵀ``
(:func:`~sysid_ros.core.online.drift.base_to_standard`).

What is exported (:meth:`EKFEstimator.projection`: the session's estimates, ``sysid identify``'s
files) is the estimate projected onto the consistent, plausible set in the metric of the filter's
posterior (:mod:`~sysid_ros.core.online.projection`; the identity when it is there already). The
filter's own state stays unprojected, by choice: for an arm the projection is a conic program
(milliseconds to a second), not something to run at every sample; the unconstrained recursion is
the one whose covariance describes its error, and estimate projection (Simon & Chia) projects its
output; a state reset to the projection with ``P`` kept would be pulled toward the bounds with a
covariance that no longer says so, and held there when a parameter drifts across one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.blas import on_one_blas_thread
from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.consistency import body_params_from_pseudo_inertia, pseudo_inertia
from sysid_ros.core.model.target import Target
from sysid_ros.core.online.drift import INITIAL_STD, base_scale, base_to_standard, parameter_scale
from sysid_ros.core.online.estimator import EstimateRecord

if TYPE_CHECKING:
    from sysid_ros.core.online.projection import ConsistentProjection, Projection

#: forward-difference steps of the state Jacobians [rad, rad/s]
FD_STEP = 1e-6
#: [s] of data over which ∂q̈/∂q and ∂q̈/∂q̇ are reused (they change with the state, slowly at the
#: sample rates of joint states; ∂q̈/∂β is exact at every step)
STATE_JACOBIAN_PERIOD = 0.01
#: smallest pseudo-inertia eigenvalue after projection, relative to the body's inertia scale
MARGIN = 1e-4


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
        #: θ and β are the same numbers (reordered): the estimate can be projected exactly
        self.projected = target.base.rank == target.n_params
        self._inertia_scale = parameter_scale(target)[[sl.start + 4 for _, sl in target.body_blocks]]
        self._r = np.r_[np.full(self.n, position_noise**2), np.full(self.n, velocity_noise**2)]
        self.x: np.ndarray | None = None  # [q, q̇, β]
        self.covariance: np.ndarray | None = None  # (2n + r, 2n + r)
        self._beta = self.beta0.copy()
        self._p_beta = self._p0.copy()
        self._held: tuple[float, np.ndarray, np.ndarray] | None = None  # (t, τ, q̈ measured)
        self._jacobian: tuple[np.ndarray, np.ndarray] | None = None
        self._jacobian_age = 0.0
        self.samples = 0
        self.mass_steps_cut = 0  # halvings of corrections whose β made M(q) indefinite
        self._mass_cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (q, Y_M, M_known)
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
        self.x, self.covariance, self._held, self._jacobian = None, None, None, None

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
            self.x[2 * self.n:] = self._within_positive_mass(self.x[:self.n], x[2 * self.n:],
                                                              self.x[2 * self.n:])
            if self.projected:
                self.x[2 * self.n:] = self._project(self.x[2 * self.n:])
        self._held = (float(t), tau, ddq if np.all(np.isfinite(ddq)) else np.zeros(self.n))
        self.samples += 1
        return residual

    def _predict(self, h: float, tau: np.ndarray, ddq_meas: np.ndarray):
        n, x, cov = self.n, self.x, self.covariance
        q, v, beta = x[:n], x[n:2 * n], x[2 * n:]
        eye = np.eye(n)
        y_m, known_m = self._mass_terms(q)
        y_c, known_c = self.target.regressor(q[None], v[None], np.zeros((1, n)))  # c(q, q̇)
        y_c, known_c = y_c[0][..., self._indep], known_c[0]
        mass = _symmetric_mass(y_m, beta, known_m)
        if not _positive_definite(mass):
            raise DataError("the mass matrix of the current estimate is not positive definite: "
                            "sample rejected")
        m_inv = np.linalg.inv(mass)
        a0 = m_inv @ (tau - y_c @ beta - known_c)
        y_full = y_c + np.einsum("jir,j->ir", y_m, a0)  # Y(q, q̇, q̈) in β
        j_b = -m_inv @ y_full  # (n, r) = ∂q̈/∂β
        if self._jacobian is None or self._jacobian_age >= STATE_JACOBIAN_PERIOD:
            self._jacobian, self._jacobian_age = self._state_jacobian(q, v, a0, beta, m_inv), 0.0
        self._jacobian_age += h
        j_q, j_v = self._jacobian
        r = beta.size
        f = np.eye(2 * n + r)
        f[n:2 * n, :n] = h * j_q
        f[n:2 * n, n:2 * n] += h * j_v
        f[n:2 * n, 2 * n:] = h * j_b
        f[:n, :] = f[:n, :] + h * f[n:2 * n, :]  # q₊ = q + h q̇₊
        sigma_a = self._sigma_tau**2 * m_inv @ m_inv.T
        g = np.vstack((h * h * eye, h * eye))
        process = np.zeros_like(f)
        process[:2 * n, :2 * n] = g @ sigma_a @ g.T
        process[2 * n:, 2 * n:] = np.diag(self._drift * h)
        v1 = v + h * a0
        x_pred = np.r_[q + h * v1, v1, beta]
        cov_pred = f @ cov @ f.T + process
        torque = y_c + np.einsum("jir,j->ir", y_m, ddq_meas)
        res = tau - torque @ beta - known_c - known_m.T @ ddq_meas
        return x_pred, 0.5 * (cov_pred + cov_pred.T), float(res @ res)

    def _mass_terms(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(Y_M (n, n, r)`` with its column index first, ``M_known (n, n))`` at ``q``: one
        batched call at ``(q, 0, 0)`` and ``(q, 0, e_j)`` (τ is linear in q̈, so
        ``M e_j = τ(q, 0, e_j) − τ(q, 0, 0)``). Kept for the ``q`` it was computed at: the guard
        after a correction and the next prediction are at the same ``q``."""
        cached = self._mass_cache
        if cached is not None and np.array_equal(cached[0], q):
            return cached[1], cached[2]
        n = self.n
        accs = np.vstack((np.zeros((1, n)), np.eye(n)))
        y, known = self.target.regressor(np.tile(q, (n + 1, 1)), np.zeros((n + 1, n)), accs)
        y = y[..., self._indep]
        self._mass_cache = (q.copy(), y[1:] - y[0], known[1:] - known[0])
        return self._mass_cache[1], self._mass_cache[2]

    def _within_positive_mass(self, q: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """``after`` if the mass matrix at ``q`` is positive definite with it, else the largest
        step ``before + s (after − before)``, ``s = ½, ¼, …``, that keeps it so (``before`` if
        none of 30 halvings does). A correction that overshoots — the linearised update of a
        filter far from its parameters' truth — would otherwise leave a β whose M(q) is
        indefinite, and every later prediction would be refused (the filter stuck there)."""
        y_m, known_m = self._mass_terms(q)
        step = after - before
        for _ in range(30):
            if _positive_definite(_symmetric_mass(y_m, before + step, known_m)):
                return before + step
            step = 0.5 * step
            self.mass_steps_cut += 1
        return before

    def _state_jacobian(self, q, v, a0, beta, m_inv) -> tuple[np.ndarray, np.ndarray]:
        """``(∂q̈/∂q, ∂q̈/∂q̇)`` ``(n, n)`` at ``(q, q̇, q̈ = a0)``: with ``τ = τ_id(q, q̇, q̈(q, q̇))``,
        ``∂q̈/∂z = −M⁻¹ ∂τ_id/∂z`` (forward differences of the inverse dynamics, one batched call)."""
        n = self.n
        eye = FD_STEP * np.eye(n)
        qs = np.vstack((q, q + eye, np.tile(q, (n, 1))))
        vs = np.vstack((v, np.tile(v, (n, 1)), v + eye))
        y, known = self.target.regressor(qs, vs, np.tile(a0, (2 * n + 1, 1)))
        tau = y[..., self._indep] @ beta + known  # (1 + 2n, n)
        d = (tau[1:] - tau[0]) / FD_STEP  # row j: ∂τ/∂z_j
        return -m_inv @ d[:n].T, -m_inv @ d[n:].T

    def _project(self, beta: np.ndarray) -> np.ndarray:
        """``β`` of the nearest consistent standard vector (see the module's doc); unchanged when
        it is consistent already."""
        theta = self.prior + self._g @ (beta - self.beta0)
        changed = False
        for (_label, sl), scale in zip(self.target.body_blocks, self._inertia_scale, strict=True):
            lam, vec = rla.eigh(pseudo_inertia(theta[sl]))
            floor = MARGIN * scale
            if lam[0] < floor:
                theta[sl] = body_params_from_pseudo_inertia((vec * np.maximum(lam, floor)) @ vec.T)
                changed = True
        negative = self.target.nonnegative[theta[self.target.nonnegative] < 0]
        if negative.size:
            theta[negative] = 0.0
            changed = True
        return self._b @ theta if changed else beta

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


class EKFEstimator(EstimateRecord):
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
        self._start_record()
        self._projector: ConsistentProjection | None = None  # built when first asked (cvxpy)
        self._projected: tuple[int, Projection] | None = None  # (samples, projection of that estimate)

    def projection(self) -> Projection:
        """The current estimate projected onto the consistent, plausible set (see the module's
        doc), computed once per estimate."""
        if self._projected is None or self._projected[0] != self.core.samples:
            if self._projector is None:
                from sysid_ros.core.online.projection import ConsistentProjection

                self._projector = ConsistentProjection(self.target, self.prior)
            core = self.core
            self._projected = (core.samples, self._projector.project(core.beta, core.p_beta, core.theta))
        return self._projected[1]

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
            return self._reject(t, exc)
        if residual is not None:
            self.residual_sq += residual
            self.residual_n += self.core.n
        if log:
            self._record(t, start)
        return True

    def push_batch(self, t, q, dq, ddq, tau, *, log: bool = True) -> int:
        """``K`` samples in order; returns how many the filter took. BLAS runs single-threaded
        here: the filter's matrices are small (tens of rows), and a multi-threaded BLAS on them
        is 20x slower on a loaded machine (threads spin-waiting for cores)."""
        with on_one_blas_thread():
            return sum(self.push(t[k], q[k], dq[k], ddq[k], tau[k], log=log) for k in range(len(t)))


def _symmetric_mass(y_m: np.ndarray, beta: np.ndarray, known_m: np.ndarray) -> np.ndarray:
    """``M (n, n)`` from ``y_m (n, n, r)`` (column index first) and ``known_m (n, n)``, symmetrised."""
    mass = (y_m @ beta + known_m).T
    return 0.5 * (mass + mass.T)


def _positive_definite(matrix: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        return False
    return True
