"""The bridge's deadlines, sized from the control loop's measured wake-up latency (no ROS).

Three deadlines keep a dead or stalled host from leaving the motors running, and each must be
longer than anything a *healthy* loop does, or a busy host trips them:

* **heartbeat** — the loop sends one frame to every motor each control period (MIT frames while
  active, whatever the command stream does); the longest gap between two frames to a motor is at
  most ``heartbeat_worst = 2 × period + latency_max`` (a cycle that starts late and the next on
  time; an overrun skips slots, it never leaves a motor without a frame for longer);
* **motor CAN timeout** (register TIMEOUT, the motor's own watchdog: no frame for this long and it
  stops itself, state 0xD) = ``max(motor_timeout, deadline_margin × heartbeat_worst)``, at most
  ``motor_timeout_max`` (the longest a motor may run on after its host died). Where the margin
  does not fit under the cap, the cap is used and the log says the margin is short;
* **command watchdog** — hold the measured pose after ``command_timeout`` without a MotorCommand
  (raised like the motor timeout to ``deadline_margin × heartbeat_worst``: the loop evaluates it
  once per cycle), disable after ``hold_timeout`` more.

``latency`` is the lateness of the loop thread's wake-ups against its schedule, measured by
:func:`probe_latency` in the loop thread itself (with its scheduling) right before the motors are
enabled; with real-time scheduling it is tens of microseconds on a loaded host, without it tens of
milliseconds. The figures, the scheduling and the sized deadlines go into one log line
(:meth:`Deadlines.describe`) and the diagnostics (:meth:`Deadlines.values`).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from sysid_ros.hardware.bridge_config import BridgeConfig
from sysid_ros.hardware.codec_registers import TIMEOUT_UNIT_S

__all__ = ["PROBE_CYCLES", "PROBE_TIME", "Deadlines", "probe_latency", "size_deadlines"]

PROBE_TIME = 0.25   # [s] latency probe before the motors are enabled (at least PROBE_CYCLES periods)
PROBE_CYCLES = 50


def probe_latency(period: float, *, duration: float = PROBE_TIME, cycles: int = PROBE_CYCLES,
                  stop: threading.Event | None = None) -> np.ndarray:
    """In the calling thread: sleep to a schedule of ``period`` [s] for ``duration`` [s] (at least
    ``cycles`` periods); the lateness [s] of every wake-up, shape ``(k,)``."""
    count = max(int(cycles), math.ceil(duration / period))
    late = np.empty(count)
    start = time.monotonic()
    for k in range(count):
        due = start + (k + 1) * period
        remaining = due - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        late[k] = max(time.monotonic() - due, 0.0)
        if stop is not None and stop.is_set():
            return late[:k + 1]
    return late


@dataclass(frozen=True)
class Deadlines:
    """The sized deadlines [s] and what they were sized from (see the module docstring)."""

    period: float
    scheduling: str
    samples: int
    latency_p50: float
    latency_p99: float
    latency_max: float
    margin: float
    heartbeat_worst: float
    motor_timeout: float
    command_timeout: float
    hold_timeout: float
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """The log line."""
        motor = f"{self.motor_timeout:.4g} s" if self.motor_timeout else "OFF"
        text = (f"deadlines from the loop's measured wake-up latency (p50 {1e6 * self.latency_p50:.0f} us, "
                f"p99 {1e6 * self.latency_p99:.0f} us, max {1e6 * self.latency_max:.0f} us over "
                f"{self.samples} cycles, {self.scheduling}): heartbeat a frame to every motor each "
                f"{1e3 * self.period:.3g} ms (worst gap {1e3 * self.heartbeat_worst:.3g} ms), motor CAN "
                f"timeout {motor}, command watchdog: hold after {self.command_timeout:.4g} s, disable "
                f"after {self.command_timeout + self.hold_timeout:.4g} s")
        return text + "".join(f"; {n}" for n in self.notes)

    def values(self) -> dict[str, str]:
        """Key/values for the diagnostics."""
        return {"scheduling": self.scheduling, "latency_p50_us": f"{1e6 * self.latency_p50:.0f}",
                "latency_p99_us": f"{1e6 * self.latency_p99:.0f}",
                "latency_max_us": f"{1e6 * self.latency_max:.0f}",
                "heartbeat_ms": f"{1e3 * self.period:.3g}",
                "heartbeat_worst_ms": f"{1e3 * self.heartbeat_worst:.3g}",
                "motor_timeout_s": f"{self.motor_timeout:.4g}",
                "command_timeout_s": f"{self.command_timeout:.4g}",
                "hold_timeout_s": f"{self.hold_timeout:.4g}", "deadline_margin": f"{self.margin:g}"}


def size_deadlines(config: BridgeConfig, lateness: np.ndarray, scheduling: str) -> Deadlines:
    """The deadlines for ``config`` given the measured wake-up ``lateness`` [s] ``(k,)``."""
    lateness = np.asarray(lateness, dtype=float)
    if lateness.size == 0:
        lateness = np.zeros(1)
    p50, p99, worst_late = (float(x) for x in np.percentile(lateness, [50, 99, 100]))
    period, margin = config.period, config.deadline_margin
    worst = 2.0 * period + worst_late
    wanted = margin * worst
    notes = []
    motor = config.motor_timeout
    cap = max(config.motor_timeout_max, motor)  # the cap limits the raise, not the configured value
    if motor > 0 and wanted > motor:
        if wanted > cap:
            notes.append(f"the loop's worst gap {1e3 * worst:.3g} ms needs a motor timeout of "
                         f"{wanted:.3g} s for a margin of {margin:g}: capped at motor_timeout_max "
                         f"{cap:g} s (margin {cap / worst:.2g}): grant real-time scheduling")
            motor = cap
        else:
            notes.append(f"motor_timeout {config.motor_timeout:g} s raised to {wanted:.3g} s "
                         f"({margin:g} x the worst gap)")
            motor = wanted
    if motor > 0:  # the register counts 50 us units: never below the sized value
        motor = math.ceil(round(motor / TIMEOUT_UNIT_S, 6)) * TIMEOUT_UNIT_S
    command = config.command_timeout
    if wanted > command:
        notes.append(f"command_timeout {command:g} s raised to {wanted:.3g} s")
        command = wanted
    return Deadlines(period=period, scheduling=scheduling, samples=int(lateness.size), latency_p50=p50,
                     latency_p99=p99, latency_max=worst_late, margin=margin, heartbeat_worst=worst,
                     motor_timeout=motor, command_timeout=command, hold_timeout=config.hold_timeout,
                     notes=tuple(notes))
