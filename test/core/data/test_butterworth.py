"""The Butterworth module against SciPy's signal package (an independent implementation of the same
design and filters) and against the Butterworth definition itself."""

import numpy as np
import pytest
import scipy.signal

from sysid_ros.core.data.butterworth import butterworth, default_padlen, sosfilt, steady_state
from sysid_ros.core.data.zero_phase import sosfiltfilt_rows
from sysid_ros.core.errors import DataError

CASES = [(order, cutoff, fs) for order in (1, 2, 3, 4, 5, 8)
         for cutoff, fs in ((10.0, 1000.0), (25.0, 1000.0), (0.5, 1000.0), (40.0, 100.0), (220.0, 500.0))]


def _definition(order: int, cutoff: float, fs: float, f: np.ndarray) -> np.ndarray:
    """H(e^{iω}) from the poles of the pre-warped analog prototype mapped by the bilinear transform
    and the zeros at z = −1, normalised at DC — in extended precision (``np.longdouble``)."""
    pi = 4 * np.arctan(np.longdouble(1))
    omega = 2 * np.longdouble(fs) * np.tan(pi * np.longdouble(cutoff) / np.longdouble(fs))
    angle = pi * (2 * np.arange(order, dtype=np.longdouble) + order + 1) / (2 * order)
    s = omega * (np.cos(angle) + 1j * np.sin(angle)).astype(np.clongdouble)
    p = (2 * np.longdouble(fs) + s) / (2 * np.longdouble(fs) - s)
    w = 2 * pi * f.astype(np.longdouble) / np.longdouble(fs)
    zinv = (np.cos(w) - 1j * np.sin(w)).astype(np.clongdouble)
    h = (1 + zinv) ** order / np.prod(1 - p[:, None] * zinv[None, :], axis=0)
    return h / (np.longdouble(2) ** order / np.prod(1 - p))


def _response(sos: np.ndarray, f: np.ndarray, fs: float) -> np.ndarray:
    """H(e^{iω}) of the cascade at frequencies ``f`` [Hz], evaluated in extended precision (in
    double, the denominators near DC cancel to ~1e-12 for the lowest cut-offs)."""
    w = 2 * (4 * np.arctan(np.longdouble(1))) * f.astype(np.longdouble) / np.longdouble(fs)
    z = (np.cos(w) - 1j * np.sin(w)).astype(np.clongdouble)  # z⁻¹
    h = np.ones_like(z)
    for b0, b1, b2, a0, a1, a2 in np.asarray(sos, dtype=np.longdouble):
        h *= (b0 + b1 * z + b2 * z**2) / (a0 + a1 * z + a2 * z**2)
    return h.astype(complex)


@pytest.mark.parametrize(("order", "cutoff", "fs"), CASES)
def test_design_is_the_butterworth_low_pass(order, cutoff, fs):
    sos = butterworth(order, cutoff, fs)
    assert sos.shape == ((order + 1) // 2, 6)
    f = np.linspace(0.0, 0.5 * fs, 513)
    h = _response(sos, f, fs)
    # within the rounding of the coefficients: poles 2e-3 from z = 1 (0.5 Hz at 1 kHz) turn their
    # last bit into ~1e-11 of the response near the cut-off
    np.testing.assert_allclose(h, _definition(order, cutoff, fs, f).astype(complex), rtol=0, atol=1e-11)
    # the same filter as SciPy's design (gain distributed differently over the sections; SciPy's
    # product of polynomials is off the definition by up to 1e-11 for the lowest cut-offs)
    np.testing.assert_allclose(h, _response(scipy.signal.butter(order, cutoff, fs=fs, output="sos"), f, fs),
                               rtol=0, atol=1e-10)
    # the definition: unit gain at DC, 1/√2 at the cut-off, zero at Nyquist (all zeros at z = −1),
    # monotone in between, poles inside the unit circle
    assert abs(h[0] - 1.0) < 1e-13
    assert abs(abs(_response(sos, np.array([cutoff]), fs)[0]) - 2**-0.5) < 1e-10
    assert abs(h[-1]) < 1e-12
    assert np.all(np.diff(np.abs(h)) <= 1e-15)
    assert np.all(np.abs(np.roots([1.0, *sos[0, 4:]])) < 1.0)


def test_bad_designs_are_refused_with_what_was_expected():
    with pytest.raises(DataError, match=r"cut-off 500.0 Hz must be in \(0, 500.0\) Hz at 1000.0 Hz"):
        butterworth(4, 500.0, 1000.0)
    with pytest.raises(DataError, match="order must be an integer >= 1, got 0"):
        butterworth(0, 10.0, 1000.0)


@pytest.mark.parametrize("shape", [(3000,), (3000, 6), (2000, 6, 11), (12, 2), (2, 3)])
def test_zero_phase_filter_of_the_design_matches_scipy_sosfiltfilt(shape):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).cumsum(axis=0) + 3.0  # drift: the odd extension and steady state matter
    sos = butterworth(4, 10.0, 1000.0)
    pad = min(default_padlen(sos), shape[0] - 1)
    want = scipy.signal.sosfiltfilt(sos, x, axis=0, padtype="odd", padlen=pad)
    got = sosfiltfilt_rows(sos, x, pad)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.abs(want).max())


def test_zero_phase_filter_keeps_a_constant():
    """Each pass starts in the filter's steady state for its first value: a constant comes out
    unchanged (no start-up step at either end)."""
    sos = butterworth(4, 5.0, 1000.0)
    np.testing.assert_allclose(sosfiltfilt_rows(sos, np.full((4000, 2), 2.5), default_padlen(sos)), 2.5,
                               rtol=0, atol=1e-12)


def test_steady_state_and_streamed_filtering_match_scipy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((500, 4)).cumsum(axis=0)
    sos = scipy.signal.butter(3, 30.0, fs=1000.0, output="sos")  # SciPy's gain placement: any sos works
    np.testing.assert_allclose(steady_state(sos), scipy.signal.sosfilt_zi(sos), rtol=0, atol=1e-13)
    zi = steady_state(sos)[:, :, None] * x[0][None, None, :]
    want, zf = scipy.signal.sosfilt(sos, x, axis=0, zi=zi.copy())
    state = np.ascontiguousarray(zi)
    got = np.vstack([sosfilt(sos, x[:1], state), sosfilt(sos, x[1:137], state), sosfilt(sos, x[137:], state)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(state, zf, rtol=0, atol=1e-12 * np.abs(zf).max())
