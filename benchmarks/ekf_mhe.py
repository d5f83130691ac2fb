#!/usr/bin/env python3
"""EKF, MHE and RLS with forgetting on runs where the robot changes mid-run (issue 15, overview
seed "Estimators"), and the MHE's solve rate.

* payload picked up: a UR5e (test/robots/ur5e.xml) picks up a 1 kg, 10 cm cube 3 s into an 8 s
  run at 250 Hz with sensor noise (q 1 mrad, q̇ 0.01 rad/s, τ 0.05 N·m); each method's payload
  mass over time: time to first come within 10 % of the new mass, share of the time within 10 %
  from 1 s after the change on, RMS error over the last 2 s, the reported σ; per-sample cost;
* friction doubles: a Panda (viscous friction in its MJCF) whose joint friction doubles 3 s into
  an 8 s run at 500 Hz; the arm's 7 viscous coefficients over time (EKF on the arm's base
  parameters, MHE on its standard parameters with consistency and plausibility bounds, RLS);
* RLS and MHE (force rows, which need q̈) use a 10 Hz causal low-pass, the EKF the default 50 Hz;
* MHE solve rate (median and 95th percentile over a run): payload (target >= 10 Hz) and a 6-DOF
  arm, the UR5e's 84 standard parameters (target >= 1 Hz).

Writes ``payload_pickup.png`` and ``friction_doubles.png`` into ``--out`` (default: a temporary
folder) and prints every figure with the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.model.target import arm_target, payload_target  # noqa: E402
from sysid_ros.core.online import OnlineOptions, OnlineSession  # noqa: E402
from sysid_ros.core.report.plotting import pyplot, save_figure  # noqa: E402
from sysid_ros.core.sim.changes import simulate_change  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset  # noqa: E402

SENSOR = SensorModel(position_noise=1e-3, velocity_noise=1e-2, torque_noise=0.05, seed=3)
CHANGE = 3.0  # s
#: [Hz] causal low-pass of the force-row methods (RLS, MHE): their rows hold q̈, differentiated
#: from noisy q̇ (at the default 50 Hz its noise biases the estimates toward zero: errors in
#: variables); the EKF uses q and q̇ only and keeps the default
FORCE_CUTOFF = 10.0


def replay(target, ds, options: OnlineOptions) -> tuple[OnlineSession, float, list[float]]:
    """The run through a session (the node's 100-sample batches); wall time per sample [s] and
    the EKF's σ of the first parameter over time."""
    session = OnlineSession(target, options)
    sigma = []
    start = time.perf_counter()
    for a in range(0, len(ds), 100):
        session.push_batch(ds.t[a:a + 100], ds.q[a:a + 100], ds.dq[a:a + 100], ds.tau[a:a + 100])
        if options.method == "ekf":
            sigma.append(float(np.sqrt(session.estimator.covariance[0, 0])))
    return session, (time.perf_counter() - start) / len(ds), sigma


def reach_time(t: np.ndarray, x: np.ndarray, truth: float, after: float, tol: float = 0.1) -> float:
    """[s] after ``after`` until ``x`` first comes within ``tol`` × truth (inf if never)."""
    ok = np.flatnonzero((t >= after) & (np.abs(x - truth) <= tol * abs(truth)))
    return float(t[ok[0]] - after) if ok.size else float("inf")


def payload_pickup(out: Path) -> None:
    model = RobotModel.from_mjcf(ROOT / "test" / "robots" / "ur5e.xml")
    payload = Payload("wrist_3_link", 1.0, np.array([0.0, 0.0, 0.05]), np.eye(3) * 0.1**2 / 6)
    run = simulate_change(model, duration=8.0, change_time=CHANGE, payload=payload, rate=250.0, seed=1,
                          sensor=SENSOR)
    target = payload_target(model, "wrist_3_link")
    methods = {"ekf drift 0.3": OnlineOptions(method="ekf", drift=0.3),
               "ekf drift 0.1": OnlineOptions(method="ekf", drift=0.1),
               "mhe 2 s, 10 Hz": OnlineOptions(method="mhe", drift=0.3, horizon=2.0, solve_rate=10.0,
                                                cutoff=FORCE_CUTOFF),
               "mhe 1 s, 10 Hz": OnlineOptions(method="mhe", drift=0.3, horizon=1.0, solve_rate=10.0,
                                                cutoff=FORCE_CUTOFF),
               "rls λ 0.99": OnlineOptions(method="rls", forgetting=0.99, cutoff=FORCE_CUTOFF),
               "rls λ 0.995": OnlineOptions(method="rls", forgetting=0.995, cutoff=FORCE_CUTOFF)}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    print("\npayload picked up (UR5e, 1 kg at t = 3 s, 250 Hz, noisy): payload mass")
    print(f"{'method':<16} {'reach 10 % [s]':>14} {'within 10 % from +1 s':>22} {'RMS last 2 s [kg]':>18} "
          f"{'σ_m end [kg]':>13} {'per sample [ms]':>16} {'mass at 3.5/4/5 s':>20}")
    for label, options in methods.items():
        options = OnlineOptions(**{**options.as_dict(), "sample_rate": 250.0, "history": True})
        session, per_sample, _sigma = replay(target, run.dataset, options)
        log = session.estimator.log
        t, m = np.array(log.t), np.array(log.theta)[:, 0]
        reach = reach_time(t, m, 1.0, run.change_time)
        late = t >= run.change_time + 1.0
        within = 100.0 * float(np.mean(np.abs(m[late] - 1.0) <= 0.1))
        last = t >= t[-1] - 2.0
        rms = float(np.sqrt(np.mean((m[last] - 1.0) ** 2)))
        snap = session.snapshot()
        at = [m[np.searchsorted(t, x)] for x in (3.5, 4.0, 5.0)]
        print(f"{label:<16} {reach:14.2f} {within:21.0f}% {rms:18.4f} {snap.std[0]:13.4f} "
              f"{1e3 * per_sample:16.2f} {'  '.join(f'{v:.3f}' for v in at):>20}")
        line, = ax.plot(t, m, lw=1.0, label=label)
        if options.method == "ekf" and options.drift == 0.3:
            # the EKF's own ±2σ band, recomputed along the run from its logged covariance
            band = _ekf_sigma(target, run.dataset, options)
            ax.fill_between(band[0], band[1] - 2 * band[2], band[1] + 2 * band[2], color=line.get_color(),
                            alpha=0.2, label="ekf ±2σ")
        if options.method == "mhe":
            times = np.array(session.estimator.core.solve_times) * 1e3
            print(f"{'':<16} MHE solves: {len(times)}, median {np.median(times):.1f} ms, p95 "
                  f"{np.percentile(times, 95):.1f} ms -> {1e3 / np.median(times):.0f} Hz (target >= 10 Hz)")
    ax.axvline(run.change_time, color="k", lw=0.8, ls=":")
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_ylim(-0.3, 1.5)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("payload mass [kg]")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    ax.set_title("payload picked up at 3 s (truth 0 → 1 kg)")
    print(f"wrote {save_figure(fig, out / 'payload_pickup.png', dpi=90)}")


def _ekf_sigma(target, ds, options: OnlineOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(t, m, σ_m)`` every 10 samples of an EKF run."""
    session = OnlineSession(target, options)
    t, m, s = [], [], []
    for a in range(0, len(ds), 10):
        session.push_batch(ds.t[a:a + 10], ds.q[a:a + 10], ds.dq[a:a + 10], ds.tau[a:a + 10])
        if session.estimator.samples:
            t.append(session.estimator.log.t[-1])
            m.append(session.estimator.theta[0])
            s.append(np.sqrt(session.estimator.covariance[0, 0]))
    return np.array(t), np.array(m), np.array(s)


def friction_doubles(out: Path) -> None:
    model = RobotModel.from_mjcf(ROOT / "test" / "robots" / "panda.xml")
    run = simulate_change(model, duration=8.0, change_time=CHANGE, friction_factor=2.0, rate=500.0, seed=1,
                          sensor=SENSOR)
    target = arm_target(model)
    fv = np.array([i for i, n in enumerate(model.param_names) if n.endswith(".Fv")])
    plt = pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    print("\nfriction doubles (Panda arm, 108 parameters, at t = 3 s, 500 Hz, noisy): viscous "
          "friction estimate / truth, mean (min-max) over the 7 joints")
    print(f"{'method':<16} {'before (2.9 s)':>20} {'+1 s':>20} {'end':>20} {'per sample [ms]':>16}")
    options = {"ekf drift 0.1": OnlineOptions(method="ekf", drift=0.1),
               "mhe 2 s, 2 Hz": OnlineOptions(method="mhe", drift=0.1, horizon=2.0, solve_rate=2.0,
                                               cutoff=FORCE_CUTOFF),
               "rls λ 0.998": OnlineOptions(method="rls", forgetting=0.998, cutoff=FORCE_CUTOFF)}
    for ax, (label, opt) in zip(axes, options.items(), strict=True):
        opt = OnlineOptions(**{**opt.as_dict(), "sample_rate": 500.0, "history": True})
        session, per_sample, _ = replay(target, run.dataset, opt)
        log = session.estimator.log
        t, theta = np.array(log.t), np.array(log.theta)
        truth = np.where((t >= run.change_time)[:, None], run.theta_after[fv], run.theta_before[fv])
        ratio = theta[:, fv] / truth
        cells = []
        for x in (run.change_time - 0.1, run.change_time + 1.0, t[-1]):
            r = ratio[min(np.searchsorted(t, x), len(t) - 1)]
            cells.append(f"{r.mean():.2f} ({r.min():.2f}-{r.max():.2f})")
        print(f"{label:<16} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20} {1e3 * per_sample:16.2f}")
        if opt.method == "mhe":
            times = np.array(session.estimator.core.solve_times)
            print(f"{'':<16} MHE solves: {len(times)}, median {np.median(times):.2f} s, p95 "
                  f"{np.percentile(times, 95):.2f} s -> {1 / np.median(times):.1f} Hz")
        ax.plot(t, theta[:, fv], lw=0.8)
        ax.plot(t, truth, "k:", lw=0.6)
        ax.axvline(run.change_time, color="k", lw=0.8, ls=":")
        ax.set_ylabel(f"{label}\nFv [N·m·s/rad]")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("time [s]")
    fig.suptitle("joint viscous friction doubles at 3 s (dotted: truth)")
    print(f"wrote {save_figure(fig, out / 'friction_doubles.png', dpi=90)}")


def mhe_rate() -> None:
    """MHE solve times on a steady run: the UR5e's payload (10) and the whole UR5e arm (84)."""
    model = RobotModel.from_mjcf(ROOT / "test" / "robots" / "ur5e.xml")
    payload = Payload("wrist_3_link", 1.0, np.array([0.0, 0.0, 0.05]), np.eye(3) * 0.1**2 / 6)
    ds = simulate_dataset(model, duration=12.0, seed=2, payload=payload, rate=250.0, sensor=SENSOR)
    print("\nMHE solve rate (UR5e, 12 s at 250 Hz; cvxpy compiled once, Clarabel)")
    print(f"{'target':<22} {'params':>6} {'window':>7} {'solves':>7} {'median [ms]':>12} {'p95 [ms]':>9} "
          f"{'rate [Hz]':>10}  target")
    for label, target, horizon, rate, goal in (
            ("payload", payload_target(model, "wrist_3_link"), 2.0, 10.0, 10.0),
            ("payload, 5 s window", payload_target(model, "wrist_3_link"), 5.0, 10.0, 10.0),
            ("6-DOF arm", arm_target(model), 2.0, 1.0, 1.0),
            ("6-DOF arm, 5 s window", arm_target(model), 5.0, 1.0, 1.0)):
        options = OnlineOptions(method="mhe", sample_rate=250.0, horizon=horizon, solve_rate=rate)
        session, _per, _ = replay(target, ds, options)
        times = np.array(session.estimator.core.solve_times[2:]) * 1e3  # the first solves compile
        med = float(np.median(times))
        print(f"{label:<22} {target.n_params:>6} {horizon:>6.0f}s {len(times):>7} {med:12.1f} "
              f"{np.percentile(times, 95):9.1f} {1e3 / med:10.1f}  >= {goal:g} Hz: "
              f"{'met' if 1e3 / med >= goal else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="folder for the figures")
    parser.add_argument("--only", choices=("payload", "friction", "rate"), help="one part only")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="ekf_mhe_"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.only in (None, "payload"):
        payload_pickup(out)
    if args.only in (None, "rate"):
        mhe_rate()
    if args.only in (None, "friction"):
        friction_doubles(out)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
