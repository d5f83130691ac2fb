"""Butterworth low-pass filters: design, causal filtering and zero-phase filtering along time.

The design is the classical one (Oppenheim & Schafer, *Discrete-Time Signal Processing*, 3rd ed.,
§7.1–7.2): the analog Butterworth prototype of order ``N`` has its poles evenly spread on the
left half of the circle of radius ``Ω_c``,

    s_k = Ω_c · exp(iπ (2k + N + 1) / (2N)),   k = 0 … N−1,

with the cut-off pre-warped, ``Ω_c = 2 f_s tan(π f_c / f_s)``, so that the bilinear transform
``z = (2 f_s + s) / (2 f_s − s)`` maps it onto ``f_c``; the ``N`` zeros at ``s = ∞`` go to
``z = −1``. Each conjugate pair of digital poles ``p, p̄`` is one second-order section

    H(z) = g (1 + 2 z⁻¹ + z⁻²) / (1 − 2 Re(p) z⁻¹ + |p|² z⁻²),   g = (1 − 2 Re(p) + |p|²) / 4,

scaled to unit gain at DC (an odd order adds the first-order section of the real pole). Sections
are stored as rows ``[b0, b1, b2, 1, a1, a2]`` (SciPy's ``sos`` layout), the poles farthest from
the unit circle first.

Filtering runs the sections in cascade, each in transposed direct form II, over every column of a
``(N, C)`` array at once (compiled, numba). :func:`filtfilt` is the forward–backward (zero-phase)
filter: the signal is extended at both ends by its odd reflection about the end values (``pad``
samples), each pass starts in the filter's steady state for its first input (no start-up step),
and the extension is cut off again — the procedure of ``scipy.signal.sosfiltfilt`` with
``padtype="odd"``, whose import (0.4 s: it pulls in ``scipy.stats``) this module spares the
batch path.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from sysid_ros.core.errors import DataError

__all__ = ["butterworth", "default_padlen", "filtfilt", "sosfilt", "steady_state"]

_jit = numba.njit(cache=True, nogil=True, fastmath=False)


def butterworth(order: int, cutoff: float, fs: float) -> np.ndarray:
    """Second-order sections ``(⌈order/2⌉, 6)`` of the digital Butterworth low-pass of ``order``
    with cut-off ``cutoff`` [Hz] at sampling rate ``fs`` [Hz] (``0 < cutoff < fs/2``)."""
    if not (isinstance(order, int | np.integer) and order >= 1):
        raise DataError(f"Butterworth order must be an integer >= 1, got {order!r}")
    if not (math.isfinite(cutoff) and math.isfinite(fs) and 0.0 < cutoff < 0.5 * fs):
        raise DataError(f"cut-off {cutoff} Hz must be in (0, {0.5 * fs}) Hz at {fs} Hz")
    omega = 2.0 * fs * math.tan(math.pi * cutoff / fs)  # pre-warped analog cut-off [rad/s]
    k = np.arange(order // 2)  # the poles above the real axis; their conjugates make the pairs
    s = omega * np.exp(1j * np.pi * (2 * k + order + 1) / (2 * order))  # analog poles, Re < 0
    z = (2.0 * fs + s) / (2.0 * fs - s)  # bilinear transform
    rows = []
    for p in z[np.argsort(np.abs(z))]:  # farthest from the unit circle first
        a1, a2 = -2.0 * p.real, abs(p) ** 2
        g = (1.0 + a1 + a2) / 4.0
        rows.append([g, 2.0 * g, g, 1.0, a1, a2])
    if order % 2:  # the real pole s = −Ω_c
        p = (2.0 * fs - omega) / (2.0 * fs + omega)
        g = (1.0 - p) / 2.0
        rows.insert(0, [g, g, 0.0, 1.0, -p, 0.0])
    return np.array(rows, dtype=float)


def steady_state(sos: np.ndarray) -> np.ndarray:
    """``(S, 2)`` states of the cascade ``sos (S, 6)`` at rest under a constant unit input:
    multiplied by an input level, the initial state that filters a signal starting at that level
    without a start-up transient. Section ``s`` sees the level ``u`` (the DC gain of the sections
    before it) and puts out ``u·g`` (``g`` its own DC gain); its states are then
    ``z₁ = (b₂ − a₂ g) u`` and ``z₀ = (b₁ − a₁ g) u + z₁``."""
    sos = np.asarray(sos, dtype=float)
    out = np.empty((len(sos), 2))
    u = 1.0
    for i, (b0, b1, b2, a0, a1, a2) in enumerate(sos):
        g = (b0 + b1 + b2) / (a0 + a1 + a2)
        out[i, 1] = (b2 - a2 * g) * u
        out[i, 0] = (b1 - a1 * g) * u + out[i, 1]
        u *= g
    return out


@_jit
def _cascade(sos, x, zi, y):  # pragma: no cover - compiled
    """``y (K, C) ←`` the cascade ``sos (S, 6)`` run over the rows of ``x (K, C)`` from the states
    ``zi (S, 2, C)``, which are left at the states after the last row. ``y`` may be ``x``."""
    for j in range(x.shape[0]):
        for c in range(x.shape[1]):
            y[j, c] = x[j, c]
        for s in range(sos.shape[0]):
            b0, b1, b2 = sos[s, 0], sos[s, 1], sos[s, 2]
            a1, a2 = sos[s, 4], sos[s, 5]
            for c in range(x.shape[1]):
                v = y[j, c]
                w = b0 * v + zi[s, 0, c]
                zi[s, 0, c] = b1 * v - a1 * w + zi[s, 1, c]
                zi[s, 1, c] = b2 * v - a2 * w
                y[j, c] = w


@_jit
def _zero_phase(sos, x, pad, unit):  # pragma: no cover - compiled
    """Forward–backward cascade over ``x (N, C)`` extended by ``pad`` odd-reflected rows at each
    end (``pad < N``); ``unit (S, 2)`` the steady state per unit input. Returns ``(N, C)``."""
    n, m = x.shape
    total = n + 2 * pad
    ext = np.empty((total, m))
    for e in range(total):  # the odd extension: 2 x[0] − x[k] before, 2 x[n−1] − x[k] after
        j = e - pad
        for c in range(m):
            if j < 0:
                ext[e, c] = 2.0 * x[0, c] - x[-j, c]
            elif j >= n:
                ext[e, c] = 2.0 * x[n - 1, c] - x[2 * n - 2 - j, c]
            else:
                ext[e, c] = x[j, c]
    zi = np.empty((sos.shape[0], 2, m))
    for s in range(sos.shape[0]):
        for c in range(m):
            zi[s, 0, c] = unit[s, 0] * ext[0, c]
            zi[s, 1, c] = unit[s, 1] * ext[0, c]
    _cascade(sos, ext, zi, ext)  # forward, in place
    for s in range(sos.shape[0]):
        for c in range(m):
            zi[s, 0, c] = unit[s, 0] * ext[total - 1, c]
            zi[s, 1, c] = unit[s, 1] * ext[total - 1, c]
    back = ext[::-1]  # backward over the forward output, in place
    _cascade(sos, back, zi, back)
    return ext[pad:pad + n]  # rows of a C-ordered array: contiguous


def default_padlen(sos: np.ndarray) -> int:
    """Samples of odd extension at each end: three times the order of the cascade plus one,
    ``3 (2 S + 1)`` for ``S`` sections (``scipy.signal.sosfiltfilt``'s default)."""
    return 3 * (2 * len(sos) + 1)


def filtfilt(sos: np.ndarray, x: np.ndarray, padlen: int | None = None) -> np.ndarray:
    """Zero-phase filter of ``x (N, …)`` along axis 0 with the cascade ``sos (S, 6)`` (forward and
    backward, odd extension by ``padlen`` samples, default :func:`default_padlen`, at most
    ``N − 1``). Returns a new float array of ``x``'s shape."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or x.shape[0] < 2:
        raise DataError(f"zero-phase filtering needs at least 2 samples along axis 0, got shape {x.shape}")
    pad = default_padlen(sos) if padlen is None else int(padlen)
    pad = max(0, min(pad, x.shape[0] - 1))
    flat = np.ascontiguousarray(x.reshape(x.shape[0], -1))
    sos = np.ascontiguousarray(sos, dtype=float)
    return _zero_phase(sos, flat, pad, steady_state(sos)).reshape(x.shape)


def sosfilt(sos: np.ndarray, x: np.ndarray, zi: np.ndarray) -> np.ndarray:
    """Causal filter of ``x (K, C)`` along axis 0 with the cascade ``sos (S, 6)``, starting from
    the states ``zi (S, 2, C)`` (float, C-contiguous), which are updated in place to the states
    after the last row (pass them to the next call to filter a stream in pieces). Returns
    ``(K, C)``."""
    x = np.ascontiguousarray(x, dtype=float)
    y = np.empty_like(x)
    _cascade(np.ascontiguousarray(sos, dtype=float), x, zi, y)
    return y
