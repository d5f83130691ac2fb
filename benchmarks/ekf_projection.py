#!/usr/bin/env python3
"""What projecting the EKF's whole-arm estimate costs and changes (core/online/projection.py).

A run is replayed through an EKF session in batches of ``--batch`` samples (the estimator node at
500 Hz publishing at 10 Hz hands ~50 samples per estimate) and every estimate is taken
(``session.snapshot()``, which projects it). Printed per arm: the share of estimates whose raw
filter estimate was outside the consistent, plausible set; the first projection's time (the
program's compilation included) and the median and 95th percentile of the others; the EKF's own
cost per sample for comparison; the final estimate's Mahalanobis distance, bodies moved and
log-det divergence to the truth, raw and projected.

Arms: the three-joint test arm (test/oracles/three_link_arm.py; Coulomb + viscous friction,
plausibility bounds as ``sysid identify``) on 2 s at 250 Hz, and the Panda (test/robots/panda.xml,
viscous friction in its MJCF, 108 parameters) on 3 s at 500 Hz, both with sensor noise
(q 1 mrad, q̇ 0.01 rad/s, τ 0.05 N·m).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from oracles.three_link_arm import three_link_arm  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.model.robot import joint_terms  # noqa: E402
from sysid_ros.core.model.target import batch_target  # noqa: E402
from sysid_ros.core.online import OnlineOptions, OnlineSession  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import simulate_dataset  # noqa: E402

SENSOR = SensorModel(position_noise=1e-3, velocity_noise=1e-2, torque_noise=0.05, seed=3)


def run(name: str, model: RobotModel, duration: float, rate: float, batch: int) -> None:
    target = batch_target(model)
    ds = simulate_dataset(model, duration=duration, seed=1, sensor=SENSOR, rate=rate)
    session = OnlineSession(target, OnlineOptions(method="ekf", sample_rate=rate))
    est = session.estimator
    filter_time, times, outside = 0.0, [], 0
    for a in range(0, len(ds), batch):
        start = time.perf_counter()
        session.push_batch(ds.t[a:a + batch], ds.q[a:a + batch], ds.dq[a:a + batch], ds.tau[a:a + batch])
        filter_time += time.perf_counter() - start
        if not est.samples:
            continue
        start = time.perf_counter()
        snap = session.snapshot()
        times.append(time.perf_counter() - start)
        outside += snap.projection["status"] != "unchanged"
    proj = est.projection()
    truth = model.nominal
    first, rest = times[0], np.array(times[1:])
    print(f"{name}: {target.n_params} parameters, {target.base.rank} base; {len(ds)} samples at "
          f"{rate:g} Hz in batches of {batch} ({est.samples} filter steps, {est.rejected} refused); "
          f"{len(times)} estimates, {outside} of them projected")
    print(f"  estimate (snapshot with projection): first {1e3 * first:.0f} ms, then median "
          f"{1e3 * np.median(rest):.1f} ms, p95 {1e3 * np.percentile(rest, 95):.1f} ms; EKF "
          f"{1e3 * filter_time / len(ds):.2f} ms per sample "
          f"({1e3 * filter_time / len(times):.0f} ms per batch)")
    moved = ", ".join(f"{k} {v:.2g}" for k, v in proj.moved.items() if "." not in k)
    print(f"  final: {proj.status}, Mahalanobis distance {proj.distance:.3g} (base parameters "
          f"{proj.base_distance:.3g}); raw broke {list(proj.violated)}; bodies moved (largest change / "
          f"scale): {moved or 'none'}")
    print(f"  divergence to the truth: raw {target.divergence(proj.raw, truth):.4g}, exported "
          f"{target.divergence(proj.theta, truth):.4g}; consistent: raw "
          f"{target.consistency(proj.raw)['consistent']}, exported {session.snapshot().consistent}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=50, help="samples per estimate (default 50)")
    parser.add_argument("--only", choices=("three_link", "panda"), help="one arm only")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.only in (None, "three_link"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "three_link_arm.xml"
            path.write_text(three_link_arm())
            model = RobotModel.from_mjcf(str(path), joint_terms=joint_terms("coulomb,viscous", False))
            run("three-joint arm", model, 2.0, 250.0, args.batch)
    if args.only in (None, "panda"):
        panda = RobotModel.from_mjcf(str(ROOT / "test" / "robots" / "panda.xml"))
        run("Panda", panda, 3.0, 500.0, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
