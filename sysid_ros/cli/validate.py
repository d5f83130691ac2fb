"""``sysid validate``: the validation suite."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from sysid_ros.core.batch.identify import (
    METHODS,
)
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel, joint_terms
from sysid_ros.core.output_paths import check_folder
from sysid_ros.core.report.html import write_report
from sysid_ros.core.resources import default_robot_path
from sysid_ros.core.sim.synthetic import Payload


def _validate(args: argparse.Namespace) -> int:
    from sysid_ros.core.report import validation as v

    check_folder(args.out, "--out")
    model_path = Path(args.model) if args.model else default_robot_path()
    changes = {k: getattr(args, k) for k in ("seed", "duration", "experiments", "bandwidth_hz",
                                             "torque_noise") if getattr(args, k) is not None}
    if args.result and args.method:
        changes["method"] = args.method
    options = v.ValidationOptions.quick(**changes) if args.quick else v.ValidationOptions(**changes)
    checks = v.check_names([c.strip() for c in args.only.split(",") if c.strip()]) if args.only else v.CHECKS
    payload = Payload.parse(args.payload) if args.payload else None
    if not args.verbose:  # the repeated identifications' warnings are in their results
        logging.getLogger("sysid_ros.core.batch").setLevel(logging.ERROR)

    def say(msg: str) -> None:
        print(f"[sysid validate] {msg}", file=sys.stderr)

    if args.truth and not args.result:
        raise SysIdError("--truth describes the robot a --result was identified on; give --result too")
    if args.result:
        identified = v.Identified.from_result(args.result, model_path)
        truth = (v.Truth.load(args.truth, payload=payload) if args.truth
                 else v.Truth(RobotModel.load(str(model_path)), payload, str(model_path)))
    else:
        identified, truth = v.identify_synthetic(
            model_path, args.out, method=args.method or "pc_ls",
            joint_terms=joint_terms(args.friction, not args.no_armature), payload=payload,
            deviation=args.deviation, options=options, progress=say)
    say(f"validating {identified.source} ({identified.method}) against {truth.source}")
    report = v.run_validation(identified, truth, options, checks=checks, progress=say)
    paths = v.write_report(args.out, report, plots=not args.no_plots)
    paths.append(write_report(args.out))  # the identified result's page with the suite's checks
    print("\n".join(report.lines()))
    for p in paths:
        print(f"wrote {p}")
    failed = [c.name for c in report.checks if not c.passed]
    if failed:
        print(f"sysid validate: {len(failed)} of {len(report.checks)} checks failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid validate`` parser."""
    p = sub.add_parser("validate", help="the validation suite: parameter recovery, torque prediction, "
                       "computed-torque tracking, payload generalisation, repeatability, feed-forward vs "
                       "PD, each PASS/FAIL against a simulated truth (JSON + PNG)")
    p.add_argument("--model", help="MJCF or URDF of the nominal robot (default: the package's default robot)")
    p.add_argument("--result", metavar="RESULT_JSON", help="result.json (or its folder) of 'sysid identify' "
                   "on --model (an arm result); default: identify a randomised truth first (--method)")
    p.add_argument("--truth", metavar="FILE", help="with --result: the robot it was identified on, an "
                   "MJCF/URDF or the truth.json of 'sysid simulate' (default: --model itself)")
    p.add_argument("--payload", metavar="SPEC", help="body=NAME,mass=KG,com=X,Y,Z[,inertia=...]: the payload "
                   "the identification data carried (default: the truth.json's; without --result a "
                   "0.5 kg cube 4 cm above the last link); the payload check tests 8/5 of it")
    p.add_argument("--method", choices=METHODS, help="without --result: the identification method "
                   "(default pc_ls); with --result: repeatability's (default: the result's)")
    p.add_argument("--friction", default="coulomb,viscous",
                   help="without --result: joint friction terms identified (default: %(default)s)")
    p.add_argument("--no-armature", action="store_true", help="without --result: no rotor inertia")
    p.add_argument("--deviation", type=float, default=0.2, help="without --result: the truth's parameters "
                   "off the nominal by up to this fraction (default: %(default)s)")
    p.add_argument("--duration", type=float, help="one identification experiment [s] (default 20, quick 12)")
    p.add_argument("--experiments", type=int, help="repeatability's identifications (default 10, quick 3)")
    p.add_argument("--bandwidth", dest="bandwidth_hz", type=float, help="tracking loops' bandwidth [Hz] "
                   "(default 2)")
    p.add_argument("--torque-noise", type=float, help="torque sensor noise of the experiments [N·m] "
                   "(default 0.05)")
    p.add_argument("--seed", type=int, help="every simulated draw derives from it (default 0)")
    p.add_argument("--quick", action="store_true", help="short runs (tests): 12 s experiments, 3 "
                   "repetitions, 5 s held-out and tracking runs")
    p.add_argument("--only", metavar="CHECK,..", help="run only these checks (parameter_recovery, "
                   "torque_prediction, computed_torque_tracking, payload_generalisation, repeatability, "
                   "feedforward_vs_pd)")
    p.add_argument("--out", default="out/validate", help="output folder (default: %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    p.set_defaults(func=_validate)

