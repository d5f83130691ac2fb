"""The report's verdict: is an identified model trustworthy, and why (or why not).

Each finding reads one figure of ``result.json`` (and of ``validation.json`` when the suite ran)
and is ``ok``, a ``caution`` or a ``fail``:

* solver — the solver reached an optimal, converged solution (else fail; the rule of ``sysid
  identify``'s exit code 3);
* consistency — the exported parameters are physically consistent (else fail; exit code 3 too);
* plausibility cost — the plausibility bounds raise the torque RMS by at most
  :data:`PLAUSIBILITY_COST_LIMIT` over unconstrained least squares on the regression rows (else
  fail: the exported model explains its own data measurably worse than the data allow);
* precision — base parameters whose standard deviation exceeds their value
  (:func:`~sysid_ros.core.model.base_params.poorly_determined`): a caution, not a failure, since
  the exported parameters take those directions from the prior by design;
* held-out error — relative torque error on the held-out data (``--validate``) at most
  :data:`HELDOUT_LIMIT` (else fail); above twice the identification data's error a caution
  (over-fitting or a change between the runs); no held-out data is a caution;
* validation suite — every check of ``sysid validate`` passed (else fail), when it ran.

Trustworthy: no fail. The headline names the fails, else the cautions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sysid_ros.core.model.base_params import poorly_determined

__all__ = ["HELDOUT_LIMIT", "PLAUSIBILITY_COST_LIMIT", "Finding", "Verdict", "base_precision", "verdict_of"]

#: largest acceptable torque-RMS cost of the plausibility bounds [%]
PLAUSIBILITY_COST_LIMIT = 5.0
#: largest acceptable relative torque error on held-out data [%]
HELDOUT_LIMIT = 20.0

Level = Literal["ok", "caution", "fail"]


@dataclass(frozen=True)
class Finding:
    """One line of the verdict: ``topic``, ``level`` and a sentence with the figure."""

    topic: str
    level: Level
    text: str


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]

    @property
    def trustworthy(self) -> bool:
        return not any(f.level == "fail" for f in self.findings)

    @property
    def level(self) -> Level:
        levels = {f.level for f in self.findings}
        return "fail" if "fail" in levels else "caution" if "caution" in levels else "ok"

    def headline(self) -> str:
        """``TRUSTWORTHY``/``NOT TRUSTWORTHY`` and the topics that decided it."""
        fails = [f.topic for f in self.findings if f.level == "fail"]
        cautions = [f.topic for f in self.findings if f.level == "caution"]
        if fails:
            return f"NOT TRUSTWORTHY: {', '.join(fails)} failed" + (
                f" (cautions: {', '.join(cautions)})" if cautions else "")
        if cautions:
            return f"TRUSTWORTHY, with cautions: {', '.join(cautions)}"
        return "TRUSTWORTHY: every check passed"


def base_precision(result: Mapping[str, Any]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """``(names, values, std, poorly_determined mask)`` of a result.json's base parameters (std
    NaN where unknown)."""
    items = result.get("base_parameters") or {}
    names = list(items)
    values = np.array([float(items[n]["value"]) for n in names])
    std = np.array([np.nan if items[n].get("std") is None else float(items[n]["std"]) for n in names])
    return names, values, std, poorly_determined(values, std)


def verdict_of(result: Mapping[str, Any], validation: Mapping[str, Any] | None = None) -> Verdict:
    """The findings (module docstring) of a ``result.json``'s content and, optionally, of a
    ``validation.json``'s."""
    d = result.get("diagnostics") or {}
    findings = [_solver(d), _consistency(d)]
    cost = (d.get("plausibility") or {}).get("cost_percent")
    if cost is not None:
        level: Level = "ok" if cost <= PLAUSIBILITY_COST_LIMIT else "fail"
        findings.append(Finding("plausibility cost", level,
                                f"the plausibility bounds cost {cost:+.2f} % torque RMS over unconstrained "
                                f"least squares (limit {PLAUSIBILITY_COST_LIMIT:g} %)"))
    findings.append(_precision(result))
    findings.append(_heldout(result))
    if validation is not None:
        checks = validation.get("checks") or []
        failed = [c["name"] for c in checks if not c.get("passed")]
        findings.append(Finding("validation suite", "fail" if failed or not checks else "ok",
                                f"{len(checks) - len(failed)} of {len(checks)} checks passed"
                                + (f"; failed: {', '.join(failed)}" if failed else "")))
    return Verdict(tuple(findings))


def _solver(d: Mapping[str, Any]) -> Finding:
    status, converged = d.get("status", "unknown"), d.get("converged", True)
    ok = status == "optimal" and converged
    return Finding("solver", "ok" if ok else "fail",
                   f"{d.get('solver', 'solver')} ended with status {status}"
                   + ("" if converged else ", not converged"))


def _consistency(d: Mapping[str, Any]) -> Finding:
    cons = d.get("consistency")
    if cons is None:
        return Finding("consistency", "caution", "physical consistency was not checked")
    if cons.get("consistent"):
        return Finding("consistency", "ok", "the exported parameters are physically consistent "
                       "(every pseudo-inertia positive definite, friction and armature ≥ 0)")
    bad = [b for b, v in (cons.get("bodies") or {}).items() if not v.get("consistent")]
    bad += list(cons.get("negative_joint_terms") or [])
    return Finding("consistency", "fail",
                   f"the exported parameters are NOT physically consistent: {', '.join(bad)}")


def _precision(result: Mapping[str, Any]) -> Finding:
    names, values, std, poor = base_precision(result)
    known = np.isfinite(std)
    if not known.any() and not np.isinf(std).any():
        return Finding("precision", "caution",
                       "the method gives no standard deviations of the base parameters")
    rel = 100 * std[known] / np.maximum(np.abs(values[known]), 1e-300)
    median = f"median relative std {np.median(rel):.3g} %; " if rel.size else ""
    if poor.any():
        return Finding("precision", "caution",
                       f"{median}{int(poor.sum())} of {len(names)} base parameters have a standard "
                       "deviation larger than their value: the prior sets them (see Identifiability)")
    return Finding("precision", "ok", f"{median}every base parameter determined by the data")


def _heldout(result: Mapping[str, Any]) -> Finding:
    val = (result.get("validation") or {}).get("relative_error_percent")
    fit = (result.get("fit") or {}).get("relative_error_percent")
    if val is None:
        return Finding("held-out error", "caution", "no held-out data (identify --validate OTHER_RUN)"
                       + ("" if fit is None else f"; identification data {fit:.3g} % relative torque error"))
    text = (f"{val:.3g} % relative torque error on held-out data (limit {HELDOUT_LIMIT:g} %)"
            + (f", {fit:.3g} % on the identification data" if fit is not None else ""))
    if val > HELDOUT_LIMIT:
        return Finding("held-out error", "fail", text)
    if fit is not None and val > 2 * fit:
        return Finding("held-out error", "caution", text + ": more than twice as large")
    return Finding("held-out error", "ok", text)
