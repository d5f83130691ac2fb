"""Online identification: causal conditioning, per-sample regression rows, recursive estimators.

Nothing here looks ahead: every sample is processed when it arrives, as on a live robot.

* :class:`CausalConditioner` — the same causal Butterworth low-pass on positions (floating-base
  quaternions re-normalised), velocities (measured, or backward differences) and torques, so that
  all signals share one delay; accelerations are differences of the filtered velocity;
* row builders, each ``push(t, q, dq, ddq, tau) -> (A, y) | None``:
  :class:`ForceRows` (inverse dynamics, needs accelerations),
  :class:`MomentumRows` (fixed base: generalised momentum over a window, trapezoidal integrals,
  no acceleration), :class:`ConservationRows` (free-floating base in zero gravity: total momentum
  differences, or the constant momentum as 6 unknowns); :class:`RowFilter` low-passes any
  builder's rows; :class:`Nuisance` appends arm bodies estimated alongside a payload;
* :class:`OnlineEstimator` — a row builder feeding RLS or RLS log-det-div, with diagnostics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.signal

from .errors import DataError, SysIdError
from .estimators.rls import RecursiveLeastSquares
from .estimators.rls_logdet import RLSLogDet
from .model import RobotModel
from .regressor import momentum_regressors, torque_regressor, world_momentum_regressor
from .row_weights import ResidualWeights
from .target import Target

Regression = Literal["force", "momentum", "conservation"]
Estimator = Literal["rls", "rls_logdet"]
Weighting = Literal["fixed", "adaptive"]
WEIGHTINGS: tuple[str, ...] = ("fixed", "adaptive")


class CausalFilter:
    """Causal Butterworth low-pass over ``channels`` signals, one sample at a time."""

    def __init__(self, fs: float, cutoff: float, channels: int, order: int = 2) -> None:
        if not 0 < cutoff < 0.5 * fs:
            raise DataError(f"cut-off {cutoff} Hz must be in (0, {0.5 * fs}) Hz at {fs} Hz")
        self.sos = scipy.signal.butter(order, cutoff, fs=fs, output="sos")
        self.cutoff = cutoff
        self._zi_unit = scipy.signal.sosfilt_zi(self.sos)  # (sections, 2)
        self.zi: np.ndarray | None = None
        self.channels = channels

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.block(np.asarray(x, dtype=float)[None, :])[0]

    def settling_time(self, fs: float, level: float = 0.01) -> float:
        """[s] after which the impulse response stays below ``level`` of its peak: how long a
        start-up transient lasts (≈ 1/cutoff for the 2nd-order Butterworth)."""
        n = int(fs * 50.0 / max(self.cutoff, 1e-9)) + 16
        impulse = np.zeros(n)
        impulse[0] = 1.0
        h = np.abs(scipy.signal.sosfilt(self.sos, impulse))
        above = np.flatnonzero(h >= level * h.max())
        return float(above[-1] + 1) / fs

    def block(self, x: np.ndarray) -> np.ndarray:
        """Filter ``K`` consecutive samples ``(K, channels)`` in one call."""
        x = np.asarray(x, dtype=float)
        if self.zi is None:  # start at rest on the first value (no start-up transient)
            self.zi = self._zi_unit[:, :, None] * x[0][None, None, :]
        y, self.zi = scipy.signal.sosfilt(self.sos, x, axis=0, zi=self.zi)
        return y


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
    Non-increasing times raise :class:`DataError` (the caller rejects the sample and goes on).
    """

    def __init__(self, n: int, fs: float, cutoff: float, *, use_measured_velocity: bool = True,
                 nq: int | None = None, quaternions: tuple[int, ...] = (),
                 settle: float | str = 0.0) -> None:
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
        self.settle = self._f_v.settling_time(fs) if settle == "auto" else float(settle)
        self._t_first: float | None = None

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
        out = t0, self._positions(q0[None])[0], fv0, a, self._f_t(tau0)
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
            q_f, tau_f = self._positions(q_all[sel]), self._f_t.block(tau_all[sel])
            settled = t_all[sel] >= self._t_first + self.settle
            sel, a, q_f, tau_f = sel[settled], a[settled], q_f[settled], tau_f[settled]
        if not sel.size:
            empty_q, empty = np.zeros((0, self.nq)), np.zeros((0, self.n))
            return np.zeros(0), empty_q, empty, empty, empty
        return t_all[sel], q_f, fv_all[sel], a, tau_f


def separable_links(model: RobotModel, body: int | str) -> tuple[int, ...]:
    """Moving bodies of ``model`` a payload on ``body`` can be told apart from: every identified
    body except free-floating bases and the bodies welded to ``body`` (same supporting dofs,
    hence the same columns as the payload up to a change of frame)."""
    from .kinematics import TreeTopology

    bid = model.body_id(body) if isinstance(body, str) else int(body)
    mask = model.derived("topology", lambda: TreeTopology.of(model)).body_dof_mask
    free = {j.body for j in model.joints if j.type == "free"}
    return tuple(b for b in model.param_bodies
                 if b not in free and mask[b - 1].any() and not np.array_equal(mask[b - 1], mask[bid - 1]))


@dataclass(frozen=True)
class Nuisance:
    """Arm bodies estimated alongside a payload (their model error would otherwise bias it).

    Their columns follow the payload's (and any extra unknowns) in the rows; :meth:`setup` gives
    the RLS log-det prior, blocks and per-body weights: the nominal values, each body's divergence
    weighted so that ``α·w = 1/accuracy²`` (the log-det divergence is ≈ ½‖relative error‖², so
    this is a prior of ``accuracy`` relative standard deviation, e.g. 0.025 for a CAD model good
    to 2.5 %), the payload's weight 1.
    """

    bodies: tuple[int, ...]
    accuracy: float = 0.025

    def columns(self, model: RobotModel) -> np.ndarray:
        """Their columns in the model's parameter vector."""
        return np.concatenate([np.arange(model.body_slice(b).start, model.body_slice(b).stop)
                               for b in self.bodies]) if self.bodies else np.zeros(0, dtype=int)

    def setup(self, target: Target, alpha: float, extra: int = 0
              ) -> tuple[np.ndarray, list[slice], np.ndarray]:
        """``(prior, blocks, block_weights)`` for θ = [payload 10, ``extra`` zeros, bodies 10 each]."""
        model = target.model
        start = 10 + extra
        prior = np.concatenate((target.prior, np.zeros(extra), model.nominal[self.columns(model)]))
        n = len(self.bodies)
        blocks = [slice(0, 10)] + [slice(start + 10 * i, start + 10 * (i + 1)) for i in range(n)]
        weights = np.r_[1.0, np.full(n, 1.0 / (alpha * self.accuracy**2))]
        return prior, blocks, weights


class ForceRows:
    """Inverse-dynamics rows ``A = Y(q, q̇, q̈)``, ``y = τ − τ_known`` of a target; with
    ``nuisance`` (payload targets), those bodies' columns are appended and their nominal torque
    leaves ``τ_known``. With ``min_speed`` [rad/s] > 0 and Coulomb friction in the model (known or
    identified), a joint's row is zeroed (carries no information) while the joint is slower than
    that: the sign model of Coulomb friction fails near rest (stiction), as in batch identification."""

    def __init__(self, target: Target, *, nuisance: Nuisance | None = None, min_speed: float = 0.0) -> None:
        if nuisance is not None and target.kind != "payload":
            raise SysIdError("nuisance bodies go with a payload target")
        self.target = target
        self.nuisance = nuisance
        self.min_speed = float(min_speed) if "Fc" in target.model.joint_terms else 0.0

    def restart(self) -> None:
        """Nothing to restart: every row stands alone."""

    def _rows(self, q, dq, ddq, tau):
        y, known = self.target.regressor(q, dq, ddq)
        if self.nuisance is not None and self.nuisance.bodies:
            model = self.target.model
            cols = self.nuisance.columns(model)
            full = torque_regressor(model, q, dq, ddq)[..., cols]
            known = known - full @ model.nominal[cols]
            y = np.concatenate((y, full), axis=-1)
        rhs = np.asarray(tau) - known
        if self.min_speed > 0:
            joints = self.target.model.dof_indices  # hinge/slide joints (a free base has no friction)
            slow = np.zeros(np.shape(rhs), dtype=bool)
            slow[..., joints] = np.abs(np.asarray(dq)[..., joints]) < self.min_speed
            y = np.where(slow[..., None], 0.0, y)
            rhs = np.where(slow, 0.0, rhs)
        return y, rhs

    def push(self, t, q, dq, ddq, tau):
        return self._rows(q, dq, ddq, tau)

    def push_batch(self, t, q, dq, ddq, tau) -> list:
        """Rows of ``K`` samples at once (one batched regressor call)."""
        y, rhs = self._rows(q, dq, ddq, tau)
        return [(y[k], rhs[k]) for k in range(len(t))]


@dataclass
class _Window:
    """Running integrals of one momentum window started at ``t0``."""

    t0: float
    yp0: np.ndarray  # Yp(t_r)
    t: float  # last sample time
    rate: np.ndarray  # last (Yc − Yg − Yf)
    int_rate: np.ndarray
    tau: np.ndarray  # last torque
    int_tau: np.ndarray
    known_p0: np.ndarray | None = None  # known arm's momentum at t_r (payload targets)
    known_rate: np.ndarray | None = None
    int_known: np.ndarray | None = None


class MomentumRows:
    """Generalised-momentum rows over windows of ``window`` seconds::

        A = Y_p(t) − Y_p(t_r) − ∫(Y_c − Y_g − Y_f) dt,   y = ∫ τ dt   (trapezoidal, from t_r)

    For a payload the known arm's terms move to ``y``; with ``nuisance`` those bodies' columns
    follow the payload's and their nominal terms leave the known part. No acceleration is used.
    ``torque_hold``: each sample's torque acts until the next sample (zero-order hold, as an MIT
    command or a simulator's control does), so ``∫τ`` over a step is ``h·τ_{k−1}`` exactly; by
    default the trapezoidal rule (a torque sampled from a continuous signal).
    Rows have one entry per dof (``nv``); a free-floating base's rows have zero force.
    """

    def __init__(self, target: Target, window: float = 0.5, *, nuisance: Nuisance | None = None,
                 torque_hold: bool = False) -> None:
        if nuisance is not None and target.kind != "payload":
            raise SysIdError("nuisance bodies go with a payload target")
        self.target = target
        self.window = window
        self.nuisance = nuisance
        self.torque_hold = torque_hold
        self._w: _Window | None = None
        model = target.model
        if target.kind == "payload":  # its columns, then the nuisance bodies'; the rest is known
            body = model.body_slice(target.body)
            self._cols = np.r_[np.arange(body.start, body.stop),
                               nuisance.columns(model) if nuisance is not None else np.zeros(0, dtype=int)]
            self._known = model.nominal.copy()
            self._known[self._cols[10:]] = 0.0

    def restart(self) -> None:
        """Start a new window at the next sample (after a gap in the data)."""
        self._w = None

    def _terms(self, q, dq):
        """(Yp, rate, known momentum, known rate) of one or many samples."""
        model = self.target.model
        m = momentum_regressors(model, q, dq)
        rate = m.Yc - m.Yg - m.Yf  # d/dt(Yp θ) = τ + rate θ
        if self.target.kind == "arm":
            return m.Yp, rate, None, None
        cols, known = self._cols, self._known  # the known arm's terms go to the output
        return m.Yp[..., cols], rate[..., cols], m.Yp @ known, rate @ known

    def push(self, t, q, dq, ddq, tau):
        return self._step(t, *self._terms(q, dq), np.asarray(tau, dtype=float))

    def push_batch(self, t, q, dq, ddq, tau) -> list:
        """Rows of ``K`` samples (batched regressors, then the windows in order)."""
        yp, rate, kp, kr = self._terms(q, dq)
        return [self._step(t[k], yp[k], rate[k], None if kp is None else kp[k],
                           None if kr is None else kr[k], np.asarray(tau[k], dtype=float))
                for k in range(len(t))]

    def _step(self, t, yp, rate, known_p, known_rate, tau):
        m_yp = yp
        w = self._w
        if w is None or t - w.t0 >= self.window:
            self._w = _Window(t, m_yp, t, rate, np.zeros_like(rate), tau, np.zeros_like(tau), known_p,
                              known_rate, None if known_p is None else np.zeros_like(tau))
            return None
        h = t - w.t
        w.int_rate = w.int_rate + 0.5 * h * (rate + w.rate)
        w.int_tau = w.int_tau + (h * w.tau if self.torque_hold else 0.5 * h * (tau + w.tau))
        w.t, w.rate, w.tau = t, rate, tau
        a = m_yp - w.yp0 - w.int_rate
        y = w.int_tau.copy()
        if known_p is not None:
            w.int_known = w.int_known + 0.5 * h * (known_rate + w.known_rate)
            w.known_rate = known_rate
            y = y - (known_p - w.known_p0 - w.int_known)
        return a, y


class ConservationRows:
    """Free-floating base without external wrench: total momentum is constant, so for the target
    body ``(A_T(t) − A_T(t_r)) φ = −(h_robot(t) − h_robot(t_r))`` (6 rows; linear rows scaled by
    ``linear_weight`` [s] to balance N·s against N·m·s). ``q``/``dq`` are whole ``qpos``/``qvel``.

    ``unknown_initial=True``: no reference sample; the constant total momentum ``h₀`` becomes 6
    more unknowns, ``[A_T(t), −I] [φ; h₀] = −h_robot(t)`` (give the estimator a prior of 16 values
    with a weak quadratic term on ``h₀``). With a reference sample, its measurement noise — and
    the robot model's error at that instant — is a constant offset in every later row; as
    unknowns they are estimated from all samples instead.
    """

    def __init__(self, target: Target, *, linear_weight: float = 1.0, unknown_initial: bool = False,
                 nuisance: Nuisance | None = None) -> None:
        if target.kind != "payload":
            raise SysIdError("conservation rows identify one payload on a known floating robot")
        self.target = target
        self.weight = np.array([linear_weight] * 3 + [1.0] * 3)
        self.unknown_initial = unknown_initial
        self.nuisance = nuisance
        self._ref: tuple[np.ndarray, np.ndarray] | None = None

    def restart(self) -> None:
        """Take a new reference at the next sample."""
        self._ref = None

    def _terms(self, q, dq) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The target's momentum regressor, the known robot's momentum and the nuisance bodies'
        momentum regressor (or None), for one or many samples."""
        model = self.target.model
        a_t = world_momentum_regressor(model, self.target.body, q, dq)
        bodies = () if self.nuisance is None else self.nuisance.bodies
        h_robot = sum(world_momentum_regressor(model, b, q, dq) @ model.nominal[model.body_slice(b)]
                      for b in model.param_bodies if b not in bodies)
        extra = (np.concatenate([world_momentum_regressor(model, b, q, dq) for b in bodies], axis=-1)
                 if bodies else None)
        return a_t, h_robot, extra

    def push(self, t, q, dq, ddq, tau):
        return self._step(*self._terms(q, dq))

    def push_batch(self, t, q, dq, ddq, tau) -> list:
        """Rows of ``K`` samples (batched regressors, then the differences in order)."""
        a_t, h_robot, extra = self._terms(np.asarray(q), np.asarray(dq))
        return [self._step(a_t[k], h_robot[k], None if extra is None else extra[k]) for k in range(len(t))]

    def _step(self, a_t: np.ndarray, h_robot: np.ndarray, extra: np.ndarray | None = None):
        if self.unknown_initial:
            cols = [a_t, -np.eye(6)] + ([] if extra is None else [extra])
            return np.hstack(cols) * self.weight[:, None], -h_robot * self.weight
        if extra is not None:
            a_t = np.hstack((a_t, extra))
        if self._ref is None:
            self._ref = (a_t, h_robot)
            return None
        a = (a_t - self._ref[0]) * self.weight[:, None]
        y = -(h_robot - self._ref[1]) * self.weight
        return a, y


class RowFilter:
    """The same causal low-pass applied to every entry of a row builder's ``(A, y)`` rows.

    Rows that hold exactly, ``A_k θ = y_k``, still hold after any linear filter, so this cuts the
    measurement noise of rows built from raw signals (e.g. momentum rows from measured velocities)
    without the distortion of filtering the signals before a nonlinear regressor. ``push`` and
    ``push_batch`` pass through to ``rows`` and return filtered rows (``None`` while it has none).
    """

    def __init__(self, rows, fs: float, cutoff: float) -> None:
        self.rows = rows
        self.fs, self.cutoff = fs, cutoff
        self._filter: CausalFilter | None = None
        self._shape: tuple[int, int] | None = None

    def restart(self) -> None:
        self.rows.restart()
        self._filter = None

    def _apply(self, built: list) -> list:
        out = []
        for r in built:
            if r is None:
                out.append(None)
                continue
            a, y = np.atleast_2d(r[0]), np.atleast_1d(r[1])
            if self._filter is None or self._shape != a.shape:
                self._filter, self._shape = CausalFilter(self.fs, self.cutoff, a.size + y.size), a.shape
            x = self._filter(np.concatenate((a.ravel(), y)))
            out.append((x[:a.size].reshape(a.shape), x[a.size:]))
        return out

    def push(self, t, q, dq, ddq, tau):
        return self._apply([self.rows.push(t, q, dq, ddq, tau)])[0]

    def push_batch(self, t, q, dq, ddq, tau) -> list:
        built = self.rows.push_batch(t, q, dq, ddq, tau)
        idx = [k for k, r in enumerate(built) if r is not None]
        if not idx:
            return built
        a = np.array([np.atleast_2d(built[k][0]) for k in idx])
        y = np.array([np.atleast_1d(built[k][1]) for k in idx])
        if self._filter is None or self._shape != a.shape[1:]:
            self._filter = CausalFilter(self.fs, self.cutoff, a[0].size + y[0].size)
            self._shape = a.shape[1:]
        x = self._filter.block(np.hstack((a.reshape(len(idx), -1), y)))
        n = a[0].size
        out: list = [None] * len(built)
        for j, k in enumerate(idx):
            out[k] = (x[j, :n].reshape(self._shape), x[j, n:])
        return out


@dataclass
class OnlineLog:
    """Estimates over time: ``t (K,)``, ``theta (K, p)``, ``divergence (K,)`` (NaN if no truth)."""

    t: list[float] = field(default_factory=list)
    theta: list[np.ndarray] = field(default_factory=list)
    divergence: list[float] = field(default_factory=list)
    update_time: list[float] = field(default_factory=list)


class OnlineEstimator:
    """A row builder feeding RLS or RLS log-det-div, with counters and timing.

    ``push`` takes one conditioned sample; bad samples raise :class:`DataError` and leave the
    estimate untouched. ``weight``: the rows' W from the sensors (scalar or per row);
    ``weighting="adaptive"``: W = 1/σ̂² per row instead, σ̂ estimated online from the
    residuals with ``weight_memory`` [s] of memory at ``sample_rate`` [Hz] rows, never above
    ``weight`` (:class:`~sysid_ros.core.row_weights.ResidualWeights`).
    """

    def __init__(self, target: Target, *, regression: Regression = "force",
                 estimator: Estimator = "rls_logdet",
                 forgetting: float = 1.0, alpha: float = 1.0, weight: float | np.ndarray = 1.0,
                 window: float = 0.5, prior: np.ndarray | None = None, p0: float = 1.0,
                 truth: np.ndarray | None = None, min_speed: float = 0.0,
                 weighting: Weighting = "fixed", weight_memory: float = 1.0,
                 sample_rate: float = 500.0) -> None:
        self.target = target
        self.prior = target.prior if prior is None else np.asarray(prior, dtype=float)
        if regression == "force":
            self.rows = ForceRows(target, min_speed=min_speed)
        elif regression == "momentum":
            self.rows = MomentumRows(target, window=window)
        elif regression == "conservation":
            self.rows = ConservationRows(target)
        else:
            raise DataError(f"unknown regression {regression!r}; expected force, momentum or conservation")
        if weighting not in WEIGHTINGS:
            raise DataError(f"unknown weighting {weighting!r}; expected {' or '.join(WEIGHTINGS)}")
        # adaptive: rows whitened by their online error estimate (the sensors' σ its floor), unit W
        self.row_weights = (ResidualWeights(np.asarray(weight, dtype=float) ** -0.5,
                                            time_constant=weight_memory, fs=sample_rate)
                            if weighting == "adaptive" else None)
        if self.row_weights is not None:
            weight = 1.0
        if estimator == "rls_logdet":
            blocks = [sl for _, sl in target.body_blocks]
            self.core = RLSLogDet(self.prior, blocks, alpha=alpha, weight=weight, forgetting=forgetting)
        elif estimator == "rls":
            self.core = RecursiveLeastSquares(self.prior, p0, forgetting=forgetting,
                                              noise=1.0 / np.sqrt(weight))
        else:
            raise DataError(f"unknown estimator {estimator!r}; expected rls or rls_logdet")
        self.regression, self.estimator = regression, estimator
        self.truth = truth
        self.log = OnlineLog()
        self.rejected = 0
        self.residual_sq = 0.0
        self.residual_n = 0

    @property
    def theta(self) -> np.ndarray:
        return self.core.theta

    @property
    def samples(self) -> int:
        return self.core.samples

    def divergence(self, reference: np.ndarray) -> float:
        """Σ_b log-det divergence of the estimate from ``reference`` (inf if inconsistent)."""
        return self.target.divergence(self.theta, reference)

    def push(self, t: float, q, dq, ddq, tau, *, log: bool = True) -> bool:
        """Process one sample; returns whether the estimate was updated."""
        start = time.perf_counter()
        return self._update(t, self.rows.push(t, q, dq, ddq, tau), start, log)

    def push_batch(self, t, q, dq, ddq, tau, *, log: bool = True) -> int:
        """Process ``K`` samples with batched regressors (how a node catches up); returns the
        number of updates."""
        if not hasattr(self.rows, "push_batch"):
            return sum(self.push(t[k], q[k], dq[k], ddq[k], tau[k], log=log) for k in range(len(t)))
        start = time.perf_counter()
        rows = self.rows.push_batch(t, q, dq, ddq, tau)
        build = (time.perf_counter() - start) / max(len(rows), 1)
        return sum(self._update(t[k], r, time.perf_counter() - build, log) for k, r in enumerate(rows))

    def _update(self, t: float, rows, start: float, log: bool) -> bool:
        if rows is None:
            return False
        a, y = rows
        residual = y - a @ self.core.theta
        if self.row_weights is None:
            self.core.update(a, y)
        else:
            self.core.update(*self.row_weights.whiten(a, y, self.core.theta))
            self.row_weights.observe(a, y, self.core.theta)
        self.residual_sq += float(residual @ residual)
        self.residual_n += residual.size
        if log:
            self.log.t.append(t)
            self.log.theta.append(self.core.theta.copy())
            self.log.divergence.append(self.divergence(self.truth) if self.truth is not None else np.nan)
            self.log.update_time.append(time.perf_counter() - start)
        return True

    @property
    def residual_rms(self) -> float:
        return float(np.sqrt(self.residual_sq / self.residual_n)) if self.residual_n else float("nan")
