#!/usr/bin/env python3
"""Whole-command time of ``sysid identify --method ols`` on a 20 s UR5e bag recorded at 1 kHz
(issue 16, "Speed"), with a breakdown by stage, and the same data as CSV for comparison.

The bag is made by ``sysid simulate test/robots/ur5e.xml --duration 20 --rate 1000`` (not
counted). Every run is a fresh process (interpreter start included), median of ``--repeats``:

* ``bag`` / ``bag --no-plots`` / ``csv``: the plain command, wall time and the process's CPU time
  (user + system: what the command costs, whatever the machine's load); ``bag, 1 BLAS thread``:
  the same with ``OPENBLAS_NUM_THREADS=1`` (on a machine loaded beyond its cores, BLAS threads
  spin waiting for each other; ``sysid identify`` now limits BLAS to one thread itself, see
  ``sysid_ros/core/blas.py``, so the two should agree);
* the breakdown: the same command in a process that times its stages by wrapping the
  application layer's calls (``sysid_ros.app.identify``: import of ``sysid_ros.cli``; bag read;
  model set-up; prepare; solve; evaluate and write; the rest is interpreter start, argument
  parsing and exit), with BLAS as configured and on one thread.

Target (issue 16): the bag command under 2 s; its bag read was 10.8 s on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: OpenBLAS on one thread: on a machine busier than its cores, BLAS threads wait for each other
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
STAGES = ("import", "bag read", "model set-up", "prepare", "solve", "evaluate + write")


def _child(argv: list[str]) -> int:
    """Run ``sysid identify ARGV`` in this process, timing its stages; print them as JSON."""
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    import sysid_ros.cli as cli

    times = {"import": time.perf_counter() - start}

    def timed(stage: str, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times[stage] = times.get(stage, 0.0) + time.perf_counter() - t0

        return wrapper

    import sysid_ros.app.identify as app  # the stages are the application layer's calls

    app.read_data = timed("bag read", app.read_data)
    app.RobotModel.load = staticmethod(timed("model set-up", app.RobotModel.load))
    app.batch_target = timed("model set-up", app.batch_target)
    app.prepare = timed("prepare", app.prepare)
    app.run_method = timed("solve", app.run_method)
    app.evaluate = timed("evaluate + write", app.evaluate)
    app.write_outputs = timed("evaluate + write", app.write_outputs)
    with open(os.devnull, "w") as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            sys.argv = ["sysid", "identify", *argv]
            code = cli.main()  # as the command line calls it (argv None: the process's own command)
        finally:
            sys.stdout = stdout
    print(json.dumps(times))
    return code


#: CPU seconds (user + system) of each finished child process by command label, beside its wall
#: time: on a machine shared beyond its cores the wall time mostly measures the others' load
CPU: dict[str, list[float]] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str], env: dict[str, str] | None = None, label: str | None = None
         ) -> tuple[float, str]:
    t0, cpu0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env=None if env is None else os.environ | env)
    wall = time.perf_counter() - t0
    if label is not None:
        CPU.setdefault(label, []).append(_children_cpu() - cpu0)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return wall, proc.stdout


def _read_figures(bag: Path, repeats: int) -> str:
    """In-process bag read times (median): joint states only, with the commands, and rosbags
    deserialising every message into objects (what the reader did per message before)."""
    sys.path.insert(0, str(ROOT))
    from rosbags.rosbag2 import Reader

    from sysid_ros.core.data.bag import read_bag, typestore

    store = typestore()

    def objects() -> None:
        with Reader(bag) as reader:
            for conn, _, raw in reader.messages():
                store.deserialize_cdr(raw, conn.msgtype)

    times = {}
    for name, fn in (("joint states", lambda: read_bag(bag, commands=False)),
                     ("with commands", lambda: read_bag(bag)), ("rosbags objects", objects)):
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t0)
        times[name] = statistics.median(runs)
    ratio = times["rosbags objects"] / times["with commands"]
    return (f"  bag read in one process: joint states {times['joint states']:.2f} s, with commands "
            f"{times['with commands']:.2f} s; rosbags deserialising every message into objects "
            f"{times['rosbags objects']:.2f} s (ratio {ratio:.1f})")


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return _child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "test" / "robots" / "ur5e.xml"))
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--method", default="ols")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--armature", action="store_true",
                        help="identify the rotor inertia too (the simulated arm has it): the "
                             "plausible fit is then interior and needs no conic solve")
    args = parser.parse_args()

    env_python = [sys.executable]
    sysid = [*env_python, "-m", "sysid_ros.cli"]
    with tempfile.TemporaryDirectory(prefix="identify-bag-speed-") as tmp:
        bag = Path(tmp) / "bag"
        _run([*sysid, "simulate", args.model, "--out", str(bag), "--duration", str(args.duration),
              "--rate", str(args.rate), "--storage", args.storage])
        csv = Path(tmp) / "data.csv"
        _run([*env_python, "-c", "import sys; from sysid_ros.core.data.bag import read_bag; "
              "from sysid_ros.core.data.dataset import write_csv; "
              "write_csv(read_bag(sys.argv[1]), sys.argv[2])", str(bag), str(csv)])
        common = ["--model", args.model, "--method", args.method, *(["--armature"] if args.armature else [])]
        load = os.getloadavg()[0]
        print(f"sysid identify --method {args.method}{' --armature' if args.armature else ''}: "
              f"{args.duration:g} s at {args.rate:g} Hz "
              f"({args.storage} bag; UR5e), median of {args.repeats} fresh processes; "
              f"load average {load:.1f} on {os.cpu_count()} CPUs")
        walls: dict[str, list[float]] = {"bag": [], "bag --no-plots": [], "bag, 1 BLAS thread": [],
                                         "csv": []}
        stages = {mode: {s: [] for s in (*STAGES, "rest")} for mode in ("default", "1 BLAS thread")}
        for k in range(args.repeats):
            out = Path(tmp) / f"out{k}"
            walls["bag"].append(_run([*sysid, "identify", str(bag), *common, "--out", str(out)],
                                     label="bag")[0])
            walls["bag --no-plots"].append(_run([*sysid, "identify", str(bag), *common, "--no-plots",
                                                 "--out", str(out)], label="bag --no-plots")[0])
            walls["bag, 1 BLAS thread"].append(_run([*sysid, "identify", str(bag), *common, "--out",
                                                     str(out)], env=ONE_THREAD,
                                                    label="bag, 1 BLAS thread")[0])
            walls["csv"].append(_run([*sysid, "identify", str(csv), *common, "--out", str(out)],
                                     label="csv")[0])
            for mode, env in (("default", None), ("1 BLAS thread", ONE_THREAD)):
                wall, text = _run([*env_python, __file__, "--child", str(bag), *common,
                                   "--out", str(out)], env=env)
                times = json.loads(text.strip().splitlines()[-1])
                for stage in STAGES:
                    stages[mode][stage].append(times.get(stage, 0.0))
                stages[mode]["rest"].append(wall - sum(times.get(s, 0.0) for s in STAGES))
        for what, values in walls.items():
            print(f"  whole command, {what:<20} {_summary(values)};  CPU {_summary(CPU[what])}")
        print(f"  breakdown (bag, with plots)   {'BLAS default':<34} 1 BLAS thread")
        for stage in (*STAGES, "rest"):
            print(f"    {stage:<26} {_summary(stages['default'][stage]):<34} "
                  f"{_summary(stages['1 BLAS thread'][stage])}")
        ratio = statistics.median(walls["bag"]) / statistics.median(walls["csv"])
        print(f"  bag / csv {ratio:.2f}; target: bag < 2 s "
              f"({'met' if statistics.median(walls['bag']) < 2.0 else 'not met'})")
        print(_read_figures(bag, args.repeats))
        print(f"  load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
