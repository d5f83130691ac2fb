"""The options of an online session (:class:`OnlineOptions`), the online methods' names and one
line of help per option: what the ``estimator`` node declares as parameters, the ``batch_solver``
node and ``sysid identify`` offer for the online methods. A module of its own, with no compiled
kernels nor solvers behind it: a node declares its parameters without loading the session.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Literal, get_args

import numpy as np

from sysid_ros.core.data.effort_timing import ONLINE_DEFAULT, check_effort_lag
from sysid_ros.core.errors import DataError

__all__ = ["DISCRETISATIONS", "ONLINE_METHODS", "OPTION_HELP", "WEIGHTINGS", "Discretisation", "Method",
           "OnlineOptions", "Weighting"]

Method = Literal["rls", "rls_logdet", "momentum", "ekf", "mhe"]
ONLINE_METHODS: tuple[str, ...] = get_args(Method)
#: the row weightings of the row estimators (:class:`~sysid_ros.core.online.estimator.OnlineEstimator`)
Weighting = Literal["fixed", "adaptive"]
WEIGHTINGS: tuple[str, ...] = ("fixed", "adaptive")
#: the momentum rows' discretisations (:class:`~sysid_ros.core.online.rows.MomentumRows`)
Discretisation = Literal["auto", "trapezoidal", "euler"]
DISCRETISATIONS = ("auto", "trapezoidal", "euler")

#: one line per option, units included: the node's parameter descriptions and the CLI's help
OPTION_HELP: dict[str, str] = {
    "method": "rls (force rows, RLS) | rls_logdet (force rows, RLS log-det-div) | "
              "momentum (generalised-momentum rows, RLS log-det-div; no accelerations) | "
              "ekf (extended Kalman filter on [q, q̇, base parameters]) | "
              "mhe (moving-horizon constrained convex program on force rows)",
    "alpha": "log-det regularisation strength (units of the weighted squared residuals)",
    "forgetting": "forgetting factor λ in (0, 1] (0.98-0.995 to track changes)",
    "torque_noise": "torque noise σ [N·m]: row weight 1/σ² (momentum rows: 3/(σ²·window²))",
    "weighting": "row weights: 'fixed' (1/torque_noise²) or 'adaptive' (each row's error estimated "
                 "online from its residuals, never above the fixed weight)",
    "weight_memory": "adaptive weighting: memory of the row-error estimate [s]",
    "cutoff": "causal low-pass cut-off on q, q̇, τ (and so q̈) [Hz]; at most 0.45 × sample_rate",
    "sample_rate": "nominal sample rate of the stream [Hz]: filter design, gaps, row weights",
    "effort_lag": "how late the joint states' effort is [sample periods]: the effort stamped t acted "
                  "at t − effort_lag·period (0: sampled with the positions; 0.5: the Damiao bridge, "
                  "whose motors report the torque of the previous command; -0.5, the default: the "
                  "torque a simulator applies over the step it starts); within ±0.5 online",
    "gap_periods": "a step between samples longer than this many nominal periods is a gap: "
                   "the filters and momentum windows restart after it",
    "window": "momentum integration window [s]",
    "momentum_scheme": "momentum rows' discretisation: 'auto' (each window takes the rule the samples' "
                       "kinematics fit best), 'trapezoidal' (signals sampled from continuous motion) or "
                       "'euler' (a simulator's semi-implicit Euler steps at the sample rate: exact sums)",
    "min_speed": "force rows of joints slower than this [rad/s] are not used (Coulomb friction)",
    "stationary_cut": "samples with every joint slower than 0.01 rad/s add no row (they carry "
                      "static friction, which no identified model has); false keeps them",
    "drift": "ekf, mhe: random walk of the parameters [1/√s], relative to each one's scale "
             "(body: prior mass m, m·L, m·L²; friction: |prior|, at least 0.1)",
    "position_noise": "ekf: position measurement noise σ_q [rad]",
    "velocity_noise": "ekf: velocity measurement noise σ_q̇ [rad/s]",
    "horizon": "mhe: length of the sliding window [s] (2-5 typical)",
    "solve_rate": "mhe: window solves per second of data [Hz]",
    "update_rate": "rls_logdet, momentum: estimate re-solved this many times per second of data [Hz] "
                   "(every row still folded in at once; 0: at every sample)",
}


@dataclass(frozen=True)
class OnlineOptions:
    """Everything that shapes an online estimate (the node's parameters, the CLI's options).

    ``method``: ``rls`` (force rows, RLS), ``rls_logdet`` (force rows, RLS log-det-div),
    ``momentum`` (generalised-momentum rows over ``window`` [s], RLS log-det-div; discretised by
    ``momentum_scheme``, :class:`~sysid_ros.core.online.rows.MomentumRows`); ``alpha``:
    regularisation strength; ``forgetting`` λ; ``torque_noise`` [N·m]: the row weight
    W = 1/σ² (momentum rows: 3/(σ²·window²),
    :func:`~sysid_ros.core.online.rows.momentum_row_weight`); ``weighting``: ``fixed`` (W from
    ``torque_noise``) or ``adaptive`` (each row's W
    estimated online from its residuals over ``weight_memory`` [s], never above the fixed W);
    ``cutoff`` [Hz]: the causal low-pass of every signal (at most 0.45 × ``sample_rate``);
    ``sample_rate`` [Hz]: the stream's nominal rate (filter design, row weights); ``effort_lag``
    [sample periods]: how late the effort is (:mod:`~sysid_ros.core.data.effort_timing`); ``gap_periods``:
    a step longer than this many nominal periods restarts the filters and windows; ``min_speed``
    [rad/s]: force rows of slower joints are not used when the model has Coulomb friction (its
    sign model fails near rest); ``stationary_cut``: a conditioned sample with every joint slower
    than :data:`~sysid_ros.core.data.stationary.STATIONARY_SPEED` adds no row (counted
    ``stationary``; the momentum windows restart when motion resumes); ``history``: keep every
    estimate (:attr:`OnlineEstimator.log`, for ``estimates.csv``; a node leaves it off).
    ``ekf`` (:class:`~sysid_ros.core.online.ekf.AugmentedEKF` on [q, q̇, β], τ as input,
    ``position_noise`` [rad] and ``velocity_noise`` [rad/s] on the measured q, q̇) and ``mhe``
    (:class:`~sysid_ros.core.online.mhe.MovingHorizon` on force rows over ``horizon`` [s], solved
    at ``solve_rate`` [Hz] of data time): the parameters drift by ``drift`` [1/√s] relative to
    their scale (:mod:`~sysid_ros.core.online.drift`); ``torque_noise`` is σ_τ for both. The EKF
    takes every sample (``stationary_cut`` and ``min_speed`` do not apply: it has no rows).
    ``update_rate`` [Hz] (``rls_logdet``, ``momentum``): every row is folded in at once, the
    estimate re-solved once per ``1/update_rate`` of data time (0: at every sample).
    Invalid values raise :class:`DataError`.
    """

    method: Method = "rls_logdet"
    alpha: float = 1.0
    forgetting: float = 1.0
    torque_noise: float = 0.05
    weighting: Weighting = "fixed"
    weight_memory: float = 1.0
    cutoff: float = 50.0
    sample_rate: float = 500.0
    effort_lag: float = ONLINE_DEFAULT
    gap_periods: float = 3.0
    window: float = 0.5
    momentum_scheme: str = "auto"
    min_speed: float = 0.05
    stationary_cut: bool = True
    drift: float = 0.1
    position_noise: float = 0.001
    velocity_noise: float = 0.01
    horizon: float = 2.0
    solve_rate: float = 10.0
    update_rate: float = 0.0
    history: bool = False

    def __post_init__(self) -> None:
        if self.method not in ONLINE_METHODS:
            raise DataError(f"method must be one of {list(ONLINE_METHODS)}, got {self.method!r}")
        if self.weighting not in WEIGHTINGS:
            raise DataError(f"weighting must be one of {list(WEIGHTINGS)}, got {self.weighting!r}")
        if not 0.0 < self.forgetting <= 1.0:
            raise DataError(f"forgetting must be in (0, 1], got {self.forgetting}")
        for name in ("alpha", "torque_noise", "weight_memory", "cutoff", "sample_rate", "window",
                     "position_noise", "velocity_noise", "horizon", "solve_rate"):
            if not getattr(self, name) > 0:  # NaN fails too
                raise DataError(f"{name} must be > 0, got {getattr(self, name)}")
        check_effort_lag(self.effort_lag, online=True)
        if not self.gap_periods > 1.0:
            raise DataError(f"gap_periods must be > 1 (nominal periods), got {self.gap_periods}")
        if not (self.update_rate >= 0 and math.isfinite(self.update_rate)):
            raise DataError(f"update_rate must be a finite number >= 0 Hz, got {self.update_rate}")
        if not (self.drift >= 0 and math.isfinite(self.drift)):
            raise DataError(f"drift must be a finite number >= 0, got {self.drift}")
        if self.momentum_scheme not in DISCRETISATIONS:
            raise DataError(f"momentum_scheme must be one of {list(DISCRETISATIONS)}, "
                            f"got {self.momentum_scheme!r}")
        if not self.min_speed >= 0:
            raise DataError(f"min_speed must be >= 0, got {self.min_speed}")
        if not isinstance(self.stationary_cut, bool | np.bool_):
            raise DataError(f"stationary_cut must be true or false, got {self.stationary_cut!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The options a user sets (every field but ``history``)."""
        return tuple(f.name for f in fields(cls) if f.name != "history")

    @property
    def estimator(self) -> str:
        """``rls``, ``rls_logdet``, ``ekf`` or ``mhe``."""
        return self.method if self.method in ("rls", "ekf", "mhe") else "rls_logdet"

    @property
    def regression(self) -> str:
        """``force``, ``momentum`` or ``state`` (the EKF: no regression rows)."""
        return {"momentum": "momentum", "ekf": "state"}.get(self.method, "force")

    @property
    def effective_cutoff(self) -> float:
        """[Hz] the low-pass actually designed: ``cutoff`` capped at 0.45 × ``sample_rate``."""
        return min(self.cutoff, 0.45 * self.sample_rate)

    @property
    def max_step(self) -> float:
        """[s] the longest step between samples that is not a gap."""
        return self.gap_periods / self.sample_rate

    def as_dict(self) -> dict:
        return asdict(self)
