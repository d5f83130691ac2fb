"""Row weights from the residuals of a running estimate (online weighted least squares).

A recursive estimator weighs every regression row by ``W = 1/σ²``, the inverse variance of that
row's error. The torque sensor's σ is known, but on live data the rows' errors are mostly not the
sensor's: differentiated velocities, filter lag and the known robot model's error enter the rows
too, differently for every joint and every regression (a 50 kg payload on a Panda with 0.01 rad/s
velocity noise gives 1–2 N·m of row error against a 0.05 N·m sensor). Rows weighted by the sensor
alone then count far too much against the prior — most of all the nuisance bodies' priors.

:class:`ResidualWeights` estimates each row's error variance online, the way batch identification
weighs each joint by the variance of its least-squares residual (Gautier's weighted least squares),
but causally: a mean of the *a-posteriori* residuals ``y − A θ̂`` (θ̂ after the row is folded in;
plain until ``time_constant`` of rows has been seen, exponentially forgetting after), never below
the sensor's variance. Rows are returned whitened (divided by σ̂), so the estimator takes them with
unit weight.

Limit: the residuals also hold the estimate's own error. From a prior far from the truth the
first σ̂ are large and the weights small, so the data outweigh the prior later than with the
sensor's weights (a replayed 10 s bag of a 5 kg payload from a 1 kg prior: divergence 0.038
against 0.010 with fixed weights); rows that carry little information at first and then grow
(exponentially windowed momentum of a 50 kg payload) did not recover at all (divergence 8.8).
Fixed weights stay the default; adaptive ones pay where the rows' real errors dwarf the sensor's.
"""

from __future__ import annotations

import numpy as np

from sysid_ros.core.errors import DataError


class ResidualWeights:
    """Per-row error variance from a-posteriori residuals; rows whitened by it.

    ``floor``: the smallest σ of each row (scalar or ``(m,)``, e.g. the torque sensor's σ in the
    rows' units) — a weight never exceeds ``1/floor²``, the sensor's weight; ``time_constant`` [s]:
    memory of the variance estimate (a plain mean of the residuals until that long has been seen,
    so the first rows' residuals against the prior fade quickly); ``fs`` [Hz]: the row rate. Per
    row: :meth:`whiten` with the current estimate, fold the rows in, then :meth:`observe` with the
    new estimate.
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
        self.count = 0  # residuals averaged so far

    def reset(self) -> None:
        self.variance = None
        self.count = 0

    @property
    def sigma(self) -> np.ndarray | None:
        """Current σ̂ of every row ``(m,)`` (floor included), or None before the first rows."""
        return None if self.variance is None else np.sqrt(np.maximum(self.variance, self.floor_sq))

    def whiten(self, a: np.ndarray, y: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``a (m, p)``, ``y (m,)`` divided by their current σ̂. The first rows start σ̂ at
        their residual against ``theta``, the estimate before them (large while it is still the
        prior: the first rows count little rather than a sensor's full weight each, which would
        pin the estimate to them however poorly they fit)."""
        a, y = np.atleast_2d(a), np.atleast_1d(y)
        if self.variance is None or self.variance.shape != y.shape:
            self.variance, self.count = (y - a @ theta) ** 2, 1
        scale = 1.0 / np.sqrt(np.maximum(self.variance, self.floor_sq))
        return a * scale[:, None], y * scale

    def observe(self, a: np.ndarray, y: np.ndarray, theta: np.ndarray) -> None:
        """Update σ̂ with the residuals ``y − a θ`` of (unwhitened) rows and the estimate ``θ``
        after they were folded in."""
        a, y = np.atleast_2d(a), np.atleast_1d(y)
        self.count += 1  # a plain mean until the memory is full, then exponential forgetting
        gain = max(self.gain, 1.0 / self.count)
        self.variance = self.variance + gain * ((y - a @ theta) ** 2 - self.variance)
