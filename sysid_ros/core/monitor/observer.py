"""The generalised-momentum residual observer (De Luca's collision observer) on a rigid-body model.

For a fixed-base arm, ``ṗ = τ + τ_ext + Cᵀ(q, q̇) q̇ − g(q) − τ_f(q̇)`` with ``p = M(q) q̇``. The
residual

    r(t) = K (p(t) − p(0) − ∫₀ᵗ (τ + Cᵀq̇ − g − τ_f + r) ds)

obeys ``ṙ = K (τ_ext − r)``: a first-order low-pass of the external joint torque with time constant
``1/K`` [s], needing no acceleration. Discretised causally (forward Euler over the sample interval
``h_k = t_k − t_{k−1}``, the same as the integral form step by step)::

    r_k = (1 − K h_k) r_{k−1} + K (p_k − p_{k−1} − h_k (τ_{k−1} + β_{k−1})),   β = Cᵀq̇ − g − τ_f

with ``r_0 = 0``. ``K h`` must be at most 1 for the usual interval; a gap longer than ``1/K``
(lost samples) restarts the observer at the sample after it (``r = 0`` there, counted), which
hides a contact already present at that moment. ``p`` and ``β`` are linear in the model's parameters
θ (:func:`~sysid_ros.core.model.regressor.momentum_regressors`: armature in ``M``, the joint terms
``Fc·sign(q̇) + Fv·q̇ + Fo`` in ``τ_f``), so the identified θ, friction included, is the model.

Coulomb friction at rest: ``Fc·sign(q̇)`` is set-valued at ``q̇ = 0`` — a joint at rest carries
whatever static friction in ``[−Fc, Fc]`` balances it (in MuJoCo's soft friction loss, and in a
motor-held arm, about 0) — while a measured velocity at rest is a creep of 1e-10 rad/s or sensor noise
whose sign flips at random. Taken literally, the model then puts ±Fc in the residual of an arm
holding still: a false contact on every joint once the thresholds were learnt in motion or on a
quiet window. The observer therefore uses ``Fc·sat(q̇ / REST_VELOCITY)`` (linear below
:data:`REST_VELOCITY`, ``Fc·sign(q̇)`` above), the model's friction away from rest and no
Coulomb torque at rest. Stribeck ``Fs·exp(−|q̇|/q̇s)·sign(q̇)`` terms, ±Fs at rest for the same
reason, take the same saturated sign.
Units: SI (rad, rad/s, N·m, s); joint vectors in the model's dof order.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import numpy as np

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import RobotModel

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_GAIN", "REST_VELOCITY", "SETTLE_TIME_CONSTANTS", "SETTLE_TOLERANCE",
           "MomentumObserver", "MomentumTerms",
           "momentum_terms", "observer_residuals", "residuals_of", "settled"]

#: observer gain K [1/s]: a 10 ms time constant, 86 % of a step contact torque within 20 ms
DEFAULT_GAIN = 100.0
#: [rad/s] below this joint speed the observer's Coulomb term is linear, ``Fc·q̇/REST_VELOCITY``
#: (at rest ``sign(q̇)`` is the sign of creep or noise; see the module docstring)
REST_VELOCITY = 1e-3
#: samples per regressor evaluation in batch (bounds the memory of the (N, nv, p) regressors)
CHUNK = 2000


#: time constants ``1/K`` after a (re)start before the residual is the settled low-pass of the
#: model error (a step's transient is e^-5 = 0.7 % of it by then): calibration skips the samples before
SETTLE_TIME_CONSTANTS = 5.0
#: [s] a sample this close before the settling time counts as settled (its stamp's rounding)
SETTLE_TOLERANCE = 1e-9


def settled(t: np.ndarray, gain: float = DEFAULT_GAIN) -> np.ndarray:
    """``(N,)`` bool: the samples at times ``t (N,)`` [s] at least :data:`SETTLE_TIME_CONSTANTS`
    ``/gain`` after the observer's start and after each restart (a step longer than ``1/gain``), so
    that a calibration does not count the zeros and the rising transient of a restart as contact-free
    residual (they would lower the thresholds)."""
    t = np.asarray(t, dtype=float)
    if t.size == 0:
        return np.zeros(0, dtype=bool)
    gain = _check_gain(gain)
    restart = np.concatenate([[True], gain * np.diff(t) > 1.0])
    since = t - np.maximum.accumulate(np.where(restart, t, -np.inf))
    return since >= SETTLE_TIME_CONSTANTS / gain - SETTLE_TOLERANCE


class MomentumTerms(NamedTuple):
    """Per sample ``(N, nv)``: generalised momentum ``p = M(q) q̇`` [N·m·s] and
    ``beta = Cᵀ(q, q̇) q̇ − g(q) − τ_f(q̇)`` [N·m]."""

    p: np.ndarray
    beta: np.ndarray


def momentum_terms(model: RobotModel, theta: np.ndarray, q: np.ndarray, dq: np.ndarray) -> MomentumTerms:
    """:class:`MomentumTerms` of the model with parameters ``theta (p,)`` at ``q (N, nq)``,
    ``dq (N, nv)`` (evaluated :data:`CHUNK` samples at a time). ``theta (m, p)``: the terms of
    ``m`` parameter vectors at once, each ``(m, N, nv)`` (the regressors are computed once).
    Coulomb friction as ``Fc·sat(q̇ / REST_VELOCITY)`` (see the module docstring)."""
    from sysid_ros.core.model.regressor import momentum_regressors  # (compiled kernels: when used)

    theta = np.asarray(theta, dtype=float)
    thetas = np.stack([model.check_theta(th) for th in np.atleast_2d(theta)])  # (m, p)
    q, dq = np.atleast_2d(np.asarray(q, dtype=float)), np.atleast_2d(np.asarray(dq, dtype=float))
    shape = (thetas.shape[0], q.shape[0], model.nv)
    p, beta = np.empty(shape), np.empty(shape)
    for start in range(0, q.shape[0], CHUNK):
        sl = slice(start, start + CHUNK)
        reg = momentum_regressors(model, q[sl], dq[sl])
        p[:, sl] = np.moveaxis(reg.Yp @ thetas.T, -1, 0)
        beta[:, sl] = np.moveaxis((reg.Yc - reg.Yg - reg.Yf) @ thetas.T, -1, 0)
    beta += _sign_terms_at_rest(model, thetas, dq)
    return MomentumTerms(p, beta) if theta.ndim == 2 else MomentumTerms(p[0], beta[0])


def _sign_terms_at_rest(model: RobotModel, thetas: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """``(m, N, nv)`` [N·m] to add to β so that its Coulomb and Stribeck terms, ``−Fc·sign(q̇)``
    and ``−Fs·exp(−|q̇|/q̇s)·sign(q̇)``, take ``sat(q̇ / REST_VELOCITY)`` for ``sign(q̇)``:
    ``(Fc + Fs·exp(−|q̇|/q̇s))·(sign(q̇) − sat(q̇ / REST_VELOCITY))`` (0 above it)."""
    shape = np.sign(dq) - np.clip(dq / REST_VELOCITY, -1.0, 1.0)  # (N, nv)
    fc, fs = _joint_terms(model, thetas, ("Fc", "Fs"))
    return (fc[:, None, :] + fs[:, None, :] * np.exp(-np.abs(dq) / model.stribeck_velocity)) * shape[None]


def _joint_terms(model: RobotModel, thetas: np.ndarray, terms: tuple[str, ...]) -> list[np.ndarray]:
    """Per term, ``(m, nv)``: each parameter vector's ``<joint>.<term>`` per dof (0 where not
    identified)."""
    index = {name: i for i, name in enumerate(model.param_names)}
    values = []
    for term in terms:
        cols = np.array([index.get(f"{joint}.{term}", -1) for joint in model.dof_joint_names])
        values.append(np.stack([np.where(cols >= 0, th[cols], 0.0) for th in thetas]))
    return values


def _check_gain(gain: float) -> float:
    if not (math.isfinite(gain) and gain > 0):
        raise SysIdError(f"the observer gain must be a finite number > 0 [1/s], got {gain}")
    return float(gain)


def _check_increasing(h: float, t: float) -> None:
    if not h > 0:
        raise DataError(f"sample times must increase; got a step of {h:g} s at t = {t:.6f} s")


def _check_interval(h: float, gain: float) -> None:
    if gain * h > 1.0:
        raise DataError(f"observer gain {gain:g} 1/s × sample interval {h:g} s = {gain * h:.3g} > 1: the "
                        f"discrete observer would oscillate; lower the gain below {1.0 / h:.4g} 1/s")


def observer_residuals(model: RobotModel, theta: np.ndarray, t: np.ndarray, q: np.ndarray,
                       dq: np.ndarray, tau: np.ndarray, *, gain: float = DEFAULT_GAIN) -> np.ndarray:
    """The residual ``r (N, nv)`` [N·m] of a whole recording (``t (N,)`` [s], ``q (N, nq)``,
    ``dq``, ``tau (N, nv)`` measured joint torque), computed as :class:`MomentumObserver` would
    sample by sample (the same numbers, faster)."""
    tau = np.asarray(tau, dtype=float)
    if tau.shape != (np.size(t), model.nv):
        raise DataError(f"expected torques of shape ({np.size(t)}, {model.nv}), got {tau.shape}")
    return residuals_of(momentum_terms(model, theta, q, dq), t, tau, gain=gain)


def residuals_of(terms: MomentumTerms, t: np.ndarray, tau: np.ndarray, *, gain: float = DEFAULT_GAIN
                 ) -> np.ndarray:
    """The residual ``(N, nv)`` [N·m] from precomputed :class:`MomentumTerms` ``(N, nv)`` (one
    model's) and the measured torque ``tau (N, nv)`` at times ``t (N,)`` [s]. Raises
    :class:`DataError` if the times do not increase or ``gain ×`` the median interval exceeds 1;
    restarts after longer gaps (see the module docstring)."""
    gain = _check_gain(gain)
    t = np.asarray(t, dtype=float)
    if terms.p.shape != tau.shape or tau.shape[0] != t.size:
        raise DataError(f"expected momentum terms and torques of shape ({t.size}, n), got "
                        f"{terms.p.shape} and {tau.shape}")
    r = np.zeros(tau.shape)
    h = np.diff(t)
    bad = np.flatnonzero(~(h > 0))
    if bad.size:
        _check_increasing(h[bad[0]], t[bad[0] + 1])
    if h.size:
        _check_interval(float(np.median(h)), gain)
    drive = gain * (np.diff(terms.p, axis=0) - h[:, None] * (tau[:-1] + terms.beta[:-1]))
    decay = 1.0 - gain * h
    gaps = gain * h > 1.0
    if gaps.any():  # restart after each gap: r = 0 at the sample that ends it
        log.warning("observer restarted after %d gap(s) longer than 1/K = %g s (first at t = %.6f s)",
                    int(gaps.sum()), 1.0 / gain, t[1:][gaps][0])
        drive[gaps], decay[gaps] = 0.0, 0.0
    for k in range(1, t.size):
        r[k] = decay[k - 1] * r[k - 1] + drive[k - 1]
    return r


class MomentumObserver:
    """The observer run sample by sample (a node's joint states): :meth:`update` with each
    measurement returns the residual ``r (nv,)`` [N·m], an estimate of the external joint torque
    low-passed at ``gain`` [1/s]."""

    def __init__(self, model: RobotModel, theta: np.ndarray, *, gain: float = DEFAULT_GAIN) -> None:
        model.check_fixed_base("the momentum observer")
        self.model = model
        self.theta = model.check_theta(np.array(theta, dtype=float))
        self.gain = _check_gain(gain)
        #: restarts after gaps longer than 1/gain (see the module docstring)
        self.restarts = 0
        self.reset()

    def reset(self) -> None:
        """Forget the past: the next sample starts the observer again at ``r = 0``."""
        self._last: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None
        self.residual = np.zeros(self.model.nv)

    def update(self, t: float, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """Take the measurement at ``t`` [s] (``q (nq,)``, ``dq (nv,)``, ``tau (nv,)``) and return
        the residual ``(nv,)`` [N·m] (a copy). Raises :class:`DataError` (and keeps its state) if
        ``t`` does not increase; a step longer than ``1/gain`` restarts the observer at this sample
        (``r = 0``, :attr:`restarts` counts them)."""
        tau = np.asarray(tau, dtype=float)
        if tau.shape != (self.model.nv,):
            raise DataError(f"expected {self.model.nv} joint torques, got shape {tau.shape}")
        terms = momentum_terms(self.model, self.theta, q, dq)
        p, beta = terms.p[0], terms.beta[0]
        if self._last is not None:
            t0, p0, tau0, beta0 = self._last
            h = t - t0
            _check_increasing(h, t)
            if self.gain * h > 1.0:
                self.restarts += 1
                self.residual = np.zeros(self.model.nv)
            else:
                self.residual = ((1.0 - self.gain * h) * self.residual
                                 + self.gain * (p - p0 - h * (tau0 + beta0)))
        self._last = (float(t), p, tau.copy(), beta)
        return self.residual.copy()
