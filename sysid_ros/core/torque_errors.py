"""Torque-prediction errors, defined once: measured vs predicted torque ``r = τ − τ̂`` on the rows
used — per-joint RMSE ``√mean(r_j²)`` [N·m], pooled RMS ``√mean(r²)`` over every row of every joint
[N·m], relative error ``100 ‖r‖ / ‖τ‖`` [%] (also per joint), and the normalised cross-correlation
(Pearson, zero lag) per joint.

Every result's diagnostics carry them (:mod:`sysid_ros.core.result`); the report's figures of merit
(:mod:`sysid_ros.core.report.metrics`) build on them. This module sits below both.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import json_number, json_numbers

__all__ = ["TorqueErrors", "ncc", "shifted_ncc", "torque_errors"]


# ------------------------------------------------------------------------------- torque errors
def ncc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Normalised cross-correlation (Pearson, zero lag) of the columns of ``a``, ``b`` ``(N, n)``:
    ``(n,)``, NaN for a column without variation."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    den = np.sqrt((a * a).sum(axis=0) * (b * b).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(axis=0) / np.where(den > 0, den, 1.0), np.nan)


def shifted_ncc(a: np.ndarray, b: np.ndarray, max_shift: int) -> np.ndarray:
    """The dual-metric seed's score (§IV): per column, the largest :func:`ncc` of ``a`` shifted
    against ``b`` ``(N, n)`` by s samples, |s| ≤ ``max_shift`` (the seed: ±5° of the slowest
    motion's period), each shift on the overlapping N − |s| rows: ``(n,)``, NaN for a column
    without variation at every shift."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"shifted_ncc expects two (N, n) arrays of one shape, got {a.shape} and {b.shape}")
    shift = int(max_shift)
    if not 0 <= shift < a.shape[0] - 1:
        raise ValueError(f"shifted_ncc expects 0 <= max_shift < N - 1 = {a.shape[0] - 1}, got {max_shift}")
    scores = [ncc(a[max(s, 0):a.shape[0] + min(s, 0)], b[max(-s, 0):b.shape[0] + min(-s, 0)])
              for s in range(-shift, shift + 1)]
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
        return np.nanmax(np.array(scores), axis=0)


@dataclass(frozen=True)
class TorqueErrors:
    """Torque prediction errors on ``n_rows`` rows (see the module docstring).

    ``rmse (n,)`` [N·m] and ``relative_joint (n,)`` [%], ``ncc (n,)``: per joint, NaN for a joint
    without rows; ``rms`` [N·m]: pooled over every row; ``relative`` [%]: ``100 ‖r‖ / ‖τ‖``.
    """

    rmse: np.ndarray
    rms: float
    relative: float
    relative_joint: np.ndarray
    ncc: np.ndarray
    n_rows: int

    @classmethod
    def unknown(cls, n_joints: int, *, rms: float = math.nan, n_rows: int = 0) -> TorqueErrors:
        """Figures that were not measured (NaN), except a pooled ``rms`` known otherwise."""
        nan = np.full(n_joints, np.nan)
        return cls(nan, float(rms), math.nan, nan.copy(), nan.copy(), int(n_rows))

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``torque_rmse``, ``ncc`` (per joint, null where unknown),
        ``relative_error_percent``, ``residual_rms`` (pooled)."""
        return {"torque_rmse": json_numbers(self.rmse), "ncc": json_numbers(self.ncc),
                "relative_error_percent": json_number(self.relative), "residual_rms": json_number(self.rms),
                "relative_error_joint_percent": json_numbers(self.relative_joint), "rows": self.n_rows}


def torque_errors(measured: np.ndarray, predicted: np.ndarray, *, mask: np.ndarray | None = None,
                  joint: np.ndarray | None = None, n_joints: int | None = None) -> TorqueErrors:
    """Errors of ``predicted`` against ``measured`` torques.

    Either ``(N, n)`` arrays (``mask (N, n)`` selects the rows used, default all) or stacked
    regression rows ``(m,)`` with ``joint (m,)`` the joint of each row and ``n_joints``.
    """
    measured = np.asarray(measured, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    if measured.shape != predicted.shape:
        raise SysIdError(f"measured and predicted torques differ in shape: {measured.shape} vs "
                         f"{predicted.shape}")
    if joint is None:
        if measured.ndim != 2:
            raise SysIdError(f"expected torques of shape (N, n), got {measured.shape}")
        n_joints = measured.shape[1]
        sel = np.ones(measured.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        joint = np.broadcast_to(np.arange(n_joints), measured.shape)[sel]
        measured, predicted = measured[sel], predicted[sel]
    elif n_joints is None:
        raise SysIdError("torque_errors on stacked rows needs n_joints")
    resid = measured - predicted
    rmse, rel_j, corr = (np.full(n_joints, np.nan) for _ in range(3))
    for j in range(n_joints):
        sel = joint == j
        if np.any(sel):
            rmse[j] = np.sqrt(np.mean(resid[sel] ** 2))
            rel_j[j] = 100.0 * np.linalg.norm(resid[sel]) / max(np.linalg.norm(measured[sel]), 1e-300)
            corr[j] = ncc(measured[sel, None], predicted[sel, None])[0]
    rms = float(np.sqrt(np.mean(resid**2))) if resid.size else math.nan
    rel = float(100.0 * np.linalg.norm(resid) / max(np.linalg.norm(measured), 1e-300))
    return TorqueErrors(rmse, rms, rel, rel_j, corr, int(resid.size))
