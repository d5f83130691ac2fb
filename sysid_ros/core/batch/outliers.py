"""Torque and state outliers: a robust test on the residuals of a least-squares fit.

A single corrupt sample (an effort logged ×1000, a position glitch that differentiation turns into
a huge acceleration) pulls a least-squares fit far off without any other symptom. The rule, in one
place: fit the base parameters by ordinary least squares on the rows used, take each joint's
residuals ``r``, their median and robust scale ``σ = 1.4826 · MAD`` (the normal-consistent median
absolute deviation, at least 1e-3 of the joint's RMS torque), and flag the rows with
``|r − median| > threshold · σ``; refit without them and test again (two passes, so one huge
outlier cannot hide others by bending the first fit). Gaussian noise passes an 8 σ test with
probability 1 − 1e-15 per row: what is flagged is data the model cannot explain, reported with its
time, joint and size; dropping it is the caller's choice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sysid_ros.core import linalg as rla

#: rows further than this many robust standard deviations from their joint's median residual
DEFAULT_THRESHOLD = 8.0
#: normal-consistency factor of the median absolute deviation
_MAD_SCALE = 1.482602218505602
#: smallest robust scale, relative to the joint's RMS torque
_RELATIVE_FLOOR = 1e-3


@dataclass(frozen=True)
class Outliers:
    """Rows flagged by :func:`detect`: ``rows (K, n)`` bool, per joint robust scale ``sigma (n,)``
    [N·m], the residual ``residual (K, n)`` [N·m] of the last fit, the row times ``t (K,)`` [s]."""

    rows: np.ndarray
    sigma: np.ndarray
    residual: np.ndarray
    t: np.ndarray
    threshold: float

    @property
    def count(self) -> int:
        return int(self.rows.sum())

    def times(self) -> np.ndarray:
        """[s] times of the rows with at least one flagged joint."""
        return self.t[np.any(self.rows, axis=1)]

    def describe(self, joint_names: tuple[str, ...] | list[str]) -> str:
        """One line: how many, where the worst is and how big."""
        if not self.count:
            return f"no torque outliers (rows within {self.threshold:g} robust σ of the fit)"
        ratio = np.where(self.rows, np.abs(self.residual) / np.maximum(self.sigma, 1e-300), 0.0)
        k, j = (int(i) for i in np.unravel_index(np.argmax(ratio), ratio.shape))
        span = self.times()
        return (f"{self.count} torque outlier row(s) at {len(span)} sample time(s) in "
                f"t={span[0]:.3f}..{span[-1]:.3f} s: residual beyond {self.threshold:g} robust σ of the "
                f"fit; worst joint {joint_names[j]!r} at t={self.t[k]:.6f} s, {self.residual[k, j]:+.4g} "
                f"N·m = {ratio[k, j]:.0f} σ (σ = {self.sigma[j]:.3g} N·m)")

    def as_dict(self, joint_names: tuple[str, ...] | list[str]) -> dict:
        return {"count": self.count, "threshold_sigma": self.threshold,
                "sigma": dict(zip(joint_names, self.sigma.tolist(), strict=True)),
                "times": self.times().tolist()[:100]}


def _fit_residual(x: np.ndarray, y: np.ndarray, use: np.ndarray) -> np.ndarray:
    beta = rla.lstsq(x[use], y[use])
    return y - np.einsum("knc,c->kn", x, beta)


def detect(x: np.ndarray, y: np.ndarray, mask: np.ndarray, t: np.ndarray, *,
           threshold: float = DEFAULT_THRESHOLD, passes: int = 2) -> Outliers:
    """Flag rows whose residual is an outlier (see the module).

    ``x (K, n, c)`` base regressor, ``y (K, n)`` torque [N·m], ``mask (K, n)`` rows used,
    ``t (K,)`` [s]. Joints with fewer than 10 rows are not tested.
    """
    if not (np.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold must be a finite number > 0, got {threshold}")
    flagged = np.zeros(mask.shape, dtype=bool)
    sigma = np.zeros(mask.shape[1])
    resid = np.zeros(mask.shape)
    for _ in range(passes):
        use = mask & ~flagged
        if use.sum() <= x.shape[2]:
            break
        resid = _fit_residual(x, y, use)
        new = np.zeros_like(flagged)
        for j in range(mask.shape[1]):
            rj = resid[use[:, j], j]
            if rj.size < 10:
                continue
            med = np.median(rj)
            # a floor of 1e-3 of the joint's RMS torque: noise-free data (simulation) has residuals
            # at rounding level, whose MAD would make every filter edge an "outlier"
            floor = _RELATIVE_FLOOR * float(np.sqrt(np.mean(y[use[:, j], j] ** 2)))
            sigma[j] = max(_MAD_SCALE * float(np.median(np.abs(rj - med))), floor)
            scale = sigma[j] if sigma[j] > 0 else np.finfo(float).tiny
            new[:, j] = mask[:, j] & (np.abs(resid[:, j] - med) > threshold * scale)
        if np.array_equal(new, flagged):
            break
        flagged = new
    return Outliers(flagged, sigma, resid, np.asarray(t, dtype=float), float(threshold))
