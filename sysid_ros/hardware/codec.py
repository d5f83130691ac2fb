"""Damiao DM-J motor CAN protocol: pure encoders and decoders of the MIT command and feedback
frames and the special commands, with the modes, state codes and mapping limits they use (the
register frames and the other modes' payloads are :mod:`sysid_ros.hardware.codec_registers`').

Facts from Damiao's DM-J motor manual (MIT mode, feedback frame, special commands, register
list) and its reference host code. No I/O and no python-can here: every function maps numbers to
the 8-byte payloads of classic CAN frames and back. Arbitration IDs are the caller's business
(:func:`command_arbitration_id`, :data:`REGISTER_REQUEST_ID`; feedback and
register replies arrive on the motor's MST_ID).

Units: position [rad], velocity [rad/s], torque [N·m], kp [N·m/rad], kd [N·m·s/rad],
temperatures [°C], all on the motor's own shaft (after its gearbox; the joint mapping —
direction, offset, gear ratio — is :mod:`sysid_ros.hardware.motor_frames`'s).

**MIT frames.** :class:`MitCodec` is the one implementation of the MIT command and feedback
frames (:func:`encode_mit`, :func:`decode_mit`, :func:`encode_feedback`, :func:`decode_feedback`
are its one-off forms). The fields are fixed-point over ``[lo, hi]`` with ``2ⁿ−1`` steps. Damiao's
reference encoder truncates, ``u = trunc((x−lo)·(2ⁿ−1)/(hi−lo))``: every value lands up to one
whole count low (on average half a count), so commands and — when the firmware truncates too —
measurements are biased, and ``0`` encodes half a count negative (−0.19 mrad for PMAX 12.5; a
gain kp = 10 of range 500 becomes 9.89). For identification an unbiased quantiser matters more
than bit-compatibility with the reference encoder, so the codec **rounds to nearest**: the error
is at most half a count either way and zero on average. Because ``2ⁿ−1`` is odd, ``0`` itself is
never representable in a symmetric range: it rounds to the count half a step above. The usual
worked example (DM4310, p = v = τ = 0, kp = 10, kd = 0.5: ``7F FF 7F F0 51 19 97 FF``) is the
truncating encoder's output; rounding gives ``80 00 80 00 52 19 A8 00``; both are tested, and
``encode_mit(..., truncate=True)`` reproduces the reference bytes.

**Special-command collision (inference).** A MIT frame whose first seven bytes are ``FF`` and
whose last byte is ``FB``..``FE`` *is* a special command to the firmware (p = +PMAX, v = +VMAX,
kp = 500, kd = 5 and τ ≈ +TMAX). The codec never emits one: it lowers kd by one count
(5/4095 N·m·s/rad) in that case.

Every encoder rejects NaN and ±inf with :class:`CodecError` — a NaN never becomes a frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.motors import DAMIAO_MOTORS, MotorModel

FRAME_LENGTH = 8
"""Payload length [bytes] of every MIT, special, feedback and register frame."""

KP_MAX = 500.0
"""Upper end of the MIT kp range [N·m/rad] (lower end 0)."""
KD_MAX = 5.0
"""Upper end of the MIT kd range [N·m·s/rad] (lower end 0)."""


class CodecError(SysIdError):
    """A value cannot be encoded (NaN, unknown register...) or a payload cannot be decoded."""


# ---------------------------------------------------------------------------------------------
# Modes, states


class CtrlMode(IntEnum):
    """Control mode (register CTRL_MODE = 10). Each mode listens on ``ESC_ID + mode_offset``."""

    MIT = 1
    POS_VEL = 2
    VEL = 3
    FORCE_POS = 4


_MODE_OFFSETS = {CtrlMode.MIT: 0x000, CtrlMode.POS_VEL: 0x100, CtrlMode.VEL: 0x200, CtrlMode.FORCE_POS: 0x300}


def mode_offset(mode: CtrlMode | int) -> int:
    """Arbitration-ID offset of a mode's command frames: 0x000, 0x100, 0x200 or 0x300."""
    try:
        return _MODE_OFFSETS[CtrlMode(mode)]
    except ValueError:
        known = [int(m) for m in CtrlMode]
        raise CodecError(f"unknown control mode {mode!r}; expected one of {known}") from None


REGISTER_REQUEST_ID = 0x7FF
"""Arbitration ID of every register request (read, write, save, refresh); replies come on MST_ID."""


def check_can_id(can_id: int) -> None:
    """:class:`CodecError` unless ``can_id`` is an 11-bit ID other than :data:`REGISTER_REQUEST_ID`."""
    if not (isinstance(can_id, int) and 0 <= can_id <= 0x7FF) or can_id == REGISTER_REQUEST_ID:
        raise CodecError(f"CAN ID must be an 11-bit ID other than 0x7FF, got {can_id!r}")


def command_arbitration_id(can_id: int, mode: CtrlMode | int = CtrlMode.MIT) -> int:
    """Arbitration ID of command and special frames for motor ``can_id`` (ESC_ID) in ``mode``."""
    check_can_id(can_id)
    arbitration_id = can_id + mode_offset(mode)
    if arbitration_id >= REGISTER_REQUEST_ID:
        raise CodecError(f"CAN ID 0x{can_id:X} + mode offset 0x{mode_offset(mode):X} leaves the 11-bit range "
                         "below 0x7FF")
    return arbitration_id


class MotorState(IntEnum):
    """State nibble of the feedback frame (high nibble of D0)."""

    DISABLED = 0x0
    ENABLED = 0x1
    OVER_VOLTAGE = 0x8
    UNDER_VOLTAGE = 0x9
    OVER_CURRENT = 0xA
    MOSFET_OVER_TEMP = 0xB
    COIL_OVER_TEMP = 0xC
    COMM_LOST = 0xD
    OVERLOAD = 0xE

    @property
    def is_fault(self) -> bool:
        """Any state other than disabled/enabled; a fault drops the motor out of enable."""
        return self not in (MotorState.DISABLED, MotorState.ENABLED)

    @property
    def description(self) -> str:
        return describe(self)


_STATE_TEXT = {
    MotorState.DISABLED: "disabled",
    MotorState.ENABLED: "enabled",
    MotorState.OVER_VOLTAGE: "over-voltage (supply too high, or regenerated energy with no sink)",
    MotorState.UNDER_VOLTAGE: "under-voltage (supply too low or sagging under load)",
    MotorState.OVER_CURRENT: "over-current",
    MotorState.MOSFET_OVER_TEMP: "MOSFET over-temperature (driver too hot)",
    MotorState.COIL_OVER_TEMP: "coil over-temperature (rotor winding too hot)",
    MotorState.COMM_LOST: "communication lost (no command within the motor's CAN TIMEOUT)",
    MotorState.OVERLOAD: "overload",
}


def describe(state: MotorState | int) -> str:
    """Human description of a state code, e.g. ``describe(0xD)`` → ``"communication lost (...)"``."""
    try:
        return f"0x{int(state):X} {_STATE_TEXT[MotorState(state)]}"
    except ValueError:
        return f"0x{int(state):X} unknown state code"


# ---------------------------------------------------------------------------------------------
# Limits


@dataclass(frozen=True)
class MitLimits:
    """MIT-mode mapping ranges: ``[−pmax, pmax]`` rad, ``[−vmax, vmax]`` rad/s, ``[−tmax, tmax]``
    N·m (registers PMAX/VMAX/TMAX), ``[0, kp_max]`` N·m/rad and ``[0, kd_max]`` N·m·s/rad."""

    pmax: float
    vmax: float
    tmax: float
    kp_max: float = KP_MAX
    kd_max: float = KD_MAX

    def __post_init__(self) -> None:
        for field in ("pmax", "vmax", "tmax", "kp_max", "kd_max"):
            value = getattr(self, field)
            try:
                ok = math.isfinite(float(value)) and float(value) > 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise CodecError(f"MitLimits.{field} must be a finite number > 0, got {value!r}")

    @classmethod
    def for_model(cls, model: str) -> MitLimits:
        """The common default limits of a Damiao model (e.g. ``"DM4340"``) — a sanity value; read
        the motor's registers for the real ones."""
        try:
            return DAMIAO_LIMITS[model]
        except KeyError:
            known = sorted(DAMIAO_LIMITS)
            raise CodecError(f"unknown Damiao motor model {model!r}; known: {known}") from None

    @classmethod
    def from_motor(cls, motor: MotorModel) -> MitLimits:
        return cls(motor.pmax, motor.vmax, motor.tmax)


DAMIAO_LIMITS: dict[str, MitLimits] = {name: MitLimits.from_motor(m) for name, m in DAMIAO_MOTORS.items()}
"""Default MIT limits per model, derived from :data:`sysid_ros.core.model.motors.DAMIAO_MOTORS`."""


def check_limits(model: str, limits: MitLimits, *, rel_tol: float = 1e-3) -> str | None:
    """``None`` if registers read from a motor (``limits``) match the model's common default or a
    documented alternative, else a message saying what was expected and what came."""
    motor = DAMIAO_MOTORS.get(model)
    if motor is None:
        return f"unknown Damiao motor model {model!r}; known: {sorted(DAMIAO_MOTORS)}"
    if motor.matches(limits.pmax, limits.vmax, limits.tmax, rel_tol=rel_tol):
        return None
    known = " or ".join(f"{p:g}/{v:g}/{t:g}" for p, v, t in (motor.defaults, *motor.alternatives))
    return (f"{model}: registers PMAX/VMAX/TMAX = {limits.pmax:g}/{limits.vmax:g}/{limits.tmax:g}, "
            f"expected {known} (a different motor model, or limits changed in the motor's flash?)")


# ---------------------------------------------------------------------------------------------
# Fixed-point fields


_U16, _U12 = 0xFFFF, 0xFFF


def finite(x: float, what: str) -> float:
    try:
        value = float(x)
    except (TypeError, ValueError):
        raise CodecError(f"{what}: expected a finite number, got {x!r}") from None
    if not math.isfinite(value):
        raise CodecError(f"{what}: expected a finite number, got {value!r} (NaN/inf never become a frame)")
    return value


def resolution(lo: float, hi: float, bits: int) -> float:
    """One count of a fixed-point field over ``[lo, hi]`` with ``2**bits − 1`` steps [field units]."""
    return (hi - lo) / ((1 << bits) - 1)


def check_payload(data: bytes | bytearray, what: str, lengths: tuple[int, ...] = (FRAME_LENGTH,)) -> bytes:
    data = bytes(data)
    if len(data) not in lengths:
        expected = " or ".join(str(n) for n in lengths)
        raise CodecError(f"{what}: expected {expected} bytes, got {len(data)} ({data.hex(' ')})")
    return data


# ---------------------------------------------------------------------------------------------
# MIT command and feedback frames


@dataclass(frozen=True)
class MitCommand:
    """One MIT-mode command: τ = kp·(position − p) + kd·(velocity − v) + torque on the motor."""

    position: float
    velocity: float
    kp: float
    kd: float
    torque: float


@dataclass(frozen=True)
class Feedback:
    """One feedback frame. ``motor_id`` is only the low nibble of the ESC_ID (route replies by
    arbitration ID = MST_ID instead); temperatures are whole °C (uint8)."""

    motor_id: int
    state: MotorState
    position: float
    velocity: float
    torque: float
    t_mos: int
    t_rotor: int


_STATE_CODES = frozenset(int(s) for s in MotorState)
_SPECIAL_LOW = int.from_bytes(b"\xff" * 7 + b"\xfb", "big")
_SPECIAL_HIGH = int.from_bytes(b"\xff" * 7 + b"\xfe", "big")
_MIT_FIELDS = ("position", "velocity", "kp", "kd", "torque")


def _byte(u: int) -> int:
    """``u`` clamped to 0..255."""
    return 0 if u < 0 else 255 if u > 255 else u


class MitCodec:
    """The MIT command and feedback frames at one motor's limits: the package's only encoder and
    decoder of them (the bridge's control loop, the emulator and the functions below all use it).

    Layout, MSB first, each field a contiguous bit field of the 8 bytes read as one 64-bit
    big-endian integer — command ``p16 v12 kp12 kd12 τ12``; feedback ``state4 id4 p16 v12 τ12
    t_mos8 t_rotor8`` (state in the high nibble of D0, the ESC_ID's low nibble in the low one).
    Encoding a field: clamp ``x`` to ``[lo, hi]``, scale to ``(x−lo)·(2ⁿ−1)/(hi−lo)`` and round to
    nearest (``truncate=True``: drop the fraction, as Damiao's reference encoder does); decoding:
    ``u·(hi−lo)/(2ⁿ−1) + lo``. A command that would read ``FF×7 FB..FE`` (a special command) has
    its kd lowered by one count. Non-finite inputs raise :class:`CodecError` naming the field.

    Build one per motor once its limits are known (they are immutable); the ranges are computed
    once so each frame costs a few integer operations.
    """

    __slots__ = ("_kd", "_kd_max", "_kp", "_kp_max", "_p", "_pmax", "_round", "_t", "_tmax", "_v", "_vmax",
                 "limits")

    def __init__(self, limits: MitLimits, *, truncate: bool = False) -> None:
        self.limits = limits
        pmax, vmax, tmax = float(limits.pmax), float(limits.vmax), float(limits.tmax)
        kp_max, kd_max = float(limits.kp_max), float(limits.kd_max)
        # (lo, hi, hi − lo) of each field
        self._p = (-pmax, pmax, pmax - -pmax)
        self._v = (-vmax, vmax, vmax - -vmax)
        self._t = (-tmax, tmax, tmax - -tmax)
        self._kp = (0.0, kp_max, kp_max - 0.0)
        self._kd = (0.0, kd_max, kd_max - 0.0)
        self._pmax, self._vmax, self._tmax, self._kp_max, self._kd_max = pmax, vmax, tmax, kp_max, kd_max
        self._round = 0.0 if truncate else 0.5

    def encode_command(self, position: float, velocity: float, kp: float, kd: float, torque: float) -> bytes:
        """The 8-byte MIT payload: p 16 bit over ±pmax, v 12 over ±vmax, kp 12 over [0, kp_max],
        kd 12 over [0, kd_max], τ 12 over ±tmax, each clamped to its range."""
        try:
            total = position + velocity + kp + kd + torque
            checked = total - total == 0.0
        except TypeError:
            checked = False
        if not checked:  # a NaN, ±inf or no number somewhere: say which field
            position, velocity, kp, kd, torque = (
                finite(x, f"MIT {name}")
                for x, name in zip((position, velocity, kp, kd, torque), _MIT_FIELDS, strict=True))
        r = self._round
        # each field: clamped to [lo, hi] (conditional expressions: no builtin calls), scaled and
        # rounded; the argument of int() is ≥ 0, so int() is floor here
        lo, hi, w = self._p
        p = int(((lo if position < lo else hi if position > hi else position) - lo) * _U16 / w + r)
        lo, hi, w = self._v
        v = int(((lo if velocity < lo else hi if velocity > hi else velocity) - lo) * _U12 / w + r)
        lo, hi, w = self._kp
        kpc = int(((lo if kp < lo else hi if kp > hi else kp) - lo) * _U12 / w + r)
        lo, hi, w = self._kd
        kdc = int(((lo if kd < lo else hi if kd > hi else kd) - lo) * _U12 / w + r)
        lo, hi, w = self._t
        t = int(((lo if torque < lo else hi if torque > hi else torque) - lo) * _U12 / w + r)
        word = (p << 48) | (v << 36) | (kpc << 24) | (kdc << 12) | t
        if _SPECIAL_LOW <= word <= _SPECIAL_HIGH:  # FF×7 then FB..FE: a special command to the firmware
            word -= 1 << 12  # kd one count lower
        return word.to_bytes(8, "big")

    def decode_command(self, data: bytes | bytearray) -> MitCommand:
        """What the firmware reads from a MIT payload (8 bytes; other lengths raise :class:`CodecError`)."""
        if len(data) != FRAME_LENGTH:
            check_payload(data, "MIT command")
        w = int.from_bytes(data, "big")
        pmax, vmax, tmax = self._pmax, self._vmax, self._tmax
        return MitCommand(
            position=(w >> 48) * 2.0 * pmax / _U16 - pmax,
            velocity=((w >> 36) & 0xFFF) * 2.0 * vmax / _U12 - vmax,
            kp=((w >> 24) & 0xFFF) * self._kp_max / _U12,
            kd=((w >> 12) & 0xFFF) * self._kd_max / _U12,
            torque=(w & 0xFFF) * 2.0 * tmax / _U12 - tmax,
        )

    def encode_feedback(self, motor_id: int, state: int, position: float, velocity: float, torque: float,
                        t_mos: float, t_rotor: float) -> bytes:
        """The feedback payload as the firmware sends it (for the emulator): position, velocity and
        torque clamped to their ranges and rounded to nearest, temperatures rounded and clamped to
        0..255 °C; ``state`` is a :class:`MotorState` code, ``motor_id`` the ESC_ID's low nibble."""
        if not 0 <= motor_id <= 0xF:
            raise CodecError(f"feedback motor_id is the low nibble of ESC_ID: expected 0..15, got {motor_id}")
        if state not in _STATE_CODES:
            raise CodecError(f"feedback state: expected one of {sorted(_STATE_CODES)}, got {state!r}")
        try:
            total = position + velocity + torque + t_mos + t_rotor
            checked = total - total == 0.0
        except TypeError:
            checked = False
        if not checked:
            position, velocity, torque, t_mos, t_rotor = (
                finite(x, f"feedback {name}") for x, name in zip(
                    (position, velocity, torque, t_mos, t_rotor),
                    ("position", "velocity", "torque", "t_mos", "t_rotor"), strict=True))
        lo, hi, w = self._p
        p = int(((lo if position < lo else hi if position > hi else position) - lo) * _U16 / w + 0.5)
        lo, hi, w = self._v
        v = int(((lo if velocity < lo else hi if velocity > hi else velocity) - lo) * _U12 / w + 0.5)
        lo, hi, w = self._t
        t = int(((lo if torque < lo else hi if torque > hi else torque) - lo) * _U12 / w + 0.5)
        word = ((int(state) << 60) | (int(motor_id) << 56) | (p << 40) | (v << 28) | (t << 16)
                | (_byte(round(t_mos)) << 8) | _byte(round(t_rotor)))
        return word.to_bytes(8, "big")

    def decode_feedback(self, data: bytes | bytearray) -> tuple[int, float, float, float, int, int] | None:
        """``(state code, position, velocity, torque, t_mos, t_rotor)`` of a feedback payload, or
        ``None`` for one that is no feedback frame (wrong length, unknown state code; :meth:`feedback`
        says why)."""
        if len(data) != FRAME_LENGTH:
            return None
        w = int.from_bytes(data, "big")
        state = w >> 60
        if state not in _STATE_CODES:
            return None
        pmax, vmax, tmax = self._pmax, self._vmax, self._tmax
        return (state,
                ((w >> 40) & 0xFFFF) * 2.0 * pmax / _U16 - pmax,
                ((w >> 28) & 0xFFF) * 2.0 * vmax / _U12 - vmax,
                ((w >> 16) & 0xFFF) * 2.0 * tmax / _U12 - tmax,
                (w >> 8) & 0xFF,
                w & 0xFF)

    def feedback(self, data: bytes | bytearray) -> Feedback:
        """A feedback payload as a :class:`Feedback`; :class:`CodecError` saying why for a payload
        that is none (wrong length, unknown state code in D0)."""
        d = check_payload(data, "feedback frame")
        reading = self.decode_feedback(d)
        if reading is None:
            raise CodecError(f"feedback frame: unknown state code 0x{d[0] >> 4:X} in D0 ({d.hex(' ')})")
        state, position, velocity, torque, t_mos, t_rotor = reading
        return Feedback(d[0] & 0xF, MotorState(state), position, velocity, torque, t_mos, t_rotor)


def encode_mit(cmd: MitCommand, limits: MitLimits, *, truncate: bool = False) -> bytes:
    """:meth:`MitCodec.encode_command` of ``cmd`` at ``limits`` (``truncate=True``: Damiao's
    reference encoder, which reproduces its bytes)."""
    return MitCodec(limits, truncate=truncate).encode_command(cmd.position, cmd.velocity, cmd.kp, cmd.kd,
                                                              cmd.torque)


def decode_mit(data: bytes | bytearray, limits: MitLimits) -> MitCommand:
    """:meth:`MitCodec.decode_command` at ``limits``."""
    return MitCodec(limits).decode_command(data)


def encode_feedback(fb: Feedback, limits: MitLimits) -> bytes:
    """:meth:`MitCodec.encode_feedback` of ``fb`` at ``limits``."""
    return MitCodec(limits).encode_feedback(fb.motor_id, fb.state, fb.position, fb.velocity, fb.torque,
                                            fb.t_mos, fb.t_rotor)


def decode_feedback(data: bytes | bytearray, limits: MitLimits) -> Feedback:
    """:meth:`MitCodec.feedback` at ``limits``: the decoded frame, or :class:`CodecError`."""
    return MitCodec(limits).feedback(data)


# ---------------------------------------------------------------------------------------------
# Special commands


class Special(IntEnum):
    """Last byte of a special command ``FF FF FF FF FF FF FF xx`` (sent to ESC_ID + mode offset)."""

    ENABLE = 0xFC
    DISABLE = 0xFD
    SET_ZERO = 0xFE
    CLEAR_ERROR = 0xFB


_SPECIAL_PREFIX = b"\xff" * 7


def special_frame(kind: Special | int) -> bytes:
    """``FF×7 kind``. SET_ZERO writes flash (do it disabled; prefer a software offset)."""
    try:
        return _SPECIAL_PREFIX + bytes((Special(kind),))
    except ValueError:
        known = [hex(s) for s in Special]
        raise CodecError(f"unknown special command {kind!r}; expected one of {known}") from None


def parse_special(data: bytes | bytearray) -> Special | None:
    """The special command of an 8-byte payload, or ``None`` if it is not one."""
    data = bytes(data)
    if len(data) != FRAME_LENGTH or data[:7] != _SPECIAL_PREFIX:
        return None
    try:
        return Special(data[7])
    except ValueError:
        return None
