"""The two rules of a sampled stream, each in one place: the time of a message (stamps) and where
samples are missing (gaps).

Every path that reads joint states takes them from here: the bag reader (batch), a dataset's gaps
(:meth:`~sysid_ros.core.data.dataset.Dataset.gaps`, what segments are cut at), the recorder's loss
count, the online session (:class:`~sysid_ros.core.online.session.OnlineSession`) and the nodes
that read live joint states (through :class:`~sysid_ros.core.online.stream.JointStream`).

**Stamps** (:class:`StampPolicy`). A message's time is its header stamp; a stamp of 0 is a time
like any other (a simulation's first joint state is stamped exactly 0). A stream whose first two
stamps are both 0 comes from a driver that does not stamp: every message of it, the first
included, takes the time it was received (a node's clock, a bag's log time), with one warning.
A first message stamped 0 is therefore held until the second one tells which it is; a stream that
ends after one message stamped 0 is stamped (that sample is at t = 0).

**Gaps** (:func:`gap_steps`, :func:`find_gaps`, :class:`GapTracker`). A step between consecutive
samples longer than ``factor`` periods is a gap; it misses ``round(step / period) − 1`` samples
(at least 1). ``factor`` is :data:`GAP_FACTOR` (1.5: one missing sample is a gap) for finding lost
samples; the online session restarts its filters only at gaps of its option ``gap_periods``
periods (the same rule with that factor). The period is the stream's: its nominal period when the
caller knows it (the online session's ``sample_rate``), else the median step (a whole recording)
or the running median of the last steps (a live stream whose rate nobody told: the recorder). On
stamps of one period all three report the same gaps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

__all__ = ["GAP_FACTOR", "Gap", "GapTracker", "StampPolicy", "find_gaps", "gap_steps", "missing_samples",
           "stream_times"]

log = logging.getLogger(__name__)

#: a step longer than this many periods is a gap (one missing sample is one)
GAP_FACTOR = 1.5

Item = TypeVar("Item")


# ------------------------------------------------------------------------------------------ gaps
@dataclass(frozen=True)
class Gap:
    """A gap before sample ``index``: the previous sample is at ``t`` [s], the step is ``length``
    [s], about ``missing`` samples (``round(length / period) - 1``, at least 1) are missing."""

    index: int
    t: float
    length: float
    missing: int

    def describe(self) -> str:
        return (f"gap of {self.length * 1e3:.1f} ms after t={self.t:.6f} s (before sample "
                f"{self.index}, {self.missing} sample{'s' if self.missing != 1 else ''} missing)")


def gap_steps(steps, period: float, factor: float = GAP_FACTOR) -> np.ndarray:
    """Which of the steps ``(K,)`` [s, or any unit of ``period``] are gaps: longer than ``factor``
    periods (a boolean ``(K,)``)."""
    return np.asarray(steps, dtype=float) > factor * period


def missing_samples(steps, period: float, factor: float = GAP_FACTOR) -> np.ndarray:
    """Samples missing in each of the steps ``(K,)``: ``round(step / period) − 1`` (at least 1) for
    a gap (:func:`gap_steps`), 0 otherwise (integers ``(K,)``)."""
    steps = np.asarray(steps, dtype=float)
    lost = np.maximum(np.rint(steps / period) - 1, 1).astype(np.int64)
    return np.where(gap_steps(steps, period, factor), lost, 0)


def find_gaps(t, period: float | None = None, factor: float = GAP_FACTOR) -> list[Gap]:
    """The gaps between the increasing times ``t (N,)`` [s], in time order; ``period`` [s]: the
    stream's nominal period (None: the median step)."""
    t = np.asarray(t, dtype=float)
    dt = np.diff(t)
    if dt.size == 0:
        return []
    period = float(np.median(dt)) if period is None else float(period)
    lost = missing_samples(dt, period, factor)
    return [Gap(int(k) + 1, float(t[k]), float(dt[k]), int(lost[k]))
            for k in np.flatnonzero(gap_steps(dt, period, factor))]


class GapTracker:
    """The gap rule on a live stream whose period is not told: the period is the running median
    of the last ``window`` steps that were not gaps (none is judged before ``warmup`` steps).
    :meth:`add` takes the next time (any unit, e.g. a stamp in ns) and returns the samples missing
    before it; times that do not advance are not steps, and a time of 0 (an unstamped message) is
    skipped. :attr:`missing` sums them."""

    def __init__(self, *, factor: float = GAP_FACTOR, window: int = 64, warmup: int = 3) -> None:
        self.factor, self.window, self.warmup = factor, window, warmup
        self.missing = 0
        self._last: float | None = None
        self._steps: list[float] = []

    def add(self, time: float) -> int:
        """Take the next time; returns the samples missing before it."""
        last, self._last = self._last, time if time else self._last
        if not time or last is None or time <= last:
            return 0
        step = time - last
        missed = 0
        if len(self._steps) >= self.warmup:
            missed = int(missing_samples([step], float(np.median(self._steps)), self.factor)[0])
        if not missed:
            self._steps.append(step)
            if len(self._steps) > self.window:
                del self._steps[0]
        self.missing += missed
        return missed


# ---------------------------------------------------------------------------------------- stamps
class StampPolicy(Generic[Item]):
    """The data time [ns] of each message of one stream (module docstring): the header stamp, or
    the receive time of a stream whose first two stamps are 0.

    ``where`` names the stream in the one warning given when it is found unstamped; ``warn``
    takes that line (default: this module's logger). :meth:`times` takes ``(item, stamp [ns],
    receive time [ns])`` in arrival order and returns ``(item, data time [ns])`` for those whose
    time is known (a first message stamped 0 is held back); :meth:`release` ends the stream
    (a held message is a stamped sample at 0)."""

    def __init__(self, where: str = "", warn: Callable[[str], None] | None = None) -> None:
        self.where = where
        self._warn = warn or (lambda line: log.warning("%s", line))
        self.stamped: bool | None = None  # None: not known yet
        self._held: tuple[Item, int] | None = None

    @property
    def holding(self) -> bool:
        """A first message stamped 0 waits for the next one."""
        return self._held is not None

    def reset(self) -> None:
        """A new stream (nothing known, nothing held)."""
        self.stamped, self._held = None, None

    def times(self, items: Iterable[tuple[Item, int, int]]) -> list[tuple[Item, int]]:
        out: list[tuple[Item, int]] = []
        for item, stamp, received in items:
            if self.stamped is None:
                if self._held is None:
                    if stamp == 0:
                        self._held = (item, received)
                        continue
                    self.stamped = True
                else:
                    (first, first_received), self._held = self._held, None
                    self.stamped = stamp != 0
                    if not self.stamped:
                        self._warn(f"{self.where}: not stamped (header stamp 0 twice in a row): the time "
                                   "each message is received is its data time")
                    out.append((first, 0 if self.stamped else first_received))
            out.append((item, stamp if self.stamped else received))
        return out

    def release(self) -> list[tuple[Item, int]]:
        """At the end of the stream: a held first message is a stamped sample at t = 0."""
        held, self._held = self._held, None
        if held is None:
            return []
        self.stamped = True
        return [(held[0], 0)]


def stream_times(stamps, log_times, where: str) -> np.ndarray:
    """The data times [ns] ``(N,)`` of one recorded topic's messages (header ``stamps`` and the
    bag's ``log_times``, both ``(N,)`` [ns]) by the one :class:`StampPolicy`, its warning naming
    ``where``. The policy decides on the first two messages; the rest follow its decision."""
    stamps, log_times = np.asarray(stamps, dtype=np.int64), np.asarray(log_times, dtype=np.int64)
    policy: StampPolicy[int] = StampPolicy(where)
    first = min(2, stamps.size)
    head = policy.times(zip(range(first), stamps[:first].tolist(), log_times[:first].tolist(), strict=True))
    head += policy.release()
    rest = stamps[2:] if policy.stamped else log_times[2:]
    return np.r_[np.array([ns for _, ns in head], dtype=np.int64), rest]
