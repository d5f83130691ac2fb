"""Damiao DM-J motor CAN protocol, the frames beside MIT mode: register requests and replies
(read, write, save to flash, refresh; requests to :data:`REGISTER_REQUEST_ID`, replies on MST_ID),
and the position-velocity, velocity and force-position command payloads (little-endian IEEE-754
floats). Pure, like :mod:`sysid_ros.hardware.codec` (MIT frames, special commands, states, limits)."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from sysid_ros.hardware.codec import (
    FRAME_LENGTH,
    CodecError,
    MitLimits,
    check_can_id,
    check_payload,
    finite,
)

# ---------------------------------------------------------------------------------------------
# Registers


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
    fvalue = finite(value, f"register {reg.name}")
    try:
        return struct.pack("<f", fvalue)
    except OverflowError:
        raise CodecError(f"register {reg.name}: {fvalue!r} does not fit a float32") from None


def decode_register_value(rid: Register | int, raw: bytes | bytearray) -> RegisterValue:
    """Inverse of :func:`encode_register_value` (``raw`` is 4 bytes)."""
    reg = register(rid)
    raw = check_payload(raw, f"register {reg.name} value", (4,))
    return struct.unpack("<I", raw)[0] if reg in UINT32_REGISTERS else struct.unpack("<f", raw)[0]


def _id_bytes(can_id: int) -> bytes:
    check_can_id(can_id)
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
    p = _clamp_sym(finite(position, "pos-vel position"), None if limits is None else limits.pmax)
    v = _clamp_sym(finite(velocity, "pos-vel velocity"), None if limits is None else limits.vmax)
    return struct.pack("<ff", p, v)


def decode_pos_vel(data: bytes | bytearray) -> tuple[float, float]:
    """``(position, velocity)`` of a position-velocity payload."""
    return struct.unpack("<ff", check_payload(data, "pos-vel command"))


def encode_velocity(velocity: float, limits: MitLimits | None = None, *, pad: bool = False) -> bytes:
    """Velocity mode (0x200 + ID): ``<f v_des>``, 4 bytes (8 with ``pad``, zero-filled);
    clamped to ±vmax with ``limits``."""
    v = _clamp_sym(finite(velocity, "velocity command"), None if limits is None else limits.vmax)
    return struct.pack("<f", v) + (bytes(4) if pad else b"")


def decode_velocity(data: bytes | bytearray) -> float:
    """``v_des`` of a velocity payload (DLC 4 or 8)."""
    return struct.unpack("<f", check_payload(data, "velocity command", (4, FRAME_LENGTH))[:4])[0]


SPEED_LIMIT_MAX = 100.0
"""Force-position speed limit range [rad/s] (uint16 = rad/s × 100, 0..10000)."""


def encode_force_pos(position: float, speed_limit: float, current_limit: float,
                     limits: MitLimits | None = None) -> bytes:
    """Force-position mode (0x300 + ID): ``<f p_des><H speed×100><H current×10000>``.
    ``speed_limit`` [rad/s] is clamped to [0, 100], ``current_limit`` [per unit] to [0, 1], both
    rounded to nearest; ``position`` clamped to ±pmax with ``limits``."""
    p = _clamp_sym(finite(position, "force-pos position"), None if limits is None else limits.pmax)
    speed = _fixed(finite(speed_limit, "force-pos speed limit"), SPEED_LIMIT_MAX, 100)
    current = _fixed(finite(current_limit, "force-pos current limit"), 1.0, 10000)
    return struct.pack("<fHH", p, speed, current)


def _fixed(x: float, upper: float, scale: int) -> int:
    """``round(clamp(x, 0, upper) * scale)`` as an unsigned integer."""
    return math.floor(min(max(x, 0.0), upper) * scale + 0.5)


def decode_force_pos(data: bytes | bytearray) -> tuple[float, float, float]:
    """``(position [rad], speed_limit [rad/s], current_limit [per unit])`` of a force-position payload."""
    p, speed, current = struct.unpack("<fHH", check_payload(data, "force-pos command"))
    return p, speed / 100.0, current / 10000.0
