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

The third (issue 16's row, ``--replay-only`` for it alone) is ``sysid identify --method rls_logdet``'s
replay of a 12.6 s, 1 kHz simulated bag of the whole Panda with Coulomb and viscous friction
(94 parameters; written to and read back from an MCAP bag, truth included as the CLI has it):
wall time and real-time factor of the replay, its process CPU time, per-update wall time (median,
99th percentile; row building and the divergence to the truth included), medians of
``--repeats`` runs. ``--load N`` runs N CPU-bound processes beside it (the demo's
``benchmarks/demo_repeat.py --load``); the machine's load average is printed with it: per-update
wall percentiles include the time the scheduler gives to other processes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.data.bag import dataset_topics, read_data, write_bag  # noqa: E402
from sysid_ros.core.model.target import arm_target, payload_target  # noqa: E402
from sysid_ros.core.online import ForceRows, OnlineOptions, OnlineSession  # noqa: E402
from sysid_ros.core.online.replay import replay  # noqa: E402
from sysid_ros.core.online.rls_logdet import RLSLogDet  # noqa: E402
from sysid_ros.core.report.metrics import truth_parameters  # noqa: E402
from sysid_ros.core.sim.plant import SensorModel  # noqa: E402
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


def _busy() -> None:
    """A CPU-bound loop (load beside the replay)."""
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def measure_replay(duration: float, repeats: int) -> dict:
    """Issue 16's row: the CLI's rls_logdet replay of a simulated 1 kHz bag of the whole Panda
    with friction; medians (and ranges) over ``repeats`` runs."""
    model = RobotModel.from_mjcf(ROOT / "test" / "robots" / "panda.xml", joint_terms=("Fc", "Fv"))
    sim = simulate_dataset(model, duration=duration, rate=1000.0, seed=0,
                           sensor=SensorModel(torque_noise=0.05, velocity_noise=0.002, seed=1))
    with tempfile.TemporaryDirectory() as tmp:
        bag = write_bag(Path(tmp) / "bag", dataset_topics(sim), truth=sim.truth)
        ds = read_data(bag, joint_names=model.dof_joint_names).for_model(model)
    target = arm_target(model)
    truth = truth_parameters(ds.truth, target)
    span_s = float(ds.t[-1] - ds.t[0]) + 1.0 / ds.sample_rate  # [s] of data replayed
    options = OnlineOptions(method="rls_logdet", torque_noise=0.05, sample_rate=ds.sample_rate)
    runs = []
    update = RLSLogDet.update
    cpu_times: list[float] = []

    def timed(self, a, y):  # the estimator's own update in thread CPU time (preemption excluded)
        start = time.thread_time()
        try:
            return update(self, a, y)
        finally:
            cpu_times.append(time.thread_time() - start)

    for _ in range(repeats):
        cpu_times.clear()
        load = os.getloadavg()[0]
        RLSLogDet.update = timed
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            session = replay(ds, target, options, truth=truth, progress=lambda _msg: None)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            RLSLogDet.update = update
        upd = np.array(session.estimator.log.update_time) * 1e3
        core = np.array(cpu_times) * 1e3
        snap = session.snapshot()
        runs.append((wall, span_s / wall, cpu, np.median(upd), np.percentile(upd, 99), load,
                     snap.updates, snap.consistent, np.median(core), np.percentile(core, 99)))
    r = np.array(runs, dtype=float)
    med = np.median(r, axis=0)

    def span(i: int, fmt: str) -> str:
        return f"{med[i]:{fmt}} ({r[:, i].min():{fmt}}-{r[:, i].max():{fmt}})"

    print(f"\nreplay (sysid identify --method rls_logdet): {span_s:.1f} s at {ds.sample_rate:.0f} Hz, "
          f"whole Panda + Fc, Fv ({target.n_params} parameters), {int(med[6])} updates; "
          f"median (range) of {repeats} runs")
    print(f"  wall {span(0, '.2f')} s, real-time factor {span(1, '.2f')} (target >= 2), "
          f"CPU {span(2, '.2f')} s (CPU real-time factor {span_s / med[2]:.2f})")
    print(f"  update (wall, rows and logging included) median {span(3, '.3f')} ms, "
          f"p99 {span(4, '.3f')} ms (target < 1 ms)")
    print(f"  estimator update, thread CPU time: median {span(8, '.3f')} ms, p99 {span(9, '.3f')} ms")
    print(f"  load average {span(5, '.1f')} on {os.cpu_count()} cores; every final estimate "
          f"consistent: {bool(r[:, 7].all())}")
    return {"span_s": span_s, "wall_s": float(med[0]), "realtime_factor": float(med[1]),
            "update_median_ms": float(med[3]), "update_p99_ms": float(med[4]),
            "cpu_update_median_ms": float(med[8]), "cpu_update_p99_ms": float(med[9]),
            "consistent": bool(r[:, 7].all()), "repeats": repeats}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay-only", action="store_true", help="only the replay row (issue 16)")
    parser.add_argument("--repeats", type=int, default=5, help="replay runs (medians printed)")
    parser.add_argument("--duration", type=float, default=12.6, help="replayed bag [s]")
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes beside the replay")
    parser.add_argument("--json", action="store_true", help="also print the replay's medians as JSON")
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for h in hogs:
        h.start()
    try:
        if not args.replay_only:
            tables()
        figures = measure_replay(args.duration, args.repeats)
        if args.json:  # for benchmarks/speed_table.py
            print(json.dumps(figures))
    finally:
        for h in hogs:
            h.terminate()
    return 0


def tables() -> None:
    model = RobotModel.from_mjcf(ROOT / "test" / "robots" / "panda.xml")
    payload = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.04 / 6)
    ds = simulate_dataset(model, duration=10.0, seed=1, payload=payload)
    print(f"{'update':<34} {'p':>4} {'med [us]':>9} {'p99 [us]':>9} {'med [Hz]':>10} {'p99 [Hz]':>10} "
          f"{'rows [us]':>9}")
    measure("payload (10 parameters)", payload_target(model, "hand"), ds, 10.0, 400.0, 10_000)
    arm = RobotModel.from_mjcf(ROOT / "test" / "robots" / "panda.xml", joint_terms=("Fc", "Fv"))
    measure("whole arm (bodies + friction)", arm_target(arm), ds, 1.0, 400.0, 1_000)
    options = OnlineOptions(alpha=10.0, torque_noise=0.05, sample_rate=ds.sample_rate)
    batch = round(ds.sample_rate / 25.0)  # the node's default process_rate: 25 Hz
    print(f"\n{'session, per sample (batches of ' + str(batch) + ')':<34} {'p':>4} {'med [us]':>9} "
          f"{'p99 [us]':>9} {'med [Hz]':>10} {'p99 [Hz]':>10} {'updates':>9}")
    measure_session("payload, rls_logdet", payload_target(model, "hand"), ds, options, batch, 1_000)
    measure_session("payload, momentum", payload_target(model, "hand"), ds,
                    OnlineOptions(**{**options.as_dict(), "method": "momentum"}), batch, 1_000)
    measure_session("whole arm, rls_logdet", arm_target(arm), ds, OnlineOptions(**{**options.as_dict(),
                    "alpha": 1.0}), batch, 1_000)


if __name__ == "__main__":
    sys.exit(main())
