#!/usr/bin/env python3
"""Dual-metric seed's claim: weighting inverse-dynamics residuals by the dual metric M⁻¹ helps most
on "shape" coordinates when data are few.

System: a carriage on a rail (slide joint, metres/newtons) carrying a pan-tilt head (radians/N·m)
with a near-point mass at the end of a light boom: mixed units and a configuration-dependent
metric (the pan inertia scales with cos² of the tilt). Noisy closed-loop data (torque and position
noise), preprocessed as usual. Methods, all with the same physical-consistency constraints:
dual_metric, wls (per-joint weights from the OLS residuals), energy, wls_logdet, wls_pullback
(regularised toward a prior with ±30 % parameter errors, ``--prior-error``).

Score: normalised cross-correlation (NCC) between predicted forward dynamics
q̈ = M(θ̂)⁻¹ (τ − b(θ̂)) and the accelerations of a held-out trajectory (recorded without noise, so
the score measures the model, not the test sensor), per coordinate;
low-data case = 30 samples drawn at random (mean over draws), high-data case = every sample.
Target (issue 3): dual_metric best on the shape coordinates (pan, tilt) in the low-data case.

``--system floating`` / ``chain`` (issue 15): the seed's own two regimes
(``sysid_ros/core/batch/seed_systems.py``): a floating body with a pendulum on a universal joint (inertia-
dominated, body-velocity coordinates) and a three-link chain in a viscous medium (drag-dominated,
metric D(q)); low data (20 / 40 samples, random draws) and high data (every training sample);
score: the seed's NCC (largest over shifts within ±5° of the slowest period) on held-out runs,
mean over them. ``--system all`` (default) runs the three.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sysid_ros.core import RobotModel, mass_matrix_regressor, torque_regressor  # noqa: E402
from sysid_ros.core.batch import seed_systems as systems  # noqa: E402
from sysid_ros.core.batch.convex import least_squares_program  # noqa: E402
from sysid_ros.core.batch.identify import IdentifyOptions, _weighted_rows, prepare, run_method  # noqa: E402
from sysid_ros.core.data.preprocessing import Preprocessing  # noqa: E402
from sysid_ros.core.model.consistency import check_consistency  # noqa: E402
from sysid_ros.core.model.target import arm_target  # noqa: E402
from sysid_ros.core.report.metrics import ncc  # noqa: E402
from sysid_ros.core.sim.simulation import SensorModel  # noqa: E402
from sysid_ros.core.sim.synthetic import simulate_dataset  # noqa: E402

MJCF = systems.CARRIAGE_MJCF
SHAPE = ("pan", "tilt")


def forward_dynamics(model: RobotModel, theta, q, dq, tau) -> np.ndarray:
    m = mass_matrix_regressor(model, q) @ theta
    bias = torque_regressor(model, q, dq, np.zeros_like(dq)) @ theta
    return np.linalg.solve(m, (tau - bias)[..., None])[..., 0]


def fit(method: str, prep, prior_weight: float) -> np.ndarray:
    """Standard parameters θ̂ of one method (all constrained to physical consistency)."""
    if method == "wls":
        w, rhs, _ = _weighted_rows(prep)
        return least_squares_program(prep.target, w, rhs).theta
    options = IdentifyOptions(method=method, regularization=prior_weight, max_samples=100_000,
                              min_speed=0.0)
    return run_method(prep, options).parameters.values


def subset(prep, idx: np.ndarray):
    return replace(prep, t=prep.t[idx], q=prep.q[idx], dq=prep.dq[idx], ddq=prep.ddq[idx],
                   x=prep.x[idx], y=prep.y[idx], mask=prep.mask[idx])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--low", type=int, default=30, help="samples in the low-data case")
    parser.add_argument("--draws", type=int, default=20, help="random low-data subsets")
    parser.add_argument("--prior-weight", type=float, default=1e-2)
    parser.add_argument("--prior-error", type=float, default=0.3,
                        help="relative error of the prior of the regularised methods (uniform ±)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torque-noise", type=float, default=0.5, help="[N or N·m] std, training")
    parser.add_argument("--position-noise", type=float, default=5e-4, help="[m or rad] std, training")
    parser.add_argument("--system", choices=("carriage", "floating", "chain", "all"), default="all")
    parser.add_argument("--noise-scale", type=float, default=1.0,
                        help="multiplies the measurement noise of the floating and chain systems")
    args = parser.parse_args()
    if args.system in ("floating", "chain", "all"):
        for name in ("floating", "chain") if args.system == "all" else (args.system,):
            seed_system(name, args)
        if args.system != "all":
            return 0
        print("\n=== carriage + pan-tilt ===")

    model = RobotModel.from_xml_string(MJCF, joint_terms=())
    rng = np.random.default_rng(args.seed)
    err = args.prior_error
    prior = model.nominal * rng.uniform(1 - err, 1 + err, model.n_params)  # an inaccurate "CAD" prior
    if not check_consistency(model, prior).consistent:
        prior = model.nominal.copy()
    target = replace(arm_target(model), prior=prior)
    sensor = SensorModel(position_noise=args.position_noise, torque_noise=args.torque_noise,
                         seed=args.seed)
    settings = Preprocessing(bandwidth=3.0, velocity="differentiate")
    train = simulate_dataset(model, duration=30.0, seed=args.seed + 1, sensor=sensor)
    test = simulate_dataset(model, duration=20.0, seed=args.seed + 2)
    prep = prepare(train, target, settings, min_speed=0.0)
    prep_test = prepare(test, target, settings, min_speed=0.0)
    # measured forward dynamics on the test run: accelerations and torques, filtered alike
    qdd_meas = prep_test.ddq
    tau_test = prep_test.y
    methods = ("dual_metric", "wls", "energy", "wls_logdet", "wls_pullback")
    names = model.dof_joint_names
    print(f"{model.n_params} standard / {target.base.rank} base parameters; training samples "
          f"{len(prep.t)} after decimation, test samples {len(prep_test.t)}")
    ceiling = ncc(forward_dynamics(model, model.nominal, prep_test.q, prep_test.dq, tau_test), qdd_meas)
    print("true parameters: " + ", ".join(f"{n} {v:.4f}" for n, v in zip(names, ceiling, strict=True)))
    for case, draws in (("LOW-DATA", args.draws), ("HIGH-DATA", 1)):
        scores = {m: [] for m in methods}
        for d in range(draws):
            if case == "LOW-DATA":
                idx = np.sort(np.random.default_rng(100 + d).choice(len(prep.t), args.low, replace=False))
                part = subset(prep, idx)
            else:
                part = prep
            for m in methods:
                try:
                    theta = fit(m, part, args.prior_weight)
                    pred = forward_dynamics(model, theta, prep_test.q, prep_test.dq, tau_test)
                    scores[m].append(ncc(pred, qdd_meas))
                except Exception as exc:  # a method failing on a draw scores as no correlation
                    print(f"  {m} failed on draw {d}: {type(exc).__name__}: {exc}")
                    scores[m].append(np.zeros(len(names)))
        n_samples = args.low if case == "LOW-DATA" else len(prep.t)
        draws_note = f", mean of {draws} draws" if draws > 1 else ""
        print(f"\n{case} ({n_samples} samples{draws_note}): NCC of predicted vs measured q̈ (1 = perfect)")
        print(f"{'method':<14}" + "".join(f"{n:>10}" for n in names))
        means = {m: np.mean(scores[m], axis=0) for m in methods}
        for m in methods:
            print(f"{m:<14}" + "".join(f"{v:10.3f}" for v in means[m]))
        shape_cols = [names.index(s) for s in SHAPE]
        best = {s: max(methods, key=lambda m, c=c: means[m][c])
                for s, c in zip(SHAPE, shape_cols, strict=True)}
        print("best on shape coordinates: " + ", ".join(f"{s}: {b}" for s, b in best.items()))
    return 0


def seed_system(name: str, args) -> None:
    """The seed's table for one of its systems: NCC per coordinate × method, low and high data."""
    import time

    from sysid_ros.core.batch import seed_systems as seed
    from sysid_ros.core.batch.seed_systems import DIAGNOSTIC, METHODS

    start = time.perf_counter()
    if name == "floating":
        system, low, runs, duration, rate = seed.FloatingPendulum(), 20, 6, 30.0, 25.0
        noise = {"force": 0.01, "torque": 5e-5, "accel": 0.3, "angular_accel": 3.0, "velocity": 0.02}
    else:
        system, low, runs, duration, rate = seed.ViscousChain(), 40, 8, 22.0, 10.0
        noise = {"wheel_force": 0.05, "velocity": 0.05}
    noise = {k: v * args.noise_scale for k, v in noise.items()}
    rng = np.random.default_rng(args.seed)
    prior = None
    for _ in range(100):  # an inaccurate "CAD" prior, physically consistent
        candidate = system.truth * rng.uniform(1 - args.prior_error, 1 + args.prior_error, len(system.truth))
        if name == "chain" or check_consistency(system.model, candidate).consistent:
            prior = candidate
            break
    target = system.target(prior)
    train = seed.concatenate([system.simulate(duration, 10 + i, rate_hz=rate, noise=noise)
                              for i in range(runs)])
    tests = [system.simulate(duration, 100 + i, rate_hz=rate) for i in range(runs)]
    coords = system.coords
    print(f"\n=== {name}: {target.n_params} parameters ({target.base.rank} base), {len(coords)} "
          f"coordinates, training {len(train)} samples ({runs} runs of {duration:g} s at {rate:g} Hz), "
          f"{runs} noise-free held-out runs; noise {noise}; prior ±{args.prior_error:.0%} "
          f"({'consistent' if prior is not None else 'the truth: no consistent draw'}) ===")
    for case, draws in (("LOW-DATA", args.draws), ("HIGH-DATA", 1)):
        scores = {m: [] for m in METHODS + DIAGNOSTIC}
        for d in range(draws):
            part = train if case == "HIGH-DATA" else train.subset(
                np.sort(np.random.default_rng(100 + d).choice(len(train), low, replace=False)))
            for m in METHODS + DIAGNOSTIC:
                try:
                    theta = seed.fit(m, target, part, args.prior_weight)
                    scores[m].append(np.mean([seed.score(system, theta, t) for t in tests], axis=0))
                except Exception as exc:  # a method failing on a draw scores as no correlation
                    print(f"  {m} failed on draw {d}: {type(exc).__name__}: {exc}")
                    scores[m].append(np.zeros(len(coords)))
        n = low if case == "LOW-DATA" else len(train)
        note = f", mean (std) over {draws} draws" if draws > 1 else ""
        print(f"\n{name} {case} ({n} samples{note}): shifted NCC of predicted vs held-out forward dynamics")
        print(f"{'method':<21}" + "".join(f"{c:>14}" for c in coords))
        means = {m: np.mean(scores[m], axis=0) for m in METHODS + DIAGNOSTIC}
        stds = {m: np.std(scores[m], axis=0) for m in METHODS + DIAGNOSTIC}
        for m in METHODS + DIAGNOSTIC:
            if m in DIAGNOSTIC:
                print("not the seed's (the dual metric with the same pull-back prior):")
            cells = [f"{v:.3f}" + (f" ({s:.2f})" if draws > 1 else "")
                     for v, s in zip(means[m], stds[m], strict=True)]
            print(f"{m:<21}" + "".join(f"{c:>14}" for c in cells))
        best = {s: max(METHODS, key=lambda m, s=s: means[m][coords.index(s)]) for s in seed.SHAPE}
        print("best on shape coordinates: " + ", ".join(f"{s}: {b}" for s, b in best.items()))
    print(f"({name}: {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
