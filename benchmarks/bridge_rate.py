"""Achieved control-loop rate and jitter of the Damiao bridge: 6 emulated motors (the default robot)
answering on a python-can virtual bus in the same process, for ``--duration`` seconds (60 s).

The bridge runs exactly as in the node (its control thread on a monotonic schedule, a clamped MIT
frame per motor, every reply collected within the per-cycle deadline, joint-space state out), with
a command stream from another thread at 100 Hz (a slow sine on every joint) as the topic would
give. Printed: achieved rate, period mean/p50/p99/max, jitter, the cycle's work time, CPU time
per cycle of the loop and emulator threads, the garbage collector's passes, overruns, missed
cycles (scheduled slots skipped), missed and late replies. Target: ≥ 1 kHz with no missed cycles;
the real bus (6 motors at 1 Mbit/s ≈ 750 Hz) is then the limit, not the host.

``--host-baseline`` first runs, for the same duration, a thread that only sleeps to the same
schedule with the loop's skip rule (no work at all): the slots it misses are the host's wake-up
latency (scheduler, virtual machine), a floor no control loop on this host can go below.

    python benchmarks/bridge_rate.py [--rate 1000] [--duration 60] [--clock lockstep|realtime]
                                     [--host-baseline]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.hardware.bridge import Bridge  # noqa: E402
from sysid_ros.hardware.bridge_config import load_bridge_config  # noqa: E402
from sysid_ros.hardware.emulated_bus import EmulatedBus, EmulatorOptions  # noqa: E402

LOOP_THREAD, EMULATOR_THREAD = "damiao_bridge_loop", "damiao-emulator"


def _thread_cpu(name: str) -> float:
    """CPU time [s] the running thread called ``name`` has used (Linux per-thread clock)."""
    thread = next(t for t in threading.enumerate() if t.name == name)
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


class CollectorPauses:
    """Durations of the garbage collector's passes per generation while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses[info["generation"]].append(time.perf_counter() - self._start)

    def as_text(self) -> str:
        return "   ".join(f"gen{g} {len(p)} (max {1e6 * max(p, default=0.0):.0f} us)"
                           for g, p in self.pauses.items())


def sleep_only_loop(rate: float, duration: float) -> tuple[int, np.ndarray]:
    """Missed slots and wake-up lateness [s] of a thread that only sleeps to a ``rate`` schedule
    for ``duration`` (the bridge loop's schedule and skip rule, with no work)."""
    period = 1.0 / rate
    result: list = []

    def run() -> None:
        next_start = time.monotonic()
        end = next_start + duration
        missed, lateness = 0, []
        while (start := time.monotonic()) < end:
            lateness.append(start - next_start)
            next_start += period
            now = time.monotonic()
            if now > next_start:
                skipped = int((now - next_start) // period) + 1
                missed += skipped
                next_start += skipped * period
            remaining = next_start - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
        result.extend((missed, np.asarray(lateness[1:])))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return result[0], result[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="control rate [Hz]")
    parser.add_argument("--duration", type=float, default=60.0, help="measured time [s]")
    parser.add_argument("--clock", choices=("lockstep", "realtime"), default="lockstep",
                        help="emulator physics: one period per command round, or the wall clock")
    parser.add_argument("--switch-interval", type=float, default=5e-4,
                        help="Python GIL switch interval [s] (the node uses 0.5 ms)")
    parser.add_argument("--host-baseline", action="store_true",
                        help="first measure a sleep-only loop on the same schedule (the host's floor)")
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval)
    if args.host_baseline:
        missed, late = sleep_only_loop(args.rate, args.duration)
        print(f"host baseline: a thread that only sleeps to a {args.rate:.0f} Hz schedule for "
              f"{args.duration:.0f} s: missed slots {missed}; "
              f"wake-up lateness p50 {1e6 * np.median(late):.0f} us, "
              f"p99 {1e6 * np.percentile(late, 99):.0f} us, max {1e6 * late.max():.0f} us, "
              f"> 0.5 ms {int(np.count_nonzero(late > 5e-4))}, > 1 ms {int(np.count_nonzero(late > 1e-3))}")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

    config = load_bridge_config(ROOT / "config" / "yam_damiao.yaml", rate=args.rate,
                                max_missed_replies=1_000_000, command_timeout=5.0,
                                # a host stall must not end the measurement
                                motor_timeout=0.0, unsafe_no_motor_timeout=True)
    # the emulated bus the node builds with use_emulator (its bridge's time base stays the wall clock)
    emulated = EmulatedBus(config.joints, period=config.period,
                           options=EmulatorOptions(clock=args.clock, initial_pose="home"))
    config = config.replace(interface="virtual", channel=emulated.channel)
    bridge = Bridge(config, bus=emulated.bus, timing_window=10, keep_all_periods=True)
    stop = threading.Event()
    emulated.start()
    try:
        bridge.configure()
        bridge.activate()
        home = np.array([0.0, 1.047, 1.047, 0.0, 0.0, 0.0])

        def commands() -> None:  # the topic's command stream, 100 Hz
            t0 = time.monotonic()
            while not stop.wait(0.01):
                t = time.monotonic() - t0
                bridge.submit_command(list(config.names), (home + 0.1 * np.sin(0.5 * t)).tolist())

        feeder = threading.Thread(target=commands, daemon=True)
        feeder.start()
        warmup = 1.0
        time.sleep(warmup)
        bridge.timing.reset()
        for m in bridge.motors:
            m.missed_total = m.late = 0
        cpu = {name: _thread_cpu(name) for name in (LOOP_THREAD, EMULATOR_THREAD)}
        cycles_before = bridge.cycles
        pauses = CollectorPauses()
        gc.callbacks.append(pauses)
        measured_from = time.monotonic()
        time.sleep(args.duration)  # a benchmark measures wall time; nothing to synchronise with
        elapsed = time.monotonic() - measured_from
        gc.callbacks.remove(pauses)
        cycles = bridge.cycles - cycles_before
        cpu = {name: (_thread_cpu(name) - used) / max(cycles, 1) for name, used in cpu.items()}
        summary = bridge.timing.summary(whole_run=True)
        status = bridge.status()
        stop.set()
        feeder.join(timeout=2)
    finally:
        stop.set()
        bridge.shutdown()
        emulated.close()
    if summary is None:
        print("no cycles measured")
        return 1
    periods = np.asarray(bridge.timing.all_periods)
    print(f"bridge_rate: 6 emulated motors on a virtual bus, target {args.rate:.0f} Hz, {elapsed:.1f} s, "
          f"emulator clock {args.clock}, GIL switch interval {1e3 * args.switch_interval:.2f} ms")
    print(f"  cycles          {summary.cycles}")
    print(f"  achieved rate   {summary.rate:.1f} Hz")
    print(f"  period mean     {1e6 * summary.mean:.1f} us   p50 {1e6 * summary.p50:.1f} us   "
          f"p99 {1e6 * summary.p99:.1f} us   max {1e6 * summary.max:.1f} us")
    print(f"  jitter (std)    {1e6 * summary.jitter:.1f} us   periods > 1.5 T: "
          f"{int(np.count_nonzero(periods > 1.5 / args.rate))}")
    print(f"  cycle work      mean {1e6 * summary.work_mean:.1f} us   max {1e6 * summary.work_max:.1f} us "
          "(encode, send, wait for replies, decode, state)")
    print(f"  CPU per cycle   bridge loop thread {1e6 * cpu[LOOP_THREAD]:.0f} us, emulator thread "
          f"{1e6 * cpu[EMULATOR_THREAD]:.0f} us (one GIL: both share a core)")
    print(f"  GC passes       {pauses.as_text()}")
    print(f"  overruns        {summary.overruns} (work longer than a period)   "
          f"missed cycles {summary.missed}")
    print(f"  missed replies  {sum(m.missed_total for m in status.motors)} "
          f"(late {sum(m.late for m in status.motors)}) of {6 * summary.cycles}")
    print(f"  trip            {status.trip}")
    ok = summary.missed == 0 and summary.rate >= 0.99 * args.rate
    print(f"  target met      {'yes' if ok else 'no'} (>= {args.rate:.0f} Hz sustained, no missed cycles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
