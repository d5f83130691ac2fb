"""Identification results with their diagnostics, JSON-serialisable."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.model.base_params import BaseParameters


@dataclass(frozen=True)
class Diagnostics:
    """Quality figures of a fit (SI units).

    ``rank``/``condition_number``: of the (weighted) base regressor actually solved, columns
    scaled to unit norm; ``residual_rms (nv,)``: torque residual per joint [N·m];
    ``relative_error``: ``100 ‖y − Xβ‖ / ‖y‖`` [%]; ``n_samples``/``n_rows``: samples and
    regression rows used; ``solve_time`` [s].
    """

    rank: int
    condition_number: float
    residual_rms: np.ndarray
    relative_error: float
    n_samples: int
    n_rows: int
    solve_time: float
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "condition_number": self.condition_number,
            "residual_rms": self.residual_rms.tolist(),
            "relative_error_percent": self.relative_error,
            "n_samples": self.n_samples,
            "n_rows": self.n_rows,
            "solve_time_s": self.solve_time,
            **self.extra,
        }


@dataclass(frozen=True)
class IdentificationResult:
    """An estimate: base parameters always, standard parameters when the method gives them."""

    method: str
    base: BaseParameters
    beta: np.ndarray
    beta_std: np.ndarray
    diagnostics: Diagnostics
    theta: np.ndarray | None = None
    theta_std: np.ndarray | None = None
    joint_names: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "base_parameters": {
                name: {"value": float(v), "std": _num(s)}
                for name, v, s in zip(self.base.names, self.beta, self.beta_std, strict=True)
            },
            "base": self.base.as_dict(),
            "diagnostics": self.diagnostics.as_dict(),
            "joint_names": list(self.joint_names),
        }
        if self.theta is not None:
            std = self.theta_std if self.theta_std is not None else np.full_like(self.theta, np.nan)
            out["parameters"] = {n: {"value": float(v), "std": _num(s)}
                                 for n, v, s in zip(self.base.param_names, self.theta, std, strict=True)}
        return out

    def to_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.as_dict(), indent=2) + "\n", encoding="utf-8")
        return path


def diagnostics_for(w: np.ndarray, rhs: np.ndarray, joint: np.ndarray, beta: np.ndarray, *,
                    n_joints: int, n_samples: int, solve_time: float,
                    extra: dict[str, Any] | None = None) -> Diagnostics:
    """Diagnostics of base parameters ``beta`` on regression rows ``w (m, r)``, ``rhs (m,)``.

    Adds the normalised cross-correlation (Pearson, zero lag) of measured and predicted torque per
    joint to ``extra["ncc"]``.
    """
    pred = w @ beta
    resid = rhs - pred
    scale = np.linalg.norm(w, axis=0)
    ws = w / np.where(scale > 0, scale, 1.0)
    sv = np.linalg.svd(ws, compute_uv=False)
    rank = int(np.sum(sv > 1e-10 * sv[0])) if sv.size else 0
    rms, ncc = np.full(n_joints, np.nan), np.full(n_joints, np.nan)
    for j in range(n_joints):
        sel = joint == j
        if np.any(sel):
            rms[j] = np.sqrt(np.mean(resid[sel] ** 2))
            a, b = rhs[sel] - rhs[sel].mean(), pred[sel] - pred[sel].mean()
            denom = np.linalg.norm(a) * np.linalg.norm(b)
            ncc[j] = float(a @ b / denom) if denom > 0 else np.nan
    info = dict(extra or {})
    info["ncc"] = [None if np.isnan(v) else float(v) for v in ncc]
    return Diagnostics(rank=rank, condition_number=float(sv[0] / sv[rank - 1]) if rank else float("inf"),
                       residual_rms=rms,
                       relative_error=float(100.0 * np.linalg.norm(resid) / max(np.linalg.norm(rhs), 1e-300)),
                       n_samples=int(n_samples), n_rows=int(w.shape[0]), solve_time=float(solve_time),
                       extra=info)


def _num(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x
