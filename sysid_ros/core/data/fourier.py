"""Fourier trajectories: finite Fourier series per joint with exact derivatives.

The excitation designs them (:mod:`sysid_ros.core.excitation`) and the simulator plays them
(:mod:`sysid_ros.core.sim`); they live here, below both, with the other descriptions of motion
(:mod:`~sysid_ros.core.data.trajectory_file`).

Per dof (Swevers et al.; overview seed), with ``ω_f = 2π / period``:

    q(t)  = q₀ + Σ_l [ a_l/(ω_f l) sin(ω_f l t) − b_l/(ω_f l) cos(ω_f l t) ]
    q̇(t) =      Σ_l [ a_l cos(ω_f l t) + b_l sin(ω_f l t) ]
    q̈(t) =      Σ_l ω_f l [ −a_l sin(ω_f l t) + b_l cos(ω_f l t) ]

The series is periodic, so repetitions can be averaged. :meth:`FourierTrajectory.random`
draws coefficients and scales them so positions stay inside the joint range (with a margin) and
velocities/accelerations inside their limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel

__all__ = ["FourierTrajectory", "Limits"]


@dataclass(frozen=True)
class Limits:
    """Per-dof limits, SI units: position ``lower/upper (nv,)``, ``velocity``/``acceleration``
    magnitudes ``(nv,)``, ``torque`` magnitudes ``(nv,)`` (``inf`` where none)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    torque: np.ndarray

    @classmethod
    def of(cls, model: RobotModel, *, velocity: float | np.ndarray | None = None,
           acceleration: float | np.ndarray = 8.0, unlimited_range: float = np.pi) -> Limits:
        """Limits of a model: joint ranges (``±unlimited_range`` where none), motor velocity and
        torque limits where the model names its motors, else ``velocity`` (default 2 rad/s)."""
        act = model.dof_indices  # the commanded (hinge/slide) joints; a free base is not excited
        lo, hi = (x[act] for x in model.joint_limits())
        lo = np.where(np.isfinite(lo), lo, -unlimited_range)
        hi = np.where(np.isfinite(hi), hi, unlimited_range)
        vel = model.velocity_limits()[act]
        default_v = 2.0 if velocity is None else velocity
        vel = np.where(np.isfinite(vel), vel, default_v) if velocity is None else \
            np.minimum(vel, np.broadcast_to(velocity, vel.shape))
        acc = np.broadcast_to(np.asarray(acceleration, dtype=float), (act.size,)).copy()
        for name, value in (("acceleration", acc), ("velocity", vel)):
            if not np.all(np.isfinite(value) & (value > 0)):
                raise SysIdError(f"the {name} limits must be finite numbers > 0, got {value.tolist()}")
        return cls(lo, hi, vel, acc, model.torque_limits()[act])


@dataclass(frozen=True)
class FourierTrajectory:
    """Finite Fourier series per dof. ``q0 (nv,)``, ``a``/``b`` ``(nv, L)`` [rad/s], ``period`` [s]."""

    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    period: float

    def __post_init__(self) -> None:
        if self.a.shape != self.b.shape or self.a.shape[0] != self.q0.shape[0]:
            raise SysIdError(f"expected a, b of shape ({self.q0.shape[0]}, L), got {self.a.shape}, "
                             f"{self.b.shape}")
        if not self.period > 0:
            raise SysIdError(f"the period must be positive, got {self.period}")

    @property
    def omega(self) -> float:
        return 2.0 * np.pi / self.period

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q, dq, ddq)``, each ``(N, nv)``, at times ``t (N,)`` [s]."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        harmonics = np.arange(1, self.a.shape[1] + 1)
        wl = self.omega * harmonics  # (L,)
        s, c = np.sin(np.outer(t, wl)), np.cos(np.outer(t, wl))  # (N, L)
        q = self.q0 + s @ (self.a / wl).T - c @ (self.b / wl).T
        dq = c @ self.a.T + s @ self.b.T
        ddq = -s @ (self.a * wl).T + c @ (self.b * wl).T
        return q, dq, ddq

    def peaks(self, n_grid: int = 2000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Largest ``|q − q0|``, ``|dq|``, ``|ddq|`` per dof over one period (dense grid)."""
        q, dq, ddq = self.evaluate(np.linspace(0.0, self.period, n_grid, endpoint=False))
        return np.abs(q - self.q0).max(0), np.abs(dq).max(0), np.abs(ddq).max(0)

    def scaled(self, factor: np.ndarray | float) -> FourierTrajectory:
        """The same shape with every dof's coefficients multiplied by ``factor`` (per dof)."""
        f = np.broadcast_to(np.asarray(factor, dtype=float), self.q0.shape)[:, None]
        return FourierTrajectory(self.q0, self.a * f, self.b * f, self.period)

    def fit_to(self, limits: Limits, *, margin: float = 0.1) -> FourierTrajectory:
        """Scale each dof down (never up) to stay inside ``limits``; ``margin`` is the fraction of
        the range kept free at each end. Raises if ``q0`` itself is outside the usable range."""
        span = limits.upper - limits.lower
        lo, hi = limits.lower + margin * span, limits.upper - margin * span
        room = np.minimum(self.q0 - lo, hi - self.q0)
        if np.any(room <= 0):
            bad = np.flatnonzero(room <= 0)
            raise SysIdError(f"centre positions of dofs {bad.tolist()} are outside the usable range")
        dp, dv, da = self.peaks()
        with np.errstate(divide="ignore"):
            f = np.minimum.reduce([room / dp, limits.velocity / dv, limits.acceleration / da,
                                   np.ones_like(dp)])
        return self.scaled(0.98 * np.nan_to_num(f, nan=1.0, posinf=1.0))

    @classmethod
    def random(cls, limits: Limits, *, harmonics: int = 5, period: float = 10.0, seed: int = 0,
               q0: np.ndarray | None = None, margin: float = 0.1) -> FourierTrajectory:
        """Random coefficients (normal, decaying with harmonic order) fitted to ``limits``.

        ``q0`` defaults to the middle of each joint's range.
        """
        if not harmonics >= 1:
            raise SysIdError(f"expected at least 1 harmonic, got {harmonics}")
        rng = np.random.default_rng(seed)
        nv = limits.lower.shape[0]
        centre = 0.5 * (limits.lower + limits.upper) if q0 is None else np.asarray(q0, dtype=float)
        decay = 1.0 / np.arange(1, harmonics + 1)
        a = rng.normal(size=(nv, harmonics)) * decay
        b = rng.normal(size=(nv, harmonics)) * decay
        # start generous (10 rad/s peak), fit_to only scales down
        traj = cls(centre, a, b, period)
        _, dv, _ = traj.peaks()
        return traj.scaled(10.0 / np.maximum(dv, 1e-12)).fit_to(limits, margin=margin)
