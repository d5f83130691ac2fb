#!/usr/bin/env python3
"""Real-time factor of the mujoco_sim node: the 6-DOF default robot at 1 kHz physics, a JointState
published every step (target: ≥ 10× real time on this machine).

Starts the node as its own process, flat out (real_time_factor 0), with a subscriber in this
process; the simulated time carried by the received joint states divided by the wall time is the
real-time factor. Also reports how many states reached the subscriber. DDS stays on this machine
(ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, a private domain).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from sysid_ros.nodes.processes import NodeProcess  # noqa: E402


def measure(seconds: float, clock_every: int, domain: int) -> dict:
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain)
    node = rclpy.create_node("sim_speed", context=context)
    received = {"count": 0, "first": None, "last": None}

    def on_state(msg):
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        wall = time.monotonic()
        if received["first"] is None:
            received["first"] = (t, wall)
        received["last"] = (t, wall)
        received["count"] += 1

    node.create_subscription(JointState, "/joint_states", on_state,
                             QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    sim = NodeProcess("mujoco_sim", config="mujoco_sim", domain_id=domain, overrides={
        "real_time_factor": 0.0, "rate": 1000.0, "publish_every": 1, "clock_every": clock_every})
    try:
        deadline = time.monotonic() + 60.0
        while received["first"] is None:
            sim.check_running()
            if time.monotonic() > deadline:
                raise SystemExit("no joint state within 60 s")
            time.sleep(0.05)
        time.sleep(seconds)  # the measurement window itself (a benchmark, not a test)
        (t0, w0), (t1, w1) = received["first"], received["last"]
        return {"rtf": (t1 - t0) / (w1 - w0), "received": received["count"],
                "published": round((t1 - t0) * 1000.0) + 1, "wall": w1 - w0}
    finally:
        sim.stop()
        executor.shutdown()
        spinner.join(timeout=5.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="measurement window [s]")
    args = parser.parse_args()
    domain = 150 + os.getpid() % 50
    print(f"mujoco_sim, default 6-DOF robot, 1 kHz physics, JointState every step, flat out "
          f"({args.seconds:g} s window, ROS domain {domain}):")
    for clock_every in (10, 1):
        r = measure(args.seconds, clock_every, domain)
        print(f"  /clock every {clock_every:>2} steps: real-time factor {r['rtf']:.1f} "
              f"({r['published']} states in {r['wall']:.1f} s; {r['received']} received by a best-effort "
              f"subscriber)  target >= 10: {'met' if r['rtf'] >= 10 else 'NOT met'}")


if __name__ == "__main__":
    main()
