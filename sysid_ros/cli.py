"""The ``sysid`` command line.

    sysid inspect MODEL.xml [--json]
    sysid demo [--model MODEL.xml] [--payload SPEC] [--duration S] [--realtime] [--out DIR]
    sysid pipeline [--model MODEL.xml] [--duration S] [--seed N] [--out DIR] [--json]
    sysid trajectory MODEL.xml --export FILE [--optimize] [--duration S] [--rate HZ] [--start Q,..]
    sysid simulate MODEL.xml --out BAG [--duration S] [--seed N] [--noise torque=..,position=..]
                   [--encoder-resolution RAD] [--payload body=NAME,mass=KG,com=X,Y,Z[,inertia=..]]
                   [--rate HZ] [--storage mcap|sqlite3]
    sysid identify BAG_OR_CSV [RUN2 ...] --model MODEL.xml --method M --out DIR [--json]
                   [--payloads KNOWN.json] [--drive-gains]
                   [--payload-only BODY] [--friction coulomb,viscous,offset,stribeck,sigmoid] [--armature]
                   [--stribeck-velocity RAD_S] [--sigmoid-shape PHI2,PHI3]
                   [--validate OTHER_BAG] [--bandwidth HZ] [--regularization W]
                   [--columns FIELD=COLUMN,..] [--time-unit s|ms|us|ns] [--controller LAW:GAINS]
                   online (--method rls|rls_logdet|momentum|ekf|mhe): [--alpha A] [--forgetting LAMBDA]
                   [--torque-noise NM] [--weighting fixed|adaptive] [--weight-memory S] [--cutoff HZ]
                   [--sample-rate HZ] [--gap-periods N] [--window S] [--min-speed RAD_S]
                   [--drift PER_SQRT_S] [--position-noise RAD] [--velocity-noise RAD_S]
                   [--horizon S] [--solve-rate HZ]
    sysid monitor BAG_OR_CSV --model MODEL.xml [--result result.json] [--calibrate CONTACT_FREE_BAG |
                  --threshold NM[,NM..] | --calibration-time S] [--gain 1/S] [--sigma-factor K]
                  [--peak-factor F] [--margin NM] [--release R] [--json]
    sysid report RESULT_DIR [--out FILE]
    sysid bag recover PATH    (a recording killed before it finished: the bag's path or its
                               .NAME.partial-* folder)
    sysid validate [--model MODEL.xml] [--result DIR/result.json [--truth TRUE.xml|truth.json]]
                   [--payload SPEC] [--method M] [--quick] [--only CHECK,..] [--out DIR]

Exit codes: 0 success, 1 the work failed (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from sysid_ros import headless  # noqa: F401  (before MuJoCo's first import: no OpenGL probe)
from sysid_ros.core import base_parameters, run_offline_pipeline
from sysid_ros.core.batch.identify import (
    COMMAND_METHODS,
    METHODS,
    IdentifyOptions,
    check_method,
    online_result,
    prepare,
    run_method,
)
from sysid_ros.core.batch.multi_run import identify_runs, load_payloads, prepare_runs
from sysid_ros.core.blas import single_threaded_blas
from sysid_ros.core.data.bag import TRUTH_FILE, dataset_topics, read_data, write_bag
from sysid_ros.core.data.columns import TIME_UNITS, ColumnMap
from sysid_ros.core.data.controller import ControllerDescription
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import InterruptError, SysIdError
from sysid_ros.core.model.joint_defaults import default_joint_terms, excluded_line
from sysid_ros.core.model.robot import RobotModel, joint_terms
from sysid_ros.core.model.target import Plausibility, batch_target, joint_prior_spec
from sysid_ros.core.model.urdf import BASES
from sysid_ros.core.monitor import detector as contact
from sysid_ros.core.monitor.observer import DEFAULT_GAIN
from sysid_ros.core.online import WEIGHTINGS
from sysid_ros.core.online.replay import plot_convergence, replay, write_trajectory
from sysid_ros.core.online.rows import DISCRETISATIONS
from sysid_ros.core.online.session import ONLINE_METHODS, OPTION_HELP, OnlineOptions
from sysid_ros.core.output_paths import check_file, check_folder
from sysid_ros.core.report.files import dumps_strict, summary, write_outputs
from sysid_ros.core.report.html import write_report
from sysid_ros.core.report.metrics import evaluate, truth_parameters
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset
from sysid_ros.resources import default_robot_path

log = logging.getLogger("sysid")


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
        "torque_limits": [None if not np.isfinite(v) else float(v) for v in model.torque_limits()],
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


def _demo(args: argparse.Namespace) -> int:
    from sysid_ros.nodes.sim_demo import DEFAULT_PAYLOAD, DemoOptions, run_demo

    methods = tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SysIdError(f"unknown batch methods {unknown}; choose among {list(METHODS)}")
    run_demo(DemoOptions(model=args.model or "", payload=args.payload or DEFAULT_PAYLOAD,
                         excitation_time=args.duration, real_time_factor=args.real_time_factor,
                         lockstep=not args.realtime,
                         methods=methods, out=Path(args.out), seed=args.seed, domain_id=args.domain_id))
    return 0


def _trajectory(args: argparse.Namespace) -> int:
    from sysid_ros.core.data.trajectory_file import write_trajectory_file
    from sysid_ros.core.excitation.design import choose_excitation, condition_number
    from sysid_ros.core.excitation.fourier import Limits
    from sysid_ros.core.excitation.plan import ExcitationPlan

    check_file(args.export, "--export")
    if args.save_coefficients:
        check_file(args.save_coefficients, "--save-coefficients")
    model = RobotModel.from_mjcf(args.model)
    limits = Limits.of(model, acceleration=args.max_acceleration)
    traj = choose_excitation(model, limits, coefficients_file=args.coefficients or "", optimize=args.optimize,
                             harmonics=args.harmonics, period=args.period, seed=args.seed,
                             say=lambda msg: print(msg, file=sys.stderr))
    start = traj.q0 if not args.start else np.array([float(x) for x in args.start.split(",")])
    plan = ExcitationPlan.build(model, traj, start, excitation_time=args.duration or None,
                                ramp_time=args.ramp, limits=limits)
    sampled = plan.sampled(args.rate)
    path = write_trajectory_file(args.export, sampled)
    if args.save_coefficients:
        doc = {"q0": traj.q0.tolist(), "a": traj.a.tolist(), "b": traj.b.tolist(), "period": traj.period}
        Path(args.save_coefficients).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {path}: {sampled.duration:.2f} s at {args.rate:g} Hz, {len(sampled.joints)} joints "
          f"({', '.join(f'{j}:{m}' for j, m in zip(sampled.joints, sampled.motors, strict=True))}); "
          f"condition number {condition_number(model, traj):.1f}; {plan.clamps.summary()}")
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    if args.out:
        check_folder(args.out, "--out")
    model_path = Path(args.model) if args.model else default_robot_path()
    print(f"[sysid pipeline] offline pipeline on {model_path} (duration {args.duration} s, seed {args.seed})",
          file=sys.stderr)
    start = time.perf_counter()
    report = run_offline_pipeline(model_path, duration=args.duration, seed=args.seed)
    elapsed = time.perf_counter() - start
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "pipeline_report.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(dumps_strict(report.as_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        print(f"[sysid pipeline] wrote {path}", file=sys.stderr)
    if args.json:
        print(dumps_strict(report.as_dict(), indent=2))
    else:
        print(report.table())
        print(f"total time {elapsed:.2f} s (simulate {report.durations['simulate']:.2f} s, "
              f"identify {report.durations['identify']:.2f} s)")
    return 0


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


def _identify(args: argparse.Namespace) -> int:
    with single_threaded_blas():  # the batch path's matrices are small: see sysid_ros/core/blas.py
        return _identify_blas(args)


def _identify_blas(args: argparse.Namespace) -> int:
    check_folder(args.out, "--out")
    model = RobotModel.from_mjcf(args.model, joint_terms=(), base=args.base)
    model = model.with_joint_terms(default_joint_terms(model.mj, args.friction, args.armature))
    excluded = excluded_line(model.mj, model.joint_terms)
    if excluded and not args.payload_only:
        print(f"[sysid identify] {excluded}", file=sys.stderr)
    target = batch_target(model, args.payload_only or "", plausibility=Plausibility(
        args.mass_factor, args.extent_factor, args.com_radius),
        joint_prior=joint_prior_spec(args.friction_prior))
    settings = Preprocessing(bandwidth=args.bandwidth, differentiator=args.differentiator,
                             velocity=args.velocity, min_segment=args.min_segment,
                             stationary_cut=args.stationary_cut, resample=args.resample,
                             bridge_gaps=args.bridge_gaps)
    options = IdentifyOptions(method=args.method, preprocessing=settings,
                              regularization=args.regularization, max_samples=args.max_samples,
                              progress=lambda msg: print(f"[sysid identify] {msg}", file=sys.stderr),
                              stribeck_velocity=args.stribeck_velocity,
                              sigmoid_shape=_sigmoid_shape(args.sigmoid_shape),
                              drop_outliers=args.drop_outliers)
    if len(args.data) > 1 or args.payloads or args.drive_gains:
        return _identify_runs(args, model, target, settings, options)
    ds = read_data(args.data[0], joint_states_topic=args.joint_states_topic,
                   command_topic=args.command_topic, joint_names=model.dof_joint_names,
                   commands=args.method in COMMAND_METHODS or bool(args.controller), **_csv_layout(args))
    ds = _controlled(_calibrated(ds.for_model(model), args), args)
    prep = prepare(ds, target, settings, min_speed=options.min_speed, progress=options.progress,
                   stribeck_velocity=options.stribeck_velocity, sigmoid_shape=options.sigmoid_shape)
    target = prep.target  # with the Stribeck velocity and sigmoid shapes found, if searched
    online = None
    if args.method in ONLINE_METHODS:
        online = replay(ds, target, _online_options(args, ds.sample_rate),
                        truth=truth_parameters(ds.truth, target), progress=options.progress).estimator
        result = online_result(prep, online)
    else:
        check_method(args.method)
        result = run_method(prep, options)
    val_prep = None
    if args.validate:
        val = _calibrated(read_data(args.validate, joint_states_topic=args.joint_states_topic,
                                    command_topic=args.command_topic,
                                    joint_names=model.dof_joint_names, commands=False,
                                    **_csv_layout(args)).for_model(model), args)
        val_prep = prepare(val, target, settings, min_speed=options.min_speed, progress=options.progress,
                           search_stribeck=False, search_sigmoid=False)
    evaluation = evaluate(result, prep, validation=val_prep)
    paths, doc = write_outputs(args.out, result, target, evaluation, plots=not args.no_plots,
                               inputs=_inputs(args))
    if online is not None:
        paths.append(write_trajectory(Path(args.out) / "estimates.csv", online))
        if not args.no_plots:
            paths.append(plot_convergence(Path(args.out) / "convergence.png", online))
    return _report(args, result, evaluation, paths, doc)


def _monitor(args: argparse.Namespace) -> int:
    from sysid_ros.core.monitor import Thresholds, calibrate, monitor_recording, parameters_from_result

    model = RobotModel.load(args.model, base=args.base)
    theta = parameters_from_result(model, args.result) if args.result else model.nominal
    data = read_data(args.data, joint_states_topic=args.joint_states_topic,
                     joint_names=model.dof_joint_names).for_model(model)
    factors = {"sigma_factor": args.sigma_factor, "peak_factor": args.peak_factor, "margin": args.margin}
    if args.threshold:
        thresholds = Thresholds.given(_floats(args.threshold), model.nv)
        source = "given"
    elif args.calibrate:
        calib = read_data(args.calibrate, joint_states_topic=args.joint_states_topic,
                          joint_names=model.dof_joint_names)
        thresholds = calibrate(model, theta, calib, gain=args.gain, **factors)
        source = f"calibrated on {args.calibrate}"
    else:
        if not (np.isfinite(args.calibration_time) and args.calibration_time > 0):
            raise SysIdError(f"--calibration-time must be > 0 s, got {args.calibration_time}")
        first = data.samples(data.t - data.t[0] <= args.calibration_time)
        thresholds = calibrate(model, theta, first, gain=args.gain, **factors)
        source = f"calibrated on the first {args.calibration_time:g} s of the data (assumed contact-free)"
    report = monitor_recording(model, theta, data, thresholds, gain=args.gain, release=args.release)
    names = model.dof_joint_names
    if args.json:
        print(dumps_strict({"data": str(args.data), "model": str(args.model), "result": args.result,
                          "gain_per_s": args.gain, "thresholds_from": source,
                          **thresholds.as_dict(names), "events": [e.as_dict() for e in report.events]},
                         indent=2))
        return 0
    print(f"{args.data}: {len(data)} samples over {data.t[-1] - data.t[0]:.2f} s, observer gain "
          f"{args.gain:g} 1/s; thresholds {source}:")
    for j, name in enumerate(names):
        stats = ("" if not np.isfinite(thresholds.rms[j]) else
                 f"  (residual rms {thresholds.rms[j]:.4f}, peak {thresholds.peak[j]:.4f} N·m)")
        print(f"  {name:<16} {thresholds.values[j]:8.4f} N·m{stats}")
    for event in report.events:
        print(event.describe())
    print(f"{len(report.contacts)} contact(s)")
    return 0


def _identify_runs(args: argparse.Namespace, model: RobotModel, target, settings: Preprocessing,
                   options: IdentifyOptions) -> int:
    """``sysid identify RUN1 RUN2 ... [--payloads KNOWN.json] [--drive-gains]``: the arm from
    several runs, each with its known payload (:mod:`sysid_ros.core.batch.multi_run`)."""
    if args.method in ONLINE_METHODS:
        raise SysIdError(f"{args.method} replays one run; several runs take a batch method")
    check_method(args.method)
    datasets = [_controlled(_calibrated(read_data(path, joint_states_topic=args.joint_states_topic,
                                                  command_topic=args.command_topic,
                                                  joint_names=model.dof_joint_names,
                                                  **_csv_layout(args)).for_model(model), args), args)
                for path in args.data]
    payloads = load_payloads(args.payloads, len(datasets)) if args.payloads else [None] * len(datasets)
    multi = prepare_runs(datasets, payloads, target, settings, min_speed=options.min_speed,
                         progress=options.progress, stribeck_velocity=options.stribeck_velocity,
                         sigmoid_shape=options.sigmoid_shape,
                         gains=args.drive_gains)
    target = multi.prep.target
    result, prep, gains = identify_runs(multi, options, gains=args.drive_gains)
    val_prep = None
    if args.validate:
        val = _calibrated(read_data(args.validate, joint_states_topic=args.joint_states_topic,
                                    command_topic=args.command_topic, joint_names=model.dof_joint_names,
                                    **_csv_layout(args)).for_model(model), args)
        val_prep = prepare(val, target, settings, min_speed=options.min_speed, progress=options.progress,
                           search_stribeck=False, search_sigmoid=False)
        val_prep = replace(val_prep, y=val_prep.y * gains[None, :])
    evaluation = evaluate(result, prep, validation=val_prep)
    paths, doc = write_outputs(args.out, result, target, evaluation, plots=not args.no_plots,
                               inputs=_inputs(args))
    return _report(args, result, evaluation, paths, doc)


def _report(args: argparse.Namespace, result, evaluation, paths: list, doc: dict) -> int:
    """What ``sysid identify`` prints (result.json with ``--json``, else the summary and the files
    written) and its exit code (:func:`_trust`)."""
    if args.json:
        print(dumps_strict(doc, indent=2))
    else:
        print(summary(result, evaluation))
        for p in paths:
            print(f"wrote {p}")
    return _trust(result)


def _inputs(args: argparse.Namespace) -> list[str]:
    """The data files of ``sysid identify`` (hashed into result.json's provenance)."""
    return [*args.data, *([args.validate] if args.validate else [])]


def _report_html(args: argparse.Namespace) -> int:
    """``sysid report RESULT_DIR [--out FILE]``: report.html of a result folder."""
    out = check_file(args.out, "--out") if args.out else None
    print(f"wrote {write_report(args.result_dir, out=out)}")
    return 0


def _calibrated(ds, args: argparse.Namespace):
    """``--torque-scale`` / ``--torque-offset`` applied (``ds`` in the model's joint order)."""
    return ds.with_torque_calibration(_floats(args.torque_scale), _floats(args.torque_offset))


def _csv_layout(args: argparse.Namespace) -> dict:
    """``--columns`` / ``--time-unit`` as :func:`read_data`'s arguments."""
    return {"columns": ColumnMap.parse(args.columns) if args.columns else None, "time_unit": args.time_unit}


def _controlled(ds, args: argparse.Namespace):
    """``--controller``'s gains with the recorded reference as the command log (IV methods)."""
    return ControllerDescription.parse(args.controller).apply(ds) if args.controller else ds


def _floats(text: str | None) -> list[float] | None:
    """Comma-separated numbers (``None`` stays ``None``)."""
    if text is None:
        return None
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise SysIdError(f"expected comma-separated numbers, got {text!r}") from None
    return values


def _sigmoid_shape(text: str | None) -> tuple[float, float] | None:
    """``--sigmoid-shape PHI2,PHI3`` as a pair (``None`` stays ``None``: searched)."""
    values = _floats(text)
    if values is None:
        return None
    if len(values) != 2:
        raise SysIdError(f"--sigmoid-shape: expected PHI2,PHI3 (steepness [s/rad], offset [rad/s]), "
                         f"got {text!r}")
    return values[0], values[1]


def _trust(result) -> int:
    """0 if the estimate can be used; 3 (and why, on stderr) if the solver did not reach an
    optimal, converged solution or the exported parameters are not physically consistent (the
    files are written all the same, saying so)."""
    problems = []
    if not result.solver.optimal:
        problems.append(f"solver {result.solver.solver} ended with status {result.solver.status}"
                        + ("" if result.solver.converged else ", not converged"))
    cons = result.consistency
    if cons is not None and not cons.consistent:
        problems.append(f"the exported parameters are not physically consistent ({', '.join(cons.failures)})")
    if not problems:
        return 0
    print(f"sysid identify: the {result.method} estimate is not trustworthy: {'; '.join(problems)}",
          file=sys.stderr)
    return 3


def _online_options(args: argparse.Namespace, data_rate: float) -> OnlineOptions:
    """The session options of ``identify --method rls|rls_logdet|momentum|ekf|mhe`` (the estimator node's
    parameters of the same names); the sample rate is the data's unless given."""
    values = {name: getattr(args, name) for name in OnlineOptions.names() if name != "method"}
    if values["sample_rate"] is None:
        values["sample_rate"] = data_rate
    return OnlineOptions(method=args.method, **values)


def _add_online_options(parser: argparse.ArgumentParser) -> None:
    """One option per :class:`OnlineOptions` field (the estimator node's parameters), with its
    default and units."""
    group = parser.add_argument_group("online estimation (--method rls, rls_logdet, momentum, ekf, mhe)")
    defaults = OnlineOptions()
    metavar = {"alpha": "A", "forgetting": "LAMBDA", "torque_noise": "NM", "weight_memory": "S",
               "cutoff": "HZ", "sample_rate": "HZ", "gap_periods": "N", "window": "S", "min_speed": "RAD_S",
               "drift": "PER_SQRT_S", "position_noise": "RAD", "velocity_noise": "RAD_S", "horizon": "S",
               "solve_rate": "HZ"}
    for name in OnlineOptions.names():
        if name in ("method", "stationary_cut"):  # shared with the batch methods
            continue
        default = getattr(defaults, name)
        flag = "--" + name.replace("_", "-")
        if name == "sample_rate":
            group.add_argument(flag, type=float, default=None, metavar=metavar[name],
                               help=f"{OPTION_HELP[name]} (default: the data's median rate)")
        elif name in ("weighting", "momentum_scheme"):
            choices = WEIGHTINGS if name == "weighting" else DISCRETISATIONS
            group.add_argument(flag, choices=choices, default=default,
                               help=f"{OPTION_HELP[name]} (default: {default})")
        else:
            group.add_argument(flag, type=type(default), default=default, metavar=metavar[name],
                               help=f"{OPTION_HELP[name]} (default: {default:g})")


def _bag_recover(args: argparse.Namespace) -> int:
    from sysid_ros.core.data.bag import recover_bag

    rec = recover_bag(args.path)
    dropped = f" (dropped an incomplete last record: {rec.truncated_bytes} B)" if rec.truncated_bytes else ""
    print(f"recovered {rec.path} from {rec.source}{dropped}")
    for topic, n in rec.counts.items():
        gaps = f", {rec.gaps[topic]} missing in stamp gaps" if topic in rec.gaps else ""
        print(f"  {topic}: {n} messages recovered{gaps}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from sysid_ros.core.report import validation as v

    check_folder(args.out, "--out")
    model_path = Path(args.model) if args.model else default_robot_path()
    changes = {k: getattr(args, k) for k in ("seed", "duration", "experiments", "bandwidth_hz",
                                             "torque_noise") if getattr(args, k) is not None}
    if args.result and args.method:
        changes["method"] = args.method
    options = v.ValidationOptions.quick(**changes) if args.quick else v.ValidationOptions(**changes)
    checks = v.check_names([c.strip() for c in args.only.split(",") if c.strip()]) if args.only else v.CHECKS
    payload = Payload.parse(args.payload) if args.payload else None
    if not args.verbose:  # the repeated identifications' warnings are in their results
        logging.getLogger("sysid_ros.core.batch").setLevel(logging.ERROR)

    def say(msg: str) -> None:
        print(f"[sysid validate] {msg}", file=sys.stderr)

    if args.truth and not args.result:
        raise SysIdError("--truth describes the robot a --result was identified on; give --result too")
    if args.result:
        identified = v.Identified.from_result(args.result, model_path)
        truth = (v.Truth.load(args.truth, payload=payload) if args.truth
                 else v.Truth(RobotModel.load(str(model_path)), payload, str(model_path)))
    else:
        identified, truth = v.identify_synthetic(
            model_path, args.out, method=args.method or "pc_ls",
            joint_terms=joint_terms(args.friction, not args.no_armature), payload=payload,
            deviation=args.deviation, options=options, progress=say)
    say(f"validating {identified.source} ({identified.method}) against {truth.source}")
    report = v.run_validation(identified, truth, options, checks=checks, progress=say)
    paths = v.write_report(args.out, report, plots=not args.no_plots)
    paths.append(write_report(args.out))  # the identified result's page with the suite's checks
    print("\n".join(report.lines()))
    for p in paths:
        print(f"wrote {p}")
    failed = [c.name for c in report.checks if not c.passed]
    if failed:
        print(f"sysid validate: {len(failed)} of {len(report.checks)} checks failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


class HelpFormatter(argparse.HelpFormatter):
    """The one help formatter of the ``sysid`` parser and every subcommand's parser: every option
    that has a default shows it, once — appended as ``(default: X)`` unless its help already says
    what the default is; switches (default off) and options without a default say nothing more."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or "%(default)" in text or default is None
                or default is False or default is argparse.SUPPRESS or action.nargs == 0):
            return text
        shown = "''" if default == "" else "%(default)s"
        return f"{text} (default: {shown})" if text else f"(default: {shown})"


class _Parser(argparse.ArgumentParser):
    """Every subcommand's parser: the one :class:`HelpFormatter`."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def _add_base_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", choices=BASES, default=None,
                        help="fixed: weld the root to the world; floating: a free joint on the root "
                        "(URDF: MuJoCo's import welds the root link); default: as the model says. "
                        "Data of joint states (simulate, identify) need a fixed base")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sysid", description="Robot arm dynamic-parameter identification.",
                                     formatter_class=HelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("inspect", help="joints, bodies, parameter count, base rank of an MJCF or URDF model")
    p.add_argument("model", help="MJCF or URDF file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-joint-terms", action="store_true", help="rigid-body parameters only")
    p.add_argument("--seed", type=int, default=0, help="seed of the random excitation")
    _add_base_option(p)
    p.set_defaults(func=_inspect)

    p = sub.add_parser("demo", help="the closed loop in simulation: sim + trajectory + online estimator + "
                       "recorder over ROS 2, then BatchSolve on the bag; true vs estimated payload")
    p.add_argument("--model", help="MJCF or URDF file (default: the package's default robot)")
    p.add_argument("--payload", default=None, help="body=NAME,mass=KG,com=X,Y,Z[,inertia=...] "
                   "(default: 0.6 kg on link_6 of the default robot)")
    p.add_argument("--duration", type=float, default=30.0, help="excitation length [s] (simulated)")
    p.add_argument("--real-time-factor", type=float, default=0.0,
                   help="at most this many simulated s per wall s (0 = as fast as the graph goes)")
    p.add_argument("--realtime", action="store_true",
                   help="free-running simulation (paced by the wall clock, results depend on load) "
                   "instead of lockstep (the same answer on a busy machine as on an idle one)")
    p.add_argument("--methods", default="dual_metric,pc_iv", help="batch methods on the recorded bag")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (excitation, noise)")
    p.add_argument("--domain-id", type=int, help="ROS_DOMAIN_ID (0-101) of the demo's graph (default: "
                   "$ROS_DOMAIN_ID, else a private one)")
    p.add_argument("--out", default="out/demo", help="output folder")
    p.set_defaults(func=_demo)

    p = sub.add_parser("pipeline", help="offline pipeline without ROS: simulate, least squares, validate")
    p.add_argument("--model", help="MJCF or URDF file (default: the package's default robot)")
    p.add_argument("--duration", type=float, default=30.0, help="excitation length [s]")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (excitation, noise)")
    p.add_argument("--out", help="folder for pipeline_report.json")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_pipeline)

    p = sub.add_parser("trajectory", help="an excitation trajectory as a replayable per-motor file")
    p.add_argument("model", help="MJCF or URDF file")
    p.add_argument("--export", required=True, metavar="FILE", help="CSV file to write")
    p.add_argument("--optimize", action="store_true", help="minimise the base regressor's condition number")
    p.add_argument("--coefficients", help="JSON {q0, a, b, period} instead of random/optimised ones")
    p.add_argument("--save-coefficients", metavar="JSON", help="also write the coefficients used")
    p.add_argument("--harmonics", type=int, default=5, help="Fourier harmonics per joint")
    p.add_argument("--period", type=float, default=10.0, help="Fourier base period [s]")
    p.add_argument("--duration", type=float, default=0.0, help="excitation length [s] (0 = one period)")
    p.add_argument("--ramp", type=float, default=2.0, help="shortest ramp in/out [s]")
    p.add_argument("--start", help="comma list of the start (and rest) pose [rad] (default: the centre)")
    p.add_argument("--rate", type=float, default=1000.0, help="samples per second in the file")
    p.add_argument("--max-acceleration", type=float, default=8.0, help="[rad/s²]")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (excitation, noise)")
    p.set_defaults(func=_trajectory)

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
    _add_base_option(p)
    p.set_defaults(func=_simulate)

    p = sub.add_parser("identify", help="identify parameters from a bag or CSV file")
    p.add_argument("data", nargs="+", help="rosbag2 directory or CSV file; several: runs of the same "
                   "arm identified jointly (each with its payload of --payloads)")
    p.add_argument("--payloads", metavar="KNOWN.json",
                   help="several runs: JSON list, one entry per run: null or {\"body\": NAME, \"mass\": KG, "
                   "\"com\": [X, Y, Z], \"inertia\": [Ixx, Iyy, Izz, Ixy, Ixz, Iyz]} (CoM in the body "
                   "frame [m], inertia about the CoM [kg m^2], default a 5 cm cube); their torque is known")
    p.add_argument("--drive-gains", action="store_true",
                   help="several runs: identify a torque gain per joint (true torque = gain x logged), "
                   "which needs runs with at least two different known payloads")
    p.add_argument("--model", required=True, help="MJCF or URDF file")
    p.add_argument("--method", default="ols", choices=METHODS + ONLINE_METHODS,
                   help="batch method, or an online estimator replayed sample by sample")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--json", action="store_true", help="print result.json")
    p.add_argument("--payload-only", metavar="BODY", help="identify only a payload attached to BODY")
    p.add_argument("--friction", default="model", help="joint friction identified: 'model' (default: the "
                   "terms the model's joints declare: coulomb for frictionloss, viscous for damping, "
                   "stribeck/sigmoid for their numerics; docs/joint-terms.md), 'none', or a "
                   "comma list of coulomb, viscous, offset, stribeck "
                   "(Fs·exp(−|q̇|/q̇s)·sign(q̇), q̇s searched unless --stribeck-velocity), sigmoid "
                   "(φ1/(1+exp(−φ2(q̇+φ3))) − φ1/(1+exp(−φ2φ3)), Gaz et al. 2019; an alternative to "
                   "coulomb; φ2, φ3 searched per joint unless --sigmoid-shape)")
    p.add_argument("--stribeck-velocity", type=float, metavar="RAD_S",
                   help="Stribeck velocity q̇s [rad/s] of the stribeck terms (default: the one that "
                   "minimises the least-squares residual, searched in 0.002..2 rad/s)")
    p.add_argument("--sigmoid-shape", metavar="PHI2,PHI3",
                   help="steepness φ2 [s/rad] and offset φ3 [rad/s] of every joint's sigmoid friction "
                   "(default: per joint, those that minimise the least-squares residual, searched "
                   "in φ2 0.5..500 s/rad, φ2·φ3 −3..3)")
    p.add_argument("--armature", action=argparse.BooleanOptionalAction, default=None,
                   help="identify rotor inertia per joint (default: when the model's joints declare "
                   "armature); --no-armature: not identified")
    p.add_argument("--validate", help="another bag/CSV to validate the torque prediction on")
    p.add_argument("--bandwidth", type=float, default=5.0, help="closed-loop bandwidth [Hz]")
    p.add_argument("--differentiator", choices=("central", "savgol"), default="central",
                   help="positions to velocity/acceleration")
    p.add_argument("--velocity", choices=("auto", "measured", "differentiate"), default="auto",
                   help="measured velocity when recorded (auto), always, or never")
    p.add_argument("--regularization", type=float, default=0.0, help="weight (<= 0: default)")
    p.add_argument("--friction-prior", default="model", metavar="model|zero|FILE.json",
                   help="prior of the joint terms (friction, offsets, rotor inertia) that the "
                   "regularised methods and the plausibility pull lean on, weakly: the model file's "
                   "values (default), zero, or a JSON file of values by name, e.g. "
                   '{"Fc": 0.5, "shoulder_pan_joint.Fv": 2.0}')
    p.add_argument("--max-samples", type=int, default=2000, help="dual-metric SDP samples")
    p.add_argument("--min-segment", type=float, default=2.0, metavar="S",
                   help="data between gaps shorter than this is not used [s] (default: 2)")
    p.add_argument("--torque-scale", metavar="S[,S...]",
                   help="logged effort × this = torque, one value or one per joint in the model's "
                   "order (e.g. motor current [A] × torque constant × gear [N·m/A])")
    p.add_argument("--torque-offset", metavar="O[,O...]",
                   help="added to the scaled torque [N·m], one value or one per joint")
    p.add_argument("--columns", metavar="FIELD=COLUMN[,...]",
                   help="CSV: the file's column of each field (time, q, dq, tau, q_ref, dq_ref, "
                   "tau_ff), per-joint ones with {i} (0-based index in the model's order), {n} "
                   "(1-based) or {joint} (name), e.g. time=timestamp,q=actual_q_{i},dq=actual_qd_{i},"
                   "tau=actual_current_{i} (default: time,q_<joint>,dq_<joint>,tau_<joint>,...)")
    p.add_argument("--time-unit", choices=tuple(TIME_UNITS), default="s",
                   help="CSV: unit of the time column (default: s)")
    p.add_argument("--controller", metavar="LAW:GAINS",
                   help="the closed loop of a log without MotorCommand, for iv/pc_iv: "
                   "'pd:kp=K[,K...];kd=D[,D...]' (needs q_ref, dq_ref columns) or "
                   "'velocity:kv=D[,D...]' (needs dq_ref); one value or one per joint [N·m/rad, "
                   "N·m·s/rad]; tau_ff added when recorded")
    p.add_argument("--mass-factor", type=float, default=Plausibility.mass_factor, metavar="K",
                   help="arm: keep every body's mass within [m/K, m*K] of the model's m (plausible "
                   "exported parameters; every method's consistent solve respects it; 0 = off; "
                   "default %(default)s)")
    p.add_argument("--extent-factor", type=float, default=Plausibility.extent_factor, metavar="F",
                   help="arm: keep every body's mass inside F times its nominal extent (a sphere "
                   "around the model's CoM reaching its joints; bounds CoM and inertia; 0 = off; "
                   "default %(default)s)")
    p.add_argument("--com-radius", type=float, default=Plausibility.com_radius, metavar="R",
                   help="arm: keep every body's centre of mass within R [m] (per axis, body frame) "
                   "of the model's (0 = off, the default)")
    p.add_argument("--resample", choices=("auto", "off"), default="auto",
                   help="irregular sampling (steps off the median by > 10 %%, dropped cycles) put "
                   "on a uniform grid by spline interpolation (auto), or used as recorded (off)")
    p.add_argument("--bridge-gaps", type=float, default=-1.0, metavar="S",
                   help="dropped-cycle gaps up to this long are interpolated over; longer ones "
                   "split the data into segments [s] (default: automatic, 5 ms or 3.5 median "
                   "periods, whichever is longer)")
    p.add_argument("--keep-stationary", dest="stationary_cut", action="store_false",
                   help="keep samples with every joint slower than 0.01 rad/s (default: the batch "
                   "methods cut them at each segment's start and end, the online ones skip them)")
    p.add_argument("--drop-outliers", action="store_true",
                   help="leave out the regression rows whose torque residual is beyond 8 robust σ "
                   "(1.4826·MAD) of a least-squares fit; they are reported either way (default: kept)")
    _add_online_options(p)
    p.add_argument("--joint-states-topic", default="/joint_states",
                   help="a bag's sensor_msgs/JointState topic")
    p.add_argument("--command-topic", default="/motor_command",
                   help="a bag's MotorCommand topic (read by iv/pc_iv only)")
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    _add_base_option(p)
    p.set_defaults(func=_identify)

    p = sub.add_parser("monitor", help="replay a bag or CSV file through the collision monitor (momentum "
                       "residual observer on a model): thresholds, contact events")
    p.add_argument("data", help="rosbag2 directory or CSV file (joint states with velocity and effort)")
    p.add_argument("--model", required=True, help="MJCF or URDF file (e.g. identify's identified.xml)")
    p.add_argument("--result", help="result.json of an identification: its exported parameters replace "
                   "the model's (friction offsets included)")
    p.add_argument("--calibrate", metavar="BAG", help="a contact-free recording (e.g. the identification "
                   "run) to derive the thresholds from")
    p.add_argument("--threshold", metavar="NM[,NM...]", help="thresholds [N·m] instead: one value or one "
                   "per joint in the model's order")
    p.add_argument("--calibration-time", type=float, default=5.0, metavar="S",
                   help="without --calibrate/--threshold: the first S seconds of the data are "
                   "contact-free and give the thresholds (default: 5)")
    p.add_argument("--gain", type=float, default=DEFAULT_GAIN, help="observer gain K [1/s] (time constant "
                   "1/K; default %(default)s)")
    p.add_argument("--sigma-factor", type=float, default=contact.DEFAULT_SIGMA_FACTOR, metavar="K",
                   help="threshold = max(K·rms, F·peak) + margin of the calibration residual "
                   "(default %(default)s)")
    p.add_argument("--peak-factor", type=float, default=contact.DEFAULT_PEAK_FACTOR, metavar="F",
                   help="(default %(default)s)")
    p.add_argument("--margin", type=float, default=contact.DEFAULT_MARGIN, metavar="NM",
                   help="[N·m] (default %(default)s)")
    p.add_argument("--release", type=float, default=contact.DEFAULT_RELEASE,
                   help="a contact ends below this fraction of the threshold (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print thresholds and events as JSON")
    p.add_argument("--joint-states-topic", default="/joint_states",
                   help="a bag's sensor_msgs/JointState topic")
    _add_base_option(p)
    p.set_defaults(func=_monitor)

    p = sub.add_parser("validate", help="the validation suite: parameter recovery, torque prediction, "
                       "computed-torque tracking, payload generalisation, repeatability, feed-forward vs "
                       "PD, each PASS/FAIL against a simulated truth (JSON + PNG)")
    p.add_argument("--model", help="MJCF or URDF of the nominal robot (default: the package's default robot)")
    p.add_argument("--result", metavar="RESULT_JSON", help="result.json (or its folder) of 'sysid identify' "
                   "on --model (an arm result); default: identify a randomised truth first (--method)")
    p.add_argument("--truth", metavar="FILE", help="with --result: the robot it was identified on, an "
                   "MJCF/URDF or the truth.json of 'sysid simulate' (default: --model itself)")
    p.add_argument("--payload", metavar="SPEC", help="body=NAME,mass=KG,com=X,Y,Z[,inertia=...]: the payload "
                   "the identification data carried (default: the truth.json's; without --result a "
                   "0.5 kg cube 4 cm above the last link); the payload check tests 8/5 of it")
    p.add_argument("--method", choices=METHODS, help="without --result: the identification method "
                   "(default pc_ls); with --result: repeatability's (default: the result's)")
    p.add_argument("--friction", default="coulomb,viscous",
                   help="without --result: joint friction terms identified (default: %(default)s)")
    p.add_argument("--no-armature", action="store_true", help="without --result: no rotor inertia")
    p.add_argument("--deviation", type=float, default=0.2, help="without --result: the truth's parameters "
                   "off the nominal by up to this fraction (default: %(default)s)")
    p.add_argument("--duration", type=float, help="one identification experiment [s] (default 20, quick 12)")
    p.add_argument("--experiments", type=int, help="repeatability's identifications (default 10, quick 3)")
    p.add_argument("--bandwidth", dest="bandwidth_hz", type=float, help="tracking loops' bandwidth [Hz] "
                   "(default 2)")
    p.add_argument("--torque-noise", type=float, help="torque sensor noise of the experiments [N·m] "
                   "(default 0.05)")
    p.add_argument("--seed", type=int, help="every simulated draw derives from it (default 0)")
    p.add_argument("--quick", action="store_true", help="short runs (tests): 12 s experiments, 3 "
                   "repetitions, 5 s held-out and tracking runs")
    p.add_argument("--only", metavar="CHECK,..", help="run only these checks (parameter_recovery, "
                   "torque_prediction, computed_torque_tracking, payload_generalisation, repeatability, "
                   "feedforward_vs_pd)")
    p.add_argument("--out", default="out/validate", help="output folder (default: %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    p.set_defaults(func=_validate)

    p = sub.add_parser("report", help="report.html of a result folder: verdict, torque fit, residuals, "
                       "parameters, bodies vs nominal, identifiability, validation checks, provenance "
                       "(one self-contained file; identify and validate write it too)")
    p.add_argument("result_dir", metavar="RESULT_DIR", help="folder of sysid identify --out (result.json, "
                   "torques.npz) or of sysid validate --out (validation.json)")
    p.add_argument("--out", metavar="FILE", help="HTML file to write (default: RESULT_DIR/report.html)")
    p.set_defaults(func=_report_html)

    p = sub.add_parser("bag", help="bag maintenance: recover an interrupted recording")
    bag = p.add_subparsers(dest="bag_command", required=True, parser_class=_Parser)
    q = bag.add_parser("recover", help="rebuild a complete bag from a recording killed before it finished "
                       "(its .NAME.partial-* folder); the folder is removed once the bag is complete")
    q.add_argument("path", help="the intended bag path or its .NAME.partial-* folder")
    q.set_defaults(func=_bag_recover)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # the ~130,000 objects the imports made (SciPy, MuJoCo, numba, ...) live until exit: out of the
    # collector's reach, a full collection skips them (identify: 0.7 s -> 0.2 s of collections at load 7)
    gc.freeze()
    # and what the command imports and makes later (cvxpy, matplotlib, ...): the interpreter's last
    # collection at exit would traverse it all (identify: 0.3 s at load 2.5)
    atexit.register(gc.freeze)
    if argv is None and args.command == "identify":
        # this process's own one-shot command: its cyclic garbage is left for the exit (the
        # collector's passes over what cvxpy and matplotlib import took 0.15 s of `--method ols`;
        # peak memory on a 20 s, 1 kHz bag the same without them). In-process callers keep theirs.
        gc.disable()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except InterruptError as exc:
        print(f"sysid {args.command}: interrupted ({exc})", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"sysid {args.command}: interrupted (nothing written)", file=sys.stderr)
        return 130
    except SysIdError as exc:
        print(f"sysid {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
