"""Emulated Damiao motors on a python-can bus, their shafts driven by MuJoCo (no ROS).

:class:`EmulatedMotor` is one motor's firmware as Damiao's DM-J manual describes it (registers,
enable/disable/zero/clear-error, the MIT law, state codes, the CAN TIMEOUT watchdog, one reply per
frame received) with faults on demand.
:class:`MotorEmulator` puts several of them on one bus and closes their loops through a MuJoCo
model of the robot (the package's default robot unless told otherwise).

**Bus.** python-can's ``virtual`` interface connects buses inside one process only, so the
emulator is primarily used in-process: a host (the bridge, a test) opens a bus on the same
virtual channel and the emulator answers from its own thread (:meth:`MotorEmulator.start`);
:class:`sysid_ros.hardware.emulated_bus.EmulatedBus` does both. Any other python-can bus works the
same way (``socketcan`` on ``vcan0`` across processes, the ``damiao_emulator`` node).

**Time.** ``clock="realtime"``: physics follows the monotonic wall clock; between frames every
motor keeps applying its last command, re-evaluating its law at every physics step with the
current shaft state (what the firmware's servo loop does). ``clock="lockstep"``: physics
advances by ``lockstep_period`` whenever a command *round* completes (a motor receives its second
command-type frame since the last advance), so a host that commands every motor once per cycle
sees exactly one period of physics per cycle whatever its timing jitter — deterministic runs for
tests. In both modes the TIMEOUT watchdog runs on the wall clock (a motor's own clock).

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
  wrapped by :meth:`MotorEmulator.host_bus` raises ``CanOperationError`` errno 105 (ENOBUFS) on
  send, as SocketCAN does when nobody acknowledges).

Units: motor space is the motor's output shaft (rad, rad/s, N·m); joint space is MuJoCo's. Per
joint with direction ``d``, offset ``o`` and gear ratio ``G``: ``p = d·G·(q − o)``,
``v = d·G·q̇``, ``τ_joint = d·G·t``.
"""

from __future__ import annotations

import errno
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import can
import mujoco
import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.motors import DAMIAO_MOTORS
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.plant import MitPlant
from sysid_ros.hardware.codec import (
    REGISTER_REQUEST_ID,
    TIMEOUT_UNIT_S,
    UINT32_REGISTERS,
    CtrlMode,
    MitCodec,
    MitCommand,
    MitLimits,
    MotorState,
    Register,
    Special,
    decode_force_pos,
    decode_pos_vel,
    decode_velocity,
    describe,
    mode_offset,
    parse_register_request,
    parse_special,
    register_reply_frame,
)
from sysid_ros.hardware.transport import Payload
from sysid_ros.hardware.wiring import MotorWiring

log = logging.getLogger(__name__)

__all__ = ["BUS_OFF_ERROR_ID", "EmulatedMotor", "EmulatorError", "EmulatorJoint", "MotorEmulator"]

AMBIENT_C = 25.0
"""Temperature [°C] of a healthy motor."""
OVER_TEMPERATURE_C = 120.0
"""Over-temperature threshold [°C] (register OT_VALUE)."""
BUS_OFF_ERROR_ID = 0x40
"""Error-frame class of a bus-off (SocketCAN ``CAN_ERR_BUSOFF``)."""
POSITION_LOOP_GAIN = 20.0
"""[1/s] position loop of the position-velocity and force-position stand-ins."""

_MAX_BATCH = 64  # frames handled per wake-up at most (a flooding host still gets replies)
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


def _as_joint(j: JointLike) -> EmulatorJoint:
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


# ---------------------------------------------------------------------------------------------


class MotorEmulator:
    """Several :class:`EmulatedMotor` on one python-can bus, shafts driven by MuJoCo.

    See the module docstring. Thread-safe: the emulator runs in its own thread after
    :meth:`start`; inspection and fault injection take its lock.
    """

    def __init__(self, joints: Iterable[JointLike], *, channel: str = "damiao", interface: str = "virtual",
                 bus: can.BusABC | None = None, model_path: str | Path | None = None,
                 initial_pose: str | Sequence[float] | None = "home", payload: Any = None,
                 physics_rate: float = 1000.0, clock: Literal["realtime", "lockstep"] = "realtime",
                 lockstep_period: float | None = None, timeout_registers: int = 0,
                 firmware: Literal["v13", "legacy"] = "v13", poll_period: float = 0.002) -> None:
        self.joints = tuple(_as_joint(j) for j in joints)
        if not self.joints:
            raise EmulatorError("the emulator needs at least one joint")
        ids = [j.can_id for j in self.joints]
        if len(set(ids)) != len(ids):
            raise EmulatorError(f"can_ids must be unique, got {ids}")
        if clock not in ("realtime", "lockstep"):
            raise EmulatorError(f"clock must be 'realtime' or 'lockstep', got {clock!r}")
        if not physics_rate > 0:
            raise EmulatorError(f"physics_rate must be > 0 Hz, got {physics_rate}")
        self.clock = clock
        self.dt = 1.0 / physics_rate
        period = self.dt if lockstep_period is None else float(lockstep_period)
        self.lockstep_steps = max(1, round(period / self.dt))
        self.poll_period = poll_period

        from sysid_ros import resources
        from sysid_ros.core.sim.synthetic import with_payload

        path = Path(model_path) if model_path else resources.default_robot_path()
        self.model = RobotModel.from_mjcf(path)
        self.payload = payload
        # the shafts: the package's MuJoCo plant (its options, the model's integrator), driven by
        # the torques the motors' firmware computes and saturates (MitPlant.step_torque)
        try:
            self.plant = MitPlant(with_payload(self.model, payload) if payload is not None else self.model.mj,
                                  timestep=self.dt, joints=[j.name for j in self.joints], integrator=None)
        except SysIdError as exc:
            raise EmulatorError(f"{exc} of {path}") from None
        self.mj, self.data = self.plant.mj, self.plant.data
        self._qadr, self._dof = self.plant.qpos_indices, self.plant.dof_indices
        self._tau = np.zeros(len(self.joints))  # joint torques of the current step [N·m]
        self._direction = np.array([float(j.direction) for j in self.joints])
        self._offset = np.array([j.position_offset for j in self.joints])
        self._gear = np.array([j.gear_ratio for j in self.joints])
        # per motor (d·G, qpos address, dof address, offset) as Python numbers for the hot path
        self._map = tuple((float(d * g), int(a), int(v), float(o)) for d, g, a, v, o in zip(
            self._direction, self._gear, self._qadr, self._dof, self._offset, strict=True))
        self._set_pose(initial_pose, path)
        mujoco.mj_forward(self.mj, self.data)

        self.motors = tuple(EmulatedMotor(j, timeout=timeout_registers, firmware=firmware, rng_seed=i)
                            for i, j in enumerate(self.joints))
        self._by_key: dict[Any, EmulatedMotor] = {}
        for m in self.motors:
            self._by_key[m.joint.name] = m
            self._by_key[m.joint.can_id] = m

        self._own_bus = bus is None
        self.bus = can.Bus(interface=interface, channel=channel) if bus is None else bus
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._running = threading.Event()
        self._round: set[int] = set()
        self._t0 = time.monotonic()
        self._steps = 0
        self.bus_off = False
        self._error: BaseException | None = None

    # -- set-up ------------------------------------------------------------------------------

    def _set_pose(self, pose: str | Sequence[float] | None, path: Path) -> None:
        if pose is None or (isinstance(pose, str) and pose == ""):
            return
        if isinstance(pose, str):
            kid = mujoco.mj_name2id(self.mj, mujoco.mjtObj.mjOBJ_KEY, pose)
            if kid < 0:
                raise EmulatorError(f"initial_pose {pose!r}: no keyframe of that name in {path}")
            mujoco.mj_resetDataKeyframe(self.mj, self.data, kid)
            return
        q = np.asarray(pose, dtype=float)
        if q.shape != (len(self.joints),) or not np.all(np.isfinite(q)):
            raise EmulatorError(f"initial_pose: expected {len(self.joints)} finite joint positions, "
                                f"got {pose!r}")
        self.data.qpos[self._qadr] = q

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> MotorEmulator:
        """Start answering frames in a daemon thread (idempotent)."""
        with self._lock:
            if self._thread is not None:
                return self
            self._t0 = time.monotonic() - self._steps * self.dt
            now = time.monotonic()
            for m in self.motors:
                m.last_rx = now
            self._running.set()
            self._thread = threading.Thread(target=self._run, name="damiao-emulator", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and shut down the emulator's own bus (idempotent)."""
        self._running.clear()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        if self._own_bus and self.bus is not None:
            self.bus.shutdown()
            self._own_bus = False

    def __enter__(self) -> MotorEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """The exception that ended the emulator thread, if any."""
        return self._error

    def _run(self) -> None:
        """Wait for a frame, take every frame already queued behind it, handle them in order and
        send their replies in one burst: one wake-up of this thread (and of the host waiting for
        the replies) per command round rather than per frame."""
        recv = self.bus.recv
        replies: list[tuple[int, bytes]] = []
        try:
            last = time.monotonic()
            while self._running.is_set():
                msg = recv(timeout=self.poll_period)
                batch = [msg]
                if msg is not None:
                    while len(batch) < _MAX_BATCH and (more := recv(timeout=0.0)) is not None:
                        batch.append(more)
                mono, wall = time.monotonic(), time.time()
                with self._lock:
                    for msg in batch:
                        now = mono
                        if msg is not None:
                            # handle the frame at the moment it was on the bus, not when this
                            # thread got to it: a starved emulator thread must not see its own
                            # lateness as a host timeout (bus timestamps are wall-clock)
                            age = wall - msg.timestamp
                            if 0.0 <= age < 1.0:
                                now = max(last, mono - age)
                        last = now
                        self._handle(msg, now, replies)
                    for arbitration_id, data in replies:
                        self._send(arbitration_id, data)
                replies.clear()
        except BaseException as exc:  # a dead emulator must be visible to the tests that use it
            log.exception("damiao emulator stopped")
            self._error = exc
            raise

    # -- the core step (public so a host can drive the emulator without a thread) -------------

    def process(self, msg: can.Message | None, now: float) -> None:
        """Advance to ``now`` [s, monotonic] and handle ``msg`` (``None``: only advance); the
        reply, if any, is sent at once."""
        replies: list[tuple[int, bytes]] = []
        with self._lock:
            self._handle(msg, now, replies)
            for arbitration_id, data in replies:
                self._send(arbitration_id, data)

    def _handle(self, msg: can.Message | None, now: float, replies: list[tuple[int, bytes]]) -> None:
        """:meth:`process` with the replies appended to ``replies`` as ``(arbitration_id, payload)``
        instead of sent (the caller holds the lock)."""
        if self.clock == "realtime":
            self._advance_to(now)
        if msg is None or msg.is_error_frame or msg.is_remote_frame or msg.is_fd or self.bus_off:
            self._watchdogs(now)
            return
        if msg.is_extended_id:
            return
        arbitration_id = msg.arbitration_id
        data = bytes(msg.data)
        lockstep = self.clock == "lockstep" and arbitration_id != REGISTER_REQUEST_ID
        for i, motor in enumerate(self.motors):
            if motor.comm_lost or not motor.addressed(arbitration_id, data):
                continue
            if lockstep:
                if i in self._round:
                    self._round.clear()
                    for _ in range(self.lockstep_steps):
                        self._step()
                self._round.add(i)
            motor.watchdog(now)  # a frame after the expiry finds the motor latched
            p, v = self._motor_state(i)
            reply = motor.receive(arbitration_id, data, now, p, v)
            if reply is not None:
                replies.append((motor.mst_id, reply))

    def _send(self, arbitration_id: int, data: bytes, *, error: bool = False) -> None:
        msg = can.Message(arbitration_id=arbitration_id, data=Payload(data), is_extended_id=False,
                          is_error_frame=error)
        try:
            self.bus.send(msg)
        except can.CanError as exc:
            log.warning("emulator could not send 0x%03X: %s", arbitration_id, exc)

    def _advance_to(self, now: float) -> None:
        target = math.floor((now - self._t0) / self.dt)
        behind = target - self._steps
        if behind > 2000:  # starved for > 2 s of physics: skip ahead rather than stall
            log.warning("emulator fell %d physics steps behind; skipping ahead", behind)
            self._t0 += (behind - 1) * self.dt
            target = self._steps + 1
        while self._steps < target:
            self._watchdogs(self._t0 + self._steps * self.dt)
            self._step()

    def _watchdogs(self, now: float) -> None:
        for m in self.motors:
            m.watchdog(now)

    def _motor_state(self, i: int) -> tuple[float, float]:
        """Motor-space ``(position, velocity)`` of motor ``i`` (unwrapped)."""
        scale, qadr, dof, offset = self._map[i]
        return scale * (float(self.data.qpos[qadr]) - offset), scale * float(self.data.qvel[dof])

    def _step(self) -> None:
        tau = self._tau
        for i, m in enumerate(self.motors):
            p, v = self._motor_state(i)
            tau[i] = self._map[i][0] * m.torque(p, v)
        self.plant.step_torque(tau)
        self._steps += 1

    def advance(self, steps: int = 1) -> None:
        """Step physics ``steps`` times under the motors' current commands (lockstep hosts)."""
        with self._lock:
            for _ in range(steps):
                self._step()

    # -- inspection ---------------------------------------------------------------------------

    def motor(self, key: str | int) -> EmulatedMotor:
        try:
            return self._by_key[key]
        except KeyError:
            raise EmulatorError(f"no emulated motor {key!r}; joints {[j.name for j in self.joints]}, "
                                f"can_ids {[j.can_id for j in self.joints]}") from None

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def sim_time(self) -> float:
        """Simulated time [s] since the start."""
        return self._steps * self.dt

    def joint_positions(self) -> np.ndarray:
        """True joint positions ``(n,)`` [rad], configured order."""
        with self._lock:
            return self.data.qpos[self._qadr].copy()

    def joint_velocities(self) -> np.ndarray:
        with self._lock:
            return self.data.qvel[self._dof].copy()

    def joint_torques(self) -> np.ndarray:
        """Joint torques ``(n,)`` [N·m] the motors apply now."""
        with self._lock:
            return np.array([d * g * m.torque_applied
                             for d, g, m in zip(self._direction, self._gear, self.motors, strict=True)])

    def true_parameters(self) -> tuple[list[str], np.ndarray]:
        """The truth for scoring: the arm's parameters (payload merged into its body) and, with a
        payload, its own 10 parameters as ``payload.*``."""
        from sysid_ros.core.model.robot import BODY_FIELDS
        from sysid_ros.core.sim.synthetic import true_parameters

        names = list(self.model.param_names)
        values = true_parameters(self.model, self.payload)
        if self.payload is not None:
            names += [f"payload.{f}" for f in BODY_FIELDS]
            values = np.concatenate([values, self.payload.params])
        return names, np.asarray(values, dtype=float)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, poll: float = 0.001) -> bool:
        """Poll ``predicate`` until true or ``timeout`` [s] passes (for tests and hosts)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if predicate():
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

    # -- fault injection ----------------------------------------------------------------------

    def inject_overtemperature(self, key: str | int, kind: Literal["mosfet", "coil"] = "mosfet") -> None:
        with self._lock:
            m = self.motor(key)
            if kind == "mosfet":
                m.t_mos = OVER_TEMPERATURE_C + 5.0
                m.fault(MotorState.MOSFET_OVER_TEMP)
            elif kind == "coil":
                m.t_rotor = OVER_TEMPERATURE_C + 10.0
                m.fault(MotorState.COIL_OVER_TEMP)
            else:
                raise EmulatorError(f"over-temperature kind must be 'mosfet' or 'coil', got {kind!r}")

    def cool_down(self, key: str | int) -> None:
        with self._lock:
            m = self.motor(key)
            m.t_mos = m.t_rotor = AMBIENT_C

    def inject_state(self, key: str | int, state: MotorState | int) -> None:
        with self._lock:
            self.motor(key).fault(MotorState(state))

    def inject_comm_loss(self, key: str | int) -> None:
        with self._lock:
            self.motor(key).comm_lost = True

    def restore_comm(self, key: str | int) -> None:
        with self._lock:
            self.motor(key).comm_lost = False

    def drop_replies(self, key: str | int, count: int) -> None:
        with self._lock:
            self.motor(key).drop_next = int(count)

    def drop_fraction(self, key: str | int, fraction: float, seed: int = 0) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise EmulatorError(f"fraction must be in [0, 1], got {fraction}")
        with self._lock:
            m = self.motor(key)
            m.drop_probability = float(fraction)
            m._rng.seed(seed)

    def inject_bus_off(self) -> None:
        with self._lock:
            if not self.bus_off:
                self.bus_off = True
                self._send(BUS_OFF_ERROR_ID, bytes(8), error=True)

    def clear_bus_off(self) -> None:
        with self._lock:
            self.bus_off = False

    def clear_faults(self) -> None:
        """Remove every injection (comm loss, drops, bus-off, temperatures); latched motor states
        stay until the host sends CLEAR_ERROR."""
        with self._lock:
            self.bus_off = False
            for m in self.motors:
                m.comm_lost, m.drop_next, m.drop_probability = False, 0, 0.0
                m.t_mos = m.t_rotor = AMBIENT_C

    def host_bus(self, bus: can.BusABC) -> can.BusABC:
        """``bus`` (the host's) wrapped so that ``send()`` raises ENOBUFS while bus-off."""
        return _BusOffAwareBus(bus, self)


class _BusOffAwareBus(can.BusABC):
    """A host bus that fails like SocketCAN while the emulator is bus-off (nobody acknowledges):
    ``send()`` raises ``CanOperationError`` with ``error_code=105`` (ENOBUFS)."""

    def __init__(self, inner: can.BusABC, emulator: MotorEmulator) -> None:
        self._inner = inner
        self._emulator = emulator
        self.channel_info = f"bus-off-aware {getattr(inner, 'channel_info', '')}"
        super().__init__(channel=getattr(inner, "channel", None))

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        if self._emulator.bus_off:
            raise can.CanOperationError("Failed to transmit: [Errno 105] No buffer space available",
                                        error_code=errno.ENOBUFS)
        self._inner.send(msg, timeout)

    def recv(self, timeout: float | None = None) -> can.Message | None:
        """The inner bus's next frame (its own filters apply; no second layer on the hot path)."""
        return self._inner.recv(timeout)

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        return self._inner.recv(timeout), False

    def shutdown(self) -> None:
        super().shutdown()
        self._inner.shutdown()
