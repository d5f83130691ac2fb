#!/usr/bin/env python3
"""Online seed's Tables II-III: final log-det divergence between true and estimated payload
parameters for RLS log-det-div on a Panda, our figures next to the seed's.

Scenarios (the seed's §IV): ground (fixed base, gravity): force regression, payload 5 / 10 kg;
orbital (free-floating 100 kg base, isotropic 10 kg·m², zero gravity, RK4 so that momentum is
conserved): force vs momentum regression, payload 5 / 10 / 50 kg with 2.5 % robot error and 50 kg
exact. Payloads are solid cubes (side 0.2 m, CoM 0.1 m along the hand's z); 20 s of joint-space
Fourier excitation (period 10 s, 5 harmonics) tracked by a 3 Hz PD law; physics and estimation at
500 Hz; broad prior (1 kg, 30 cm cube), α = 10; seeds: trajectory ``seed``, torque noise
``seed + 1``, robot randomisation ``seed + 2``, velocity noise ``seed + 3``. The simulation always
uses the exact robot; the estimator's robot model is exact or randomised (§IV-A2: per link mass,
CoM, principal moments × (1 + U(±2.5 %)), principal axes turned by U(±2.5 %)·π; the floating base
and the joint terms — damping, armature — stay exact, as the seed randomises link inertia only).

Two measurement settings, both with 5 % torque noise (σ = 0.05 N·m on every joint torque):

* ``exact``: the seed's setting as its text states it — motion exact (q, q̇ and, for force rows,
  the simulator's q̈), noise on the torque only;
* ``measured``: joint velocities measured with white noise (``--velocity-noise``, also inside the
  control loop), base pose and twist exact (a navigation filter is assumed). Force and momentum
  rows take every signal through :class:`CausalConditioner` (``--cutoff`` low-pass, q̈ = derivative
  of the filtered velocity, rows withheld for the filter's settling time), as the estimator node
  does; conservation-only rows are built from the raw measured q, q̇ and then low-passed row by row
  (:class:`RowFilter`: exact rows stay exact under a linear filter).

Regressions (columns of Table III):

* ``force``: inverse dynamics of all 6 + 7 dofs (the base rows have zero force); needs q̈;
* ``momentum``: the complete momentum regression of a free-floating arm — total momentum
  conservation in the world frame for the base (no torque; the unknown constant momentum h₀ as 6
  extra unknowns) and the joints' generalised momentum over ``--window`` windows against their
  torque integrals (:class:`ConservationRows` with ``joint_window``); no acceleration anywhere;
* ``conservation only``: the seed's momentum rows — conservation alone, no torque sensing. With
  the arm model off by 2.5 % it is limited by that error at 5–10 kg (total momentum weighs the
  heavy proximal links as much as the payload, while joint rows near the wrist see only the
  distal bodies), so it is reported beside, not as the momentum column.

Row weights (``--weighting``): ``fixed`` — the sensors' W (1/σ² for force rows, ``--momentum-weight``
for conservation rows, 1/(σ²·h·T) for torque integrals); ``adaptive`` (default) — W = 1/σ̂² with σ̂
each row's error estimated online from its residuals (:class:`ResidualWeights`, memory
``--weight-memory``), never above the sensors' W. On measured data the rows' errors come mostly
from the differentiated or filtered signals and the model's error, not from the torque sensor.
The payload estimator does about as well with either; the ``arm`` estimator needs adaptive
weights (with the sensors' W its nuisance links absorb the rows' real errors: 50 kg, measured,
force 0.33 and momentum 6.0).

``--draws N`` repeats every cell for N random draws (trajectory, noise, robot error) and prints
medians, with the number of draws in which momentum beat force.

Estimators (RLS log-det-div, λ = 1):

* ``payload``: the seed's — only the payload's 10 parameters, the arm's torque or momentum
  subtracted with the (randomised) model;
* ``arm``: the payload plus the arm's links the payload can be told apart from (link1-6 of the
  Panda; link7 and the hand are welded to the payload) as nuisance parameters, each with a
  log-det prior at the stated model accuracy (``--accuracy``, α·w = 1/accuracy²). Uses only what
  a real user knows (the CAD model and its rough accuracy).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core import RobotModel, logdet_divergence  # noqa: E402
from sysid_ros.core.data.fourier import FourierTrajectory, Limits  # noqa: E402
from sysid_ros.core.model.target import payload_target  # noqa: E402
from sysid_ros.core.online import (  # noqa: E402
    CausalConditioner,
    ConservationRows,
    ForceRows,
    MomentumRows,
    Nuisance,
    RowFilter,
    separable_links,
)
from sysid_ros.core.online.rls_logdet import RLSLogDet  # noqa: E402
from sysid_ros.core.online.row_weights import ResidualWeights  # noqa: E402
from sysid_ros.core.sim.simulation import Recording, SensorModel, simulate_mit  # noqa: E402
from sysid_ros.core.sim.synthetic import Payload, floating_base, randomize, with_payload  # noqa: E402

SEED = {  # the seed's reported figures
    ("ground", 5, 0.0): 0.0217, ("ground", 5, 2.5): 0.0243,
    ("ground", 10, 0.0): 0.0106, ("ground", 10, 2.5): 0.047,
    ("orbital", 5, 2.5): (0.311, 0.179), ("orbital", 10, 2.5): (0.216, 0.090),
    ("orbital", 50, 0.0): (0.133, 0.0077), ("orbital", 50, 2.5): (0.145, 0.0193),
}
ORBITAL_ROWS = ((5, 2.5), (10, 2.5), (50, 0.0), (50, 2.5))
ESTIMATORS = {
    "payload": "payload only, the arm known (the seed's)",
    "arm": "payload + the arm's separable links (link1-6) as nuisance parameters, log-det prior at the "
           "stated model accuracy",
}


def payload(mass: float) -> Payload:
    side = 0.2
    return Payload("hand", mass, np.array([0.0, 0.0, 0.1]), np.eye(3) * mass * side**2 / 6)


def estimator_model(model: RobotModel, error: float, seed: int) -> RobotModel:
    """The robot model the estimator believes in: exact, or the arm's link inertias randomised by
    ``error`` % (§IV-A2); a floating base and the joint terms keep their exact values."""
    if error == 0.0:
        return model
    theta = randomize(model, model.nominal, error / 100.0, np.random.default_rng(seed))
    theta[model.n_body_params:] = model.nominal[model.n_body_params:]
    for b in (j.body for j in model.joints if j.type == "free"):
        theta[model.body_slice(b)] = model.nominal[model.body_slice(b)]
    mj = copy.deepcopy(model.mj)
    model.apply_to(mj, theta)
    return RobotModel(mj, joint_terms=model.joint_terms, source=model.source, xml=model._xml)


@lru_cache(maxsize=4)
def robot_of(path: str, scenario: str) -> RobotModel:
    base = RobotModel.from_mjcf(path)
    return floating_base(base) if scenario == "orbital" else base


def simulate(scenario: str, mass: float, setting: str, args) -> tuple[RobotModel, Recording, np.ndarray]:
    """The robot, the recording and the measured torque (5 % noise) of one run."""
    robot = robot_of(args.model, scenario)
    traj = FourierTrajectory.random(Limits.of(robot, acceleration=args.acceleration), seed=args.seed,
                                    period=10.0)
    noise = args.velocity_noise if setting == "measured" else 0.0
    rec = simulate_mit(robot, traj, args.duration, truth=with_payload(robot, payload(mass)),
                       sensor=SensorModel(velocity_noise=noise, seed=args.seed + 3),
                       integrator="rk4" if scenario == "orbital" else "euler")
    tau = rec.tau.copy()
    act = robot.dof_indices
    tau[:, act] += args.noise * np.random.default_rng(args.seed + 1).standard_normal((len(tau), act.size))
    return robot, rec, tau


def rows_of(regression: str, setting: str, target, robot: RobotModel, rec: Recording, tau: np.ndarray,
            nuisance: Nuisance | None, args) -> list[tuple[list, np.ndarray]]:
    """Row streams of one regression — per stream the rows of every sample (``None`` where there
    are none; streams are aligned by sample and sample ``k`` of each is folded in at step ``k``) and
    their sensor weights W (inverse noise variance of each row)."""
    fs = 1.0 / (rec.t[1] - rec.t[0])
    streams = []
    if regression in ("momentum", "conservation"):  # raw signals; measured: rows low-passed (exact)
        rows = ConservationRows(target, unknown_initial=True, nuisance=nuisance)
        if setting == "measured":
            rows = RowFilter(rows, fs, args.cutoff)
        streams.append((rows.push_batch(rec.t, rec.q, rec.dq, None, tau), np.full(6, args.momentum_weight)))
        if regression == "conservation":
            return streams
    t, q, dq, ddq = rec.t, rec.q, rec.dq, rec.ddq  # exact: the simulator's motion, q̈ exact
    if setting == "measured":  # causal conditioning as in the estimator node (one sample late)
        floating = robot.nq != robot.nv
        cond = CausalConditioner(robot.nv, fs, args.cutoff, nq=robot.nq, quaternions=(3,) if floating else (),
                                 settle="auto")
        t, q, dq, ddq, tau = cond.push_batch(rec.t, rec.q, rec.dq, tau)
    late = [None] * (len(rec.t) - len(t))
    if regression == "force":
        rows = ForceRows(target, nuisance=nuisance).push_batch(t, q, dq, ddq, tau)
        return [(late + rows, np.full(robot.nv, args.noise**-2))]
    # the joints' generalised momentum over windows: torque integrals, variance σ²·h·T
    joints = robot.dof_indices
    h0 = np.zeros((joints.size, 6))  # the joints' rows have no h₀ columns
    # the simulator holds each torque for one step: ∫τ over a step is h·τ_{k−1} (zero-order hold)
    built = MomentumRows(target, window=args.window, nuisance=nuisance, torque_hold=True).push_batch(
        t, q, dq, None, tau)
    rows = [None if r is None else (np.hstack((r[0][joints, :10], h0, r[0][joints, 10:])), r[1][joints])
            for r in built]
    streams.append((late + rows, np.full(joints.size, 1.0 / (args.noise**2 * args.window / fs))))
    return streams


def run(scenario: str, mass: float, error: float, regression: str, setting: str, estimator: str,
        args) -> float:
    """Final divergence of one cell. ``estimator``: "payload" (the seed's: payload only, the arm
    known) or "arm" (payload + the separable arm links as nuisance parameters)."""
    robot, rec, tau = simulate(scenario, mass, setting, args)
    target = payload_target(estimator_model(robot, error, args.seed + 2), "hand")
    nuisance = None
    if estimator == "arm":
        nuisance = Nuisance(separable_links(target.model, "hand"), accuracy=args.accuracy)
    streams = rows_of(regression, setting, target, robot, rec, tau, nuisance, args)
    extra = 0 if regression == "force" else 6  # h₀: flat prior (tiny quadratic term)
    if nuisance is None:
        prior, blocks, weights = np.concatenate((target.prior, np.zeros(extra))), [slice(0, 10)], None
    else:
        prior, blocks, weights = nuisance.setup(target, args.alpha, extra=extra)
    est = RLSLogDet(prior, blocks, alpha=args.alpha, beta=1e-6, weight=1.0, block_weights=weights)
    fs = 1.0 / (rec.t[1] - rec.t[0])
    whiten = [ResidualWeights(w**-0.5, time_constant=args.weight_memory, fs=fs) for _, w in streams]
    for k in range(0, len(rec.t), args.every):
        for (rows, weight), whitener in zip(streams, whiten, strict=True):
            if rows[k] is None:
                continue
            a, y = rows[k]
            if args.weighting == "adaptive":
                est.update(*whitener.whiten(a, y, est.theta))
                whitener.observe(a, y, est.theta)
            else:  # the sensors' W, as whitening
                est.update(a * np.sqrt(weight)[:, None], y * np.sqrt(weight))
    return logdet_divergence(est.theta[:10], payload(mass).params)


def cell(value: float, seed: float | None = None) -> str:
    return f"{value:.3g}" + ("" if seed is None else f" ({seed:g})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "test" / "robots" / "panda.xml"))
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--noise", type=float, default=0.05, help="torque noise σ [N·m]")
    parser.add_argument("--alpha", type=float, default=10.0)
    parser.add_argument("--momentum-weight", type=float, default=1e4,
                        help="W of total-momentum rows [1/(N·s)²]")
    parser.add_argument("--window", type=float, default=0.5, help="[s] generalised-momentum window")
    parser.add_argument("--acceleration", type=float, default=8.0)
    parser.add_argument("--every", type=int, default=1, help="estimate every n-th sample")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--velocity-noise", type=float, default=0.01,
                        help="[rad/s] joint-velocity noise σ of the 'measured' setting")
    parser.add_argument("--cutoff", type=float, default=5.0,
                        help="[Hz] causal low-pass of the 'measured' setting (excitation ≤ 0.5 Hz, "
                             "closed loop 3 Hz)")
    parser.add_argument("--accuracy", type=float, default=0.025,
                        help="relative accuracy of the arm model assumed by the 'arm' estimator")
    parser.add_argument("--draws", type=int, default=1,
                        help="random draws (seeds seed … seed+draws−1: trajectory, noise, robot error); "
                             "cells show the median, Table III counts the draws with momentum < force")
    parser.add_argument("--weighting", choices=("adaptive", "fixed"), default="adaptive",
                        help="row weights: the sensors' W, or estimated online from the residuals "
                             "(ResidualWeights, floor = the sensors' σ)")
    parser.add_argument("--weight-memory", type=float, default=1.0,
                        help="[s] time constant of the adaptive weights")
    parser.add_argument("--settings", nargs="+", choices=("exact", "measured"), default=["exact", "measured"])
    parser.add_argument("--estimators", nargs="+", choices=("payload", "arm"), default=["payload", "arm"])
    args = parser.parse_args()
    if args.draws < 1:
        parser.error("--draws must be at least 1")
    start = time.perf_counter()

    def median_run(*cell_args) -> tuple[float, np.ndarray]:
        """Median over the draws of :func:`run`, and every draw's value."""
        values = np.array([run(*cell_args, argparse.Namespace(**{**vars(args), "seed": args.seed + i}))
                           for i in range(args.draws)])
        return float(np.median(values)), values

    print(f"Panda, {args.duration:g} s at 500 Hz, torque noise σ = {args.noise} N·m, α = {args.alpha}, "
          f"seed {args.seed} ({args.draws} draws), {args.weighting} row weights; 'measured': joint-velocity "
          f"noise σ = {args.velocity_noise} rad/s, causal low-pass {args.cutoff:g} Hz; 'arm' estimator: "
          f"links prior at {100 * args.accuracy:g} %")
    print("final log-det divergence D(estimate ‖ truth) of the payload" + (", median over the draws"
          if args.draws > 1 else "") + "; the seed's figure in brackets")
    met = []
    for estimator in args.estimators:
        print(f"\n=== estimator: {ESTIMATORS[estimator]}")
        print("TABLE II  ground robot, force regression")
        print(f"{'target':<10}{'setting':<10}{'error 0 %':>22}{'error 2.5 %':>22}")
        for mass in (5, 10):
            for setting in args.settings:
                cells = []
                for error in (0.0, 2.5):
                    d, _ = median_run("ground", mass, error, "force", setting, estimator)
                    met.append((f"{estimator}: ground {mass} kg {error} % {setting}",
                                d <= SEED[("ground", mass, error)]))
                    cells.append(cell(d, SEED[("ground", mass, error)]))
                print(f"{f'{mass} kg':<10}{setting:<10}{cells[0]:>22}{cells[1]:>22}")

        print("TABLE III  orbital robot (free-floating, zero g)")
        wins = f"{'mom. < force':>14}" if args.draws > 1 else ""
        print(f"{'target':<16}{'setting':<10}{'force':>20}{'momentum':>20}{'conservation only':>20}{wins}")
        for mass, error in ORBITAL_ROWS:
            seed_force, seed_mom = SEED[("orbital", mass, error)]
            for setting in args.settings:
                runs = {reg: median_run("orbital", mass, error, reg, setting, estimator)
                        for reg in ("force", "momentum", "conservation")}
                d = {reg: median for reg, (median, _) in runs.items()}
                won = int(np.sum(runs["momentum"][1] < runs["force"][1]))
                name = f"{estimator}: orbital {mass} kg {error} % {setting}"
                met.append((f"{name} force", d["force"] <= seed_force))
                met.append((f"{name} momentum", d["momentum"] <= seed_mom))
                met.append((f"{name} momentum < force", d["momentum"] < d["force"]))
                print(f"{f'{mass} kg ({error} %)':<16}{setting:<10}{cell(d['force'], seed_force):>20}"
                      f"{cell(d['momentum'], seed_mom):>20}{cell(d['conservation']):>20}"
                      + (f"{f'{won} of {args.draws}':>14}" if args.draws > 1 else ""))
    missed = [name for name, ok in met if not ok]
    print(f"\ntargets met: {len(met) - len(missed)} of {len(met)}")
    for name in missed:
        print(f"  missed: {name}")
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
