"""Identification results as data: parameters with their standard deviations, the solver's status,
the physical-consistency report of the exported parameters and the fit's diagnostics.

An :class:`IdentificationResult` is what every method returns (batch and online); the result
files (``report.files``), the ``ParameterEstimate`` message (``nodes.conversions``) and the CLI
read it and nothing else. ``parameters`` is the exported standard vector: what ``result.json``,
``identified.xml`` and the message say was identified.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import json_number as _num
from sysid_ros.core.json_numbers import json_numbers as _list
from sysid_ros.core.model.base_params import BaseParameters
from sysid_ros.core.model.consistency import BodyConsistency, ConsistencyReport
from sysid_ros.core.torque_errors import TorqueErrors, torque_errors

if TYPE_CHECKING:
    from sysid_ros.core.model.target import Target

__all__ = ["Diagnostics", "IdentificationResult", "ParameterSet", "SolverStatus", "consistency_of",
           "diagnostics_for", "estimate_result", "target_label"]


@dataclass(frozen=True)
class ParameterSet:
    """Named parameter values with standard deviations (SI units).

    ``names (p,)`` as in ``ParameterEstimate.msg`` (``"<body>.<field>"``, ``"<joint>.<term>"``,
    ``"payload.<field>"``, or base-parameter expressions), ``values (p,)``, ``std (p,)`` (NaN
    where unknown). ``blocks``: the contiguous groups of one body or joint (the name before the
    last dot). JSON round trip: ``ParameterSet.from_dict(ps.to_dict()) == ps``.
    """

    names: tuple[str, ...]
    values: np.ndarray
    std: np.ndarray

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        values = np.array(self.values, dtype=float).reshape(-1)
        std = (np.full(values.shape, np.nan) if self.std is None
               else np.array(self.std, dtype=float).reshape(-1))
        if not len(names) == values.size == std.size:
            raise SysIdError(f"expected as many names, values and std; got {len(names)}, "
                             f"{values.size}, {std.size}")
        if len(set(names)) != len(names):
            raise SysIdError(f"parameter names must be unique, got {list(names)}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "std", std)

    @classmethod
    def of(cls, names: Sequence[str], values: Sequence[float],
           std: Sequence[float] | None = None) -> ParameterSet:
        """From names and values; ``std`` NaN when not given."""
        return cls(tuple(names), np.asarray(values, dtype=float), None if std is None else np.asarray(std))

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, name: str) -> float:
        try:
            return float(self.values[self.names.index(name)])
        except ValueError:
            raise KeyError(name) from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ParameterSet):
            return NotImplemented
        return (self.names == other.names and np.array_equal(self.values, other.values)
                and np.array_equal(self.std, other.std, equal_nan=True))

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside

    @property
    def blocks(self) -> dict[str, slice]:
        """``{body or joint: slice}`` of consecutive names sharing the prefix before the last dot
        (one block per body's 10 inertial parameters, per joint's terms, ``payload``)."""
        out: dict[str, slice] = {}
        start = 0
        for i in range(1, len(self.names) + 1):
            if i == len(self.names) or _prefix(self.names[i]) != _prefix(self.names[start]):
                out[_prefix(self.names[start])] = slice(start, i)
                start = i
        return out

    def to_dict(self) -> dict[str, dict[str, float | None]]:
        """``{name: {"value": v, "std": s or None}}`` in order (JSON types)."""
        return {n: {"value": float(v), "std": _num(s)}
                for n, v, s in zip(self.names, self.values, self.std, strict=True)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ParameterSet:
        """Inverse of :meth:`to_dict`; also takes ``{name: value}``."""
        names, values, std = [], [], []
        for name, item in doc.items():
            names.append(name)
            if isinstance(item, Mapping):
                values.append(float(item["value"]))
                std.append(math.nan if item.get("std") is None else float(item["std"]))
            else:
                values.append(float(item))
                std.append(math.nan)
        return cls(tuple(names), np.array(values), np.array(std))


@dataclass(frozen=True)
class SolverStatus:
    """How an estimate was computed.

    ``solver``: ``"lstsq"`` (closed-form least squares), a conic solver (``"CLARABEL"``,
    ``"SCS"``) or an online estimator (``"rls"``, ``"rls_logdet"``); ``status``: ``"optimal"`` or
    the solver's own (e.g. ``"optimal_inaccurate"``); ``objective`` of a convex program (NaN
    otherwise); ``binding_constraints``: constraints at their boundary with a non-zero multiplier
    (they shape the estimate); ``iterations``/``converged``: of iterative methods (IV, eq. 46),
    ``None``/``True`` for the others.
    """

    solver: str = "lstsq"
    status: str = "optimal"
    objective: float = math.nan
    binding_constraints: tuple[str, ...] = ()
    iterations: int | None = None
    converged: bool = True

    @property
    def optimal(self) -> bool:
        """Solved to optimality and converged."""
        return self.status == "optimal" and self.converged

    def as_dict(self) -> dict[str, Any]:
        return {"solver": self.solver, "status": self.status, "objective": _num(self.objective),
                "binding_constraints": list(self.binding_constraints),
                "iterations": self.iterations, "converged": self.converged}


@dataclass(frozen=True)
class Diagnostics:
    """Quality figures of a fit (SI units).

    ``rank``/``condition_number``: of the (weighted) base regressor actually solved, columns
    scaled to unit norm; ``fit``: torque errors of the estimate on the rows it was fitted to
    (:func:`~sysid_ros.core.torque_errors.torque_errors`; an online estimate has only the pooled
    ``fit.rms`` of its a-priori residuals); ``n_samples``/``n_rows``: samples and regression rows
    used; ``solve_time`` [s]; ``extra``: method-specific figures (weights, regularisation,
    IV iteration history, online counters), written to ``result.json`` as they are.
    """

    rank: int
    condition_number: float
    fit: TorqueErrors
    n_samples: int
    n_rows: int
    solve_time: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def relative_error(self) -> float:
        """``100 ‖y − Xβ‖ / ‖y‖`` on the fitted rows [%]."""
        return self.fit.relative

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "condition_number": self.condition_number,
            "residual_rms": _list(self.fit.rmse),
            "residual_rms_total": _num(self.fit.rms),
            "relative_error_percent": _num(self.fit.relative),
            "ncc": _list(self.fit.ncc),
            "n_samples": self.n_samples,
            "n_rows": self.n_rows,
            "solve_time_s": self.solve_time,
            **self.extra,
        }


@dataclass(frozen=True)
class IdentificationResult:
    """An estimate: base parameters ``beta (r,)`` with ``beta_std (r,)`` always; ``parameters``:
    the exported standard parameters (the method's own θ, or a physically consistent θ
    reproducing β for base-parameter methods, see ``parameters_from``; ``None`` only from the
    low-level least-squares functions); ``consistency``: of ``parameters``; ``solver``: how it
    was computed; ``target``: ``"arm"`` or the payload's body.
    """

    method: str
    base: BaseParameters
    beta: np.ndarray
    beta_std: np.ndarray
    diagnostics: Diagnostics
    parameters: ParameterSet | None = None
    consistency: ConsistencyReport | None = None
    solver: SolverStatus = field(default_factory=SolverStatus)
    parameters_from: str = ""
    target: str = "arm"
    joint_names: tuple[str, ...] = ()

    @property
    def base_parameters(self) -> ParameterSet:
        return ParameterSet(self.base.names, self.beta, self.beta_std)

    @property
    def consistent(self) -> bool:
        """The exported parameters are physically consistent (False without them)."""
        return self.consistency is not None and self.consistency.consistent

    def non_finite(self) -> list[str]:
        """Names of the figures that are not finite: base parameters, exported parameters, the
        fit's relative error. A result with any is no answer (callers refuse it)."""
        bad = [n for n, v in zip(self.base.names, self.beta, strict=True) if not math.isfinite(v)]
        if self.parameters is not None:
            bad += [n for n, v in zip(self.parameters.names, self.parameters.values, strict=True)
                    if not math.isfinite(v)]
        if self.diagnostics.n_rows and not math.isfinite(self.diagnostics.relative_error):
            bad.append("relative error")
        return bad

    def as_dict(self) -> dict[str, Any]:
        diagnostics = self.diagnostics.as_dict() | self.solver.as_dict()
        if self.consistency is not None:
            diagnostics["consistency"] = self.consistency.as_dict()
        out: dict[str, Any] = {
            "method": self.method,
            "base_parameters": self.base_parameters.to_dict(),
            "base": self.base.as_dict(),
            "diagnostics": diagnostics,
            "joint_names": list(self.joint_names),
        }
        if self.parameters is not None:
            out["parameters"] = self.parameters.to_dict()
            out["exported_parameters"] = {
                "from": self.parameters_from or self.method,
                "values": dict(zip(self.parameters.names, map(float, self.parameters.values), strict=True))}
        return out


def target_label(target: Target) -> str:
    """``"arm"``, or the body a payload target is attached to (``ParameterEstimate.target``)."""
    return "arm" if target.kind == "arm" else target.model.body_name(target.body)


def consistency_of(target: Target, theta: np.ndarray) -> ConsistencyReport:
    """:meth:`Target.consistency` as a :class:`ConsistencyReport`."""
    doc = target.consistency(theta)
    return ConsistencyReport(
        tuple(BodyConsistency(name, float(b["min_eigenvalue"]), bool(b["consistent"]))
              for name, b in doc["bodies"].items()),
        tuple(doc["negative_joint_terms"]))


def diagnostics_for(w: np.ndarray, rhs: np.ndarray, joint: np.ndarray, beta: np.ndarray, *,
                    n_joints: int, n_samples: int, solve_time: float,
                    extra: dict[str, Any] | None = None) -> Diagnostics:
    """Diagnostics of base parameters ``beta`` on regression rows ``w (m, r)``, ``rhs (m,)`` of
    joints ``joint (m,)``."""
    scale = np.linalg.norm(w, axis=0)
    ws = w / np.where(scale > 0, scale, 1.0)
    sv = rla.svdvals(ws)
    rank = int(np.sum(sv > 1e-10 * sv[0])) if sv.size else 0
    return Diagnostics(rank=rank, condition_number=float(sv[0] / sv[rank - 1]) if rank else float("inf"),
                       fit=torque_errors(rhs, w @ beta, joint=joint, n_joints=n_joints),
                       n_samples=int(n_samples), n_rows=int(w.shape[0]), solve_time=float(solve_time),
                       extra=dict(extra or {}))


def estimate_result(target: Target, theta: np.ndarray, *, method: str, std: np.ndarray | None = None,
                    rank: int = 0, condition_number: float = math.nan, residual_rms: float = math.nan,
                    n_samples: int = 0, solve_time: float = 0.0, solver: SolverStatus | None = None,
                    joint_names: tuple[str, ...] = (), extra: dict[str, Any] | None = None
                    ) -> IdentificationResult:
    """A result from a standard-parameter estimate known without its regression rows (an online
    estimator's current state): ``theta (p,)`` and ``std (p,)`` in the target's layout, the rank
    and condition number of its information, ``residual_rms`` [N·m] of its residuals."""
    theta = np.asarray(theta, dtype=float)
    base = target.base
    diag = Diagnostics(rank=int(rank), condition_number=float(condition_number),
                       fit=TorqueErrors.unknown(len(joint_names) or target.model.nv, rms=residual_rms),
                       n_samples=int(n_samples), n_rows=0, solve_time=float(solve_time),
                       extra=dict(extra or {}))
    return IdentificationResult(
        method, base, base.of(theta), np.full(base.rank, np.nan), diag,
        parameters=ParameterSet(target.names, theta, std), consistency=consistency_of(target, theta),
        solver=solver or SolverStatus(solver=method), parameters_from=method,
        target=target_label(target), joint_names=joint_names)


def _prefix(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else name
