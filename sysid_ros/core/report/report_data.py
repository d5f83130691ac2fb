"""What an HTML report is made of, read from a result folder (:class:`ReportInputs`), and the
torque series file ``torques.npz`` the result writer leaves beside ``result.json`` for it.

A result folder of ``sysid identify`` (or of the batch solver, an online replay, the validation
suite's own identification) holds ``result.json`` and ``torques.npz``; one of ``sysid validate``
holds ``validation.json`` and either the identification it ran (``identified/``) or names the
result it validated. :meth:`ReportInputs.load` finds them; nothing else in the report reads files.

``torques.npz`` (owner: :func:`write_torques` / :func:`read_torques`): ``joints (n,)`` and, per
data set ``<key>`` among ``fit`` (identification data) and ``validation`` (held-out data),
``<key>_t (N,)`` [s], ``<key>_measured (N, n)`` and ``<key>_predicted (N, n)`` [N·m or N], as
the evaluation scored them (filtered and decimated like the regression rows).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.result_file import NAME as RESULT_FILE
from sysid_ros.core.result_file import ResultFile

__all__ = ["REPORT_FILE", "RESULT_FILE", "SERIES_TITLES", "TORQUES_FILE", "VALIDATION_FILE",
           "ReportInputs", "TorqueSeries", "read_result", "read_torques", "write_torques"]

TORQUES_FILE = "torques.npz"
VALIDATION_FILE = "validation.json"
REPORT_FILE = "report.html"
#: the data sets of ``torques.npz`` and how the report names them
SERIES_TITLES = {"fit": "identification data", "validation": "held-out data"}


@dataclass(frozen=True)
class TorqueSeries:
    """Measured and predicted joint torques of one data set: ``t (N,)`` [s], ``measured (N, n)``,
    ``predicted (N, n)``; ``key``: ``"fit"`` or ``"validation"``."""

    key: str
    t: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray

    @property
    def title(self) -> str:
        return SERIES_TITLES.get(self.key, self.key)

    @property
    def residual(self) -> np.ndarray:
        """``measured − predicted (N, n)``."""
        return self.measured - self.predicted


def write_torques(path: str | os.PathLike[str], joints: Sequence[str],
                  series: Mapping[str, Any]) -> Path:
    """Write ``torques.npz`` (module docstring) from ``{key: fit}``, each fit with ``t``,
    ``measured`` and ``predicted`` (a :class:`~sysid_ros.core.report.metrics.TorqueFit`); keys
    with ``None`` are left out. Compressed; written whole under ``path`` (the caller stages it)."""
    arrays: dict[str, np.ndarray] = {"joints": np.array([str(j) for j in joints])}
    for key, fit in series.items():
        if fit is None:
            continue
        if key not in SERIES_TITLES:
            raise SysIdError(f"torque series keys are {list(SERIES_TITLES)}, got {key!r}")
        arrays[f"{key}_t"] = np.asarray(fit.t, dtype=float)
        arrays[f"{key}_measured"] = np.asarray(fit.measured, dtype=float)
        arrays[f"{key}_predicted"] = np.asarray(fit.predicted, dtype=float)
    path = Path(path)
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)
    return path


def read_torques(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], list[TorqueSeries]]:
    """``(joints, series)`` of a ``torques.npz``; :class:`SysIdError` naming the file if it is not
    one."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            joints = tuple(str(j) for j in npz["joints"])
            series = [TorqueSeries(key, npz[f"{key}_t"], npz[f"{key}_measured"], npz[f"{key}_predicted"])
                      for key in SERIES_TITLES if f"{key}_t" in npz.files]
    except (OSError, ValueError, KeyError) as exc:
        raise SysIdError(f"{path}: expected a torques.npz of sysid identify (joints, fit_t, "
                         f"fit_measured, fit_predicted), got {type(exc).__name__}: {exc}") from None
    for s in series:
        if s.measured.shape != s.predicted.shape or s.measured.shape != (s.t.size, len(joints)):
            raise SysIdError(f"{path}: {s.key} series of shapes t {s.t.shape}, measured "
                             f"{s.measured.shape}, predicted {s.predicted.shape} for {len(joints)} joints")
    return joints, series


def read_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The content of a ``result.json`` (:meth:`ResultFile.load`: migrated to the current schema),
    which the report needs with ``method`` and ``base_parameters`` (a batch or replayed result)."""
    path = Path(path)
    doc = ResultFile.load(path)
    if "method" not in doc or "base_parameters" not in doc:
        raise SysIdError(f"{path}: expected a result.json of sysid identify (with 'method' and "
                         f"'base_parameters'), got {sorted(doc)}")
    return doc


def _read_validation(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SysIdError(f"{path}: expected a validation.json of sysid validate, got "
                         f"{type(exc).__name__}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("checks"), list):
        raise SysIdError(f"{path}: expected a validation.json of sysid validate (with 'checks')")
    return doc


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report shows: ``result`` (``result.json``'s content), ``result_path``,
    ``joints`` and ``series`` (``torques.npz``, empty when absent), ``validation``
    (``validation.json``'s content or ``None``), ``folder`` the report goes into, ``notes``:
    what was looked for and not found (shown in the report's warnings)."""

    folder: Path
    result: dict[str, Any]
    result_path: Path
    joints: tuple[str, ...] = ()
    series: list[TorqueSeries] = field(default_factory=list)
    validation: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> ReportInputs:
        """From a result folder (module docstring). :class:`SysIdError` with what was expected
        when the folder holds neither a ``result.json`` nor a ``validation.json`` naming one."""
        folder = Path(folder)
        if not folder.is_dir():
            raise SysIdError(f"expected a result folder (with result.json), got {folder}: "
                             + ("a file" if folder.exists() else "no such folder"))
        notes: list[str] = []
        validation = None
        result_path = folder / RESULT_FILE
        if (folder / VALIDATION_FILE).exists():
            validation = _read_validation(folder / VALIDATION_FILE)
            if not result_path.exists():
                source = Path(str((validation.get("result") or {}).get("source") or ""))
                for candidate in (source, folder / "identified" / RESULT_FILE):
                    if str(candidate) not in ("", ".") and candidate.is_file():
                        result_path = candidate
                        break
        if not result_path.is_file():
            raise SysIdError(f"{folder}: expected a result.json (sysid identify --out) or a "
                             f"validation.json naming one (sysid validate --out); found "
                             f"{sorted(p.name for p in folder.iterdir())[:12]}")
        result = read_result(result_path)
        joints: tuple[str, ...] = tuple(result.get("joint_names") or ())
        series: list[TorqueSeries] = []
        torques = result_path.parent / TORQUES_FILE
        if torques.is_file():
            joints, series = read_torques(torques)
        else:
            notes.append(f"no {TORQUES_FILE} beside {result_path.name} (a result of an older version): "
                         "no torque plots or residual histograms")
        return cls(folder, result, result_path, joints, series, validation, tuple(notes))
