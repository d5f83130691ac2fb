"""Which CSV columns hold which signal: the project's fields mapped to a file's column names.

A :class:`ColumnMap` names, per field, the column of the time and a pattern of the per-joint
columns, in which ``{i}`` is the joint's 0-based index in the model's order, ``{n}`` its 1-based
index and ``{joint}`` its name. The default is the project's own format
(``time, q_<joint>.., dq_<joint>.., tau_<joint>..`` and the optional reference columns
``q_ref_<joint>``, ``dq_ref_<joint>``, ``tau_ff_<joint>``); a vendor's export is read with e.g.
``time=timestamp,q=actual_q_{i},dq=actual_qd_{i},tau=actual_current_{i}`` (Universal Robots RTDE).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sysid_ros.core.errors import DataError

#: the per-joint fields: measured position [rad], velocity [rad/s], torque [N·m] (or what
#: ``--torque-scale`` turns into one), the reference position and velocity, the feed-forward torque
JOINT_FIELDS: tuple[str, ...] = ("q", "dq", "tau", "q_ref", "dq_ref", "tau_ff")
FIELDS: tuple[str, ...] = ("time", *JOINT_FIELDS)
#: fields every file must have; the others are used when present
REQUIRED: tuple[str, ...] = ("time", "q", "tau")
REFERENCE_FIELDS: tuple[str, ...] = ("q_ref", "dq_ref", "tau_ff")
#: seconds per unit of the time column
TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
PLACEHOLDERS: tuple[str, ...] = ("i", "n", "joint")
SPEC_HELP = ("FIELD=COLUMN[,FIELD=COLUMN...] with FIELD one of time, q, dq, tau, q_ref, dq_ref, "
             "tau_ff and per-joint COLUMN patterns using {i} (0-based joint index), {n} (1-based) "
             "or {joint} (joint name)")

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class ColumnMap:
    """Column of the time and per-joint column patterns of each field (see the module's doc).

    ``given``: the fields named explicitly; a column of one of them that the file lacks is an
    error, while an optional field left at its default is simply not used when absent.
    """

    time: str = "time"
    q: str = "q_{joint}"
    dq: str = "dq_{joint}"
    tau: str = "tau_{joint}"
    q_ref: str = "q_ref_{joint}"
    dq_ref: str = "dq_ref_{joint}"
    tau_ff: str = "tau_ff_{joint}"
    given: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def parse(cls, spec: str) -> ColumnMap:
        """From ``field=column,...`` (fields not named keep their default). Raises
        :class:`DataError` for an unknown field, a repeated one, an empty column, an unknown
        ``{placeholder}`` or a time column with one."""
        values: dict[str, str] = {}
        for item in spec.split(","):
            if not item.strip():
                continue
            key, eq, value = (s.strip() for s in item.partition("="))
            if not eq or key not in FIELDS or not value:
                raise DataError(f"--columns: expected {SPEC_HELP}; got {item.strip()!r} in {spec!r}")
            if key in values:
                raise DataError(f"--columns: field {key!r} given twice in {spec!r}")
            unknown = [p for p in _PLACEHOLDER.findall(value) if p not in PLACEHOLDERS]
            if unknown:
                raise DataError(f"--columns: {key}={value}: unknown placeholder {{{unknown[0]}}}; "
                                "expected {i}, {n} or {joint}")
            if key == "time" and _PLACEHOLDER.search(value):
                raise DataError(f"--columns: time={value}: the time is one column, without "
                                "{i}, {n} or {joint}")
            values[key] = value
        if not values:
            raise DataError(f"--columns: expected {SPEC_HELP}; got {spec!r}")
        return replace(cls(), **values, given=frozenset(values))

    @classmethod
    def numbered(cls) -> ColumnMap:
        """The numbered layout ``time, q1..qn, dq1..dqn, tau1..taun``."""
        return cls(q="q{n}", dq="dq{n}", tau="tau{n}", q_ref="q_ref{n}", dq_ref="dq_ref{n}",
                   tau_ff="tau_ff{n}")

    def spec(self) -> str:
        """The map as ``field=column,...`` (every field)."""
        return ",".join(f"{f}={getattr(self, f)}" for f in FIELDS)

    def by_name(self, name: str) -> bool:
        """Whether ``name``'s pattern uses the joint's name (``{joint}``): the joints are then
        the ones whose ``q`` column the file has (:meth:`joints_in`)."""
        return "{joint}" in getattr(self, name)

    def column(self, name: str, joint: str, index: int) -> str:
        """The column of field ``name`` for ``joint`` at 0-based ``index`` of the model's order."""
        pattern = getattr(self, name)
        if name == "time":
            return pattern
        return _PLACEHOLDER.sub(lambda m: {"i": str(index), "n": str(index + 1), "joint": joint}[m.group(1)],
                                pattern)

    def columns(self, name: str, joints: Sequence[str]) -> list[str]:
        """The columns of per-joint field ``name`` for ``joints`` (in their order). Raises
        :class:`DataError` if a pattern without a placeholder would name one column for several
        joints."""
        if len(joints) > 1 and not _PLACEHOLDER.search(getattr(self, name)):
            raise DataError(f"--columns: {name}={getattr(self, name)} names one column for "
                            f"{len(joints)} joints; use {{i}}, {{n}} or {{joint}} in it")
        return [self.column(name, j, k) for k, j in enumerate(joints)]

    def describe(self, name: str, joints: Sequence[str]) -> str:
        """The columns of ``name`` for ``joints`` in short: ``target_qd_0 … target_qd_5``."""
        cols = self.columns(name, joints) if name != "time" else [self.time]
        return cols[0] if len(cols) == 1 else f"{cols[0]} … {cols[-1]}"

    def joints_in(self, header: Sequence[str]) -> tuple[str, ...]:
        """The joint names whose ``q`` column (a ``{joint}`` pattern) ``header`` has, in file
        order (for an index pattern: the ``q`` columns themselves); columns that are some other
        field's (``q_ref_j1`` also fits ``q_{joint}``) are not joints."""
        fits = {f: _regex(getattr(self, f)) for f in JOINT_FIELDS}
        names = []
        for h in header:
            m = fits["q"].fullmatch(h)
            if m and not any(fits[f].fullmatch(h) for f in JOINT_FIELDS if f != "q"):
                names.append(m.groupdict().get("joint", h))
        return tuple(names)

    def fits(self, column: str) -> bool:
        """Whether ``column`` is the time or fits some per-joint field's pattern."""
        return column == self.time or any(_regex(getattr(self, f)).fullmatch(column) for f in JOINT_FIELDS)


def time_scale(unit: str) -> float:
    """Seconds per ``unit`` (one of :data:`TIME_UNITS`); raises :class:`DataError` otherwise."""
    if unit not in TIME_UNITS:
        raise DataError(f"time unit: expected one of {list(TIME_UNITS)}, got {unit!r}")
    return TIME_UNITS[unit]


def _regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` as a regular expression: ``{joint}`` any name, ``{i}``/``{n}`` digits."""
    parts, pos = [], 0
    for m in _PLACEHOLDER.finditer(pattern):
        parts.append(re.escape(pattern[pos:m.start()]))
        parts.append("(?P<joint>.+)" if m.group(1) == "joint" and "(?P<joint>" not in "".join(parts)
                     else r"\d+" if m.group(1) in ("i", "n") else "(?:.+)")
        pos = m.end()
    parts.append(re.escape(pattern[pos:]))
    return re.compile("".join(parts))


def missing_joints_line(wanted: Sequence[str], names: Sequence[str]) -> str | None:
    """What is wrong with data naming ``names`` for a model with the joints ``wanted``, in one line
    (None: every wanted joint is there; other names are ignored)."""
    missing = [j for j in wanted if j not in set(names)]
    if not missing:
        return None
    return f"joints {missing} of the model are not in the data; the data has {list(names)}"


def joint_columns(wanted: Sequence[str], names: Sequence[str], where: str) -> list[int]:
    """The one name → column map of joint data (a bag's, a CSV file's, a live message's): the
    index in ``names`` of each joint of ``wanted`` (the model's, in its order), other names
    ignored. :class:`DataError` ``"<where>: joints [...] of the model are not in the data; the
    data has [...]"``."""
    line = missing_joints_line(wanted, names)
    if line is not None:
        raise DataError(f"{where}: {line}")
    index = {name: i for i, name in enumerate(names)}
    return [index[j] for j in wanted]
