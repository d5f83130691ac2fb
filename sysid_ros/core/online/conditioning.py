"""Causal conditioning of streamed joint signals: one low-pass, one delay for every signal.

Nothing here looks ahead: every sample is processed when it arrives, as on a live robot. The
filters' compiled kernels (:mod:`sysid_ros.core.data.butterworth`, numba) are imported and set up
on the first sample, not when a conditioner is built (a node's constructor builds one).
"""

from __future__ import annotations

import numpy as np

from sysid_ros.core.data.effort_timing import ONLINE_DEFAULT, online_weight
from sysid_ros.core.errors import DataError


class CausalFilter:
    """Causal Butterworth low-pass over ``channels`` signals, one sample at a time. Its sections
    are designed on first use (:attr:`sos`)."""

    def __init__(self, fs: float, cutoff: float, channels: int, order: int = 2) -> None:
        if not 0 < cutoff < 0.5 * fs:
            raise DataError(f"cut-off {cutoff} Hz must be in (0, {0.5 * fs}) Hz at {fs} Hz")
        self.fs, self.cutoff, self.order = fs, cutoff, order
        self._sos: np.ndarray | None = None
        self._zi_unit: np.ndarray | None = None  # (sections, 2)
        self.zi: np.ndarray | None = None
        self.channels = channels

    @property
    def sos(self) -> np.ndarray:
        """``(sections, 6)`` second-order sections of the low-pass."""
        if self._sos is None:
            from sysid_ros.core.data.butterworth import butterworth, steady_state  # (numba: see above)

            sos = butterworth(self.order, self.cutoff, self.fs)
            self._zi_unit = steady_state(sos)
            self._sos = sos
        return self._sos

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.block(np.asarray(x, dtype=float)[None, :])[0]

    def settling_time(self, fs: float, level: float = 0.01) -> float:
        """[s] after which the impulse response stays below ``level`` of its peak: how long a
        start-up transient lasts (≈ 1/cutoff for the 2nd-order Butterworth)."""
        from sysid_ros.core.data.butterworth import sosfilt  # (compiled: when used)

        n = int(fs * 50.0 / max(self.cutoff, 1e-9)) + 16
        impulse = np.zeros(n)
        impulse[0] = 1.0
        h = np.abs(sosfilt(self.sos, impulse[:, None], np.zeros((len(self.sos), 2, 1)))[:, 0])
        above = np.flatnonzero(h >= level * h.max())
        return float(above[-1] + 1) / fs

    def block(self, x: np.ndarray) -> np.ndarray:
        """Filter ``K`` consecutive samples ``(K, channels)`` in one call."""
        from sysid_ros.core.data.butterworth import sosfilt  # (compiled: when used)

        x = np.asarray(x, dtype=float)
        sos = self.sos
        if self.zi is None:  # start at rest on the first value (no start-up transient)
            self.zi = self._zi_unit[:, :, None] * x[0][None, None, :]
        return sosfilt(sos, x, self.zi)  # self.zi updated in place


class CausalConditioner:
    """Filtered ``(t, q, dq, ddq, tau)`` with one sample of latency.

    Velocities are measured, or ``(q_k − q_{k−1})/h``. Positions, velocities and torques pass the
    same causal low-pass (``cutoff`` [Hz] at the nominal rate ``fs``), so they share one delay. The
    acceleration is the derivative of the *filtered* velocity: when sample ``k`` arrives the
    conditioner returns sample ``k−1`` with ``(v̄_k − v̄_{k−1})/h`` (the forward difference, which
    belongs to ``t_{k−1}``). For a linear filter this equals filtering the raw difference quotient,
    except at the start: a filter started at rest on a raw difference quotient of noisy velocities
    (noise·√2/h, e.g. 7 rad/s² for 0.01 rad/s at 500 Hz) carries that value for many time
    constants, whereas the filtered velocity starts on a velocity sample.

    ``n``: velocity channels; ``nq`` (default ``n``): position channels, e.g. 7 + joints for a
    free-floating base whose ``q`` holds a position and a unit quaternion; ``quaternions``: the
    start indices in ``q`` of unit quaternions, re-normalised after filtering (these need measured
    velocities: a quaternion has no difference quotient in ``q̇``'s coordinates).
    ``settle`` [s]: samples earlier than this after the first are withheld (``None``): the filters
    start at rest on the first values, so the acceleration starts at 0 while the torque already
    holds ``M q̈₀``; ``"auto"`` withholds the filter's :meth:`CausalFilter.settling_time`.
    ``effort_lag`` [sample periods] (:mod:`~sysid_ros.core.data.effort_timing`): the effort paired
    with that acceleration is the one of its instant, ``t_{k−1} + h/2``, interpolated between
    ``τ_{k−1}`` and ``τ_k`` (−0.5: ``τ_{k−1}``, a simulator's applied torque; +0.5: ``τ_k``, a
    Damiao reply's).
    Non-increasing times raise :class:`DataError` (the caller rejects the sample and goes on).
    """

    def __init__(self, n: int, fs: float, cutoff: float, *, use_measured_velocity: bool = True,
                 nq: int | None = None, quaternions: tuple[int, ...] = (),
                 settle: float | str = 0.0, effort_lag: float = ONLINE_DEFAULT) -> None:
        self.n = n
        self.nq = n if nq is None else int(nq)
        self.quaternions = tuple(int(i) for i in quaternions)
        if (self.nq != n or self.quaternions) and not use_measured_velocity:
            raise DataError("positions with quaternions need measured velocities")
        if any(not 0 <= i <= self.nq - 4 for i in self.quaternions):
            raise DataError(f"quaternion start indices {self.quaternions} must lie in q of size {self.nq}")
        self.use_measured_velocity = use_measured_velocity
        self._f_q = CausalFilter(fs, cutoff, self.nq)
        self._f_v = CausalFilter(fs, cutoff, n)
        self._f_t = CausalFilter(fs, cutoff, n)
        self._last: tuple | None = None  # (t, q, v, tau, filtered v) of the held-back sample
        self._fs = fs
        self._settle: float | None = None if settle == "auto" else float(settle)
        self._t_first: float | None = None
        self._w = online_weight(effort_lag)  # weight of the later sample's effort

    @property
    def settle(self) -> float:
        """[s] samples earlier than this after the first are withheld (``"auto"``: the velocity
        filter's settling time, computed when first asked: it runs the compiled filter)."""
        if self._settle is None:
            self._settle = self._f_v.settling_time(self._fs)
        return self._settle

    def _positions(self, q: np.ndarray) -> np.ndarray:
        """Filtered positions ``(K, nq)`` with unit quaternions re-normalised."""
        out = self._f_q.block(q)
        for i in self.quaternions:
            out[:, i:i + 4] /= np.linalg.norm(out[:, i:i + 4], axis=1, keepdims=True)
        return out

    def push(self, t: float, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray
             ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Filtered signals of the previous sample, or ``None`` while fewer than 2 (3 without
        measured velocity) samples have arrived."""
        q = np.asarray(q, dtype=float)
        tau = np.asarray(tau, dtype=float)
        last = self._last
        if last is not None and t <= last[0]:
            raise DataError(f"sample at t={t:.6f} s does not follow t={last[0]:.6f} s")
        measured = dq is not None and self.use_measured_velocity
        if measured:
            v = np.asarray(dq, dtype=float)
        elif last is not None:
            v = (q - last[1]) / (t - last[0])
        else:
            v = None
        fv = None if v is None else self._f_v(v)
        self._last = (t, q, v, tau, fv)
        if self._t_first is None:
            self._t_first = t
        if last is None or last[4] is None:
            return None
        t0, q0, _, tau0, fv0 = last
        a = (fv - fv0) / (t - t0)  # the acceleration of sample k−1
        out = t0, self._positions(q0[None])[0], fv0, a, self._f_t(tau0 + self._w * (tau - tau0))
        return out if t0 >= self._t_first + self.settle else None

    def push_batch(self, t: np.ndarray, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray
                   ) -> tuple[np.ndarray, ...]:
        """:meth:`push` for ``K`` consecutive samples at once (one filter call per signal).

        Returns ``(t, q, dq, ddq, tau)`` arrays of the samples that are complete (each one
        sample late, as in :meth:`push`); they may be empty.
        """
        t = np.asarray(t, dtype=float)
        q, tau = np.asarray(q, dtype=float), np.asarray(tau, dtype=float)
        last = self._last
        if np.any(np.diff(t) <= 0) or (last is not None and t[0] <= last[0]):
            raise DataError("sample times in a batch must increase")
        if self._t_first is None and len(t):
            self._t_first = float(t[0])
        measured = dq is not None and self.use_measured_velocity
        # prepend the held-back sample so that differences span the batch boundary
        t_all = t if last is None else np.concatenate(([last[0]], t))
        q_all = q if last is None else np.vstack((last[1], q))
        tau_all = tau if last is None else np.vstack((last[3], tau))
        new = slice(0 if last is None else 1, None)  # the batch's own samples in the *_all arrays
        fv_all = np.full((len(t_all), self.n), np.nan)
        if last is not None and last[4] is not None:
            fv_all[0] = last[4]
        if measured:
            v_new = np.asarray(dq, dtype=float)
            fv_all[new] = self._f_v.block(v_new)
        else:
            v_all = np.full((len(t_all), self.n), np.nan)
            v_all[1:] = np.diff(q_all, axis=0) / np.diff(t_all)[:, None]
            v_new = v_all[new]
            ok = np.isfinite(v_new[:, 0])  # only the very first sample has no velocity
            if ok.any():
                fv_new = np.full_like(v_new, np.nan)
                fv_new[ok] = self._f_v.block(v_new[ok])
                fv_all[new] = fv_new
        valid = np.isfinite(fv_all[:, 0])
        self._last = (t_all[-1], q_all[-1], v_new[-1] if valid[-1] else None, tau_all[-1],
                      fv_all[-1] if valid[-1] else None)
        sel = np.flatnonzero(valid[:-1] & valid[1:])
        if sel.size:  # the filters see every complete sample, withheld ones included
            a = (fv_all[sel + 1] - fv_all[sel]) / (t_all[sel + 1] - t_all[sel])[:, None]
            tau_at = tau_all[sel] + self._w * (tau_all[sel + 1] - tau_all[sel])
            q_f, tau_f = self._positions(q_all[sel]), self._f_t.block(tau_at)
            settled = t_all[sel] >= self._t_first + self.settle
            sel, a, q_f, tau_f = sel[settled], a[settled], q_f[settled], tau_f[settled]
        if not sel.size:
            empty_q, empty = np.zeros((0, self.nq)), np.zeros((0, self.n))
            return np.zeros(0), empty_q, empty, empty, empty
        return t_all[sel], q_f, fv_all[sel], a, tau_f


