"""Issue 22's held-out table on vendor-like logs: per method, the held-out torque error of the
exported model, the worst per-link mass ratio (exported over true, or its inverse when below 1),
the worst per-link smallest-principal-moment ratio (exported over the model file's, about the CoM)
and the plausibility cost (exported torque RMS over the method's own fit without bounds or prior).

Logs: ``REAL_LIKE_7DOF`` (core/sim/vendor_log.py) on test/robots/panda.xml and gen3.xml, 8 s to
identify, another 5 s motion of the same true robot held out (logged cleanly: true torque and
motion); the 6-DOF arms (test/robots/ur5e.xml, config/robots/yam_damiao.xml) as
test/acceptance/test_exported_model.py logs them (the same clock, gaps and noise; calibrated torque,
friction 0.3 N·m + 0.2 N·m·s/rad, offsets 0.1 N·m, 0.02 N·m torque noise; 4 s held out). Prints one
table per robot and the load average.

    python benchmarks/heldout_table.py [--robots panda,gen3,ur5e,yam_damiao] [--duration 8]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # no ROS here; the rule anyway

import numpy as np

from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method
from sysid_ros.core.batch.plausible import principal_moments
from sysid_ros.core.blas import single_threaded_blas
from sysid_ros.core.model.robot import RobotModel, joint_terms
from sysid_ros.core.model.target import batch_target
from sysid_ros.core.report.metrics import heldout_torque
from sysid_ros.core.sim.vendor_log import REAL_LIKE_7DOF, vendor_log

ROBOTS = Path(__file__).resolve().parents[1] / "test" / "robots"
CONFIG_ROBOTS = Path(__file__).resolve().parents[1] / "config" / "robots"
METHODS = ("pc_ls", "wls", "dual_metric", "wls_logdet")


def table(robot: str, duration: float) -> str:
    path = ROBOTS / f"{robot}.xml"
    path = path if path.is_file() else CONFIG_ROBOTS / f"{robot}.xml"
    model = RobotModel.from_mjcf(path, joint_terms=joint_terms("coulomb,viscous,offset", True))
    names = [model.body_name(b) for b in model.param_bodies]
    if model.nv == 7:
        # the style names the panda's links; the same 30 % on links 2 and 4 of another arm
        style = REAL_LIKE_7DOF if robot == "panda" else replace(REAL_LIKE_7DOF, cad_off=(names[1], names[3]))
        log = vendor_log(model, style, duration=duration, seed=1)
        log = log.with_torque_calibration(list(style.torque_per_amp), None)
        held = vendor_log(model, style, duration=5.0, seed=1, motion_seed=5, clean=True)
    else:  # test_exported_model's 6-DOF logs
        style = replace(REAL_LIKE_7DOF, torque_per_amp=1.0, offset=0.1, coulomb=0.3, viscous=0.2,
                        amplitude=1.0, cad_off=(names[1], names[3]),
                        noise=replace(REAL_LIKE_7DOF.noise, torque_noise=0.02))
        log = vendor_log(model, style, duration=duration, seed=2)
        held = vendor_log(model, style, duration=4.0, seed=2, motion_seed=6, clean=True)
    truth = model.from_dict({k: v for k, v in log.truth["parameters"].items() if k in set(model.param_names)})
    target = batch_target(model)
    prep = prepare(log, target, IdentifyOptions().preprocessing)
    true_rms = heldout_torque(target, held, truth).errors.rms
    nominal_rms = heldout_torque(target, held, model.nominal).errors.rms
    rows = [f"{robot}: {duration:g} s at 1 kHz identified, {held.t[-1] - held.t[0]:.0f} s held out; "
            f"true model {true_rms:.4f} N·m, model file {nominal_rms:.4f} N·m",
            f"{'method':<12} {'held-out RMSE [N·m]':>20} {'worst mass ratio':>17} {'worst moment ratio':>19} "
            f"{'cost [%]':>9} {'time [s]':>9}"]
    for method in METHODS:
        start = time.perf_counter()
        result = run_method(prep, IdentifyOptions(method=method))
        elapsed = time.perf_counter() - start
        theta = result.parameters.values
        mass, moment = [], []
        for b in model.param_bodies:
            sl = model.body_slice(b)
            ratio = theta[sl][0] / truth[sl][0]
            mass.append(max(ratio, 1.0 / ratio))
            moment.append(principal_moments(theta[sl])[0] / principal_moments(model.nominal[sl])[0])
        cost = result.diagnostics.extra["plausibility"]["cost_percent"]
        rows.append(f"{method:<12} {heldout_torque(target, held, theta).errors.rms:20.4f} {max(mass):17.3f} "
                    f"{min(moment):19.3f} {cost:9.2f} {elapsed:9.1f}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default="panda,gen3,ur5e,yam_damiao")
    parser.add_argument("--duration", type=float, default=8.0)
    args = parser.parse_args()
    single_threaded_blas()
    for robot in args.robots.split(","):
        print(table(robot, args.duration))
        print()
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    np.set_printoptions()


if __name__ == "__main__":
    main()
