"""Signal conditioning for inverse-dynamics identification (constrained-IV seed §II-C).

* positions: zero-phase Butterworth low-pass (``filtfilt``) with cut-off ``ω_bf = 5 ω_dyn``
  (``ω_dyn`` the position closed-loop bandwidth);
* velocity: the measured velocity (filtered alike) when the data have it (``velocity="auto"``),
  else central differences of the filtered positions (or Savitzky–Golay);
* acceleration: the second central difference ``(q₊ − 2q + q₋)/h²`` of the filtered positions
  (or Savitzky–Golay);
* parallel filtering: the same zero-phase low-pass (cut-off ``ω_df = 2 ω_dyn``) on the torques and
  on every regressor column, then decimation by ``n_d`` — filtering both sides of ``y = X β`` with
  one linear filter keeps the relation exact;
* edge trimming: filter transients at both ends are dropped.

A recording with gaps (lost messages, :meth:`Dataset.gaps`) is first split into segments
(:func:`segment`, :mod:`sysid_ros.core.data.segments`), the stationary start and end of each cut
off; every step above runs on each segment alone, so nothing is filtered or differentiated across
a gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sysid_ros.core.data.butterworth import butterworth, default_padlen
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.effort_timing import BATCH_DEFAULT, aligned_effort, check_effort_lag, effective_lag
from sysid_ros.core.data.segments import Segmentation, split
from sysid_ros.core.data.zero_phase import sosfiltfilt_rows
from sysid_ros.core.errors import DataError


@dataclass(frozen=True)
class Preprocessing:
    """Settings. Frequencies in Hz; ``decimation`` ``None`` = ``fs / (4 ω_df)``; ``trim`` [s] at
    each end, ``None`` = ``3 / ω_df``.

    ``min_segment`` [s]: segments between gaps shorter than this are dropped (default 2 s; never
    less than the trimmed edges plus ten decimated samples, :meth:`min_samples`);
    ``resample``: ``"auto"`` puts irregularly sampled data (steps off the median by more than
    ``jitter_tolerance``, or dropped cycles up to ``bridge_gaps`` [s] long; negative: automatic,
    5 ms or 3.5 median periods, whichever is longer) on a uniform grid
    first, ``"off"`` only checks the rate (:func:`~sysid_ros.core.data.timebase.regularise`);
    ``stationary_cut``: cut the stationary start and end of every segment before filtering
    (:func:`~sysid_ros.core.data.stationary.moving_span`; default on);
    ``effort_lag`` [sample periods]: how late the effort is, compensated per segment before
    filtering (:mod:`~sysid_ros.core.data.effort_timing`; ``None``: the recording's declaration,
    else 0).
    """

    bandwidth: float = 5.0
    position_cutoff_factor: float = 5.0
    decimation_cutoff_factor: float = 2.0
    order: int = 4
    differentiator: Literal["central", "savgol"] = "central"
    savgol_window: float = 0.05
    velocity: Literal["auto", "measured", "differentiate"] = "auto"
    decimation: int | None = None
    trim: float | None = None
    min_segment: float = 2.0
    stationary_cut: bool = True
    resample: Literal["auto", "off"] = "auto"
    bridge_gaps: float = -1.0
    jitter_tolerance: float = 0.1
    effort_lag: float | None = None

    def __post_init__(self) -> None:
        if self.effort_lag is not None:
            check_effort_lag(self.effort_lag)
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise DataError(f"bandwidth must be a finite number > 0 Hz, got {self.bandwidth}")
        if not (math.isfinite(self.min_segment) and self.min_segment >= 0):
            raise DataError(f"min_segment must be a finite number >= 0 s, got {self.min_segment}")
        if self.resample not in ("auto", "off"):
            raise DataError(f"resample must be 'auto' or 'off', got {self.resample!r}")
        if not math.isfinite(self.bridge_gaps) or not self.jitter_tolerance > 0:
            raise DataError(f"bridge_gaps must be a number of seconds (< 0: automatic) and "
                            f"jitter_tolerance > 0, got "
                            f"{self.bridge_gaps}, {self.jitter_tolerance}")

    @property
    def position_cutoff(self) -> float:
        return self.position_cutoff_factor * self.bandwidth

    @property
    def decimation_cutoff(self) -> float:
        return self.decimation_cutoff_factor * self.bandwidth

    def decimation_for(self, fs: float) -> int:
        if self.decimation is not None:
            return max(1, int(self.decimation))
        return max(1, int(fs / (4.0 * self.decimation_cutoff)))

    def trim_for(self) -> float:
        return 3.0 / self.decimation_cutoff if self.trim is None else self.trim

    def edge_for(self, fs: float) -> int:
        """Samples trimmed at each end of a segment sampled at ``fs`` Hz."""
        return round(self.trim_for() * fs)

    def floor_for(self, fs: float) -> int:
        """Fewest samples :func:`parallel_decimate` takes at ``fs`` Hz: both trimmed edges plus
        ten decimated samples."""
        return 2 * self.edge_for(fs) + 10 * self.decimation_for(fs)

    def min_samples(self, fs: float) -> int:
        """Shortest segment kept at ``fs`` Hz: ``min_segment`` or :meth:`floor_for`, whichever
        is longer."""
        return max(round(self.min_segment * fs), self.floor_for(fs))


def segment(ds: Dataset, settings: Preprocessing) -> Segmentation:
    """``ds`` split at its gaps, the stationary ends of every piece cut (when
    ``settings.stationary_cut``), the pieces shorter than ``settings.min_samples`` dropped.
    Raises :class:`DataError` if none is left (:func:`sysid_ros.core.data.segments.split`)."""
    fs = ds.sample_rate
    return split(ds, min_length=settings.min_segment, min_samples=settings.min_samples(fs),
                 stationary=settings.stationary_cut)


def lowpass(x: np.ndarray, fs: float, cutoff: float, order: int = 4, *, keep: slice | None = None
            ) -> np.ndarray:
    """Zero-phase Butterworth low-pass along axis 0 (``cutoff >= fs/2`` returns ``x``); ``keep``:
    only these rows of the result. SciPy's ``butter`` + ``sosfiltfilt`` to rounding, compiled
    (:mod:`sysid_ros.core.data.butterworth`, :mod:`sysid_ros.core.data.zero_phase`)."""
    if cutoff >= 0.5 * fs:
        out = np.asarray(x, dtype=float).copy()
        return out if keep is None else out[keep]
    sos = butterworth(order, cutoff, fs)
    return sosfiltfilt_rows(sos, x, min(default_padlen(sos), x.shape[0] - 1), keep)


def derivatives(q: np.ndarray, fs: float, settings: Preprocessing) -> tuple[np.ndarray, np.ndarray]:
    """Velocity and acceleration ``(N, n)`` of positions ``q (N, n)`` sampled at ``fs`` Hz."""
    dt = 1.0 / fs
    if settings.differentiator == "savgol":
        window = max(5, round(settings.savgol_window * fs) | 1)
        if window >= q.shape[0]:
            raise DataError(f"Savitzky–Golay window of {window} samples exceeds the {q.shape[0]} samples")
        import scipy.signal  # only here: its import costs 0.4 s (scipy.stats with it)

        dq = scipy.signal.savgol_filter(q, window, 3, deriv=1, delta=dt, axis=0)
        ddq = scipy.signal.savgol_filter(q, window, 3, deriv=2, delta=dt, axis=0)
        return dq, ddq
    dq = np.gradient(q, dt, axis=0)
    ddq = np.empty_like(q)
    ddq[1:-1] = (q[2:] - 2.0 * q[1:-1] + q[:-2]) / dt**2
    ddq[0], ddq[-1] = ddq[1], ddq[-2]
    return dq, ddq


@dataclass(frozen=True)
class Conditioned:
    """Filtered full-rate signals: ``q``, ``dq``, ``ddq``, ``tau`` ``(N, n)``, sampled at ``fs``."""

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray
    fs: float


def effort_lag_of(ds: Dataset, settings: Preprocessing) -> float:
    """The effort lag [sample periods] to compensate in ``ds``: the one ``settings`` state, else
    the one the recording declares, else :data:`~sysid_ros.core.data.effort_timing.BATCH_DEFAULT`."""
    return effective_lag(settings.effort_lag, ds.meta, default=BATCH_DEFAULT)


def condition(ds: Dataset, settings: Preprocessing, fs: float | None = None) -> Conditioned:
    """Filter positions and differentiate them (or use measured velocity) of one stretch without
    gaps (a segment), its effort taken at the instant of each sample (:func:`effort_lag_of`);
    ``fs`` [Hz] default: its median rate."""
    fs = ds.sample_rate if fs is None else fs  # lowpass() leaves q as measured if the cut-off exceeds fs/2
    q = lowpass(ds.q, fs, settings.position_cutoff, settings.order)
    dq, ddq = derivatives(q, fs, settings)
    if settings.velocity == "measured" and not ds.has_velocity:
        missing = [n for n, ok in zip(ds.joint_names, np.all(np.isfinite(ds.dq), axis=0), strict=True)
                   if not ok]
        raise DataError(f"{ds.source}: velocity='measured' but the data have no velocities of "
                        f"joints {missing} (NaN)")
    if settings.velocity in ("measured", "auto"):  # joint by joint (sysid_ros.core.data.velocity)
        measured = np.all(np.isfinite(ds.dq), axis=0)
        if measured.all():
            dq = lowpass(ds.dq, fs, settings.position_cutoff, settings.order)
        elif measured.any():
            dq = dq.copy()
            dq[:, measured] = lowpass(ds.dq[:, measured], fs, settings.position_cutoff, settings.order)
    return Conditioned(ds.t, q, dq, ddq, aligned_effort(ds.t, ds.tau, effort_lag_of(ds, settings)), fs)


def parallel_decimate(arrays: list[np.ndarray], fs: float, settings: Preprocessing,
                      ) -> tuple[list[np.ndarray], slice]:
    """Low-pass every array along axis 0 (same filter), trim the edges and keep every ``n_d``-th
    sample. Returns the decimated arrays and the slice of the original samples kept."""
    nd = settings.decimation_for(fs)
    n = arrays[0].shape[0]
    edge = settings.edge_for(fs)
    if n < settings.floor_for(fs):
        raise DataError(f"{n} samples at {fs:.1f} Hz are too few for trimming {edge} samples per "
                        f"edge and decimating by {nd}")
    sl = slice(edge, n - edge, nd)
    out = []
    for arr in arrays:
        flat = arr.reshape(n, -1)
        filtered = lowpass(flat, fs, settings.decimation_cutoff, settings.order, keep=sl)
        out.append(filtered.reshape((-1, *arr.shape[1:])))
    return out, sl
