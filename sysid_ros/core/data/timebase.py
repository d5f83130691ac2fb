"""The time base of a recording: plausible rate, uniform sampling, dropped cycles bridged.

Vendor logs are rarely sampled on a clean grid: stamps jitter or alternate (10/12 ms), cycles are
dropped (8.5 ms once in a 1 kHz log), the time column may be in milliseconds. Differentiating on
a wrong grid biases accelerations (and everything identified from them); refusing a log for one
dropped cycle throws good data away. :func:`regularise`:

* refuses a median rate outside [:data:`MIN_RATE`, :data:`MAX_RATE`] Hz, naming the likely unit
  mistake (a time column in ms or ns);
* splits at steps longer than ``max_bridge`` [s] (automatic: 5 ms or 3.5 median periods, whichever
  is longer) (real gaps: the batch methods use the pieces as
  separate segments, :mod:`sysid_ros.core.data.segments`);
* within each piece, if the steps deviate from the median by more than ``jitter_tolerance``
  (relative) or a few cycles are missing (a step of more than 1.5 periods, up to ``max_bridge``),
  resamples the piece onto a uniform grid at the mean period of its regular steps: positions and
  measured velocities by a cubic spline through the samples (C² across the bridged cycles, so the
  second differences stay smooth), torques linearly; else leaves the samples untouched.

Gaps are stated in the file's own stamps: the report's ``gaps_at`` hold ``(t [s], length [s])`` of
each step that splits the data as the file has it (the sample before the gap and the step to the
next), and a resampled dataset carries them (``meta["file_gaps"]``) so that
:meth:`~sysid_ros.core.data.dataset.Dataset.gaps` describes its gaps in the file's terms, not as
the longer step between two resampled pieces. ``period`` puts a second recording (a held-out
validation part) on the grid of the first one.

What was done is a :class:`TimebaseReport` (printed by ``sysid identify``, stored in
result.json under ``diagnostics.extra.data.timebase``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from sysid_ros.core.data.dataset import FILE_GAPS, Dataset
from sysid_ros.core.data.stream_time import gap_steps
from sysid_ros.core.errors import DataError

MIN_RATE = 5.0        # [Hz] slower logs carry no dynamics (or their time is not in seconds)
MAX_RATE = 100_000.0  # [Hz] faster "logs" have their time in ms/us/ns units read as seconds
#: automatic ``max_bridge`` (a negative value): steps up to this many median periods, and up to
#: :data:`BRIDGE_SECONDS`, are dropped cycles (two cycles lost in a row in a 100 Hz vendor log, a
#: few at 1 kHz), bridged; longer ones are gaps
BRIDGE_PERIODS = 3.5
BRIDGE_SECONDS = 0.005


@dataclass(frozen=True)
class TimebaseReport:
    """``rate`` [Hz] (1 / median step), ``jitter`` (relative std of the regular steps),
    ``deviation`` (largest relative deviation of a regular step from the median), ``bridged``:
    ``(t [s], length [s])`` of each dropped-cycle gap interpolated over, ``gaps``: how many
    longer gaps split the data, ``resampled``: whether the samples were moved onto a uniform grid
    of ``period`` [s]; ``gaps_at``: ``(t [s], length [s])`` of each of those gaps in the file's
    stamps."""

    rate: float
    jitter: float
    deviation: float
    bridged: tuple[tuple[float, float], ...]
    gaps: int
    resampled: bool
    period: float
    gaps_at: tuple[tuple[float, float], ...] = ()
    #: the steps needed resampling (jitter or dropped cycles), whether or not it was done
    irregular: bool = False

    def describe(self) -> str:
        text = (f"time base: {self.rate:.1f} Hz (median step {1e3 / self.rate:.3f} ms, jitter "
                f"{100 * self.jitter:.1f} %, largest deviation {100 * self.deviation:.0f} %)")
        if self.bridged:
            text += (f"; {len(self.bridged)} dropped-cycle gap(s) up to "
                     f"{1e3 * max(length for _, length in self.bridged):.1f} ms"
                     + (" bridged" if self.resampled else ""))
        if self.resampled:
            text += (f"; resampled onto a uniform {1e3 * self.period:.3f} ms grid (cubic spline of q "
                     "and measured q̇, linear τ)")
        elif self.irregular:
            text += "; irregular, used as recorded (resampling off)"
        else:
            text += "; uniform, used as recorded"
        if self.gaps:
            text += f"; {self.gaps} longer gap(s) split the data"
            if self.gaps_at:
                text += " (" + ", ".join(f"{1e3 * length:.2f} ms after t = {t:.6g} s"
                                         for t, length in self.gaps_at[:3])
                text += ", ..." if len(self.gaps_at) > 3 else ""
                text += ", the file's stamps)"
        return text

    def as_dict(self) -> dict:
        return {"rate_hz": self.rate, "jitter": self.jitter, "largest_deviation": self.deviation,
                "bridged": [{"t": t, "length_ms": 1e3 * length} for t, length in self.bridged],
                "gaps": self.gaps, "resampled": self.resampled, "period_s": self.period,
                "gaps_at": [{"t": t, "length_ms": 1e3 * length} for t, length in self.gaps_at]}


def check_rate(t: np.ndarray, where: str) -> float:
    """The median rate [Hz] of stamps ``t`` [s]; :class:`DataError` if it is implausible."""
    med = float(np.median(np.diff(t)))
    rate = 1.0 / med
    if rate < MIN_RATE:
        raise DataError(f"{where}: median time step {med:g} s ({rate:.3g} Hz) is implausible for "
                        f"identification (expected at least {MIN_RATE:g} Hz): is the time column in "
                        "milliseconds? Times must be in seconds")
    if rate > MAX_RATE:
        raise DataError(f"{where}: median time step {med:g} s ({rate:.3g} Hz) is implausible "
                        f"(expected at most {MAX_RATE:g} Hz): are the times in seconds?")
    return rate


def regularise(ds: Dataset, *, max_bridge: float = -1.0, jitter_tolerance: float = 0.1,
               resample: bool = True, period: float | None = None) -> tuple[Dataset, TimebaseReport]:
    """``ds`` on a uniform time base where it is not (see the module docstring), and what was
    done. ``max_bridge`` [s]: longest step interpolated over (longer steps stay gaps); negative:
    automatic, the larger of :data:`BRIDGE_SECONDS` and :data:`BRIDGE_PERIODS` median periods;
    ``jitter_tolerance``: relative step deviation accepted as uniform; ``resample`` False only
    checks and reports; ``period`` [s]: the grid to use (another recording's, so that both are
    filtered and decimated alike): the data are resampled onto it unless their own regular steps
    already are that period (to 1e-6)."""
    t = ds.t
    rate = check_rate(t, ds.source)
    dt = np.diff(t)
    med = 1.0 / rate
    dropped = gap_steps(dt, med)  # the one gap rule
    limit = max(BRIDGE_SECONDS, BRIDGE_PERIODS * med) if max_bridge < 0 else max_bridge
    split_at = dropped & (dt > limit)
    bridge = dropped & ~split_at
    regular = dt[~dropped]
    jitter = float(np.std(regular) / np.mean(regular)) if regular.size else 0.0
    deviation = float(np.max(np.abs(regular - med)) / med) if regular.size else 0.0
    bridged = tuple((float(t[k]), float(dt[k])) for k in np.flatnonzero(bridge))
    gaps_at = tuple((float(t[k]), float(dt[k])) for k in np.flatnonzero(split_at))
    own = float(np.mean(regular)) if regular.size else med
    needed = bool(bridge.any()) or deviation > jitter_tolerance
    if period is not None:
        if not (np.isfinite(period) and period > 0):
            raise DataError(f"{ds.source}: the grid period must be a finite number > 0 s, got {period}")
        needed = needed or abs(own - period) > 1e-6 * period or deviation > 1e-6
    else:
        period = own
    report = TimebaseReport(rate, jitter, deviation, bridged, int(split_at.sum()),
                            resample and needed, float(period), gaps_at, needed)
    if not report.resampled:
        return ds, report
    bounds = [0, *(int(k) + 1 for k in np.flatnonzero(split_at)), len(t)]
    pieces = [_resampled(ds, a, b, period) for a, b in itertools.pairwise(bounds)]
    tt, q, dq, tau = (np.concatenate([p[k] for p in pieces]) for k in range(4))
    meta = {k: v for k, v in ds.meta.items() if not ds.per_sample(v)}  # per-sample arrays: gone
    meta[FILE_GAPS] = gaps_at
    return replace(ds, t=tt, q=q, dq=dq, tau=tau, meta=meta), report


def _resampled(ds: Dataset, a: int, b: int, period: float):
    """Samples ``a:b`` on the grid ``t[a] + k·period`` up to ``t[b-1]``: ``(t, q, dq, tau)``."""
    t = ds.t[a:b]
    if len(t) < 4:  # too short to interpolate: left as is (the segment rules drop it anyway)
        return t, ds.q[a:b], ds.dq[a:b], ds.tau[a:b]
    grid = t[0] + period * np.arange(int(np.floor((t[-1] - t[0]) / period + 1e-9)) + 1)
    # SciPy's spline, imported here: its import (with scipy.optimize, ~0.8 s of CPU) is paid only by
    # logs that need resampling
    from scipy.interpolate import CubicSpline

    q = CubicSpline(t, ds.q[a:b], axis=0)(grid)
    dq_in = ds.dq[a:b]
    dq = np.full_like(q, np.nan)  # per joint: a column that is not finite throughout stays NaN
    measured = np.all(np.isfinite(dq_in), axis=0)
    if measured.any():
        dq[:, measured] = CubicSpline(t, dq_in[:, measured], axis=0)(grid)
    tau = np.column_stack([np.interp(grid, t, ds.tau[a:b, j]) for j in range(ds.tau.shape[1])])
    return grid, q, dq, tau
