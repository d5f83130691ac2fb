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
``(K, C)`` array at once (compiled, numba): :func:`sosfilt`, the causal filter of a stream in
pieces (the online conditioning); :func:`steady_state` starts a filter without a start-up step.
The zero-phase filter of the batch path is :mod:`sysid_ros.core.data.zero_phase`. Why not
``scipy.signal``: its import costs 0.4 s (it pulls in ``scipy.stats``) for a design of a few lines
and a filter loop, a fifth of ``sysid identify``'s whole time budget; the design is checked
against the definition and against SciPy's in ``test/core/data/test_butterworth.py``.
"""

from __future__ import annotations

import math

import numpy as np

from sysid_ros.core.errors import DataError
from sysid_ros.core.jit import numba

__all__ = ["butterworth", "default_padlen", "run_sections", "sosfilt", "steady_state"]

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
def run_sections(sos, row, z0, z1):  # pragma: no cover - compiled
    """One sample of every column, ``row (C,)``, through the cascade ``sos (S, 6)``, in place;
    ``z0``/``z1`` ``(S, C)`` the sections' states (transposed direct form II). Row and state views
    keep the column loop unit-stride and free of aliasing, so that it vectorises (4× faster than
    indexing the 2-D arrays). The one filter step of :func:`sosfilt` and
    :mod:`~sysid_ros.core.data.zero_phase`."""
    for s in range(sos.shape[0]):
        b0, b1, b2, a1, a2 = sos[s, 0], sos[s, 1], sos[s, 2], sos[s, 4], sos[s, 5]
        za, zb = z0[s], z1[s]
        for j in range(row.size):
            xc = row[j]
            xn = b0 * xc + za[j]
            za[j] = b1 * xc - a1 * xn + zb[j]
            zb[j] = b2 * xc - a2 * xn
            row[j] = xn


@_jit
def _cascade(sos, x, zi, y):  # pragma: no cover - compiled
    """``y (K, C) ←`` the cascade ``sos (S, 6)`` run over the rows of ``x (K, C)`` from the states
    ``zi (S, 2, C)``, which are left at the states after the last row. ``y`` may be ``x``."""
    z0, z1 = zi[:, 0], zi[:, 1]
    for j in range(x.shape[0]):
        y[j] = x[j]
        run_sections(sos, y[j], z0, z1)


def default_padlen(sos: np.ndarray) -> int:
    """Samples of odd extension at each end: three times the order of the cascade plus one,
    ``3 (2 S + 1)`` for ``S`` sections (``scipy.signal.sosfiltfilt``'s default)."""
    return 3 * (2 * len(sos) + 1)


def sosfilt(sos: np.ndarray, x: np.ndarray, zi: np.ndarray) -> np.ndarray:
    """Causal filter of ``x (K, C)`` along axis 0 with the cascade ``sos (S, 6)``, starting from
    the states ``zi (S, 2, C)`` (float, C-contiguous), which are updated in place to the states
    after the last row (pass them to the next call to filter a stream in pieces). Returns
    ``(K, C)``."""
    x = np.ascontiguousarray(x, dtype=float)
    y = np.empty_like(x)
    _cascade(np.ascontiguousarray(sos, dtype=float), x, zi, y)
    return y
