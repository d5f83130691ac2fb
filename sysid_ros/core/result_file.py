"""``result.json``: the one owner of the file format (write, load, schema version, migration).

Whoever writes an identification's result (``sysid identify`` and the ``batch_solver`` node through
:func:`~sysid_ros.core.report.files.write_outputs`, the ``estimator`` node's ``~/save``) builds the
document with :meth:`ResultFile.document` and writes it with :meth:`ResultFile.write`; whoever
reads one (the report, ``sysid validate --result``, the collision monitor's ``--result`` /
``result_path``, the estimator's ``prior``) calls :meth:`ResultFile.load` or
:meth:`ResultFile.exported_values`. Nobody else opens the file.

Schema (version :data:`SCHEMA_VERSION`), keys in this order::

    schema_version      2
    method, base_parameters, base, diagnostics, joint_names    (IdentificationResult.as_dict)
    parameters          {name: {"value", "std"}}   the exported standard parameters
    exported_parameters {"from", "values": {name: value}}
    target              {"kind", "body", "model", "prior"[, "joint_term_prior"]}
    fit, validation, truth_comparison, divergence_to_prior     (the evaluation, when there is one)
    provenance          inputs' and model's hashes, command line (the batch writer)
    ...                 the writer's extra keys (an online estimate has none: its counters, options
                        and projection are diagnostics["online"], as a replay's)

Numbers JSON cannot hold (NaN, ±inf) are null (:mod:`sysid_ros.core.json_numbers`, the one number
rule). Older files are read as well and returned migrated to the current schema:

* version 1 — no ``schema_version`` key: ``sysid identify`` and ``batch_solver`` before the field
  was written (the same keys otherwise);
* the ``estimator`` node's former ``~/save`` (also without a version): ``exported_parameters``
  without ``from``, ``std_dev`` by name, no ``parameters`` block, ``target`` a string (``"arm"``
  or the payload's body).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sysid_ros.core.atomic import write_atomic
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import json_number, strict_json
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.result import IdentificationResult

if TYPE_CHECKING:  # (the target module loads the compiled regressor kernels: a type here only)
    from sysid_ros.core.model.target import Target

__all__ = ["NAME", "SCHEMA_VERSION", "ResultFile"]

#: the file's name in a result folder
NAME = "result.json"
#: version of the document :meth:`ResultFile.document` builds (1: the files before the field)
SCHEMA_VERSION = 2


class ResultFile:
    """Build, write and load ``result.json`` (see the module docstring)."""

    @staticmethod
    def document(result: IdentificationResult, target: Target, evaluation: Any = None, *,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The document of ``result`` identified on ``target`` with, when there is one, its
        ``evaluation`` (a :class:`~sysid_ros.core.report.metrics.Evaluation`: fit, validation,
        truth comparison, divergence to the prior) and the writer's ``extra`` keys last, as strict
        JSON types (NaN and ±inf are None)."""
        doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **result.as_dict()}
        doc["target"] = {"kind": target.kind, "body": None if target.body is None
                         else target.model.body_name(target.body), "model": target.model.source}
        doc["target"]["prior"] = dict(zip(target.names, map(float, target.prior), strict=True))
        if target.kind == "arm":  # the joint-term prior the regularisers and the pull leaned on
            first = target.model.n_body_params
            doc["target"]["joint_term_prior"] = dict(zip(target.names[first:],
                                                         map(float, target.prior[first:]), strict=True))
        if evaluation is not None:
            doc["fit"] = evaluation.fit.errors.as_dict()
            if evaluation.validation is not None:
                doc["validation"] = evaluation.validation.errors.as_dict()
            if evaluation.truth is not None:
                doc["truth_comparison"] = evaluation.truth.as_dict()
            doc["divergence_to_prior"] = json_number(evaluation.divergence_to_prior)
        doc.update(extra or {})
        return strict_json(doc)

    @staticmethod
    def dumps(doc: Mapping[str, Any]) -> str:
        """The file's text of ``doc``: indented strict JSON (what ``sysid identify --json`` prints)."""
        return json.dumps(strict_json(doc), indent=2, allow_nan=False)

    @staticmethod
    def write(path: str | os.PathLike[str], doc: Mapping[str, Any]) -> Path:
        """Write ``doc`` (from :meth:`document`) to ``path`` (a ``*.json`` path, or a folder to hold
        ``result.json``) atomically (:func:`~sysid_ros.core.atomic.write_atomic`); returns the
        file's path. Refuses a document of another schema version (a caller's own format)."""
        path = Path(path)
        if path.suffix != ".json":
            path = path / NAME
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise SysIdError(f"{path}: expected a result document of schema version {SCHEMA_VERSION} "
                             f"(ResultFile.document), got version {doc.get('schema_version')!r}")
        return write_atomic(path, ResultFile.dumps(doc) + "\n")

    @staticmethod
    def load(path: str | os.PathLike[str], *,
             what: str = "a result.json of sysid identify") -> dict[str, Any]:
        """The document of ``path`` (a ``result.json``, or a folder holding one), migrated to
        :data:`SCHEMA_VERSION`; :class:`SysIdError` ``"<path>: expected <what>, got ..."`` when it
        cannot be read or is not a JSON object."""
        path = Path(path)
        if path.is_dir():
            path = path / NAME
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SysIdError(f"{path}: expected {what}, got {type(exc).__name__}: {exc}") from None
        if not isinstance(doc, dict):
            raise SysIdError(f"{path}: expected {what} (a JSON object), got {type(doc).__name__}")
        return _migrated(doc, path)

    @staticmethod
    def exported_values(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, float]:
        """``{name: value}`` of the exported standard parameters of a result (a path as in
        :meth:`load`, or a loaded document)."""
        where = "the result" if isinstance(source, Mapping) else str(source)
        try:
            doc = source if isinstance(source, Mapping) else ResultFile.load(source)
            values = doc["exported_parameters"]["values"]
            return {str(k): float(v) for k, v in values.items()}
        except (SysIdError, KeyError, TypeError, AttributeError, ValueError) as exc:
            raise SysIdError(f"expected a result.json with exported_parameters.values, got {where} "
                             f"({type(exc).__name__}: {exc})") from None

    @staticmethod
    def model_parameters(model: RobotModel, source: str | os.PathLike[str] | Mapping[str, Any]) -> np.ndarray:
        """θ ``(p,)`` of ``model`` with a result's exported parameters written over the model's own
        values (names it does not hold keep them): what the collision monitor runs on and an arm
        target's prior from a file. :class:`SysIdError` for a result that holds none of the
        model's parameters (another robot's)."""
        values = ResultFile.exported_values(source)
        known = set(model.param_names)
        unknown = sorted(set(values) - known)
        if unknown and not set(values) & known:
            where = "the result" if isinstance(source, Mapping) else str(source)
            raise SysIdError(f"{where} holds none of the model's parameters (e.g. {unknown[:3]}): "
                             "another robot?")
        return model.from_dict({k: v for k, v in values.items() if k in known})


def _migrated(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """``doc`` in the current schema (see the module docstring for the older forms)."""
    version = doc.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        raise SysIdError(f"{path}: result schema version {version!r} is newer than this sysid_ros "
                         f"reads ({SCHEMA_VERSION}); update sysid_ros")
    if version == SCHEMA_VERSION:
        return doc
    doc = {"schema_version": SCHEMA_VERSION, **{k: v for k, v in doc.items() if k != "schema_version"}}
    exported = doc.get("exported_parameters")
    if "parameters" not in doc and isinstance(exported, Mapping) and isinstance(exported.get("values"),
                                                                                 Mapping):
        # the estimator node's former ~/save: values and std_dev by name, no parameters block
        std = doc.get("std_dev") or {}
        doc["parameters"] = {name: {"value": value, "std": std.get(name)}
                             for name, value in exported["values"].items()}
        doc["exported_parameters"] = {"from": doc.get("method", ""), **exported}
    if isinstance(doc.get("target"), str):  # the former ~/save: "arm" or the payload's body
        body = doc["target"]
        doc["target"] = {"kind": "arm", "body": None} if body == "arm" else {"kind": "payload", "body": body}
    return doc
