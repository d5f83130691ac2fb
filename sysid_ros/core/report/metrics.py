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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import json_number as _num
from sysid_ros.core.torque_errors import TorqueErrors, ncc, shifted_ncc, torque_errors

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
    "shifted_ncc",
    "torque_errors",
    "truth_parameters",
]

#: base parameters whose true magnitude is below this are scored by absolute error only
NEGLIGIBLE = 1e-6


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
