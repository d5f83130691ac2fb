#!/usr/bin/env python3
"""Does the demo give the same answer every time, on a busy machine as on an idle one?

Runs ``sysid demo`` (the whole graph in lockstep: sim, trajectory, online estimator, recorder,
then BatchSolve) N times, optionally while CPU-bound processes run beside it, and prints per
estimate the mass and CoM errors of every run and their spread (max − min over the runs), the
recorded joint-state count and largest step of every bag, and the wall time. DDS stays on this
machine: each run in its own private domain (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``).

    python benchmarks/demo_repeat.py --runs 10 --load 2     # two busy processes beside it
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

from sysid_ros.core.data.bag import read_bag  # noqa: E402
from sysid_ros.nodes.sim_demo import DemoOptions, run_demo  # noqa: E402


def _busy() -> None:
    """A CPU-bound loop (the load beside the demo)."""
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes beside the demo")
    parser.add_argument("--excitation-time", type=float, default=30.0)
    parser.add_argument("--out", default="out/demo_repeat")
    parser.add_argument("--keep", action="store_true", help="keep every run's output folder")
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for h in hogs:
        h.start()
    rows: dict[str, list[tuple[float, float]]] = {}
    bags, walls = [], []
    try:
        for k in range(args.runs):
            out = Path(args.out) / f"run{k}"
            shutil.rmtree(out, ignore_errors=True)
            log = io.StringIO()
            start = time.perf_counter()
            summary = run_demo(DemoOptions(excitation_time=args.excitation_time, out=out,
                                           domain_id=1 + (os.getpid() + k) % 101, log=log))
            walls.append(time.perf_counter() - start)
            data = read_bag(out / "bag")
            bags.append((len(data), float(np.diff(data.t).max())))
            for name, est in summary["estimates"].items():
                rows.setdefault(name, []).append((est["mass_error_percent"], est["com_error_mm"]))
            print(f"run {k}: {walls[-1]:.1f} s wall, bag {bags[-1][0]} joint states, largest step "
                  f"{1e3 * bags[-1][1]:.3f} ms; " + ", ".join(
                      f"{n} {rows[n][-1][0]:+.3f} % / {rows[n][-1][1]:.3f} mm" for n in rows), flush=True)
            if not args.keep and k < args.runs - 1:
                shutil.rmtree(out, ignore_errors=True)
    finally:
        for h in hogs:
            h.terminate()
    print(f"\n{args.runs} runs, {args.load} CPU-bound processes beside them; wall "
          f"{min(walls):.1f}-{max(walls):.1f} s; bag sizes {sorted({b[0] for b in bags})}")
    print(f"{'estimate':<20} {'mass error % (min..max)':>26} {'spread':>9} {'CoM error mm (min..max)':>26} "
          f"{'spread':>9}")
    for name, vals in rows.items():
        m = np.array([v[0] for v in vals])
        c = np.array([v[1] for v in vals])
        print(f"{name:<20} {m.min():>+12.4f} .. {m.max():>+9.4f} {np.ptp(m):>9.2e} "
              f"{c.min():>12.4f} .. {c.max():>9.4f} {np.ptp(c):>9.2e}")
    (Path(args.out) / "spread.json").write_text(json.dumps(
        {"runs": args.runs, "load": args.load, "wall": walls, "bags": bags, "errors": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
