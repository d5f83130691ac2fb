#!/usr/bin/env python3
"""Issue 15: Stribeck friction identified with its velocity found by separable least squares.

The 3-joint arm of test/core/batch/test_stribeck.py (Coulomb 0.4 N·m, viscous 0.3 N·m·s/rad, Stribeck
0.6/0.5/0.3 N·m at q̇s = 0.08 rad/s) simulated for ``--duration`` s with torque noise ``--noise``
N·m. Printed: the q̇s found, Fs/Fc/Fv per joint against the truth, the relative torque error with
and without the Stribeck term, and on a held-out run the torque RMSE of both models.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))  # the test oracles the arm's test module uses
sys.path.insert(0, str(ROOT / "test" / "core" / "batch"))

from test_stribeck import ARM, FS_TRUE, QS_TRUE  # noqa: E402

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method  # noqa: E402
from sysid_ros.core.data.preprocessing import Preprocessing  # noqa: E402
from sysid_ros.core.model.target import arm_target  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import simulate_dataset  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--noise", type=float, default=0.05, help="torque noise [N m]")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--method", default="ols")
    args = ap.parse_args()
    truth = RobotModel.from_xml_string(ARM)
    train = simulate_dataset(truth, duration=args.duration, seed=1,
                             sensor=SensorModel(torque_noise=args.noise, seed=5))
    held_out = simulate_dataset(truth, duration=10.0, seed=2)
    for label, terms in (("with Stribeck", ("Fc", "Fv", "Ia", "Fs")), ("without", ("Fc", "Fv", "Ia"))):
        start = time.perf_counter()
        prep = prepare(train, arm_target(RobotModel.from_xml_string(ARM, joint_terms=terms)), Preprocessing())
        result = run_method(prep, IdentifyOptions(method=args.method))
        elapsed = time.perf_counter() - start
        val = prepare(held_out, prep.target, Preprocessing(), search_stribeck=False)
        w, rhs, _ = val.rows()
        rmse = float(np.sqrt(np.mean((rhs - w @ result.beta) ** 2)))
        print(f"{label}: relative torque error {result.diagnostics.relative_error:.3f} % (noise "
              f"{args.noise} N m), held-out torque RMSE {rmse:.4f} N m, prepare+solve {elapsed:.1f} s")
        beta = dict(zip(result.base.names, result.beta, strict=True))
        if "Fs" in terms:
            qs = prep.target.model.stribeck_velocity
            print(f"  qs {qs:.4f} rad/s (true {QS_TRUE}, {100 * (qs / QS_TRUE - 1):+.1f} %)")
        for joint, fs in FS_TRUE.items():
            parts = [f"Fc {beta[f'{joint}.Fc']:.4f} ({100 * (beta[f'{joint}.Fc'] / 0.4 - 1):+.1f} %)",
                     f"Fv {beta[f'{joint}.Fv']:.4f} ({100 * (beta[f'{joint}.Fv'] / 0.3 - 1):+.1f} %)"]
            if "Fs" in terms:
                parts.append(f"Fs {beta[f'{joint}.Fs']:.4f} ({100 * (beta[f'{joint}.Fs'] / fs - 1):+.1f} %)")
            print(f"  {joint}: " + ", ".join(parts))


if __name__ == "__main__":
    main()
