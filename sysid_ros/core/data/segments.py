"""A recording split at its gaps into segments that can each be conditioned on their own.

Lost messages leave gaps in a recording (:meth:`Dataset.gaps`, a step longer than
:data:`~sysid_ros.core.data.stream_time.GAP_FACTOR` median periods). Nothing may be filtered,
differentiated or simulated across a gap, but the data on either side are good: :func:`split`
cuts the recording there, cuts the stationary start and end of every piece
(:func:`~sysid_ros.core.data.stationary.moving_span`, optional) and drops pieces shorter than a
minimum length. The batch methods then use the union of the segments' regression rows.

Every gap and every dropped segment is a warning (:meth:`Segmentation.warnings`); a recording with
no segment long enough is a :class:`DataError` naming the gaps.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.stationary import moving_span
from sysid_ros.core.data.stream_time import Gap
from sysid_ros.core.errors import DataError

__all__ = ["Segment", "Segmentation", "split"]

#: gaps an error message names (the rest counted): a log with thousands of them stays one line
SHOWN_GAPS = 3


@dataclass(frozen=True)
class Segment:
    """Samples ``start:stop`` of a recording between gaps, after ``cut_start``/``cut_end``
    stationary samples were cut off its ends (so the piece between the gaps was
    ``start - cut_start : stop + cut_end``)."""

    start: int
    stop: int
    cut_start: int = 0
    cut_end: int = 0

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def cut(self) -> int:
        """Stationary samples cut off this segment's ends."""
        return self.cut_start + self.cut_end


@dataclass(frozen=True)
class Segmentation:
    """The outcome of :func:`split`: the recording (``dataset``, ``N`` samples), its ``gaps``,
    the segments ``kept`` and ``dropped`` (shorter than ``min_samples``, i.e. ``min_length`` [s]
    at the median rate), in time order."""

    dataset: Dataset
    gaps: tuple[Gap, ...]
    kept: tuple[Segment, ...]
    dropped: tuple[Segment, ...]
    min_samples: int
    min_length: float

    @property
    def samples(self) -> int:
        """Samples in the kept segments."""
        return sum(len(s) for s in self.kept)

    @property
    def cut(self) -> int:
        """Stationary samples cut off the ends of every segment (kept or dropped)."""
        return sum(s.cut for s in (*self.kept, *self.dropped))

    def datasets(self) -> list[Dataset]:
        """The kept segments as datasets (the command log cut to each one's time span)."""
        return [self.dataset.window(s.start, s.stop) for s in self.kept]

    def warnings(self) -> list[str]:
        """One line per gap and per dropped segment."""
        lines = [f"{self.dataset.source}: {g.describe()}: the recording is split there"
                 for g in self.gaps]
        t = self.dataset.t
        for s in self.dropped:
            span = (f"t={t[s.start]:.3f}–{t[s.stop - 1]:.3f} s, {len(s)} samples" if len(s)
                    else f"t={t[s.start - s.cut_start]:.3f} s, nothing moves")
            lines.append(f"{self.dataset.source}: dropped the segment at {span}: shorter than "
                         f"{self.min_length:.2f} s ({self.min_samples} samples)")
        return lines

    def summary(self) -> str:
        """One line: segments and samples used, gaps, drops and the stationary cut."""
        n = len(self.kept)
        return (f"{n} segment{'s' if n != 1 else ''} with {self.samples} of {len(self.dataset)} "
                f"samples used ({len(self.gaps)} gap{'s' if len(self.gaps) != 1 else ''}, "
                f"{len(self.dropped)} short segment{'s' if len(self.dropped) != 1 else ''} dropped, "
                f"{self.cut} stationary samples cut at segment ends)")

    def as_dict(self) -> dict:
        """For ``result.json``: counts, the gaps and the kept segments' time spans [s]."""
        t = self.dataset.t
        return {"samples": len(self.dataset), "samples_used": self.samples,
                "stationary_cut": self.cut, "dropped_segments": len(self.dropped),
                "min_segment_s": self.min_length,
                "gaps": [{"t": g.t, "length_ms": 1e3 * g.length, "missing": g.missing}
                         for g in self.gaps],
                "segments": [[float(t[s.start]), float(t[s.stop - 1])] for s in self.kept]}


def split(dataset: Dataset, *, min_length: float, min_samples: int = 3,
          stationary: bool = True, speed: float | None = None) -> Segmentation:
    """Split ``dataset`` at its gaps, cut the stationary start and end of every piece (when
    ``stationary``: every joint slower than ``speed`` [rad/s], default
    :data:`~sysid_ros.core.data.stationary.STATIONARY_SPEED`, on the measured velocities, or on
    central differences of the positions where the data have none) and drop the pieces shorter
    than ``min_length`` [s] (``round(min_length · fs)`` samples at the median rate ``fs``) or
    ``min_samples``, whichever is more.

    Raises :class:`DataError` when no segment is long enough, naming the gaps.
    """
    t = dataset.t
    gaps = dataset.gaps()
    need = max(int(min_samples), round(min_length * dataset.sample_rate), 1)
    bounds = [0, *(g.index for g in gaps), len(t)]
    kept, dropped = [], []
    for a, b in itertools.pairwise(bounds):
        seg = _cut_stationary(dataset, a, b, speed) if stationary else Segment(a, b)
        (kept if len(seg) >= need else dropped).append(seg)
    result = Segmentation(dataset, tuple(gaps), tuple(kept), tuple(dropped), need,
                          need / dataset.sample_rate)
    if not kept:
        named = "; ".join(g.describe() for g in gaps[:SHOWN_GAPS]) or "none"
        named += f"; and {len(gaps) - SHOWN_GAPS} more" if len(gaps) > SHOWN_GAPS else ""
        still = f", {result.cut} of them stationary" if result.cut else ""
        short = sum(g.missing <= 3 for g in gaps)
        hint = (f" ({short} of the gaps are 1-3 missing cycles: resampling, --resample auto, "
                "bridges them)" if len(gaps) > SHOWN_GAPS and short * 2 > len(gaps) else "")
        raise DataError(f"{dataset.source}: no segment of the recording is at least "
                        f"{result.min_length:.2f} s ({need} samples) long: {len(bounds) - 1} "
                        f"segment(s), {len(t)} samples{still}; gaps: {named}{hint}")
    return result


def _cut_stationary(dataset: Dataset, a: int, b: int, speed: float | None) -> Segment:
    """Samples ``a:b`` without their stationary start and end (see :func:`split`)."""
    if dataset.has_velocity:
        dq = dataset.dq[a:b]
    elif b - a >= 2:  # differentiated positions where a joint's measured velocity is not finite
        dq = np.gradient(dataset.q[a:b], dataset.t[a:b], axis=0)
        measured = np.all(np.isfinite(dataset.dq[a:b]), axis=0)
        dq[:, measured] = dataset.dq[a:b][:, measured]
    else:
        return Segment(a, b)
    span = moving_span(dq) if speed is None else moving_span(dq, speed)
    if span.stop <= span.start:  # nothing moves: everything is cut
        return Segment(b, b, cut_start=b - a)
    return Segment(a + span.start, a + span.stop, cut_start=span.start, cut_end=(b - a) - span.stop)
