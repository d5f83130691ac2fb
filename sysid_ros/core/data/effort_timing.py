"""When a joint state's effort acted, relative to its stamp: the effort lag.

A driver publishes one stamp for a position, a velocity and an effort, but the three need not
describe the same instant. A Damiao motor's MIT reply carries the shaft's position and velocity
when it answers and the torque its current loop produced under the *previous* command, which
acted over the command period before the reply: on average the effort describes the instant half
a period before the stamp. Inverse dynamics pairs each torque with the acceleration at the same
instant, so an uncompensated lag biases the estimate wherever the torque changes fast (a command
that steps after a missed cycle): on the emulated Damiao arm at 500 Hz, an 0.8 kg payload's centre
of mass came out 6 mm too far along the flange axis (issue 24).

``effort_lag`` [sample periods]: the effort stamped ``t`` is the torque that acted at
``t − effort_lag · period``, for samples of continuous motion (a robot). 0 for an effort sampled
with the positions (a ros2_control joint state broadcaster, most vendor logs); +0.5 for the
Damiao bridge's joint states (its launch file declares it to the estimator and the recorder,
which writes it into the bag: :data:`BAG_KEY`). The batch methods take the effort at
``t + lag·period`` by linear interpolation (:func:`aligned_effort`) against accelerations from
positions' central differences; the online conditioner pairs its forward-difference acceleration
of measured velocities, which belongs to the middle of a period, with the effort of that instant
(:func:`online_weight`). Defaults, unless a recording declares its lag: :data:`BATCH_DEFAULT` (0)
for the batch methods and :data:`ONLINE_DEFAULT` (−0.5) for the online estimators, what each
assumed before the lag could be stated — and each exact for a simulator's semi-implicit Euler
samples that publish the torque of the step they start (its positions run half a step ahead of
its velocities, so the two pairings differ by half a period there; no robot's samples do that).
"""

from __future__ import annotations

import math

import numpy as np

from sysid_ros.core.errors import DataError

#: a recording's declared effort lag [sample periods] (``Dataset.meta`` key; a bag's
#: ``custom_data`` key, written by the recorder)
META_KEY = "effort_lag"
BAG_KEY = "sysid_ros.effort_lag"
#: the online conditioner interpolates between two consecutive samples only
ONLINE_LIMIT = 0.5
#: [sample periods] a Damiao MIT reply's effort: the torque of the previous command, which acted
#: over the period before the reply (the bridge publishes one joint state per command round)
DAMIAO_REPLY = 0.5
#: [sample periods] the lag assumed when neither the user nor the recording states one
BATCH_DEFAULT = 0.0
ONLINE_DEFAULT = -0.5


def check_effort_lag(lag: float, *, online: bool = False) -> float:
    """``lag`` [sample periods] as a float; :class:`DataError` unless finite (and, ``online``,
    within ±:data:`ONLINE_LIMIT`, what the causal conditioner can interpolate without waiting)."""
    try:
        value = float(lag)
    except (TypeError, ValueError):
        raise DataError(f"effort_lag must be a number of sample periods, got {lag!r}") from None
    if not math.isfinite(value):
        raise DataError(f"effort_lag must be a finite number of sample periods, got {lag!r}")
    if online and abs(value) > ONLINE_LIMIT:
        raise DataError(f"effort_lag must be within ±{ONLINE_LIMIT} sample periods for the online "
                        f"estimators (they interpolate between two consecutive samples), got {value}")
    return value


def declared_lag(meta: dict) -> float | None:
    """The effort lag [sample periods] a recording declares in its ``meta`` (None when it does
    not); :class:`DataError` naming the value when it is not a finite number."""
    value = meta.get(META_KEY)
    if value is None:
        return None
    try:
        return check_effort_lag(value)
    except DataError as exc:
        raise DataError(f"the recording declares {exc}") from None


def effective_lag(requested: float | None, meta: dict, *, default: float) -> float:
    """The effort lag [sample periods] to use: the one ``requested``, else the one the recording
    declares in its ``meta`` (:func:`declared_lag`), else ``default`` (:data:`BATCH_DEFAULT` or
    :data:`ONLINE_DEFAULT`)."""
    if requested is not None:
        return requested
    declared = declared_lag(meta)
    return default if declared is None else declared


def aligned_effort(t: np.ndarray, tau: np.ndarray, lag: float) -> np.ndarray:
    """The effort that acted at each ``t (N,)`` [s]: ``tau (N, n)`` interpolated linearly at
    ``t + lag · h`` (``h`` the median step; held at the first and last samples beyond the ends).
    One stretch without gaps (a segment); ``lag`` 0 returns ``tau`` itself."""
    if lag == 0.0 or len(t) < 2:
        return tau
    h = float(np.median(np.diff(t)))
    at = t + lag * h
    out = np.empty_like(tau, dtype=float)
    for j in range(tau.shape[1]):
        out[:, j] = np.interp(at, t, tau[:, j])
    return out


def online_weight(lag: float) -> float:
    """The weight of the *later* sample when the online conditioner pairs the forward difference
    ``(v_k − v_{k−1})/h`` (the acceleration at ``t_{k−1} + h/2``) with an effort: the effort at
    ``t_{k−1} + h/2 + lag·h`` is ``(1 − w)·τ_{k−1} + w·τ_k`` with ``w = 0.5 + lag`` (0: the
    torque a simulator applies over the step it starts, 1: a Damiao reply's)."""
    return 0.5 + check_effort_lag(lag, online=True)
