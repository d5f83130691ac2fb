"""``sysid monitor``: a bag or CSV file replayed through the collision monitor."""

from __future__ import annotations

import argparse

import numpy as np

from sysid_ros.cli.common import add_base_option, floats
from sysid_ros.core.data.bag import read_data
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import dumps_strict
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.monitor import detector as contact
from sysid_ros.core.monitor.observer import DEFAULT_GAIN


def _monitor(args: argparse.Namespace) -> int:
    from sysid_ros.core.monitor import Thresholds, calibrate, monitor_recording, parameters_from_result

    model = RobotModel.load(args.model, base=args.base)
    theta = parameters_from_result(model, args.result) if args.result else model.nominal
    data = read_data(args.data, joint_states_topic=args.joint_states_topic,
                     joint_names=model.dof_joint_names).for_model(model)
    factors = {"sigma_factor": args.sigma_factor, "peak_factor": args.peak_factor, "margin": args.margin}
    if args.threshold:
        thresholds = Thresholds.given(floats(args.threshold), model.nv)
        source = "given"
    elif args.calibrate:
        calib = read_data(args.calibrate, joint_states_topic=args.joint_states_topic,
                          joint_names=model.dof_joint_names)
        thresholds = calibrate(model, theta, calib, gain=args.gain, **factors)
        source = f"calibrated on {args.calibrate}"
    else:
        if not (np.isfinite(args.calibration_time) and args.calibration_time > 0):
            raise SysIdError(f"--calibration-time must be > 0 s, got {args.calibration_time}")
        first = data.samples(data.t - data.t[0] <= args.calibration_time)
        thresholds = calibrate(model, theta, first, gain=args.gain, **factors)
        source = f"calibrated on the first {args.calibration_time:g} s of the data (assumed contact-free)"
    report = monitor_recording(model, theta, data, thresholds, gain=args.gain, release=args.release)
    names = model.dof_joint_names
    if args.json:
        print(dumps_strict({"data": str(args.data), "model": str(args.model), "result": args.result,
                          "gain_per_s": args.gain, "thresholds_from": source,
                          **thresholds.as_dict(names), "events": [e.as_dict() for e in report.events]},
                         indent=2))
        return 0
    print(f"{args.data}: {len(data)} samples over {data.t[-1] - data.t[0]:.2f} s, observer gain "
          f"{args.gain:g} 1/s; thresholds {source}:")
    for j, name in enumerate(names):
        stats = ("" if not np.isfinite(thresholds.rms[j]) else
                 f"  (residual rms {thresholds.rms[j]:.4f}, peak {thresholds.peak[j]:.4f} N·m)")
        print(f"  {name:<16} {thresholds.values[j]:8.4f} N·m{stats}")
    for event in report.events:
        print(event.describe())
    print(f"{len(report.contacts)} contact(s)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid monitor`` parser."""
    p = sub.add_parser("monitor", help="replay a bag or CSV file through the collision monitor (momentum "
                       "residual observer on a model): thresholds, contact events")
    p.add_argument("data", help="rosbag2 directory or CSV file (joint states with velocity and effort)")
    p.add_argument("--model", required=True, help="MJCF or URDF file (e.g. identify's identified.xml)")
    p.add_argument("--result", help="result.json of an identification: its exported parameters replace "
                   "the model's (friction offsets included)")
    p.add_argument("--calibrate", metavar="BAG", help="a contact-free recording (e.g. the identification "
                   "run) to derive the thresholds from")
    p.add_argument("--threshold", metavar="NM[,NM...]", help="thresholds [N·m] instead: one value or one "
                   "per joint in the model's order")
    p.add_argument("--calibration-time", type=float, default=5.0, metavar="S",
                   help="without --calibrate/--threshold: the first S seconds of the data are "
                   "contact-free and give the thresholds (default: 5)")
    p.add_argument("--gain", type=float, default=DEFAULT_GAIN, help="observer gain K [1/s] (time constant "
                   "1/K; default %(default)s)")
    p.add_argument("--sigma-factor", type=float, default=contact.DEFAULT_SIGMA_FACTOR, metavar="K",
                   help="threshold = max(K·rms, F·peak) + margin of the calibration residual "
                   "(default %(default)s)")
    p.add_argument("--peak-factor", type=float, default=contact.DEFAULT_PEAK_FACTOR, metavar="F",
                   help="(default %(default)s)")
    p.add_argument("--margin", type=float, default=contact.DEFAULT_MARGIN, metavar="NM",
                   help="[N·m] (default %(default)s)")
    p.add_argument("--release", type=float, default=contact.DEFAULT_RELEASE,
                   help="a contact ends below this fraction of the threshold (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print thresholds and events as JSON")
    p.add_argument("--joint-states-topic", default="/joint_states",
                   help="a bag's sensor_msgs/JointState topic")
    add_base_option(p)
    p.set_defaults(func=_monitor)

