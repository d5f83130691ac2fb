"""Measured joint data in memory: validation, matching to a model, CSV input.

A :class:`Dataset` is what every batch method starts from, whether it came from a rosbag2 bag
(:mod:`sysid_ros.core.data.bag`), a CSV file or a simulation.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.errors import DataError
from sysid_ros.core.model.robot import RobotModel

#: a time step longer than this many median sampling periods is a gap (one missing sample is one)
GAP_FACTOR = 1.5


@dataclass(frozen=True)
class Gap:
    """A gap before sample ``index``: the previous sample is at ``t`` [s], the step is ``length``
    [s], about ``missing`` samples (``round(length / period) - 1``, at least 1) are missing."""

    index: int
    t: float
    length: float
    missing: int

    def describe(self) -> str:
        return (f"gap of {self.length * 1e3:.1f} ms after t={self.t:.6f} s (before sample "
                f"{self.index}, {self.missing} sample{'s' if self.missing != 1 else ''} missing)")


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
    when recorded (needed by the instrumental-variable methods); ``truth`` the true parameters of a
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
        """The gaps: time steps longer than :data:`GAP_FACTOR` times the median period, in time
        order (assumes increasing times, see :meth:`validate`)."""
        dt = np.diff(self.t)
        if dt.size == 0:
            return []
        med = float(np.median(dt))
        return [Gap(int(k) + 1, float(self.t[k]), float(dt[k]), max(round(dt[k] / med) - 1, 1))
                for k in np.flatnonzero(dt > GAP_FACTOR * med)]

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

    def segments(self, *, min_length: float, stationary: bool = True) -> list[Dataset]:
        """The pieces between gaps at least ``min_length`` [s] long (with their stationary ends
        cut when ``stationary``): :func:`sysid_ros.core.data.segments.split`, which also reports
        the gaps and the dropped pieces."""
        from sysid_ros.core.data.segments import split

        return split(self, min_length=min_length, stationary=stationary).datasets()

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
            raise DataError(f"{where}: timestamps must increase; sample {k} at t={self.t[k]:.6f} s "
                            f"follows t={self.t[k - 1]:.6f} s")
        for name in ("q", "tau"):
            arr = getattr(self, name)
            nonfinite = np.argwhere(~np.isfinite(arr))
            if nonfinite.size:
                k, j = (int(x) for x in nonfinite[0])
                raise DataError(f"{where}: {name} of joint {self.joint_names[j]!r} is {arr[k, j]} "
                                f"at sample {k} (t={self.t[k]:.6f} s)")
        return self

    def for_model(self, model: RobotModel) -> Dataset:
        """Columns reordered to the model's dof joint names (extra joints dropped).

        Raises :class:`DataError` naming the missing joints and the ones that came, and
        :class:`ModelError` for a model with a floating base (no joint states of the base) or
        other ball or free joints (joint states name hinge/slide joints only).
        """
        model.check_fixed_base(f"{self.source}: joint-state data")
        model.require_scalar_joints("joint-state data (bags, CSV files)")
        wanted = model.dof_joint_names
        missing = [j for j in wanted if j not in self.joint_names]
        if missing:
            raise DataError(f"{self.source}: joints {missing} of the model are not in the data; "
                            f"the data has {list(self.joint_names)}")
        cols = np.array([self.joint_names.index(j) for j in wanted], dtype=int)
        return replace(self, joint_names=tuple(wanted), q=self.q[:, cols], dq=self.dq[:, cols],
                       tau=self.tau[:, cols],
                       command=None if self.command is None else self.command.select(cols))


_CSV_NAMED = re.compile(r"^(q|dq|tau)_(.+)$")
_CSV_NUMBERED = re.compile(r"^(q|dq|tau)(\d+)$")


def read_csv(path: str | Path, *, joint_names: Sequence[str] | None = None) -> Dataset:
    """Read ``time, q..., dq..., tau...`` with a header.

    Columns are either named per joint (``q_<joint>``, ``dq_<joint>``, ``tau_<joint>``) or numbered
    (``q1..qn``, ``dq1..dqn``, ``tau1..taun``), the latter mapped to ``joint_names`` in order
    (pass the model's dof joint names). ``dq`` columns are optional.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"expected a CSV file, got {str(path)!r} (not found)")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise DataError(f"{path}: empty file, expected a header line") from None
        rows = []
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise DataError(f"{path}:{line_no}: expected {len(header)} values, got {len(row)}")
            try:
                rows.append([float(x) for x in row])
            except ValueError as exc:
                raise DataError(f"{path}:{line_no}: not a number ({exc})") from None
    if not header or header[0].lower() not in ("time", "t", "stamp"):
        raise DataError(f"{path}: the first column must be 'time', got {header[:1]}")
    data = np.array(rows, dtype=float).reshape(-1, len(header))
    columns: dict[str, dict[str, int]] = {"q": {}, "dq": {}, "tau": {}}
    numbered = False
    for i, h in enumerate(header[1:], start=1):
        m = _CSV_NUMBERED.match(h)
        if m:
            numbered = True
            columns[m.group(1)][m.group(2)] = i
            continue
        m = _CSV_NAMED.match(h)
        if not m:
            raise DataError(f"{path}: unexpected column {h!r}; expected q_<joint>, dq_<joint>, "
                            "tau_<joint> or q1.., dq1.., tau1..")
        columns[m.group(1)][m.group(2)] = i
    if numbered:
        n = len(columns["q"])
        if joint_names is None or len(joint_names) != n:
            raise DataError(f"{path}: numbered columns q1..q{n} need {n} joint names (the model's), "
                            f"got {None if joint_names is None else len(joint_names)}")
        keys = [str(k) for k in range(1, n + 1)]
        names = tuple(joint_names)
    else:
        keys = list(columns["q"])
        names = tuple(keys)
    for kind in ("q", "tau"):
        missing = [k for k in keys if k not in columns[kind]]
        if missing:
            raise DataError(f"{path}: missing {kind} columns for {missing}")
    q = data[:, [columns["q"][k] for k in keys]]
    tau = data[:, [columns["tau"][k] for k in keys]]
    if all(k in columns["dq"] for k in keys):
        dq = data[:, [columns["dq"][k] for k in keys]]
    else:
        dq = np.full_like(q, np.nan)
    return Dataset(data[:, 0], names, q, dq, tau, source=str(path)).validate()


def write_csv(dataset: Dataset, path: str | Path) -> Path:
    """Write ``dataset`` as CSV with per-joint named columns (the format :func:`read_csv` reads)."""
    path = Path(path)
    header = ["time"] + [f"{k}_{j}" for k in ("q", "dq", "tau") for j in dataset.joint_names]
    table = np.column_stack((dataset.t, dataset.q, dataset.dq, dataset.tau))
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([[repr(float(x)) for x in row] for row in table])
    tmp.replace(path)
    return path
