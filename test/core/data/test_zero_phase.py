"""The compiled zero-phase filter against SciPy's ``sosfiltfilt`` (the reference it replaces)."""

import numpy as np
import pytest
import scipy.signal

from sysid_ros.core.data.zero_phase import sosfiltfilt_rows

FS = 5000.0


@pytest.mark.parametrize(("order", "cutoff"), [(4, 10.0), (2, 400.0), (6, 50.0)])
def test_equals_scipy_sosfiltfilt(order, cutoff):
    """Same arithmetic in the same order (the steady state computed by the project's
    ``steady_state``, SciPy's ``sosfilt_zi`` solves a linear system: equal to rounding): SciPy's
    result to 1e-12, on every kept row, with all-zero columns (skipped by the kernel) and a 3-D
    array filtered along axis 0."""
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.standard_normal((3000, 4, 5)), axis=0)
    x[:, 1, 2] = 0.0
    x[:, 3, :] = 0.0
    sos = scipy.signal.butter(order, cutoff, fs=FS, output="sos")
    pad = 3 * (2 * len(sos) + 1)
    reference = scipy.signal.sosfiltfilt(sos, x, axis=0, padlen=pad)
    tol = 1e-12 * np.abs(reference).max()
    np.testing.assert_allclose(sosfiltfilt_rows(sos, x, pad), reference, rtol=0, atol=tol)
    kept = slice(150, 3000 - 150, 25)
    out = sosfiltfilt_rows(sos, x, pad, kept)
    assert out.shape == (len(range(150, 2850, 25)), 4, 5)
    np.testing.assert_allclose(out, reference[kept], rtol=0, atol=tol)
    assert not out[:, 3].any() and not out[:, 1, 2].any()


@pytest.mark.parametrize(("n", "pad"), [(1, 0), (2, 1), (16, 15), (40, 0)])
def test_short_signals_and_padding(n, pad):
    rng = np.random.default_rng(n)
    y = rng.standard_normal(n)
    sos = scipy.signal.butter(4, 10.0, fs=FS, output="sos")
    want = scipy.signal.sosfiltfilt(sos, y, padlen=pad)
    # a low cut-off (10 Hz at 5 kHz) makes the steady state large: rounding of ~1e-12 of the signal
    np.testing.assert_allclose(sosfiltfilt_rows(sos, y, pad), want, rtol=0, atol=1e-10 * np.abs(want).max())


def test_bad_padding_and_backward_rows_are_refused():
    sos = scipy.signal.butter(4, 10.0, fs=FS, output="sos")
    with pytest.raises(ValueError, match=r"the padding must be 0 <= pad < 16 samples, got 16"):
        sosfiltfilt_rows(sos, np.zeros(16), 16)
    with pytest.raises(ValueError, match=r"the kept rows must run forward \(step >= 1\), got step -1"):
        sosfiltfilt_rows(sos, np.zeros(16), 3, slice(None, None, -1))
