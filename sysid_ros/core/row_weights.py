"""Row weights from the residuals of a running estimate (online weighted least squares).

A recursive estimator weighs every regression row by ``W = 1/σ²``, the inverse variance of that
row's error. The torque sensor's σ is known, but on live data the rows' errors are mostly not the
sensor's: differentiated velocities, filter lag and the known robot model's error enter the rows
too, differently for every joint and every regression (a 50 kg payload on a Panda with 0.01 rad/s
velocity noise gives 1–2 N·m of row error against a 0.05 N·m sensor). Rows weighted by the sensor
alone then count far too much against the prior — most of all the nuisance bodies' priors.

:class:`ResidualWeights` estimates each row's error variance online, the way batch identification
weighs each joint by the variance of its least-squares residual (Gautier's weighted least squares),
but causally: an exponentially weighted mean of the *a-priori* residuals ``y − A θ̂`` (θ̂ before
the row is folded in), never below the sensor's variance. Rows are returned whitened (divided by
σ̂), so the estimator takes them with unit weight.
"""

from __future__ import annotations

import numpy as np

from .errors import DataError


class ResidualWeights:
    """Per-row error variance from a-priori residuals; rows whitened by it.

    ``floor``: the smallest σ of each row (scalar or ``(m,)``, e.g. the torque sensor's σ in the
    rows' units) — a weight never exceeds ``1/floor²``; ``time_constant`` [s]: memory of the
    variance estimate; ``fs`` [Hz]: the row rate. The first row of each kind starts the variance at
    its own squared residual (so the prior's error counts little at first).
    """

    def __init__(self, floor: float | np.ndarray, *, time_constant: float = 1.0, fs: float = 500.0) -> None:
        floor = np.asarray(floor, dtype=float)
        if np.any(~np.isfinite(floor)) or np.any(floor <= 0):
            raise DataError(f"row σ floor must be positive and finite, got {floor}")
        if not (time_constant > 0 and fs > 0):
            raise DataError(f"time constant {time_constant} s and row rate {fs} Hz must be positive")
        self.floor_sq = floor**2
        self.gain = min(1.0, 1.0 / (time_constant * fs))
        self.variance: np.ndarray | None = None

    def reset(self) -> None:
        self.variance = None

    @property
    def sigma(self) -> np.ndarray | None:
        """Current σ̂ of every row ``(m,)`` (floor included), or None before the first row."""
        return None if self.variance is None else np.sqrt(np.maximum(self.variance, self.floor_sq))

    def whiten(self, a: np.ndarray, y: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``a (m, p)``, ``y (m,)`` divided by their σ̂ (estimated before this row's residual
        ``y − a θ`` updates it, so a row does not lower its own weight)."""
        a, y = np.atleast_2d(a), np.atleast_1d(y)
        residual_sq = (y - a @ theta) ** 2
        if self.variance is None or self.variance.shape != residual_sq.shape:
            self.variance = residual_sq
        scale = 1.0 / np.sqrt(np.maximum(self.variance, self.floor_sq))
        self.variance = self.variance + self.gain * (residual_sq - self.variance)
        return a * scale[:, None], y * scale
