#!/usr/bin/env python3
"""Regressor speed on the Panda: batched (N = 10 000) and single-sample time per sample, against
MuJoCo's mj_inverse in a Python loop (what a user would otherwise call per sample).

Targets (issue 2): batched <= 2x mj_inverse per sample; single sample <= 150 us.
Prints medians over repetitions; the machine's other load shows up as spread (min..max).
"""

from __future__ import annotations

import argparse
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
    fn()  # warm-up: caches, first-touch of memory
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "test" / "robots" / "panda.xml"))
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    model = RobotModel.from_mjcf(args.model)
    n = args.samples
    q, dq, ddq = random_states(model, n, seed=0)
    data = mujoco.MjData(model.mj)
    out = np.empty((n, model.nv))

    def inverse_loop():
        for i in range(n):
            data.qpos[:], data.qvel[:], data.qacc[:] = q[i], dq[i], ddq[i]
            mujoco.mj_inverse(model.mj, data)
            out[i] = data.qfrc_inverse

    def single_loop():
        for i in range(200):
            torque_regressor(model, q[i], dq[i], ddq[i])

    batched = _times(lambda: torque_regressor(model, q, dq, ddq), args.repeat)
    single = _times(single_loop, args.repeat)
    inverse = _times(inverse_loop, args.repeat)
    med = {k: statistics.median(v) for k, v in (("b", batched), ("s", single), ("i", inverse))}
    per_b, per_s, per_i = med["b"] / n * 1e6, med["s"] / 200 * 1e6, med["i"] / n * 1e6
    print(f"model {Path(args.model).name}: nv={model.nv}, p={model.n_params} parameters")
    print(f"{'measure':<42} {'median':>10} {'min..max':>20}")
    label = f"batched regressor, N={n}, per sample"
    print(f"{label:<42} {per_b:8.2f} us "
          f"{min(batched) / n * 1e6:8.2f}..{max(batched) / n * 1e6:.2f} us")
    print(f"{'single-sample regressor':<42} {per_s:8.1f} us "
          f"{min(single) / 200 * 1e6:8.1f}..{max(single) / 200 * 1e6:.1f} us")
    print(f"{'mj_inverse (Python loop), per sample':<42} {per_i:8.2f} us "
          f"{min(inverse) / n * 1e6:8.2f}..{max(inverse) / n * 1e6:.2f} us")
    print(f"batched / mj_inverse = {per_b / per_i:.2f} (target <= 2); "
          f"single = {per_s:.0f} us (target <= 150)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
