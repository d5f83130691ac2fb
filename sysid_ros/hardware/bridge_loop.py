"""The bridge's control loop: each cycle the latest targets (command watchdog or replay applied,
slew-limited) become one MIT frame per motor, the replies are collected until the reply deadline,
faults are checked and one joint sample is handed out. A mixin of
:class:`~sysid_ros.hardware.bridge.Bridge`."""

import gc
import math
import threading
import time
import traceback
from collections.abc import Sequence

import numpy as np

from sysid_ros.hardware.bridge_types import (
    ENABLED_CODE,
    LOCKSTEP_REPLY_TIMEOUT,
    STATES,
    BridgeError,
    JointSample,
)
from sysid_ros.hardware.codec import describe
from sysid_ros.hardware.deadlines import probe_latency, size_deadlines
from sysid_ros.hardware.motor_frames import Reading
from sysid_ros.hardware.realtime import request_realtime
from sysid_ros.hardware.safety import (
    JointTargets,
    Trip,
    TripKind,
    WatchdogMode,
)
from sysid_ros.hardware.transport import BusError

_NAN = math.nan


class ControlLoop:
    """Mixin: the control loop (see the module docstring)."""

    def _stop_loop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
            if thread.is_alive():
                self.log.error("the control loop did not stop within 2 s")
        self._thread = None

    def _loop_thread(self) -> None:
        """The loop thread: real-time scheduling asked (said once if refused), wake-up latency
        measured, deadlines sized (motor CAN timeout rewritten if it changed), motors enabled and
        confirmed, then the loop; on a stop request (deactivate, no trip) it disables the motors
        itself before it ends. ``activate`` waits for ``_started``."""
        cfg = self.config
        try:
            self.grant = request_realtime(cfg.realtime_priority, lock_memory=cfg.lock_memory)
            self.grant.report(self.log, "damiao_bridge control loop")
            lateness = probe_latency(cfg.period, stop=self._stop)
            self.deadlines = deadlines = size_deadlines(cfg, lateness, self.grant.scheduling)
            self.log.info("%s", deadlines.describe())
            with self._lock:
                self.watchdog.command_timeout = deadlines.command_timeout
            if deadlines.motor_timeout != self._motor_timeout:
                self._write_motor_timeouts(deadlines.motor_timeout)
            if self._stop.is_set():
                raise BridgeError("activate was cancelled")
            self._enable_all()
        except BaseException as exc:
            self._start_error = exc if isinstance(exc, BridgeError | BusError) else BridgeError(
                f"activate failed in the control loop thread: {exc}")
            self._started.set()
            return
        self.timing.reset()
        self._replay_start = time.monotonic()
        self._epoch = time.time()
        self._rounds = 0
        self.shaper.start(self._hold.position, 0.0)  # control time 0 = now
        self._started.set()
        self._run()
        if self.trip is None:  # a stop request: motors off from this thread, at once
            self._stop_unconfirmed = self.disable_all(reason="deactivate")

    def _run(self) -> None:
        period = self.config.period
        next_start = time.monotonic()
        try:
            while not self._stop.is_set():
                start = time.monotonic()
                late = max(start - next_start, 0.0)
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
                    self.timing.cycle(start, work, period, skipped, late)
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
            if r is not None and r[0] != ENABLED_CODE:
                state = STATES[r[0]]
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


def freeze_heap() -> None:
    """Collect once, then move every object alive now out of the garbage collector's reach
    (``gc.freeze``), so that a full collection during the control loop looks only at what was
    allocated since activation instead of the whole start-up heap (models, MuJoCo, rclpy): a full
    pass over the start-up heap takes ~11 ms (11 missed cycles at 1 kHz), after the freeze a few
    µs. The loop allocates no reference cycles (its garbage goes by reference counting), so the
    frozen objects are the long-lived ones anyway. Process-wide and idempotent."""
    gc.collect()
    gc.freeze()


def _sleep_until(deadline: float) -> None:
    """Sleep until ``deadline`` [s, monotonic]. No busy wait: the kernel wakes the thread some
    50 us late (timer slack), and a spinning thread would take the GIL from the others (emulator,
    executor) exactly when they have work."""
    remaining = deadline - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
