"""The stationary-sample rule: which samples carry no motion and are kept out of identification.

A sample is *stationary* when every joint moves slower than ``speed`` (default
:data:`STATIONARY_SPEED`). Such samples carry the arm's static friction (stiction, the holding
torque of a position loop against it), which none of the identified models has: a payload or arm
fit that keeps them is pulled by an unmodelled force, and how many of them a recording holds (a
run that waits before it starts, a rest pose held until the recorder stops) depends on timing,
not on the robot. So:

* offline, the stationary stretches at the start and at the end of a recording (or of each
  segment) are cut off before filtering (:func:`moving_span`);
* online, a stationary sample adds no row to the estimate (:func:`moving`).

Velocities are the measured ones (rad/s, or m/s for a prismatic joint); where a log has none,
the caller differentiates positions first.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STATIONARY_SPEED", "moving", "moving_span"]

#: [rad/s] a sample whose joints all move slower than this is stationary
STATIONARY_SPEED = 0.01


def moving(dq: np.ndarray, speed: float = STATIONARY_SPEED) -> np.ndarray:
    """Which samples move: ``(N,)`` bool for velocities ``dq`` ``(N, n)`` (or ``()`` for ``(n,)``):
    true where some joint's speed is at least ``speed``. Non-finite velocities count as moving
    (they are refused elsewhere, not silently dropped here)."""
    dq = np.asarray(dq, dtype=float)
    fast = ~(np.abs(dq) < speed)  # NaN compares false: counted as moving
    return fast.any(axis=-1)


def moving_span(dq: np.ndarray, speed: float = STATIONARY_SPEED) -> slice:
    """The samples from the first moving one to the last moving one (``dq`` ``(N, n)``): what is
    left when the stationary start and end are cut off. An empty slice if nothing moves."""
    idx = np.flatnonzero(moving(dq, speed))
    if idx.size == 0:
        return slice(0, 0)
    return slice(int(idx[0]), int(idx[-1]) + 1)
