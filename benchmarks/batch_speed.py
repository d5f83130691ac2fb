#!/usr/bin/env python3
"""Batch solver speed on a 6-DOF arm (UR5e, 60 inertial + 18 joint parameters): an 8 s excitation
recorded at 5 kHz with sensor noise.

Targets (issue 3): pc_iv total under 4 s (the constrained-IV seed reports 40 s in MATLAB);
dual_metric with 2000 samples under 20 s; issue 16: pc_iv under 1 s, dual_metric under 3 s.
Prints wall times of each stage: the median of ``--repeats`` runs (the first one pays the imports
and numba's cache loads), BLAS on one thread as ``sysid identify`` runs it, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method  # noqa: E402
from sysid_ros.core.blas import single_threaded_blas  # noqa: E402
from sysid_ros.core.data.preprocessing import Preprocessing  # noqa: E402
from sysid_ros.core.model.target import arm_target  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import simulate_dataset  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "test" / "robots" / "ur5e.xml"))
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--samples", type=int, default=2000, help="dual-metric SDP samples")
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs of each method; the median is printed (the first run pays imports)")
    parser.add_argument("--json", action="store_true", help="also print the totals [s] as one JSON line")
    args = parser.parse_args()
    with single_threaded_blas():  # as sysid identify and the batch_solver node run it
        return _run(args)


def _run(args: argparse.Namespace) -> int:

    model = RobotModel.from_mjcf(args.model, joint_terms=("Fc", "Fv", "Ia"))
    t0 = time.perf_counter()
    ds = simulate_dataset(RobotModel.from_mjcf(args.model), duration=args.duration, rate=args.rate,
                          sensor=SensorModel(position_noise=1e-5, torque_noise=0.05, seed=1), seed=4)
    print(f"data: {len(ds)} samples of {len(ds.joint_names)} joints at {ds.sample_rate:.0f} Hz "
          f"(simulated in {time.perf_counter() - t0:.1f} s, not counted)")
    t0 = time.perf_counter()
    target = arm_target(model)
    t_target = time.perf_counter() - t0
    print(f"{model.n_params} standard parameters, {target.base.rank} base; model set-up {t_target:.2f} s")
    print(f"{'stage':<44} {'time [s]':>9}")
    runs = (("pc_iv", IdentifyOptions(method="pc_iv"), Preprocessing(bandwidth=5.0, decimation=25)),
            # finer decimation so that 2000 usable samples remain for the SDP
            ("dual_metric", IdentifyOptions(method="dual_metric", max_samples=args.samples),
             Preprocessing(bandwidth=5.0, decimation=10)))
    totals = {}
    for method, options, settings in runs:
        times = []
        load = os.getloadavg()[0]
        for _ in range(max(1, args.repeats)):
            t0 = time.perf_counter()
            prep = prepare(ds, target, settings)
            t_prep = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = run_method(prep, options)
            times.append((t_prep, time.perf_counter() - t0))
        t_prep, t_solve = np.median(times, axis=0)
        total = np.median(np.sum(times, axis=1))
        note = (f"{result.solver.iterations} iterations" if method == "pc_iv"
                else f"{result.diagnostics.extra.get('samples')} samples")
        print(f"{method + ': filter, regressor, decimate':<44} {t_prep:9.2f}")
        print(f"{method + ': solve (' + note + ')':<44} {t_solve:9.2f}")
        print(f"{method + ': TOTAL':<44} {total:9.2f}   "
              f"(relative error {result.diagnostics.relative_error:.2f} %, consistent "
              f"{result.consistent})")
        print(f"{'':<44} {'':>9}   median of {len(times)} runs, first {sum(times[0]):.2f} s "
              f"(imports), range {min(map(sum, times)):.2f}–{max(map(sum, times)):.2f} s; load "
              f"average {load:.1f} → {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        totals[method] = {"total_s": float(total), "runs_s": [float(sum(t)) for t in times],
                          "relative_error_pct": result.diagnostics.relative_error}
    if args.json:  # for benchmarks/speed_table.py
        print(json.dumps(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
