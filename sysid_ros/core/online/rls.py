"""Recursive least squares with a forgetting factor (overview seed; Ljung, System Identification, §11.2).

For rows ``y_k = A_k θ + e_k`` (``A_k (m, p)``, one sample's joints), with noise covariance
``R = diag(noise²)``::

    K = P Aᵀ (λ R + A P Aᵀ)⁻¹,   θ ← θ + K (y − A θ),   P ← (P − K A P) / λ

Wind-up protection: when the excitation fades, forgetting inflates ``P`` without bound; the
update skips the division by λ whenever ``trace(P)`` would exceed ``trace_max``. ``reset`` restores
the initial covariance (e.g. after a detected change of payload).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sysid_ros.core.errors import DataError


@dataclass(frozen=True)
class RLSStep:
    """Diagnostics of one update: prior residual norm, trace of P, whether forgetting was held."""

    residual: float
    trace: float
    windup_guard: bool


class RecursiveLeastSquares:
    """RLS on ``p`` parameters. ``forgetting`` λ in (0, 1] (0.98–0.995 typical for tracking)."""

    def __init__(self, theta0: np.ndarray, p0: np.ndarray | float, *, forgetting: float = 1.0,
                 noise: float | np.ndarray = 1.0, trace_max: float | None = None) -> None:
        theta0 = np.asarray(theta0, dtype=float)
        if not 0.0 < forgetting <= 1.0:
            raise DataError(f"the forgetting factor must be in (0, 1], got {forgetting}")
        p = theta0.shape[0]
        self._p0 = np.eye(p) * p0 if np.ndim(p0) == 0 else np.asarray(p0, dtype=float)
        if self._p0.shape != (p, p):
            raise DataError(f"expected an initial covariance ({p}, {p}), got {self._p0.shape}")
        self._theta0 = theta0.copy()
        self.forgetting = float(forgetting)
        self.noise = noise
        self.trace_max = float(trace_max) if trace_max is not None else 1e3 * float(np.trace(self._p0))
        self.theta = theta0.copy()
        self.P = self._p0.copy()
        self.samples = 0

    def reset(self, *, theta: np.ndarray | None = None, covariance: bool = True) -> None:
        """Back to the initial covariance (and ``theta`` if given, else keep the estimate)."""
        if theta is not None:
            self.theta = np.asarray(theta, dtype=float).copy()
        if covariance:
            self.P = self._p0.copy()

    def update(self, a: np.ndarray, y: np.ndarray) -> RLSStep:
        """One update with rows ``a (m, p)`` and outputs ``y (m,)``."""
        a = np.atleast_2d(np.asarray(a, dtype=float))
        y = np.atleast_1d(np.asarray(y, dtype=float))
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(y))):
            raise DataError("non-finite regressor row or output: sample rejected")
        residual = y - a @ self.theta
        pa = self.P @ a.T
        r = np.broadcast_to(np.asarray(self.noise, dtype=float) ** 2, (a.shape[0],))
        s = self.forgetting * np.diag(r) + a @ pa
        k = np.linalg.solve(s, pa.T).T
        self.theta = self.theta + k @ residual
        p_new = self.P - k @ pa.T
        guard = False
        if self.forgetting < 1.0:
            inflated = p_new / self.forgetting
            if np.trace(inflated) <= self.trace_max:
                p_new = inflated
            else:
                guard = True
        self.P = 0.5 * (p_new + p_new.T)
        self.samples += 1
        return RLSStep(float(np.linalg.norm(residual)), float(np.trace(self.P)), guard)
