#!/usr/bin/env python3
"""Can the estimator node keep up with a 1 kHz JointState stream of a 7-joint arm?

Starts the node as its own process (payload target on a Panda, RLS log-det-div), streams a
simulated 1 kHz run at it over DDS in real time (10 messages every 10 ms), and reports how many
samples it processed, its backlog warnings and how long after the last message it caught up.
``--arm``: the whole arm with Coulomb and viscous friction (94 parameters) instead of the payload.
DDS stays on this machine (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, a private domain).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from sysid_ros.msg import ParameterEstimate  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.model.target import payload_target  # noqa: E402
from sysid_ros.core.online import OnlineOptions, OnlineSession  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402
from sysid_ros.nodes.processes import NodeProcess  # noqa: E402

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


def stream(run, args, expected: int):
    """Stream ``run`` in real time; wait until an estimate covers ``expected`` updates; return
    (last estimate, catch-up time [s], send time [s], failed publishes)."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=args.domain)
    node = rclpy.create_node("stream", context=context)
    latest = {}
    node.create_subscription(ParameterEstimate, "/estimator/estimate",
                             lambda m: latest.update(msg=m, at=time.perf_counter()), LATCHED)
    pub = node.create_publisher(JointState, "/joint_states",
                                QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    deadline = time.perf_counter() + 30
    while node.count_subscribers("/joint_states") == 0 and time.perf_counter() < deadline:
        time.sleep(0.05)  # benchmark set-up only: waiting for discovery
    per_tick = int(args.rate / 100)
    failed: list = []
    start = time.perf_counter()
    for k0 in range(0, len(run), per_tick):  # real time: 10 ms ticks
        for k in range(k0, min(k0 + per_tick, len(run))):
            msg = JointState(name=list(run.joint_names), position=run.q[k].tolist(),
                             velocity=run.dq[k].tolist(), effort=run.tau[k].tolist())
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round((10 + run.t[k]) * 1e9), 10**9)
            try:
                pub.publish(msg)
            except Exception as exc:  # rclpy raises RCLError when the reliable writer stays full
                failed.append((k, str(exc)[:60]))
        lag = start + (k0 + per_tick) / args.rate - time.perf_counter()
        if lag > 0:
            time.sleep(lag)
    sent_done = time.perf_counter()
    while time.perf_counter() < sent_done + 15:
        m = latest.get("msg")
        if m is not None and m.sample_count >= expected:
            break
        time.sleep(0.01)
    m = latest.get("msg")
    caught_up = latest.get("at", float("nan")) - sent_done
    executor.shutdown()
    spinner.join(timeout=5)
    node.destroy_node()
    rclpy.try_shutdown(context=context)
    return m, caught_up, sent_done - start, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--domain", type=int, default=91)
    parser.add_argument("--arm", action="store_true",
                        help="the whole arm with Coulomb and viscous friction (94 parameters)")
    args = parser.parse_args()
    model_path = ROOT / "test" / "robots" / "panda.xml"
    model = RobotModel.from_mjcf(model_path)
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.01 / 6)
    run = simulate_dataset(model, duration=args.duration, rate=args.rate, payload=payload,
                           sensor=SensorModel(torque_noise=0.05))
    target = {"target": "arm", "friction": "coulomb,viscous", "alpha": 1.0} if args.arm else \
        {"target": "hand", "alpha": 10.0}
    node = NodeProcess("estimator", domain_id=args.domain, overrides={
        "model_path": str(model_path), **target, "sample_rate": float(args.rate),
        "publish_rate": 20.0, "reliable_input": True})
    # the node's session withholds the samples of its filters' start-up transient (settling time)
    settle = OnlineSession(payload_target(model, "hand"), OnlineOptions(sample_rate=float(args.rate))).settle
    expected = len(run) - int(np.ceil(settle * args.rate)) - 3
    try:
        m, caught_up, sent_time, failed = stream(run, args, expected)
    finally:  # the node process never outlives the benchmark
        exit_code = node.stop()
    out = node.output
    behind = out.count("behind by")
    if failed:
        print(f"{len(failed)} publishes failed (writer full), first at sample {failed[0][0]}: {failed[0][1]}")
    print(f"streamed {len(run)} joint states of {len(run.joint_names)} joints at {args.rate:.0f} Hz "
          f"in {sent_time:.2f} s")
    print(f"estimator processed {m.sample_count if m else 0} samples; last estimate {caught_up * 1e3:.0f} ms "
          f"after the last message; 'behind' warnings: {behind}; first value {m.values[0]:.3f}, "
          f"divergence to prior {m.divergence_to_prior:.3g}; exit code {exit_code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
