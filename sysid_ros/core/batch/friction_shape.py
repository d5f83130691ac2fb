"""The nonlinear friction shapes settled before a batch fit: the Stribeck velocity q̇s and the
sigmoid shapes (φ2, φ3) per joint, each by a 1-D search (:func:`grid_golden`) of the least-squares
residual (separable least squares), and their reports in a result's diagnostics."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.prepared import Prepared
from sysid_ros.core.data.preprocessing import parallel_decimate
from sysid_ros.core.errors import DataError
from sysid_ros.core.model.regressor import sigmoid_column, stribeck_column
from sysid_ros.core.model.target import Target
from sysid_ros.core.progress import warn
from sysid_ros.core.result import IdentificationResult

log = logging.getLogger(__name__)

log = logging.getLogger(__name__)


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
    beta = rla.lstsq(w, rhs)
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
    end = "upper" if best_v > np.sqrt(STRIBECK_SEARCH[0] * STRIBECK_SEARCH[1]) else "lower"
    bound = (f"q̇s = {best_v:.4g} rad/s at the {end} end of {STRIBECK_SEARCH[0]:g}..{STRIBECK_SEARCH[1]:g} "
             "rad/s") if at_edge else None
    doc = {"velocity": best_v, "residual_rms": rms, "searched": list(STRIBECK_SEARCH),
           "grid": [[float(v), r] for v, r in zip(grid, values, strict=True)], "at_search_edge": at_edge,
           "bound": bound}
    line = (f"Stribeck velocity {best_v:.4g} rad/s (least-squares residual {rms:.4g} N·m; searched "
            f"{STRIBECK_SEARCH[0]:g}..{STRIBECK_SEARCH[1]:g} rad/s)")
    log.info("%s", line)
    if progress is not None:
        progress(line)
    if at_edge:
        warn = (f"the Stribeck velocity search ended at the edge of its interval ({best_v:.4g} rad/s): "
                "the data may not show a Stribeck effect (identify without 'stribeck', or give "
                "--stribeck-velocity)")
        warn(log, progress, warn)
    return replace(best, stribeck=doc)


# ------------------------------------------------------------------------- sigmoid shape
#: [s/rad] interval the sigmoid steepness φ2 is searched in (log-spaced grid, then golden section):
#: transitions from 1 rad/s down to 1 mrad/s wide; published arms lie well inside (Gaz et al.,
#: RA-L 2019: 5–17 s/rad on the Panda). A joint whose best φ2 is an end of it is reported
#: (``bound`` in result.json, a warning and a summary line): its friction is steeper (Coulomb-like)
#: or smoother than the interval holds
SIGMOID_STEEPNESS_SEARCH = (1.0, 1000.0)
#: interval of the asymmetry u = φ2·φ3 searched for each φ2 (linear grid, then golden section):
#: the share σ(u) of the friction swing at negative velocities, 0.05..0.95
SIGMOID_ASYMMETRY_SEARCH = (-3.0, 3.0)
#: grid points and golden-section steps of the steepness search and of the asymmetry search
SIGMOID_STEEPNESS_GRID, SIGMOID_STEEPNESS_REFINE = 19, 12
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
    bounds = []
    if steep_edge:
        lo, hi = SIGMOID_STEEPNESS_SEARCH
        end = "upper" if steepness > np.sqrt(lo * hi) else "lower"
        bounds.append(f"phi2 = {steepness:.4g} s/rad at the {end} end of {lo:g}..{hi:g} s/rad")
    if asym_edge:
        lo, hi = SIGMOID_ASYMMETRY_SEARCH
        end = "upper" if u > 0.5 * (lo + hi) else "lower"
        bounds.append(f"phi2*phi3 = {u:.3g} at the {end} end of {lo:g}..{hi:g}")
    return steepness, u / steepness, rms, "; ".join(bounds) or None


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
            steepness, offset, rms, bound = _search_sigmoid_joint(
                replace(prep, x=x), rows, dof, base_col[col])
            shape[dof] = steepness, offset
            x[:, dof, col] = _filtered_sigmoid(prep, dof, steepness, offset)
            joints[name] = {"phi2": steepness, "phi3": offset, "residual_rms": rms,
                            "at_search_edge": bound is not None, "bound": bound}
    for name, doc in joints.items():
        line = (f"sigmoid friction shape of {name}: phi2 {doc['phi2']:.4g} s/rad, phi3 {doc['phi3']:.4g} "
                f"rad/s (least-squares residual {doc['residual_rms']:.4g} N·m)")
        log.info("%s", line)
        if progress is not None:
            progress(line)
        if doc["bound"]:
            warnings.append(f"the sigmoid shape search of {name} stopped at a bound: {doc['bound']}: "
                            "the data may not show a smooth friction transition (identify with "
                            "'coulomb' instead, or give --sigmoid-shape)")
    for line in warnings:
        warn(log, progress, line)
    doc = {"joints": joints, "searched": {"phi2": list(SIGMOID_STEEPNESS_SEARCH),
                                          "phi2_phi3": list(SIGMOID_ASYMMETRY_SEARCH)},
           "sweeps": sweeps}
    target = replace(prep.target, model=model.with_sigmoid_shape(shape))
    return replace(prep, target=target, x=x, sigmoid=doc)


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

