"""Result files of a batch identification: ``result.json``, an MJCF, PNG plots, a summary table.

Files are written into a staging folder and moved into the output folder only when all of them
exist, so a failed run leaves nothing behind.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.batch.convex import least_squares_program
from sysid_ros.core.batch.least_squares import regression_rows
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.consistency import check_consistency, realizable_inertia
from sysid_ros.core.model.robot import (
    body_params_from_inertial,
    inertial_from_body_params,
    mjcf_full_precision,
    principal_inertial,
)
from sysid_ros.core.model.target import Target
from sysid_ros.core.report.plotting import pyplot, save_figure
from sysid_ros.core.result import IdentificationResult
from sysid_ros.core.sim.synthetic import Payload, payload_spec

log = logging.getLogger(__name__)


def evaluate(result: IdentificationResult, prep) -> dict[str, Any]:
    """Torque prediction of ``result`` on prepared data (``identify.Prepared``): per-joint RMSE,
    relative error [%] and normalised cross-correlation, plus the time series for plots."""
    x, y, mask = result.base.columns(prep.x), prep.y, prep.mask
    pred = x @ result.beta
    w, rhs, joint = regression_rows(x, y, mask)
    resid = rhs - w @ result.beta
    n = y.shape[1]
    rmse, ncc = [], []
    for j in range(n):
        sel = joint == j
        rmse.append(float(np.sqrt(np.mean(resid[sel] ** 2))) if sel.any() else None)
        a, b = rhs[sel] - rhs[sel].mean(), (w @ result.beta)[sel] - (w @ result.beta)[sel].mean()
        den = np.linalg.norm(a) * np.linalg.norm(b)
        ncc.append(float(a @ b / den) if den > 0 else None)
    return {"torque_rmse": rmse, "ncc": ncc,
            "relative_error_percent": float(100 * np.linalg.norm(resid) / max(np.linalg.norm(rhs), 1e-300)),
            "t": prep.t, "measured": y, "predicted": pred}


def standard_parameters(result: IdentificationResult, target: Target) -> tuple[np.ndarray, str]:
    """Standard parameters to export: the method's own (consistent) θ, or a physically consistent
    θ whose base parameters are closest to the estimate (base-parameter methods)."""
    if result.theta is not None:
        return result.theta, result.method
    theta = least_squares_program(target, target.base.matrix, result.beta).theta
    return theta, "consistent projection of the base parameters"


def truth_comparison(result: IdentificationResult, target: Target, truth: dict[str, Any],
                     theta: np.ndarray | None) -> dict[str, Any] | None:
    """Base-parameter errors against a simulated run's true parameters (arm targets), or the
    payload's parameters (payload targets)."""
    if target.kind == "arm":
        params = truth.get("parameters")
        if not params:
            return None
        true_theta = target.model.from_dict({k: v for k, v in params.items()
                                             if k in set(target.model.param_names)})
    else:
        payload = truth.get("payload")
        if not payload:
            return None
        true_theta = np.asarray(payload["params"], dtype=float)
    beta_true = target.base.of(true_theta)
    err = np.abs(result.beta - beta_true)
    rel = np.where(np.abs(beta_true) > 0, 100 * err / np.maximum(np.abs(beta_true), 1e-300), np.nan)
    out: dict[str, Any] = {
        "base": {n: {"true": float(t), "estimated": float(e), "relative_error_percent":
                     None if np.isnan(r) else float(r)}
                 for n, t, e, r in zip(result.base.names, beta_true, result.beta, rel, strict=True)},
    }
    if theta is not None:
        divergence = target.divergence(theta, true_theta)
        if not np.isnan(divergence):  # NaN: the truth itself is not consistent
            out["divergence_to_truth"] = divergence
    return out


def summary(result: IdentificationResult, *, validation: dict | None = None,
            truth: dict | None = None) -> str:
    """A readable table of the fit."""
    d = result.diagnostics
    joints = result.joint_names or tuple(f"dof{i}" for i in range(len(d.residual_rms)))
    ncc = d.extra.get("ncc", [None] * len(joints))
    lines = [f"method {result.method}: {result.base.rank} base parameters, rank {d.rank}, "
             f"condition {d.condition_number:.3g}, {d.n_samples} samples / {d.n_rows} rows, "
             f"solve {d.solve_time:.2f} s",
             f"relative error {d.relative_error:.3f} %"]
    cons = d.extra.get("consistency")
    if cons is not None:
        bad = [b for b, v in cons["bodies"].items() if not v["consistent"]]
        lines.append("physically consistent" if cons["consistent"] else f"NOT consistent: {bad}")
    if d.extra.get("iterations") is not None:
        lines.append(f"iterations {d.extra['iterations']}, converged {d.extra.get('converged')}, "
                     f"IV gradient {d.extra.get('iv_gradient', float('nan')):.2e}")
    if d.extra.get("binding_constraints"):
        lines.append(f"binding constraints: {d.extra['binding_constraints']}")
    lines.append(f"{'joint':<24} {'RMSE [N·m]':>12} {'NCC':>8}" +
                 (f" {'val. RMSE':>12} {'val. NCC':>9}" if validation else ""))
    for j, name in enumerate(joints):
        row = f"{name:<24} {d.residual_rms[j]:12.4g} {_fmt(ncc[j]):>8}"
        if validation:
            row += f" {_fmt(validation['torque_rmse'][j], '12.4g'):>12} {_fmt(validation['ncc'][j]):>9}"
        lines.append(row)
    if validation:
        lines.append(f"validation relative error {validation['relative_error_percent']:.3f} %")
    if truth:
        rel = [v["relative_error_percent"] for v in truth["base"].values()
               if v["relative_error_percent"] is not None]
        lines.append(f"vs truth: median base-parameter error {np.median(rel):.3g} %, "
                     f"largest {np.max(rel):.3g} %")
    return "\n".join(lines)


def _fmt(x, spec: str = "8.4f") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def write_outputs(out_dir: str | Path, result: IdentificationResult, target: Target, prep, *,
                  validation_prep=None, plots: bool = True, extra: dict | None = None
                  ) -> tuple[list[Path], dict[str, Any]]:
    """Write ``result.json``, ``identified.xml`` and plots into ``out_dir``; return the paths and
    the content of ``result.json`` (as JSON types)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".sysid-partial-", dir=out_dir))
    try:
        fit = evaluate(result, prep)
        val = evaluate(result, validation_prep) if validation_prep is not None else None
        theta, theta_from = standard_parameters(result, target)
        doc = result.as_dict()
        doc["target"] = {"kind": target.kind, "body": None if target.body is None
                         else target.model.body_name(target.body), "model": target.model.source}
        doc["exported_parameters"] = {"from": theta_from,
                                      "values": dict(zip(target.names, map(float, theta), strict=True))}
        doc["fit"] = {k: v for k, v in fit.items() if k in ("torque_rmse", "ncc", "relative_error_percent")}
        if val is not None:
            doc["validation"] = {k: v for k, v in val.items()
                                 if k in ("torque_rmse", "ncc", "relative_error_percent")}
        truth = prep.dataset.truth
        if truth:
            doc["truth_comparison"] = truth_comparison(result, target, truth, theta)
        doc.update(extra or {})
        names = ["result.json"]
        text = json.dumps(doc, indent=2, default=_json)
        (staging / "result.json").write_text(text + "\n")
        mjcf = _write_mjcf(staging / "identified.xml", target, theta)
        if mjcf:
            names.append("identified.xml")
        if plots:
            _plot(staging / "torque_fit.png", fit, result, "identification data")
            names.append("torque_fit.png")
            if val is not None:
                _plot(staging / "torque_validation.png", val, result, "validation data")
                names.append("torque_validation.png")
        paths = []
        for name in names:
            os.replace(staging / name, out_dir / name)
            paths.append((out_dir / name).resolve())
        return paths, json.loads(text)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_mjcf(path: Path, target: Target, theta: np.ndarray) -> bool:
    model = target.model
    try:
        if target.kind == "arm":
            if not check_consistency(model, theta).consistent:
                log.warning("not writing an MJCF: the parameters are not physically consistent")
                return False
            model.to_mjcf(theta, path)
        else:
            if not target.consistency(theta)["consistent"]:
                log.warning("not writing an MJCF: the payload parameters are not physically consistent")
                return False
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


def _plot(path: Path, fit: dict, result: IdentificationResult, title: str) -> None:
    plt = pyplot()

    n = fit["measured"].shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.8 * n + 0.8), sharex=True, squeeze=False)
    names = result.joint_names or tuple(f"dof{i}" for i in range(n))
    for j in range(n):
        ax = axes[j, 0]
        ax.plot(fit["t"], fit["measured"][:, j], lw=1.0, label="measured")
        ax.plot(fit["t"], fit["predicted"][:, j], lw=1.0, ls="--", label="predicted")
        ax.set_ylabel(f"{names[j]}\n[N·m]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(f"{result.method}: measured vs predicted torque ({title}), "
                 f"relative error {fit['relative_error_percent']:.2f} %", fontsize=10)
    save_figure(fig, path, dpi=90)


def _json(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x)}")
