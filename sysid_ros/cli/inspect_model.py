"""``sysid inspect``: joints, bodies, parameter count and base rank of a model."""

from __future__ import annotations

import argparse
from pathlib import Path

from sysid_ros.cli.common import add_base_option
from sysid_ros.core import base_parameters
from sysid_ros.core.json_numbers import dumps_strict, json_numbers
from sysid_ros.core.model.robot import RobotModel


def _inspect(args: argparse.Namespace) -> int:
    terms = () if args.no_joint_terms else None  # the default terms (Fs too when the MJCF has it)
    model = RobotModel.from_mjcf(args.model, joint_terms=terms, base=args.base)
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
        "stribeck_velocity": model.stribeck_velocity if "Fs" in model.joint_terms else None,
        "sigmoid_shape": ({model.joints[j].name: model.sigmoid_shape[model.joints[j].dof_adr].tolist()
                           for j in model.term_joints} if "Fsig" in model.joint_terms else None),
        "n_params": model.n_params,
        "base_rank": base.rank,
        "condition_number": base.condition_number,
        "torque_limits": json_numbers(model.torque_limits()),
        "motors": {j: m.name for j, m in model.motors.items()},
    }
    if args.json:
        print(dumps_strict(info, indent=2))
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


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid inspect`` parser."""
    p = sub.add_parser("inspect", help="joints, bodies, parameter count, base rank of an MJCF or URDF model")
    p.add_argument("model", help="MJCF or URDF file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-joint-terms", action="store_true", help="rigid-body parameters only")
    p.add_argument("--seed", type=int, default=0, help="seed of the random excitation")
    add_base_option(p)
    p.set_defaults(func=_inspect)

