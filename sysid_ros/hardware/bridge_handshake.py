"""The bridge's bus conversation outside the control loop: frames sent under the bus lock,
feedback collected and decoded, state polls (refresh frames), the configure-time register handshake
(PMAX/VMAX/TMAX read and checked, CTRL_MODE and TIMEOUT written and read back) and the confirmed
enable. A mixin of :class:`~sysid_ros.hardware.bridge.Bridge` (its state lives there)."""

import time

import numpy as np

from sysid_ros.hardware.bridge_types import (
    CONFIRM_TIMEOUT,
    CONFIRM_TRIES,
    REGISTER_TIMEOUT,
    REGISTER_TRIES,
    STATES,
    BridgeError,
    HandshakeError,
)
from sysid_ros.hardware.codec import REGISTER_REQUEST_ID as REGISTER_ID
from sysid_ros.hardware.codec import (
    CodecError,
    CtrlMode,
    Feedback,
    MitLimits,
    MotorState,
    Special,
    check_limits,
    decode_feedback,
    special_frame,
)
from sysid_ros.hardware.codec_registers import (
    TIMEOUT_UNIT_S,
    Register,
    parse_register_reply,
    read_register_frame,
    refresh_frame,
    write_register_frame,
)
from sysid_ros.hardware.motor_frames import Reading


class BusTalk:
    """Mixin: the bus helpers and the handshake (see the module docstring)."""

    def _send(self, arbitration_id: int, data: bytes) -> None:
        if self.transport is None:
            raise BridgeError("the bus is not open")
        with self._bus_lock:
            self.transport.send(arbitration_id, data)

    def _send_special_all(self, kind: Special) -> None:
        frame = special_frame(kind)
        for i in range(self.n):
            self._send(self._mit_ids[i], frame)

    def _collect_states(self, timeout: float, wanted: np.ndarray | None = None) -> list[Feedback | None]:
        """Feedback frames until every ``wanted`` motor replied or ``timeout`` [s]; register replies
        are skipped. Latest feedback per motor (``None`` where none came)."""
        got: list[Feedback | None] = [None] * self.n
        pending = np.ones(self.n, dtype=bool) if wanted is None else wanted.copy()
        deadline = time.monotonic() + timeout
        while pending.any():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            msg = self.transport.recv(remaining)
            if msg is None:
                break
            i = self._by_master.get(msg.arbitration_id)
            if i is None or parse_register_reply(msg.data, can_id=self.motors[i].can_id) is not None:
                continue
            fb = self._decode(i, msg.data)
            if fb is not None:
                got[i] = fb
                pending[i] = False
        return got

    def _decode(self, i: int, data: bytes) -> Feedback | None:
        limits = self.motors[i].limits or MitLimits.for_model(self.motors[i].motor)
        try:
            fb = decode_feedback(data, limits)
        except CodecError as exc:
            self.motors[i].bad_frames += 1
            self.log.debug("bad frame from %s: %s", self.names[i], exc)
            return None
        m = self.motors[i]
        m.state, m.t_mos, m.t_rotor = fb.state, fb.t_mos, fb.t_rotor
        m.replies += 1
        return fb

    def _read(self, i: int, data: bytes) -> Reading | None:
        """The control loop's :meth:`_decode`: motor ``i``'s reply as a :data:`Reading` (status
        updated), ``None`` for a bad frame (counted; the reference decoder says why)."""
        r = self.frames.read(i, data)
        if r is None:  # not a feedback frame
            self._decode(i, data)  # counts the bad frame and logs why
            return None
        m = self.motors[i]
        m.state, m.t_mos, m.t_rotor = STATES[r[0]], r[4], r[5]
        m.replies += 1
        return r

    def _poll_all(self) -> list[Feedback | None]:
        """Ask every motor for its state (refresh frame) and collect the replies (a few tries)."""
        got: list[Feedback | None] = [None] * self.n
        for _ in range(REGISTER_TRIES):
            wanted = np.array([g is None for g in got])
            if not wanted.any():
                break
            for i in np.flatnonzero(wanted):
                self._send(REGISTER_ID, refresh_frame(self.motors[i].can_id))
            for i, fb in enumerate(self._collect_states(REGISTER_TIMEOUT, wanted)):
                if fb is not None:
                    got[i] = fb
        return got

    def _register(self, i: int, frame: bytes, rid: int, op: str) -> float | int:
        """Send a register request and wait for its reply on the motor's MST_ID."""
        m = self.motors[i]
        for _ in range(REGISTER_TRIES):
            self._send(REGISTER_ID, frame)
            deadline = time.monotonic() + REGISTER_TIMEOUT
            while (remaining := deadline - time.monotonic()) > 0:
                msg = self.transport.recv(remaining)
                if msg is None:
                    break
                if msg.arbitration_id != m.master_id:
                    continue
                reply = parse_register_reply(msg.data, can_id=m.can_id)
                if reply is not None and reply.op == op and reply.rid == rid:
                    return reply.value
        raise HandshakeError(
            f"{m.joint} (motor {m.motor}, CAN ID 0x{m.can_id:02X}, master ID 0x{m.master_id:02X}) does "
            f"not answer a register {op} of {Register(rid).name} after {REGISTER_TRIES} tries: is it "
            f"powered, are can_id/master_id right (MST_ID register), does the bitrate match?")

    def _handshake(self, i: int) -> None:
        m = self.motors[i]
        read = {rid: float(self._register(i, read_register_frame(m.can_id, rid), rid, "read"))
                for rid in (Register.PMAX, Register.VMAX, Register.TMAX)}
        limits = MitLimits(read[Register.PMAX], read[Register.VMAX], read[Register.TMAX])
        mismatch = check_limits(m.motor, limits)
        if mismatch:
            text = f"{m.joint}: {mismatch}"
            if self.config.limit_mismatch == "error":
                raise HandshakeError(text + " (set limit_mismatch: warn to run with the registers' values)")
            self.log.warning("%s; using the registers' values", text)
        m.limits = limits
        self._write_verify(i, Register.CTRL_MODE, int(CtrlMode.MIT))
        self._write_verify(i, Register.TIMEOUT, round(self.config.motor_timeout / TIMEOUT_UNIT_S))
        self._motor_timeout = self.config.motor_timeout

    def _write_motor_timeouts(self, seconds: float) -> None:
        """Every motor's CAN TIMEOUT register written and read back (motors disabled)."""
        for i in range(self.n):
            self._write_verify(i, Register.TIMEOUT, round(seconds / TIMEOUT_UNIT_S))
        self._motor_timeout = seconds

    def _write_verify(self, i: int, rid: Register, value: int) -> None:
        m = self.motors[i]
        self._register(i, write_register_frame(m.can_id, rid, value), rid, "write")
        back = self._register(i, read_register_frame(m.can_id, rid), rid, "read")
        if int(back) != value:
            raise HandshakeError(f"{m.joint}: wrote {rid.name} = {value} but read back {back}")

    def _enable_all(self) -> None:
        """Enable every motor and confirm state 1 from each (a few rounds); on failure disable all."""
        self._disabled = False
        pending = np.ones(self.n, dtype=bool)
        for _ in range(CONFIRM_TRIES):
            for i in np.flatnonzero(pending):
                self._send(self._mit_ids[i], special_frame(Special.ENABLE))
            for i, fb in enumerate(self._collect_states(CONFIRM_TIMEOUT, pending)):
                if fb is not None and fb.state == MotorState.ENABLED:
                    pending[i] = False
            if not pending.any():
                return
        states = {self.names[i]: self.motors[i].state_text for i in np.flatnonzero(pending)}
        self.disable_all(reason="enable failed")
        raise BridgeError(f"motors did not confirm enable: {states}")


def reading_of(fb: Feedback) -> Reading:
    return (int(fb.state), fb.position, fb.velocity, fb.torque, fb.t_mos, fb.t_rotor)
