#!/usr/bin/env python3
"""BLAS on 1 vs 2 threads for the batch path (issue 16, "Speed"): the stages of
``sysid identify --method ols`` on a 20 s UR5e bag at 1 kHz, and the linear algebra they do, at
the project's matrix sizes.

Everything runs in one process, alternating ``threadpool_limits(1)`` and ``threadpool_limits(2)``
per repeat (so load changes hit both alike); median of ``--repeats``. The load average is printed
before and after: on a machine busier than its cores, a second BLAS thread waits for a core.

Matrix sizes (UR5e, friction Fc+Fv, default preprocessing): model set-up does a QR of the random
states' stacked regressor (``(6·K, 84)``); ``prepare`` builds the regressor at full rate
(``(20000, 6, 84)``) and decimates it to ``(776, 6, 84)``; OLS solves a ``(4465, 58)`` least
squares on the base columns.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method  # noqa: E402
from sysid_ros.core.data.bag import read_data  # noqa: E402
from sysid_ros.core.data.preprocessing import Preprocessing  # noqa: E402
from sysid_ros.core.model.robot import RobotModel  # noqa: E402
from sysid_ros.core.model.target import batch_target  # noqa: E402


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "test" / "robots" / "ur5e.xml"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="blas-threads-") as tmp:
        bag = Path(tmp) / "bag"
        subprocess.run([sys.executable, "-m", "sysid_ros.cli", "simulate", args.model, "--out", str(bag),
                        "--duration", "20", "--rate", "1000"], check=True, capture_output=True)
        model = RobotModel.from_mjcf(args.model)
        target = batch_target(model, "")
        ds = read_data(bag, joint_names=model.dof_joint_names, commands=False).for_model(model)
        prep = prepare(ds, target, Preprocessing())
        w, rhs, _ = prep.rows()
        full = rng.standard_normal((20000 * 6, prep.x.shape[-1]))
        states = rng.standard_normal((6 * 200, prep.x.shape[-1]))
        small = rng.standard_normal((20000, 6, 6))
        work = {
            "model set-up (from_mjcf + target)": lambda: batch_target(RobotModel.from_mjcf(args.model), ""),
            "prepare": lambda: prepare(ds, target, Preprocessing()),
            "solve (ols)": lambda: run_method(prep, IdentifyOptions(method="ols")),
            f"lstsq {w.shape}": lambda: np.linalg.lstsq(w, rhs, rcond=None),
            f"QR {states.shape}": lambda: np.linalg.qr(states),
            f"Yᵀ Y, Y {full.shape}": lambda: full.T @ full,
            f"batched 6x6 @ 6x{prep.x.shape[-1]}, 20000": lambda: small @ prep.x[:1].repeat(20000, 0),
        }
        print(f"BLAS threads for the batch path, median of {args.repeats} (one process, alternating); "
              f"load average before {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        times = {name: {1: [], 2: []} for name in work}
        for _ in range(args.repeats):
            for threads in (1, 2):
                with threadpool_limits(limits=threads, user_api="blas"):
                    for name, fn in work.items():
                        times[name][threads].append(_timed(fn))
        print(f"  {'':<40} {'1 thread':>10} {'2 threads':>10} {'2/1':>6}")
        for name, t in times.items():
            one, two = statistics.median(t[1]), statistics.median(t[2])
            print(f"  {name:<40} {one:9.4f}s {two:9.4f}s {two / one:6.2f}")
        print(f"  load average after {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
