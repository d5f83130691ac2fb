"""Identification results with their diagnostics, JSON-serialisable."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .base_params import BaseParameters


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


def _num(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x
