"""Regression data prepared for the batch methods: :class:`Prepared` (stacked over segments) and
:class:`PreparedSegment`; built by :func:`~sysid_ros.core.batch.identify.prepare`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sysid_ros.core.batch.least_squares import regression_rows
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import Conditioned, Preprocessing
from sysid_ros.core.data.segments import Segmentation
from sysid_ros.core.data.timebase import TimebaseReport
from sysid_ros.core.model.target import Target


@dataclass(frozen=True)
class PreparedSegment:
    """One segment of :class:`Prepared`: its samples (``dataset``, command log cut to its span),
    their conditioned full-rate signals, the samples ``kept`` after trimming and decimation, and
    where its rows are in the stacked arrays (``rows``)."""

    dataset: Dataset
    conditioned: Conditioned
    kept: slice
    rows: slice


@dataclass(frozen=True)
class Prepared:
    """Regression data at the kept (filtered, decimated) samples of every segment, stacked.

    ``x (K, n, p)`` regressor of the target's parameters, ``y (K, n)`` torque minus the known part,
    ``mask (K, n)`` rows used, ``t (K,)`` [s] and ``q``/``dq``/``ddq`` the conditioned signals at
    those samples. ``dataset`` is the whole recording (model's joints), ``segmentation`` how it was
    split at gaps and cut (:func:`~sysid_ros.core.data.preprocessing.segment`), ``segments`` each
    segment's part, ``timebase`` what was done to its time stamps first
    (:func:`~sysid_ros.core.data.timebase.regularise`).
    """

    target: Target
    dataset: Dataset
    settings: Preprocessing
    segmentation: Segmentation
    segments: tuple[PreparedSegment, ...]
    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    x: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    timebase: TimebaseReport
    #: the Stribeck velocity search (:func:`settle_stribeck`), None when there was none
    stribeck: dict | None = None
    #: the sigmoid shape search (:func:`settle_sigmoid`), None when there was none
    sigmoid: dict | None = None

    @property
    def fs(self) -> float:
        """[Hz] the recording's median sample rate (the rate conditioned at)."""
        return self.segments[0].conditioned.fs

    def rows(self, columns: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Regression rows ``(W, rhs, joint)``; ``columns`` of x (default: the base columns)."""
        x = self.target.base.columns(self.x) if columns is None else self.x[..., columns]
        return regression_rows(x, self.y, self.mask)

