"""Reference implementations of the Damiao hardware's frame pipeline, used only as test oracles.

Written plainly from the protocol's formulas, vectorised with numpy over the joints, and
independent of :class:`sysid_ros.hardware.motor_frames.MotorFrames` and
:class:`sysid_ros.hardware.codec.MitCodec` (the product's one implementation, which the tests
compare against these):

* fixed-point fields: :func:`float_to_uint` / :func:`uint_to_float` — clamp, scale by ``2ⁿ−1``,
  round to nearest (or truncate, Damiao's reference encoder) and back;
* MIT command and feedback frames: :func:`encode_mit`, :func:`decode_mit`, :func:`encode_feedback`,
  :func:`decode_feedback` — field by field, packed byte by byte (MSB first);
* joint space → motor space: :func:`clamp_targets` (joint limits, velocity and torque limits,
  gains ≥ 0, default kd where kp > 0 and kd = 0), :class:`JointMap` (direction ``d``, offset ``o``,
  gear ``G``: ``p = d·G·(q − o)``, ``v = d·G·dq``, ``t = d·τ/G``, gains ÷ G²), :func:`clamp_to_motor`
  (the MIT mapping ranges);
* :class:`PositionUnwrapper`: a reading that jumps by more than PMAX wrapped across ±PMAX.

Nothing here imports :mod:`sysid_ros`: inputs are read by attribute name (a ``MitCommand``, a
``Feedback``, ``MitLimits``, ``JointTargets`` and ``CommandLimits`` of the product, or anything
with the same fields), outputs are plain named tuples, bad input raises :class:`ValueError`.
The protocol facts used (frame layout, state nibbles, special commands ``FF×7 FC/FD/FE/FB``) are
from Damiao's DM-J series manual (MIT mode, "feedback frame" and "special commands").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

FRAME_LENGTH = 8  # every MIT, feedback and special payload [bytes]
STATES = (0x0, 0x1, 0x8, 0x9, 0xA, 0xB, 0xC, 0xD, 0xE)  # disabled, enabled, then the faults
SPECIAL_LAST_BYTES = (0xFC, 0xFD, 0xFE, 0xFB)  # enable, disable, set zero, clear error
FIELDS = ("position", "velocity", "effort", "kp", "kd")  # joint-space targets


class Command(NamedTuple):
    position: float
    velocity: float
    kp: float
    kd: float
    torque: float


class FeedbackFields(NamedTuple):
    motor_id: int
    state: int
    position: float
    velocity: float
    torque: float
    t_mos: int
    t_rotor: int


class Targets(NamedTuple):
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    kp: np.ndarray
    kd: np.ndarray


_U16, _U12 = 0xFFFF, 0xFFF


# --------------------------------------------------------------------------------- fixed point
def _number(x, what: str) -> float:
    """``x`` as a float; ValueError naming ``what`` unless it is a finite number."""
    value = float(x) if isinstance(x, (int, float, np.floating, np.integer)) else math.nan
    if math.isfinite(value):
        return value
    raise ValueError(f"{what}: expected a finite number, got {x!r}")


def float_to_uint(x: float, lo: float, hi: float, bits: int, *, truncate: bool = False) -> int:
    """Fixed-point code of ``x`` over ``[lo, hi]`` with ``2**bits − 1`` steps: clamped, then
    rounded to nearest (ties up) or truncated."""
    x = _number(x, "float_to_uint value")
    if not hi > lo:
        raise ValueError(f"float_to_uint: range must have hi > lo, got [{lo}, {hi}]")
    span = (1 << bits) - 1
    scaled = (min(max(x, lo), hi) - lo) * span / (hi - lo)
    u = int(scaled) if truncate else math.floor(scaled + 0.5)
    return min(max(u, 0), span)


def uint_to_float(u: int, lo: float, hi: float, bits: int) -> float:
    """Value of fixed-point code ``u`` (``0 ≤ u ≤ 2**bits − 1``) over ``[lo, hi]``."""
    span = (1 << bits) - 1
    if not 0 <= u <= span:
        raise ValueError(f"uint_to_float: code {u} outside [0, {span}] for {bits} bits")
    return u * (hi - lo) / span + lo


# ------------------------------------------------------------------------------------ frames
def _pack_mit(p: int, v: int, kp: int, kd: int, t: int) -> bytes:
    return bytes((
        p >> 8, p & 0xFF,
        v >> 4, ((v & 0xF) << 4) | (kp >> 8),
        kp & 0xFF,
        kd >> 4, ((kd & 0xF) << 4) | (t >> 8),
        t & 0xFF,
    ))


def _is_special(data: bytes) -> bool:
    return data[:7] == b"\xff" * 7 and data[7] in SPECIAL_LAST_BYTES


def encode_mit(cmd, limits, *, truncate: bool = False) -> bytes:
    """MIT payload: p 16 bit, v 12, kp 12, kd 12, τ 12, MSB first; kd one count lower where the
    bytes would read as a special command."""
    p = float_to_uint(_number(cmd.position, "MIT position"), -limits.pmax, limits.pmax, 16, truncate=truncate)
    v = float_to_uint(_number(cmd.velocity, "MIT velocity"), -limits.vmax, limits.vmax, 12, truncate=truncate)
    kp = float_to_uint(_number(cmd.kp, "MIT kp"), 0.0, limits.kp_max, 12, truncate=truncate)
    kd = float_to_uint(_number(cmd.kd, "MIT kd"), 0.0, limits.kd_max, 12, truncate=truncate)
    t = float_to_uint(_number(cmd.torque, "MIT torque"), -limits.tmax, limits.tmax, 12, truncate=truncate)
    data = _pack_mit(p, v, kp, kd, t)
    if _is_special(data):
        data = _pack_mit(p, v, kp, kd - 1, t)
    return data


def decode_mit(data: bytes, limits) -> Command:
    d = bytes(data)
    if len(d) != FRAME_LENGTH:
        raise ValueError(f"MIT command: expected 8 bytes, got {len(d)}")
    p = (d[0] << 8) | d[1]
    v = (d[2] << 4) | (d[3] >> 4)
    kp = ((d[3] & 0xF) << 8) | d[4]
    kd = (d[5] << 4) | (d[6] >> 4)
    t = ((d[6] & 0xF) << 8) | d[7]
    return Command(
        position=p * 2.0 * limits.pmax / _U16 - limits.pmax,
        velocity=v * 2.0 * limits.vmax / _U12 - limits.vmax,
        kp=kp * limits.kp_max / _U12,
        kd=kd * limits.kd_max / _U12,
        torque=t * 2.0 * limits.tmax / _U12 - limits.tmax,
    )


def decode_feedback(data: bytes, limits) -> FeedbackFields:
    d = bytes(data)
    if len(d) != FRAME_LENGTH:
        raise ValueError(f"feedback frame: expected 8 bytes, got {len(d)}")
    state = d[0] >> 4
    if state not in STATES:
        raise ValueError(f"feedback frame: unknown state code 0x{state:X}")
    p = (d[1] << 8) | d[2]
    v = (d[3] << 4) | (d[4] >> 4)
    t = ((d[4] & 0xF) << 8) | d[5]
    return FeedbackFields(
        motor_id=d[0] & 0xF,
        state=state,
        position=p * 2.0 * limits.pmax / _U16 - limits.pmax,
        velocity=v * 2.0 * limits.vmax / _U12 - limits.vmax,
        torque=t * 2.0 * limits.tmax / _U12 - limits.tmax,
        t_mos=d[6],
        t_rotor=d[7],
    )


def encode_feedback(fb, limits) -> bytes:
    if not 0 <= int(fb.motor_id) <= 0xF:
        raise ValueError(f"feedback motor_id: expected 0..15, got {fb.motor_id}")
    state = int(fb.state)
    if state not in STATES:
        raise ValueError(f"feedback state: unknown code {state}")
    p = float_to_uint(_number(fb.position, "feedback position"), -limits.pmax, limits.pmax, 16)
    v = float_to_uint(_number(fb.velocity, "feedback velocity"), -limits.vmax, limits.vmax, 12)
    t = float_to_uint(_number(fb.torque, "feedback torque"), -limits.tmax, limits.tmax, 12)
    t_mos = min(max(round(_number(fb.t_mos, "feedback t_mos")), 0), 255)
    t_rotor = min(max(round(_number(fb.t_rotor, "feedback t_rotor")), 0), 255)
    return bytes((
        (int(state) << 4) | int(fb.motor_id),
        p >> 8, p & 0xFF,
        v >> 4, ((v & 0xF) << 4) | (t >> 8),
        t & 0xFF,
        t_mos, t_rotor,
    ))


# ------------------------------------------------------------------------- joint <-> motor
def clamp_targets(targets, limits) -> tuple[Targets, dict[str, int]]:
    """Targets (fields :data:`FIELDS`, each ``(n,)``) clamped in joint space to ``limits`` (lower,
    upper, velocity, torque, kd_default), and per field how many joints changed."""
    kp = np.maximum(np.asarray(targets.kp, dtype=float), 0.0)
    kd = np.maximum(np.asarray(targets.kd, dtype=float), 0.0)
    out = Targets(
        position=np.clip(targets.position, limits.lower, limits.upper),
        velocity=np.clip(targets.velocity, -limits.velocity, limits.velocity),
        effort=np.clip(targets.effort, -limits.torque, limits.torque),
        kp=kp,
        kd=np.where((kp > 0) & (kd <= 0), limits.kd_default, kd),
    )
    changed = {f: int(np.count_nonzero(getattr(out, f) != getattr(targets, f))) for f in FIELDS}
    return out, changed


def clamp_to_motor(p, v, t, kp, kd, pmax, vmax, tmax, kp_max, kd_max) -> tuple[np.ndarray, ...]:
    """Motor-space fields clamped to the MIT mapping ranges."""
    return (np.clip(p, -pmax, pmax), np.clip(v, -vmax, vmax), np.clip(t, -tmax, tmax),
            np.clip(kp, 0.0, kp_max), np.clip(kd, 0.0, kd_max))


class JointMap:
    """Direction, position offset and gear ratio of every joint, vectorised over joints."""

    def __init__(self, joints: Sequence) -> None:
        self.direction = np.array([float(j.direction) for j in joints])
        self.offset = np.array([j.position_offset for j in joints])
        self.gear = np.array([j.gear_ratio for j in joints])

    def position_to_joint(self, p):
        return self.direction * np.asarray(p, dtype=float) / self.gear + self.offset

    def position_to_motor(self, q):
        return self.direction * self.gear * (np.asarray(q, dtype=float) - self.offset)

    def velocity_to_joint(self, v):
        return self.direction * np.asarray(v, dtype=float) / self.gear

    def velocity_to_motor(self, dq):
        return self.direction * self.gear * np.asarray(dq, dtype=float)

    def torque_to_joint(self, t):
        return self.direction * self.gear * np.asarray(t, dtype=float)

    def torque_to_motor(self, tau):
        return self.direction * np.asarray(tau, dtype=float) / self.gear

    def gain_to_motor(self, k):
        return np.asarray(k, dtype=float) / self.gear**2

    def to_joint(self, p, v, t):
        return self.position_to_joint(p), self.velocity_to_joint(v), self.torque_to_joint(t)


class PositionUnwrapper:
    """Continuous positions from readings that wrap across ``±pmax``; missed or non-finite
    readings keep the last value (NaN before any)."""

    def __init__(self, pmax: Sequence[float]) -> None:
        self.pmax = np.asarray(pmax, dtype=float)
        self.offset = np.zeros_like(self.pmax)
        self.last = np.full_like(self.pmax, np.nan)

    def update(self, raw, valid=None) -> np.ndarray:
        raw = np.asarray(raw, dtype=float)
        ok = np.isfinite(raw) if valid is None else (np.asarray(valid, dtype=bool) & np.isfinite(raw))
        seen = ok & np.isfinite(self.last)
        jump = np.where(seen, raw - np.nan_to_num(self.last), 0.0)
        self.offset = self.offset - 2 * self.pmax * (jump > self.pmax) + 2 * self.pmax * (jump < -self.pmax)
        self.last = np.where(ok, raw, self.last)
        return self.last + self.offset

    def add_turns(self, turns) -> None:
        self.offset = self.offset + 2 * math.pi * np.asarray(turns, dtype=float)

    def to_reported(self, p) -> np.ndarray:
        return np.asarray(p, dtype=float) - self.offset
