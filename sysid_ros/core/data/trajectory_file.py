"""Exported MIT-mode trajectories: a time-stamped per-motor file the Damiao bridge can replay.

On disk (CSV, one row per sample)::

    # sysid_ros trajectory v1
    # joints: joint1,joint2,...
    # motors: DM4340,DM4340,...
    time,joint1.position,joint1.velocity,joint1.effort,joint1.kp,joint1.kd,joint2.position,...
    0.000,...

Units: time [s] from 0, position [rad], velocity [rad/s], effort (feed-forward torque) [N·m],
kp [N·m/rad], kd [N·m·s/rad]. Comment lines may carry more ``# key: value`` metadata.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sysid_ros.core.atomic import write_atomic
from sysid_ros.core.errors import DataError

__all__ = ["FIELDS", "TrajectoryFile", "read_trajectory_file", "write_trajectory_file"]

MAGIC = "# sysid_ros trajectory v1"
FIELDS = ("position", "velocity", "effort", "kp", "kd")


@dataclass(frozen=True)
class TrajectoryFile:
    """A sampled MIT-mode trajectory: ``time (N,)`` [s] from 0, strictly increasing; per joint
    ``(N, n)`` arrays ``position`` [rad], ``velocity`` [rad/s], ``effort`` [N·m], ``kp``
    [N·m/rad], ``kd`` [N·m·s/rad]; ``joints``/``motors`` ``(n,)`` names (motor "" if unknown)."""

    time: np.ndarray
    joints: tuple[str, ...]
    motors: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    meta: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n, count = len(self.joints), self.time.shape[0]
        if len(self.motors) != n:
            raise DataError(f"expected {n} motor names (one per joint), got {len(self.motors)}")
        if len(set(self.joints)) != n or n == 0:
            raise DataError(f"expected distinct joint names, got {list(self.joints)}")
        for name in FIELDS:
            arr = getattr(self, name)
            if arr.shape != (count, n):
                raise DataError(f"{name}: expected shape ({count}, {n}), got {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise DataError(f"{name}: non-finite values at rows "
                                f"{np.flatnonzero(~np.isfinite(arr).all(1))[:5].tolist()}")
        if count < 2 or not np.all(np.diff(self.time) > 0) or abs(self.time[0]) > 1e-9:
            raise DataError("expected at least 2 samples with times starting at 0 and strictly increasing")
        if np.any(self.kp < 0) or np.any(self.kd < 0):
            raise DataError("kp and kd must be >= 0")

    @property
    def duration(self) -> float:
        return float(self.time[-1])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(position, velocity, effort, kp, kd)`` at time ``t`` [s], each ``(n,)``: linear
        interpolation between samples, held at the first/last sample outside the file."""
        t = float(np.clip(t, 0.0, self.time[-1]))
        k = int(np.clip(np.searchsorted(self.time, t, side="right") - 1, 0, self.time.size - 2))
        w = (t - self.time[k]) / (self.time[k + 1] - self.time[k])
        return tuple((1.0 - w) * getattr(self, f)[k] + w * getattr(self, f)[k + 1] for f in FIELDS)


def write_trajectory_file(path: str | Path, traj: TrajectoryFile) -> Path:
    """Write ``traj`` to ``path`` atomically (a temporary file in the same folder, then a
    rename: never a half-written file under the final name). Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    buf.write(f"{MAGIC}\n# joints: {','.join(traj.joints)}\n# motors: {','.join(traj.motors)}\n")
    for key, value in traj.meta.items():
        buf.write(f"# {key}: {value}\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["time", *(f"{j}.{f}" for j in traj.joints for f in FIELDS)])
    stacked = np.stack([getattr(traj, f) for f in FIELDS], axis=2).reshape(traj.time.size, -1)
    for t, row in zip(traj.time, stacked, strict=True):
        writer.writerow([f"{t:.6f}", *(f"{v:.9g}" for v in row)])
    return write_atomic(path, buf.getvalue())


def read_trajectory_file(path: str | Path) -> TrajectoryFile:
    """Read a file written by :func:`write_trajectory_file`; :class:`DataError` says what is
    wrong (missing header, unknown columns, bad numbers, non-increasing time)."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise DataError(f"cannot read trajectory file {path}: {exc.strerror}") from None
    if not lines or lines[0].strip() != MAGIC:
        raise DataError(f"{path}: expected first line {MAGIC!r}, got {lines[0][:60]!r}" if lines
                        else f"{path}: empty file")
    meta: dict[str, str] = {}
    body_start = 1
    while body_start < len(lines) and lines[body_start].startswith("#"):
        key, _, value = lines[body_start][1:].partition(":")
        meta[key.strip()] = value.strip()
        body_start += 1
    if body_start >= len(lines):
        raise DataError(f"{path}: missing the column header line")
    joints = tuple(j for j in meta.pop("joints", "").split(",") if j)
    motors = tuple(meta.pop("motors", "").split(","))
    if not joints:
        raise DataError(f"{path}: missing '# joints: ...' line")
    header = next(csv.reader([lines[body_start]]))
    expected = ["time", *(f"{j}.{f}" for j in joints for f in FIELDS)]
    if header != expected:
        raise DataError(f"{path}: expected columns {expected[:4]}... ({len(expected)}), got "
                        f"{header[:4]}... ({len(header)})")
    try:
        rows = np.array([[float(v) for v in r] for r in csv.reader(lines[body_start + 1:]) if r])
    except ValueError as exc:
        raise DataError(f"{path}: bad number: {exc}") from None
    if rows.ndim != 2 or rows.shape[1] != len(expected):
        raise DataError(f"{path}: expected rows of {len(expected)} values")
    per = rows[:, 1:].reshape(rows.shape[0], len(joints), len(FIELDS))
    return TrajectoryFile(rows[:, 0], joints, motors if len(motors) == len(joints) else ("",) * len(joints),
                          *(per[:, :, i].copy() for i in range(len(FIELDS))), meta=meta)
