"""A closed loop described by its law and gains, for logs without a ``MotorCommand`` topic.

The instrumental-variable methods simulate the robot under the recorded reference and the loop's
gains (the MIT law ``τ = kp (q_ref − q) + kd (dq_ref − dq) + τ_ff``). A Damiao bag records both
on its ``MotorCommand`` topic; a vendor's log records the reference (CSV columns ``q_ref``,
``dq_ref``, ``tau_ff``, see :mod:`sysid_ros.core.data.columns`) but not the gains. A
:class:`ControllerDescription` supplies them:

* ``pd:kp=K[,K...];kd=D[,D...]``: joint-space PD, ``τ = kp (q_ref − q) + kd (dq_ref − dq) [+ τ_ff]``
  (needs the ``q_ref`` and ``dq_ref`` columns);
* ``velocity:kv=D[,D...]``: velocity control, ``τ = kv (dq_ref − dq) [+ τ_ff]`` (the MIT law with
  ``kp = 0``, ``kd = kv``; needs the ``dq_ref`` columns).

One value applies to every joint, or one per joint in the model's order. ``kp`` [N·m/rad],
``kd``/``kv`` [N·m·s/rad]. An integral term (``ki``) is refused: the simulation has no integrator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from sysid_ros.core.data.columns import ColumnMap
from sysid_ros.core.data.dataset import CommandLog, Dataset
from sysid_ros.core.errors import DataError

Law = Literal["pd", "velocity"]
#: the gains of each law and the reference fields it needs
LAWS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pd": (("kp", "kd"), ("q_ref", "dq_ref")),
    "velocity": (("kv",), ("dq_ref",)),
}
SPEC_HELP = "'pd:kp=K[,K...];kd=D[,D...]' or 'velocity:kv=D[,D...]'"


@dataclass(frozen=True)
class ControllerDescription:
    """A joint-space closed loop: its ``law`` and ``gains`` (``{name: values}``, one value or one
    per joint), as parsed from ``law:gain=v[,v...];gain=...`` (see the module's doc)."""

    law: Law
    gains: dict[str, tuple[float, ...]]

    @classmethod
    def parse(cls, spec: str) -> ControllerDescription:
        """From ``pd:kp=..;kd=..`` or ``velocity:kv=..``. Raises :class:`DataError` for another
        law, a missing, unknown or repeated gain, an integral gain, or a value that is not a
        finite number >= 0."""
        law, colon, rest = (s.strip() for s in spec.partition(":"))
        if law == "pid" or (law in LAWS and "ki=" in rest.replace(" ", "")):
            raise DataError(f"--controller {spec!r}: an integral term (ki) is not simulated by the IV "
                            f"methods; describe the loop as {SPEC_HELP}")
        if law not in LAWS or not colon:
            raise DataError(f"--controller: expected {SPEC_HELP}, got {spec!r}")
        wanted = LAWS[law][0]
        gains: dict[str, tuple[float, ...]] = {}
        for item in rest.split(";"):
            if not item.strip():
                continue
            key, eq, text = (s.strip() for s in item.partition("="))
            if not eq or key not in wanted or key in gains:
                raise DataError(f"--controller {spec!r}: {law} takes {', '.join(wanted)} once each "
                                f"({SPEC_HELP}), got {item.strip()!r}")
            try:
                values = tuple(float(x) for x in text.split(","))
            except ValueError:
                raise DataError(f"--controller {spec!r}: {key}: expected comma-separated numbers, "
                                f"got {text!r}") from None
            if not all(np.isfinite(v) and v >= 0 for v in values):
                raise DataError(f"--controller {spec!r}: {key}: expected finite gains >= 0, got {text!r}")
            gains[key] = values
        missing = [g for g in wanted if g not in gains]
        if missing:
            raise DataError(f"--controller {spec!r}: {law} needs {', '.join(missing)} ({SPEC_HELP})")
        return cls(law, gains)  # type: ignore[arg-type]

    @property
    def needs(self) -> tuple[str, ...]:
        """The reference fields the law needs (``tau_ff`` is added when recorded)."""
        return LAWS[self.law][1]

    def gain(self, name: str, joints: tuple[str, ...]) -> np.ndarray:
        """Gain ``name`` per joint ``(n,)``; raises :class:`DataError` for a wrong count."""
        values = np.asarray(self.gains[name], dtype=float)
        if values.size == 1:
            return np.full(len(joints), values[0])
        if values.size != len(joints):
            raise DataError(f"--controller: {name}: expected 1 or {len(joints)} values (joints "
                            f"{list(joints)}), got {values.size}")
        return values

    def apply(self, dataset: Dataset) -> Dataset:
        """``dataset`` with the command log the IV methods simulate: its recorded reference with
        these gains (replacing any recorded ones). ``dataset`` in the model's joint order. Raises
        :class:`DataError` naming the reference columns that are missing."""
        joints = dataset.joint_names
        cmd = dataset.command
        absent = [f for f in self.needs if cmd is None or not np.all(np.isfinite(getattr(cmd, f)))]
        if absent:
            where = (f"not in the file (or not finite): {reference_columns(dataset, absent)} (name the "
                     f"file's with --columns {','.join(f + '=COLUMN' for f in absent)})"
                     if "csv_columns" in dataset.meta else "a bag records it on its MotorCommand topic; "
                     "none was found")
            raise DataError(f"{dataset.source}: --controller {self.law} needs the reference "
                            f"{' and '.join(absent)}, {where}")
        assert cmd is not None
        m = len(cmd.t)
        if self.law == "pd":
            kp, kd = self.gain("kp", joints), self.gain("kd", joints)
            q_ref = cmd.q_ref
        else:  # velocity: no position feedback (the reference position is not used)
            kp, kd = np.zeros(len(joints)), self.gain("kv", joints)
            q_ref = np.zeros_like(cmd.dq_ref)
        tau_ff = np.where(np.isfinite(cmd.tau_ff), cmd.tau_ff, 0.0)
        command = CommandLog(cmd.t, q_ref, cmd.dq_ref, tau_ff, np.tile(kp, (m, 1)), np.tile(kd, (m, 1)))
        return replace(dataset, command=command)


def reference_columns(dataset: Dataset, names: tuple[str, ...] | list[str]) -> str:
    """Where fields ``names`` are read from: ``dq_ref = columns target_qd_0 … target_qd_5`` (the
    CSV map the dataset was read with, else the default layout)."""
    return "; ".join(f"{name} = columns {_columns(dataset, name)}" for name in names)


def _columns(dataset: Dataset, name: str) -> str:
    colmap = dataset.meta.get("csv_columns")
    colmap = colmap if isinstance(colmap, ColumnMap) else ColumnMap()
    return colmap.describe(name, dataset.joint_names)


def closed_loop_needed(dataset: Dataset) -> str:
    """Why the IV methods cannot run on ``dataset`` (no command log with gains) and precisely
    what they need: a bag's MotorCommand topic, or a controller description and the reference
    columns it reads (by their mapped names)."""
    cmd = dataset.command
    if "csv_columns" not in dataset.meta:
        what = ("the recorded MotorCommand topic (reference and gains); none was found" if cmd is None
                else "kp/kd gains in the recorded commands; they carry none")
        return (f"{dataset.source}: the IV methods need {what}. A log of another controller: a CSV "
                f"file with its reference columns and a controller description (--controller "
                f"{SPEC_HELP})")
    recorded = [f for f in ("q_ref", "dq_ref", "tau_ff")
                if cmd is not None and np.all(np.isfinite(getattr(cmd, f)))]
    return (f"{dataset.source}: the IV methods need the closed loop's reference and gains, and a CSV "
            f"file has no gains: give a controller description, --controller 'pd:kp=K[,K...];kd=D[,D...]' "
            f"with the reference {reference_columns(dataset, ['q_ref', 'dq_ref'])}, or --controller "
            f"'velocity:kv=D[,D...]' with {reference_columns(dataset, ['dq_ref'])} (tau_ff = columns "
            f"{_columns(dataset, 'tau_ff')} added when present); this file has "
            f"{', '.join(recorded) or 'none of them (name its columns with --columns q_ref=..,dq_ref=..)'}")
