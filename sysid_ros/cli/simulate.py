"""``sysid simulate``: a rosbag2 bag of a simulated excitation, with its truth."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sysid_ros.cli.common import add_base_option
from sysid_ros.core.data.bag import TRUTH_FILE, dataset_topics, write_bag
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.output_paths import check_folder
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset


def _parse_noise(spec: str | None, encoder: float, seed: int) -> SensorModel:
    values = {"position": 0.0, "velocity": 0.0, "torque": 0.0}
    for item in (spec or "").split(","):
        if not item.strip():
            continue
        key, _, val = item.partition("=")
        try:
            if key.strip() not in values:
                raise ValueError
            values[key.strip()] = float(val)
        except ValueError:
            raise SysIdError(f"--noise takes position=RAD,velocity=RAD_S,torque=NM, got {item!r}") from None
    return SensorModel(values["position"], values["velocity"], values["torque"], encoder, seed)


def _simulate(args: argparse.Namespace) -> int:
    if Path(args.out).exists():
        raise SysIdError(f"--out {args.out} exists; choose another bag folder or remove it")
    check_folder(args.out, "--out")
    model = RobotModel.from_mjcf(args.model, base=args.base)
    payload = Payload.parse(args.payload) if args.payload else None
    sensor = _parse_noise(args.noise, args.encoder_resolution, args.seed)
    start = time.perf_counter()
    ds = simulate_dataset(model, duration=args.duration, seed=args.seed, sensor=sensor,
                          payload=payload, rate=args.rate)
    path = write_bag(args.out, dataset_topics(ds), storage=args.storage, truth=ds.truth)
    print(f"wrote {path} ({len(ds)} joint states and commands at {ds.sample_rate:.0f} Hz, "
          f"{args.storage}) in {time.perf_counter() - start:.1f} s; true parameters in "
          f"{path / TRUTH_FILE}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid simulate`` parser."""
    p = sub.add_parser("simulate", help="write a rosbag2 bag of a simulated excitation (with truth)")
    p.add_argument("model", help="MJCF or URDF file")
    p.add_argument("--out", required=True, help="bag directory to create")
    p.add_argument("--duration", type=float, default=30.0, help="[s]")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (excitation, noise)")
    p.add_argument("--noise", help="position=RAD,velocity=RAD_S,torque=NM (standard deviations)")
    p.add_argument("--encoder-resolution", type=float, default=0.0, help="[rad/count], 0 = ideal")
    p.add_argument("--payload", help="body=NAME,mass=KG,com=X,Y,Z[,inertia=Ixx,Iyy,Izz,Ixy,Ixz,Iyz]")
    p.add_argument("--rate", type=float, help="physics and recording rate [Hz] (default: the model's)")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="rosbag2 storage format")
    add_base_option(p)
    p.set_defaults(func=_simulate)

