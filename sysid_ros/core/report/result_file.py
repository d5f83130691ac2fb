"""``result.json``: the one owner of the file format (write, load, schema version, migration).

Whoever writes an identification's result (``sysid identify``, the ``batch_solver`` node, the
``estimator`` node's ``~/save``) builds the document with :meth:`ResultFile.document` and writes it
with :meth:`ResultFile.write`; whoever reads one (the estimator's ``prior``, the collision
monitor's ``result_path``/``--result``, ``sysid validate --result``) calls :meth:`ResultFile.load`
(or :meth:`ResultFile.exported_values`). Nobody else opens the file.

Schema (version :data:`SCHEMA_VERSION`), keys in this order::

    schema_version    2
    method, base_parameters, base, diagnostics, joint_names    (IdentificationResult.as_dict)
    parameters        {name: {"value", "std"}}   the exported standard parameters
    exported_parameters {"from", "values": {name: value}}
    target            {"kind", "body", "model"[, "joint_term_prior"]}
    fit, validation, truth_comparison, divergence_to_prior     (the evaluation, when there is one)
    ...               the writer's extra keys (an online estimate: samples, counters, options, ...)

Numbers JSON cannot hold (NaN, ±inf) are null (:mod:`sysid_ros.core.json_numbers`). Older files
are read as well: version 1 (no ``schema_version``: ``sysid identify`` and ``batch_solver``
before the version was written, the same keys) and the estimator node's former ``~/save`` format
(``exported_parameters`` and ``std_dev`` without ``parameters``); :meth:`ResultFile.load` returns
them migrated to the current schema.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sysid_ros.core.atomic import write_json
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import json_number, strict_json
from sysid_ros.core.model.target import Target
from sysid_ros.core.result import IdentificationResult

if TYPE_CHECKING:
    from sysid_ros.core.report.metrics import Evaluation

__all__ = ["NAME", "SCHEMA_VERSION", "ResultFile"]

#: the file's name in a result folder
NAME = "result.json"
#: version of the document :meth:`ResultFile.document` builds (1: the files before the field)
SCHEMA_VERSION = 2


class ResultFile:
    """Build, write and load ``result.json`` (see the module docstring)."""

    @staticmethod
    def document(result: IdentificationResult, target: Target, evaluation: Evaluation | None = None,
                 *, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The document of ``result`` identified on ``target``, with its ``evaluation`` (fit,
        validation, truth, divergence to the prior) when there is one and the writer's ``extra``
        keys, as JSON types (strict: NaN and ±inf are None)."""
        doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **result.as_dict()}
        doc["target"] = {"kind": target.kind, "body": None if target.body is None
                         else target.model.body_name(target.body), "model": target.model.source}
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
    def write(path: str | os.PathLike[str], doc: Mapping[str, Any]) -> Path:
        """Write ``doc`` (from :meth:`document`) to ``path`` (a ``result.json`` path, or a folder
        to hold one), atomically; returns the file's path."""
        path = Path(path)
        if path.is_dir() or path.suffix != ".json":
            path = path / NAME
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise SysIdError(f"{path}: expected a result document of schema version {SCHEMA_VERSION} "
                             f"(ResultFile.document), got version {doc.get('schema_version')!r}")
        return write_json(path, doc)

    @staticmethod
    def load(path: str | os.PathLike[str]) -> dict[str, Any]:
        """The document of ``path`` (a ``result.json``, or a folder holding one), migrated to
        :data:`SCHEMA_VERSION`; :class:`SysIdError` saying what was expected when it is not one."""
        path = Path(path)
        if path.is_dir():
            path = path / NAME
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise SysIdError(f"cannot read the result {str(path)!r}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise SysIdError(f"{path}: expected a result.json (JSON), got text that does not parse "
                             f"({exc})") from None
        if not isinstance(doc, dict):
            raise SysIdError(f"{path}: expected a result.json (a JSON object), got {type(doc).__name__}")
        return _migrated(doc, path)

    @staticmethod
    def exported_values(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, float]:
        """``{name: value}`` of the exported standard parameters of a result (a path as in
        :meth:`load`, or a loaded document)."""
        doc = source if isinstance(source, Mapping) else ResultFile.load(source)
        where = "the result" if isinstance(source, Mapping) else str(source)
        try:
            values = doc["exported_parameters"]["values"]
            return {str(k): float(v) for k, v in values.items()}
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise SysIdError(f"expected a result.json with exported_parameters.values, got {where} "
                             f"({type(exc).__name__}: {exc})") from None


def _migrated(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """``doc`` in the current schema (see the module docstring for the older forms)."""
    version = doc.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise SysIdError(f"{path}: result schema version {version!r} is newer than this sysid_ros "
                         f"reads ({SCHEMA_VERSION}); update sysid_ros")
    if version == SCHEMA_VERSION:
        return doc
    doc = dict(doc)
    exported = doc.get("exported_parameters")
    if "parameters" not in doc and isinstance(exported, Mapping) and "values" in exported:
        # the estimator node's former ~/save: values and std_dev by name, no parameters block
        std = doc.get("std_dev") or {}
        doc["parameters"] = {name: {"value": value, "std": std.get(name)}
                             for name, value in exported["values"].items()}
        exported = dict(exported)
        exported.setdefault("from", doc.get("method", ""))
        doc["exported_parameters"] = exported
    doc["schema_version"] = SCHEMA_VERSION
    return doc
