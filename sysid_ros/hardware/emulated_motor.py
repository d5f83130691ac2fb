"""One emulated Damiao DM-J motor's firmware (no bus, no physics of its own):
:class:`EmulatedMotor` is what Damiao's DM-J manual describes (registers, enable/disable/zero/
clear-error, the MIT law, state codes, the CAN TIMEOUT watchdog, one reply per frame received),
with faults on demand; :class:`~sysid_ros.hardware.emulator.MotorEmulator` puts several on a bus
and drives their shafts with MuJoCo.

**What the firmware model covers (and how, where the manual is silent — inference):**

* addressing: ``firmware="v13"`` compares only the low 8 bits of the arbitration ID (firmware
  V13+), so a frame sent for another mode's offset is **misread** as the motor's current mode
  (e.g. a MIT payload read as two floats in position-velocity mode); ``firmware="legacy"``
  accepts only ``ESC_ID + offset(CTRL_MODE)`` and ignores other frames. Special commands are
  recognised in any mode. Register requests go to 0x7FF and are matched on the full ID in D0/D1.
* replies: exactly one per frame addressed to the motor — feedback on MST_ID after commands,
  special commands and refresh; register replies after read/write/save. No reply: a read or
  write of an unknown RID, a write to a read-only register, a save while enabled, a payload of
  the wrong length. A write of an invalid value (CTRL_MODE 7, negative TIMEOUT...) is echoed but
  not stored (read it back to verify, as the manual advises).
* ESC_ID, MST_ID and CAN_BR writes are stored but take effect only after a save and
  :meth:`EmulatedMotor.power_cycle`; all other registers act at once.
* enable while a fault is latched is ignored (the reply shows the fault); CLEAR_ERROR (0xFB)
  clears a latched fault only once its cause is gone (temperatures back under the threshold);
  SET_ZERO acts only while disabled.
* other modes (inner loops are not public; simple stand-ins): velocity ``τ = kv·(v*−v)`` with
  ``kv = TMAX/10`` N·m·s/rad; position-velocity: a position loop of 20 1/s limited to ``|v*|``
  feeding that velocity loop; force-position: the same loops limited to the speed limit, torque
  limited to ``current_limit·TMAX``. Non-finite misread targets are ignored.
* feedback: position wraps into ``[−PMAX, PMAX]`` (as the 16-bit field does), torque is the
  applied (saturated) torque, temperatures whole °C (ambient 25 °C).
* faults: over-temperature (0xB/0xC with the temperature over the threshold), any state code,
  communication loss (the motor neither receives nor answers; its watchdog still runs), dropped
  replies (next k, or a random fraction: the command still acts), bus-off (no motor receives or
  answers, one SocketCAN-style error frame ``CAN_ERR_BUSOFF`` (0x40) is sent, and a host bus
  wrapped by :meth:`~.emulator.MotorEmulator.host_bus` raises ``CanOperationError`` errno 105 (ENOBUFS) on
  send, as SocketCAN does when nobody acknowledges).

Units: motor space is the motor's output shaft (rad, rad/s, N·m); joint space is MuJoCo's. Per
joint with direction ``d``, offset ``o`` and gear ratio ``G``: ``p = d·G·(q − o)``,
``v = d·G·q̇``, ``τ_joint = d·G·t``.
"""

from __future__ import annotations

import math
import random
import time
from typing import Literal, Protocol

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.motors import DAMIAO_MOTORS
from sysid_ros.hardware.codec import (
    REGISTER_REQUEST_ID,
    CtrlMode,
    MitCodec,
    MitCommand,
    MitLimits,
    MotorState,
    Special,
    describe,
    mode_offset,
    parse_special,
)
from sysid_ros.hardware.codec_registers import (
    TIMEOUT_UNIT_S,
    UINT32_REGISTERS,
    Register,
    decode_force_pos,
    decode_pos_vel,
    decode_velocity,
    parse_register_request,
    register_reply_frame,
)
from sysid_ros.hardware.wiring import MotorWiring

__all__ = ["AMBIENT_C", "OVER_TEMPERATURE_C", "EmulatedMotor", "EmulatorError", "EmulatorJoint", "JointLike"]

AMBIENT_C = 25.0
"""Temperature [°C] of a healthy motor."""
OVER_TEMPERATURE_C = 120.0
"""Over-temperature threshold [°C] (register OT_VALUE)."""
POSITION_LOOP_GAIN = 20.0
"""[1/s] position loop of the position-velocity and force-position stand-ins."""

_MODES = {int(m): m for m in CtrlMode}
_CTRL_MODE, _TIMEOUT, _TMAX = Register.CTRL_MODE, Register.TIMEOUT, Register.TMAX
_PMAX, _VMAX = Register.PMAX, Register.VMAX



class EmulatorError(SysIdError):
    """The emulator was configured wrongly (unknown joint, bad model, bad option)."""


class JointLike(Protocol):
    """What the emulator needs of a joint (``direction``, ``position_offset``, ``gear_ratio``
    optional): :class:`EmulatorJoint`, the bridge's ``JointConfig``..."""

    name: str
    motor: str
    can_id: int
    master_id: int


#: one emulated motor: its MJCF joint, Damiao model, ESC_ID/MST_ID and the joint ↔ motor mapping
#: (the bridge's ``JointConfig`` extends the same wiring and is accepted as is)
EmulatorJoint = MotorWiring


def as_joint(j: JointLike) -> EmulatorJoint:
    try:
        return EmulatorJoint(str(j.name), str(j.motor), int(j.can_id), int(j.master_id),
                             int(getattr(j, "direction", 1)), float(getattr(j, "position_offset", 0.0)),
                             float(getattr(j, "gear_ratio", 1.0)))
    except AttributeError as exc:
        raise EmulatorError(f"a joint needs name, motor, can_id and master_id: {exc}") from None


# ---------------------------------------------------------------------------------------------


class EmulatedMotor:
    """One motor's firmware. Not thread-safe by itself (:class:`MotorEmulator` holds a lock).

    The shaft state ``(position, velocity)`` [rad, rad/s, motor space, unwrapped] is given to
    every call that needs it; :meth:`torque` is the torque the motor applies for it.
    """

    def __init__(self, joint: EmulatorJoint, *, timeout: int = 0, firmware: Literal["v13", "legacy"] = "v13",
                 rng_seed: int = 0) -> None:
        if joint.motor not in DAMIAO_MOTORS:
            raise EmulatorError(f"joint {joint.name!r}: unknown motor {joint.motor!r}; known: "
                                f"{sorted(DAMIAO_MOTORS)}")
        if firmware not in ("v13", "legacy"):
            raise EmulatorError(f"firmware must be 'v13' or 'legacy', got {firmware!r}")
        self.joint = joint
        self.firmware = firmware
        model = DAMIAO_MOTORS[joint.motor]
        self.registers: dict[Register, int | float] = {
            r: (0 if r in UINT32_REGISTERS else 0.0) for r in Register}
        self.registers.update({
            Register.ESC_ID: joint.can_id, Register.MST_ID: joint.master_id,
            Register.CTRL_MODE: int(CtrlMode.MIT), Register.TIMEOUT: int(timeout),
            Register.PMAX: model.pmax, Register.VMAX: model.vmax, Register.TMAX: model.tmax,
            Register.KT_VALUE: model.torque_constant or 0.0, Register.GR: model.gear_ratio or 1.0,
            Register.OT_VALUE: OVER_TEMPERATURE_C, Register.CAN_BR: 4, Register.SW_VER: 13,
        })
        self._flash = dict(self.registers)
        self._limits: MitLimits | None = None
        self._codec: MitCodec | None = None
        self._limits_key: tuple = ()
        self.esc_id, self.mst_id = joint.can_id, joint.master_id
        self.enabled = False
        self.latched: MotorState | None = None
        self.command: MitCommand | None = None
        self._mode_target: tuple[float, ...] | None = None
        self.zero_offset = 0.0
        self.t_mos = self.t_rotor = AMBIENT_C
        self.torque_applied = 0.0
        self.last_rx = time.monotonic()
        self.frames_received = self.replies_sent = self.replies_dropped = 0
        self.comm_lost = False
        self.drop_next = 0
        self.drop_probability = 0.0
        self._rng = random.Random(rng_seed)

    # -- state -----------------------------------------------------------------------------

    @property
    def state(self) -> MotorState:
        if self.latched is not None:
            return self.latched
        return MotorState.ENABLED if self.enabled else MotorState.DISABLED

    @property
    def mode(self) -> CtrlMode:
        value = self.registers[_CTRL_MODE]
        return _MODES.get(value) or CtrlMode(value)

    @property
    def limits(self) -> MitLimits:
        """The mapping ranges of the PMAX/VMAX/TMAX registers (cached; rebuilt after a write)."""
        return self.codec.limits

    @property
    def codec(self) -> MitCodec:
        """MIT command / feedback frames at :attr:`limits` (cached with them)."""
        r = self.registers
        key = (r[_PMAX], r[_VMAX], r[_TMAX])
        if self._codec is None or key != self._limits_key:  # also sees direct writes to .registers
            self._limits = MitLimits(float(key[0]), float(key[1]), float(key[2]))
            self._codec = MitCodec(self._limits)
            self._limits_key = key
        return self._codec

    @property
    def name(self) -> str:
        """The joint this motor drives."""
        return self.joint.name

    @property
    def can_id(self) -> int:
        """The ESC_ID the motor answers to now."""
        return self.esc_id

    def register(self, rid: Register | int) -> int | float:
        return self.registers[Register(rid)]

    def fault(self, state: MotorState) -> None:
        """Latch a fault: the motor drops out of enable and applies no torque."""
        if not MotorState(state).is_fault:
            raise EmulatorError(f"{describe(state)} is not a fault code")
        self.latched = MotorState(state)
        self._release()

    def _release(self) -> None:
        """Out of enable: no command, no torque."""
        self.enabled, self.command, self._mode_target, self.torque_applied = False, None, None, 0.0

    def power_cycle(self) -> None:
        """Registers back from flash (deferred ID/bit-rate writes take effect), disabled, faults
        and multi-turn position cleared."""
        self.registers = dict(self._flash)
        self._limits = self._codec = None
        self.esc_id, self.mst_id = int(self.registers[Register.ESC_ID]), int(self.registers[Register.MST_ID])
        self.latched = None
        self._release()

    # -- addressing --------------------------------------------------------------------------

    def addressed(self, arbitration_id: int, data: bytes) -> bool:
        """Whether the firmware takes a standard frame as addressed to it."""
        if arbitration_id == REGISTER_REQUEST_ID:
            return len(data) >= 2 and (data[0] | (data[1] << 8)) == self.esc_id
        if self.firmware == "v13":
            return (arbitration_id & 0xFF) == (self.esc_id & 0xFF)
        return arbitration_id == self.esc_id + mode_offset(self.mode)

    # -- frames ------------------------------------------------------------------------------

    def receive(self, arbitration_id: int, data: bytes, now: float, position: float,
                velocity: float) -> bytes | None:
        """Handle one frame addressed to this motor at time ``now`` [s, monotonic]; the reply
        payload (to send on :attr:`mst_id`) or ``None`` (no reply, or the reply is dropped)."""
        self.frames_received += 1
        self.last_rx = now
        if arbitration_id == REGISTER_REQUEST_ID:
            reply = self._register_request(data, position, velocity)
        else:
            reply = self._command(data, position, velocity)
        if reply is None:
            return None
        if self.drop_next > 0 or (self.drop_probability and self._rng.random() < self.drop_probability):
            self.drop_next = max(self.drop_next - 1, 0)
            self.replies_dropped += 1
            return None
        self.replies_sent += 1
        return reply

    def _command(self, data: bytes, position: float, velocity: float) -> bytes | None:
        special = parse_special(data)
        if special is not None:
            self._special(special, position)
            return self.feedback(position, velocity)
        if len(data) != 8 and not (self.mode is CtrlMode.VEL and len(data) == 4):
            return None
        if self.enabled:
            mode = self.mode
            if mode is CtrlMode.MIT:
                self.command = self.codec.decode_command(data)
            else:
                decoded = {CtrlMode.POS_VEL: decode_pos_vel, CtrlMode.VEL: lambda d: (decode_velocity(d),),
                           CtrlMode.FORCE_POS: decode_force_pos}[mode](data)
                if all(math.isfinite(x) for x in decoded):
                    self._mode_target = tuple(decoded)
        return self.feedback(position, velocity)

    def _special(self, kind: Special, position: float) -> None:
        if kind is Special.ENABLE:
            if self.latched is None and not self.enabled:
                self.enabled, self.command, self._mode_target = True, None, None
        elif kind is Special.DISABLE:
            self._release()
        elif kind is Special.SET_ZERO:
            if not self.enabled:
                self.zero_offset = position
        elif kind is Special.CLEAR_ERROR:
            if self.latched is not None and self._fault_cause_gone():
                self.latched = None

    def _fault_cause_gone(self) -> bool:
        threshold = float(self.registers[Register.OT_VALUE])
        if self.latched is MotorState.MOSFET_OVER_TEMP:
            return self.t_mos < threshold
        if self.latched is MotorState.COIL_OVER_TEMP:
            return self.t_rotor < threshold
        return True

    def _register_request(self, data: bytes, position: float, velocity: float) -> bytes | None:
        request = parse_register_request(data)
        if request is None or len(data) != 8:
            return None
        if request.op == "refresh":
            return self.feedback(position, velocity)
        if request.op == "save":
            if self.enabled:
                return None
            self._flash = dict(self.registers)
            return register_reply_frame(self.esc_id, "save", 1)
        if request.rid not in Register._value2member_map_:
            return None
        rid = Register(request.rid)
        if request.op == "read":
            value = self.registers[rid]
            if rid is Register.XOUT:
                value = position - self.zero_offset
            elif rid is Register.P_M:
                value = (position - self.zero_offset) * float(self.registers[Register.GR])
            return register_reply_frame(self.esc_id, "read", rid, value)
        if rid in (Register.P_M, Register.XOUT):
            return None
        if self._valid(rid, request.value):
            self.registers[rid] = request.value
            self._limits = self._codec = None
        return bytes(data)  # the echo

    @staticmethod
    def _valid(rid: Register, value: int | float | None) -> bool:
        if value is None:
            return False
        if rid is Register.CTRL_MODE:
            return value in tuple(int(m) for m in CtrlMode)
        if rid in (Register.PMAX, Register.VMAX, Register.TMAX):
            return math.isfinite(value) and value > 0
        if rid in (Register.ESC_ID, Register.MST_ID):
            return 0 <= value < REGISTER_REQUEST_ID
        if rid is Register.CAN_BR:
            return 0 <= value <= 9
        return math.isfinite(value)

    # -- physics -----------------------------------------------------------------------------

    def torque(self, position: float, velocity: float) -> float:
        """Motor torque [N·m] applied at this shaft state (0 unless enabled)."""
        if not self.enabled or self.latched is not None:
            self.torque_applied = 0.0
            return 0.0
        tmax = float(self.registers[_TMAX])
        p = position - self.zero_offset
        mode = self.mode
        tau = 0.0
        if mode is CtrlMode.MIT:
            c = self.command
            if c is not None:
                tau = c.kp * (c.position - p) + c.kd * (c.velocity - velocity) + c.torque
        elif self._mode_target is not None:
            kv = tmax / 10.0
            target = self._mode_target
            if mode is CtrlMode.VEL:
                tau = kv * (target[0] - velocity)
            else:
                speed = abs(target[1])
                v_cmd = min(max(POSITION_LOOP_GAIN * (target[0] - p), -speed), speed)
                tau = kv * (v_cmd - velocity)
                if mode is CtrlMode.FORCE_POS:
                    tmax = min(tmax, target[2] * tmax)
        self.torque_applied = min(max(tau, -tmax), tmax)
        return self.torque_applied

    def watchdog(self, now: float) -> float | None:
        """The instant [s, monotonic] the CAN TIMEOUT expired if it has by ``now`` (the motor is
        then latched 0xD), else ``None``."""
        if not self.enabled or self.latched is not None:
            return None
        ticks = int(self.registers[_TIMEOUT])
        if ticks <= 0:
            return None
        expiry = self.last_rx + ticks * TIMEOUT_UNIT_S
        if now < expiry:
            return None
        self.fault(MotorState.COMM_LOST)
        return expiry

    def feedback(self, position: float, velocity: float) -> bytes:
        """The feedback payload at this shaft state (position wrapped into ±PMAX)."""
        codec = self.codec
        pmax = codec.limits.pmax
        p = position - self.zero_offset
        span = 2.0 * pmax
        p = (p + pmax) % span - pmax
        state = self.latched if self.latched is not None else 1 if self.enabled else 0
        return codec.encode_feedback(self.esc_id & 0xF, state, p, velocity, self.torque_applied,
                                     round(self.t_mos), round(self.t_rotor))
