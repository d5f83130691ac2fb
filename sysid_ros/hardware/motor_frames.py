"""Joint-space MIT targets ⇄ the Damiao motors' CAN payloads: the bridge's per-cycle hot path, pure
(no I/O, no threads, no ROS).

:class:`MotorFrames` holds, for the configured joints, everything between a joint-space command
and the bytes on the bus, and between a motor's reply and the joint state:

* **clamping** (joint space): position to ``[position_min, position_max]``, velocity to
  ±``velocity_limit``, feed-forward torque to ±``torque_limit``, kp and kd to ≥ 0, and the joint's
  default kd where kp > 0 comes with kd = 0 (a spring without damping oscillates); then every MIT
  field to the motor's mapping range (±PMAX, ±VMAX, ±TMAX, [0, 500], [0, 5]) by the codec;
* **the joint map**, per joint with direction ``d = ±1``, position offset ``o`` [rad] and gear
  ratio ``G`` (motor shaft turns per joint turn)::

      p  = d · G · (q − o)        q  = d · p / G + o
      v  = d · G · dq             dq = d · v / G
      t  = d · τ / G              τ  = d · G · t
      kp_motor = kp / G²          kd_motor = kd / G²      (the sign cancels)

  with ``p, v, t`` the motor's (unwrapped) position [rad], velocity [rad/s] and torque [N·m];
* **unwrapping**: the feedback frame spans only ``[−PMAX, +PMAX]`` (16 bits); a motor turning past
  the edge reappears at the other end. Per motor an offset (a multiple of ``2·PMAX``) changes
  whenever two consecutive readings jump by more than PMAX, so the unwrapped position is
  continuous; commands go back to the motor's reported frame by subtracting the same offset (the
  motor runs its PD law on the position it reports). A motor also forgets its multi-turn count at
  power-up (its reading is known only modulo one shaft turn, 2π): :meth:`MotorFrames.start` picks,
  per joint, the only whole shaft turn that puts the joint inside its limits and refuses a start
  where none or several do (:class:`StartupPoseError`);
* **the MIT codec** (:class:`~sysid_ros.hardware.codec.MitCodec`, one per motor at the limits its
  registers gave).

Per cycle the bridge calls :meth:`~MotorFrames.encode` (targets → one payload per motor),
:meth:`~MotorFrames.read` on each reply and :meth:`~MotorFrames.update` with the cycle's readings.
The arithmetic runs on Python floats per joint: on 6-element vectors every numpy call costs more
than the arithmetic, and the loop's budget is a fraction of a millisecond.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_config import JointConfig
from sysid_ros.hardware.codec import MitCodec, MitLimits
from sysid_ros.hardware.safety import CommandLimits, JointTargets

__all__ = ["SHAFT_TURN", "MotorFrames", "Reading", "StartupPoseError"]

SHAFT_TURN = 2.0 * math.pi
"""One turn of a motor's output shaft [rad]: what a motor forgets at power-up."""

#: One motor's reply: (state code, position [rad], velocity [rad/s], torque [N·m], t_mos [°C],
#: t_rotor [°C]) in motor space, as :meth:`MitCodec.decode_feedback` gives it.
Reading = tuple[int, float, float, float, int, int]

_NAN = math.nan


class StartupPoseError(SysIdError):
    """A joint is outside its limits, or its multi-turn position is ambiguous, at start-up."""


class MotorFrames:
    """Joint targets → MIT payloads and motor readings → joint state for the configured joints
    (``joints``, in order) at their motors' MIT limits (``mit_limits``, e.g. read from the
    registers). See the module docstring for the rules; state kept between cycles: the
    unwrapping offsets and the last joint-space readings."""

    def __init__(self, joints: Sequence[JointConfig], mit_limits: Sequence[MitLimits]) -> None:
        if len(joints) != len(mit_limits):
            raise SysIdError(f"MotorFrames: {len(mit_limits)} MIT limits for {len(joints)} joints")
        self.names = tuple(j.name for j in joints)
        self.n = len(joints)
        self.limits = CommandLimits.from_joints(joints)
        self.mit_limits = tuple(mit_limits)
        self.codecs = tuple(MitCodec(lim) for lim in self.mit_limits)
        lim = self.limits
        # per joint, as Python floats: lower, upper, velocity limit, torque limit, default kd,
        # d·G, offset, d, G, G², codec
        self._joints = tuple(
            (float(lim.lower[i]), float(lim.upper[i]), float(lim.velocity[i]), float(lim.torque[i]),
             float(lim.kd_default[i]), float(j.direction * j.gear_ratio), float(j.position_offset),
             float(j.direction), float(j.gear_ratio), float(j.gear_ratio) ** 2, self.codecs[i])
            for i, j in enumerate(joints))
        self._pmax = [float(x.pmax) for x in self.mit_limits]
        self._offset = [0.0] * self.n     # [rad] unwrapped − reported motor position
        self._last = [_NAN] * self.n      # [rad] last reported motor position
        self._position = [_NAN] * self.n  # [rad] last joint positions
        self.velocity = [_NAN] * self.n   # [rad/s] this cycle's joint velocities (NaN: no reply)
        self.effort = [_NAN] * self.n     # [N·m] this cycle's joint torques (NaN: no reply)

    def __len__(self) -> int:
        return self.n

    # ------------------------------------------------------------------------ targets → frames
    def encode(self, targets: JointTargets) -> tuple[list[bytes], bool]:
        """One MIT payload per motor for joint-space ``targets`` (each field ``(n,)``), and whether
        any field was clamped in joint space."""
        qs, dqs, taus = targets.position.tolist(), targets.velocity.tolist(), targets.effort.tolist()
        kps, kds = targets.kp.tolist(), targets.kd.tolist()
        offset = self._offset
        frames = []
        clamped = False
        for i, (lo, hi, vl, tl, kd0, dg, o, d, g, g2, codec) in enumerate(self._joints):
            q, dq, tau, kp, kd = qs[i], dqs[i], taus[i], kps[i], kds[i]
            qc = lo if q < lo else hi if q > hi else q
            dqc = -vl if dq < -vl else vl if dq > vl else dq
            tauc = -tl if tau < -tl else tl if tau > tl else tau
            kpc = kp if kp > 0.0 else 0.0
            kdc = kd if kd > 0.0 else 0.0
            if kpc > 0.0 and kdc <= 0.0:  # a spring without damping would oscillate
                kdc = kd0
            if qc != q or dqc != dq or tauc != tau or kpc != kp or kdc != kd:
                clamped = True
            frames.append(codec.encode_command(dg * (qc - o) - offset[i], dg * dqc, kpc / g2, kdc / g2,
                                               d * tauc / g))
        return frames, clamped

    # ------------------------------------------------------------------------ frames → state
    def read(self, i: int, data: bytes | bytearray) -> Reading | None:
        """Motor ``i``'s feedback payload as a :data:`Reading`, ``None`` if it is no feedback frame
        (:meth:`MitCodec.feedback` says why)."""
        return self.codecs[i].decode_feedback(data)

    def update(self, readings: Sequence[Reading | None]) -> None:
        """Take one cycle's readings (``None``: no reply from that motor): positions unwrapped and
        mapped to joint space; a motor without a reply keeps its last :attr:`position` and gets NaN
        :attr:`velocity` and :attr:`effort`."""
        position, offset, last, pmax = self._position, self._offset, self._last, self._pmax
        velocity, effort = [_NAN] * self.n, [_NAN] * self.n
        joint_position = self._joint_position
        for i, (*_, dg, _o, d, g, _g2, _codec) in enumerate(self._joints):
            r = readings[i]
            if r is None:
                continue
            raw = r[1]
            previous = last[i]
            if previous == previous:  # not NaN: a jump of more than PMAX is a wrap across the edge
                if raw - previous > pmax[i]:
                    offset[i] -= 2.0 * pmax[i]
                elif raw - previous < -pmax[i]:
                    offset[i] += 2.0 * pmax[i]
            last[i] = raw
            position[i] = joint_position(i, raw + offset[i])
            velocity[i] = d * r[2] / g
            effort[i] = dg * r[3]
        self.velocity, self.effort = velocity, effort

    @property
    def position(self) -> list[float]:
        """The last joint positions [rad] (a copy; NaN before any reading)."""
        return list(self._position)

    @property
    def unwrap_offset(self) -> np.ndarray:
        """``(n,)`` [rad] unwrapped − reported motor position (multiples of 2·PMAX plus whole
        shaft turns)."""
        return np.array(self._offset)

    # ------------------------------------------------------------------------ start-up
    def start(self, readings: Sequence[Reading], *, margin: float = 0.0, max_turns: int = 3) -> np.ndarray:
        """Begin a run from every motor's first reading: forget the unwrapping, find per joint
        the whole number of motor shaft turns ``k`` (``|k| ≤ max_turns``) such that the motor
        position ``p + 2πk`` puts the joint inside ``[lower − margin, upper + margin]``, and take
        the readings. Returns ``k`` ``(n,)``.

        Raises :class:`StartupPoseError` naming every joint that is outside its limits whatever
        ``k``, or that fits for several ``k`` (its range spans more than a shaft turn: the start-up
        pose cannot tell them apart; move the joint or set position_offset).
        """
        raw = [_NAN if r is None else float(r[1]) for r in readings]
        lower, upper = self.limits.lower, self.limits.upper
        turns = np.zeros(self.n, dtype=int)
        problems = []
        for i, name in enumerate(self.names):
            if not math.isfinite(raw[i]):
                problems.append(f"{name}: no position reading")
                continue
            fits = [(k, q) for k in range(-max_turns, max_turns + 1)
                    if lower[i] - margin <= (q := self._joint_position(i, raw[i] + SHAFT_TURN * k))
                    <= upper[i] + margin]
            if len(fits) == 1:
                turns[i] = fits[0][0]
            elif not fits:
                problems.append(f"{name}: at {self._joint_position(i, raw[i]):+.3f} rad, outside its "
                                f"limits [{lower[i]:+.3f}, {upper[i]:+.3f}] rad (also after adding whole "
                                "motor turns)")
            else:
                options = ", ".join(f"{q:+.3f}" for _, q in fits)
                problems.append(f"{name}: ambiguous start-up position, could be any of {options} rad "
                                "(the motor forgets whole turns at power-up)")
        if problems:
            raise StartupPoseError("joints not safely inside their limits at start-up: "
                                   + "; ".join(problems))
        self._offset = [SHAFT_TURN * float(k) for k in turns]
        self._last = raw
        self.update(readings)
        return turns

    def _joint_position(self, i: int, p: float) -> float:
        """Joint ``i``'s position [rad] at unwrapped motor position ``p`` [rad]."""
        *_, o, d, g, _g2, _codec = self._joints[i]
        return d * p / g + o
