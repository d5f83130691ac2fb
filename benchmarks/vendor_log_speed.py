#!/usr/bin/env python3
"""Whole-command time of ``sysid identify`` on an 8 s, 1 kHz vendor log of a 7-DOF arm (issue 22,
"Speed on real logs"), beside the simulated 20 s bag, in one run.

* vendor log: :data:`~sysid_ros.core.sim.vendor_log.REAL_LIKE_7DOF` on test/robots/panda.xml
  (jittered stamps, 6 dropped cycles, an 8 ms gap, currents with drive gains, Coulomb/viscous/
  offset friction), 8 s, written as CSV; identified with ``--friction coulomb,viscous,offset
  --torque-scale <the drive gains>`` (and the armature and damping the model declares) by
  ``pc_ls`` and ``dual_metric``;
* simulated bag: ``sysid simulate test/robots/ur5e.xml --duration 20 --rate 1000`` identified by
  ``pc_ls`` with the defaults.

Every run is a fresh process (interpreter start included), ``--repeats`` times, with the package's
bytecode written beforehand (``python -m compileall sysid_ros``, as ``tools/bootstrap.sh`` does: an
installed package has its bytecode, while a host that sets PYTHONDONTWRITEBYTECODE would otherwise
compile ~100 modules from source in every process, ~0.35 s); printed: median
wall time and the process's CPU time (user + system: what the command costs whatever the
machine's load; on a shared 2-core host the wall time mostly measures the others' load). Making
the data is not counted. Target (issue 22): vendor log < 3 s for pc_ls and dual_metric.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PANDA = ROOT / "test" / "robots" / "panda.xml"
UR5E = ROOT / "test" / "robots" / "ur5e.xml"
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "77")

MAKE_LOG = """
import sys
from sysid_ros.core.data.dataset import write_csv
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.vendor_log import REAL_LIKE_7DOF, vendor_log
log = vendor_log(RobotModel.from_mjcf(sys.argv[1]), REAL_LIKE_7DOF, duration=float(sys.argv[3]), seed=3)
write_csv(log, sys.argv[2])
print(",".join(repr(float(g)) for g in REAL_LIKE_7DOF.torque_per_amp))
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str]) -> tuple[float, float, str]:
    t0, c0 = time.perf_counter(), _cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return wall, cpu, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0, help="vendor log length [s]")
    args = parser.parse_args()
    py = [sys.executable]
    compiled = subprocess.run([*py, "-m", "compileall", "-q", str(ROOT / "sysid_ros")],
                              capture_output=True, text=True, check=False)
    if compiled.returncode != 0:
        raise SystemExit(f"byte-compiling sysid_ros failed:\n{compiled.stdout}{compiled.stderr}")
    sysid = [*py, "-m", "sysid_ros.cli"]
    with tempfile.TemporaryDirectory(prefix="vendor-log-speed-") as tmp:
        csv = Path(tmp) / "vendor.csv"
        gains = _run([*py, "-c", MAKE_LOG, str(PANDA), str(csv), str(args.duration)])[2].strip()
        bag = Path(tmp) / "bag"
        _run([*sysid, "simulate", str(UR5E), "--out", str(bag), "--duration", "20", "--rate", "1000"])
        vendor = [str(csv), "--model", str(PANDA), "--friction", "coulomb,viscous,offset",
                  "--torque-scale", gains, "--no-plots"]
        rows = {f"vendor log {args.duration:g} s, pc_ls": [*vendor, "--method", "pc_ls"],
                f"vendor log {args.duration:g} s, dual_metric": [*vendor, "--method", "dual_metric"],
                "simulated bag 20 s, pc_ls": [str(bag), "--model", str(UR5E), "--method", "pc_ls",
                                              "--no-plots"]}
        load = os.getloadavg()
        print(f"sysid identify, fresh process each, median of {args.repeats}; load average "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs; sysid_ros "
              "byte-compiled before timing (compileall)")
        for label, argv in rows.items():
            walls, cpus = [], []
            for k in range(args.repeats):
                wall, cpu, _ = _run([*sysid, "identify", *argv, "--out", str(Path(tmp) / f"out{k}")])
                walls.append(wall)
                cpus.append(cpu)
            print(f"  {label:<36} wall {statistics.median(walls):6.2f} s (min {min(walls):.2f})   "
                  f"CPU {statistics.median(cpus):6.2f} s (min {min(cpus):.2f})")
        print(f"  load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
