"""Damiao DM-J motor CAN protocol: pure encoders and decoders of every frame.

Facts from Damiao's DM-J motor manual (MIT mode, feedback frame, special commands, register
list) and its reference host code. No I/O and no python-can here: every function maps numbers to
the 8-byte payloads of classic CAN frames and back. Arbitration IDs are the caller's business
(:func:`command_arbitration_id`, :data:`REGISTER_REQUEST_ID`; feedback and register replies arrive
on the motor's MST_ID).

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
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

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


def command_arbitration_id(can_id: int, mode: CtrlMode | int = CtrlMode.MIT) -> int:
    """Arbitration ID of command and special frames for motor ``can_id`` (ESC_ID) in ``mode``."""
    _check_can_id(can_id)
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


def _finite(x: float, what: str) -> float:
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


def _check_payload(data: bytes | bytearray, what: str, lengths: tuple[int, ...] = (FRAME_LENGTH,)) -> bytes:
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
                _finite(x, f"MIT {name}")
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
            _check_payload(data, "MIT command")
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
                _finite(x, f"feedback {name}") for x, name in zip(
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
        d = _check_payload(data, "feedback frame")
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


# ---------------------------------------------------------------------------------------------
# Registers


REGISTER_REQUEST_ID = 0x7FF
"""Arbitration ID of every register request (read, write, save, refresh); replies come on MST_ID."""


class Register(IntEnum):
    """Register IDs (RID), as in the register table of Damiao's DM-J manual."""

    UV_VALUE = 0
    KT_VALUE = 1
    OT_VALUE = 2
    OC_VALUE = 3
    ACC = 4
    DEC = 5
    MAX_SPD = 6
    MST_ID = 7
    ESC_ID = 8
    TIMEOUT = 9
    CTRL_MODE = 10
    DAMP = 11
    INERTIA = 12
    HW_VER = 13
    SW_VER = 14
    SN = 15
    NPP = 16
    RS = 17
    LS = 18
    FLUX = 19
    GR = 20
    PMAX = 21
    VMAX = 22
    TMAX = 23
    I_BW = 24
    KP_ASR = 25
    KI_ASR = 26
    KP_APR = 27
    KI_APR = 28
    OV_VALUE = 29
    GREF = 30
    DETA = 31
    V_BW = 32
    IQ_C1 = 33
    VL_C1 = 34
    CAN_BR = 35
    SUB_VER = 36
    U_OFF = 50
    V_OFF = 51
    K1 = 52
    K2 = 53
    M_OFF = 54
    DIR = 55
    P_M = 80
    XOUT = 81


UINT32_REGISTERS = frozenset({Register.MST_ID, Register.ESC_ID, Register.TIMEOUT, Register.CTRL_MODE,
                              Register.HW_VER, Register.SW_VER, Register.SN, Register.NPP,
                              Register.CAN_BR, Register.SUB_VER})
"""RIDs whose value is a little-endian uint32 (7–10, 13–16, 35–36); all others are float32."""

READ_ONLY_REGISTERS = frozenset({Register.P_M, Register.XOUT})
"""Registers :func:`write_register_frame` refuses (motor and output-shaft position)."""

TIMEOUT_UNIT_S = 50e-6
"""One count of the TIMEOUT register [s]."""

_OPS: dict[int, Literal["read", "write", "save", "refresh"]] = {
    0x33: "read", 0x55: "write", 0xAA: "save", 0xCC: "refresh"}
_OP_CODES = {name: code for code, name in _OPS.items()}
SAVE_SUBCOMMAND = 0x01
"""D3 of a save-to-flash request and reply."""

RegisterValue = int | float


def register(rid: Register | int) -> Register:
    """The :class:`Register` of a RID; :class:`CodecError` naming the RID if unknown."""
    try:
        return Register(rid)
    except ValueError:
        known = sorted(int(r) for r in Register)
        raise CodecError(f"unknown register RID {rid!r}; known RIDs: {known}") from None


def encode_register_value(rid: Register | int, value: RegisterValue) -> bytes:
    """4 bytes little-endian: uint32 for :data:`UINT32_REGISTERS`, float32 otherwise."""
    reg = register(rid)
    if reg in UINT32_REGISTERS:
        if isinstance(value, float) and not value.is_integer():
            raise CodecError(f"register {reg.name} holds a uint32, got non-integer {value!r}")
        try:
            ivalue = int(value)
        except (TypeError, ValueError, OverflowError):
            raise CodecError(f"register {reg.name} holds a uint32, got {value!r}") from None
        if not 0 <= ivalue <= 0xFFFFFFFF:
            raise CodecError(f"register {reg.name} holds a uint32 (0..4294967295), got {ivalue}")
        return struct.pack("<I", ivalue)
    fvalue = _finite(value, f"register {reg.name}")
    try:
        return struct.pack("<f", fvalue)
    except OverflowError:
        raise CodecError(f"register {reg.name}: {fvalue!r} does not fit a float32") from None


def decode_register_value(rid: Register | int, raw: bytes | bytearray) -> RegisterValue:
    """Inverse of :func:`encode_register_value` (``raw`` is 4 bytes)."""
    reg = register(rid)
    raw = _check_payload(raw, f"register {reg.name} value", (4,))
    return struct.unpack("<I", raw)[0] if reg in UINT32_REGISTERS else struct.unpack("<f", raw)[0]


def _check_can_id(can_id: int) -> None:
    if not (isinstance(can_id, int) and 0 <= can_id <= 0x7FF) or can_id == REGISTER_REQUEST_ID:
        raise CodecError(f"CAN ID must be an 11-bit ID other than 0x7FF, got {can_id!r}")


def _id_bytes(can_id: int) -> bytes:
    _check_can_id(can_id)
    return bytes((can_id & 0xFF, can_id >> 8))


def read_register_frame(can_id: int, rid: Register | int) -> bytes:
    """Request ``[ID_L, ID_H, 0x33, RID, 0, 0, 0, 0]`` (send to :data:`REGISTER_REQUEST_ID`)."""
    return _id_bytes(can_id) + bytes((0x33, register(rid))) + bytes(4)


def write_register_frame(can_id: int, rid: Register | int, value: RegisterValue) -> bytes:
    """Request ``[ID_L, ID_H, 0x55, RID, d0..d3]`` writing RAM (uint32 or float32 by RID); the
    motor echoes it. Read-only registers raise :class:`CodecError`."""
    reg = register(rid)
    if reg in READ_ONLY_REGISTERS:
        raise CodecError(f"register {reg.name} ({int(reg)}) is read-only")
    return _id_bytes(can_id) + bytes((0x55, reg)) + encode_register_value(reg, value)


def save_frame(can_id: int) -> bytes:
    """Request ``[ID_L, ID_H, 0xAA, 0x01, 0, 0, 0, 0]``: store all registers to flash (only while
    disabled; ≤ 30 ms; flash lasts ~10k cycles)."""
    return _id_bytes(can_id) + bytes((0xAA, SAVE_SUBCOMMAND)) + bytes(4)


def refresh_frame(can_id: int) -> bytes:
    """Request ``[ID_L, ID_H, 0xCC, 0x00, 0, 0, 0, 0]``: the motor answers one feedback frame."""
    return _id_bytes(can_id) + bytes((0xCC, 0x00)) + bytes(4)


@dataclass(frozen=True)
class RegisterReply:
    """A reply on MST_ID to a register request. ``rid`` is the register (for ``save``, D3 = 0x01);
    ``value`` the decoded value (``None`` for ``save``)."""

    can_id: int
    op: Literal["read", "write", "save"]
    rid: int
    value: RegisterValue | None


@dataclass(frozen=True)
class RegisterRequest:
    """A register request as the motor sees it on 0x7FF. ``value`` is set for writes only."""

    can_id: int
    op: Literal["read", "write", "save", "refresh"]
    rid: int
    value: RegisterValue | None
    raw: bytes


def parse_register_reply(data: bytes | bytearray, *, can_id: int | None = None) -> RegisterReply | None:
    """A register reply, or ``None`` if ``data`` is not one (e.g. a feedback frame).

    Replies are told from feedback by D2 ∈ {0x33, 0x55, 0xAA} and D3 a known RID (0x01 for
    save); give ``can_id`` to also require D0/D1 = that ID. A feedback frame can still look like
    a reply (D2 is a position byte): expect register replies only while a request is pending and
    the motor is not being commanded (configure before streaming: older firmware garbles
    interleaved register and command traffic).
    """
    data = bytes(data)
    if len(data) not in (4, FRAME_LENGTH) or data[2] not in (0x33, 0x55, 0xAA):
        return None
    reply_id = data[0] | (data[1] << 8)
    if reply_id > 0x7FF or (can_id is not None and reply_id != can_id):
        return None
    op = _OPS[data[2]]
    if op == "save":
        return RegisterReply(reply_id, "save", data[3], None) if data[3] == SAVE_SUBCOMMAND else None
    if len(data) != FRAME_LENGTH or data[3] not in Register._value2member_map_:
        return None
    return RegisterReply(reply_id, op, data[3], decode_register_value(data[3], data[4:8]))


def register_reply_frame(can_id: int, op: Literal["read", "write", "save"], rid: int,
                         value: RegisterValue | None = None) -> bytes:
    """The motor's reply payload (for the emulator): ``[ID_L, ID_H, op, RID, d0..d3]``; a save
    reply is ``[ID_L, ID_H, 0xAA, 0x01, 0, 0, 0, 0]``."""
    if op == "save":
        return _id_bytes(can_id) + bytes((0xAA, SAVE_SUBCOMMAND)) + bytes(4)
    if op not in ("read", "write"):
        raise CodecError(f"register reply op must be 'read', 'write' or 'save', got {op!r}")
    if value is None:
        raise CodecError(f"register {op} reply needs a value")
    return _id_bytes(can_id) + bytes((_OP_CODES[op], register(rid))) + encode_register_value(rid, value)


def parse_register_request(data: bytes | bytearray) -> RegisterRequest | None:
    """A request sent to 0x7FF as the motor parses it, or ``None`` if D2 is no known operation.
    A write to an unknown RID has ``value=None`` (the firmware ignores it)."""
    data = bytes(data)
    if len(data) != FRAME_LENGTH or data[2] not in _OPS:
        return None
    op = _OPS[data[2]]
    can_id, rid = data[0] | (data[1] << 8), data[3]
    value = None
    if op == "write" and rid in Register._value2member_map_:
        value = decode_register_value(rid, data[4:8])
    return RegisterRequest(can_id, op, rid, value, data)


# ---------------------------------------------------------------------------------------------
# Other modes (little-endian IEEE-754 floats)


def _clamp_sym(x: float, bound: float | None) -> float:
    return x if bound is None else min(max(x, -bound), bound)


def encode_pos_vel(position: float, velocity: float, limits: MitLimits | None = None) -> bytes:
    """Position-velocity mode (arbitration ID 0x100 + ID): ``<f p_des><f v_des>``. With
    ``limits``, position is clamped to ±pmax and velocity to ±vmax; otherwise sent as given."""
    p = _clamp_sym(_finite(position, "pos-vel position"), None if limits is None else limits.pmax)
    v = _clamp_sym(_finite(velocity, "pos-vel velocity"), None if limits is None else limits.vmax)
    return struct.pack("<ff", p, v)


def decode_pos_vel(data: bytes | bytearray) -> tuple[float, float]:
    """``(position, velocity)`` of a position-velocity payload."""
    return struct.unpack("<ff", _check_payload(data, "pos-vel command"))


def encode_velocity(velocity: float, limits: MitLimits | None = None, *, pad: bool = False) -> bytes:
    """Velocity mode (0x200 + ID): ``<f v_des>``, 4 bytes (8 with ``pad``, zero-filled);
    clamped to ±vmax with ``limits``."""
    v = _clamp_sym(_finite(velocity, "velocity command"), None if limits is None else limits.vmax)
    return struct.pack("<f", v) + (bytes(4) if pad else b"")


def decode_velocity(data: bytes | bytearray) -> float:
    """``v_des`` of a velocity payload (DLC 4 or 8)."""
    return struct.unpack("<f", _check_payload(data, "velocity command", (4, FRAME_LENGTH))[:4])[0]


SPEED_LIMIT_MAX = 100.0
"""Force-position speed limit range [rad/s] (uint16 = rad/s × 100, 0..10000)."""


def encode_force_pos(position: float, speed_limit: float, current_limit: float,
                     limits: MitLimits | None = None) -> bytes:
    """Force-position mode (0x300 + ID): ``<f p_des><H speed×100><H current×10000>``.
    ``speed_limit`` [rad/s] is clamped to [0, 100], ``current_limit`` [per unit] to [0, 1], both
    rounded to nearest; ``position`` clamped to ±pmax with ``limits``."""
    p = _clamp_sym(_finite(position, "force-pos position"), None if limits is None else limits.pmax)
    speed = _fixed(_finite(speed_limit, "force-pos speed limit"), SPEED_LIMIT_MAX, 100)
    current = _fixed(_finite(current_limit, "force-pos current limit"), 1.0, 10000)
    return struct.pack("<fHH", p, speed, current)


def _fixed(x: float, upper: float, scale: int) -> int:
    """``round(clamp(x, 0, upper) * scale)`` as an unsigned integer."""
    return math.floor(min(max(x, 0.0), upper) * scale + 0.5)


def decode_force_pos(data: bytes | bytearray) -> tuple[float, float, float]:
    """``(position [rad], speed_limit [rad/s], current_limit [per unit])`` of a force-position payload."""
    p, speed, current = struct.unpack("<fHH", _check_payload(data, "force-pos command"))
    return p, speed / 100.0, current / 10000.0
