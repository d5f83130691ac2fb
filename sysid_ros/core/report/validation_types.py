"""The validation's data: what was simulated (:class:`Truth`), what was identified
(:class:`Identified`), the options (:class:`ValidationOptions`), and what came out
(:class:`CheckResult`, :class:`ValidationReport`). The checks and their runner are in
:mod:`sysid_ros.core.report.validation`."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.batch.identify import METHODS
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import json_number as _num
from sysid_ros.core.model.robot import JOINT_FIELDS, RobotModel
from sysid_ros.core.model.target import Target, batch_target
from sysid_ros.core.result_file import NAME as RESULT_NAME
from sysid_ros.core.result_file import ResultFile
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset, with_payload

log = logging.getLogger(__name__)

#: the seed's acceptance criteria [%]
RECOVERY_LIMIT = 15.0
TORQUE_LIMIT = 3.0
TRACKING_REDUCTION = 40.0
PAYLOAD_LIMIT = 5.0
REPEATABILITY_LIMIT = 10.0
FEEDFORWARD_REDUCTION = 40.0
#: test payload mass / identification payload mass (the seed: identify with 5 kg, test with 8 kg)
PAYLOAD_RATIO = 8.0 / 5.0
#: base parameters carrying at least this share of the held-out torque RMS are scored
SCORED_SHARE = 0.01
#: mass [kg] and CoM [m] (the last link's frame) of the default identification payload
DEFAULT_PAYLOAD_MASS = 0.5
DEFAULT_PAYLOAD_COM = (0.0, 0.0, 0.04)

CHECKS: tuple[str, ...] = ("parameter_recovery", "torque_prediction", "computed_torque_tracking",
                           "payload_generalisation", "repeatability", "feedforward_vs_pd")


# ------------------------------------------------------------------------------------ data types
@dataclass(frozen=True)
class CheckResult:
    """One check: ``figure`` [``unit``] against ``threshold``; ``passed`` when ``figure <
    threshold`` (``below``) or ``figure > threshold``; ``criterion``: what was measured;
    ``details``: JSON-ready figures behind it; ``series``: arrays for the plots (not in JSON)."""

    name: str
    figure: float
    threshold: float
    unit: str
    below: bool
    passed: bool
    criterion: str
    details: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, name: str, figure: float, threshold: float, *, below: bool, criterion: str,
           unit: str = "%", details: dict | None = None, series: dict | None = None) -> CheckResult:
        """A result passed when the (finite) figure is on the right side of the threshold."""
        figure = float(figure)
        ok = math.isfinite(figure) and (figure < threshold if below else figure > threshold)
        return cls(name, figure, threshold, unit, below, ok, criterion, details or {}, series or {})

    @classmethod
    def failed(cls, name: str, threshold: float, *, below: bool, reason: str) -> CheckResult:
        """A check that could not be run (``reason``): FAIL, figure NaN."""
        return cls(name, math.nan, threshold, "%", below, False, reason, {"error": reason})

    def line(self) -> str:
        """``PASS  name  figure (< threshold): criterion``."""
        sign = "<" if self.below else ">"
        figure = "n/a" if math.isnan(self.figure) else f"{self.figure:.3g} {self.unit}"
        return (f"{'PASS' if self.passed else 'FAIL'}  {self.name:<25} {figure:>10}  "
                f"({sign} {self.threshold:g} {self.unit})  {self.criterion}")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "figure": _num(self.figure),
                "threshold": self.threshold, "unit": self.unit,
                "comparison": "<" if self.below else ">", "criterion": self.criterion,
                "details": self.details}


@dataclass(frozen=True)
class Truth:
    """The simulated real robot: ``model`` (its parameters are the truth; every joint term) and
    the ``payload`` it carried while the validated result was identified (``None``: none)."""

    model: RobotModel
    payload: Payload | None = None
    source: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, payload: Payload | None = None) -> Truth:
        """From an MJCF/URDF of the true robot, or a ``truth.json`` of ``sysid simulate`` (its
        ``model`` file with its ``parameters`` and ``payload``). ``payload`` replaces the file's."""
        path = Path(path)
        if path.suffix.lower() == ".json":
            try:
                doc = json.loads(path.read_text())
                model = RobotModel.load(str(doc["model"]))
                file_payload = _payload_from_doc(doc.get("payload"))
                params = {k: float(v) for k, v in doc["parameters"].items()}
            except (OSError, ValueError, KeyError, TypeError, SysIdError) as exc:
                raise SysIdError(f"{path}: expected a truth.json of 'sysid simulate' (model, parameters, "
                                 f"payload), got {type(exc).__name__}: {exc}") from None
            truth = cls(model, file_payload, str(path))
            expected = model.as_dict(truth.theta(model))
            off = [k for k, v in params.items() if k in expected and not math.isclose(
                v, expected[k], rel_tol=1e-9, abs_tol=1e-12)]
            if off:
                raise SysIdError(f"{path}: its parameters differ from its model file {doc['model']} with "
                                 f"its payload ({', '.join(off[:4])}): give the true robot as an MJCF")
            return truth if payload is None else truth.carrying(payload)
        return cls(RobotModel.load(str(path)), payload, str(path))

    @property
    def mj(self):
        """The simulated ``MjModel`` (the payload welded on)."""
        return self.model.mj if self.payload is None else _payload_mj(self.model, self.payload)

    def carrying(self, payload: Payload | None) -> Truth:
        """The same robot carrying ``payload`` instead."""
        return replace(self, payload=payload)

    def theta(self, layout: RobotModel) -> np.ndarray:
        """The true parameters in ``layout``'s vector (by name; the payload merged into its body;
        parameters the truth does not name keep ``layout``'s nominal values)."""
        values = self.model.as_dict(self.model.nominal)
        theta = layout.from_dict({k: v for k, v in values.items() if k in set(layout.param_names)})
        if self.payload is not None:
            theta[layout.body_slice(self.payload.body)] += self.payload.params
        return theta

    def simulate(self, *, duration: float, seed: int, torque_noise: float = 0.0) -> Dataset:
        """An excitation run of the truth (trajectory and noise drawn from ``seed``)."""
        sensor = SensorModel(torque_noise=torque_noise, seed=seed) if torque_noise else None
        return simulate_dataset(self.model, duration=duration, seed=seed, sensor=sensor, payload=self.payload)


@dataclass(frozen=True)
class Identified:
    """An identified arm: ``theta`` in ``target``'s layout (the nominal robot's model with the
    result's joint terms), the ``method`` that produced it and where it came from."""

    target: Target
    theta: np.ndarray
    method: str
    source: str = ""

    @property
    def model(self) -> RobotModel:
        return self.target.model

    @classmethod
    def from_result(cls, result: str | os.PathLike[str], model: str | os.PathLike[str]) -> Identified:
        """From a ``result.json`` of ``sysid identify`` (an arm target) and the model it was
        identified with; the joint terms are the result's."""
        path = Path(result)
        if path.is_dir():
            path = path / RESULT_NAME
        doc = ResultFile.load(path, what="a result.json of 'sysid identify' with 'parameters'")
        try:
            params = {name: float(item["value"] if isinstance(item, Mapping) else item)
                      for name, item in doc["parameters"].items()}
            method = str(doc.get("method", ""))
            kind = (doc.get("target") or {}).get("kind", "arm")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SysIdError(f"{path}: expected a result.json of 'sysid identify' with 'parameters', "
                             f"got {type(exc).__name__}: {exc}") from None
        if kind != "arm":
            raise SysIdError(f"{path}: the suite validates arm results, got a {kind} result "
                             f"(identified on {doc['target'].get('body')!r})")
        terms = tuple(t for t in JOINT_FIELDS if any(n.endswith(f".{t}") for n in params))
        robot = RobotModel.load(str(model), joint_terms=terms)
        if tuple(params) != robot.param_names:
            missing = [n for n in robot.param_names if n not in params][:4]
            extra = [n for n in params if n not in set(robot.param_names)][:4]
            raise SysIdError(f"{path}: its parameters do not match {model} with joint terms "
                             f"{list(terms)} (expected {robot.n_params} names in the model's order; "
                             f"missing {missing}, unknown {extra}, got {len(params)})")
        theta = np.array([params[n] for n in robot.param_names])
        return cls(batch_target(robot), theta, method, str(path))


@dataclass(frozen=True)
class ValidationOptions:
    """Sizes of the suite's simulations (durations [s] at the model's time step).

    ``duration``: one identification experiment (own identification, repeatability);
    ``heldout_duration``: the held-out trajectories (torque prediction, payload, the scored
    shares); ``tracking_duration``: each closed-loop run; ``experiments``: repeatability's
    count; ``bandwidth_hz``: the tracking loops' bandwidth; ``torque_noise`` [N·m]: the
    identification experiments' torque sensor noise; ``method``: repeatability's method (default
    the result's); ``seed``: every draw derives from it.
    """

    seed: int = 0
    duration: float = 20.0
    heldout_duration: float = 10.0
    tracking_duration: float = 10.0
    experiments: int = 10
    bandwidth_hz: float = 2.0
    torque_noise: float = 0.05
    method: str = ""

    def __post_init__(self) -> None:
        for name in ("duration", "heldout_duration", "tracking_duration", "bandwidth_hz"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise SysIdError(f"{name} must be a finite number > 0, got {value}")
        if not (math.isfinite(self.torque_noise) and self.torque_noise >= 0):
            raise SysIdError(f"torque_noise must be a finite number >= 0 N·m, got {self.torque_noise}")
        if self.experiments < 2:
            raise SysIdError(f"repeatability needs at least 2 experiments, got {self.experiments}")
        if self.method and self.method not in METHODS:
            raise SysIdError(f"unknown method {self.method!r}; expected one of {list(METHODS)}")

    @classmethod
    def quick(cls, **changes) -> ValidationOptions:
        """Short runs for tests: 12 s experiments, 5 s held-out and tracking runs, 3 experiments
        (the wrist's inertia needs about 12 s of the default excitation)."""
        values = {"duration": 12.0, "heldout_duration": 5.0, "tracking_duration": 5.0, "experiments": 3}
        return cls(**(values | changes))


@dataclass(frozen=True)
class ValidationReport:
    """The checks run, in :data:`CHECKS` order, and what was validated against what."""

    checks: tuple[CheckResult, ...]
    identified: Identified
    truth: Truth
    options: ValidationOptions

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def lines(self) -> list[str]:
        return [c.line() for c in self.checks]

    def as_dict(self) -> dict[str, Any]:
        payload = self.truth.payload
        return {
            "passed": self.passed,
            "checks": [c.as_dict() for c in self.checks],
            "result": {"source": self.identified.source, "method": self.identified.method,
                       "model": self.identified.model.source,
                       "joint_terms": list(self.identified.model.joint_terms)},
            "truth": {"source": self.truth.source, "payload": None if payload is None else payload.as_dict()},
            "options": {k: getattr(self.options, k) for k in self.options.__dataclass_fields__},
        }


def _payload_mj(model: RobotModel, payload: Payload):
    return with_payload(model, payload)


def _payload_from_doc(doc: Mapping[str, Any] | None) -> Payload | None:
    if not doc:
        return None
    return Payload(str(doc["body"]), float(doc["mass"]), np.asarray(doc["com"], dtype=float),
                   np.asarray(doc["inertia"], dtype=float))


