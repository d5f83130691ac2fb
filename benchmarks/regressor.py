#!/usr/bin/env python3
"""Torque-regressor speed on the Panda (7 DOF) against MuJoCo's mj_inverse and Pinocchio's
computeJointTorqueRegressor, all measured in this one process (issue 16, "Speed").

Rows: the single-sample regressor (one call per sample, what the online node and every per-sample
loop pay) and the batched regressor (N = 10 000 in one call), each per sample. mj_inverse and
Pinocchio are called per sample from Python the same way (set the state, call, copy the result).
Targets: single <= 2x mj_inverse; batched <= 1x mj_inverse. Medians over repeats (default 5),
spread as min..max; the load average is printed because other processes share the machine.
Pinocchio (`pin`, in requirements-test.txt) is skipped with a note when it is not installed.
"""

from __future__ import annotations

import argparse
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


def _times(fn, repeat: int) -> list[float]:
    fn()  # warm-up: compiled kernels loaded, caches, first touch of memory
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
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
    runs: dict[str, list[float]] = {"single": [], "batched": [], "inverse": [], "pin": []}
    for _ in range(args.repeat):
        runs["inverse"] += [t / n1 for t in _times(inverse_loop, 1)]
        runs["single"] += [t / n1 for t in _times(single_loop, 1)]
        runs["batched"] += [t / n for t in _times(lambda: torque_regressor(model, q, dq, ddq), 1)]
        if pin_loop is not None:
            runs["pin"] += [t / n1 for t in _times(pin_loop, 1)]
    med = {k: statistics.median(v) * 1e6 for k, v in runs.items() if v}

    print(f"model {Path(args.model).name}: nv={model.nv}, p={model.n_params} parameters; "
          f"load average {load:.1f} on {os.cpu_count()} cores; median of {args.repeat}")
    print(f"{'per sample':<44} {'median':>9} {'min..max':>19} {'/ mj_inverse':>13}")

    def row(label: str, key: str, target: str = "") -> None:
        if key not in med:
            print(f"{label:<44} {'(pin not installed)':>9}")
            return
        lo, hi = min(runs[key]) * 1e6, max(runs[key]) * 1e6
        print(f"{label:<44} {med[key]:7.2f} us {lo:8.2f}..{hi:<8.2f} {med[key] / med['inverse']:8.2f}"
              f"  {target}")

    row("mj_inverse (Python loop)", "inverse")
    row("Pinocchio computeJointTorqueRegressor", "pin")
    row("torque_regressor, one sample per call", "single", "(target <= 2)")
    row(f"torque_regressor, batched N={n}", "batched", "(target <= 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
