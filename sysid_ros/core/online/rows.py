"""Per-sample regression rows for online estimators, each ``push(t, q, dq, ddq, tau) -> (A, y) | None``.

:class:`ForceRows` (inverse dynamics, needs accelerations), :class:`MomentumRows` (fixed base:
generalised momentum over a window, no acceleration; trapezoidal or semi-implicit-Euler sums,
chosen from the samples' kinematics by :class:`IntegrationScheme`),
:class:`ConservationRows` (free-floating base in zero gravity: total momentum differences, or the
constant momentum as 6 unknowns); :class:`RowFilter` low-passes any builder's rows;
:class:`Nuisance` appends arm bodies estimated alongside a payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import Target
from sysid_ros.core.online.conditioning import CausalFilter
from sysid_ros.core.online.options import DISCRETISATIONS, Discretisation

Regression = Literal["force", "momentum", "conservation"]

def separable_links(model: RobotModel, body: int | str) -> tuple[int, ...]:
    """Moving bodies of ``model`` a payload on ``body`` can be told apart from: every identified
    body except free-floating bases and the bodies welded to ``body`` (same supporting dofs,
    hence the same columns as the payload up to a change of frame)."""
    from sysid_ros.core.model.kinematics import TreeTopology

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

    def rows_of(self, q, dq, ddq, tau):
        """``(A (…, n, p), y (…, n))`` of one or many samples, without per-sample splitting."""
        y, known = self.target.regressor(q, dq, ddq)
        if self.nuisance is not None and self.nuisance.bodies:
            model = self.target.model
            cols = self.nuisance.columns(model)
            from sysid_ros.core.model.regressor import torque_regressor  # (compiled kernels: when used)

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
        return self.rows_of(q, dq, ddq, tau)

    def push_batch(self, t, q, dq, ddq, tau) -> list:
        """Rows of ``K`` samples at once (one batched regressor call)."""
        y, rhs = self.rows_of(q, dq, ddq, tau)
        return [(y[k], rhs[k]) for k in range(len(t))]


def momentum_row_weight(torque_noise: float, window: float) -> float:
    """W [1/(N·m·s)²] of every :class:`MomentumRows` row for white torque noise ``torque_noise``
    σ [N·m] and windows of ``window`` T [s]: ``3/(σ² T²)``.

    The rows of one window are running integrals ``∫_{t_r}^{t} τ dt`` and share their noise (row
    ``k`` holds every earlier sample's). Weighed as independent rows of variance σ² h T each, a
    window's N = T/h rows, growing like ``s = t − t_r``, carry ``Σ s²/(σ² h T) ≈ T/(3h)`` times the
    information its N torque samples hold (83× at T = 0.5 s, h = 2 ms; the data's Ω was 56 times
    the force rows' on the same run). The log-det prior then had no say, and rows off by a
    relative 1e-3 put a compact payload's estimate on the consistency boundary (smallest
    pseudo-inertia eigenvalue at the interior margin, divergence to the truth 14). With
    ``3/(σ² T²)`` a window counts as its torque samples do (Ω 0.7 times the force rows').
    """
    return 3.0 / (torque_noise**2 * window**2)


@dataclass
class _Window:
    """Running integrals of one momentum window started at ``t0`` (trapezoidal scheme)."""

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
    scheme: str = "trapezoidal"


@dataclass
class _PendingWindow:
    """A window whose first sample (at ``t0``) came; its scheme is chosen at the next sample."""

    t0: float


@dataclass
class _EulerWindow:
    """Running sums of one window started at ``t0`` (Euler scheme): ``A = Σ h·Y``,
    ``y = Σ h·(τ − τ_known)``."""

    t0: float
    a: np.ndarray | None = None
    y: np.ndarray | None = None
    scheme: str = "euler"




class IntegrationScheme:
    """Which integration rule a recording's samples obey, from their kinematics alone.

    Per step of ``h`` [s] between samples ``(q, q̇)`` and ``(q₊, q̇₊)``: the semi-implicit Euler
    residual ``q₊ − q − h·q̇₊`` (zero for a simulator integrating by semi-implicit Euler at the
    sample rate, as MuJoCo's default integrator does) and the trapezoidal residual
    ``q₊ − q − h·(q̇ + q̇₊)/2`` (third order in ``h`` for a continuous-time motion sampled, e.g. a
    real arm, or a simulation stepped finer than it is recorded). Sums of squares since the start;
    :meth:`push_batch` says after every sample whether Euler fits better so far. Positions and
    velocities of different sizes (a free-floating base's quaternion) are not compared: trapezoidal.
    """

    def __init__(self) -> None:
        self.squares = np.zeros(2)  # [Euler, trapezoidal] residual sums of squares

    def push_batch(self, t: np.ndarray, q: np.ndarray, dq: np.ndarray,
                   previous: tuple[float, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """``(K,)`` bool: whether, with samples up to each one, Euler fits better than trapezoidal.
        ``previous``: the ``(t, q, q̇)`` sample before these (None after a gap: no difference
        across it; the sums stay)."""
        t, q, dq = np.asarray(t, dtype=float), np.asarray(q, dtype=float), np.asarray(dq, dtype=float)
        if q.shape != dq.shape or not len(t):
            return np.zeros(len(t), dtype=bool)
        if previous is not None:
            t0, q0, dq0 = previous
            tt, qq, vv = np.r_[t0, t], np.vstack((q0, q)), np.vstack((dq0, dq))
        else:
            tt, qq, vv = t, q, dq
        h = np.diff(tt)[:, None]
        dq_ = np.diff(qq, axis=0)
        euler = np.sum((dq_ - h * vv[1:]) ** 2, axis=1)
        trap = np.sum((dq_ - 0.5 * h * (vv[1:] + vv[:-1])) ** 2, axis=1)
        pad = len(t) - len(h)  # the first sample after a restart has no difference
        steps = np.c_[np.r_[np.zeros(pad), euler], np.r_[np.zeros(pad), trap]]
        sums = self.squares + np.cumsum(steps, axis=0)
        self.squares = sums[-1].copy()
        return sums[:, 0] < sums[:, 1]


class MomentumRows:
    """Generalised-momentum rows over windows of ``window`` seconds, no acceleration used.

    Two discretisations of the momentum balance ``d/dt(M q̇) = τ + Cᵀq̇ − g − F``:

    * ``trapezoidal``, for signals sampled from a continuous-time motion::

        A = Y_p(t) − Y_p(t_r) − ∫(Y_c − Y_g − Y_f) dt,   y = ∫ τ dt   (trapezoidal, from t_r)

    * ``euler``, for samples of a plant integrated by semi-implicit Euler at the sample rate
      (``q̇ₖ₊₁ = q̇ₖ + h·M(qₖ)⁻¹(τₖ − c(qₖ, q̇ₖ))``, ``qₖ₊₁ = qₖ + h·q̇ₖ₊₁``): the same balance summed
      by parts, ``Σₖ [M(qₖ)(q̇ₖ₊₁ − q̇ₖ) + h·c(qₖ, q̇ₖ)] = Σₖ h·τₖ``, i.e. ``A = Σₖ h·Y(qₖ, q̇ₖ, Δq̇ₖ/h)``,
      ``y = Σₖ h·τₖ`` over the window — exact for such samples, where the trapezoidal rows are off
      by a relative ~h (1e-3 at 500 Hz: more than a compact payload's second moments). The
      velocity differences telescope, so measurement noise is not amplified as in ``q̈ = Δq̇/h``.

    ``discretisation="auto"`` (default) takes, at every window's first row, the rule the samples'
    kinematics fit best so far (:class:`IntegrationScheme`); :attr:`windows` counts the windows
    begun under each. For a payload the known arm's terms move to ``y``; with ``nuisance`` those
    bodies' columns follow the payload's and their nominal terms leave the known part.
    ``torque_hold`` (trapezoidal rule): each sample's torque acts until the next sample
    (zero-order hold), so ``∫τ`` over a step is ``h·τ_{k−1}``. Rows have one entry per dof
    (``nv``); a free-floating base's rows have zero force.
    """

    def __init__(self, target: Target, window: float = 0.5, *, nuisance: Nuisance | None = None,
                 torque_hold: bool = False, discretisation: Discretisation = "auto") -> None:
        if nuisance is not None and target.kind != "payload":
            raise SysIdError("nuisance bodies go with a payload target")
        if discretisation not in DISCRETISATIONS:
            raise SysIdError(f"unknown momentum discretisation {discretisation!r}; expected "
                             f"{', '.join(DISCRETISATIONS)}")
        self.target = target
        self.window = window
        self.nuisance = nuisance
        self.torque_hold = torque_hold
        self.discretisation = discretisation
        self.windows = {"trapezoidal": 0, "euler": 0}
        self._scheme = IntegrationScheme()
        self._force = ForceRows(target, nuisance=nuisance)
        self._w: _Window | _EulerWindow | _PendingWindow | None = None
        self._last: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None  # t, q, q̇, τ
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
        self._last = None

    def _terms(self, q, dq):
        """(Yp, rate, known momentum, known rate) of one or many samples."""
        from sysid_ros.core.model.regressor import momentum_regressors  # (compiled kernels: when used)

        model = self.target.model
        m = momentum_regressors(model, q, dq)
        rate = m.Yc - m.Yg - m.Yf  # d/dt(Yp θ) = τ + rate θ
        if self.target.kind == "arm":
            return m.Yp, rate, None, None
        cols, known = self._cols, self._known  # the known arm's terms go to the output
        return m.Yp[..., cols], rate[..., cols], m.Yp @ known, rate @ known

    def push(self, t, q, dq, ddq, tau):
        return self.push_batch(np.array([t], dtype=float), np.asarray(q, dtype=float)[None],
                               np.asarray(dq, dtype=float)[None], None, np.asarray(tau, dtype=float)[None])[0]

    def _schemes(self, t: np.ndarray, euler_fits: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
        """Which samples start a window (by the times alone), and the scheme of every other
        sample's window, chosen at the window's second sample (its first row) from the
        kinematics up to it: the first step of the window already counts."""
        starts = np.zeros(len(t), dtype=bool)
        schemes: list[str | None] = []
        w = self._w
        t0 = None if w is None else w.t0
        current = None if w is None or isinstance(w, _PendingWindow) else w.scheme
        for k, tk in enumerate(t):
            if t0 is None or tk - t0 >= self.window:
                t0, starts[k], current = tk, True, None
                schemes.append(None)
                continue
            if current is None:
                current = (self.discretisation if self.discretisation != "auto"
                           else "euler" if euler_fits[k] else "trapezoidal")
            schemes.append(current)
        return starts, schemes

    def push_batch(self, t, q, dq, ddq, tau) -> list:
        """Rows of ``K`` samples (batched regressors, then the windows in order)."""
        t, q, dq = np.asarray(t, dtype=float), np.asarray(q, dtype=float), np.asarray(dq, dtype=float)
        tau = np.asarray(tau, dtype=float)
        previous = None if self._last is None else self._last[:3]
        starts, schemes = self._schemes(t, self._scheme.push_batch(t, q, dq, previous))
        trap = [k for k, s in enumerate(schemes) if s == "trapezoidal"]
        # a trapezoidal window's first sample: its momentum too (the previous batch's last: below)
        firsts = [k - 1 for k in trap if k >= 1 and starts[k - 1]]
        at = sorted(set(trap) | set(firsts))
        terms = self._terms(q[at], dq[at]) if at else None
        where = {k: i for i, k in enumerate(at)}
        euler = [k for k, s in enumerate(schemes) if s == "euler"]
        steps = self._euler_steps(t, q, dq, tau, euler) if euler else None
        out: list = []
        ei = 0
        for k, scheme in enumerate(schemes):
            if starts[k]:
                self._w = _PendingWindow(t[k])
                out.append(None)
                continue
            if isinstance(self._w, _PendingWindow):
                self.windows[scheme] += 1
                if scheme == "euler":
                    self._w = _EulerWindow(self._w.t0)
                else:
                    first = (tuple(x[where[k - 1]] if x is not None else None for x in terms) if k >= 1
                             else tuple(x[0] if x is not None else None
                                        for x in self._terms(self._last[1][None], self._last[2][None])))
                    tau0 = tau[k - 1] if k >= 1 else self._last[3]
                    self._w = _Window(self._w.t0, first[0], self._w.t0, first[1], np.zeros_like(first[1]),
                                      tau0, np.zeros_like(tau0), first[2], first[3],
                                      None if first[2] is None else np.zeros_like(tau0))
            if scheme == "euler":
                a, y = steps[0][ei], steps[1][ei]
                ei += 1
                w = self._w
                w.a, w.y = (a, y) if w.a is None else (w.a + a, w.y + y)
                out.append((w.a.copy(), w.y.copy()))
            else:
                i = where[k]
                out.append(self._trapezoidal(t[k], *(None if x is None else x[i] for x in terms), tau[k]))
        self._last = (t[-1], q[-1].copy(), dq[-1].copy(), tau[-1].copy())
        return out

    def _euler_steps(self, t, q, dq, tau, idx: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """``h·Y(qₖ, q̇ₖ, Δq̇ₖ/h)`` and ``h·(τₖ − τ_known)`` of the steps into samples ``idx``
        (sample ``k − 1`` is the previous batch's last when ``k`` is 0)."""
        t0, q0, dq0, tau0 = self._last or (np.nan, q[0], dq[0], tau[0])  # k = 0 is a start then
        tp = np.r_[t0, t[:-1]][idx]
        qp = np.vstack((q0, q[:-1]))[idx]
        dqp = np.vstack((dq0, dq[:-1]))[idx]
        taup = np.vstack((tau0, tau[:-1]))[idx]
        h = (t[idx] - tp)[:, None]
        y, rhs = self._force.rows_of(qp, dqp, (dq[idx] - dqp) / h, taup)
        return h[:, :, None] * y, h * rhs

    def _trapezoidal(self, t, yp, rate, known_p, known_rate, tau):
        w = self._w
        h = t - w.t
        w.int_rate = w.int_rate + 0.5 * h * (rate + w.rate)
        w.int_tau = w.int_tau + (h * w.tau if self.torque_hold else 0.5 * h * (tau + w.tau))
        w.t, w.rate, w.tau = t, rate, tau
        a = yp - w.yp0 - w.int_rate
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
        from sysid_ros.core.model.regressor import world_momentum_regressor  # (regressor: when used)

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


