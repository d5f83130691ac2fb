"""``envelope``: what a torque plot draws of a long series (its per-run extremes, in time order)."""

from __future__ import annotations

import numpy as np

from sysid_ros.core.report.plotting import envelope


def test_envelope_keeps_every_runs_extremes_in_time_order():
    rng = np.random.default_rng(3)
    t = np.arange(20_000) / 1000.0  # 20 s at 1 kHz
    y = np.sin(2 * np.pi * 0.5 * t) + 0.1 * rng.standard_normal(t.size)
    y[12_345] = 7.0  # a single-sample spike must be drawn
    td, yd = envelope(t, y, bins=500)
    assert len(td) <= 1000 and len(td) == len(yd)
    assert np.all(np.diff(td) > 0)
    assert yd.max() == 7.0 and yd.min() == y.min()
    runs = np.array_split(np.arange(t.size), 500)
    for run in runs:  # each run's min and max are among the drawn points, at their own times
        for k in (run[np.argmin(y[run])], run[np.argmax(y[run])]):
            assert t[k] in td and yd[np.searchsorted(td, t[k])] == y[k]


def test_envelope_leaves_short_or_nan_series_as_recorded():
    t = np.arange(1500) / 100.0
    y = np.cos(t)
    td, yd = envelope(t, y, bins=1000)
    np.testing.assert_array_equal(td, t)
    np.testing.assert_array_equal(yd, y)
    y2 = np.concatenate([np.cos(np.arange(5000) / 100.0), [np.nan]])
    td2, yd2 = envelope(np.arange(5001) / 100.0, y2, bins=1000)
    assert len(td2) == len(yd2) == 5001 and np.isnan(yd2[-1])
