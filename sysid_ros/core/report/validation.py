"""The validation suite: an identified arm checked against a simulated truth, after the overview
seed's *Validation Strategy* table and its *Control Performance Impact* section.

Six checks, each a :class:`CheckResult` (name, figure, threshold, passed, details):

1. ``parameter_recovery`` — ``|β̂ − β| / |β| < 15 %`` for every *scored* base parameter of the
   identified ``θ̂`` (``β = Bθ``: only base parameters are identifiable). Scored: base parameters
   that carry at least :data:`SCORED_SHARE` (1 %) of the torque on the held-out trajectory,
   ``RMS(X_b,i β_i) / RMS(τ)``; the others are below what any data determine and are listed
   in the details only.
2. ``torque_prediction`` — on a held-out trajectory of the truth (another excitation, the true
   applied torque, no sensor noise: the model's own error), the worst joint's torque RMSE as a
   share of the largest torque on the trajectory: ``< 3 %``.
3. ``computed_torque_tracking`` — computed-torque control in MuJoCo closed loop on the truth
   (:mod:`~sysid_ros.core.sim.tracking`) with ``θ̂`` vs with the nominal model's parameters: the
   RMS joint tracking error reduced by ``> 40 %``.
4. ``payload_generalisation`` — identified with payload ``m₁``, predicting with ``m₂ = 8/5 m₁``
   (the seed's 5 → 8 kg): ``θ̂ − φ(P₁) + φ(P₂)`` on a held-out trajectory of the truth carrying
   ``P₂``, relative torque error ``100 ‖τ − τ̂‖ / ‖τ‖ < 5 %``.
5. ``repeatability`` — the result's method on :attr:`ValidationOptions.experiments` (10) fresh
   identification experiments of the truth (new excitation and noise each): ``σ(β̂_i) /
   |mean(β̂_i)| < 10 %`` for every scored base parameter.
6. ``feedforward_vs_pd`` — the control-impact section's claim ("computed-torque control ... using
   π̂ reduces tracking error by 40–60 % vs. PID alone"): computed torque with ``θ̂`` against a
   joint PD alone at the same bandwidth (gains from the nominal model's inertia; the plant has no
   integrator to tune): RMS tracking error reduced by ``> 40 %``.

The truth is a :class:`Truth`: a robot model (the real robot in simulation, e.g. the nominal one
with randomised parameters: :func:`identify_synthetic`) and the payload it carried while the
result was identified. Everything is simulated with :func:`~sysid_ros.core.sim.synthetic.simulate_dataset`
under the MIT law; identifications run :func:`~sysid_ros.core.batch.identify.identify`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.atomic import write_json
from sysid_ros.core.batch.identify import METHODS, IdentifyOptions, identify, prepare, run_method
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import json_number as _num
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import Target, batch_target
from sysid_ros.core.report.files import write_outputs
from sysid_ros.core.report.metrics import base_parameter_errors, evaluate, heldout_torque
from sysid_ros.core.report.plotting import pyplot, save_figure
from sysid_ros.core.report.validation_types import (
    CHECKS,
    DEFAULT_PAYLOAD_COM,
    DEFAULT_PAYLOAD_MASS,
    FEEDFORWARD_REDUCTION,
    PAYLOAD_LIMIT,
    PAYLOAD_RATIO,
    RECOVERY_LIMIT,
    REPEATABILITY_LIMIT,
    SCORED_SHARE,
    TORQUE_LIMIT,
    TRACKING_REDUCTION,
    CheckResult,
    Identified,
    Truth,
    ValidationOptions,
    ValidationReport,
)
from sysid_ros.core.sim.simulation import default_gains
from sysid_ros.core.sim.synthetic import CUBE_SIDE, Payload, randomize
from sysid_ros.core.sim.tracking import TrackingRun, computed_torque, pd_alone, track

log = logging.getLogger(__name__)

__all__ = [
    "CHECKS",
    "CheckResult",
    "Identified",
    "Truth",
    "ValidationOptions",
    "ValidationReport",
    "check_feedforward_vs_pd",
    "check_names",
    "check_parameter_recovery",
    "check_payload_generalisation",
    "check_repeatability",
    "check_torque_prediction",
    "check_tracking",
    "default_payload",
    "identify_synthetic",
    "run_validation",
    "write_report",
]

# ---------------------------------------------------------------------------------------- checks
def heldout_run(truth: Truth, options: ValidationOptions) -> Dataset:
    """The held-out trajectory of the truth (its own excitation seed, no sensor noise)."""
    return truth.simulate(duration=options.heldout_duration, seed=options.seed + 1000)


def torque_shares(target: Target, heldout: Dataset, beta: np.ndarray) -> np.ndarray:
    """Each base parameter's share of the torque on ``heldout``: ``RMS(X_b,i β_i) / RMS(τ)``
    ``(r,)`` (true motion ``meta["q_true"|"dq_true"|"ddq_true"]``)."""
    x, _ = target.regressor(heldout.meta["q_true"], heldout.meta["dq_true"], heldout.meta["ddq_true"])
    xb = target.base.columns(x)
    rms_tau = float(np.sqrt(np.mean(heldout.tau**2)))
    return np.sqrt(np.mean((xb * beta) ** 2, axis=(0, 1))) / max(rms_tau, 1e-300)


def check_parameter_recovery(identified: Identified, truth: Truth, heldout: Dataset) -> CheckResult:
    """Check 1: scored base parameters of ``θ̂`` within 15 % of the truth's."""
    target = identified.target
    beta_true = target.base.of(truth.theta(identified.model))
    shares = torque_shares(target, heldout, beta_true)
    errors = base_parameter_errors(target.base.of(identified.theta), beta_true, names=target.base.names)
    scored = shares >= SCORED_SHARE
    figure = float(np.max(errors.relative[scored])) if scored.any() else math.nan
    worst = _worst(target.base.names, errors.relative, scored)
    rows = {n: {"true": float(t), "estimated": float(e), "relative_error_percent": _num(r),
                "torque_share_percent": 100.0 * float(s), "scored": bool(k)}
            for n, t, e, r, s, k in zip(errors.names, errors.true, errors.estimated, errors.relative,
                                        shares, scored, strict=True)}
    return CheckResult.of(
        "parameter_recovery", figure, RECOVERY_LIMIT, below=True,
        criterion=f"largest |β̂−β|/|β| of the {int(scored.sum())} of {len(shares)} base parameters "
        f"carrying >= {100 * SCORED_SHARE:g} % of the torque (worst: {worst})",
        details={"scored": int(scored.sum()), "base_parameters": rows, "worst": worst},
        series={"names": errors.names, "relative": errors.relative, "scored": scored})


def check_torque_prediction(identified: Identified, heldout: Dataset) -> CheckResult:
    """Check 2: worst joint's torque RMSE on the held-out trajectory < 3 % of its largest torque."""
    fit = heldout_torque(identified.target, heldout, identified.theta)
    peak = float(np.abs(heldout.tau).max())
    ratio = 100.0 * fit.errors.rmse / max(peak, 1e-300)
    j = int(np.nanargmax(ratio))
    joint = heldout.joint_names[j]
    return CheckResult.of(
        "torque_prediction", float(ratio[j]), TORQUE_LIMIT, below=True,
        criterion=f"worst joint's torque RMSE on a {heldout.t[-1] - heldout.t[0]:.0f} s held-out "
        f"trajectory / the largest torque {peak:.3g} N·m ({joint}: {fit.errors.rmse[j]:.3g} N·m; "
        f"relative error {fit.errors.relative:.2f} %)",
        details={"rmse_nm": fit.errors.rmse.tolist(), "peak_nm": np.abs(heldout.tau).max(0).tolist(),
                 "max_torque_nm": peak, "rmse_percent_of_max": ratio.tolist(),
                 "relative_error_percent": fit.errors.relative, "joints": list(heldout.joint_names)},
        series={"fit": fit, "joints": heldout.joint_names})


def tracking_trajectory(model: RobotModel, seed: int) -> FourierTrajectory:
    """The reference of the tracking checks (its own seed, inside the joint and motor limits)."""
    return FourierTrajectory.random(Limits.of(model), seed=seed + 2000)


def tracking_run(identified: Identified, truth: Truth, options: ValidationOptions,
                 theta: np.ndarray | None = None) -> TrackingRun:
    """Computed-torque tracking on the truth with ``theta`` (default ``θ̂``)."""
    law = computed_torque(identified.model, identified.theta if theta is None else theta,
                          bandwidth_hz=options.bandwidth_hz)
    return track(truth.model, truth.mj, tracking_trajectory(identified.model, options.seed),
                 options.tracking_duration, law)


def check_tracking(identified: Identified, truth: Truth, options: ValidationOptions, *,
                   identified_run: TrackingRun | None = None) -> CheckResult:
    """Check 3: computed torque with ``θ̂`` vs the nominal parameters, RMS error reduced > 40 %."""
    run = identified_run or tracking_run(identified, truth, options)
    nominal = tracking_run(identified, truth, options, identified.model.nominal)
    reduction = 100.0 * (1.0 - run.rms / max(nominal.rms, 1e-300))
    return CheckResult.of(
        "computed_torque_tracking", reduction, TRACKING_REDUCTION, below=False,
        criterion=f"RMS joint tracking error, computed torque at {options.bandwidth_hz:g} Hz: "
        f"{_deg(run.rms)} with π̂ vs {_deg(nominal.rms)} with the nominal parameters",
        details=_runs({"identified": run, "nominal": nominal}),
        series={"identified": run, "nominal": nominal})


def check_feedforward_vs_pd(identified: Identified, truth: Truth, options: ValidationOptions, *,
                            identified_run: TrackingRun | None = None) -> CheckResult:
    """Check 6: computed torque with ``θ̂`` vs a joint PD alone at the same bandwidth (gains from
    the nominal model's inertia, critically damped), RMS error reduced > 40 %."""
    run = identified_run or tracking_run(identified, truth, options)
    kp, kd = default_gains(identified.model, bandwidth_hz=options.bandwidth_hz)
    pd = track(truth.model, truth.mj, tracking_trajectory(identified.model, options.seed),
               options.tracking_duration, pd_alone(kp, kd))
    reduction = 100.0 * (1.0 - run.rms / max(pd.rms, 1e-300))
    return CheckResult.of(
        "feedforward_vs_pd", reduction, FEEDFORWARD_REDUCTION, below=False,
        criterion=f"RMS joint tracking error at {options.bandwidth_hz:g} Hz: {_deg(run.rms)} with "
        f"computed torque (π̂) vs {_deg(pd.rms)} with PD alone",
        details=_runs({"identified": run, "pd": pd}) | {"pd_kp": kp.tolist(), "pd_kd": kd.tolist()},
        series={"identified": run, "pd": pd})


def default_payload(model: RobotModel, mass: float = DEFAULT_PAYLOAD_MASS) -> Payload:
    """A 5 cm solid cube of ``mass`` [kg] on the model's last link, CoM :data:`DEFAULT_PAYLOAD_COM`."""
    body = model.body_name(model.param_bodies[-1])
    return Payload(body, mass, np.array(DEFAULT_PAYLOAD_COM), np.eye(3) * mass * CUBE_SIDE**2 / 6.0)


def scaled_payload(payload: Payload, factor: float) -> Payload:
    """The same payload ``factor`` times heavier (same CoM and shape: inertia scaled alike)."""
    return Payload(payload.body, payload.mass * factor, payload.com, payload.inertia * factor)


def check_payload_generalisation(identified: Identified, truth: Truth, options: ValidationOptions
                                 ) -> CheckResult:
    """Check 4: ``θ̂`` identified with the truth's payload P₁ (or none), predicting with P₂ = 8/5
    P₁ (or 8/5 of the default payload): relative torque error < 5 % on a held-out trajectory."""
    model = identified.model
    p1 = truth.payload
    p2 = scaled_payload(p1 or default_payload(model), PAYLOAD_RATIO)
    theta = identified.theta.copy()
    nominal = np.array(model.nominal, dtype=float)
    sl = model.body_slice(p2.body)
    if p1 is not None:
        theta[model.body_slice(p1.body)] -= p1.params
    theta[sl] += p2.params
    nominal[sl] += p2.params
    test = truth.carrying(p2).simulate(duration=options.heldout_duration, seed=options.seed + 3000)
    fit = heldout_torque(identified.target, test, theta)
    fit_nominal = heldout_torque(identified.target, test, nominal)
    m1 = "no payload" if p1 is None else f"{p1.mass:.3g} kg"
    return CheckResult.of(
        "payload_generalisation", fit.errors.relative, PAYLOAD_LIMIT, below=True,
        criterion=f"relative torque error with {p2.mass:.3g} kg on {p2.body} (identified with "
        f"{m1}; the nominal model with the same payload: {fit_nominal.errors.relative:.3g} %)",
        details={"identified_with": None if p1 is None else p1.as_dict(), "test_payload": p2.as_dict(),
                 "torque_rmse_nm": fit.errors.rmse.tolist(), "nominal_relative_error_percent":
                 fit_nominal.errors.relative},
        series={"fit": fit, "joints": test.joint_names})


def check_repeatability(identified: Identified, truth: Truth, options: ValidationOptions,
                        heldout: Dataset, *, progress: Callable[[str], None] | None = None) -> CheckResult:
    """Check 5: the method on ``options.experiments`` fresh experiments of the truth; ``σ/|mean|``
    of every scored base parameter < 10 %."""
    method = options.method or identified.method
    if method not in METHODS:
        raise SysIdError(f"repeatability re-identifies with the result's method, {method!r}, which is "
                         f"not a batch method; choose one of {list(METHODS)} (--method)")
    target = identified.target
    betas = []
    for i in range(options.experiments):
        seed = options.seed + 100 + i
        data = truth.simulate(duration=options.duration, seed=seed, torque_noise=options.torque_noise)
        result = identify(data, target, IdentifyOptions(method=method))
        betas.append(target.base.of(result.parameters.values))
        if progress is not None:
            progress(f"repeatability: experiment {i + 1}/{options.experiments} ({method}) done")
    betas = np.array(betas)
    mean, std = betas.mean(axis=0), betas.std(axis=0, ddof=1)
    spread = 100.0 * std / np.maximum(np.abs(mean), 1e-300)
    scored = torque_shares(target, heldout, target.base.of(truth.theta(identified.model))) >= SCORED_SHARE
    figure = float(np.max(spread[scored])) if scored.any() else math.nan
    worst = _worst(target.base.names, spread, scored)
    return CheckResult.of(
        "repeatability", figure, REPEATABILITY_LIMIT, below=True,
        criterion=f"largest σ/|mean| over {options.experiments} {method} identifications "
        f"({options.duration:g} s each, torque noise {options.torque_noise:g} N·m) of the "
        f"{int(scored.sum())} scored base parameters (worst: {worst})",
        details={"method": method, "experiments": options.experiments, "worst": worst,
                 "base_parameters": {n: {"mean": float(m), "std": float(s), "spread_percent": float(p),
                                         "scored": bool(k)}
                                     for n, m, s, p, k in zip(target.base.names, mean, std, spread,
                                                              scored, strict=True)}},
        series={"names": target.base.names, "spread": spread, "scored": scored})


# ---------------------------------------------------------------------------------------- runner
_THRESHOLDS = {"parameter_recovery": (RECOVERY_LIMIT, True), "torque_prediction": (TORQUE_LIMIT, True),
               "computed_torque_tracking": (TRACKING_REDUCTION, False),
               "payload_generalisation": (PAYLOAD_LIMIT, True),
               "repeatability": (REPEATABILITY_LIMIT, True),
               "feedforward_vs_pd": (FEEDFORWARD_REDUCTION, False)}


def check_names(checks: Sequence[str]) -> tuple[str, ...]:
    """``checks`` if every one is in :data:`CHECKS` (and there is one), else :class:`SysIdError`."""
    if not checks or any(c not in CHECKS for c in checks):
        raise SysIdError(f"expected checks among {list(CHECKS)}, got {list(checks)}")
    return tuple(checks)


def run_validation(identified: Identified, truth: Truth, options: ValidationOptions | None = None, *,
                   checks: Sequence[str] = CHECKS, progress: Callable[[str], None] | None = None
                   ) -> ValidationReport:
    """Run ``checks`` (names from :data:`CHECKS`, run in that order). A check that cannot run (an
    inconsistent θ̂ MuJoCo cannot take, a diverging simulation) is a FAIL saying why."""
    options = options or ValidationOptions()
    check_names(checks)
    say = progress or (lambda msg: log.info("%s", msg))
    heldout: Dataset | None = None
    identified_run: TrackingRun | None = None

    def held() -> Dataset:
        nonlocal heldout
        if heldout is None:
            heldout = heldout_run(truth, options)
        return heldout

    def own_run() -> TrackingRun:
        nonlocal identified_run
        if identified_run is None:
            identified_run = tracking_run(identified, truth, options)
        return identified_run

    table: dict[str, Callable[[], CheckResult]] = {
        "parameter_recovery": lambda: check_parameter_recovery(identified, truth, held()),
        "torque_prediction": lambda: check_torque_prediction(identified, held()),
        "computed_torque_tracking": lambda: check_tracking(identified, truth, options,
                                                           identified_run=own_run()),
        "payload_generalisation": lambda: check_payload_generalisation(identified, truth, options),
        "repeatability": lambda: check_repeatability(identified, truth, options, held(), progress=say),
        "feedforward_vs_pd": lambda: check_feedforward_vs_pd(identified, truth, options,
                                                             identified_run=own_run()),
    }
    results = []
    for name in CHECKS:
        if name not in checks:
            continue
        say(f"check {name}")
        try:
            result = table[name]()
        except SysIdError as exc:
            threshold, below = _THRESHOLDS[name]
            result = CheckResult.failed(name, threshold, below=below, reason=f"could not run: {exc}")
        say(result.line())
        results.append(result)
    return ValidationReport(tuple(results), identified, truth, options)


def identify_synthetic(model_path: str | os.PathLike[str], out: str | os.PathLike[str], *,
                       method: str = "pc_ls", joint_terms: Sequence[str] = ("Fc", "Fv", "Ia"),
                       payload: Payload | None = None, deviation: float = 0.2,
                       options: ValidationOptions | None = None,
                       progress: Callable[[str], None] | None = None) -> tuple[Identified, Truth]:
    """A truth and an identification of it, for the suite: the nominal robot with every body's
    mass, CoM and principal moments and its joint terms off by up to ``deviation`` (the seed: real
    robots deviate 10–30 % from the nominal; :func:`~sysid_ros.core.sim.synthetic.randomize`),
    written to ``out/truth.xml``, carrying ``payload`` (default :func:`default_payload`); one
    experiment of ``options.duration`` with torque noise identified with ``method`` on the
    nominal model with ``joint_terms``, written to ``out/identified/`` as by ``sysid identify``."""
    options = options or ValidationOptions()
    if method not in METHODS:
        raise SysIdError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    if not (math.isfinite(deviation) and 0 <= deviation < 1):
        raise SysIdError(f"the deviation must be a number in [0, 1), got {deviation}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    full = RobotModel.load(str(model_path))
    rng = np.random.default_rng(options.seed)
    truth_path = full.to_mjcf(randomize(full, full.nominal, deviation, rng), out / "truth.xml")
    nominal = RobotModel.load(str(model_path), joint_terms=tuple(joint_terms))
    truth = Truth(RobotModel.load(str(truth_path)), payload or default_payload(nominal), str(truth_path))
    target = batch_target(nominal)
    data = truth.simulate(duration=options.duration, seed=options.seed + 1, torque_noise=options.torque_noise)
    say = progress or (lambda msg: log.info("%s", msg))
    say(f"identifying the truth ({out / 'truth.xml'}, deviation {100 * deviation:g} %, payload "
        f"{truth.payload.mass:g} kg on {truth.payload.body}) with {method} on {options.duration:g} s")
    id_options = IdentifyOptions(method=method)
    prep = prepare(data, target, id_options.preprocessing)
    result = run_method(prep, id_options)
    write_outputs(out / "identified", result, target, evaluate(result, prep))
    identified = Identified(target, result.parameters.values.copy(), method,
                            str(out / "identified" / "result.json"))
    return identified, truth


# --------------------------------------------------------------------------------------- writers
def write_report(out: str | os.PathLike[str], report: ValidationReport, *, plots: bool = True) -> list[Path]:
    """``validation.json`` and, with ``plots``, ``tracking.png``, ``torque_prediction.png`` and
    ``parameters.png`` into ``out`` (each written whole, through a temporary file)."""
    out = Path(out)
    paths = [write_json(out / "validation.json", report.as_dict())]
    if plots:
        by_name = {c.name: c for c in report.checks}
        for writer in (_plot_tracking, _plot_torque, _plot_parameters):
            written = writer(out, by_name)
            if written is not None:
                paths.append(written)
    return paths


def _plot_tracking(out: Path, checks: dict[str, CheckResult]) -> Path | None:
    runs: dict[str, TrackingRun] = {}
    for name in ("computed_torque_tracking", "feedforward_vs_pd"):
        if name in checks:
            runs |= checks[name].series
    if not runs:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    labels = {"identified": "computed torque, π̂", "nominal": "computed torque, nominal", "pd": "PD alone"}
    for key, run in runs.items():
        ax.plot(run.t, np.degrees(np.linalg.norm(run.error, axis=1)), lw=1.0,
                label=f"{labels.get(key, key)} (RMS {_deg(run.rms)})")
    ax.set_yscale("log")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("‖q_d − q‖ [deg]")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("closed-loop tracking on the truth (MuJoCo)", fontsize=10)
    return save_figure(fig, out / "tracking.png", dpi=90)


def _plot_torque(out: Path, checks: dict[str, CheckResult]) -> Path | None:
    panels = [(checks[n].series["fit"], checks[n].series["joints"], title) for n, title in
              (("torque_prediction", "held-out trajectory"), ("payload_generalisation", "test payload"))
              if n in checks and "fit" in checks[n].series]
    if not panels:
        return None
    plt = pyplot()
    n = panels[0][0].measured.shape[1]
    fig, axes = plt.subplots(n, len(panels), figsize=(6 * len(panels), 1.6 * n + 1), sharex="col",
                             squeeze=False)
    for c, (fit, joints, title) in enumerate(panels):
        for j in range(n):
            ax = axes[j, c]
            ax.plot(fit.t, fit.measured[:, j], lw=1.0, label="truth")
            ax.plot(fit.t, fit.predicted[:, j], lw=1.0, ls="--", label="π̂")
            ax.set_ylabel(f"{joints[j]} [N·m]", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0, c].set_title(f"{title}: relative error {fit.errors.relative:.2f} %", fontsize=9)
        axes[-1, c].set_xlabel("time [s]")
    axes[0, 0].legend(fontsize=8)
    return save_figure(fig, out / "torque_prediction.png", dpi=90)


def _plot_parameters(out: Path, checks: dict[str, CheckResult]) -> Path | None:
    panels = [(checks[n].series, key, limit, label) for n, key, limit, label in
              (("parameter_recovery", "relative", RECOVERY_LIMIT, "|β̂−β|/|β| [%]"),
               ("repeatability", "spread", REPEATABILITY_LIMIT, "σ/|mean| [%]"))
              if n in checks and key in checks[n].series]
    if not panels:
        return None
    plt = pyplot()
    # room for the rotated names under each panel (6 pt text: ~0.05 in per character) and a bar
    # width each can be read at: every label inside the figure
    longest = max((len(n) for series, *_ in panels for n in series["names"]), default=10)
    bars = max((int(np.sum(series["scored"])) for series, *_ in panels), default=1)
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(max(10.0, 0.16 * bars), len(panels) * (2.4 + 0.045 * min(longest, 28))))
    for ax, (series, key, limit, label) in zip(axes[:, 0], panels, strict=True):
        scored = np.asarray(series["scored"])
        values = np.asarray(series[key])[scored]
        names = [n if len(n) <= 28 else n[:26] + "…"
                 for n, s in zip(series["names"], scored, strict=True) if s]
        ax.bar(np.arange(values.size), values, color=["C0" if v < limit else "C3" for v in values])
        ax.axhline(limit, color="k", ls="--", lw=1)
        ax.set_xticks(np.arange(values.size), names, rotation=60, ha="right", fontsize=6)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    axes[0, 0].set_title("scored base parameters (>= 1 % of the torque)", fontsize=10)
    return save_figure(fig, out / "parameters.png", dpi=90)


# --------------------------------------------------------------------------------------- helpers
def _runs(runs: dict[str, TrackingRun]) -> dict[str, Any]:
    return {f"{k}_rms_rad": r.rms for k, r in runs.items()} | {
        f"{k}_max_rad": r.max_error for k, r in runs.items()} | {
        f"{k}_rms_joint_rad": r.rms_joint.tolist() for k, r in runs.items()} | {
        f"{k}_saturated_steps": r.saturated_steps for k, r in runs.items()}


def _worst(names: Sequence[str], values: np.ndarray, scored: np.ndarray) -> str:
    """The scored name with the largest value ('' when none is scored)."""
    if not scored.any():
        return ""
    return names[int(np.flatnonzero(scored)[np.argmax(values[scored])])]


def _deg(rad: float) -> str:
    return f"{math.degrees(rad):.3g}°"
