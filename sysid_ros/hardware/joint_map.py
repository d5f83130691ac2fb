"""Joint space ↔ motor space, and the motor position's unwrapping.

Per joint ``i`` with direction ``d = ±1``, position offset ``o`` [rad] and gear ratio ``G`` (motor
shaft turns per joint turn)::

    q  = d · p / G + o          p  = d · G · (q − o)
    dq = d · v / G              v  = d · G · dq
    τ  = d · G · t              t  = d · τ / G
    kp_joint = G² · kp_motor    kd_joint = G² · kd_motor        (the sign cancels)

with ``p, v, t`` the motor's (unwrapped) position [rad], velocity [rad/s] and torque [N·m] and
``q, dq, τ`` the joint's. All arrays are ``(n,)`` over the configured joints.

Unwrapping. The feedback frame spans only ``[−PMAX, +PMAX]`` (16 bits); a motor turning past the
edge reappears at the other end. :class:`PositionUnwrapper` keeps a per-motor offset (a multiple
of ``2·PMAX``) that changes whenever two consecutive readings jump by more than ``PMAX``, so the
unwrapped position is continuous. A motor also forgets its multi-turn count at power-up (its
reading is only known modulo one shaft turn, 2π): :func:`resolve_turns` picks, per joint, the
only shaft turn that puts the joint inside its limits and refuses a start-up where none or
several do. Commands go back to the motor's own frame by subtracting the same offset (the motor
runs its PD law on the position it reports; inference from the protocol notes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_config import JointConfig

__all__ = ["JointMap", "PositionUnwrapper", "StartupPoseError", "resolve_turns"]

SHAFT_TURN = 2.0 * math.pi


class StartupPoseError(SysIdError):
    """A joint is outside its limits, or its multi-turn position is ambiguous, at start-up."""


class JointMap:
    """Direction, position offset and gear ratio of every joint (vectorised over joints)."""

    def __init__(self, joints: Sequence[JointConfig]) -> None:
        self.names = tuple(j.name for j in joints)
        self.direction = np.array([float(j.direction) for j in joints])
        self.offset = np.array([j.position_offset for j in joints])
        self.gear = np.array([j.gear_ratio for j in joints])

    def __len__(self) -> int:
        return len(self.names)

    def position_to_joint(self, p: np.ndarray) -> np.ndarray:
        return self.direction * np.asarray(p, dtype=float) / self.gear + self.offset

    def position_to_motor(self, q: np.ndarray) -> np.ndarray:
        return self.direction * self.gear * (np.asarray(q, dtype=float) - self.offset)

    def velocity_to_joint(self, v: np.ndarray) -> np.ndarray:
        return self.direction * np.asarray(v, dtype=float) / self.gear

    def velocity_to_motor(self, dq: np.ndarray) -> np.ndarray:
        return self.direction * self.gear * np.asarray(dq, dtype=float)

    def torque_to_joint(self, t: np.ndarray) -> np.ndarray:
        return self.direction * self.gear * np.asarray(t, dtype=float)

    def torque_to_motor(self, tau: np.ndarray) -> np.ndarray:
        return self.direction * np.asarray(tau, dtype=float) / self.gear

    def gain_to_motor(self, k: np.ndarray) -> np.ndarray:
        """kp or kd from joint space [N·m/rad, N·m·s/rad] to motor space (÷ G²)."""
        return np.asarray(k, dtype=float) / self.gear**2

    def gain_to_joint(self, k: np.ndarray) -> np.ndarray:
        return np.asarray(k, dtype=float) * self.gear**2

    def to_joint(self, p: np.ndarray, v: np.ndarray,
                 t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Motor ``(p, v, t)`` → joint ``(q, dq, τ)``."""
        return self.position_to_joint(p), self.velocity_to_joint(v), self.torque_to_joint(t)


class PositionUnwrapper:
    """Continuous motor positions from readings that wrap across ``±pmax`` (``(n,)`` [rad]).

    The per-motor state is kept as Python floats: the control loop calls the scalar
    :meth:`update_one` / :meth:`reported_one` once per motor and cycle (numpy on 6-element
    vectors costs more than it saves); :meth:`update` / :meth:`to_reported` are the vector forms.
    """

    def __init__(self, pmax: Sequence[float]) -> None:
        self.pmax = np.asarray(pmax, dtype=float)
        self._pmax = [float(x) for x in self.pmax]
        self._span = [2.0 * x for x in self._pmax]
        self._offset = [0.0] * len(self._pmax)  # [rad] unwrapped − reported, multiple of 2·pmax (+ turns)
        self._last = [math.nan] * len(self._pmax)

    @property
    def offset(self) -> np.ndarray:
        """``(n,)`` [rad] unwrapped − reported position (a copy)."""
        return np.array(self._offset)

    def reset(self) -> None:
        self._offset = [0.0] * len(self._pmax)
        self._last = [math.nan] * len(self._pmax)

    def update_one(self, i: int, raw: float) -> float:
        """Motor ``i``'s unwrapped position [rad] after a finite reading ``raw`` [rad]: a jump of
        more than ``pmax`` since its last reading is a wrap across the edge."""
        last = self._last[i]
        if last == last:  # not NaN: a previous reading exists
            jump = raw - last
            if jump > self._pmax[i]:
                self._offset[i] -= self._span[i]
            elif jump < -self._pmax[i]:
                self._offset[i] += self._span[i]
        self._last[i] = raw
        return raw + self._offset[i]

    def current_one(self, i: int) -> float:
        """Motor ``i``'s last unwrapped position [rad] (NaN before any reading)."""
        return self._last[i] + self._offset[i]

    def reported_one(self, i: int, p: float) -> float:
        """An unwrapped motor position ``p`` [rad] of motor ``i`` in its own reported frame."""
        return p - self._offset[i]

    def update(self, raw: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
        """Unwrapped positions of the readings ``raw (n,)``; entries with ``valid`` false (no reply
        this cycle) or non-finite keep their last unwrapped value (NaN before any reading)."""
        raw = np.asarray(raw, dtype=float)
        ok = np.isfinite(raw) if valid is None else (np.asarray(valid, dtype=bool) & np.isfinite(raw))
        return np.array([self.update_one(i, float(raw[i])) if ok[i] else self.current_one(i)
                         for i in range(len(self._pmax))])

    def to_reported(self, p: np.ndarray) -> np.ndarray:
        """An unwrapped motor position (a command) in the motor's own reported frame."""
        return np.asarray(p, dtype=float) - np.array(self._offset)

    def add_turns(self, turns: np.ndarray) -> None:
        """Shift by whole shaft turns (the start-up resolution of :func:`resolve_turns`)."""
        self._offset = [o + SHAFT_TURN * float(k) for o, k in zip(self._offset, turns, strict=True)]


def resolve_turns(joint_map: JointMap, motor_position: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                  *, margin: float = 0.0, max_turns: int = 3) -> np.ndarray:
    """Per joint, the whole number of motor shaft turns ``k`` such that the motor position
    ``p + 2πk`` puts the joint inside ``[lower − margin, upper + margin]``; ``(n,)`` ints.

    Raises :class:`StartupPoseError` naming every joint that is outside its limits whatever ``k``
    (``|k| ≤ max_turns``), or that fits for several ``k`` (the joint's range spans more than a
    shaft turn: the start-up pose cannot tell them apart; move the joint or set position_offset).
    """
    p = np.asarray(motor_position, dtype=float)
    turns = np.zeros(p.shape, dtype=int)
    problems = []
    for i, name in enumerate(joint_map.names):
        if not math.isfinite(p[i]):
            problems.append(f"{name}: no position reading")
            continue
        fits = []
        for k in range(-max_turns, max_turns + 1):
            shifted = p.copy()
            shifted[i] += SHAFT_TURN * k
            q = joint_map.position_to_joint(shifted)[i]
            if lower[i] - margin <= q <= upper[i] + margin:
                fits.append((k, q))
        if len(fits) == 1:
            turns[i] = fits[0][0]
        elif not fits:
            q0 = joint_map.position_to_joint(p)[i]
            problems.append(f"{name}: at {q0:+.3f} rad, outside its limits [{lower[i]:+.3f}, "
                            f"{upper[i]:+.3f}] rad (also after adding whole motor turns)")
        else:
            options = ", ".join(f"{q:+.3f}" for _, q in fits)
            problems.append(f"{name}: ambiguous start-up position, could be any of {options} rad "
                            "(the motor forgets whole turns at power-up)")
    if problems:
        raise StartupPoseError("joints not safely inside their limits at start-up: " + "; ".join(problems))
    return turns
