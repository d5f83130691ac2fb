"""Control-loop timing figures: achieved rate, period jitter and percentiles, overruns and missed
cycles, over a sliding window of the most recent cycles (diagnostics) or a whole run (benchmark)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LoopTiming", "TimingSummary"]


@dataclass(frozen=True)
class TimingSummary:
    """Periods in seconds; ``rate`` [Hz] = 1 / mean period; ``jitter`` = standard deviation of the
    period; ``late_*``: the loop's latency, how late each cycle started against its schedule
    (the thread's wake-up latency plus any overrun before it); ``overruns``: cycles whose work
    outlasted the period; ``missed``: scheduled cycles skipped because of overruns (totals since
    the start)."""

    cycles: int
    rate: float
    mean: float
    p50: float
    p99: float
    max: float
    jitter: float
    work_mean: float
    work_max: float
    overruns: int
    missed: int
    late_p50: float = 0.0
    late_p99: float = 0.0
    late_max: float = 0.0


class LoopTiming:
    """Ring buffers of the last ``window`` cycle periods and work durations [s]; ``keep_all``
    stores every period (a benchmark's whole run)."""

    def __init__(self, window: int = 5000, *, keep_all: bool = False) -> None:
        self.window = int(window)
        self._periods = np.zeros(self.window)
        self._work = np.zeros(self.window)
        self._late = np.zeros(self.window)
        self._count = 0
        self._last_start: float | None = None
        self.overruns = 0
        self.missed = 0
        self.all_periods: list[float] | None = [] if keep_all else None
        self.all_work: list[float] | None = [] if keep_all else None
        self.all_late: list[float] | None = [] if keep_all else None

    def reset(self) -> None:
        self._count = 0
        self._last_start = None
        self.overruns = self.missed = 0
        if self.all_periods is not None:
            self.all_periods.clear()
            self.all_work.clear()
            self.all_late.clear()

    def cycle(self, start: float, work: float, period: float, skipped: int, late: float = 0.0) -> None:
        """Record one cycle that began at ``start`` [s, monotonic], ``late`` [s] after its
        scheduled start, and worked ``work`` [s]; ``skipped`` scheduled cycles were dropped after it."""
        if self._last_start is not None:
            dt = start - self._last_start
            k = self._count % self.window
            self._periods[k] = dt
            self._work[k] = work
            self._late[k] = late
            self._count += 1
            if self.all_periods is not None:
                self.all_periods.append(dt)
                self.all_work.append(work)
                self.all_late.append(late)
        self._last_start = start
        if work > period:
            self.overruns += 1
        self.missed += skipped

    def summary(self, *, whole_run: bool = False) -> TimingSummary | None:
        """Figures over the window (``whole_run``: every stored period), ``None`` before two cycles."""
        if whole_run and self.all_periods:
            periods, work, late = (np.asarray(x) for x in (self.all_periods, self.all_work, self.all_late))
        else:
            n = min(self._count, self.window)
            if n == 0:
                return None
            periods, work, late = self._periods[:n], self._work[:n], self._late[:n]
        if periods.size == 0:
            return None
        mean = float(periods.mean())
        return TimingSummary(cycles=int(periods.size), rate=1.0 / mean if mean > 0 else 0.0, mean=mean,
                             p50=float(np.percentile(periods, 50)), p99=float(np.percentile(periods, 99)),
                             max=float(periods.max()), jitter=float(periods.std()),
                             work_mean=float(work.mean()), work_max=float(work.max()),
                             overruns=self.overruns, missed=self.missed,
                             late_p50=float(np.percentile(late, 50)), late_p99=float(np.percentile(late, 99)),
                             late_max=float(late.max()))
