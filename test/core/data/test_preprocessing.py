"""Signal conditioning: zero phase, exact derivatives on polynomials, parallel decimation."""

from __future__ import annotations

import numpy as np
import pytest

from sysid_ros.core import DataError
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import (
    Preprocessing,
    condition,
    derivatives,
    lowpass,
    parallel_decimate,
)

FS = 1000.0


def test_lowpass_is_zero_phase_and_flat_in_the_passband():
    t = np.arange(0, 4, 1 / FS)
    slow = np.sin(2 * np.pi * 1.0 * t)
    fast = 0.5 * np.sin(2 * np.pi * 200.0 * t)
    out = lowpass((slow + fast)[:, None], FS, 20.0)[:, 0]
    inner = slice(500, -500)
    np.testing.assert_allclose(out[inner], slow[inner], atol=2e-3)  # no lag, fast part removed
    np.testing.assert_array_equal(lowpass(slow[:, None], FS, 600.0)[:, 0], slow)  # above Nyquist


@pytest.mark.parametrize("method", ["central", "savgol"])
def test_derivatives_are_exact_on_low_order_polynomials(method):
    t = np.arange(0, 1, 1 / FS)
    q = np.stack((2 + 3 * t - 4 * t**2, 0.5 * t**3), axis=1)
    dq, ddq = derivatives(q, FS, Preprocessing(differentiator=method))
    inner = slice(30, -30)
    np.testing.assert_allclose(dq[inner, 0], 3 - 8 * t[inner], atol=1e-9)
    np.testing.assert_allclose(ddq[inner, 0], -8.0, atol=1e-6)
    np.testing.assert_allclose(ddq[inner, 1], 3 * t[inner], atol=1e-6)


def test_parallel_decimation_keeps_linear_relations_and_trims():
    rng = np.random.default_rng(0)
    n = 4000
    x = rng.normal(size=(n, 2, 3)).cumsum(axis=0)
    beta = np.array([1.5, -2.0, 0.3])
    y = x @ beta
    settings = Preprocessing(bandwidth=5.0)
    (xd, yd), kept = parallel_decimate([x, y], FS, settings)
    np.testing.assert_allclose(xd @ beta, yd, atol=1e-9 * np.abs(yd).max())  # exact: same filter
    assert kept.step == settings.decimation_for(FS) == 25
    assert kept.start == round(settings.trim_for() * FS) == 300
    with pytest.raises(DataError, match="too few"):
        parallel_decimate([x[:500]], FS, settings)


def test_measured_velocity_is_used_when_recorded():
    t = np.arange(0, 2, 1 / FS)
    q = np.sin(t)[:, None]
    ds = Dataset(t, ("j",), q, np.cos(t)[:, None] + 0.01, np.zeros_like(q))
    measured = condition(ds, Preprocessing(velocity="auto")).dq
    differentiated = condition(ds, Preprocessing(velocity="differentiate")).dq
    inner = slice(300, -300)
    assert np.abs(measured[inner] - (np.cos(t)[inner, None] + 0.01)).max() < 1e-4  # vs offset 1e-2
    assert np.abs(differentiated[inner] - np.cos(t)[inner, None]).max() < 1e-3  # vs offset 1e-2
    no_velocity = Dataset(t, ("j",), q, np.full_like(q, np.nan), np.zeros_like(q))
    with pytest.raises(DataError, match="no velocities"):
        condition(no_velocity, Preprocessing(velocity="measured"))


def test_stationary_rule_cuts_the_still_start_and_end_and_flags_still_samples():
    from sysid_ros.core.data.stationary import STATIONARY_SPEED, moving, moving_span

    dq = np.zeros((10, 2))
    dq[3, 0] = STATIONARY_SPEED        # exactly at the threshold: moving
    dq[6, 1] = -0.5
    dq[5, 0] = 0.5 * STATIONARY_SPEED  # slower on every joint: stationary
    assert moving(dq).tolist() == [False, False, False, True, False, False, True, False, False, False]
    assert moving_span(dq) == slice(3, 7)
    assert moving_span(np.zeros((4, 2))) == slice(0, 0)
    assert bool(moving(np.array([np.nan, 0.0])))  # non-finite is not silently "still"


def test_shortest_segment_is_the_minimum_or_the_trimming_floor():
    settings = Preprocessing(bandwidth=5.0)  # trim 0.3 s per edge, decimation by 25 at 1 kHz
    assert settings.floor_for(FS) == 2 * 300 + 10 * 25
    assert settings.min_samples(FS) == 2000  # min_segment 2 s
    assert Preprocessing(min_segment=0.1).min_samples(FS) == 850  # never below the floor
    x = np.zeros((849, 1))
    with pytest.raises(DataError, match=r"849 samples at 1000\.0 Hz are too few"):
        parallel_decimate([x], FS, settings)
    assert parallel_decimate([np.zeros((850, 1))], FS, settings)[0][0].shape == (10, 1)
