"""Figures of merit, each defined once: torque-prediction errors, base-parameter errors against a
truth, and the truth itself decoded from a bag or dataset.

Every user (result diagnostics, result files, the offline pipeline, the demo, the benchmarks)
calls these; none computes its own variant.

* :func:`torque_errors` — measured vs predicted torque ``r = τ − τ̂`` on the rows used:
  per-joint RMSE ``√mean(r_j²)`` [N·m], pooled RMS ``√mean(r²)`` over every row of every joint
  [N·m], relative error ``100 ‖r‖ / ‖τ‖`` [%] (also per joint), and the normalised
  cross-correlation (Pearson, zero lag) per joint.
* :func:`base_parameter_errors` — ``100 |β̂ − β| / |β|`` [%] per base parameter whose true
  magnitude is not negligible (``|β| ≥ max(atol, rtol·max|β|)``; NaN elsewhere), and ``|β̂ − β|``.
* :func:`truth_parameters` — the true parameter vector of a target from a truth document
  (``truth.json`` of a simulated bag, ``Dataset.truth``).
* :func:`evaluate` — all of the above for one result on prepared data (what the result files
  report), computed by the caller and handed to the writer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sysid_ros.core.errors import SysIdError

if TYPE_CHECKING:
    from sysid_ros.core.batch.identify import Prepared
    from sysid_ros.core.data.dataset import Dataset
    from sysid_ros.core.model.target import Target
    from sysid_ros.core.result import IdentificationResult

__all__ = [
    "NEGLIGIBLE",
    "BaseErrors",
    "Evaluation",
    "TorqueErrors",
    "TorqueFit",
    "TruthComparison",
    "base_parameter_errors",
    "compare_to_truth",
    "evaluate",
    "heldout_torque",
    "ncc",
    "predict_torque",
    "torque_errors",
    "truth_parameters",
]

#: base parameters whose true magnitude is below this are scored by absolute error only
NEGLIGIBLE = 1e-6


# ------------------------------------------------------------------------------- torque errors
def ncc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Normalised cross-correlation (Pearson, zero lag) of the columns of ``a``, ``b`` ``(N, n)``:
    ``(n,)``, NaN for a column without variation."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    den = np.sqrt((a * a).sum(axis=0) * (b * b).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(axis=0) / np.where(den > 0, den, 1.0), np.nan)


def shifted_ncc(a: np.ndarray, b: np.ndarray, max_shift: int) -> np.ndarray:
    """The dual-metric seed's score (§IV): per column, the largest :func:`ncc` of ``a`` shifted
    against ``b`` ``(N, n)`` by s samples, |s| ≤ ``max_shift`` (the seed: ±5° of the slowest
    motion's period), each shift on the overlapping N − |s| rows: ``(n,)``, NaN for a column
    without variation at every shift."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"shifted_ncc expects two (N, n) arrays of one shape, got {a.shape} and {b.shape}")
    shift = int(max_shift)
    if not 0 <= shift < a.shape[0] - 1:
        raise ValueError(f"shifted_ncc expects 0 <= max_shift < N - 1 = {a.shape[0] - 1}, got {max_shift}")
    scores = [ncc(a[max(s, 0):a.shape[0] + min(s, 0)], b[max(-s, 0):b.shape[0] + min(-s, 0)])
              for s in range(-shift, shift + 1)]
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
        return np.nanmax(np.array(scores), axis=0)


@dataclass(frozen=True)
class TorqueErrors:
    """Torque prediction errors on ``n_rows`` rows (see the module docstring).

    ``rmse (n,)`` [N·m] and ``relative_joint (n,)`` [%], ``ncc (n,)``: per joint, NaN for a joint
    without rows; ``rms`` [N·m]: pooled over every row; ``relative`` [%]: ``100 ‖r‖ / ‖τ‖``.
    """

    rmse: np.ndarray
    rms: float
    relative: float
    relative_joint: np.ndarray
    ncc: np.ndarray
    n_rows: int

    @classmethod
    def unknown(cls, n_joints: int, *, rms: float = math.nan, n_rows: int = 0) -> TorqueErrors:
        """Figures that were not measured (NaN), except a pooled ``rms`` known otherwise."""
        nan = np.full(n_joints, np.nan)
        return cls(nan, float(rms), math.nan, nan.copy(), nan.copy(), int(n_rows))

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``torque_rmse``, ``ncc`` (per joint, null where unknown),
        ``relative_error_percent``, ``residual_rms`` (pooled)."""
        return {"torque_rmse": _list(self.rmse), "ncc": _list(self.ncc),
                "relative_error_percent": _num(self.relative), "residual_rms": _num(self.rms),
                "relative_error_joint_percent": _list(self.relative_joint), "rows": self.n_rows}


def torque_errors(measured: np.ndarray, predicted: np.ndarray, *, mask: np.ndarray | None = None,
                  joint: np.ndarray | None = None, n_joints: int | None = None) -> TorqueErrors:
    """Errors of ``predicted`` against ``measured`` torques.

    Either ``(N, n)`` arrays (``mask (N, n)`` selects the rows used, default all) or stacked
    regression rows ``(m,)`` with ``joint (m,)`` the joint of each row and ``n_joints``.
    """
    measured = np.asarray(measured, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    if measured.shape != predicted.shape:
        raise SysIdError(f"measured and predicted torques differ in shape: {measured.shape} vs "
                         f"{predicted.shape}")
    if joint is None:
        if measured.ndim != 2:
            raise SysIdError(f"expected torques of shape (N, n), got {measured.shape}")
        n_joints = measured.shape[1]
        sel = np.ones(measured.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        joint = np.broadcast_to(np.arange(n_joints), measured.shape)[sel]
        measured, predicted = measured[sel], predicted[sel]
    elif n_joints is None:
        raise SysIdError("torque_errors on stacked rows needs n_joints")
    resid = measured - predicted
    rmse, rel_j, corr = (np.full(n_joints, np.nan) for _ in range(3))
    for j in range(n_joints):
        sel = joint == j
        if np.any(sel):
            rmse[j] = np.sqrt(np.mean(resid[sel] ** 2))
            rel_j[j] = 100.0 * np.linalg.norm(resid[sel]) / max(np.linalg.norm(measured[sel]), 1e-300)
            corr[j] = ncc(measured[sel, None], predicted[sel, None])[0]
    rms = float(np.sqrt(np.mean(resid**2))) if resid.size else math.nan
    rel = float(100.0 * np.linalg.norm(resid) / max(np.linalg.norm(measured), 1e-300))
    return TorqueErrors(rmse, rms, rel, rel_j, corr, int(resid.size))


@dataclass(frozen=True)
class TorqueFit:
    """Measured and predicted torques ``(N, n)`` [N·m] at times ``t (N,)`` [s], and their errors
    (on every sample, see :func:`predict_torque`)."""

    t: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    errors: TorqueErrors


def predict_torque(result: IdentificationResult, prep: Prepared) -> TorqueFit:
    """Torque predicted by what ``result`` exports (the base parameters Bθ of its standard
    parameters; β when it exports none) on prepared data (its regressor, filtered and decimated
    like the torques), scored on every kept sample of every joint: the same rows whatever the
    method and the friction terms (the regression itself leaves out slow joints' rows when it
    identifies Coulomb friction, ``prep.mask``)."""
    beta = result.beta if result.parameters is None else result.base.of(result.parameters.values)
    predicted = result.base.columns(prep.x) @ beta
    return TorqueFit(prep.t, prep.y, predicted, torque_errors(prep.y, predicted))


def heldout_torque(target: Target, dataset: Dataset, theta: Sequence[float]) -> TorqueFit:
    """Torque predicted with the target's parameters ``theta`` on a held-out simulated
    ``dataset`` (its true motion ``meta["q_true"|"dq_true"|"ddq_true"]``), scored on every sample."""
    ddq = dataset.meta.get("ddq_true") if dataset.meta else None
    if ddq is None:
        raise SysIdError("the held-out dataset needs accelerations (meta['ddq_true'])")
    q = dataset.meta.get("q_true", dataset.q)
    dq = dataset.meta.get("dq_true", dataset.dq)
    y, known = target.regressor(q, dq, ddq)
    predicted = y @ np.asarray(theta, dtype=float) + known
    return TorqueFit(dataset.t, dataset.tau, predicted, torque_errors(dataset.tau, predicted))


# ------------------------------------------------------------------------------ base errors
@dataclass(frozen=True)
class BaseErrors:
    """Estimated vs true base parameters: ``relative`` [%] (NaN where the truth is negligible)
    and ``absolute`` errors, per base parameter ``names``."""

    names: tuple[str, ...]
    true: np.ndarray
    estimated: np.ndarray
    relative: np.ndarray
    absolute: np.ndarray

    @property
    def max_relative(self) -> float:
        """Largest relative error [%] (NaN when every truth is negligible)."""
        return float(np.nanmax(self.relative)) if np.any(np.isfinite(self.relative)) else math.nan

    @property
    def median_relative(self) -> float:
        return float(np.nanmedian(self.relative)) if np.any(np.isfinite(self.relative)) else math.nan

    def as_dict(self) -> dict[str, dict[str, float | None]]:
        return {n: {"true": float(t), "estimated": float(e), "relative_error_percent": _num(r),
                    "absolute_error": float(a)}
                for n, t, e, r, a in zip(self.names, self.true, self.estimated, self.relative,
                                         self.absolute, strict=True)}


def base_parameter_errors(estimated: Sequence[float], true: Sequence[float], *,
                          names: Sequence[str] = (), atol: float = NEGLIGIBLE, rtol: float = 0.0
                          ) -> BaseErrors:
    """Errors of estimated base parameters ``β̂ (r,)`` against the true ``β (r,)``.

    Relative errors ``100 |β̂ − β| / |β|`` [%] where ``|β| ≥ max(atol, rtol · max|β|)``, NaN for
    the others (negligible: no meaningful relative error; see ``absolute``).
    """
    est = np.asarray(estimated, dtype=float)
    tru = np.asarray(true, dtype=float)
    if est.shape != tru.shape:
        raise SysIdError(f"estimated and true base parameters differ in shape: {est.shape} vs {tru.shape}")
    err = np.abs(est - tru)
    floor = max(atol, rtol * float(np.max(np.abs(tru), initial=0.0)))
    big = np.abs(tru) >= floor
    rel = np.full_like(err, np.nan)
    rel[big] = 100.0 * err[big] / np.abs(tru[big])
    names = tuple(names) or tuple(f"beta{i}" for i in range(len(est)))
    return BaseErrors(names, tru, est, rel, err)


# ------------------------------------------------------------------------------------ truth
def truth_parameters(truth: Mapping[str, Any] | None, target: Target) -> np.ndarray | None:
    """The true parameters ``θ (p,)`` of ``target`` from a truth document, or ``None``.

    The document is a simulated bag's ``truth.json`` (``Dataset.truth``): ``parameters`` (name →
    value, the payload merged into its body) for an arm target, ``payload.params`` (10 values) for
    a payload target. Arm parameters the document does not name keep the model's nominal values
    (e.g. joint terms the simulator does not have).
    """
    truth = truth or {}
    if target.kind == "payload":
        payload = truth.get("payload")
        return None if not payload else np.asarray(payload["params"], dtype=float)
    params = truth.get("parameters")
    if not params:
        return None
    known = set(target.model.param_names)
    return target.model.from_dict({k: v for k, v in params.items() if k in known})


@dataclass(frozen=True)
class TruthComparison:
    """A result against the truth: base-parameter errors and the log-det divergence of the
    exported parameters from the true ones (NaN when undefined)."""

    base: BaseErrors
    divergence: float

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"base": self.base.as_dict()}
        if not math.isnan(self.divergence):
            out["divergence_to_truth"] = self.divergence
        return out


def compare_to_truth(result: IdentificationResult, target: Target, theta_true: np.ndarray
                     ) -> TruthComparison:
    """Base-parameter errors of ``result`` against ``theta_true`` and the divergence of its
    exported parameters from it (NaN without exported parameters or if the truth itself is not
    physically consistent)."""
    beta_true = target.base.of(theta_true)
    errors = base_parameter_errors(result.beta, beta_true, names=result.base.names)
    divergence = (target.divergence(result.parameters.values, theta_true)
                  if result.parameters is not None else math.nan)
    return TruthComparison(errors, float(divergence))


# ------------------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class Evaluation:
    """What the result files report about one result besides the result itself: the torque fit
    on the identification data, on validation data, the comparison with a recorded truth and the
    divergence of the exported parameters from the target's prior."""

    fit: TorqueFit
    validation: TorqueFit | None
    truth: TruthComparison | None
    divergence_to_prior: float

    @property
    def divergence_to_truth(self) -> float:
        return self.truth.divergence if self.truth is not None else math.nan


def evaluate(result: IdentificationResult, prep: Prepared, *, validation: Prepared | None = None
             ) -> Evaluation:
    """Evaluate ``result`` on its prepared data (``prep``, whose dataset may carry a truth) and on
    optional ``validation`` data prepared alike."""
    target = prep.target
    theta_true = truth_parameters(prep.dataset.truth, target)
    truth = compare_to_truth(result, target, theta_true) if theta_true is not None else None
    prior = (target.divergence(result.parameters.values, target.prior)
             if result.parameters is not None else math.nan)
    return Evaluation(predict_torque(result, prep),
                      predict_torque(result, validation) if validation is not None else None,
                      truth, float(prior))


def _num(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def _list(a: np.ndarray) -> list[float | None]:
    return [_num(v) for v in a]
