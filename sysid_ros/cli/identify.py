"""``sysid identify``: identification from a bag or CSV file: batch methods, or an online estimator
replayed."""

from __future__ import annotations

import argparse
import sys

from sysid_ros.app.identify import (
    ALL_METHODS,
    AUTO_LAG,
    CHOICES,
    ONLINE_OPTIONS,
    IdentifyOutcome,
    IdentifyRequest,
    online_effort_lag,
    online_options,
    run_identify,
    verdict,
    verdict_message,
)
from sysid_ros.cli.common import add_base_option, floats
from sysid_ros.core.blas import on_one_blas_thread
from sysid_ros.core.data.columns import TIME_UNITS
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import dumps_strict
from sysid_ros.core.model.target import Plausibility
from sysid_ros.core.online.options import DISCRETISATIONS, OPTION_HELP, WEIGHTINGS, OnlineOptions
from sysid_ros.core.output_paths import check_folder
from sysid_ros.core.report.files import summary

#: IdentifyRequest field -> the ``sysid identify`` option (argparse dest) it comes from; the online
#: estimators' options (``online``) are :data:`~sysid_ros.app.identify.ONLINE_OPTIONS`, same names
FROM_ARGS: dict[str, str] = {
    **{name: name for name in IdentifyRequest.names() if name != "online"},
    "payload_body": "payload_only", "csv_columns": "columns", "plots": "no_plots",
}
#: how an option's value becomes the request's (the others are taken as parsed)
_CONVERT = {"payload_body": lambda v: v or "", "plots": lambda v: not v, "data": tuple,
            "sigmoid_shape": lambda v: _sigmoid_shape(v), "torque_scale": floats,
            "torque_offset": floats, "csv_columns": lambda v: v or "", "controller": lambda v: v or ""}


def request_from_args(args: argparse.Namespace) -> IdentifyRequest:
    """The :class:`IdentifyRequest` of parsed ``sysid identify`` options."""
    values = {name: _CONVERT.get(name, lambda v: v)(getattr(args, dest)) for name, dest in FROM_ARGS.items()}
    return IdentifyRequest(**values, online={name: getattr(args, name) for name in ONLINE_OPTIONS})


def _identify(args: argparse.Namespace) -> int:
    check_folder(args.out, "--out")
    request = request_from_args(args)
    # the batch path's matrices are small (sysid_ros/core/blas.py): one BLAS thread, from the process's
    # start in the command's own process (sysid_ros.cli.main), else limited here
    with on_one_blas_thread():
        outcome = run_identify(request, _progress, warn=_say)
    return _report(args, outcome)


def _say(message: str) -> None:
    print(f"[sysid identify] {message}", file=sys.stderr)


def _progress(stage: str | None, message: str) -> None:
    """The log lines (not the stage names: those are the node's feedback), on stderr."""
    if stage is None:
        _say(message)


def _report(args: argparse.Namespace, outcome: IdentifyOutcome) -> int:
    """What ``sysid identify`` prints (result.json with ``--json``, else the summary and the files
    written) and its exit code (:attr:`IdentifyOutcome.exit_code`, the reasons on stderr)."""
    if args.json:
        print(dumps_strict(outcome.document, indent=2))
    else:
        print(summary(outcome.result, outcome.evaluation))
        for p in outcome.paths:
            print(f"wrote {p}")
    _print_verdict(outcome.message)
    return outcome.exit_code


def _print_verdict(message: str | None) -> None:
    if message:
        print(f"sysid identify: {message}", file=sys.stderr)


def _trust(result, *, accept_cost: bool = False) -> int:
    """The exit code of ``result`` (0, or 3 with why on stderr; :func:`~sysid_ros.app.identify.verdict`)."""
    cost_warning, problems = verdict(result, accept_cost=accept_cost)
    _print_verdict(verdict_message(result.method, cost_warning, problems))
    return 3 if cost_warning or problems else 0


def _sigmoid_shape(text: str | None) -> tuple[float, float] | None:
    """``--sigmoid-shape PHI2,PHI3`` as a pair (``None`` stays ``None``: searched)."""
    values = floats(text)
    if values is None:
        return None
    if len(values) != 2:
        raise SysIdError(f"--sigmoid-shape: expected PHI2,PHI3 (steepness [s/rad], offset [rad/s]), "
                         f"got {text!r}")
    return values[0], values[1]


def _effort_lag(text: str) -> float | str:
    """``--effort-lag``: a number of sample periods or ``auto``."""
    if text.strip().lower() == AUTO_LAG:
        return AUTO_LAG
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of sample periods or 'auto', "
                                         f"got {text!r}") from None


def _online_options(args: argparse.Namespace, data_rate: float) -> OnlineOptions:
    """The session options of ``identify --method rls|rls_logdet|momentum|ekf|mhe`` (the estimator node's
    parameters of the same names); the sample rate is the data's unless given."""
    values = {name: getattr(args, name) for name in ONLINE_OPTIONS}
    return online_options(args.method, {**values, "stationary_cut": args.stationary_cut,
                                        "effort_lag": online_effort_lag(args.effort_lag, {})}, data_rate)


def _add_online_options(parser: argparse.ArgumentParser) -> None:
    """One option per :class:`OnlineOptions` field (the estimator node's parameters), with its
    default and units."""
    group = parser.add_argument_group("online estimation (--method rls, rls_logdet, momentum, ekf, mhe)")
    defaults = OnlineOptions()
    metavar = {"alpha": "A", "forgetting": "LAMBDA", "torque_noise": "NM", "weight_memory": "S",
               "cutoff": "HZ", "sample_rate": "HZ", "gap_periods": "N", "window": "S", "min_speed": "RAD_S",
               "drift": "PER_SQRT_S", "position_noise": "RAD", "velocity_noise": "RAD_S", "horizon": "S",
               "solve_rate": "HZ", "update_rate": "HZ"}
    for name in ONLINE_OPTIONS:  # method and stationary_cut: shared with the batch methods
        default = getattr(defaults, name)
        flag = "--" + name.replace("_", "-")
        if name == "sample_rate":
            group.add_argument(flag, type=float, default=None, metavar=metavar[name],
                               help=f"{OPTION_HELP[name]} (default: the data's median rate)")
        elif name in ("weighting", "momentum_scheme"):
            choices = WEIGHTINGS if name == "weighting" else DISCRETISATIONS
            group.add_argument(flag, choices=choices, default=default,
                               help=f"{OPTION_HELP[name]} (default: {default})")
        else:
            group.add_argument(flag, type=type(default), default=default, metavar=metavar[name],
                               help=f"{OPTION_HELP[name]} (default: {default:g})")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid identify`` parser."""
    p = sub.add_parser("identify", help="identify parameters from a bag or CSV file")
    p.add_argument("data", nargs="+", help="rosbag2 directory or CSV file; several: runs of the same "
                   "arm identified jointly (each with its payload of --payloads)")
    p.add_argument("--payloads", metavar="KNOWN.json",
                   help="several runs: JSON list, one entry per run: null or {\"body\": NAME, \"mass\": KG, "
                   "\"com\": [X, Y, Z], \"inertia\": [Ixx, Iyy, Izz, Ixy, Ixz, Iyz]} (CoM in the body "
                   "frame [m], inertia about the CoM [kg m^2], default a 5 cm cube); their torque is known")
    p.add_argument("--drive-gains", action="store_true",
                   help="several runs: identify a torque gain per joint (true torque = gain x logged), "
                   "which needs runs with at least two different known payloads")
    p.add_argument("--model", required=True, help="MJCF or URDF file")
    p.add_argument("--method", default="ols", choices=ALL_METHODS,
                   help="batch method, or an online estimator replayed sample by sample")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--json", action="store_true", help="print result.json")
    p.add_argument("--payload-only", metavar="BODY", help="identify only a payload attached to BODY")
    p.add_argument("--friction", default="model", help="joint friction identified: 'model' (default: the "
                   "terms the model's joints declare: coulomb for frictionloss, viscous for damping, "
                   "stribeck/sigmoid for their numerics; docs/joint-terms.md), 'none', or a "
                   "comma list of coulomb, viscous, offset, stribeck "
                   "(Fs·exp(−|q̇|/q̇s)·sign(q̇), q̇s searched unless --stribeck-velocity), sigmoid "
                   "(φ1/(1+exp(−φ2(q̇+φ3))) − φ1/(1+exp(−φ2φ3)), Gaz et al. 2019; an alternative to "
                   "coulomb; φ2, φ3 searched per joint unless --sigmoid-shape)")
    p.add_argument("--stribeck-velocity", type=float, metavar="RAD_S",
                   help="Stribeck velocity q̇s [rad/s] of the stribeck terms (default: the one that "
                   "minimises the least-squares residual, searched in 0.002..2 rad/s)")
    p.add_argument("--sigmoid-shape", metavar="PHI2,PHI3",
                   help="steepness φ2 [s/rad] and offset φ3 [rad/s] of every joint's sigmoid friction "
                   "(default: per joint, those that minimise the least-squares residual, searched "
                   "in φ2 1..1000 s/rad, φ2·φ3 −3..3; a bound reached is reported)")
    p.add_argument("--armature", action=argparse.BooleanOptionalAction, default=None,
                   help="identify rotor inertia per joint (default: when the model's joints declare "
                   "armature); --no-armature: not identified")
    p.add_argument("--validate", help="another bag/CSV to validate the torque prediction on")
    p.add_argument("--bandwidth", type=float, default=5.0, help="closed-loop bandwidth [Hz]")
    p.add_argument("--differentiator", choices=CHOICES["differentiator"], default="central",
                   help="positions to velocity/acceleration")
    p.add_argument("--velocity", choices=CHOICES["velocity"], default="auto",
                   help="measured velocity when recorded (auto), always, or never")
    p.add_argument("--regularization", type=float, default=0.0, help="weight (<= 0: default)")
    p.add_argument("--friction-prior", default="model", metavar="model|zero|FILE.json",
                   help="prior of the joint terms (friction, offsets, rotor inertia) that the "
                   "regularised methods and the plausibility pull lean on, weakly: the model file's "
                   "values (default), zero, or a JSON file of values by name, e.g. "
                   '{"Fc": 0.5, "shoulder_pan_joint.Fv": 2.0}')
    p.add_argument("--max-samples", type=int, default=2000, help="dual-metric SDP samples")
    p.add_argument("--min-segment", type=float, default=2.0, metavar="S",
                   help="data between gaps shorter than this is not used [s] (default: 2)")
    p.add_argument("--torque-scale", metavar="S[,S...]",
                   help="logged effort × this = torque, one value or one per joint in the model's "
                   "order (e.g. motor current [A] × torque constant × gear [N·m/A])")
    p.add_argument("--torque-offset", metavar="O[,O...]",
                   help="added to the scaled torque [N·m], one value or one per joint")
    p.add_argument("--columns", metavar="FIELD=COLUMN[,...]",
                   help="CSV: the file's column of each field (time, q, dq, tau, q_ref, dq_ref, "
                   "tau_ff), per-joint ones with {i} (0-based index in the model's order), {n} "
                   "(1-based) or {joint} (name), e.g. time=timestamp,q=actual_q_{i},dq=actual_qd_{i},"
                   "tau=actual_current_{i} (default: time,q_<joint>,dq_<joint>,tau_<joint>,...)")
    p.add_argument("--time-unit", choices=tuple(TIME_UNITS), default="s",
                   help="CSV: unit of the time column (default: s)")
    p.add_argument("--controller", metavar="LAW:GAINS",
                   help="the closed loop of a log without MotorCommand, for iv/pc_iv: "
                   "'pd:kp=K[,K...];kd=D[,D...]' (needs q_ref, dq_ref columns) or "
                   "'velocity:kv=D[,D...]' (needs dq_ref); one value or one per joint [N·m/rad, "
                   "N·m·s/rad]; tau_ff added when recorded")
    p.add_argument("--mass-factor", type=float, default=Plausibility.mass_factor, metavar="K",
                   help="arm: keep every body's mass within [m/K, m*K] of the model's m (plausible "
                   "exported parameters; every method's consistent solve respects it; 0 = off; "
                   "default %(default)s)")
    p.add_argument("--extent-factor", type=float, default=Plausibility.extent_factor, metavar="F",
                   help="arm: keep every body's mass inside F times its nominal extent (a sphere "
                   "around the model's CoM reaching its joints; bounds CoM and inertia; 0 = off; "
                   "default %(default)s)")
    p.add_argument("--com-radius", type=float, default=Plausibility.com_radius, metavar="R",
                   help="arm: keep every body's centre of mass within R [m] (per axis, body frame) "
                   "of the model's (0 = off, the default)")
    p.add_argument("--accept-cost", action="store_true",
                   help="exit 0 even when the exported model fits the data more than 5 %% worse than "
                   "the method's fit without bounds or prior (default: a warning and exit code 3)")
    p.add_argument("--resample", choices=CHOICES["resample"], default="auto",
                   help="irregular sampling (steps off the median by > 10 %%, dropped cycles) put "
                   "on a uniform grid by spline interpolation (auto), or used as recorded (off)")
    p.add_argument("--bridge-gaps", type=float, default=-1.0, metavar="S",
                   help="dropped-cycle gaps up to this long are interpolated over; longer ones "
                   "split the data into segments [s] (default: automatic, 5 ms or 3.5 median "
                   "periods, whichever is longer)")
    p.add_argument("--keep-stationary", dest="stationary_cut", action="store_false",
                   help="keep samples with every joint slower than 0.01 rad/s (default: the batch "
                   "methods cut them at each segment's start and end, the online ones skip them)")
    p.add_argument("--effort-lag", type=_effort_lag, default=None, metavar="PERIODS|auto",
                   help="how late the effort is [sample periods]: the effort stamped t acted at t - "
                   "lag x period (0: sampled with the positions; 0.5: the Damiao bridge); auto: the "
                   "lag the data fit best, said in the output "
                   "(default: what the bag declares, else 0 for the batch methods and -0.5 for the "
                   "online ones)")
    p.add_argument("--drop-outliers", action="store_true",
                   help="leave out the regression rows whose torque residual is beyond 8 robust σ "
                   "(1.4826·MAD) of a least-squares fit; they are reported either way (default: kept)")
    _add_online_options(p)
    p.add_argument("--joint-states-topic", default="/joint_states",
                   help="a bag's sensor_msgs/JointState topic")
    p.add_argument("--command-topic", default="/motor_command",
                   help="a bag's MotorCommand topic (read by iv/pc_iv only)")
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    add_base_option(p)
    p.set_defaults(func=_identify)

