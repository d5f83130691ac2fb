"""The batch identification engine: data in, estimate with diagnostics out.

    dataset (bag, CSV, simulation) ──► segments (split at gaps, stationary ends cut, short ones dropped)
        ──► per segment: preprocessing ──► regressor X, torque y (filtered, decimated), stacked
        ──► method (ols … pc_iv; the IV simulations per segment) ──► IdentificationResult

One entry point, :func:`identify`, serves the ``sysid identify`` command, the ``batch_solver``
node and the benchmarks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from sysid_ros.core.batch import outliers
from sysid_ros.core.batch.friction_shape import (
    check_sigmoid_option,
    check_stribeck_velocity,
    settle_sigmoid,
    settle_stribeck,
    sigmoid_searched,
    stribeck_residual,
    stribeck_searched,
    with_friction_shape_reports,
    with_sigmoid_report,
)
from sysid_ros.core.batch.instrumental import iv_method
from sysid_ros.core.batch.least_squares import coulomb_rows, inseparable
from sysid_ros.core.batch.methods import (
    PROJECTED,
    dual_metric,
    energy,
    fit_ols,
    fit_wls,
    pc_ls,
    plausible_fit,
    regularised,
    with_constraint_cost,
    with_parameters,
    with_plausible_export,
)
from sysid_ros.core.batch.options import (
    COMMAND_METHODS,
    METHODS,
    MIN_SDP_SAMPLES,
    PRIOR_ROWS,
    IdentifyOptions,
    Method,
)
from sysid_ros.core.batch.prepared import Prepared, PreparedSegment
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import (
    Preprocessing,
    condition,
    effort_lag_of,
    parallel_decimate,
    segment,
)
from sysid_ros.core.data.timebase import regularise
from sysid_ros.core.data.velocity import per_joint_velocity
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.base_params import poorly_determined
from sysid_ros.core.model.target import Target
from sysid_ros.core.progress import warn
from sysid_ros.core.result import IdentificationResult, target_label

#: the engine's names, with those of the modules it is made of (``identify`` is where callers look)
__all__ = [
    "COMMAND_METHODS",
    "METHODS",
    "MIN_SDP_SAMPLES",
    "PRIOR_ROWS",
    "PROJECTED",
    "IdentifyOptions",
    "Method",
    "Prepared",
    "PreparedSegment",
    "check_method",
    "check_sigmoid_option",
    "check_stribeck_velocity",
    "friction_warnings",
    "identify",
    "precision_warnings",
    "prepare",
    "run_method",
    "separability_warnings",
    "settle_sigmoid",
    "settle_stribeck",
    "sigmoid_searched",
    "stribeck_residual",
    "stribeck_searched",
    "with_friction_shape_reports",
    "with_sigmoid_report",
]

log = logging.getLogger(__name__)

log = logging.getLogger(__name__)


def prepare(dataset: Dataset, target: Target, settings: Preprocessing, *, min_speed: float = 0.05,
            progress: Callable[[str], None] | None = None, stribeck_velocity: float | None = None,
            search_stribeck: bool = True, sigmoid_shape: tuple[float, float] | None = None,
            search_sigmoid: bool = True, grid_period: float | None = None,
            held_out: bool = False) -> Prepared:
    """Split at gaps and cut stationary ends (:func:`segment`), then per segment: condition, build
    the regressor at full rate, filter and decimate both sides in parallel; stack the segments.

    Every gap and dropped segment is a warning of this module's logger and, when given, a line to
    ``progress``; so is the summary (segments, samples used, stationary samples cut) at info level.

    An arm target with Stribeck terms ``Fs``: ``stribeck_velocity`` [rad/s] sets q̇s; None finds it
    (:func:`settle_stribeck`) unless ``search_stribeck`` is False (the model's q̇s is kept). Likewise
    sigmoid terms ``Fsig``: ``sigmoid_shape`` (φ2 [s/rad], φ3 [rad/s]) for every joint, or found per
    joint (:func:`settle_sigmoid`) unless ``search_sigmoid`` is False (the model's shapes kept).

    ``grid_period`` [s]: resample onto this period (the identification part's, for a validation
    part: both filtered and decimated alike); ``held_out``: validation data, cut only at their real
    gaps (no minimum segment length beyond what filtering needs). A joint whose measured velocity
    is not finite throughout has it differentiated from positions, one warning naming it
    (:func:`~sysid_ros.core.data.velocity.per_joint_velocity`).
    """
    check_stribeck_velocity(stribeck_velocity)
    check_sigmoid_option(sigmoid_shape)
    if stribeck_velocity is not None and "Fs" in target.model.joint_terms:
        target = replace(target, model=target.model.with_stribeck_velocity(stribeck_velocity))
    if sigmoid_shape is not None and "Fsig" in target.model.joint_terms:
        target = replace(target, model=target.model.with_sigmoid_shape(sigmoid_shape))
    ds, velocity_notes = per_joint_velocity(dataset.for_model(target.model))
    ds, timebase = regularise(ds, max_bridge=settings.bridge_gaps,
                              jitter_tolerance=settings.jitter_tolerance,
                              resample=settings.resample == "auto", period=grid_period)
    log.info("%s", timebase.describe())
    if progress is not None:
        progress(timebase.describe())
    split = segment(ds, replace(settings, min_segment=0.0) if held_out else settings)
    for line in (*velocity_notes, *split.warnings()):
        warn(log, progress, line)
    log.info("%s", split.summary())
    if progress is not None:
        progress(split.summary())
    fs = ds.sample_rate
    parts, stacks, offset = [], [], 0
    for seg in split.datasets():
        cond = condition(seg, settings, fs)
        x_full, known = target.regressor(cond.q, cond.dq, cond.ddq)
        arrays, kept = parallel_decimate([x_full, cond.tau - known, cond.q, cond.dq, cond.ddq],
                                         fs, settings)
        k = arrays[0].shape[0]
        parts.append(PreparedSegment(seg, cond, kept, slice(offset, offset + k)))
        stacks.append([cond.t[kept], *arrays])
        offset += k
    t, x, y, q, dq, ddq = (np.concatenate(a, axis=0) for a in zip(*stacks, strict=True))
    # the Coulomb sign model fails near zero speed whether the friction is identified (arm) or
    # known and subtracted (a payload target's arm, τ − τ_known): slow joints' rows are left out
    # alike, as the online estimators do (ForceRows.min_speed). Kept for a payload, a wrist at rest
    # (Damiao feedback: ±half a velocity count, 0.007 rad/s) put ±Fc of friction that a holding
    # motor does not feel into the rows, and the payload CoM z came out 7 mm off (issue 24)
    mask = coulomb_rows(target.model, dq, min_speed)
    prep = Prepared(target, ds, settings, split, tuple(parts), t, q, dq, ddq, x, y, mask, timebase)
    if stribeck_velocity is None and search_stribeck and stribeck_searched(target):
        prep = settle_stribeck(prep, progress=progress)
    if sigmoid_shape is None and search_sigmoid and sigmoid_searched(target):
        prep = settle_sigmoid(prep, progress=progress)
    return prep


def identify(dataset: Dataset, target: Target, options: IdentifyOptions | None = None
             ) -> IdentificationResult:
    """Identify ``target``'s parameters from ``dataset`` with ``options.method`` (gaps split the
    recording into segments, stationary ends cut: see :func:`prepare`)."""
    options = options or IdentifyOptions()
    check_method(options.method)
    prep = prepare(dataset, target, options.preprocessing, min_speed=options.min_speed,
                   progress=options.progress, stribeck_velocity=options.stribeck_velocity,
                   sigmoid_shape=options.sigmoid_shape)
    return run_method(prep, options)


def check_method(method: str) -> None:
    if method not in METHODS:
        raise IdentificationError(f"unknown method {method!r}; expected one of {list(METHODS)}")


def run_method(prep: Prepared, options: IdentifyOptions) -> IdentificationResult:
    """Run ``options.method`` on already prepared data (see :func:`prepare`)."""
    check_method(options.method)
    say = options.progress or (lambda msg: log.info("%s", msg))
    start = time.perf_counter()
    n_seg = len(prep.segments)
    say(f"{len(prep.t)} samples after filtering and decimation ({prep.fs:.0f} Hz in, {n_seg} "
        f"segment{'s' if n_seg != 1 else ''}), {int(prep.mask.sum())} regression rows, "
        f"method {options.method}")
    warnings = friction_warnings(prep) + separability_warnings(prep)
    found = outliers.detect(prep.target.base.columns(prep.x), prep.y, prep.mask, prep.t)
    if found.count:
        fate = ("left out (--drop-outliers)" if options.drop_outliers
                else "kept (--drop-outliers leaves them out)")
        warnings.append(f"{found.describe(prep.dataset.joint_names)}; {fate}")
        if options.drop_outliers:
            prep = replace(prep, mask=prep.mask & ~found.rows)
    for line in warnings:
        warn(log, options.progress, line)
    result = _METHOD_TABLE[options.method](prep, options, say)
    for line in precision_warnings(result):
        warn(log, options.progress, line)
        warnings.append(line)
    data = prep.segmentation.as_dict() | {"timebase": prep.timebase.as_dict(),
                                          "effort_lag": effort_lag_of(prep.dataset, prep.settings)}
    data["outliers"] = found.as_dict(prep.dataset.joint_names) | {"dropped": bool(options.drop_outliers)}
    extra = result.diagnostics.extra | {"data": data} | ({"warnings": warnings} if warnings else {})
    result = replace(result, diagnostics=replace(result.diagnostics, extra=extra))
    if result.parameters is None:  # base-parameter method: export a consistent θ reproducing β
        solution = plausible_fit(prep)
        result = with_parameters(result, prep.target, solution.theta, PROJECTED)
        result = replace(result, solver=replace(
            result.solver, status=solution.status if solution.status != "optimal" else result.solver.status,
            binding_constraints=tuple(solution.binding())))
        fit = {"solver": solution.solver, "status": solution.status, "solve_time_s": solution.solve_time}
        result = replace(result, diagnostics=replace(
            result.diagnostics, extra=result.diagnostics.extra | {"exported_fit": fit}))
    if prep.target.kind == "arm" and result.parameters is not None:
        result = with_plausible_export(result, prep)
    result = with_friction_shape_reports(with_constraint_cost(result, prep), prep)
    result = replace(result, joint_names=prep.dataset.joint_names, target=target_label(prep.target))
    bad = result.non_finite()
    if bad:
        raise IdentificationError(f"{options.method} gave non-finite figures ({', '.join(bad[:5])}"
                                  f"{', ...' if len(bad) > 5 else ''}): no estimate")
    log.info("%s done in %.2f s", options.method, time.perf_counter() - start)
    return result


def friction_warnings(prep: Prepared, *, one_way: float = 0.02) -> list[str]:
    """Joints whose Coulomb friction and offset cannot be told apart: both identified and the
    joint moved in one direction in all but ``one_way`` of its rows (sign(q̇)·Fc and Fo are then
    the same column). Their standard deviations show it; this says why."""
    model = prep.target.model
    if prep.target.kind != "arm" or not {"Fc", "Fo"} <= set(model.joint_terms):
        return []
    out = []
    for j, name in enumerate(model.dof_joint_names):
        dq = prep.dq[prep.mask[:, j], j]
        if dq.size == 0:
            continue
        share = max(np.mean(dq > 0), np.mean(dq < 0))
        if share > 1.0 - one_way:
            out.append(f"joint {name} moved one way in {100 * share:.1f} % of its rows: its Coulomb "
                       "friction and offset are not separable (excite both directions, or identify "
                       "without 'offset')")
    return out


def separability_warnings(prep: Prepared) -> list[str]:
    """Combinations of base parameters that the regression rows cannot determine (their standard
    deviations are infinite; the exported standard parameters take them from the prior)."""
    w, _, _ = prep.rows()
    return [f"the data cannot determine {combo}: its parameters are taken from the prior "
            "(excite the joints involved more, or identify fewer terms)"
            for combo in inseparable(w, prep.target.base.names)]


def precision_warnings(result: IdentificationResult, *, limit: int = 12) -> list[str]:
    """Base parameters whose standard deviation exceeds their magnitude and is not negligible
    (above 1e-3 of the parameters' RMS): the data barely determine them; named, the worst first
    (at most ``limit`` named)."""
    std, beta = result.beta_std, result.beta
    bad = np.flatnonzero(poorly_determined(beta, std))  # the report's identifiability rule too
    if bad.size == 0:
        return []
    bad = bad[np.argsort(-(std[bad] / np.maximum(np.abs(beta[bad]), 1e-300)))]
    named = ", ".join(f"{result.base.names[i]} = {beta[i]:.4g} ± {std[i]:.3g}" for i in bad[:limit])
    more = f" and {bad.size - limit} more" if bad.size > limit else ""
    return [f"{bad.size} base parameter{'s' if bad.size > 1 else ''} with a standard deviation "
            f"larger than its value: {named}{more}"]


_METHOD_TABLE: dict[str, Callable] = {
    "ols": fit_ols, "wls": fit_wls, "pc_ls": pc_ls, "energy": energy,
    "wls_logdet": regularised("logdet"), "wls_pullback": regularised("pullback"),
    "dual_metric": dual_metric, "iv": iv_method(False), "pc_iv": iv_method(True),
}
