#!/usr/bin/env python3
"""Write examples/ur5e_rtde_log.csv: what a UR5e-like arm's controller logs, simulated with this
package (test/robots/ur5e.xml, from Universal Robots' published dimensions and masses).

The log is laid out as UR's RTDE `record.py` writes a recipe: space separated, `timestamp` [s] and
6-vector fields as `X_0 … X_5`: `actual_q` [rad], `actual_qd` [rad/s], `actual_current` [A],
`target_q`, `target_qd`. The arm is velocity controlled with a host position loop; stamps alternate
10/12 ms with dropped cycles; current is torque / 10 N·m/A plus a sensing offset; the true robot's
inertials are 20 % off the model's and it has joint friction the model lacks (see
sysid_ros.core.sim.vendor_log). Deterministic: running it again writes the same file.

    python examples/make_vendor_log.py [--duration 6] [--out examples/ur5e_rtde_log.csv]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.plant import SensorModel
from sysid_ros.core.sim.vendor_log import VendorStyle, vendor_log

HERE = Path(__file__).resolve().parent
MODEL = HERE.parent / "test" / "robots" / "ur5e.xml"
STYLE = VendorStyle(torque_per_amp=10.0, noise=SensorModel(0.0, 0.001, 0.02, 0.0, 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=6.0, help="[s] (default: %(default)s)")
    parser.add_argument("--out", default=str(HERE / "ur5e_rtde_log.csv"), help="(default: %(default)s)")
    args = parser.parse_args()
    log = vendor_log(RobotModel.from_mjcf(MODEL), STYLE, duration=args.duration, seed=4)
    n = len(log.joint_names)
    fields = {"actual_q": log.q, "actual_qd": log.dq, "actual_current": log.tau,
              "target_q": log.command.q_ref, "target_qd": log.command.dq_ref}
    header = ["timestamp"] + [f"{name}_{j}" for name in fields for j in range(n)]
    table = np.column_stack([log.t, *fields.values()])
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(" ".join(header) + "\n")
        for row in table:
            f.write(" ".join(f"{x:.7g}" for x in row) + "\n")
    print(f"wrote {args.out}: {len(table)} samples over {log.t[-1] - log.t[0]:.2f} s")


if __name__ == "__main__":
    main()
