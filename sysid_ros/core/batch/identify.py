"""The batch identification engine: data in, estimate with diagnostics out.

    dataset (bag, CSV, simulation) ──► segments (split at gaps, stationary ends cut, short ones dropped)
        ──► per segment: preprocessing ──► regressor X, torque y (filtered, decimated), stacked
        ──► method (ols … pc_iv; the IV simulations per segment) ──► IdentificationResult

One entry point, :func:`identify`, serves the ``sysid identify`` command, the ``batch_solver``
node and the benchmarks.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from sysid_ros.core.batch import outliers
from sysid_ros.core.batch.iv import converged, iv_covariance, iv_step, regressor_rank
from sysid_ros.core.batch.least_squares import (
    coulomb_rows,
    inseparable,
    joint_variances,
    ols,
    regression_rows,
    solve_weighted,
    wls,
)
from sysid_ros.core.data.controller import closed_loop_needed
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import (
    Conditioned,
    Preprocessing,
    condition,
    lowpass,
    parallel_decimate,
    segment,
)
from sysid_ros.core.data.segments import Segmentation
from sysid_ros.core.data.timebase import TimebaseReport, regularise
from sysid_ros.core.errors import DataError, IdentificationError
from sysid_ros.core.model.base_params import poorly_determined
from sysid_ros.core.model.consistency import realizable_inertia
from sysid_ros.core.model.regressor import sigmoid_column, stribeck_column
from sysid_ros.core.model.robot import body_params_from_inertial, inertial_from_body_params
from sysid_ros.core.model.target import Target
from sysid_ros.core.result import (
    IdentificationResult,
    ParameterSet,
    SolverStatus,
    consistency_of,
    diagnostics_for,
    target_label,
)
from sysid_ros.core.sim.simulation import run_mit
from sysid_ros.core.sim.synthetic import Payload, with_payload

if TYPE_CHECKING:  # the convex programs (cvxpy) are imported by the methods that solve one
    from sysid_ros.core.batch.convex import ConvexSolution

log = logging.getLogger(__name__)

Method = Literal["ols", "wls", "pc_ls", "energy", "wls_logdet", "wls_pullback", "dual_metric", "iv",
                 "pc_iv"]
METHODS: tuple[str, ...] = get_args(Method)
#: methods that simulate the recorded closed loop: only they read a bag's MotorCommand topic
COMMAND_METHODS: tuple[str, ...] = ("iv", "pc_iv")
#: default regularisation weight of wls_logdet / wls_pullback (relative to the normalised fit)
DEFAULT_REGULARIZATION = 1e-3


@dataclass(frozen=True)
class IdentifyOptions:
    """Options of :func:`identify`.

    ``min_speed`` [rad/s]: rows of joints slower than this are dropped when a Coulomb term is
    identified; ``regularization``: λ of the regularised methods (<= 0: default);
    ``max_samples``: samples kept for the dual-metric SDP (evenly spread); ``iv_*``: iteration
    cap and convergence tolerance of eq. 46; ``progress``: called with one-line messages.
    """

    method: Method = "ols"
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    min_speed: float = 0.05
    regularization: float = 0.0
    max_samples: int = 2000
    iv_max_iter: int = 10
    iv_tol: float = 1e-4
    progress: Callable[[str], None] | None = None
    #: [rad/s] Stribeck velocity q̇s of the ``Fs`` terms; None: found by a 1-D search (:func:`settle_stribeck`)
    stribeck_velocity: float | None = None
    #: (φ2 [s/rad], φ3 [rad/s]) of every joint's sigmoid friction ``Fsig``; None: found by a
    #: search per joint (:func:`settle_sigmoid`)
    sigmoid_shape: tuple[float, float] | None = None
    #: leave out the rows :mod:`~sysid_ros.core.batch.outliers` flags (they are reported either way)
    drop_outliers: bool = False

    def __post_init__(self) -> None:
        if not self.max_samples >= MIN_SDP_SAMPLES:
            raise DataError(f"max_samples must be >= {MIN_SDP_SAMPLES}, got {self.max_samples}")
        if not np.isfinite(self.regularization):
            raise DataError(f"regularization must be a finite number (<= 0: the default), got "
                            f"{self.regularization}")
        if not (np.isfinite(self.min_speed) and self.min_speed >= 0):
            raise DataError(f"min_speed must be a finite number >= 0 rad/s, got {self.min_speed}")
        check_stribeck_velocity(self.stribeck_velocity)
        check_sigmoid_option(self.sigmoid_shape)


#: fewest samples :class:`IdentifyOptions` lets the dual-metric SDP keep (the batch_solver's bound)
MIN_SDP_SAMPLES = 10


@dataclass(frozen=True)
class PreparedSegment:
    """One segment of :class:`Prepared`: its samples (``dataset``, command log cut to its span),
    their conditioned full-rate signals, the samples ``kept`` after trimming and decimation, and
    where its rows are in the stacked arrays (``rows``)."""

    dataset: Dataset
    conditioned: Conditioned
    kept: slice
    rows: slice


@dataclass(frozen=True)
class Prepared:
    """Regression data at the kept (filtered, decimated) samples of every segment, stacked.

    ``x (K, n, p)`` regressor of the target's parameters, ``y (K, n)`` torque minus the known part,
    ``mask (K, n)`` rows used, ``t (K,)`` [s] and ``q``/``dq``/``ddq`` the conditioned signals at
    those samples. ``dataset`` is the whole recording (model's joints), ``segmentation`` how it was
    split at gaps and cut (:func:`~sysid_ros.core.data.preprocessing.segment`), ``segments`` each
    segment's part, ``timebase`` what was done to its time stamps first
    (:func:`~sysid_ros.core.data.timebase.regularise`).
    """

    target: Target
    dataset: Dataset
    settings: Preprocessing
    segmentation: Segmentation
    segments: tuple[PreparedSegment, ...]
    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    x: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    timebase: TimebaseReport
    #: the Stribeck velocity search (:func:`settle_stribeck`), None when there was none
    stribeck: dict | None = None
    #: the sigmoid shape search (:func:`settle_sigmoid`), None when there was none
    sigmoid: dict | None = None

    @property
    def fs(self) -> float:
        """[Hz] the recording's median sample rate (the rate conditioned at)."""
        return self.segments[0].conditioned.fs

    def rows(self, columns: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Regression rows ``(W, rhs, joint)``; ``columns`` of x (default: the base columns)."""
        x = self.target.base.columns(self.x) if columns is None else self.x[..., columns]
        return regression_rows(x, self.y, self.mask)


def prepare(dataset: Dataset, target: Target, settings: Preprocessing, *, min_speed: float = 0.05,
            progress: Callable[[str], None] | None = None, stribeck_velocity: float | None = None,
            search_stribeck: bool = True, sigmoid_shape: tuple[float, float] | None = None,
            search_sigmoid: bool = True) -> Prepared:
    """Split at gaps and cut stationary ends (:func:`segment`), then per segment: condition, build
    the regressor at full rate, filter and decimate both sides in parallel; stack the segments.

    Every gap and dropped segment is a warning of this module's logger and, when given, a line to
    ``progress``; so is the summary (segments, samples used, stationary samples cut) at info level.

    An arm target with Stribeck terms ``Fs``: ``stribeck_velocity`` [rad/s] sets q̇s; None finds it
    (:func:`settle_stribeck`) unless ``search_stribeck`` is False (the model's q̇s is kept). Likewise
    sigmoid terms ``Fsig``: ``sigmoid_shape`` (φ2 [s/rad], φ3 [rad/s]) for every joint, or found per
    joint (:func:`settle_sigmoid`) unless ``search_sigmoid`` is False (the model's shapes kept).
    """
    check_stribeck_velocity(stribeck_velocity)
    check_sigmoid_option(sigmoid_shape)
    if stribeck_velocity is not None and "Fs" in target.model.joint_terms:
        target = replace(target, model=target.model.with_stribeck_velocity(stribeck_velocity))
    if sigmoid_shape is not None and "Fsig" in target.model.joint_terms:
        target = replace(target, model=target.model.with_sigmoid_shape(sigmoid_shape))
    ds, timebase = regularise(dataset.for_model(target.model), max_bridge=settings.bridge_gaps,
                              jitter_tolerance=settings.jitter_tolerance,
                              resample=settings.resample == "auto")
    log.info("%s", timebase.describe())
    if progress is not None:
        progress(timebase.describe())
    split = segment(ds, settings)
    for line in split.warnings():
        log.warning("%s", line)
        if progress is not None:
            progress(f"warning: {line}")
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
    # a payload target's known arm keeps its friction on the output side: every row is valid
    mask = coulomb_rows(target.model, dq, min_speed if target.kind == "arm" else 0.0)
    prep = Prepared(target, ds, settings, split, tuple(parts), t, q, dq, ddq, x, y, mask, timebase)
    if stribeck_velocity is None and search_stribeck and stribeck_searched(target):
        prep = settle_stribeck(prep, progress=progress)
    if sigmoid_shape is None and search_sigmoid and sigmoid_searched(target):
        prep = settle_sigmoid(prep, progress=progress)
    return prep


# ------------------------------------------------------------------------- 1-D search
def grid_golden(cost: Callable[[float], float], grid: np.ndarray, refine: int
                ) -> tuple[float, float, list[float], bool]:
    """Minimise ``cost`` of one variable: evaluate it on ``grid`` (increasing), then ``refine``
    golden-section steps between the best grid point's neighbours. Returns the best point
    evaluated and its cost, the costs on the grid, and whether the best grid point is one of its
    ends (the minimum may lie outside). ``cost`` is called once per point (results kept)."""
    seen: dict[float, float] = {}

    def f(x: float) -> float:
        x = float(x)
        if x not in seen:
            seen[x] = cost(x)
        return seen[x]

    values = [f(g) for g in grid]
    k = int(np.argmin(values))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    for _ in range(refine):
        if f(a) < f(b):
            hi, b = b, a
            a = hi - ratio * (hi - lo)
        else:
            lo, a = a, b
            b = lo + ratio * (hi - lo)
    best = min(seen, key=seen.__getitem__)
    return best, seen[best], values, k in (0, len(grid) - 1)


# ------------------------------------------------------------------------- Stribeck velocity
#: [rad/s] interval the Stribeck velocity q̇s is searched in (log-spaced grid, then golden section)
STRIBECK_SEARCH = (0.002, 2.0)
#: points of the search's log-spaced grid; golden-section steps refining the best bracket
STRIBECK_GRID, STRIBECK_REFINE = 25, 14


def check_stribeck_velocity(velocity: float | None) -> None:
    if velocity is not None and not (np.isfinite(velocity) and velocity > 0):
        raise DataError(f"the Stribeck velocity must be a finite number > 0 rad/s (or none: "
                        f"searched), got {velocity}")


def stribeck_searched(target: Target) -> bool:
    """Whether ``target`` identifies Stribeck terms (an arm with ``Fs`` joint terms)."""
    return target.kind == "arm" and "Fs" in target.model.joint_terms


def with_stribeck_velocity(prep: Prepared, velocity: float) -> Prepared:
    """``prep`` with Stribeck velocity q̇s = ``velocity`` [rad/s]: the target's model and the
    ``Fs`` columns of ``x``, recomputed per segment from the conditioned full-rate velocities and
    filtered and decimated as ``prepare`` does (the column is nonlinear in q̇: it must be
    filtered, not computed from filtered q̇)."""
    model = prep.target.model.with_stribeck_velocity(velocity)
    dofs = model.term_dofs
    cols = model.term_columns + model.joint_terms.index("Fs")
    x = prep.x.copy()
    for part in prep.segments:
        cond = part.conditioned
        (column,), _ = parallel_decimate([stribeck_column(cond.dq[:, dofs], velocity)], cond.fs,
                                         prep.settings)
        x[part.rows, dofs, cols] = column
    return replace(prep, target=replace(prep.target, model=model), x=x)


def stribeck_residual(prep: Prepared) -> float:
    """RMS [N·m] of the unconstrained least-squares fit of the base parameters on ``prep``'s rows."""
    w, rhs, _ = prep.rows()
    beta = np.linalg.lstsq(w, rhs, rcond=None)[0]
    return float(np.sqrt(np.mean((rhs - w @ beta) ** 2)))


def settle_stribeck(prep: Prepared, *, progress: Callable[[str], None] | None = None,
                    residual: Callable[[Prepared], float] = stribeck_residual) -> Prepared:
    """``prep`` at the Stribeck velocity q̇s that minimises the least-squares residual: separable
    least squares (variable projection) over the one nonlinear parameter. For a given q̇s the
    torque is linear in every other parameter (Fs included), so the residual of their
    least-squares fit is a function of q̇s alone; it is evaluated on a log-spaced grid over
    :data:`STRIBECK_SEARCH`, then minimised by golden-section search (in log q̇s) between the best
    grid point's neighbours. ``prep.stribeck`` records the search (velocity, residuals).
    ``residual``: the RMS [N·m] minimised (default :func:`stribeck_residual`)."""
    grid = np.geomspace(*STRIBECK_SEARCH, STRIBECK_GRID)
    cache: dict[float, tuple[float, Prepared]] = {}

    def cost(log_v: float) -> float:
        v = float(np.exp(log_v))
        if v not in cache:
            trial = with_stribeck_velocity(prep, v)
            cache[v] = (residual(trial), trial)
        return cache[v][0]

    best_log, _, values, at_edge = grid_golden(cost, np.log(grid), STRIBECK_REFINE)
    best_v = float(np.exp(best_log))
    rms, best = cache[best_v]
    doc = {"velocity": best_v, "residual_rms": rms, "searched": list(STRIBECK_SEARCH),
           "grid": [[float(v), r] for v, r in zip(grid, values, strict=True)], "at_search_edge": at_edge}
    line = (f"Stribeck velocity {best_v:.4g} rad/s (least-squares residual {rms:.4g} N·m; searched "
            f"{STRIBECK_SEARCH[0]:g}..{STRIBECK_SEARCH[1]:g} rad/s)")
    log.info("%s", line)
    if progress is not None:
        progress(line)
    if at_edge:
        warn = (f"the Stribeck velocity search ended at the edge of its interval ({best_v:.4g} rad/s): "
                "the data may not show a Stribeck effect (identify without 'stribeck', or give "
                "--stribeck-velocity)")
        log.warning("%s", warn)
        if progress is not None:
            progress(f"warning: {warn}")
    return replace(best, stribeck=doc)


# ------------------------------------------------------------------------- sigmoid shape
#: [s/rad] interval the sigmoid steepness φ2 is searched in (log-spaced grid, then golden section):
#: transitions from 2 rad/s down to 2 mrad/s wide
SIGMOID_STEEPNESS_SEARCH = (0.5, 500.0)
#: interval of the asymmetry u = φ2·φ3 searched for each φ2 (linear grid, then golden section):
#: the share σ(u) of the friction swing at negative velocities, 0.05..0.95
SIGMOID_ASYMMETRY_SEARCH = (-3.0, 3.0)
#: grid points and golden-section steps of the steepness search and of the asymmetry search
SIGMOID_STEEPNESS_GRID, SIGMOID_STEEPNESS_REFINE = 16, 12
SIGMOID_ASYMMETRY_GRID, SIGMOID_ASYMMETRY_REFINE = 13, 10
#: passes over the joints (each joint's shape searched with the others' at their latest values)
SIGMOID_SWEEPS = 1

RowsOf = Callable[[Prepared], tuple[np.ndarray, np.ndarray, np.ndarray]]


def check_sigmoid_option(shape: tuple[float, float] | None) -> None:
    if shape is None:
        return
    values = np.asarray(shape, dtype=float)
    if values.shape != (2,) or not (np.all(np.isfinite(values)) and values[0] > 0):
        raise DataError(f"the sigmoid shape must be (phi2 > 0 s/rad, phi3 rad/s), finite (or none: "
                        f"searched), got {np.ravel(shape).tolist()}")


def sigmoid_searched(target: Target) -> bool:
    """Whether ``target`` identifies sigmoid friction terms (an arm with ``Fsig`` joint terms)."""
    return target.kind == "arm" and "Fsig" in target.model.joint_terms


def _sigmoid_rows(prep: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return prep.rows()


def _filtered_sigmoid(prep: Prepared, dof: int, steepness: float, offset: float) -> np.ndarray:
    """``(K,)`` sigmoid column of ``dof`` at the kept samples: computed from the conditioned
    full-rate velocities per segment, then filtered and decimated as :func:`prepare` does."""
    out = np.empty(len(prep.t))
    for part in prep.segments:
        cond = part.conditioned
        (column,), _ = parallel_decimate([sigmoid_column(cond.dq[:, dof], steepness, offset)],
                                         cond.fs, prep.settings)
        out[part.rows] = column
    return out


def _search_sigmoid_joint(prep: Prepared, rows: RowsOf, dof: int, column: int
                          ) -> tuple[float, float, float, bool]:
    """One joint's sigmoid shape search (:func:`settle_sigmoid`): ``dof``'s ``Fsig`` is the base
    column ``column`` of ``rows(prep)``. Returns φ2 [s/rad], φ3 [rad/s], the residual RMS [N·m]
    and whether either search ended at the edge of its interval."""
    w, rhs, joint = rows(prep)
    basis, _ = np.linalg.qr(np.delete(w, column, axis=1))
    r0 = rhs - basis @ (basis.T @ rhs)
    on = joint == dof
    basis_j, r0_j, kept = basis[on], r0[on], prep.mask[:, dof]
    total = float(r0 @ r0)

    def residual(log_steepness: float, u: float) -> float:
        steepness = float(np.exp(log_steepness))
        s = _filtered_sigmoid(prep, dof, steepness, u / steepness)[kept]
        qs = basis_j.T @ s
        den = float(s @ s - qs @ qs)
        gain = float(s @ r0_j) ** 2 / den if den > 1e-12 * float(s @ s) else 0.0
        return float(np.sqrt(max(total - gain, 0.0) / len(rhs)))

    inner: dict[float, tuple[float, float, bool]] = {}

    def profile(log_steepness: float) -> float:
        u, rms, _, edge = grid_golden(lambda u: residual(log_steepness, u),
                                      np.linspace(*SIGMOID_ASYMMETRY_SEARCH, SIGMOID_ASYMMETRY_GRID),
                                      SIGMOID_ASYMMETRY_REFINE)
        inner[log_steepness] = (u, rms, edge)
        return rms

    best_log, _, _, steep_edge = grid_golden(
        profile, np.log(np.geomspace(*SIGMOID_STEEPNESS_SEARCH, SIGMOID_STEEPNESS_GRID)),
        SIGMOID_STEEPNESS_REFINE)
    u, rms, asym_edge = inner[best_log]
    steepness = float(np.exp(best_log))
    return steepness, u / steepness, rms, bool(steep_edge or asym_edge)


def settle_sigmoid(prep: Prepared, *, progress: Callable[[str], None] | None = None,
                   rows: RowsOf = _sigmoid_rows, sweeps: int = SIGMOID_SWEEPS) -> Prepared:
    """``prep`` at the sigmoid shapes (φ2, φ3) per joint that minimise the least-squares residual.

    Separable least squares, as for the Stribeck velocity (:func:`settle_stribeck`): for given
    shapes the torque is linear in every other parameter (the amplitudes φ1 included), so the
    residual of their fit is a function of the shapes alone. Each joint's ``Fsig`` column lives on
    that joint's rows only, so one joint's shape is searched with every other column fixed: the
    residual of the fit with the candidate column ``s`` is, with ``r₀`` the residual of the fit
    without it and ``Q`` an orthonormal basis of the other columns,
    ``‖r₀‖² − (sᵀr₀)² / (sᵀs − ‖Qᵀs‖²)`` — one product with the joint's rows per candidate, no
    new factorisation. The search is nested, not 2-D: for a steepness φ2 the asymmetry
    u = φ2·φ3 is found by the same grid-and-golden-section search as q̇s (:func:`grid_golden`,
    over :data:`SIGMOID_ASYMMETRY_SEARCH`), and φ2 minimises that profile (log grid over
    :data:`SIGMOID_STEEPNESS_SEARCH`, golden section). In (log φ2, u) both coordinates are
    bounded and scale-free: u fixes the share of the friction swing at negative speeds whatever
    the transition's width 1/φ2, where φ3 itself would have to be searched on a range that
    shrinks as φ2 grows. The joints are searched one after the other, ``sweeps`` times; one is
    the default, as a joint's column lives on its own rows and the joints couple only through the
    shared parameters (``benchmarks/sigmoid.py`` prints what a second sweep changes). ``rows``:
    the regression rows ``(W, rhs, joint)`` whose first columns are ``prep``'s base columns
    (default :meth:`Prepared.rows`; the multi-run fit appends drive-gain columns).
    ``prep.sigmoid`` records the search per joint."""
    model = prep.target.model
    term = model.joint_terms.index("Fsig")
    base_col = {int(c): i for i, c in enumerate(prep.target.base.independent)}
    shape = np.array(model.sigmoid_shape)
    x = prep.x.copy()
    joints: dict[str, dict] = {}
    warnings = []
    if "Fc" in model.joint_terms:
        warnings.append("coulomb and sigmoid friction are both identified: away from zero speed their "
                        "columns are nearly the same, and the Coulomb term drops the rows slower than "
                        "min_speed, where the sigmoid's shape shows (the sigmoid is an alternative to "
                        "coulomb)")
    for _ in range(sweeps):
        for k, dof in enumerate(model.term_dofs):
            name = model.joints[model.term_joints[k]].name
            col = int(model.term_columns[k]) + term
            if col not in base_col:  # regrouped into another base parameter: nothing to search
                continue
            steepness, offset, rms, at_edge = _search_sigmoid_joint(
                replace(prep, x=x), rows, dof, base_col[col])
            shape[dof] = steepness, offset
            x[:, dof, col] = _filtered_sigmoid(prep, dof, steepness, offset)
            joints[name] = {"phi2": steepness, "phi3": offset, "residual_rms": rms,
                            "at_search_edge": at_edge}
    for name, doc in joints.items():
        line = (f"sigmoid friction shape of {name}: phi2 {doc['phi2']:.4g} s/rad, phi3 {doc['phi3']:.4g} "
                f"rad/s (least-squares residual {doc['residual_rms']:.4g} N·m)")
        log.info("%s", line)
        if progress is not None:
            progress(line)
        if doc["at_search_edge"]:
            warnings.append(f"the sigmoid shape search of {name} ended at the edge of its interval "
                            f"(phi2 {SIGMOID_STEEPNESS_SEARCH[0]:g}..{SIGMOID_STEEPNESS_SEARCH[1]:g} s/rad, "
                            f"phi2*phi3 {SIGMOID_ASYMMETRY_SEARCH[0]:g}..{SIGMOID_ASYMMETRY_SEARCH[1]:g}): "
                            "the data may not show a smooth friction transition (identify with "
                            "'coulomb' instead, or give --sigmoid-shape)")
    for line in warnings:
        log.warning("%s", line)
        if progress is not None:
            progress(f"warning: {line}")
    doc = {"joints": joints, "searched": {"phi2": list(SIGMOID_STEEPNESS_SEARCH),
                                          "phi2_phi3": list(SIGMOID_ASYMMETRY_SEARCH)},
           "sweeps": sweeps}
    target = replace(prep.target, model=model.with_sigmoid_shape(shape))
    return replace(prep, target=target, x=x, sigmoid=doc)


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
        log.warning("%s", line)
        say(f"warning: {line}")
    result = _METHOD_TABLE[options.method](prep, options, say)
    for line in precision_warnings(result):
        log.warning("%s", line)
        say(f"warning: {line}")
        warnings.append(line)
    data = prep.segmentation.as_dict() | {"timebase": prep.timebase.as_dict()}
    data["outliers"] = found.as_dict(prep.dataset.joint_names) | {"dropped": bool(options.drop_outliers)}
    extra = result.diagnostics.extra | {"data": data} | ({"warnings": warnings} if warnings else {})
    result = replace(result, diagnostics=replace(result.diagnostics, extra=extra))
    if result.parameters is None:  # base-parameter method: export a consistent θ reproducing β
        solution = _plausible_fit(prep)
        result = _with_parameters(result, prep.target, solution.theta, PROJECTED)
        result = replace(result, solver=replace(
            result.solver, status=solution.status if solution.status != "optimal" else result.solver.status,
            binding_constraints=tuple(solution.binding())))
        fit = {"solver": solution.solver, "status": solution.status, "solve_time_s": solution.solve_time}
        result = replace(result, diagnostics=replace(
            result.diagnostics, extra=result.diagnostics.extra | {"exported_fit": fit}))
    result = with_friction_shape_reports(_with_constraint_cost(result, prep), prep)
    result = replace(result, joint_names=prep.dataset.joint_names, target=target_label(prep.target))
    bad = result.non_finite()
    if bad:
        raise IdentificationError(f"{options.method} gave non-finite figures ({', '.join(bad[:5])}"
                                  f"{', ...' if len(bad) > 5 else ''}): no estimate")
    log.info("%s done in %.2f s", options.method, time.perf_counter() - start)
    return result


def with_friction_shape_reports(result: IdentificationResult, prep: Prepared) -> IdentificationResult:
    """``result`` with the shapes of the nonlinear friction it was identified with, batch or
    online: ``diagnostics.extra["stribeck"]`` (the q̇s search, or the model's q̇s) and
    ``["sigmoid"]`` (:func:`with_sigmoid_report`)."""
    if stribeck_searched(prep.target):
        doc = prep.stribeck or {"velocity": prep.target.model.stribeck_velocity, "searched": None}
        result = replace(result, diagnostics=replace(result.diagnostics,
                                                     extra=result.diagnostics.extra | {"stribeck": doc}))
    if sigmoid_searched(prep.target):
        result = with_sigmoid_report(result, prep)
    return result


def with_sigmoid_report(result: IdentificationResult, prep: Prepared) -> IdentificationResult:
    """``result`` with ``diagnostics.extra["sigmoid"]``: the identified ``[φ1 [N·m], φ2 [s/rad],
    φ3 [rad/s]]`` per joint (φ1 of the exported parameters) and the shape search, if any."""
    model = prep.target.model
    doc = {"phi": model.sigmoid_of(result.parameters.values),
           "search": prep.sigmoid}
    return replace(result, diagnostics=replace(result.diagnostics,
                                               extra=result.diagnostics.extra | {"sigmoid": doc}))


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


# ------------------------------------------------------------------------------------- methods
def _ols(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    return ols(prep.x, prep.y, prep.target.base, mask=prep.mask)


def _wls(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    return wls(prep.x, prep.y, prep.target.base, mask=prep.mask)


#: ``parameters_from`` of base-parameter methods' exported standard parameters
PROJECTED = "plausible consistent fit of the same rows"


def _with_parameters(result: IdentificationResult, target: Target, theta: np.ndarray, source: str
                     ) -> IdentificationResult:
    """``result`` exporting the standard parameters ``theta`` (std unknown), with their
    consistency report."""
    return replace(result, parameters=ParameterSet(target.names, theta, None),
                   consistency=consistency_of(target, theta), parameters_from=source)


def _standard_result(method: str, prep: Prepared, theta: np.ndarray, solve_time: float,
                     solver: SolverStatus, extra: dict) -> IdentificationResult:
    """Result of a standard-parameter method: β = Bθ, standard deviations of β from the OLS-style
    covariance at the solution (constraints not binding), consistency per body."""
    base = prep.target.base
    beta = base.of(theta)
    w, rhs, joint = prep.rows()
    resid = rhs - w @ beta
    dof = max(w.shape[0] - base.rank, 1)
    try:
        info = np.linalg.pinv(w.T @ w)
        beta_std = np.sqrt(np.maximum(np.diag(info) * float(resid @ resid) / dof, 0.0))
    except np.linalg.LinAlgError:
        beta_std = np.full(base.rank, np.nan)
    diag = diagnostics_for(w, rhs, joint, beta, n_joints=prep.y.shape[1], n_samples=len(prep.t),
                           solve_time=solve_time, extra=extra)
    result = IdentificationResult(method, base, beta, beta_std, diag, solver=solver)
    return _with_parameters(result, prep.target, theta, method)


def online_result(prep: Prepared, est) -> IdentificationResult:
    """The final estimate of an online replay as a result (fit figures on the prepared data); the
    EKF's is its projection onto the consistent, plausible set, reported under
    ``extra["online"]["projection"]`` (the projection's solver status is the result's)."""
    times = np.array(est.log.update_time) * 1e6
    div = [d for d in est.log.divergence if np.isfinite(d)]
    extra = {"online": {"estimator": est.estimator, "regression": est.regression,
                        "updates": est.samples, "rejected": est.rejected,
                        "update_time_us": {"median": float(np.median(times)) if times.size else None,
                                           "p99": float(np.percentile(times, 99)) if times.size else None},
                        "residual_rms": est.residual_rms,
                        "final_divergence_to_truth": div[-1] if div else None}}
    if est.regression == "momentum":
        extra["online"]["momentum_windows"] = dict(est.rows.windows)
    name = "momentum" if est.regression == "momentum" else est.estimator
    theta, solver = est.theta.copy(), SolverStatus(solver=est.estimator)
    projection = est.projection() if hasattr(est, "projection") else None
    if projection is not None:  # the EKF: its estimate projected onto the consistent, plausible set
        theta = projection.theta.copy()
        extra["online"]["projection"] = projection.as_dict()
        if est.truth is not None:  # the log's last finite divergence may be an earlier estimate's
            final = prep.target.divergence(theta, est.truth)
            extra["online"]["final_divergence_to_truth"] = final if np.isfinite(final) else None
        if projection.status != "unchanged":
            solver = SolverStatus(solver=est.estimator, status=projection.status,
                                  binding_constraints=projection.binding)
    result = _standard_result(name, prep, theta, float(times.sum() * 1e-6), solver, extra)
    if projection is not None and projection.solved:
        from sysid_ros.core.online.projection import PROJECTED as PROJECTED_ESTIMATE

        result = replace(result, parameters_from=PROJECTED_ESTIMATE)
    result = with_friction_shape_reports(result, prep)
    warning = online_fit_warning(result.diagnostics.relative_error, prep)
    if warning:
        log.warning("%s", warning)
        warnings = [*result.diagnostics.extra.get("warnings", []), warning]
        extra = result.diagnostics.extra | {"warnings": warnings}
        result = replace(result, diagnostics=replace(result.diagnostics, extra=extra))
    return replace(result, joint_names=prep.dataset.joint_names, target=target_label(prep.target))


def online_fit_warning(relative_error: float, prep: Prepared, *, factor: float = 2.0,
                       margin: float = 1.0) -> str | None:
    """A warning when an online estimate's torque error on the prepared rows, ``relative_error``
    [%], exceeds ``factor`` × that of an ordinary least-squares fit of the same rows + ``margin``
    [percentage points]: the estimate ended far from what the data determine; None otherwise."""
    fit = ols(prep.x, prep.y, prep.target.base, mask=prep.mask).diagnostics.relative_error
    if not relative_error > factor * fit + margin:
        return None
    return (f"the online estimate's torque error on this data, {relative_error:.3g} %, is far from a "
            f"least-squares fit of the same data, {fit:.3g} %: it has not converged to what the data "
            "determine (a longer run, more excitation, other tuning, or a batch method)")


def _pc_ls(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    from sysid_ros.core.batch.convex import least_squares_program

    w, rhs, _ = prep.rows(np.arange(prep.target.n_params))
    sol = least_squares_program(prep.target, w, rhs)
    return _standard_result("pc_ls", prep, sol.theta, sol.solve_time, _solver_status(sol), _multipliers(sol))


def _energy(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    from sysid_ros.core.batch.convex import least_squares_program

    # rows: q̇_kᵀ Y_k θ = q̇_kᵀ τ_k (eq. 9), one per sample
    dq = np.where(prep.mask, prep.dq, 0.0)
    w = np.einsum("kj,kjp->kp", dq, prep.x)
    rhs = np.einsum("kj,kj->k", dq, prep.y)
    sol = least_squares_program(prep.target, w, rhs)
    return _standard_result("energy", prep, sol.theta, sol.solve_time, _solver_status(sol), _multipliers(sol))


def _weighted_rows(prep: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standard-parameter rows weighted by 1/σ_j from an unregularised (OLS) fit (seed §IV)."""
    base = prep.target.base
    wb, rhs, joint = prep.rows()
    beta0, _ = solve_weighted(wb, rhs, names=base.names)
    var = joint_variances(rhs - wb @ beta0, joint, prep.y.shape[1], base.rank)
    w_full, _, _ = prep.rows(np.arange(prep.target.n_params))
    sw = 1.0 / np.sqrt(var[joint])
    return w_full * sw[:, None], rhs * sw, np.sqrt(var)


def _regularised(kind: str) -> Callable:
    def run(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
        from sysid_ros.core.batch.convex import least_squares_program

        w, rhs, sigma = _weighted_rows(prep)
        weight = options.regularization if options.regularization > 0 else DEFAULT_REGULARIZATION
        sol = least_squares_program(prep.target, w, rhs, regularizer=kind, weight=weight)
        extra = _multipliers(sol) | {"regularization": weight, "joint_sigma": sigma.tolist()}
        return _standard_result(f"wls_{kind}", prep, sol.theta, sol.solve_time, _solver_status(sol), extra)

    return run


def _dual_metric(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
    from sysid_ros.core.batch.convex import dual_metric_program

    # samples where a Coulomb row is unreliable are left out; up to max_samples, evenly spread
    usable = np.flatnonzero(prep.mask.all(axis=1))
    pick = np.linspace(0, len(usable) - 1, min(len(usable), options.max_samples)).round().astype(int)
    sel = usable[np.unique(pick)] if usable.size else usable
    if sel.size < prep.target.base.rank // max(1, prep.y.shape[1]) + 1:
        raise IdentificationError(f"only {sel.size} usable samples for the dual-metric SDP")
    say(f"dual-metric SDP on {sel.size} samples ({sel.size} LMIs of size {prep.y.shape[1] + 1})")
    ym, m_known = prep.target.mass_matrix(prep.q[sel])
    weight = options.regularization if options.regularization > 0 else 0.0
    sol = dual_metric_program(prep.target, prep.x[sel], prep.y[sel], ym, m_known,
                              regularizer="pullback" if weight > 0 else None, weight=weight)
    extra = _multipliers(sol) | {"samples": int(sel.size), "newton_steps": sol.iterations}
    return _standard_result("dual_metric", prep, sol.theta, sol.solve_time, _solver_status(sol), extra)


def _solver_status(sol: ConvexSolution, *, iterations: int | None = None, converged: bool = True
                   ) -> SolverStatus:
    return SolverStatus(solver=sol.solver, status=sol.status, objective=sol.objective,
                        binding_constraints=tuple(sol.binding()), iterations=iterations,
                        converged=converged)


def _multipliers(sol: ConvexSolution) -> dict:
    """The constraints' multipliers (for result.json)."""
    return {"multipliers": sol.multipliers}


# ----------------------------------------------------------------------- instrumental variables
def _instruments(prep: Prepared, theta: np.ndarray) -> np.ndarray:
    """Base-column instruments ``(K, n, r)`` at the kept samples from a closed-loop simulation of
    the robot with parameters ``theta`` under the recorded reference and gains, run per segment
    (from the segment's first conditioned state, under its slice of the command log)."""
    ds = prep.dataset
    if ds.command is None or not (np.all(np.isfinite(ds.command.kp)) and np.all(np.isfinite(ds.command.kd))):
        raise DataError(closed_loop_needed(ds))
    mj = _simulation_model(prep.target, theta)
    kp, kd = ds.command.kp.max(axis=0), ds.command.kd.max(axis=0)
    return np.concatenate([_segment_instruments(prep, part, mj, kp, kd) for part in prep.segments],
                          axis=0)


def _segment_instruments(prep: Prepared, part: PreparedSegment, mj, kp: np.ndarray, kd: np.ndarray
                         ) -> np.ndarray:
    """The instruments ``(K_s, n, r)`` of one segment's kept samples (see :func:`_instruments`)."""
    ds, target, cond = part.dataset, prep.target, part.conditioned
    assert ds.command is not None
    dt = _instrument_step(mj, cond, kp, kd)
    t_sim = np.arange(ds.t[0], ds.t[-1], dt)
    cmd = ds.command.at(t_sim)
    run = run_mit(mj, cmd.q_ref, cmd.dq_ref, cmd.tau_ff, cmd.kp, cmd.kd, target.model.torque_limits(),
                  dt=dt, q0=cond.q[0], dq0=cond.dq[0])
    z_full, _ = target.regressor(run.q_true, run.dq_true, run.ddq)
    zb = target.base.columns(z_full)
    fs_sim = 1.0 / dt
    # the same parallel low-pass as X, applied at the simulation rate
    zf = lowpass(zb.reshape(len(t_sim), -1), fs_sim, prep.settings.decimation_cutoff,
                 prep.settings.order)
    # instruments at the kept sample times (linear interpolation of the filtered columns)
    t_kept = prep.t[part.rows]
    idx = np.searchsorted(t_sim, t_kept).clip(1, len(t_sim) - 1)
    w = ((t_kept - t_sim[idx - 1]) / dt).clip(0.0, 1.0)[:, None]
    z = zf[idx - 1] * (1 - w) + zf[idx] * w
    return z.reshape(len(t_kept), prep.y.shape[1], -1)


def _instrument_step(mj, cond: Conditioned, kp: np.ndarray, kd: np.ndarray) -> float:
    """Largest multiple (or, for data slower than that, largest integer fraction) of the data
    period, at most the model's time step, that keeps the explicit PD loop well resolved:
    ``dt·(kd/M_jj + √(kp/M_jj)) <= 0.3`` for every joint (inertia at the first conditioned
    sample ``cond.q[0]``)."""
    import mujoco

    data = mujoco.MjData(mj)
    data.qpos[:] = cond.q[0]
    mujoco.mj_forward(mj, data)
    full = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, data, full)
    inertia = np.maximum(np.diag(full), 1e-9)
    rate = float(np.max(kd / inertia + np.sqrt(kp / inertia)))
    period = 1.0 / cond.fs
    limit = min(float(mj.opt.timestep), 0.3 / max(rate, 1e-9))
    if period > limit:  # slow logs (a vendor's 100 Hz): a fraction of the period
        return period / int(np.ceil(period / limit))
    return period * max(1, int(limit / period))


def _simulation_model(target: Target, theta: np.ndarray):
    if target.kind == "arm":
        # consistent to the solver's tolerance: a principal moment may sit at -1e-7 of a body that
        # the data make thin; simulate the realizable body closest to it
        theta = theta.copy()
        for _label, sl in target.body_blocks:
            mass, com, inertia = inertial_from_body_params(theta[sl])
            theta[sl] = body_params_from_inertial(mass, com, realizable_inertia(inertia))
        mj = copy.deepcopy(target.model.mj)
        target.model.apply_to(mj, theta)
        return mj
    mass, com, inertia = inertial_from_body_params(theta)
    return with_payload(target.model, Payload(target.model.body_name(target.body), max(mass, 1e-6), com,
                                              realizable_inertia(inertia)))



def _consistent_from_base(prep: Prepared, beta: np.ndarray) -> ConvexSolution:
    """The physically consistent, plausible θ (within the target's bounds) whose base parameters
    are closest to ``beta`` in the data's own metric, ‖X_b (Bθ − β)‖ (torque on the regression
    rows); directions the data determine worse than their noise come from the prior."""
    from sysid_ros.core.batch.convex import compress, least_squares_program

    target = prep.target
    w, rhs, _ = prep.rows()
    r, _ = compress(w, np.zeros(w.shape[0]))
    # the data's residual at β as one more (constant) row: ‖[R(Bθ − β); ρ]‖ = ‖X_b Bθ − y‖ when β
    # is least squares, and the program's pull toward the nominal model scales with the noise
    resid = float(np.linalg.norm(rhs - w @ beta))
    rows = np.vstack([r @ target.base.matrix, np.zeros((1, target.n_params))])
    return least_squares_program(target, rows, np.append(r @ beta, resid))


def _plausible_fit(prep: Prepared) -> ConvexSolution:
    """The exported standard parameters of a base-parameter method (ols, wls): the physically
    consistent, plausible θ that fits the same rows best, min ‖X θ − y‖ within the target's
    bounds. When β (least squares) is plausible, Bθ = β; otherwise ‖X_b(Bθ − β)‖ is the smallest
    torque change that makes it so (‖Xθ − y‖² = ‖X_b(Bθ − β)‖² + const), and the prior fills the
    directions the data determine worse than their noise (``ConvexProgram.prior_pull``)."""
    from sysid_ros.core.batch.convex import least_squares_program

    w, rhs, _ = prep.rows(np.arange(prep.target.n_params))
    return least_squares_program(prep.target, w, rhs)


def _with_constraint_cost(result: IdentificationResult, prep: Prepared) -> IdentificationResult:
    """``result`` with ``diagnostics.extra["plausibility"]``: the bounds that shaped the exported
    parameters and the torque they cost, the RMS residual [N·m] on the regression rows of the
    unconstrained least-squares fit, of the base parameters β and of the exported θ (Bθ)."""
    target = prep.target
    w, rhs, _ = prep.rows()
    beta_ls = np.linalg.lstsq(w, rhs, rcond=None)[0]
    rms = {name: float(np.sqrt(np.mean((rhs - w @ b) ** 2))) if rhs.size else float("nan")
           for name, b in (("unconstrained", beta_ls), ("base_parameters", result.beta),
                           ("exported", target.base.of(result.parameters.values)))}
    doc = {"bounds": target.plausibility.as_dict() if target.plausibility else None,
           "binding": list(result.solver.binding_constraints),
           "torque_rms": rms,
           "cost_percent": 100.0 * (rms["exported"] / max(rms["unconstrained"], 1e-300) - 1.0)}
    extra = result.diagnostics.extra | {"plausibility": doc}
    return replace(result, diagnostics=replace(result.diagnostics, extra=extra))


def _iv_method(constrained: bool) -> Callable:
    name = "pc_iv" if constrained else "iv"

    def run(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
        start = time.perf_counter()
        target = prep.target
        base = target.base
        xb, rhs, joint = prep.rows()
        theta = target.prior.copy()
        beta_prev = base.of(theta)
        history = []
        step = None
        x_rank = regressor_rank(xb)
        for it in range(1, options.iv_max_iter + 1):
            z = _instruments(prep, theta)
            zb, _, _ = regression_rows(z, prep.y, prep.mask)
            step = iv_step(xb, zb, rhs, target=target if constrained else None,
                           b_matrix=base.matrix if constrained else None, x_rank=x_rank)
            done, change = converged(step.beta, beta_prev, options.iv_tol)
            history.append(change)
            say(f"{name} iteration {it}: relative change {change:.3e}, IV gradient "
                f"{step.gradient_norm:.2e}")
            beta_prev = step.beta
            theta = step.theta if constrained else _consistent_from_base(prep, step.beta).theta
            if done:
                break
        else:
            log.warning("%s did not converge in %d iterations (last change %.3e)", name,
                        options.iv_max_iter, history[-1])
        assert step is not None
        beta = step.beta
        cov = iv_covariance(xb, zb, rhs - xb @ beta, joint, prep.y.shape[1])
        iterations, done = len(history), history[-1] < options.iv_tol
        extra = {"relative_change": history, "iv_gradient": step.gradient_norm, "pi_rank": step.pi_rank}
        if step.solution is not None:
            solver = _solver_status(step.solution, iterations=iterations, converged=done)
            extra |= _multipliers(step.solution)
        else:
            solver = SolverStatus(iterations=iterations, converged=done)
        diag = diagnostics_for(xb, rhs, joint, beta, n_joints=prep.y.shape[1], n_samples=len(prep.t),
                               solve_time=time.perf_counter() - start, extra=extra)
        result = IdentificationResult(name, base, beta, np.sqrt(np.maximum(np.diag(cov), 0.0)), diag,
                                      solver=solver)
        # iv: θ is already the consistent projection of the last β (the next instruments' model)
        return _with_parameters(result, target, theta, name if constrained else PROJECTED)

    return run


_METHOD_TABLE: dict[str, Callable] = {
    "ols": _ols, "wls": _wls, "pc_ls": _pc_ls, "energy": _energy,
    "wls_logdet": _regularised("logdet"), "wls_pullback": _regularised("pullback"),
    "dual_metric": _dual_metric, "iv": _iv_method(False), "pc_iv": _iv_method(True),
}
