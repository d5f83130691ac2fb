"""The Damiao bridge without ROS: register handshake, enable/disable with confirmation, and the
control loop (latest command → clamped MIT frames → every reply within a deadline → joint state),
with the fail-safe reactions of :mod:`sysid_ros.hardware.safety`.

Life cycle (mirrors the ROS lifecycle node that wraps it)::

    Bridge(config) ─configure()─► configured ─activate()─► active (loop thread running)
          ▲                          │  ▲                       │
          └──────── cleanup() ◄──────┘  └──── deactivate() ◄────┘         shutdown(): from anywhere

* ``configure``: open the bus; per motor, disable, read PMAX/VMAX/TMAX and check them against the
  model table (mismatch: error or warning, ``limit_mismatch``), write CTRL_MODE = MIT and read it
  back, write TIMEOUT (the motor's own CAN watchdog) and read it back.
* ``activate``: read every motor's state (refresh frame), resolve whole shaft turns against the
  joint limits (refused if a joint is outside or ambiguous), clear old fault states, enable every
  motor and confirm (state 1 from each), start the loop thread holding the measured pose.
* ``deactivate`` / ``cleanup`` / ``shutdown`` (and any exception in the loop, and ``atexit``):
  disable every motor and confirm (state ≠ 1 in each reply, a few retries).
* ``clear_fault``: after a trip (configured, not active), acknowledge it: clear-error frames to
  the motors, their states read back; ``activate`` is refused until then.

Each cycle of the loop turns the latest joint targets into one MIT frame per motor
(:class:`~.motor_frames.MotorFrames`: clamping, joint map, unwrapping, codec), sends them and
collects the replies until ``reply_deadline × period``. Faults trip the bridge (one
:class:`~.safety.Trip`): the disable frames go out in the same cycle the fault is seen, the trip
is reported once. "Disabled" is said only when every motor's reply confirms it; until then the
motors are reported as possibly enabled (ERROR) and the disable frames are sent again and again,
with a back-off from one control period up to :data:`DISABLE_RETRY_CAP` periods, whatever the bus
does (a bus this bridge opened is re-opened after :data:`REOPEN_AFTER` failed rounds): the disable
path never gives up, after a trip, after ``deactivate`` (a keeper thread) and until ``cleanup``.
Once confirmed, the motors are only polled (refresh frames at ``diagnostics_rate``, for the
diagnostics); no joint states are produced while no motor is enabled. The trip stays latched:
``activate`` is refused until ``clear_fault``.

Time base: ``"wall"`` (hardware) stamps each cycle with the wall clock and plays a replay file by
the monotonic clock; ``"rounds"`` counts MIT rounds × period instead — for an emulator in lockstep,
whose physics advances exactly one period per command round whatever the host's timing, so the
stamps and the replay stay consistent with the emulated physics (and a reply is awaited up to
50 ms: on a loaded host the emulator answers late, but its physics waits for the round too).

Threads: the loop runs in its own thread on a monotonic schedule; ``submit_command`` may be called
from any thread (the latest command wins); ``on_sample``/``on_trip`` callbacks run in the loop
thread and must be quick.
"""

from __future__ import annotations

import atexit
import gc
import logging
import math
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import can
import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_config import BridgeConfig
from sysid_ros.hardware.bridge_replay import ReplaySource, load_replay
from sysid_ros.hardware.bridge_timing import LoopTiming, TimingSummary
from sysid_ros.hardware.codec import REGISTER_REQUEST_ID as REGISTER_ID
from sysid_ros.hardware.codec import (
    TIMEOUT_UNIT_S,
    CodecError,
    CtrlMode,
    Feedback,
    MitLimits,
    MotorState,
    Register,
    Special,
    check_limits,
    command_arbitration_id,
    decode_feedback,
    describe,
    parse_register_reply,
    read_register_frame,
    refresh_frame,
    special_frame,
    write_register_frame,
)
from sysid_ros.hardware.motor_frames import MotorFrames, Reading
from sysid_ros.hardware.safety import (
    CommandError,
    CommandLimits,
    CommandShaper,
    JointTargets,
    ParsedCommand,
    Trip,
    TripKind,
    Watchdog,
    WatchdogMode,
    parse_command,
)
from sysid_ros.hardware.transport import BusError, Transport

__all__ = ["Bridge", "BridgeError", "BridgeStatus", "HandshakeError", "JointSample", "MotorStatus"]

log = logging.getLogger(__name__)

REGISTER_TIMEOUT = 0.05   # [s] wait for one register reply
REGISTER_TRIES = 3
CONFIRM_TIMEOUT = 0.03    # [s] wait for the replies to one round of enable/disable frames
CONFIRM_TRIES = 4
DISABLE_RETRY_CAP = 4     # [control periods] longest wait between two disable rounds while unconfirmed
REOPEN_AFTER = 5          # failed disable rounds (bus errors) before a bus the bridge opened is re-opened
UNCONFIRMED_REPORT = 1.0  # [s] between two "still not confirmed" reports
SHUTDOWN_DISABLE_TIME = 1.0  # [s] cleanup/shutdown keep re-sending disable frames this long at most
LOCKSTEP_REPLY_TIMEOUT = 0.05  # [s] reply deadline with timebase "rounds" (a lockstep emulator)

_STATES = {int(s): s for s in MotorState}
_ENABLED = int(MotorState.ENABLED)
_NAN = math.nan


class BridgeError(SysIdError):
    """The bridge cannot do what was asked (not configured, motors not answering...)."""


class HandshakeError(BridgeError):
    """A motor failed the configure-time register handshake."""


@dataclass(frozen=True)
class JointSample:
    """One cycle's joint-space state, each ``(n,)``: position [rad], velocity [rad/s], effort
    (measured torque) [N·m]; NaN for a motor that did not reply this cycle. ``stamp`` is wall-clock
    time [s] at the start of the cycle, ``fresh (n,)`` which motors replied."""

    stamp: float
    cycle: int
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    fresh: np.ndarray


@dataclass
class MotorStatus:
    """What is known about one motor (for diagnostics)."""

    joint: str
    motor: str
    can_id: int
    master_id: int
    limits: MitLimits | None = None
    state: MotorState | None = None
    t_mos: int = 0
    t_rotor: int = 0
    replies: int = 0
    missed_consecutive: int = 0
    missed_total: int = 0
    late: int = 0
    bad_frames: int = 0

    @property
    def state_text(self) -> str:
        return "no reply yet" if self.state is None else describe(self.state)


@dataclass
class BridgeStatus:
    """A snapshot for diagnostics."""

    phase: str
    mode: str
    motors: list[MotorStatus]
    timing: TimingSummary | None
    trip: Trip | None
    counters: dict[str, int] = field(default_factory=dict)
    replay: str = ""
    disabled: bool = False  # every motor confirmed disabled (since the last enable)


class Bridge:
    """Damiao motors over one python-can bus (see the module docstring)."""

    def __init__(self, config: BridgeConfig, *, bus: can.BusABC | None = None,
                 on_sample: Callable[[JointSample], None] | None = None,
                 on_trip: Callable[[Trip], None] | None = None,
                 on_replay_done: Callable[[], None] | None = None,
                 logger: logging.Logger | None = None, timing_window: int = 5000,
                 keep_all_periods: bool = False, timebase: Literal["wall", "rounds"] = "wall") -> None:
        if timebase not in ("wall", "rounds"):
            raise BridgeError(f"timebase must be 'wall' or 'rounds', got {timebase!r}")
        self.config = config
        self.timebase = timebase
        self.log = logger or log
        self._external_bus = bus
        self.on_sample = on_sample
        self.on_trip = on_trip
        self.on_replay_done = on_replay_done
        joints = config.joints
        self.n = len(joints)
        self.names = config.names
        self.limits = CommandLimits.from_joints(joints)
        rates = (np.full(self.n, config.max_position_rate) if config.max_position_rate > 0
                 else self.limits.velocity)
        self.shaper = CommandShaper(rates, config.enable_ramp_time)
        self.motors = [MotorStatus(j.name, j.motor, j.can_id, j.master_id) for j in joints]
        self._by_master = {j.master_id: i for i, j in enumerate(joints)}
        self._mit_ids = [command_arbitration_id(j.can_id, CtrlMode.MIT) for j in joints]
        self.transport: Transport | None = None
        self.phase = "unconfigured"
        self.trip: Trip | None = None
        self.timing = LoopTiming(timing_window, keep_all=keep_all_periods)
        self.watchdog = Watchdog(config.command_timeout, config.hold_timeout)
        self.counters = {"commands": 0, "rejected": 0, "unknown_names": 0, "clamped": 0,
                         "unknown_frames": 0, "ignored_commands": 0}
        self._lock = threading.Lock()          # guards targets and counters shared with callers
        self._bus_lock = threading.RLock()     # one thread talks on the bus at a time
        self._commanded: JointTargets | None = None
        self._hold: JointTargets | None = None
        self._mode = WatchdogMode.IDLE
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._replay: ReplaySource | None = None
        self._replay_start = 0.0
        self._replay_reported = False
        self.frames: MotorFrames | None = None  # the hot path, at the registers' limits (configure)
        self._cycle = 0
        self._bus_dead = False
        self._atexit = False
        self._disabled = False  # every motor confirmed disabled since the last enable
        self._retry_interval = 0.0   # [s] current back-off between disable rounds
        self._retry_failures = 0     # disable rounds not confirmed since the first attempt
        self._unconfirmed_since = 0.0  # [s, monotonic] first unconfirmed disable
        self._unconfirmed_report = -math.inf  # [s, monotonic] last "still not confirmed" report
        self._keeper: threading.Thread | None = None  # re-sends disable frames after deactivate
        self._keeper_stop = threading.Event()
        self._last_frames: list[bytes] = [b""] * self.n  # last MIT payload sent per motor
        self._epoch = 0.0                         # wall time of activation [s]
        self._rounds = 0                          # MIT rounds sent since activation

    # ------------------------------------------------------------------------- life cycle
    def configure(self) -> None:
        """Open the bus and run the register handshake on every motor (:class:`HandshakeError`,
        :class:`BusError` on failure; the bus is closed again then)."""
        if self.phase != "unconfigured":
            raise BridgeError(f"configure() needs an unconfigured bridge, it is {self.phase}")
        self.transport = Transport(self.config, self._external_bus)
        self._bus_dead = False
        if not self._atexit:
            atexit.register(self.shutdown)
            self._atexit = True
        try:
            self._send_special_all(Special.DISABLE)  # never start with a motor left enabled
            self._collect_states(CONFIRM_TIMEOUT)
            self.transport.drain()
            for i in range(self.n):
                self._handshake(i)
        except BaseException:
            self.transport.close()
            self.transport = None
            raise
        self.frames = MotorFrames(self.config.joints, [m.limits for m in self.motors])
        self.phase = "configured"
        motors = ", ".join(f"{m.joint} {m.motor} 0x{m.can_id:02X}" for m in self.motors)
        self.log.info("configured %d motors on %s:%s (%s)", self.n, self.config.interface,
                      self.config.channel, motors)

    def activate(self) -> None:
        """Check the pose, enable every motor (confirmed) and start the control loop."""
        if self.phase != "configured":
            raise BridgeError(f"activate() needs a configured bridge, it is {self.phase}")
        if self.trip is not None:
            raise BridgeError(f"a fault is latched ({self.trip}): check the robot, then acknowledge it "
                              "with clear_fault (the ~/clear_fault service) before activating")
        if not self._disabled and self._keeper is not None:
            raise BridgeError("the motors' disable is not confirmed yet: refusing to enable them")
        self._stop_keeper()
        self._bus_dead = False
        replies = self._poll_all()
        missing = [self.names[i] for i in range(self.n) if replies[i] is None]
        if missing:
            raise BridgeError(f"motors of {missing} do not answer a state request")
        faulted = [i for i in range(self.n) if replies[i].state.is_fault]
        if faulted:  # an old fault (e.g. comm lost while the host was away): clear it once
            self.log.warning("clearing old fault states: %s",
                             ", ".join(f"{self.names[i]} {describe(replies[i].state)}" for i in faulted))
            for i in faulted:
                self._send(self._mit_ids[i], special_frame(Special.CLEAR_ERROR))
            self._collect_states(CONFIRM_TIMEOUT)
            replies = self._poll_all()
            still = [f"{self.names[i]} {describe(replies[i].state)}" for i in range(self.n)
                     if replies[i] is None or replies[i].state.is_fault]
            if still:
                raise BridgeError(f"motors stay in a fault state after clear-error: {still}")
        turns = self.frames.start([_reading(r) for r in replies], margin=self.config.startup_limit_margin)
        if np.any(turns):
            self.log.warning("motor positions shifted by whole turns to fit the joint limits: %s",
                             {self.names[i]: int(k) for i, k in enumerate(turns) if k})
        start = np.array(self.frames.position)
        hold = JointTargets.hold(np.clip(start, self.limits.lower, self.limits.upper),
                                 self.limits.kp_default, self.limits.kd_default)
        if self.config.replay_file:
            traj = load_replay(self.config.replay_file, self.names, [j.motor for j in self.config.joints])
            self._replay = ReplaySource(traj, self.names, hold.position, self.limits,
                                        ramp_time=self.config.replay_ramp_time)
            self._replay_reported = False
        with self._lock:
            self._commanded = hold.copy()
            self._hold = hold
            self.watchdog.reset()
            self._mode = WatchdogMode.IDLE
        _freeze_heap()  # before enabling: the collection takes ~10 ms with no command going out
        self._enable_all()
        self.timing.reset()
        self._stop.clear()
        self.phase = "active"
        self._replay_start = time.monotonic()
        self._epoch = time.time()
        self._rounds = 0
        self.shaper.start(hold.position, 0.0)  # control time 0 = now
        self._thread = threading.Thread(target=self._run, name="damiao_bridge_loop", daemon=True)
        self._thread.start()
        self.log.info("active: %d motors enabled at %s rad, loop at %.0f Hz%s", self.n,
                      np.array2string(start, precision=3), self.config.rate,
                      f", replaying {self.config.replay_file} ({self._replay.duration:.1f} s)"
                      if self._replay else "")

    def deactivate(self) -> list[str]:
        """Stop the loop and disable every motor; returns joints whose disable was not confirmed
        (a keeper thread then goes on sending disable frames until they confirm)."""
        if self.phase != "active":
            return []
        self._stop_loop()
        self.phase = "configured"
        if self.trip is not None and self._disabled:
            return []  # the trip disabled them (confirmed); the loop only polled since
        unconfirmed = self.disable_all(reason="deactivate")
        if unconfirmed:
            self._start_keeper()
        return unconfirmed

    def cleanup(self) -> None:
        """Disable (if active, or not yet confirmed: re-sent for up to
        :data:`SHUTDOWN_DISABLE_TIME`) and close the bus."""
        self.deactivate()
        self._stop_keeper()
        if self.transport is not None:
            if self.phase == "configured" and not self._disabled:
                deadline = time.monotonic() + SHUTDOWN_DISABLE_TIME
                unconfirmed = self.disable_all(reason="cleanup")
                self._retry_failures = 0
                while not self._disabled and time.monotonic() < deadline:
                    time.sleep(self._retry_disable("cleanup, retried"))
                if not self._disabled:
                    self.log.error("closing the bus with the disable NOT confirmed after %g s of retries "
                                   "(%s did not confirm the first round): the motors may be ENABLED "
                                   "until their own CAN timeout (%s s) stops them; cut the motor power",
                                   SHUTDOWN_DISABLE_TIME, unconfirmed, self.config.motor_timeout or "off")
            self.transport.close()
            self.transport = None
        self.phase = "unconfigured"

    def clear_fault(self) -> str:
        """Acknowledge a trip (configured, not active): clear-error frames to every motor, their
        states read back. Raises :class:`BridgeError` naming the motors that still report a fault
        (the trip stays latched then). Returns the motors' states."""
        if self.phase != "configured":
            raise BridgeError(f"clear_fault needs a configured, inactive bridge, it is {self.phase}")
        if not self._disabled:
            unconfirmed = self.disable_all(reason="clear_fault")
            if unconfirmed:
                raise BridgeError(f"the disable of {unconfirmed} is not confirmed: cannot clear the fault")
        self._stop_keeper()
        try:
            self._send_special_all(Special.CLEAR_ERROR)
            self._collect_states(CONFIRM_TIMEOUT)
            replies = self._poll_all()
        except BusError as exc:
            raise BridgeError(f"clear_fault: {exc}") from exc
        bad = [f"{self.names[i]} {'no reply' if r is None else describe(r.state)}"
               for i, r in enumerate(replies) if r is None or r.state.is_fault]
        if bad:
            raise BridgeError(f"motors still report a fault after clear-error: {bad} (the fault stays "
                              "latched)")
        previous, self.trip = self.trip, None
        states = ", ".join(f"{m.joint} {m.state_text}" for m in self.motors)
        self.log.info("fault acknowledged%s: %s", f" ({previous})" if previous else "", states)
        return states

    def shutdown(self) -> None:
        """Disable every motor (confirmed) and close the bus, from any state; idempotent (also run
        at interpreter exit)."""
        try:
            self.cleanup()
        except BaseException as exc:  # the last line of defence: never raise from here
            self.log.error("shutdown: %s", exc)
        if self._atexit:
            atexit.unregister(self.shutdown)
            self._atexit = False
        self.phase = "finalized"

    # ------------------------------------------------------------------------- commands
    def submit_command(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float] = (),
                       effort: Sequence[float] = (), kp: Sequence[float] = (),
                       kd: Sequence[float] = ()) -> ParsedCommand:
        """Apply a command (by joint name; see :func:`~.safety.parse_command`). Raises
        :class:`~.safety.CommandError` for a refused command (counted) and :class:`BridgeError`
        while a replay drives the motors or the bridge is not active."""
        if self._replay is not None:
            with self._lock:
                self.counters["ignored_commands"] += 1
            raise BridgeError("a trajectory file is being replayed: MotorCommand messages are ignored")
        if self.phase != "active" or self._commanded is None:
            with self._lock:
                self.counters["ignored_commands"] += 1
            raise BridgeError(f"commands are accepted only while active (the bridge is {self.phase})")
        with self._lock:
            try:
                parsed = parse_command(names, position, velocity, effort, kp, kd, joint_names=self.names,
                                       previous=self._commanded, limits=self.limits)
            except CommandError:
                self.counters["rejected"] += 1
                raise
            self.counters["commands"] += 1
            self.counters["unknown_names"] += len(parsed.unknown_names)
            if len(parsed.unknown_names) < len(names):
                self._commanded = parsed.targets
                self.watchdog.feed(time.monotonic())
        return parsed

    # ------------------------------------------------------------------------- status
    def status(self) -> BridgeStatus:
        replay = ""
        if self._replay is not None:
            t = self._control_time(time.monotonic())
            replay = "done" if self._replay.done(t) else f"{t:.1f}/{self._replay.duration:.1f} s"
        with self._lock:
            counters = dict(self.counters)
        return BridgeStatus(phase=self.phase, mode=self._mode.value, motors=[
            MotorStatus(**vars(m)) for m in self.motors], timing=self.timing.summary(), trip=self.trip,
            counters=counters, replay=replay, disabled=self._disabled)

    def last_frame(self, joint: int) -> bytes:
        """The MIT payload sent to a joint's motor in the latest cycle."""
        return self._last_frames[joint]

    @property
    def cycles(self) -> int:
        """Control cycles run since the bridge was made (joint states published)."""
        return self._cycle

    @property
    def replay(self) -> ReplaySource | None:
        """The trajectory file being replayed (its ramp, duration and targets over time), if any."""
        return self._replay

    # ------------------------------------------------------------------------- bus helpers
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
        m.state, m.t_mos, m.t_rotor = _STATES[r[0]], r[4], r[5]
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

    def disable_all(self, *, reason: str = "", tries: int = CONFIRM_TRIES, quiet: bool = False) -> list[str]:
        """Send disable to every motor, then re-send to those whose reply does not confirm it
        (state ≠ 1), ``tries`` rounds in all. Returns the joints not confirmed. Never raises: a bus
        error ends this attempt (``_bus_dead`` says so until a send goes through again); the
        callers try again (:meth:`_retry_disable`). ``quiet``: no log line when unconfirmed (a
        retry; its caller reports)."""
        if self.transport is None:
            return list(self.names)
        pending = np.ones(self.n, dtype=bool)
        try:
            self.transport.drain()  # replies older than the first disable frame prove nothing
            for _ in range(tries):
                for i in np.flatnonzero(pending):
                    self._send(self._mit_ids[i], special_frame(Special.DISABLE))
                self._bus_dead = False
                for i, fb in enumerate(self._collect_states(CONFIRM_TIMEOUT, pending)):
                    if fb is not None and fb.state != MotorState.ENABLED:
                        pending[i] = False
                if not pending.any():
                    break
        except BusError as exc:
            self._bus_dead = True
            self._disabled = False
            if not quiet:
                self.log.error("disabling the motors (%s) failed on the bus, the motors may be ENABLED: %s",
                               reason, exc)
            return [self.names[i] for i in np.flatnonzero(pending)]
        unconfirmed = [self.names[i] for i in np.flatnonzero(pending)]
        self._disabled = not unconfirmed
        if unconfirmed and not quiet:
            self.log.error("disable (%s) NOT confirmed by %s: they may be ENABLED", reason, unconfirmed)
        elif not unconfirmed:
            self.log.info("all %d motors disabled (%s), confirmed: %s", self.n, reason,
                          ", ".join(f"{m.joint} {m.state_text.split(' ')[0]}" for m in self.motors))
        return unconfirmed

    def _retry_disable(self, reason: str) -> float:
        """One more round of disable frames while the disable is not confirmed; the bus re-opened
        after :data:`REOPEN_AFTER` failed rounds (if this bridge opened it). Returns the wait [s]
        before the next round (doubling from one period up to :data:`DISABLE_RETRY_CAP` periods)."""
        now = time.monotonic()
        if self._retry_failures == 0:
            self._unconfirmed_since, self._retry_interval = now, self.config.period
        unconfirmed = self.disable_all(reason=reason, tries=1, quiet=True)
        if not unconfirmed:
            self.log.error("ALL MOTORS DISABLED (confirmed after %d more rounds, %.2f s): %s",
                           self._retry_failures + 1, now - self._unconfirmed_since, reason)
            self._retry_failures = 0
            return self.config.period
        self._retry_failures += 1
        if now - self._unconfirmed_report >= UNCONFIRMED_REPORT:
            self._unconfirmed_report = now
            self.log.error("MOTORS MAY BE ENABLED: disable not confirmed by %s for %.2f s (%d rounds, %s); "
                           "still sending disable frames", unconfirmed, now - self._unconfirmed_since,
                           self._retry_failures, "bus failing" if self._bus_dead else "no confirming reply")
        if self._bus_dead and self._retry_failures % REOPEN_AFTER == 0:
            self._reopen_bus()
        self._retry_interval = min(2.0 * self._retry_interval, DISABLE_RETRY_CAP * self.config.period)
        return self._retry_interval

    def _reopen_bus(self) -> None:
        """Close and open again a bus this bridge opened (an adapter unplugged and back, a
        bus-off that needs a restart); a bus handed in is the caller's to restore."""
        if self.transport is None or not self.transport.owned:
            return
        try:
            with self._bus_lock:
                self.transport.reopen()
            self.log.warning("CAN bus %s:%s re-opened", self.config.interface, self.config.channel)
        except (BusError, can.CanError, OSError) as exc:
            self.log.debug("re-opening the CAN bus failed: %s", exc)

    def _start_keeper(self) -> None:
        """After ``deactivate`` with the disable unconfirmed: a thread that re-sends disable frames
        until every motor confirms (or ``cleanup``)."""
        if self._keeper is not None:
            return
        self._keeper_stop.clear()
        self._retry_failures = 0

        def keep() -> None:
            while not self._keeper_stop.is_set() and not self._disabled:
                self._keeper_stop.wait(self._retry_disable("deactivate, retried"))

        self._keeper = threading.Thread(target=keep, name="damiao_bridge_disable", daemon=True)
        self._keeper.start()

    def _stop_keeper(self) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            self._keeper_stop.set()
            keeper.join(timeout=2.0)

    # ------------------------------------------------------------------------- the loop
    def _stop_loop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
            if thread.is_alive():
                self.log.error("the control loop did not stop within 2 s")
        self._thread = None

    def _run(self) -> None:
        period = self.config.period
        next_start = time.monotonic()
        try:
            while not self._stop.is_set():
                start = time.monotonic()
                if self.trip is None:
                    self._cycle_once(start)
                    work = time.monotonic() - start
                    next_start += period
                else:
                    next_start = start + self._after_trip(start)
                    work = time.monotonic() - start
                now = time.monotonic()
                skipped = 0
                if now > next_start:  # overran: skip the lost slots, keep the phase
                    skipped = int((now - next_start) // period) + 1
                    next_start += skipped * period
                if self.trip is None:
                    self.timing.cycle(start, work, period, skipped)
                    _sleep_until(next_start)
                else:
                    self._stop.wait(max(next_start - time.monotonic(), 0.0))
        except BaseException as exc:  # an exception in the loop: motors off first, then report
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.log.error("control loop failed: %s\n%s", text, traceback.format_exc())
            self._trip(Trip(TripKind.EXCEPTION, "", f"exception in the control loop: {text}"))

    def _control_time(self, now: float) -> float:
        """Seconds since activation: monotonic wall time, or MIT rounds sent × period."""
        if self.timebase == "rounds":
            return self._rounds * self.config.period
        return now - self._replay_start

    def _targets(self, now: float) -> JointTargets:
        """The joint-space targets of this cycle (watchdog applied)."""
        if self._replay is not None:
            t = self._control_time(now)
            if self._replay.done(t) and not self._replay_reported:
                self._replay_reported = True
                self.log.info("replay of %s done (%.1f s); holding the last pose", self.config.replay_file, t)
                if self.on_replay_done:
                    self.on_replay_done()
            return self._replay.targets(t)
        with self._lock:
            mode = self.watchdog.mode(now)
            if mode == WatchdogMode.HOLD and self._mode != WatchdogMode.HOLD:
                measured = np.array(self.frames.position)
                pose = np.where(np.isfinite(measured), measured, self._commanded.position)
                self._hold = JointTargets.hold(pose, self.limits.kp_default, self.limits.kd_default)
                self.log.warning("no MotorCommand for %.3f s: holding the measured pose with damping",
                                 self.watchdog.silence(now))
            elif mode == WatchdogMode.TRACK and self._mode == WatchdogMode.HOLD:
                self.log.info("commands are back: tracking again")
            self._mode = mode
            if mode == WatchdogMode.TRACK:
                return self._commanded
            return self._hold

    def _cycle_once(self, start: float) -> None:
        stamp = time.time() if self.timebase == "wall" else self._epoch + self._control_time(start)
        targets = self._targets(start)
        if self._mode == WatchdogMode.DISABLE:
            cfg = self.config
            self._trip(Trip(TripKind.WATCHDOG, "",
                            f"no MotorCommand for {self.watchdog.silence(start):.2f} s (command_timeout "
                            f"{cfg.command_timeout} s + hold_timeout {cfg.hold_timeout} s)"))
            return
        targets = self.shaper.shape(targets, self._control_time(start), self.config.period)
        frames, clamped = self.frames.encode(targets)
        if clamped:
            with self._lock:
                self.counters["clamped"] += 1
        try:
            trip = self._check_faults(self._drain_late(), missed=False)
            if trip is not None:  # a late reply (previous cycle) already shows a fault
                self._trip(trip)
                return
            for i, frame in enumerate(frames):
                self._send(self._mit_ids[i], frame)
            self._rounds += 1
            wait = self.config.reply_deadline * self.config.period
            if self.timebase == "rounds":  # virtual time: wait for late replies, they cost no physics
                wait = max(wait, LOCKSTEP_REPLY_TIMEOUT)
            replies = self._collect_cycle(start + wait)
        except BusError as exc:
            self._trip(Trip(TripKind.BUS_ERROR, "", str(exc)))
            return
        self._last_frames = frames
        self.frames.update(replies)
        self._cycle += 1
        if self.on_sample is not None:
            self.on_sample(self._sample(stamp, replies))
        trip = self._check_faults(replies)
        if trip is not None:
            self._trip(trip)

    def _drain_late(self) -> list[Reading | None]:
        """Frames that arrived after the previous cycle's deadline: counted as late (they did not
        count as replies), their states still checked for faults."""
        got: list[Reading | None] = [None] * self.n
        while (msg := self.transport.recv(0.0)) is not None:
            i = self._by_master.get(msg.arbitration_id)
            if i is None:
                self.counters["unknown_frames"] += 1
                continue
            r = self._read(i, msg.data)
            if r is not None:
                self.motors[i].late += 1
                got[i] = r
        return got

    def _collect_cycle(self, deadline: float) -> list[Reading | None]:
        """Every motor's reply to this cycle's frames, until all came or ``deadline`` [s,
        monotonic]; ``None`` for a motor that did not reply (counted as missed)."""
        got: list[Reading | None] = [None] * self.n
        pending = self.n
        recv = self.transport.recv
        by_master = self._by_master
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            msg = recv(remaining)
            if msg is None:
                break
            i = by_master.get(msg.arbitration_id)
            if i is None:
                self.counters["unknown_frames"] += 1
                continue
            r = self._read(i, msg.data)
            if r is None:
                continue
            if got[i] is None:
                pending -= 1
            got[i] = r
        for i, m in enumerate(self.motors):
            if got[i] is None:
                m.missed_consecutive += 1
                m.missed_total += 1
            else:
                m.missed_consecutive = 0
        return got

    def _sample(self, stamp: float, replies: Sequence[Reading | None]) -> JointSample:
        fresh = [r is not None for r in replies]
        position = [q if f else _NAN for q, f in zip(self.frames.position, fresh, strict=True)]
        return JointSample(stamp, self._cycle, np.array(position), np.array(self.frames.velocity),
                           np.array(self.frames.effort), np.array(fresh))

    def _check_faults(self, replies: Sequence[Reading | None], *, missed: bool = True) -> Trip | None:
        for i, r in enumerate(replies):
            m = self.motors[i]
            if r is not None and r[0] != _ENABLED:
                state = _STATES[r[0]]
                why = describe(state) if state.is_fault else \
                    "0x0 disabled while it should be enabled (reset or power cut?)"
                return Trip(TripKind.MOTOR_FAULT, m.joint,
                            f"motor 0x{m.can_id:02X} reports {why}; MOSFET {r[4]} °C, "
                            f"rotor {r[5]} °C")
            if missed and m.missed_consecutive > self.config.max_missed_replies:
                return Trip(TripKind.MISSED_REPLIES, m.joint,
                            f"motor 0x{m.can_id:02X} missed {m.missed_consecutive} replies in a row (limit "
                            f"{self.config.max_missed_replies}): cable, power or CAN ID problem")
        return None

    def _trip(self, trip: Trip) -> None:
        """Disable everything now (the same cycle), then report once: "disabled" only if every
        motor confirmed it, else "may be enabled" (the loop then re-sends disable frames until
        they confirm, :meth:`_after_trip`)."""
        if self.trip is not None:
            return
        self.trip = trip
        with self._lock:
            self._mode = WatchdogMode.DISABLE
        # after a bus error one round only here: the retries (with back-off) follow in the loop
        tries = 1 if trip.kind == TripKind.BUS_ERROR else CONFIRM_TRIES
        self._retry_failures = 0
        unconfirmed = self.disable_all(reason=trip.kind.value, tries=tries, quiet=True)
        if unconfirmed:
            self._unconfirmed_report = time.monotonic()
            self.log.error("MOTORS MAY BE ENABLED: %s; disable not confirmed by %s (%s): sending disable "
                           "frames until every motor confirms", trip, unconfirmed,
                           "bus failing" if self._bus_dead else "no confirming reply")
        else:
            self.log.error("ALL MOTORS DISABLED (confirmed): %s", trip)
        if self.on_trip is not None:
            try:
                self.on_trip(trip)
            except Exception as exc:  # a broken reporter must not hide the trip
                self.log.error("on_trip callback failed: %s", exc)

    def _after_trip(self, start: float) -> float:
        """The loop after a trip; returns the wait [s] until its next call. While the disable is
        not confirmed: one more disable round (back-off). Then: read the motors' states (refresh
        frames, no commands) at ``diagnostics_rate`` for the diagnostics; no joint states (no
        motor is enabled). A motor reporting enabled again starts the disable rounds again."""
        if not self._disabled:
            return self._retry_disable(f"after the trip: {self.trip.kind.value}")
        if self.transport is None:
            return 1.0 / self.config.diagnostics_rate
        try:
            for m in self.motors:
                self._send(REGISTER_ID, refresh_frame(m.can_id))
            replies = self._collect_states(min(0.02, 0.5 / self.config.diagnostics_rate))
        except BusError as exc:
            if not self._bus_dead:
                self.log.warning("polling the disabled motors failed: %s", exc)
            self._bus_dead = True
            return 1.0 / self.config.diagnostics_rate
        self._bus_dead = False
        enabled = [self.names[i] for i, r in enumerate(replies)
                   if r is not None and r.state == MotorState.ENABLED]
        if enabled:  # should never happen; disable again (until confirmed)
            self.log.error("MOTORS MAY BE ENABLED: %s report enabled after the trip: disabling again",
                           enabled)
            self._disabled, self._retry_failures = False, 0
            return 0.0
        return 1.0 / self.config.diagnostics_rate


def _freeze_heap() -> None:
    """Collect once, then move every object alive now out of the garbage collector's reach
    (``gc.freeze``), so that a full collection during the control loop looks only at what was
    allocated since activation instead of the whole start-up heap (models, MuJoCo, rclpy): a full
    pass over the start-up heap takes ~11 ms (11 missed cycles at 1 kHz), after the freeze a few
    µs. The loop allocates no reference cycles (its garbage goes by reference counting), so the
    frozen objects are the long-lived ones anyway. Process-wide and idempotent."""
    gc.collect()
    gc.freeze()


def _reading(fb: Feedback) -> Reading:
    return (int(fb.state), fb.position, fb.velocity, fb.torque, fb.t_mos, fb.t_rotor)


def _sleep_until(deadline: float) -> None:
    """Sleep until ``deadline`` [s, monotonic]. No busy wait: the kernel wakes the thread some
    50 us late (timer slack), and a spinning thread would take the GIL from the others (emulator,
    executor) exactly when they have work."""
    remaining = deadline - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
