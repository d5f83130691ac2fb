#!/usr/bin/env python3
"""Per-sample update rate of RLS log-det-div on a Panda, median and 99th percentile.

* payload target: 10 parameters (force rows of the hand), target >= 10 kHz;
* whole arm: 8 bodies x 10 + Coulomb and viscous friction per joint (94 parameters),
  target >= 1 kHz.

Rows are built beforehand (batched regressor, timed separately per sample), so the figures are
the estimator's own update cost; the batched row cost shows what a node adds per sample. The
second table is the whole online session per sample (stream checks, causal conditioning, rows,
update: :class:`OnlineSession` as the estimator node runs it, in the node's batches of
``sample rate / process rate`` samples), against the 1 kHz a live arm needs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.model.target import arm_target, payload_target  # noqa: E402
from sysid_ros.core.online import ForceRows, OnlineOptions, OnlineSession  # noqa: E402
from sysid_ros.core.online.rls_logdet import RLSLogDet  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402


def measure(label: str, target, ds, alpha: float, weight: float, target_hz: float) -> None:
    t0 = time.perf_counter()
    rows = ForceRows(target).push_batch(ds.t, ds.q, ds.dq, ds.meta["ddq_true"], ds.tau)
    build = (time.perf_counter() - t0) / len(rows) * 1e6
    est = RLSLogDet(target.prior, [sl for _, sl in target.body_blocks], alpha=alpha, weight=weight)
    times = np.empty(len(rows))
    for k, (a, y) in enumerate(rows):
        s = time.perf_counter()
        est.update(a, y)
        times[k] = time.perf_counter() - s
    med, p99 = np.median(times) * 1e6, np.percentile(times, 99) * 1e6
    verdict = ", ".join(f"{name} {'met' if 1e6 / v >= target_hz else 'NOT met'}"
                        for name, v in (("median", med), ("p99", p99)))
    print(f"{label:<34} {target.n_params:>4} {med:9.1f} {p99:9.1f} {1e6 / med:10.0f} "
          f"{1e6 / p99:10.0f} {build:9.1f}   target {target_hz:.0f} Hz: {verdict}")


def measure_session(label: str, target, ds, options: OnlineOptions, batch: int, target_hz: float) -> None:
    """Per-sample cost of :meth:`OnlineSession.push_batch` over batches of ``batch`` samples."""
    session = OnlineSession(target, options)
    times = []
    for k in range(0, len(ds), batch):
        s = time.perf_counter()
        session.push_batch(ds.t[k:k + batch], ds.q[k:k + batch], ds.dq[k:k + batch], ds.tau[k:k + batch])
        times.append((time.perf_counter() - s) / len(ds.t[k:k + batch]))
    times = np.array(times[10:])  # the first batches are withheld while the filters settle
    med, p99 = np.median(times) * 1e6, np.percentile(times, 99) * 1e6
    verdict = ", ".join(f"{name} {'met' if 1e6 / v >= target_hz else 'NOT met'}"
                        for name, v in (("median", med), ("p99", p99)))
    print(f"{label:<34} {target.n_params:>4} {med:9.1f} {p99:9.1f} {1e6 / med:10.0f} {1e6 / p99:10.0f} "
          f"{session.snapshot().updates:>9}   target {target_hz:.0f} Hz: {verdict}")


def main() -> int:
    model = RobotModel.from_mjcf(ROOT / "test" / "robots" / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.04 / 6)
    ds = simulate_dataset(model, duration=10.0, seed=1, payload=payload)
    print(f"{'update':<34} {'p':>4} {'med [us]':>9} {'p99 [us]':>9} {'med [Hz]':>10} {'p99 [Hz]':>10} "
          f"{'rows [us]':>9}")
    measure("payload (10 parameters)", payload_target(model, "hand"), ds, 10.0, 400.0, 10_000)
    arm = RobotModel.from_mjcf(ROOT / "test" / "robots" / "panda.xml", joint_terms=("Fc", "Fv"))
    measure("whole arm (bodies + friction)", arm_target(arm), ds, 1.0, 400.0, 1_000)
    options = OnlineOptions(alpha=10.0, torque_noise=0.05, sample_rate=ds.sample_rate)
    batch = round(ds.sample_rate / 100.0)  # the node's default process_rate: 100 Hz
    print(f"\n{'session, per sample (batches of ' + str(batch) + ')':<34} {'p':>4} {'med [us]':>9} "
          f"{'p99 [us]':>9} {'med [Hz]':>10} {'p99 [Hz]':>10} {'updates':>9}")
    measure_session("payload, rls_logdet", payload_target(model, "hand"), ds, options, batch, 1_000)
    measure_session("payload, momentum", payload_target(model, "hand"), ds,
                    OnlineOptions(**{**options.as_dict(), "method": "momentum"}), batch, 1_000)
    measure_session("whole arm, rls_logdet", arm_target(arm), ds, OnlineOptions(**{**options.as_dict(),
                    "alpha": 1.0}), batch, 1_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
