"""Measured joint data in memory: validation, matching to a model, CSV input.

A :class:`Dataset` is what every batch method starts from, whether it came from a rosbag2 bag
(:mod:`sysid_ros.core.data.bag`), a CSV file or a simulation.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sysid_ros.core.atomic import atomic_path
from sysid_ros.core.data.columns import REFERENCE_FIELDS, REQUIRED, ColumnMap, joint_columns, time_scale
from sysid_ros.core.data.stream_time import Gap, find_gaps, missing_samples
from sysid_ros.core.errors import DataError

if TYPE_CHECKING:  # (a dataset needs no MuJoCo: readers and the recorder start without it)
    from sysid_ros.core.model.robot import RobotModel

#: largest magnitude a measured value may have, by signal: beyond it the sample is a unit or logging
#: error, not a measurement (τ [N·m or N], q̇ [rad/s or m/s])
ABSURD = {"tau": 1e6, "dq": 1e4}
#: ``meta`` key of a resampled recording's gaps in its file's stamps: ``((t [s], length [s]), ...)``
#: (:func:`~sysid_ros.core.data.timebase.regularise`; :meth:`Dataset.gaps` reports them)
FILE_GAPS = "file_gaps"


@dataclass(frozen=True)
class CommandLog:
    """MIT-mode commands as sent: times ``t (M,)`` [s] and per joint ``(M, n)`` arrays."""

    t: np.ndarray
    q_ref: np.ndarray
    dq_ref: np.ndarray
    tau_ff: np.ndarray
    kp: np.ndarray
    kd: np.ndarray

    def at(self, t: np.ndarray) -> CommandLog:
        """The commands in force at times ``t`` (zero-order hold; the first before it starts)."""
        idx = np.clip(np.searchsorted(self.t, t, side="right") - 1, 0, len(self.t) - 1)
        return CommandLog(np.asarray(t, dtype=float), self.q_ref[idx], self.dq_ref[idx],
                          self.tau_ff[idx], self.kp[idx], self.kd[idx])

    def during(self, t0: float, t1: float) -> CommandLog:
        """The commands in force from ``t0`` to ``t1`` [s]: the one in force at ``t0`` (the first
        if none was yet) through the last one sent by ``t1``."""
        a = max(int(np.searchsorted(self.t, t0, side="right")) - 1, 0)
        b = max(int(np.searchsorted(self.t, t1, side="right")), a + 1)
        sl = slice(a, b)
        return CommandLog(self.t[sl], self.q_ref[sl], self.dq_ref[sl], self.tau_ff[sl],
                          self.kp[sl], self.kd[sl])

    def select(self, columns: np.ndarray) -> CommandLog:
        return CommandLog(self.t, self.q_ref[:, columns], self.dq_ref[:, columns],
                          self.tau_ff[:, columns], self.kp[:, columns], self.kd[:, columns])


@dataclass(frozen=True)
class Dataset:
    """Joint samples: ``t (N,)`` [s], ``q``, ``dq``, ``tau`` ``(N, n)`` in ``joint_names`` order.

    ``dq`` is NaN when the source had no velocities. ``command`` holds the reference and gains
    when recorded (needed by the instrumental-variable methods; NaN where not recorded: a CSV
    file's reference columns come without gains); ``truth`` the true parameters of a
    simulated run (``{name: value}``) when known; ``source`` says where the data came from.
    """

    t: np.ndarray
    joint_names: tuple[str, ...]
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    source: str = ""
    command: CommandLog | None = None
    truth: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        for name in ("q", "dq", "tau"):
            arr = getattr(self, name)
            if arr.shape != (len(self.t), n):
                raise DataError(f"{self.source}: expected {name} of shape ({len(self.t)}, {n}), "
                                f"got {arr.shape}")

    def __len__(self) -> int:
        return len(self.t)

    @property
    def has_velocity(self) -> bool:
        return bool(np.all(np.isfinite(self.dq)))

    @property
    def sample_rate(self) -> float:
        """Median sampling rate [Hz]."""
        return float(1.0 / np.median(np.diff(self.t)))

    def gaps(self) -> list[Gap]:
        """The gaps by the one gap rule (:func:`~sysid_ros.core.data.stream_time.find_gaps`: steps
        longer than 1.5 median periods), in time order (assumes increasing times, see
        :meth:`validate`). A resampled recording states each gap in its file's stamps
        (``meta[FILE_GAPS]``): the file's sample before the gap and the file's step, not the
        longer step between the two resampled pieces around it."""
        found = find_gaps(self.t)
        if not found:
            return []
        period = float(np.median(np.diff(self.t)))
        file_gaps = self.meta.get(FILE_GAPS) or ()
        out = []
        for gap in found:
            k = gap.index - 1
            inside = [g for g in file_gaps if self.t[k] - 1e-9 <= g[0] < self.t[k + 1]]
            if inside:  # the file's gap within this step of the grid
                t, length = inside[0]
                gap = Gap(gap.index, t, length, int(missing_samples([length], period, 0.0)[0]))
            out.append(gap)
        return out

    def window(self, start: int, stop: int) -> Dataset:
        """Samples ``start:stop`` as a dataset: the command log cut to their time span
        (:meth:`CommandLog.during`), per-sample ``meta`` arrays (length ``N``) sliced alike."""
        command = (None if self.command is None or stop <= start
                   else self.command.during(float(self.t[start]), float(self.t[stop - 1])))
        return replace(self.samples(slice(start, stop)), command=command)

    def samples(self, index: slice | np.ndarray) -> Dataset:
        """The samples ``index`` selects (a slice or a boolean mask of length ``N``): times,
        signals and per-sample ``meta`` arrays alike; the command log unchanged."""
        meta = {k: v[index] if self.per_sample(v) else v for k, v in self.meta.items()}
        return replace(self, t=self.t[index], q=self.q[index], dq=self.dq[index], tau=self.tau[index],
                       meta=meta)

    def per_sample(self, value: object) -> bool:
        """Whether a ``meta`` value is per sample (an array of length ``N``)."""
        return isinstance(value, np.ndarray) and value.ndim > 0 and len(value) == len(self.t)

    def with_torque_calibration(self, scale: Sequence[float] | float | None = None,
                                offset: Sequence[float] | float | None = None) -> Dataset:
        """Torques from what was logged: ``τ = scale · logged + offset`` per joint (``(n,)`` or
        one value for all; ``None``: 1 and 0, and neither given returns ``self``). For logs whose
        effort is a motor current [A] (scale: torque constant × gear ratio [N·m/A]) or has a
        sensor offset [N·m]. Raises :class:`DataError` for a wrong count or a non-finite or zero
        scale."""
        if scale is None and offset is None:
            return self
        n = len(self.joint_names)
        values = []
        for name, v in (("torque scale", 1.0 if scale is None else scale),
                        ("torque offset", 0.0 if offset is None else offset)):
            arr = np.asarray(v, dtype=float).ravel()
            arr = np.full(n, arr[0]) if arr.size == 1 else arr
            if arr.shape != (n,) or not np.all(np.isfinite(arr)):
                raise DataError(f"{self.source}: {name}: expected 1 or {n} finite values (joints "
                                f"{list(self.joint_names)}), got {v!r}")
            values.append(arr)
        if np.any(values[0] == 0):
            raise DataError(f"{self.source}: torque scale of 0 for joints "
                            f"{[j for j, s in zip(self.joint_names, values[0], strict=True) if s == 0]}")
        return replace(self, tau=self.tau * values[0] + values[1])

    def without_unmeasured(self) -> tuple[Dataset, int]:
        """The dataset without the samples whose q or τ is not finite (a motor that did not reply
        in that cycle: the Damiao bridge publishes NaN then), and how many were removed. Removed
        samples leave gaps (:meth:`gaps`), where the batch methods split the data."""
        ok = np.all(np.isfinite(self.q), axis=1) & np.all(np.isfinite(self.tau), axis=1)
        if ok.all():
            return self, 0
        return self.samples(ok), int(len(ok) - ok.sum())

    def validate(self, *, topic: str = "") -> Dataset:
        """Check increasing times, finite q and τ; raise :class:`DataError` naming the topic and
        the first bad sample. Returns ``self``. Gaps are allowed: the batch methods split the
        recording there (:mod:`sysid_ros.core.data.segments`)."""
        where = topic or self.source
        if len(self.t) < 3:
            raise DataError(f"{where}: expected at least 3 samples, got {len(self.t)}")
        dt = np.diff(self.t)
        bad = np.flatnonzero(dt <= 0)
        if bad.size:
            k = int(bad[0]) + 1
            precision = _stamp_precision(self.t, dt)
            if precision:
                raise DataError(f"{where}: {precision}")
            raise DataError(f"{where}: timestamps must increase; sample {k} at t={self.t[k]:.6f} s "
                            f"follows t={self.t[k - 1]:.6f} s")
        for name in ("q", "tau"):
            arr = getattr(self, name)
            nonfinite = np.argwhere(~np.isfinite(arr))
            if nonfinite.size:
                k, j = (int(x) for x in nonfinite[0])
                raise DataError(f"{where}: {name} of joint {self.joint_names[j]!r} is {arr[k, j]} "
                                f"at sample {k} (t={self.t[k]:.6f} s)")
        self.check_magnitudes(where)
        return self

    def check_magnitudes(self, where: str = "") -> None:
        """Raise :class:`DataError` for the first sample whose τ or q̇ exceeds :data:`ABSURD` in
        magnitude or whose q̇ is infinite (q̇ may be NaN: not recorded), naming its time and column."""
        for name, limit in ABSURD.items():
            arr = getattr(self, name)
            bad = np.argwhere(np.abs(np.nan_to_num(arr, nan=0.0, posinf=np.inf, neginf=np.inf)) > limit)
            if bad.size:
                k, j = (int(x) for x in bad[0])
                raise DataError(f"{where or self.source}: {name} of joint {self.joint_names[j]!r} is "
                                f"{arr[k, j]:g} at sample {k} (t={self.t[k]:.6f} s); expected |{name}| "
                                f"<= {limit:g} (a unit or logging error?)")

    def for_model(self, model: RobotModel) -> Dataset:
        """Columns reordered to the model's dof joint names (extra joints dropped).

        Raises :class:`DataError` naming the missing joints and the ones that came, and
        :class:`ModelError` for a model with a floating base (no joint states of the base) or
        other ball or free joints (joint states name hinge/slide joints only).
        """
        model.check_fixed_base(f"{self.source}: joint-state data")
        model.require_scalar_joints("joint-state data (bags, CSV files)")
        wanted = model.dof_joint_names
        cols = np.array(joint_columns(wanted, self.joint_names, self.source), dtype=int)
        return replace(self, joint_names=tuple(wanted), q=self.q[:, cols], dq=self.dq[:, cols],
                       tau=self.tau[:, cols],
                       command=None if self.command is None else self.command.select(cols))


def _stamp_precision(t: np.ndarray, dt: np.ndarray) -> str | None:
    """The message for stamps written with too few significant digits (epoch seconds printed as
    ``1.73271234e+09``: a 10 s resolution): many steps of exactly 0 and every step a multiple of
    one resolution coarser than the steps the other samples suggest. None when the stamps are
    not quantised so (a stamp that goes back is another error)."""
    zero = int(np.count_nonzero(dt == 0))
    positive = dt[dt > 0]
    if zero < max(2, 0.01 * len(dt)) or np.any(dt < 0):
        return None
    resolution = float(positive.min()) if positive.size else float("nan")
    span = float(t[-1] - t[0])
    magnitude = float(np.max(np.abs(t)))
    digits = int(np.ceil(np.log10(magnitude / (0.01 * max(span / len(t), 1e-9))))) if magnitude > 0 else 0
    return (f"timestamps repeat ({zero} of {len(dt)} steps are 0, the smallest other step is "
            f"{resolution:g} s, at t ≈ {magnitude:.6g} s): the time column has too few significant "
            f"digits for samples {span / len(t):.3g} s apart (write it with at least {digits} "
            f"significant digits, or as times since the start)")


#: time column names the default layout accepts as its first column
_TIME_NAMES = ("time", "t", "stamp")


def read_csv(path: str | Path, *, joint_names: Sequence[str] | None = None,
             columns: ColumnMap | None = None, time_unit: str = "s") -> Dataset:
    """Read a CSV file with a header line; comma, semicolon, tab or whitespace separated (told
    by the header line).

    ``columns`` maps the project's fields to the file's columns (:class:`ColumnMap`; the file's
    other columns are ignored). Without it the file is in the project's layout: ``time`` first,
    then per joint ``q_<joint>``, ``dq_<joint>``, ``tau_<joint>`` and optionally the reference
    ``q_ref_<joint>``, ``dq_ref_<joint>``, ``tau_ff_<joint>``, or numbered ``q1..qn``, ``dq1..``,
    ``tau1..``; any other column is an error. Joints are the file's (``{joint}`` patterns) or
    ``joint_names`` (pass the model's dof joint names) for ``{i}``/``{n}`` patterns. ``dq``
    columns are optional (NaN when absent). ``time_unit``: unit of the time column (``s``,
    ``ms``, ``us``, ``ns``). Recorded reference columns make :attr:`Dataset.command`, NaN for
    what was not recorded, the gains too (a controller description supplies them,
    :mod:`sysid_ros.core.data.controller`); the map used is ``meta["csv_columns"]``.
    """
    path = Path(path)
    scale = time_scale(time_unit)
    if not path.is_file():
        raise DataError(f"expected a CSV file, got {str(path)!r} (not found)")
    header, rows, table = _read_table(path)
    colmap = _default_layout(path, header) if columns is None else columns
    if colmap.by_name("q"):
        names = colmap.joints_in(header)
        if not names:
            raise DataError(f"{path}: no column fits q={colmap.q}; {_has(header)}")
    else:
        n = len(colmap.joints_in(header)) if columns is None else None
        if joint_names is None or (n is not None and len(joint_names) != n):
            what = f"numbered columns q1..q{n}" if n is not None else f"columns by joint index (q={colmap.q})"
            raise DataError(f"{path}: {what} need {n or 'the'} joint names (the model's), got "
                            f"{None if joint_names is None else len(joint_names)}")
        names = tuple(joint_names)
    index = {h: k for k, h in enumerate(header)}
    if table is None:
        table = _table(rows)  # every cell as a number at once, None if one is not (found per column)

    def take(name: str) -> np.ndarray | None:
        cols = [colmap.time] if name == "time" else colmap.columns(name, names)
        missing = [k for k, c in enumerate(cols) if c not in index]
        if missing and (name in REQUIRED or name in colmap.given or len(missing) < len(cols)):
            k = missing[0]
            whose = "" if name == "time" else f" of joint {names[k]!r}"
            raise DataError(f"{path}: no column {cols[k]!r} ({name}{whose}, mapped by "
                            f"{name}={getattr(colmap, name)}); {_has(header)}")
        if missing:
            return None
        picks = [index[c] for c in cols]
        return table[:, picks] if table is not None else _numbers(path, rows, picks, cols)

    t = take("time")[:, 0] * scale
    q, dq, tau = take("q"), take("dq"), take("tau")
    refs = {name: take(name) for name in REFERENCE_FIELDS}
    command = None
    if any(v is not None for v in refs.values()):
        nan = np.full_like(q, np.nan)
        gains = np.full_like(q, np.nan)  # not in the file: from a controller description
        command = CommandLog(t, nan if refs["q_ref"] is None else refs["q_ref"],
                             nan if refs["dq_ref"] is None else refs["dq_ref"],
                             nan if refs["tau_ff"] is None else refs["tau_ff"], gains, gains)
    return Dataset(t, names, q, np.full_like(q, np.nan) if dq is None else dq, tau, source=str(path),
                   command=command, meta={"csv_columns": colmap}).validate()


def _read_table(path: Path) -> tuple[list[str], list[tuple[int, list[str]]], np.ndarray | None]:
    """The header, the ``(line number, cells)`` rows of a delimited text file and, when every
    row's cells are numbers, all of them as floats ``(N, columns)`` (then the rows are ``[]``);
    the delimiter is the one of tab, semicolon, comma that the header line has most of, else
    whitespace."""
    with path.open(newline="", encoding="utf-8") as f:
        lines = f.read().splitlines()
    first = next((k for k, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise DataError(f"{path}: empty file, expected a header line")
    counts = {d: lines[first].count(d) for d in ("\t", ";", ",")}
    delimiter = max(counts, key=lambda d: counts[d]) if max(counts.values()) else None
    header_cells = (lines[first].split() if delimiter is None
                    else [c.strip() for c in next(csv.reader([lines[first]], delimiter=delimiter))])
    table = _numeric_rows(lines[first + 1:], delimiter, len(header_cells))
    if table is not None and not all(_is_number(h) for h in header_cells):
        return header_cells, [], table
    if delimiter is None:
        split = [(k + 1, line.split()) for k, line in enumerate(lines) if line.strip()]
    else:
        split = [(k + 1, [c.strip() for c in cells])
                 for k, cells in zip(range(len(lines)), csv.reader(lines, delimiter=delimiter), strict=True)
                 if any(c.strip() for c in cells)]
    (_, header), rows = split[0], split[1:]
    if header and all(_is_number(h) for h in header):
        shown = ", ".join(header[:4]) + (", ..." if len(header) > 4 else "")
        raise DataError(f"{path}: the first line holds numbers ({shown}), expected a header line "
                        "naming the columns (time, q_<joint>, dq_<joint>, tau_<joint>, ...; another "
                        "layout: --columns)")
    for line_no, row in rows:
        if len(row) != len(header):
            raise DataError(f"{path}:{line_no}: expected {len(header)} values, got {len(row)}")
    return header, rows, None


def _default_layout(path: Path, header: list[str]) -> ColumnMap:
    """The project's layout the file is in (named or numbered columns); any other column or a
    first column that is not the time is an error."""
    if not header or header[0].lower() not in _TIME_NAMES:
        raise DataError(f"{path}: the first column must be 'time', got {header[:1]} (another layout: "
                        "--columns time=NAME,...)")
    named, numbered = (replace(m, time=header[0]) for m in (ColumnMap(), ColumnMap.numbered()))
    colmap = named if named.joints_in(header) or not numbered.joints_in(header) else numbered
    for h in header[1:]:
        if not colmap.fits(h):
            raise DataError(f"{path}: unexpected column {h!r}; expected q_<joint>, dq_<joint>, "
                            "tau_<joint>, q_ref_<joint>, dq_ref_<joint>, tau_ff_<joint> or q1.., dq1.., "
                            "tau1.. (another layout: --columns)")
    return colmap


def _numeric_rows(lines: list[str], delimiter: str | None, columns: int) -> np.ndarray | None:
    """``lines`` as floats ``(N, columns)`` by NumPy's parser (a tenth of the time of a cell by
    cell split and conversion: ~0.1 s of CPU on an 8 s, 1 kHz log of 7 joints), or None unless
    every line is ``columns`` numbers (a quoted, empty or non-numeric cell, another count,
    no line at all): the caller's cell by cell reading then says where and what."""
    lines = [line for line in lines if line.strip()]  # blank lines: skipped, as cell by cell
    if not lines:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. "input contained no data": not numbers
            table = np.loadtxt(lines, dtype=float, delimiter=delimiter, comments=None, ndmin=2)
    except (ValueError, UserWarning):
        return None
    return table if table.shape[1] == columns else None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _table(rows: list[tuple[int, list[str]]]) -> np.ndarray | None:
    """All cells of ``rows`` as floats ``(N, columns)`` in one conversion, or None when a cell is
    not a number (:func:`_numbers` then finds it, column by column)."""
    try:
        return np.array([row for _, row in rows], dtype=float).reshape(len(rows), -1)
    except ValueError:
        return None


def _numbers(path: Path, rows: list[tuple[int, list[str]]], picks: list[int], names: list[str]
             ) -> np.ndarray:
    """The columns ``picks`` of ``rows`` as floats ``(N, len(picks))``; raises naming the line
    and column of the first cell that is not a number."""
    try:
        table = np.array([[row[k] for k in picks] for _, row in rows], dtype=float)
        return table.reshape(len(rows), len(picks))
    except ValueError:
        pass  # find the cell
    out = np.empty((len(rows), len(picks)))
    for r, (line_no, row) in enumerate(rows):
        for c, k in enumerate(picks):
            try:
                out[r, c] = float(row[k])
            except ValueError:
                raise DataError(f"{path}:{line_no}: column {names[c]!r}: expected a number, got "
                                f"{row[k]!r}") from None
    return out


def _has(header: Sequence[str], shown: int = 8) -> str:
    """``the file has N columns: a, b, …`` (the first ``shown``)."""
    more = ", …" if len(header) > shown else ""
    return f"the file has {len(header)} columns: {', '.join(header[:shown])}{more}"


def write_csv(dataset: Dataset, path: str | Path) -> Path:
    """Write ``dataset`` as CSV with per-joint named columns (the format :func:`read_csv` reads)."""
    path = Path(path)
    header = ["time"] + [f"{k}_{j}" for k in ("q", "dq", "tau") for j in dataset.joint_names]
    table = np.column_stack((dataset.t, dataset.q, dataset.dq, dataset.tau))
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([[repr(float(x)) for x in row] for row in table])
    return path
