"""The Damiao bridge's loop latency, idle and beside CPU hogs, with and without real-time scheduling.

The bridge (the YAM parameters at their 700 Hz, 6 emulated motors answering on a python-can
virtual bus in this process: what the node's loop process, ``sysid_ros.hardware.bridge_worker``,
runs with ``use_emulator: true``, no ROS beside it) is activated and left idle for
``--duration`` seconds in four conditions: {idle host, beside ``stress-ng --cpu HOGS``} × {SCHED_FIFO
(``realtime_priority`` 50, this process's other threads at 1, as the loop process does), normal
scheduling (``realtime_priority`` 0)}. Printed per condition: the loop latency — how late each
cycle started against its schedule — p50/p99/max, the period p99/max, missed cycles, the deadlines
sized at activation (motor CAN timeout), whether the bridge tripped (and why), and the load average.

The hogs are ``stress-ng --cpu HOGS --timeout duration+5`` when stress-ng is installed, else
Python busy loops (bounded by the same time). On the shared development host the rule is at most
``--cpu 2`` for at most 60 s (the default); ``--hogs 4`` is for a machine of your own.

    python benchmarks/bridge_latency.py [--duration 20] [--hogs 2] [--rate 700]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.hardware.bridge import Bridge  # noqa: E402
from sysid_ros.hardware.bridge_config import load_bridge_config  # noqa: E402
from sysid_ros.hardware.emulated_bus import EmulatedBus, EmulatorOptions  # noqa: E402
from sysid_ros.hardware.realtime import raise_process_threads, restore_threads  # noqa: E402

CONFIG = ROOT / "config" / "yam_damiao.yaml"


def start_hogs(count: int, seconds: float) -> list[subprocess.Popen]:
    """``count`` CPU hogs for ``seconds`` (stress-ng if installed, else Python busy loops)."""
    if count <= 0:
        return []
    if shutil.which("stress-ng"):
        return [subprocess.Popen(["stress-ng", "--cpu", str(count), "--timeout", f"{int(seconds)}s"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    hog = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.terminate()
        try:
            hog.wait(5)
        except subprocess.TimeoutExpired:
            hog.kill()
            hog.wait()


def run(rate: float, duration: float, priority: int, hogs: int) -> dict:
    cfg = load_bridge_config(CONFIG, rate=rate, realtime_priority=priority)
    emulated = EmulatedBus(cfg.joints, period=cfg.period,
                           options=EmulatorOptions(realtime_priority=priority)).start()
    bridge = Bridge(cfg.replace(interface="virtual", channel=emulated.channel), bus=emulated.bus,
                    timebase=emulated.timebase, keep_all_periods=True)
    raised = raise_process_threads(1)[0] if priority else []
    procs = start_hogs(hogs, duration + 5.0)
    try:
        time.sleep(1.0 if hogs else 0.0)  # the hogs running before activation (the probe sees them)
        bridge.configure()
        bridge.activate()
        end = time.monotonic() + duration
        while time.monotonic() < end and bridge.trip is None:
            time.sleep(0.2)
        load = os.getloadavg()[0]
        status = bridge.status()
        summary = bridge.timing.summary(whole_run=True)
        trip = str(bridge.trip) if bridge.trip else ""
    finally:
        stop_hogs(procs)
        bridge.shutdown()
        emulated.close()
        restore_threads(raised)
    return {"summary": summary, "deadlines": status.deadlines, "trip": trip, "load": load,
            "scheduling": status.deadlines.scheduling if status.deadlines else "?"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="[s] per condition (default 20)")
    parser.add_argument("--hogs", type=int, default=2, help="CPU hogs of the loaded conditions (default 2)")
    parser.add_argument("--rate", type=float, default=700.0, help="[Hz] control loop (default 700)")
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    print(f"bridge loop latency at {args.rate:g} Hz, {args.duration:g} s per condition, "
          f"{os.cpu_count()} CPUs, hogs: {'stress-ng' if shutil.which('stress-ng') else 'python'} "
          f"--cpu {args.hogs}")
    header = (f"{'condition':<36} {'sched':<13} {'lat p50':>8} {'lat p99':>8} {'lat max':>9} "
              f"{'per p99':>8} {'per max':>9} {'missed':>7} {'motor TO':>8} {'load':>5}  trip")
    print(header)
    print("-" * len(header))
    for hogs in (0, args.hogs):
        for priority in (50, 0):
            r = run(args.rate, args.duration, priority, hogs)
            s, d = r["summary"], r["deadlines"]
            where = f"{'idle' if hogs == 0 else f'beside {hogs} hogs'}, realtime_priority {priority}"
            if s is None:
                print(f"{where:<36} no cycles ({r['trip']})")
                continue
            print(f"{where:<36} {r['scheduling']:<13} {1e6 * s.late_p50:7.0f}u {1e6 * s.late_p99:7.0f}u "
                  f"{1e3 * s.late_max:8.2f}m {1e6 * s.p99:7.0f}u {1e3 * s.max:8.2f}m {s.missed:7d} "
                  f"{d.motor_timeout if d else float('nan'):8.3g} {r['load']:5.1f}  {r['trip'] or 'none'}")
    print("lat = how late a cycle started against its schedule (u = us, m = ms); per = period; "
          "motor TO = the motor CAN timeout [s] sized at activation")


if __name__ == "__main__":
    main()
