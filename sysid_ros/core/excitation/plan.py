"""A complete excitation run: ramp in from the measured pose, the Fourier excitation, ramp out to
rest — clamped to the joint and motor limits, with the MIT-mode command (feed-forward torque from
the nominal model, gains) at any time.

Ramps are quintic polynomials matching position, velocity and acceleration at both ends (zero
velocity and acceleration at the measured start and at rest), lengthened until they respect the
velocity and acceleration limits. Clamping is a guard, not a design tool: the excitation is
already fitted inside the limits (:meth:`FourierTrajectory.fit_to`); what still gets clamped is
counted per joint and reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.data.trajectory_file import TrajectoryFile
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel

__all__ = ["MIT_KD_MAX", "MIT_KP_MAX", "ClampReport", "ExcitationPlan", "quintic"]

#: MIT-mode gain mapping ranges of the Damiao firmware [N·m/rad], [N·m·s/rad]
MIT_KP_MAX, MIT_KD_MAX = 500.0, 5.0


def quintic(t: np.ndarray, duration: float, start: tuple, end: tuple) -> tuple[np.ndarray, ...]:
    """Quintic from ``start = (p, v, a)`` to ``end`` (each ``(n,)``) over ``duration`` [s],
    evaluated at ``t (N,)`` in ``[0, duration]``: ``(q, dq, ddq)`` each ``(N, n)``."""
    T = float(duration)
    p0, v0, a0 = (np.asarray(x, dtype=float) for x in start)
    p1, v1, a1 = (np.asarray(x, dtype=float) for x in end)
    dp = p1 - p0 - v0 * T - 0.5 * a0 * T**2
    dv = v1 - v0 - a0 * T
    da = a1 - a0
    c3 = (10 * dp - 4 * dv * T + 0.5 * da * T**2) / T**3
    c4 = (-15 * dp + 7 * dv * T - da * T**2) / T**4
    c5 = (6 * dp - 3 * dv * T + 0.5 * da * T**2) / T**5
    s = np.clip(np.asarray(t, dtype=float), 0.0, T)[:, None]
    q = p0 + v0 * s + 0.5 * a0 * s**2 + c3 * s**3 + c4 * s**4 + c5 * s**5
    dq = v0 + a0 * s + 3 * c3 * s**2 + 4 * c4 * s**3 + 5 * c5 * s**4
    ddq = a0 + 6 * c3 * s + 12 * c4 * s**2 + 20 * c5 * s**3
    return q, dq, ddq


@dataclass
class ClampReport:
    """How often each joint's reference was clamped (counts of evaluated samples)."""

    joints: tuple[str, ...]
    counts: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, kind: str, mask: np.ndarray) -> None:
        hits = np.asarray(mask, dtype=bool).reshape(-1, len(self.joints)).sum(0)
        self.counts[kind] = self.counts.get(kind, np.zeros(len(self.joints), dtype=int)) + hits

    @property
    def total(self) -> int:
        return int(sum(int(c.sum()) for c in self.counts.values()))

    def summary(self) -> str:
        parts = [f"{kind} {self.joints[j]}×{int(c[j])}" for kind, c in self.counts.items()
                 for j in np.flatnonzero(c)]
        return "no clamping" if not parts else "clamped: " + ", ".join(parts)


@dataclass
class ExcitationPlan:
    """``start`` (measured pose) → ramp in → ``repetitions`` periods of ``trajectory`` → ramp out
    → ``rest``. Times [s] from the start of the ramp in; positions [rad]."""

    model: RobotModel
    trajectory: FourierTrajectory
    limits: Limits
    start: np.ndarray
    rest: np.ndarray
    excitation_time: float
    ramp_in: float
    ramp_out: float
    kp: np.ndarray
    kd: np.ndarray
    feedforward: bool = True
    clamps: ClampReport = field(init=False)

    def __post_init__(self) -> None:
        self.clamps = ClampReport(self.model.dof_joint_names)

    @classmethod
    def build(cls, model: RobotModel, trajectory: FourierTrajectory, start: np.ndarray, *,
              excitation_time: float | None = None, ramp_time: float = 2.0,
              rest: np.ndarray | None = None, limits: Limits | None = None,
              kp: np.ndarray | float | None = None, kd: np.ndarray | float | None = None,
              feedforward: bool = True) -> ExcitationPlan:
        """Plan a run. ``excitation_time`` defaults to one period; ``ramp_time`` [s] is the
        shortest ramp (lengthened to respect the limits); ``rest`` defaults to ``start`` clamped
        into the joint range; gains default to :func:`default_gains` clipped to the MIT ranges."""
        from sysid_ros.core.sim.simulation import default_gains

        model.require_scalar_joints("an excitation plan (per-motor commands)")
        n = model.dof_indices.size
        limits = limits or Limits.of(model)
        start = np.asarray(start, dtype=float)
        if start.shape != (n,) or not np.all(np.isfinite(start)):
            raise SysIdError(f"expected a finite start pose of the {n} joints "
                             f"{list(model.dof_joint_names)}, got {start.tolist()}")
        rest = np.clip(start if rest is None else np.asarray(rest, dtype=float), limits.lower, limits.upper)
        kp0, kd0 = default_gains(model)
        kp_v = np.clip(np.broadcast_to(kp0 if kp is None else kp, (n,)).astype(float), 0.0, MIT_KP_MAX)
        kd_v = np.clip(np.broadcast_to(kd0 if kd is None else kd, (n,)).astype(float), 0.0, MIT_KD_MAX)
        excitation_time = trajectory.period if excitation_time is None else float(excitation_time)
        if not excitation_time > 0 or not ramp_time > 0:
            raise SysIdError("excitation and ramp times must be positive, got "
                             f"{excitation_time}, {ramp_time}")
        q0, dq0, ddq0 = (x[0] for x in trajectory.evaluate([0.0]))
        q1, dq1, ddq1 = (x[0] for x in trajectory.evaluate([excitation_time]))
        zero = np.zeros(n)
        t_in = _ramp_length((start, zero, zero), (q0, dq0, ddq0), ramp_time, limits)
        t_out = _ramp_length((q1, dq1, ddq1), (rest, zero, zero), ramp_time, limits)
        return cls(model, trajectory, limits, start, rest, excitation_time, t_in, t_out, kp_v, kd_v,
                   feedforward)

    @property
    def duration(self) -> float:
        """Total time [s] of ramp in, excitation and ramp out."""
        return self.ramp_in + self.excitation_time + self.ramp_out

    @property
    def excitation_window(self) -> tuple[float, float]:
        """``(begin, end)`` [s] of the excitation proper (without the ramps)."""
        return self.ramp_in, self.ramp_in + self.excitation_time

    def reference(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unclamped ``(q, dq, ddq)`` each ``(N, n)`` at times ``t (N,)`` [s]."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        n = self.start.size
        out = [np.empty((t.size, n)) for _ in range(3)]
        zero = np.zeros(n)
        t_a, t_b = self.excitation_window
        phases = (
            (t < t_a, lambda s: quintic(s, self.ramp_in, (self.start, zero, zero),
                                        tuple(x[0] for x in self.trajectory.evaluate([0.0])))),
            ((t >= t_a) & (t <= t_b), lambda s: self.trajectory.evaluate(s - t_a)),
            (t > t_b, lambda s: quintic(s - t_b, self.ramp_out,
                                        tuple(x[0] for x in self.trajectory.evaluate([self.excitation_time])),
                                        (self.rest, zero, zero))),
        )
        for mask, fn in phases:
            if np.any(mask):
                for arr, val in zip(out, fn(t[mask]), strict=True):
                    arr[mask] = val
        return out[0], out[1], out[2]

    def command(self, t) -> tuple[np.ndarray, ...]:
        """The clamped MIT command at times ``t (N,)``: ``(q*, dq*, τ_ff, kp, kd, ddq*)`` each
        ``(N, n)``. Clamping (position range, velocity, acceleration, torque limits) is counted in
        :attr:`clamps`; ``τ_ff`` is the nominal model's inverse dynamics of the clamped reference."""
        q, dq, ddq = self.reference(t)
        lim = self.limits
        q_c = np.clip(q, lim.lower, lim.upper)
        dq_c = np.clip(dq, -lim.velocity, lim.velocity)
        ddq_c = np.clip(ddq, -lim.acceleration, lim.acceleration)
        tol = 1e-9
        self.clamps.add("position", np.abs(q_c - q) > tol)
        self.clamps.add("velocity", np.abs(dq_c - dq) > tol)
        self.clamps.add("acceleration", np.abs(ddq_c - ddq) > tol)
        if self.feedforward:
            from sysid_ros.core.model.regressor import torque_regressor  # (compiled kernels: when used)

            tau = torque_regressor(self.model, q_c, dq_c, ddq_c) @ self.model.nominal
            tau = np.atleast_2d(tau)
            tau_c = np.clip(tau, -lim.torque, lim.torque)
            self.clamps.add("torque", np.abs(tau_c - tau) > tol)
        else:
            tau_c = np.zeros_like(q_c)
        n_t = q_c.shape[0]
        return (q_c, dq_c, tau_c, np.tile(self.kp, (n_t, 1)), np.tile(self.kd, (n_t, 1)), ddq_c)

    def sampled(self, rate: float) -> TrajectoryFile:
        """The whole run sampled at ``rate`` [Hz] as a replayable :class:`TrajectoryFile`."""
        from sysid_ros.core.sim.simulation import check_steps

        if not (np.isfinite(rate) and rate > 0):
            raise SysIdError(f"rate must be a finite number > 0 Hz, got {rate}")
        check_steps(self.duration, 1.0 / rate)  # the file's samples bounded like a recorded run's
        t = np.arange(int(np.floor(self.duration * rate)) + 1) / rate
        q, dq, tau, kp, kd, _ = self.command(t)
        motors = self.model.motors
        names = self.model.dof_joint_names
        tr = self.trajectory
        meta = {"model": str(self.model.source or ""), "rate": f"{rate:g}",
                "excitation": f"{self.excitation_window[0]:.6f},{self.excitation_window[1]:.6f}",
                "fourier_period": f"{tr.period:g}", "clamping": self.clamps.summary()}
        return TrajectoryFile(t, names, tuple(motors[j].name if j in motors else "" for j in names),
                              q, dq, tau, kp, kd, meta=meta)


def _ramp_length(start: tuple, end: tuple, shortest: float, limits: Limits) -> float:
    """The shortest ramp ≥ ``shortest`` [s] (growing by 25 %) whose quintic stays within the
    velocity and acceleration limits (positions stay between the end points' hull of the range)."""
    t_ramp = float(shortest)
    for _ in range(40):
        _, dq, ddq = quintic(np.linspace(0.0, t_ramp, 200), t_ramp, start, end)
        if np.all(np.abs(dq) <= limits.velocity + 1e-9) and np.all(np.abs(ddq) <= limits.acceleration + 1e-9):
            return t_ramp
        t_ramp *= 1.25
    return t_ramp
