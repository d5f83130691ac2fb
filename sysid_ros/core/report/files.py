"""Result files of an identification: ``result.json``, an MJCF and a URDF, PNG plots, a summary table.

The writer solves and estimates nothing: it formats what the :class:`IdentificationResult` holds
(the exported parameters are ``result.parameters``) and what the caller evaluated
(:func:`~sysid_ros.core.report.metrics.evaluate`). Files are written into a staging folder and
moved into the output folder only when all of them exist, so a failed run leaves nothing behind
(:class:`~sysid_ros.core.atomic.StagedFiles`: a staging folder left by a killed process is removed
by the next write into the same folder, :func:`remove_stale_staging`; the outputs can be
recomputed). ``result.json`` is built and written by its owner,
:class:`~sysid_ros.core.result_file.ResultFile`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.atomic import StagedFiles
from sysid_ros.core.atomic import remove_stale_staging as remove_stale_staging  # where it was
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.consistency import realizable_inertia
from sysid_ros.core.model.layout import body_params_from_inertial, inertial_from_body_params
from sysid_ros.core.model.mjcf_export import mjcf_full_precision, principal_inertial
from sysid_ros.core.model.target import Target
from sysid_ros.core.model.urdf_export import write_urdf
from sysid_ros.core.report.metrics import Evaluation, TorqueFit
from sysid_ros.core.report.plotting import envelope, pyplot, save_figure
from sysid_ros.core.report.provenance import provenance
from sysid_ros.core.report.report_data import REPORT_FILE, TORQUES_FILE, ReportInputs, write_torques
from sysid_ros.core.result import IdentificationResult
from sysid_ros.core.result_file import NAME as RESULT_NAME
from sysid_ros.core.result_file import ResultFile
from sysid_ros.core.sim.synthetic import Payload, payload_spec

log = logging.getLogger(__name__)


def _shape_bound_lines(extra: dict) -> list[str]:
    """One line per nonlinear friction shape search that stopped at a bound of its interval."""
    out = []
    stribeck = extra.get("stribeck") or {}
    if stribeck.get("bound"):
        out.append(f"Stribeck velocity search stopped at a bound: {stribeck['bound']}")
    joints = ((extra.get("sigmoid") or {}).get("search") or {}).get("joints") or {}
    bound = {name: doc["bound"] for name, doc in joints.items() if doc.get("bound")}
    if bound:
        out.append("sigmoid shape search stopped at a bound: "
                   + "; ".join(f"{name}: {text}" for name, text in bound.items()))
    return out


def summary(result: IdentificationResult, evaluation: Evaluation | None = None) -> str:
    """A readable table of the fit (and of the validation and truth comparison, when evaluated).

    With an evaluation, the per-joint figures are those of the exported parameters on every kept
    sample (the same rows for every method and friction setting); without, those of the
    regression rows."""
    d = result.diagnostics
    fit = evaluation.fit.errors if evaluation else d.fit
    validation = evaluation.validation.errors if evaluation and evaluation.validation else None
    truth = evaluation.truth if evaluation else None
    joints = result.joint_names or tuple(f"dof{i}" for i in range(len(d.fit.rmse)))
    export = d.extra.get("exported_model")
    lines = export_summary(result.method, export, d.extra)[:1]
    lines += [f"method {result.method}: {result.base.rank} base parameters, rank {d.rank}, "
             f"condition {d.condition_number:.3g}, {d.n_samples} samples / {d.n_rows} rows, "
             f"solve {d.solve_time:.2f} s",
             f"relative error {d.relative_error:.3f} % on the {d.n_rows} regression rows"]
    lines += _precision_lines(result)
    if not result.solver.optimal:
        lines.append(f"solver {result.solver.solver}: status {result.solver.status}, "
                     f"converged {result.solver.converged}")
    cons = result.consistency
    if cons is not None:
        lines.append("physically consistent" if cons.consistent
                     else f"NOT consistent: {', '.join(cons.failures)}")
    if result.parameters is not None:
        masses = {b: result.parameters[f"{b}.m"] for b in result.parameters.blocks
                  if f"{b}.m" in result.parameters.names}
        lines.append(f"exported parameters ({result.parameters_from or result.method}): mass "
                     + ", ".join(f"{b} {m:.4g}" for b, m in masses.items()) + " kg"
                     + (f" (total {sum(masses.values()):.4g} kg)" if len(masses) > 1 else ""))
        projection = d.extra.get("online", {}).get("projection")
        if projection and projection["status"] != "unchanged":  # the EKF's, onto the consistent set
            distance = projection["mahalanobis_distance"]
            lines.append(f"projection of the filter's estimate ({projection['status']}): Mahalanobis "
                         f"distance {'n/a' if distance is None else format(distance, '.3g')}; it broke "
                         f"{projection['violated_by_raw_estimate']}; moved "
                         f"{sorted(projection['moved'])}")
        exported_fit = d.extra.get("exported_fit")  # a base-parameter method's consistent fit
        solver, status = ((exported_fit["solver"], exported_fit["status"]) if exported_fit
                          else (result.solver.solver, result.solver.status))
        if exported_fit or solver.startswith("closed form"):
            lines.append(f"exported parameters' fit: {solver}, {status}")
        cost = d.extra.get("plausibility")
        if cost and cost.get("torque_rms"):
            rms = cost["torque_rms"]
            reference = rms.get("reference", rms["unconstrained"])
            lines.append(f"bounds, prior and export cost {cost['cost_percent']:+.2f} % torque RMS "
                         f"({rms['exported']:.4g} N·m exported vs {reference:.4g} of "
                         f"{cost.get('reference', 'least squares')} without bounds or prior, regression "
                         "rows)")
        lines += export_summary(result.method, export, d.extra)[1:]
    if result.solver.iterations is not None:
        gradient = d.extra.get("iv_gradient")  # IV's (eq. 46); the dual metric's re-weighting has none
        lines.append(f"iterations {result.solver.iterations}, converged {result.solver.converged}"
                     + (f", IV gradient {gradient:.2e}" if gradient is not None else ""))
    if result.solver.binding_constraints:
        lines.append(f"binding constraints: {list(result.solver.binding_constraints)}")
    lines += _shape_bound_lines(d.extra)
    if evaluation:
        lines.append(f"torque fit of the exported parameters on all {fit.n_rows} samples × joints "
                     f"(the same rows for every method and friction setting): relative error "
                     f"{fit.relative:.3f} %")
    lines.append(f"{'joint':<24} {'RMSE [N·m]':>12} {'NCC':>8}" +
                 (f" {'val. RMSE':>12} {'val. NCC':>9}" if validation else ""))
    for j, name in enumerate(joints):
        row = f"{name:<24} {fit.rmse[j]:12.4g} {_fmt(fit.ncc[j]):>8}"
        if validation:
            row += f" {_fmt(validation.rmse[j], '12.4g'):>12} {_fmt(validation.ncc[j]):>9}"
        lines.append(row)
    if validation:
        lines.append(f"validation relative error {validation.relative:.3f} %")
    if truth:
        lines.append(f"vs truth: median base-parameter error {truth.base.median_relative:.3g} %, "
                     f"largest {truth.base.max_relative:.3g} %")
    return "\n".join(lines)


def export_summary(method: str, export: dict | None, extra: dict) -> list[str]:
    """The exported model's lines of the summary: first what the export is and what it costs (the
    line a user reads first), then per body what came from the data and what from the model file,
    the bodies the data push out of plausible ranges, and the cost warning (:func:`cost_exceeded`)."""
    from sysid_ros.core.batch.cost import cost_exceeded

    if not export:
        return []
    rms = export["torque_rms"]
    change = 100.0 * (rms["exported"] / max(rms["estimate"], 1e-300) - 1.0)
    lines = [f"exported model: {method}'s estimate, moved within its noise to the parameters nearest "
             f"the model file (log-det divergence): torque RMS {rms['exported']:.4g} N·m vs "
             f"{rms['estimate']:.4g} N·m of the estimate ({change:+.2f} %)"]
    lines.append(f"{'body':<22} {'mass [kg]':>10} {'x model':>8} {'min moment':>11} "
                 f"{'from data':>10} {'mass from data':>15}")
    for name, b in export["bodies"].items():
        lines.append(f"{name:<22} {b['mass']:10.4g} {b['mass_ratio']:8.3g} "
                     f"{b['min_principal_moment_ratio']:11.3g} {b['data_directions']:7.1f}/10 "
                     f"{100 * b['mass_from_data']:14.0f}%")
    lines.append("(x model: mass over the model file's; min moment: smallest principal moment about the "
                 "CoM over the model file's; from data: of each body's 10 directions, how many the data "
                 "determine, the rest from the model file)")
    for name, b in export["bodies"].items():
        if b["plausible"]:
            continue
        cost = b.get("plausibility_cost_nm")
        lines.append(f"WARNING: {name}: mass {b['mass_ratio']:.3g} x and smallest principal moment "
                     f"{b['min_principal_moment_ratio']:.3g} x the model file's: the data demand it "
                     f"(keeping it plausible costs "
                     + ("an unknown amount" if cost is None else
                        f"+{cost:.4g} N·m torque RMS, {100 * cost / max(rms['exported'], 1e-300):+.2f} %")
                     + ")")
    message = cost_exceeded(extra)
    if message:
        lines.append(f"WARNING: {message}")
    return lines


def _precision_lines(result: IdentificationResult, *, full_table: int = 12) -> list[str]:
    """The base parameters' relative standard deviations: every one for a short vector (a
    payload's 10), else the median and the five least precise."""
    std, beta, names = result.beta_std, result.beta, result.base.names
    rel = 100.0 * std / np.maximum(np.abs(beta), 1e-300)
    known = np.isfinite(rel)
    if not known.any() and not np.isinf(std).any():
        return []
    if len(beta) <= full_table:
        return ["base parameters (value ± std, relative std): " + "; ".join(
            f"{n} = {b:.5g} ± {s:.2g} ({r:.3g} %)" for n, b, s, r in zip(names, beta, std, rel, strict=True))]
    order = np.argsort(-np.where(np.isnan(rel), -np.inf, rel))[:5]
    median = float(np.nanmedian(rel[known])) if known.any() else float("nan")
    worst = "; ".join(f"{names[i]} = {beta[i]:.4g} ± {std[i]:.2g} ({rel[i]:.3g} %)" for i in order)
    return [f"base parameters' relative std: median {median:.3g} %; least precise: {worst}"]


def _fmt(x, spec: str = "8.4f") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def write_outputs(out_dir: str | Path, result: IdentificationResult, target: Target,
                  evaluation: Evaluation, *, plots: bool = True, extra: dict | None = None,
                  inputs: Sequence[str | os.PathLike[str]] = (), report: bool = True
                  ) -> tuple[list[Path], dict[str, Any]]:
    """Write ``result.json`` (with the target's prior and the provenance: ``inputs``' and the
    model's hashes, command line), ``torques.npz`` (the evaluated torque series),
    ``identified.xml`` and ``identified.urdf`` (the exported parameters, when physically
    consistent; the URDF for an arm target), plots and, with ``report``, ``report.html``
    (:mod:`~sysid_ros.core.report.html`) into ``out_dir``; return the paths and the content of
    ``result.json`` (as JSON types). Computes nothing: ``evaluation`` comes from
    :func:`~sysid_ros.core.report.metrics.evaluate`."""
    if result.parameters is None:
        raise SysIdError(f"{result.method}: the result exports no standard parameters to write")
    out_dir = Path(out_dir)
    with StagedFiles(out_dir) as stage:
        staging = stage.path
        doc = ResultFile.document(result, target, evaluation, extra={
            "provenance": provenance(inputs=inputs, model=_model_file(target)), **(extra or {})})
        names = [RESULT_NAME, TORQUES_FILE]
        ResultFile.write(staging / RESULT_NAME, doc)
        joints = result.joint_names or tuple(f"dof{i}" for i in range(evaluation.fit.measured.shape[1]))
        write_torques(staging / TORQUES_FILE, joints,
                      {"fit": evaluation.fit, "validation": evaluation.validation})
        if _write_mjcf(staging / "identified.xml", target, result):
            names.append("identified.xml")
            if _write_urdf(staging / "identified.urdf", target, result):
                names.append("identified.urdf")
        if plots:
            _plot(staging / "torque_fit.png", evaluation.fit, result, "identification data")
            names.append("torque_fit.png")
            if evaluation.validation is not None:
                _plot(staging / "torque_validation.png", evaluation.validation, result, "validation data")
                names.append("torque_validation.png")
        if report and _write_report(staging, out_dir):
            names.append(REPORT_FILE)
        return stage.commit(names), doc


def _model_file(target: Target) -> str | None:
    source = target.model.source if target.model is not None else None
    return source if source and Path(source).is_file() else None


def _write_report(staging: Path, out_dir: Path) -> bool:
    """``report.html`` of the files in ``staging``, naming them as they will be in ``out_dir``;
    a missing plotly leaves the report out (warned), the other files are written."""
    from sysid_ros.core.report.html import build_report

    try:
        inputs = replace(ReportInputs.load(staging), folder=out_dir, result_path=out_dir / RESULT_NAME)
        (staging / REPORT_FILE).write_text(build_report(inputs), encoding="utf-8")
    except SysIdError as exc:
        log.warning("not writing %s: %s", REPORT_FILE, exc)
        return False
    return True


def _write_mjcf(path: Path, target: Target, result: IdentificationResult) -> bool:
    """The model with the exported parameters (the payload as a welded body), when consistent."""
    model = target.model
    theta = result.parameters.values
    if not result.consistent:
        log.warning("not writing an MJCF: the exported parameters are not physically consistent")
        return False
    try:
        if target.kind == "arm":
            model.to_mjcf(theta, path)
        else:
            mass, com, inertia = inertial_from_body_params(theta)
            # consistent (J > 0) implies the triangle inequality; on the boundary MuJoCo's compiler
            # may still see it violated by rounding: nudge by at most that rounding
            inertia = realizable_inertia(inertia)
            theta = body_params_from_inertial(mass, com, inertia)
            name = "identified_payload"
            spec = payload_spec(model, Payload(model.body_name(target.body), mass, com, inertia), name=name)
            try:
                spec.compile()
            except ValueError as exc:
                log.warning("not writing an MJCF: MuJoCo rejects the identified payload: %s", exc)
                return False
            _, _, moments, quat = principal_inertial(theta, name)
            values = {name: {"mass": [mass], "pos": com, "quat": quat, "diaginertia": moments}}
            path.write_text(mjcf_full_precision(spec.to_xml(), values, {}))
    except SysIdError as exc:
        log.warning("not writing an MJCF: %s", exc)
        return False
    return True


def _write_urdf(path: Path, target: Target, result: IdentificationResult) -> bool:
    """The arm with the exported parameters as a URDF (beside identified.xml); a payload target
    has none (its MJCF welds the payload as a body)."""
    if target.kind != "arm":
        return False
    try:
        write_urdf(target.model, result.parameters.values, path)
    except SysIdError as exc:
        log.warning("not writing a URDF: %s", exc)
        return False
    return True


def _plot(path: Path, fit: TorqueFit, result: IdentificationResult, title: str) -> None:
    plt = pyplot()

    n = fit.measured.shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.8 * n + 0.8), sharex=True, squeeze=False)
    names = result.joint_names or tuple(f"dof{i}" for i in range(n))
    for j in range(n):
        ax = axes[j, 0]
        ax.plot(*envelope(fit.t, fit.measured[:, j]), lw=1.0, label="measured")
        ax.plot(*envelope(fit.t, fit.predicted[:, j]), lw=1.0, ls="--", label="predicted")
        ax.set_ylabel(f"{names[j]}\n[N·m]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(f"{result.method}: measured vs predicted torque ({title}), "
                 f"relative error {fit.errors.relative:.2f} %", fontsize=10)
    # fixed margins [inch] instead of a tight layout (one draw less): two-line joint labels on the left
    height = fig.get_figheight()
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.55 / height, top=1 - 0.45 / height, hspace=0.15)
    save_figure(fig, path, dpi=90, tight=False)
