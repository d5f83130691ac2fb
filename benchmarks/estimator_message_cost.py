#!/usr/bin/env python3
"""The estimator node's CPU cost per JointState, as the hardware graph runs it.

Starts the estimator as its own process with the hardware launch test's settings (the package's
YAM arm, payload target ``link_6``, RLS log-det-div, uninformative prior, RELIABLE input at
500 Hz), measures its CPU time (``/proc/<pid>/stat``: user + system, every thread) over 3 s idle,
then streams a simulated run (0.8 kg payload, torque noise) at it over DDS in real time (RELIABLE,
depth 2000, as ``damiao_bridge`` publishes), waits until its ``~/progress`` reaches the last
stamp, and prints CPU per message (gross, and net of the idle rate), what it received and what it counted as
lost (its exit line). ``--hogs N`` runs it beside ``stress-ng --cpu N`` (60 s at most).
DDS stays on this machine (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, the caller's ROS_DOMAIN_ID).

    python benchmarks/estimator_message_cost.py [--duration 10] [--rate 500] [--hogs 0] [--target link_6]

``--target arm``: the whole arm from the nominal prior (84 parameters), as the hardware launch
file runs it by default (``test/ros/launch/test_hardware_identify_launch.py`` at 250 Hz).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

import rclpy  # noqa: E402
from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.resources import default_robot_path  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402
from sysid_ros.nodes.processes import NodeProcess  # noqa: E402

STATES = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)  # damiao_bridge's


def cpu_seconds(pid: int) -> float:
    """User + system CPU time [s] of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU time [s] so far of each thread of process ``pid``, by name (threads of one name summed):
    the Python main thread (executor, session) is told from DDS's and rclpy's own threads."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = "main" if task.name == str(pid) else (task / "comm").read_text().strip()
        except OSError:  # ended meanwhile
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)  # benchmark polling: the figure's resolution
    return predicate()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="streamed data [s]")
    parser.add_argument("--rate", type=float, default=500.0, help="joint states per second [Hz]")
    parser.add_argument("--hogs", type=int, default=0, help="stress-ng --cpu N beside (0: none)")
    parser.add_argument("--target", default="link_6", help="'arm' or the payload's body (default link_6)")
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0) or 91)
    args = parser.parse_args()
    if args.hogs and shutil.which("stress-ng") is None:
        sys.exit("stress-ng not found (apt-get install stress-ng)")
    model = RobotModel.from_mjcf(default_robot_path())
    payload = Payload("link_6", 0.8, np.array([0.02, -0.01, 0.06]), np.eye(3) * 0.8 * 0.01 / 6)
    run = simulate_dataset(model, duration=args.duration, rate=args.rate, payload=payload,
                           sensor=SensorModel(torque_noise=0.05))
    node = NodeProcess("estimator", domain_id=args.domain, config="estimator", overrides={
        "target": args.target, "method": "rls_logdet",
        "prior": "nominal" if args.target == "arm" else "uninformative", "reliable_input": True,
        "sample_rate": float(args.rate), "publish_rate": 5.0})
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=args.domain)
    ros = rclpy.create_node("stream", context=context)
    progress = []
    ros.create_subscription(Time, "/estimator/progress", lambda m: progress.append(m.sec * 10**9 + m.nanosec),
                            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    pub = ros.create_publisher(JointState, "/joint_states", STATES)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(ros)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    hog = None
    try:
        if not wait_for(lambda: "estimating" in node.log.read_text(errors="replace"), 120.0):
            raise SystemExit("the estimator did not start:\n" + node.log.read_text()[-2000:])
        # the idle rate from after its background set-up (compiled kernels: "ready to process")
        wait_for(lambda: "ready to process" in node.log.read_text(errors="replace"), 120.0)
        if not wait_for(lambda: pub.get_subscription_count() > 0, 30.0):
            raise SystemExit("the estimator did not subscribe to /joint_states")
        if args.hogs:
            hog = subprocess.Popen(["stress-ng", "--cpu", str(args.hogs), "--timeout", "60"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load = os.getloadavg()[0]
        c0, t0 = cpu_seconds(node.proc.pid), time.monotonic()
        time.sleep(3.0)  # the idle rate: timers only (what the stream's figure is net of)
        idle_rate = (cpu_seconds(node.proc.pid) - c0) / (time.monotonic() - t0)
        c1, start = cpu_seconds(node.proc.pid), time.monotonic()
        threads0 = thread_cpu(node.proc.pid)
        stamps = np.round((10.0 + run.t) * 1e9).astype(np.int64)
        per_tick = max(int(args.rate / 100), 1)  # 10 ms ticks
        for k0 in range(0, len(run), per_tick):
            for k in range(k0, min(k0 + per_tick, len(run))):
                msg = JointState(name=list(run.joint_names), position=run.q[k].tolist(),
                                 velocity=run.dq[k].tolist(), effort=run.tau[k].tolist())
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamps[k]), 10**9)
                pub.publish(msg)
            lag = start + (k0 + per_tick) / args.rate - time.monotonic()
            if lag > 0:
                time.sleep(lag)
        sent = time.monotonic()
        caught = wait_for(lambda: progress and progress[-1] >= stamps[-1], 120.0)
        done = time.monotonic()
        gross = cpu_seconds(node.proc.pid) - c1
        threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu(node.proc.pid).items()}
        used = gross - idle_rate * (done - start)
    finally:
        if hog is not None:
            hog.send_signal(signal.SIGINT)
            hog.wait()
        status = node.stop()
        executor.shutdown()
        ros.destroy_node()
        rclpy.try_shutdown(context=context)
    stopping = node.output.split("estimator stopping:")
    line = stopping[-1].splitlines()[0] if len(stopping) > 1 else ""
    counters = {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", line)}
    n = len(run)
    print(f"target {args.target}; load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
          + (f"beside stress-ng --cpu {args.hogs}" if args.hogs else "no hogs of its own"))
    print(f"streamed {n} joint states at {args.rate:g} Hz in {sent - start:.2f} s; the estimator "
          + (f"caught up {1e3 * (done - sent):.0f} ms after the last" if caught
             else "never caught up (120 s)"))
    print(f"estimator CPU: idle {1e3 * idle_rate:.1f} ms/s (timers); from the first message until caught "
          f"up {gross:.2f} s, {1e3 * gross / n:.3f} ms per message; net of the idle rate "
          f"{1e3 * used / n:.3f} ms per message ({used / (n / args.rate):.2f} core at {args.rate:g} Hz)")
    busiest = sorted(threads.items(), key=lambda kv: -kv[1])[:4]
    print("by thread (ms per message): " + ", ".join(f"{k} {1e3 * v / n:.3f}" for k, v in busiest))
    print(f"its counters: received {counters.get('received')}, updates {counters.get('updates')}, "
          f"lost {counters.get('rejected_lost', 0)}, dropped {counters.get('rejected_dropped', 0)}, "
          f"missing {counters.get('missing')}; exit status {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
