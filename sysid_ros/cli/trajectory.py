"""``sysid trajectory``: an excitation trajectory as a replayable per-motor file."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from sysid_ros.core.atomic import write_json
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.output_paths import check_file


def _trajectory(args: argparse.Namespace) -> int:
    from sysid_ros.core.data.fourier import Limits
    from sysid_ros.core.data.trajectory_file import write_trajectory_file
    from sysid_ros.core.excitation.design import choose_excitation, condition_number
    from sysid_ros.core.excitation.plan import ExcitationPlan

    check_file(args.export, "--export")
    if args.save_coefficients:
        check_file(args.save_coefficients, "--save-coefficients")
    model = RobotModel.from_mjcf(args.model)
    limits = Limits.of(model, acceleration=args.max_acceleration)
    traj = choose_excitation(model, limits, coefficients_file=args.coefficients or "", optimize=args.optimize,
                             harmonics=args.harmonics, period=args.period, seed=args.seed,
                             say=lambda msg: print(msg, file=sys.stderr))
    start = traj.q0 if not args.start else np.array([float(x) for x in args.start.split(",")])
    plan = ExcitationPlan.build(model, traj, start, excitation_time=args.duration or None,
                                ramp_time=args.ramp, limits=limits)
    sampled = plan.sampled(args.rate)
    path = write_trajectory_file(args.export, sampled)
    if args.save_coefficients:
        doc = {"q0": traj.q0.tolist(), "a": traj.a.tolist(), "b": traj.b.tolist(), "period": traj.period}
        write_json(args.save_coefficients, doc)
    print(f"wrote {path}: {sampled.duration:.2f} s at {args.rate:g} Hz, {len(sampled.joints)} joints "
          f"({', '.join(f'{j}:{m}' for j, m in zip(sampled.joints, sampled.motors, strict=True))}); "
          f"condition number {condition_number(model, traj):.1f}; {plan.clamps.summary()}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid trajectory`` parser."""
    p = sub.add_parser("trajectory", help="an excitation trajectory as a replayable per-motor file")
    p.add_argument("model", help="MJCF or URDF file")
    p.add_argument("--export", required=True, metavar="FILE", help="CSV file to write")
    p.add_argument("--optimize", action="store_true", help="minimise the base regressor's condition number")
    p.add_argument("--coefficients", help="JSON {q0, a, b, period} instead of random/optimised ones")
    p.add_argument("--save-coefficients", metavar="JSON", help="also write the coefficients used")
    p.add_argument("--harmonics", type=int, default=5, help="Fourier harmonics per joint")
    p.add_argument("--period", type=float, default=10.0, help="Fourier base period [s]")
    p.add_argument("--duration", type=float, default=0.0, help="excitation length [s] (0 = one period)")
    p.add_argument("--ramp", type=float, default=2.0, help="shortest ramp in/out [s]")
    p.add_argument("--start", help="comma list of the start (and rest) pose [rad] (default: the centre)")
    p.add_argument("--rate", type=float, default=1000.0, help="samples per second in the file")
    p.add_argument("--max-acceleration", type=float, default=8.0, help="[rad/s²]")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (excitation, noise)")
    p.set_defaults(func=_trajectory)

