"""The effort lag a recording fits best, for ``sysid identify --effort-lag auto``: a driver whose
effort timing is unknown (:mod:`~sysid_ros.core.data.effort_timing`).

For each lag of a grid the data are prepared as the batch methods prepare them (the effort taken
at ``t + lag·period``) and fitted by unconstrained least squares; the torque residual is
smallest at the lag that pairs each effort with its own acceleration. On the emulated Damiao arm
(whose effort lags by 0.5) the residual fell from 0.168 N·m at −0.5 to 0.058 at 0.5 and rose
again to 0.082 at 1.0. The lag returned is the grid's best, refined by the vertex of the parabola
through it and its two neighbours (never beyond them). Each lag costs one preparation (about as
long as ``sysid identify`` takes to prepare the data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from sysid_ros.core.batch.identify import prepare
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.effort_timing import ONLINE_LIMIT
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import DataError
from sysid_ros.core.model.target import Target

#: [sample periods] the lags tried: a simulator's (−0.5) to a full period late
GRID: tuple[float, ...] = (-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class LagSearch:
    """``lag`` [sample periods]: the best fit's; ``residuals``: ``(lag, rms torque residual
    [N·m])`` of every lag tried, in grid order."""

    lag: float
    residuals: tuple[tuple[float, float], ...]

    def describe(self) -> str:
        tried = ", ".join(f"{lag:g}: {rms:.4g}" for lag, rms in self.residuals)
        return (f"effort lag {self.lag:.2f} sample periods fits best (least-squares torque residual "
                f"[N·m] by lag: {tried})")


def find_effort_lag(dataset: Dataset, target: Target, settings: Preprocessing, *,
                    grid: Sequence[float] = GRID, online: bool = False) -> LagSearch:
    """The effort lag of ``dataset`` that ``target``'s regression fits best (module docstring).
    ``online``: only lags within ±:data:`~sysid_ros.core.data.effort_timing.ONLINE_LIMIT` (what
    the online estimators take). :class:`DataError` if no lag leaves rows."""
    lags = sorted({float(g) for g in grid if not online or abs(g) <= ONLINE_LIMIT})
    if len(lags) < 3:
        raise DataError(f"an effort lag search needs at least 3 lags, got {lags}")
    residuals = []
    for lag in lags:
        prep = prepare(dataset, target, replace(settings, effort_lag=lag), search_stribeck=False,
                       search_sigmoid=False)
        a, y = prep.x[prep.mask], prep.y[prep.mask]
        if not len(y):
            raise DataError(f"{dataset.source}: no regression rows to search the effort lag with")
        theta, *_ = np.linalg.lstsq(a, y, rcond=None)
        residuals.append(float(np.sqrt(np.mean((a @ theta - y) ** 2))))
    best = int(np.argmin(residuals))
    lag = lags[best]
    if 0 < best < len(lags) - 1:  # the parabola's vertex through the best and its neighbours
        (x0, x1, x2), (r0, r1, r2) = lags[best - 1:best + 2], residuals[best - 1:best + 2]
        denom = (x0 - x1) * (x0 - x2) * (x1 - x2)
        a2 = (x2 * (r1 - r0) + x1 * (r0 - r2) + x0 * (r2 - r1)) / denom
        b1 = (x2 * x2 * (r0 - r1) + x1 * x1 * (r2 - r0) + x0 * x0 * (r1 - r2)) / denom
        if a2 > 0:
            lag = float(np.clip(-b1 / (2 * a2), x0, x2))
    return LagSearch(lag, tuple(zip(lags, residuals, strict=True)))
