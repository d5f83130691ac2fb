"""Joint identification of one arm from several runs, each carrying a known payload (or none).

Each run's payload is known (mass, CoM, inertia on a body of the arm): its torque is the body's
regressor columns times its 10 parameters, ``τ_L = Y_b(q, q̇, q̈) φ_L``, subtracted from the
run's measured torque; the arm's regressor rows of every run are then stacked. The arm's
base-parameter reduction stays that of the bare arm (the payload is known, not identified).

What several payloads add that one run cannot give: the torque's scale. A logged torque is a
motor current or an uncalibrated effort, ``τ_j = g_j τ_m,j`` with a drive gain ``g_j`` per joint
(torque constant × gear ratio, known to a few per cent). With ``δ_j = g_j − 1`` the model
``Y θ + Y_b φ_L = (1 + δ) τ_m`` is linear in ``(θ, δ)``, rows ``[X_b, −T] (β, δ) = τ_m − Y_b φ_L``
(``T`` holds τ_m,j in column j). One run (or runs with one payload) leaves a null direction:
``(β + B φ_L, 1 + δ)`` scaled by any α still fits (``α(β + Bφ_L) − Bφ_L``), so the gains and every
parameter they scale are undetermined; two different known payloads fix α = 1 (Gautier & Briot,
"Global identification of joint drive gains and dynamic parameters of robots", J. Dyn. Sys.,
Meas., Control 136(5), 2014: the drive gains need a known payload change). :func:`drive_gains`
solves those rows by least squares; the chosen method then runs on the torque corrected by the
gains.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.identify import (
    Prepared,
    prepare,
    settle_sigmoid,
    settle_stribeck,
    sigmoid_searched,
    stribeck_residual,
    stribeck_searched,
)
from sysid_ros.core.batch.least_squares import joint_variances, regression_rows
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import DataError, IdentificationError
from sysid_ros.core.model.robot import BODY_FIELDS
from sysid_ros.core.model.target import Target
from sysid_ros.core.sim.synthetic import CUBE_SIDE, Payload

log = logging.getLogger(__name__)


def parse_payloads(doc: object, n_runs: int) -> list[Payload | None]:
    """Known payloads of ``n_runs`` runs from JSON data: a list, one entry per run in run order,
    each ``null`` (no payload), ``{"body": NAME, "mass": KG, "com": [X, Y, Z], "inertia": [Ixx, Iyy,
    Izz, Ixy, Ixz, Iyz]}`` (CoM in the body's frame [m]; inertia about the CoM [kg·m²], optional:
    a 5 cm solid cube) or the string form of ``sysid simulate --payload``."""
    if not isinstance(doc, list) or len(doc) != n_runs:
        got = f"a list of {len(doc)}" if isinstance(doc, list) else type(doc).__name__
        raise DataError(f"known payloads: expected a JSON list with one entry per run ({n_runs}), "
                        f"got {got}")
    out: list[Payload | None] = []
    for i, item in enumerate(doc):
        if item is None:
            out.append(None)
        elif isinstance(item, str):
            out.append(Payload.parse(item))
        elif isinstance(item, dict):
            out.append(_payload_of(item, i))
        else:
            raise DataError(f"known payload of run {i + 1}: expected null, an object or a string, "
                            f"got {item!r}")
    return out


def _payload_of(item: dict, i: int) -> Payload:
    unknown = set(item) - {"body", "mass", "com", "inertia"}
    if unknown or not {"body", "mass", "com"} <= set(item):
        raise DataError(f"known payload of run {i + 1}: expected keys body, mass, com[, inertia], "
                        f"got {sorted(item)}")
    try:
        mass = float(item["mass"])
        com = np.array(item["com"], dtype=float)
        ine = None if item.get("inertia") is None else np.array(item["inertia"], dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"known payload of run {i + 1}: {exc}") from None
    if not (np.isfinite(mass) and mass > 0) or com.shape != (3,) or (ine is not None and ine.shape != (6,)):
        raise DataError(f"known payload of run {i + 1}: need mass > 0, 3 CoM values and 6 inertia "
                        f"values, got mass {item['mass']!r}, com {item['com']!r}")
    if ine is None:
        inertia = np.eye(3) * mass * CUBE_SIDE**2 / 6.0
    else:
        xx, yy, zz, xy, xz, yz = ine
        inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    return Payload(str(item["body"]), mass, com, inertia)


def load_payloads(path: str | Path, n_runs: int) -> list[Payload | None]:
    """:func:`parse_payloads` of a JSON file."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise DataError(f"cannot read the known payloads {str(path)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"known payloads {str(path)!r}: not JSON ({exc})") from None
    return parse_payloads(doc, n_runs)


@dataclass(frozen=True)
class MultiRun:
    """Runs prepared and stacked: ``prep`` (rows of every run; ``y`` the measured torque minus the
    known payload's), ``measured (K, n)`` the filtered, decimated measured torque at the same rows,
    ``runs`` one description per run (source, payload, rows)."""

    prep: Prepared
    measured: np.ndarray
    runs: tuple[dict, ...]

    def as_dict(self) -> list[dict]:
        return list(self.runs)


def prepare_runs(datasets: Sequence[Dataset], payloads: Sequence[Payload | None], target: Target,
                 settings: Preprocessing, *, min_speed: float = 0.05,
                 progress: Callable[[str], None] | None = None,
                 stribeck_velocity: float | None = None, gains: bool = False,
                 sigmoid_shape: tuple[float, float] | None = None) -> MultiRun:
    """Prepare each run (:func:`prepare`), subtract its known payload's torque and stack the rows.

    The payload's torque at the kept samples is the filtered regressor columns of its body times
    its parameters (the filter is linear), so ``body`` must be an identified body of the arm. A
    Stribeck velocity, when searched, is searched once on the stacked rows (so are the sigmoid
    shapes, :func:`settle_sigmoid`). The stacked time axis
    puts each run after the previous one. ``gains``: the search's residual is that of the fit
    with the drive-gain columns (:func:`gain_rows`), as :func:`identify_runs` will solve."""
    if target.kind != "arm":
        raise IdentificationError("several runs with known payloads identify the arm; a payload target "
                                  "(--payload-only) takes one run")
    if len(datasets) != len(payloads):
        raise DataError(f"expected one known payload (or null) per run: {len(datasets)} runs, "
                        f"{len(payloads)} payloads")
    if not datasets:
        raise DataError("expected at least one run")
    model = target.model
    parts, runs = [], []
    offset_rows, offset_t = 0, 0.0
    for i, (ds, payload) in enumerate(zip(datasets, payloads, strict=True)):
        if progress is not None:
            progress(f"run {i + 1}/{len(datasets)}: {ds.source or 'data'}, payload "
                     f"{'none' if payload is None else f'{payload.mass:g} kg on {payload.body}'}")
        prep = prepare(ds, target, settings, min_speed=min_speed, progress=progress,
                       stribeck_velocity=stribeck_velocity, search_stribeck=False,
                       sigmoid_shape=sigmoid_shape, search_sigmoid=False)
        known = np.zeros_like(prep.y)
        if payload is not None:
            known = prep.x[..., model.body_slice(payload.body)] @ payload.params
        k = len(prep.t)
        segments = tuple(replace(s, rows=slice(s.rows.start + offset_rows, s.rows.stop + offset_rows))
                         for s in prep.segments)
        t = prep.t - prep.t[0] + offset_t
        parts.append((prep, known, segments, t))
        runs.append({"source": ds.source, "payload": None if payload is None else payload.as_dict(),
                     "rows": [offset_rows, offset_rows + k]})
        offset_rows += k
        offset_t = float(t[-1]) + 1.0 / prep.fs
    first = parts[0][0]
    stack = {name: np.concatenate([getattr(p, name) for p, _, _, _ in parts], axis=0)
             for name in ("q", "dq", "ddq", "x", "mask")}
    measured = np.concatenate([p.y for p, _, _, _ in parts], axis=0)
    y = measured - np.concatenate([known for _, known, _, _ in parts], axis=0)
    prep = replace(first, dataset=replace(first.dataset, truth=bare_truth(first.dataset.truth)),
                   segments=tuple(s for _, _, segs, _ in parts for s in segs),
                   t=np.concatenate([t for _, _, _, t in parts]), y=y, **stack)
    multi = MultiRun(prep, measured, tuple(runs))
    if stribeck_velocity is None and stribeck_searched(target):
        def with_gain_columns(trial: Prepared) -> float:
            w, rhs, _ = gain_rows(replace(multi, prep=trial))
            sol = rla.lstsq(w, rhs)
            return float(np.sqrt(np.mean((rhs - w @ sol) ** 2)))

        prep = settle_stribeck(prep, progress=progress, residual=with_gain_columns if gains else
                               stribeck_residual)
        multi = replace(multi, prep=prep)
    if sigmoid_shape is None and sigmoid_searched(target):
        def gain_columns(trial: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return gain_rows(replace(multi, prep=trial))

        prep = settle_sigmoid(multi.prep, progress=progress, **({"rows": gain_columns} if gains else {}))
        multi = replace(multi, prep=prep)
    return multi


def bare_truth(truth: dict | None) -> dict | None:
    """A simulated run's truth (``sysid simulate``'s truth.json) with its payload taken out of the
    parameters: the arm the runs identify (the payload is merged into its body in the truth)."""
    if not truth or not truth.get("payload") or "parameters" not in truth:
        return truth
    payload = truth["payload"]
    params = dict(truth["parameters"])
    for field, value in zip(BODY_FIELDS, payload["params"], strict=True):
        name = f"{payload['body']}.{field}"
        if name in params:
            params[name] -= value
    return truth | {"parameters": params, "payload": None}


@dataclass(frozen=True)
class DriveGains:
    """Drive gains ``g (n,)`` (true torque = g × logged torque) with standard deviations, the base
    parameters ``beta`` of the same fit, and the condition numbers of the column-scaled rows with
    and without the gain columns."""

    gains: np.ndarray
    std: np.ndarray
    beta: np.ndarray
    condition: float
    condition_without_gains: float

    def as_dict(self, joint_names: Sequence[str]) -> dict:
        return {"gains": {j: float(g) for j, g in zip(joint_names, self.gains, strict=True)},
                "std": {j: float(s) for j, s in zip(joint_names, self.std, strict=True)},
                "condition_number": self.condition,
                "condition_number_without_gains": self.condition_without_gains}


def scaled_condition(w: np.ndarray) -> float:
    """Condition number of ``w`` with unit-norm columns (inf when rank-deficient)."""
    norms = np.linalg.norm(w, axis=0)
    sv = rla.svdvals(w / np.where(norms > 0, norms, 1.0))
    return float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")


def gain_rows(multi: MultiRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``([X_b, −T], rhs, joint)`` of the joint (β, δ) least squares (module docstring)."""
    prep = multi.prep
    n = prep.y.shape[1]
    wb, rhs, joint = prep.rows()
    tau, _, _ = regression_rows(np.eye(n)[None, :, :] * multi.measured[:, :, None], prep.y, prep.mask)
    return np.hstack([wb, -tau]), rhs, joint


def drive_gains(multi: MultiRun) -> DriveGains:
    """Least-squares drive gains and base parameters from the stacked rows (module docstring).

    Raises :class:`IdentificationError` when the runs do not carry at least two different known
    payloads: the gains are then undetermined (a common scale of every parameter is free)."""
    distinct = {None if r["payload"] is None else json.dumps(r["payload"]["params"]) for r in multi.runs}
    if len(distinct) < 2:
        raise IdentificationError(f"drive gains need runs with at least two different known payloads "
                                  f"(one payload, or none, leaves their common scale free); got "
                                  f"{len(multi.runs)} run(s) with {len(distinct)} distinct payload(s)")
    w, rhs, joint = gain_rows(multi)
    r = multi.prep.target.base.rank
    sol = rla.lstsq(w, rhs)
    rank = int(np.sum(rla.svdvals(w) > max(w.shape) * np.finfo(float).eps * rla.svdvals(w)[0]))
    if rank < w.shape[1]:
        raise IdentificationError(f"the drive-gain rows have rank {rank} < {w.shape[1]} unknowns: the "
                                  "payloads do not excite every joint's torque scale")
    n = multi.prep.y.shape[1]
    var = joint_variances(rhs - w @ sol, joint, n, w.shape[1])
    sw = 1.0 / np.sqrt(var[joint])
    cov = rla.pinv((w * sw[:, None]).T @ (w * sw[:, None]))
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    return DriveGains(1.0 + sol[r:], std[r:], sol[:r], scaled_condition(w), scaled_condition(w[:, :r]))


def with_gains(multi: MultiRun, gains: np.ndarray) -> Prepared:
    """The stacked rows with the measured torque scaled by ``gains (n,)`` (payload still subtracted)."""
    prep = multi.prep
    return replace(prep, y=prep.y + (np.asarray(gains) - 1.0)[None, :] * multi.measured)


def identify_runs(multi: MultiRun, options, *, gains: bool = False):
    """Run ``options.method`` (:class:`~sysid_ros.core.batch.identify.IdentifyOptions`) on the
    stacked runs; ``gains``: first fit the drive gains (:func:`drive_gains`) and identify from the
    torque they correct. ``diagnostics.extra`` gains ``runs`` and, with ``gains``, ``drive_gains``.
    Returns ``(result, rows used)`` (the rows with the corrected torque, for the fit figures) and
    the gains ``(n,)`` (ones without ``gains``)."""
    from sysid_ros.core.batch.identify import run_method

    if options.method in ("iv", "pc_iv"):
        raise IdentificationError(f"{options.method} simulates the recorded closed loop of one run; "
                                  "several runs with known payloads take the other methods")
    prep, extra = multi.prep, {"runs": multi.as_dict()}
    scale = np.ones(prep.y.shape[1])
    if gains:
        fit = drive_gains(multi)
        names = prep.dataset.joint_names
        extra["drive_gains"] = fit.as_dict(names)
        line = ("drive gains " + ", ".join(f"{j} {g:.4f} ± {s:.2g}" for j, g, s
                                           in zip(names, fit.gains, fit.std, strict=True))
                + f" (condition {fit.condition:.3g} with, {fit.condition_without_gains:.3g} without)")
        log.info("%s", line)
        if options.progress is not None:
            options.progress(line)
        prep, scale = with_gains(multi, fit.gains), fit.gains
    result = run_method(prep, options)
    result = replace(result, diagnostics=replace(result.diagnostics, extra=result.diagnostics.extra | extra))
    return result, prep, scale
