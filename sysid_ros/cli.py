"""The ``sysid`` command line: inspect a robot model, run the offline identification demo.

    sysid inspect MODEL.xml [--json]
    sysid demo [--model MODEL.xml] [--duration S] [--seed N] [--out DIR] [--json]

Exit codes: 0 success, 1 the work failed (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .core import base_parameters, run_offline_pipeline
from .core.errors import SysIdError
from .core.model import RobotModel
from .resources import default_robot_path

log = logging.getLogger("sysid")


def _inspect(args: argparse.Namespace) -> int:
    terms = () if args.no_joint_terms else ("Fc", "Fv", "Fo", "Ia")
    model = RobotModel.from_mjcf(args.model, joint_terms=terms)
    base = base_parameters(model, seed=args.seed)
    info = {
        "model": str(Path(args.model).resolve()),
        "nq": model.nq,
        "nv": model.nv,
        "gravity": model.gravity.tolist(),
        "joints": [{"name": j.name, "type": j.type, "body": model.body_name(j.body),
                    "range": list(j.range) if j.range else None} for j in model.joints],
        "bodies": [{"name": model.body_name(b), "mass": float(model.mj.body_mass[b])}
                   for b in model.param_bodies],
        "joint_terms": list(model.joint_terms),
        "n_params": model.n_params,
        "base_rank": base.rank,
        "condition_number": base.condition_number,
        "torque_limits": [None if not np.isfinite(v) else float(v) for v in model.torque_limits()],
        "motors": {j: m.name for j, m in model.motors.items()},
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"model      {info['model']}")
    print(f"dofs       nq={model.nq} nv={model.nv}, gravity {model.gravity.tolist()}")
    for j in info["joints"]:
        rng = "unlimited" if j["range"] is None else f"[{j['range'][0]:.4g}, {j['range'][1]:.4g}]"
        motor = info["motors"].get(j["name"], "")
        print(f"  joint {j['name']:<24} {j['type']:<6} body {j['body']:<16} range {rng} {motor}")
    for b in info["bodies"]:
        print(f"  body  {b['name']:<24} mass {b['mass']:.6g} kg")
    print(f"parameters {model.n_params} ({len(model.param_bodies)} bodies x 10"
          f" + {len(model.term_joints)} joints x {len(model.joint_terms)} {list(model.joint_terms)})")
    print(f"base rank  {base.rank}")
    print(f"condition  {base.condition_number:.4g} (random excitation, unit-norm base columns)")
    return 0


def _demo(args: argparse.Namespace) -> int:
    model_path = Path(args.model) if args.model else default_robot_path()
    print(f"[sysid demo] offline pipeline on {model_path} (duration {args.duration} s, seed {args.seed})",
          file=sys.stderr)
    start = time.perf_counter()
    report = run_offline_pipeline(model_path, duration=args.duration, seed=args.seed)
    elapsed = time.perf_counter() - start
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "pipeline_report.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        print(f"[sysid demo] wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.table())
        print(f"total time {elapsed:.2f} s (simulate {report.durations['simulate']:.2f} s, "
              f"identify {report.durations['identify']:.2f} s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sysid", description="Robot arm dynamic-parameter identification.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="joints, bodies, parameter count, base rank of an MJCF model")
    p.add_argument("model", help="MJCF file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-joint-terms", action="store_true", help="rigid-body parameters only")
    p.add_argument("--seed", type=int, default=0, help="seed of the random excitation")
    p.set_defaults(func=_inspect)

    p = sub.add_parser("demo", help="simulate, identify and validate the default (or given) robot")
    p.add_argument("--model", help="MJCF file (default: the package's default robot)")
    p.add_argument("--duration", type=float, default=30.0, help="excitation length [s]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="folder for pipeline_report.json")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except SysIdError as exc:
        print(f"sysid {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
