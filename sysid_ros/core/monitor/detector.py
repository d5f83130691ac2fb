"""Contact detection on the momentum observer's residual: per-joint thresholds from the residual
statistics of a contact-free run, and events with hysteresis.

Thresholds (per joint ``j``), from the residual ``r_j`` [N·m] of a contact-free calibration run
with the same model (e.g. the run the model was identified on)::

    threshold_j = max(k · rms_j, peak_factor · peak_j) + margin

``rms_j`` its RMS and ``peak_j`` its largest magnitude; ``k`` (default 6) covers noise-like
residuals, ``peak_factor`` (default 1.25) the heavy tail of model error a Gaussian figure misses
(Coulomb friction at velocity reversals: the sign flip of ``Fc·sign(q̇)`` is smooth in a real joint),
``margin`` [N·m] (default 0.02) an absolute floor.
A joint enters contact when ``|r_j| > threshold_j`` and leaves it when
``|r_j| < release · threshold_j`` (default ``release = 0.5``); one contact gives one ``contact``
event at its onset (time, signed residual) and one ``released`` event at its end (peak
``|r_j|``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sysid_ros.core.errors import DataError, SysIdError

__all__ = ["DEFAULT_MARGIN", "DEFAULT_PEAK_FACTOR", "DEFAULT_RELEASE", "DEFAULT_SIGMA_FACTOR",
           "ContactDetector", "ContactEvent", "Thresholds", "detect_contacts"]

DEFAULT_SIGMA_FACTOR = 6.0
DEFAULT_PEAK_FACTOR = 1.25
DEFAULT_MARGIN = 0.02  # N·m
DEFAULT_RELEASE = 0.5


@dataclass(frozen=True)
class Thresholds:
    """Per-joint detection thresholds ``values (n,)`` [N·m], with how they were derived:
    ``rms (n,)`` and ``peak (n,)`` [N·m] of the calibration residual (NaN when given directly),
    ``sigma_factor`` k, ``peak_factor``, ``margin`` [N·m], calibration ``samples``."""

    values: np.ndarray
    rms: np.ndarray
    peak: np.ndarray
    sigma_factor: float = math.nan
    peak_factor: float = math.nan
    margin: float = math.nan
    samples: int = 0

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=float)
        if values.ndim != 1 or not (np.all(np.isfinite(values)) and np.all(values > 0)):
            raise SysIdError(f"thresholds must be finite numbers > 0 [N·m], got {values.tolist()}")
        object.__setattr__(self, "values", values)
        for name in ("rms", "peak"):
            object.__setattr__(self, name, np.broadcast_to(np.asarray(getattr(self, name), dtype=float),
                                                           values.shape))

    @classmethod
    def calibrate(cls, residual: np.ndarray, *, sigma_factor: float = DEFAULT_SIGMA_FACTOR,
                  peak_factor: float = DEFAULT_PEAK_FACTOR, margin: float = DEFAULT_MARGIN) -> Thresholds:
        """``max(k · rms, peak_factor · peak) + margin`` per column of a contact-free
        ``residual (N, n)`` [N·m]."""
        residual = np.asarray(residual, dtype=float)
        if residual.ndim != 2 or residual.shape[0] < 2 or not np.all(np.isfinite(residual)):
            raise DataError(f"calibration needs a finite residual of shape (N >= 2, n), got {residual.shape}")
        factors = (sigma_factor, peak_factor, margin)
        if not (all(math.isfinite(x) and x >= 0 for x in factors) and sigma_factor + peak_factor > 0):
            raise SysIdError("expected sigma_factor >= 0, peak_factor >= 0 (not both 0) and margin >= 0 N·m, "
                             f"got {sigma_factor}, {peak_factor}, {margin}")
        rms = np.sqrt(np.mean(residual**2, axis=0))
        peak = np.abs(residual).max(axis=0)
        values = np.maximum(sigma_factor * rms, peak_factor * peak) + margin
        if not np.all(values > 0):
            raise DataError("the calibration residual is exactly zero on some joint and the margin is 0: "
                            "no threshold to derive (give a margin > 0 N·m)")
        return cls(values, rms, peak, float(sigma_factor), float(peak_factor), float(margin),
                   residual.shape[0])

    @classmethod
    def given(cls, values: Sequence[float] | float, n: int) -> Thresholds:
        """Thresholds stated directly: one value for every joint or ``n`` values [N·m]."""
        arr = np.atleast_1d(np.asarray(values, dtype=float))
        if arr.size == 1:
            arr = np.full(n, arr[0])
        if arr.shape != (n,):
            raise SysIdError(f"expected 1 or {n} thresholds [N·m], got {arr.size}")
        return cls(arr, np.full(n, math.nan), np.full(n, math.nan))

    def as_dict(self, joint_names: Sequence[str]) -> dict[str, Any]:
        return {"thresholds_nm": dict(zip(joint_names, self.values.tolist(), strict=True)),
                "calibration_rms_nm": dict(zip(joint_names, self.rms.tolist(), strict=True)),
                "calibration_peak_nm": dict(zip(joint_names, self.peak.tolist(), strict=True)),
                "sigma_factor": self.sigma_factor, "peak_factor": self.peak_factor, "margin_nm": self.margin,
                "samples": self.samples}


@dataclass(frozen=True)
class ContactEvent:
    """A contact on ``joint`` (name; ``index`` in the model's dof order) at ``time`` [s]:
    ``kind`` "contact" (onset; ``magnitude`` the signed residual [N·m] that crossed) or
    "released" (end; ``magnitude`` the peak ``|r|`` [N·m] of the contact, ``duration`` [s])."""

    kind: Literal["contact", "released"]
    joint: str
    index: int
    time: float
    magnitude: float
    threshold: float
    duration: float = 0.0

    def describe(self) -> str:
        if self.kind == "contact":
            return (f"t = {self.time:.4f} s: contact on {self.joint}, residual {self.magnitude:+.3f} N·m "
                    f"(threshold {self.threshold:.3f} N·m)")
        return (f"t = {self.time:.4f} s: {self.joint} released after {self.duration:.3f} s, peak "
                f"{self.magnitude:.3f} N·m")

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "joint": self.joint, "time_s": self.time, "magnitude_nm": self.magnitude,
                "threshold_nm": self.threshold, "duration_s": self.duration}


class ContactDetector:
    """Hysteresis on the residual, sample by sample (see the module docstring)."""

    def __init__(self, joint_names: Sequence[str], thresholds: Thresholds, *,
                 release: float = DEFAULT_RELEASE) -> None:
        self.joint_names = tuple(joint_names)
        if thresholds.values.shape != (len(self.joint_names),):
            raise SysIdError(f"expected {len(self.joint_names)} thresholds, got {thresholds.values.size}")
        if not (math.isfinite(release) and 0 < release <= 1):
            raise SysIdError(f"release must be in (0, 1] (a fraction of the threshold), got {release}")
        self.thresholds = thresholds
        self.release = float(release)
        n = len(self.joint_names)
        self.in_contact = np.zeros(n, dtype=bool)
        self._since = np.zeros(n)
        self._peak = np.zeros(n)

    def update(self, t: float, residual: np.ndarray) -> list[ContactEvent]:
        """Events of the sample at ``t`` [s] with ``residual (n,)`` [N·m] (usually none)."""
        mag = np.abs(residual)
        thr = self.thresholds.values
        events = []
        self._peak = np.where(self.in_contact, np.maximum(self._peak, mag), self._peak)
        for j in np.flatnonzero(~self.in_contact & (mag > thr)):
            self.in_contact[j], self._since[j], self._peak[j] = True, t, mag[j]
            events.append(ContactEvent("contact", self.joint_names[j], int(j), float(t), float(residual[j]),
                                       float(thr[j])))
        for j in np.flatnonzero(self.in_contact & (mag < self.release * thr)):
            self.in_contact[j] = False
            events.append(ContactEvent("released", self.joint_names[j], int(j), float(t),
                                       float(self._peak[j]), float(thr[j]), float(t - self._since[j])))
        return events


def detect_contacts(t: np.ndarray, residual: np.ndarray, joint_names: Sequence[str], thresholds: Thresholds,
                    *, release: float = DEFAULT_RELEASE) -> list[ContactEvent]:
    """Every event of a recorded residual ``(N, n)`` at times ``t (N,)`` [s], in time order."""
    residual = np.asarray(residual, dtype=float)
    if residual.shape != (len(t), len(joint_names)):
        raise DataError(f"expected a residual of shape ({len(t)}, {len(joint_names)}), got {residual.shape}")
    detector = ContactDetector(joint_names, thresholds, release=release)
    # only samples where something can change: those above the release level and the one after
    # each (where a contact can end)
    above = np.flatnonzero(np.any(np.abs(residual) > release * thresholds.values, axis=1))
    candidates = np.union1d(above, above + 1)
    events: list[ContactEvent] = []
    for k in candidates[candidates < len(t)]:
        events += detector.update(float(t[k]), residual[k])
    return events
