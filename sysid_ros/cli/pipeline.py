"""``sysid pipeline``: the offline pipeline without ROS: simulate, least squares, validate."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sysid_ros.core import run_offline_pipeline
from sysid_ros.core.atomic import write_atomic
from sysid_ros.core.json_numbers import dumps_strict
from sysid_ros.core.output_paths import check_folder
from sysid_ros.core.resources import default_robot_path


def _pipeline(args: argparse.Namespace) -> int:
    if args.out:
        check_folder(args.out, "--out")
    model_path = Path(args.model) if args.model else default_robot_path()
    print(f"[sysid pipeline] offline pipeline on {model_path} (duration {args.duration} s, seed {args.seed})",
          file=sys.stderr)
    start = time.perf_counter()
    report = run_offline_pipeline(model_path, duration=args.duration, seed=args.seed)
    elapsed = time.perf_counter() - start
    if args.out:
        path = write_atomic(Path(args.out) / "pipeline_report.json",
                            dumps_strict(report.as_dict(), indent=2) + "\n")
        print(f"[sysid pipeline] wrote {path}", file=sys.stderr)
    if args.json:
        print(dumps_strict(report.as_dict(), indent=2))
    else:
        print(report.table())
        print(f"total time {elapsed:.2f} s (simulate {report.durations['simulate']:.2f} s, "
              f"identify {report.durations['identify']:.2f} s)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid pipeline`` parser."""
    p = sub.add_parser("pipeline", help="offline pipeline without ROS: simulate, least squares, validate")
    p.add_argument("--model", help="MJCF or URDF file (default: the package's default robot)")
    p.add_argument("--duration", type=float, default=30.0, help="excitation length [s]")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (excitation, noise)")
    p.add_argument("--out", help="folder for pipeline_report.json")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_pipeline)

