"""An idle, activated ``damiao_bridge`` node beside CPU hogs for ``--minutes`` (default 10): does it
stay enabled? The node runs as a user runs it (``python -m sysid_ros.nodes.damiao_bridge`` with the
YAM parameters file, ``use_emulator:=true``, ``autostart:=true``: emulated motors in its loop process,
the loop at 700 Hz, no command), beside ``--hogs`` CPU hogs (Python busy loops bounded by the run:
the shared development host's rule caps stress-ng runs at 60 s). Its diagnostics are read over DDS
(a private domain, localhost only) every 10 s.

Printed: one line per minute (phase, loop latency p99/max, period max, missed cycles, load
average), then the verdict: whether the bridge stayed active without a trip for the whole run (no
"0xD communication lost", no command watchdog, no missed-reply trip), the deadlines line of its
log, and its exit status after SIGINT (every motor disabled, confirmed).

    python benchmarks/bridge_idle.py [--minutes 10] [--hogs 2] [--domain 42] [--priority 50]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "yam_damiao.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="idle time [min] (default 10)")
    parser.add_argument("--hogs", type=int, default=2, help="CPU hogs beside the bridge (default 2)")
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "42")),
                        help="private ROS_DOMAIN_ID (default $ROS_DOMAIN_ID or 42)")
    parser.add_argument("--priority", type=int, default=50, help="realtime_priority (0 = normal scheduling)")
    args = parser.parse_args()
    env = dict(os.environ, ROS_DOMAIN_ID=str(args.domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    seconds = 60.0 * args.minutes
    hog = f"import time\nend = time.monotonic() + {seconds + 60}\nwhile time.monotonic() < end:\n    pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(args.hogs)]
    bridge = subprocess.Popen([sys.executable, "-m", "sysid_ros.nodes.damiao_bridge", "--ros-args",
                               "--params-file", str(CONFIG), "-p", "use_emulator:=true",
                               "-p", "autostart:=true", "-p", f"realtime_priority:={args.priority}"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(bridge.stdout), daemon=True)
    reader.start()

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=args.domain)
    node = rclpy.create_node("bridge_idle_benchmark", context=context)
    holder: list[dict[str, str]] = [{}]  # the latest control-loop status, replaced whole (no torn reads)

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.endswith("control loop"):
                holder[0] = dict({kv.key: kv.value for kv in status.values}, message=status.message)

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    tripped = ""
    try:
        start = time.monotonic()
        deadline = start + 180.0  # start-up on a loaded host (imports) within 3 minutes
        while holder[0].get("phase") != "active":
            if time.monotonic() > deadline or bridge.poll() is not None:
                raise SystemExit(f"the bridge did not become active: {''.join(lines[-20:])}")
            time.sleep(0.5)
        start = time.monotonic()
        print(f"idle bridge beside {args.hogs} hogs for {args.minutes:g} min "
              f"(realtime_priority {args.priority})")
        print(f"{'t [min]':>7} {'phase':<8} {'lat p99':>8} {'lat max':>8} {'per max':>8} {'missed':>7} "
              f"{'load':>5}")
        next_report = start + 60.0
        while (now := time.monotonic()) < start + seconds:
            time.sleep(min(10.0, start + seconds - now))
            latest = holder[0]
            if "trip" in latest or latest.get("phase") != "active" or bridge.poll() is not None:
                tripped = latest.get("trip", latest.get("message", "the bridge process ended"))
                break
            if time.monotonic() >= next_report:
                next_report += 60.0
                print(f"{(time.monotonic() - start) / 60:7.1f} {latest.get('phase', '?'):<8} "
                      f"{latest.get('loop_late_p99_us', '?'):>7}u {latest.get('loop_late_max_us', '?'):>7}u "
                      f"{latest.get('period_max_us', '?'):>7}u {latest.get('missed_cycles', '?'):>7} "
                      f"{os.getloadavg()[0]:5.1f}", flush=True)
        elapsed = (time.monotonic() - start) / 60
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        if bridge.poll() is None:
            bridge.send_signal(signal.SIGINT)
        try:
            bridge.wait(30)
        except subprocess.TimeoutExpired:
            bridge.kill()
            bridge.wait()
        reader.join(5)
        for h in hogs:
            h.kill()
            h.wait()
    log = "".join(lines)
    deadlines = next((line.strip() for line in lines if "deadlines from the loop" in line),
                     "(no deadlines line)")
    print(deadlines)
    verdict = "STAYED ENABLED" if not tripped and "ALL MOTORS DISABLED" not in log else f"TRIPPED: {tripped}"
    print(f"{verdict} for {elapsed:.1f} min; exit status {bridge.returncode}; "
          f"disabled at stop: {'all 6 motors disabled (deactivate), confirmed' in log}")


if __name__ == "__main__":
    main()
