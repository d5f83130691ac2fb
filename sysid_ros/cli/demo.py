"""``sysid demo``: the closed loop in simulation over ROS 2 (sim + trajectory + online estimator +
recorder, then BatchSolve on the bag)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sysid_ros.core.batch.identify import (
    METHODS,
)
from sysid_ros.core.errors import SysIdError


def _demo(args: argparse.Namespace) -> int:
    from sysid_ros.nodes.sim_demo import DEFAULT_PAYLOAD, DemoOptions, run_demo

    methods = tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SysIdError(f"unknown batch methods {unknown}; choose among {list(METHODS)}")
    run_demo(DemoOptions(model=args.model or "", payload=args.payload or DEFAULT_PAYLOAD,
                         excitation_time=args.duration, real_time_factor=args.real_time_factor,
                         lockstep=not args.realtime,
                         methods=methods, out=Path(args.out), seed=args.seed, domain_id=args.domain_id,
                         domain_probe=args.domain_probe))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid demo`` parser."""
    p = sub.add_parser("demo", help="the closed loop in simulation: sim + trajectory + online estimator + "
                       "recorder over ROS 2, then BatchSolve on the bag; true vs estimated payload")
    p.add_argument("--model", help="MJCF or URDF file (default: the package's default robot)")
    p.add_argument("--payload", default=None, help="body=NAME,mass=KG,com=X,Y,Z[,inertia=...] "
                   "(default: 0.6 kg on link_6 of the default robot)")
    p.add_argument("--duration", type=float, default=30.0, help="excitation length [s] (simulated)")
    p.add_argument("--real-time-factor", type=float, default=0.0,
                   help="at most this many simulated s per wall s (0 = as fast as the graph goes)")
    p.add_argument("--realtime", action="store_true",
                   help="free-running simulation (paced by the wall clock, results depend on load) "
                   "instead of lockstep (the same answer on a busy machine as on an idle one)")
    p.add_argument("--methods", default="dual_metric,pc_iv", help="batch methods on the recorded bag")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (excitation, noise)")
    p.add_argument("--domain-id", type=int, help="ROS_DOMAIN_ID (0-101) of the demo's graph (default: "
                   "$ROS_DOMAIN_ID, else a private one)")
    p.add_argument("--domain-probe", type=float, default=2.0,
                   help="how long to listen for other nodes in a domain before taking it [s]; a domain "
                   "with nodes is refused (given) or skipped (automatic); longer on a busy host")
    p.add_argument("--out", default="out/demo", help="output folder")
    p.set_defaults(func=_demo)

