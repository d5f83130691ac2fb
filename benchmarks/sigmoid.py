#!/usr/bin/env python3
"""Issue 15: the sigmoid friction model (Gaz et al., RA-L 2019) identified with each joint's shape
found by separable least squares.

The 3-joint arm of test/oracles/sigmoid_arm.py (viscous 0.3 N·m·s/rad, rotor inertia 0.01
kg·m², no Coulomb friction, the sigmoid friction Gaz et al. identified on the Panda's joints 1–3)
simulated for ``--duration`` s with torque noise ``--noise`` N·m. Printed: φ1, φ2, φ3 and Fv per
joint against the truth, the shape search's time (one and two sweeps over the joints), the
relative torque error with the sigmoid, with Coulomb friction in its place and with neither, and
on a held-out noise-free run the torque RMSE of each. Then the same on the 7-DOF Panda-like test
arm (test/robots/panda.xml) with the friction of all seven joints of Gaz et al. 2019 (their
Table; the same values ship with the authors' published Panda dynamic model), identified with
viscous, sigmoid and rotor inertia terms: the search's time on seven joints and the recovery.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from oracles.sigmoid_arm import PHI_TRUE  # noqa: E402
from oracles.sigmoid_arm import SIGMOID_ARM as ARM  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.batch.identify import (  # noqa: E402
    IdentifyOptions,
    prepare,
    run_method,
    settle_sigmoid,
)
from sysid_ros.core.data.preprocessing import Preprocessing  # noqa: E402
from sysid_ros.core.model.target import arm_target  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import simulate_dataset  # noqa: E402

#: [φ1 N·m, φ2 s/rad, φ3 rad/s] of the Panda's seven joints (Gaz et al., RA-L 4(4) 2019)
PANDA_PHI = ((0.54615, 5.1181, 0.039533), (0.87224, 9.0657, 0.025882), (0.64068, 10.136, -0.04607),
             (1.2794, 5.5903, 0.036194), (0.83904, 8.3469, 0.026226), (0.30301, 17.133, -0.021047),
             (0.56489, 10.336, 0.0035526))


def _pct(value: float, truth: float) -> str:
    return f"{100 * (value / truth - 1):+.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--noise", type=float, default=0.05, help="torque noise [N m]")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--method", default="ols")
    ap.add_argument("--panda-duration", type=float, default=30.0, help="0: skip the Panda")
    args = ap.parse_args()
    small_arm(args)
    if args.panda_duration > 0:
        panda(args)


def panda(args: argparse.Namespace) -> None:
    custom = "".join(f'    <numeric name="sigmoid:joint{i + 1}" data="{p1} {p2} {p3}"/>\n'
                     for i, (p1, p2, p3) in enumerate(PANDA_PHI))
    xml = (ROOT / "test" / "robots" / "panda.xml").read_text().replace(
        "</mujoco>", f"  <custom>\n{custom}  </custom>\n</mujoco>")
    truth = RobotModel.from_xml_string(xml)
    start = time.perf_counter()
    train = simulate_dataset(truth, duration=args.panda_duration, seed=1,
                             sensor=SensorModel(torque_noise=args.noise, seed=5))
    print(f"Panda (7 joints), {args.panda_duration:g} s at {train.sample_rate:.0f} Hz simulated in "
          f"{time.perf_counter() - start:.1f} s, torque noise {args.noise} N m")
    model = RobotModel.from_xml_string(xml, joint_terms=("Fv", "Ia", "Fsig"))
    bare = prepare(train, arm_target(model), Preprocessing(), search_sigmoid=False)
    start = time.perf_counter()
    found = settle_sigmoid(bare)
    took = time.perf_counter() - start
    result = run_method(found, IdentifyOptions(method=args.method))
    baseline = run_method(prepare(train, arm_target(RobotModel.from_xml_string(
        xml, joint_terms=("Fc", "Fv", "Ia"))), Preprocessing()), IdentifyOptions(method=args.method))
    print(f"  shape search {took:.1f} s ({len(found.t)} samples x 7 joints); relative torque error "
          f"{result.diagnostics.relative_error:.3f} % (Coulomb instead: "
          f"{baseline.diagnostics.relative_error:.3f} %)")
    phi = result.diagnostics.extra["sigmoid"]["phi"]
    for i, (p1, p2, p3) in enumerate(PANDA_PHI):
        f1, f2, f3 = phi[f"joint{i + 1}"]
        print(f"  joint{i + 1}: phi1 {f1:.4f} ({_pct(f1, p1)}), phi2 {f2:.3f} ({_pct(f2, p2)}), "
              f"phi3 {f3:+.4f} ({_pct(f3, p3)})")


def small_arm(args: argparse.Namespace) -> None:
    truth = RobotModel.from_xml_string(ARM)
    train = simulate_dataset(truth, duration=args.duration, seed=1,
                             sensor=SensorModel(torque_noise=args.noise, seed=5))
    held_out = simulate_dataset(truth, duration=10.0, seed=2)
    for label, terms in (("with sigmoid", ("Fv", "Ia", "Fsig")), ("Coulomb instead", ("Fc", "Fv", "Ia")),
                         ("neither", ("Fv", "Ia"))):
        start = time.perf_counter()
        prep = prepare(train, arm_target(RobotModel.from_xml_string(ARM, joint_terms=terms)), Preprocessing())
        result = run_method(prep, IdentifyOptions(method=args.method))
        elapsed = time.perf_counter() - start
        val = prepare(held_out, prep.target, Preprocessing(), search_sigmoid=False)
        w, rhs, _ = val.rows()
        rmse = float(np.sqrt(np.mean((rhs - w @ result.beta) ** 2)))
        print(f"{label}: relative torque error {result.diagnostics.relative_error:.3f} % (noise "
              f"{args.noise} N m), held-out torque RMSE {rmse:.4f} N m, prepare+solve {elapsed:.1f} s")
        beta = dict(zip(result.base.names, result.beta, strict=True))
        phi = result.diagnostics.extra.get("sigmoid", {}).get("phi", {})
        for joint, (p1, p2, p3) in PHI_TRUE.items():
            parts = [f"Fv {beta[f'{joint}.Fv']:.4f} ({_pct(beta[f'{joint}.Fv'], 0.3)})"]
            if "Fc" in terms:
                parts.append(f"Fc {beta[f'{joint}.Fc']:.4f} (the sigmoid's mean level {p1 / 2:.4f})")
            if joint in phi:
                f1, f2, f3 = phi[joint]
                parts += [f"phi1 {f1:.4f} ({_pct(f1, p1)})", f"phi2 {f2:.3f} ({_pct(f2, p2)})",
                          f"phi3 {f3:+.4f} ({_pct(f3, p3)})"]
            print(f"  {joint}: " + ", ".join(parts))
        if "Fsig" in terms:  # the shape search alone, one sweep (the default) against two
            bare = prepare(train, arm_target(RobotModel.from_xml_string(ARM, joint_terms=terms)),
                           Preprocessing(), search_sigmoid=False)
            for sweeps in (1, 2):
                start = time.perf_counter()
                found = settle_sigmoid(bare, sweeps=sweeps)
                took = time.perf_counter() - start
                shapes = "; ".join(f"{j} {d['phi2']:.4f}, {d['phi3']:+.5f}"
                                   for j, d in found.sigmoid["joints"].items())
                print(f"  shape search, {sweeps} sweep{'s' if sweeps > 1 else ''}: {took:.2f} s ({shapes})")


if __name__ == "__main__":
    main()
