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
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal

import can
import numpy as np

from sysid_ros.hardware.bridge_config import BridgeConfig
from sysid_ros.hardware.bridge_disable import DisableKeeper
from sysid_ros.hardware.bridge_handshake import BusTalk, reading_of
from sysid_ros.hardware.bridge_loop import ControlLoop, freeze_heap
from sysid_ros.hardware.bridge_replay import ReplaySource, load_replay
from sysid_ros.hardware.bridge_timing import LoopTiming
from sysid_ros.hardware.bridge_types import (
    ACTIVATE_TIMEOUT,
    CONFIRM_TIMEOUT,
    SHUTDOWN_DISABLE_TIME,
    BridgeError,
    BridgeStatus,
    HandshakeError,
    JointSample,
    MotorStatus,
)
from sysid_ros.hardware.codec import CtrlMode, Special, command_arbitration_id, describe, special_frame
from sysid_ros.hardware.deadlines import Deadlines
from sysid_ros.hardware.motor_frames import MotorFrames
from sysid_ros.hardware.realtime import RealtimeGrant
from sysid_ros.hardware.safety import (
    CommandError,
    CommandLimits,
    CommandShaper,
    JointTargets,
    ParsedCommand,
    Trip,
    Watchdog,
    WatchdogMode,
    parse_command,
)
from sysid_ros.hardware.transport import BusError, Transport

__all__ = ["Bridge", "BridgeError", "BridgeStatus", "HandshakeError", "JointSample", "MotorStatus"]

log = logging.getLogger(__name__)


class Bridge(BusTalk, DisableKeeper, ControlLoop):
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
        self._motor_timeout = config.motor_timeout  # [s] in the motors' TIMEOUT registers
        self._started = threading.Event()         # the loop thread enabled the motors (or failed)
        self._start_error: BaseException | None = None
        self._stop_unconfirmed: list[str] | None = None  # the loop thread's disable on deactivate
        self.grant: RealtimeGrant | None = None    # the loop thread's scheduling
        self.deadlines: Deadlines | None = None    # sized at activate from the measured latency
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
        turns = self.frames.start([reading_of(r) for r in replies], margin=self.config.startup_limit_margin)
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
        freeze_heap()  # before enabling: the collection takes ~10 ms with no command going out
        # the loop thread asks for real-time scheduling, measures its latency, sizes the deadlines,
        # then enables the motors and goes straight on sending frames: no gap in which another
        # thread (the caller, an rclpy executor) would have to be scheduled for a frame to go out
        self._stop.clear()
        self._started.clear()
        self._start_error = None
        self._stop_unconfirmed = None
        self._thread = threading.Thread(target=self._loop_thread, name="damiao_bridge_loop", daemon=True)
        self._thread.start()
        if not self._started.wait(ACTIVATE_TIMEOUT):
            self._stop_loop()
            self.disable_all(reason="activate timed out")
            raise BridgeError(f"the control loop did not enable the motors within {ACTIVATE_TIMEOUT:g} s")
        if self._start_error is not None:
            self._stop_loop()
            raise self._start_error
        self.phase = "active"
        self.log.info("active: %d motors enabled at %s rad, loop at %.0f Hz%s", self.n,
                      np.array2string(start, precision=3), self.config.rate,
                      f", replaying {self.config.replay_file} ({self._replay.duration:.1f} s)"
                      if self._replay else "")

    def deactivate(self) -> list[str]:
        """Stop the loop and disable every motor; returns joints whose disable was not confirmed
        (a keeper thread then goes on sending disable frames until they confirm)."""
        if self.phase != "active":
            return []
        self._stop_loop()  # the loop thread sends the disable frames as it ends
        self.phase = "configured"
        if self.trip is not None and self._disabled:
            return []  # the trip disabled them (confirmed); the loop only polled since
        unconfirmed = self._stop_unconfirmed
        if unconfirmed is None:  # the loop thread did not (a trip, or it did not end in time)
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
            counters=counters, replay=replay, disabled=self._disabled, deadlines=self.deadlines,
            cycles=self._cycle)

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
