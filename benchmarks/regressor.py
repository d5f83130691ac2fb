#!/usr/bin/env python3
"""Torque-regressor speed on the Panda (7 DOF) against MuJoCo's mj_inverse and Pinocchio's
computeJointTorqueRegressor, all measured in this one process (issue 16, "Speed").

Rows: the single-sample regressor (one call per sample, what the online node and every per-sample
loop pay) and the batched regressor (N = 10 000 in one call), each per sample. mj_inverse and
Pinocchio are called per sample from Python the same way (set the state, call, copy the result).
Targets: single <= 2x mj_inverse; batched <= 1x mj_inverse. Medians over repeats (default 5),
spread as min..max; the load average is printed because other processes share the machine, and
the CPU time of this thread beside the wall time (on a loaded machine the wall time also counts
the time the process waited for a core).
Pinocchio (`pin`, in requirements-test.txt) is skipped with a note when it is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core import RobotModel, random_states, torque_regressor  # noqa: E402


def _times(fn, repeat: int) -> list[tuple[float, float]]:
    """``(wall, thread CPU)`` seconds of ``repeat`` calls after one warm-up call."""
    fn()  # warm-up: compiled kernels loaded, caches, first touch of memory
    out = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.thread_time()
        fn()
        out.append((time.perf_counter() - wall, time.thread_time() - cpu))
    return out


def _pinocchio_loop(path: str, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray):
    """Per-sample loop over Pinocchio's joint-torque regressor, or None without `pin`."""
    try:
        import pinocchio as pin
    except ImportError:
        return None
    model = pin.buildModelFromMJCF(path)
    if model.nq != q.shape[1]:
        return None
    data = model.createData()

    def loop():
        for i in range(len(q)):
            pin.computeJointTorqueRegressor(model, data, q[i], dq[i], ddq[i])

    return loop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "test" / "robots" / "panda.xml"))
    parser.add_argument("--samples", type=int, default=10_000, help="batch size N")
    parser.add_argument("--single", type=int, default=1000, help="samples of the per-sample loops")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="also print the medians as one JSON line")
    args = parser.parse_args()

    model = RobotModel.from_mjcf(args.model)
    n, n1 = args.samples, min(args.single, args.samples)
    q, dq, ddq = random_states(model, n, seed=0)
    data = mujoco.MjData(model.mj)
    tau = np.empty((n, model.nv))

    def inverse_loop():
        for i in range(n1):
            data.qpos[:], data.qvel[:], data.qacc[:] = q[i], dq[i], ddq[i]
            mujoco.mj_inverse(model.mj, data)
            tau[i] = data.qfrc_inverse

    def single_loop():
        for i in range(n1):
            torque_regressor(model, q[i], dq[i], ddq[i])

    pin_loop = _pinocchio_loop(args.model, q[:n1], dq[:n1], ddq[:n1])
    load = os.getloadavg()[0]
    # interleave the measurements so that a change of load hits all of them alike
    runs: dict[str, list[tuple[float, float]]] = {"single": [], "batched": [], "inverse": [], "pin": []}
    for _ in range(args.repeat):
        runs["inverse"] += [(w / n1, c / n1) for w, c in _times(inverse_loop, 1)]
        runs["single"] += [(w / n1, c / n1) for w, c in _times(single_loop, 1)]
        runs["batched"] += [(w / n, c / n) for w, c in _times(lambda: torque_regressor(model, q, dq, ddq), 1)]
        if pin_loop is not None:
            runs["pin"] += [(w / n1, c / n1) for w, c in _times(pin_loop, 1)]
    wall = {k: statistics.median(w for w, _ in v) * 1e6 for k, v in runs.items() if v}
    cpu = {k: statistics.median(c for _, c in v) * 1e6 for k, v in runs.items() if v}

    print(f"model {Path(args.model).name}: nv={model.nv}, p={model.n_params} parameters; "
          f"load average {load:.1f} on {os.cpu_count()} cores; median of {args.repeat}")
    print(f"{'per sample':<40} {'wall':>9} {'min..max':>17} {'/ mj_inv':>8} {'CPU':>9} {'/ mj_inv':>8}")

    def row(label: str, key: str, target: str = "") -> None:
        if key not in wall:
            print(f"{label:<40} (pin not installed)")
            return
        lo, hi = (f(w for w, _ in runs[key]) * 1e6 for f in (min, max))
        print(f"{label:<40} {wall[key]:6.2f} us {lo:7.2f}..{hi:<7.2f} {wall[key] / wall['inverse']:8.2f} "
              f"{cpu[key]:6.2f} us {cpu[key] / cpu['inverse']:8.2f}  {target}")

    row("mj_inverse (Python loop)", "inverse")
    row("Pinocchio computeJointTorqueRegressor", "pin")
    row("torque_regressor, one sample per call", "single", "(target <= 2)")
    row(f"torque_regressor, batched N={n}", "batched", "(target <= 1)")
    if args.json:  # for benchmarks/speed_table.py: per-sample medians [us], wall and thread CPU
        print(json.dumps({"wall_us": wall, "cpu_us": cpu, "load": load, "nv": model.nv}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
