"""Replay of an exported trajectory file by the bridge itself (a bare rig, no trajectory node).

:class:`ReplaySource` gives joint-space targets for every control cycle: first a minimum-jerk
ramp from the measured pose to the file's first sample (long enough that its peak speed stays
under half of every joint's velocity limit), then the file's samples (linear interpolation
between them), then the last sample held. The targets go through the same clamping and watchdog-
free safety checks as commands from the topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sysid_ros.core.data.trajectory_file import TrajectoryFile, read_trajectory_file
from sysid_ros.core.errors import DataError
from sysid_ros.hardware.safety import CommandLimits, JointTargets

__all__ = ["ReplaySource", "load_replay"]

#: peak speed of the minimum-jerk profile ``10s³−15s⁴+6s⁵`` is this times distance / duration
MIN_JERK_PEAK = 1.875


def load_replay(path: str | Path, joint_names: Sequence[str], joint_motors: Sequence[str]) -> TrajectoryFile:
    """Read a trajectory file and check it drives configured joints with the configured motors
    (:class:`DataError` naming what differs)."""
    traj = read_trajectory_file(path)
    unknown = [j for j in traj.joints if j not in joint_names]
    if unknown:
        raise DataError(f"{path}: joints {unknown} are not configured on the bridge (it drives "
                        f"{list(joint_names)})")
    motor_of = dict(zip(joint_names, joint_motors, strict=True))
    wrong = [f"{j}: file {m}, bridge {motor_of[j]}" for j, m in zip(traj.joints, traj.motors, strict=True)
             if m and m != motor_of[j]]
    if wrong:
        raise DataError(f"{path}: motor models differ from the bridge configuration ({'; '.join(wrong)})")
    return traj


class ReplaySource:
    """Targets over time [s] since the start of the replay for the bridge's joints ``(n,)``.

    Joints the file does not name hold their start pose with the default gains.
    """

    def __init__(self, traj: TrajectoryFile, joint_names: Sequence[str], start: np.ndarray,
                 limits: CommandLimits, *, ramp_time: float) -> None:
        self.traj = traj
        self.columns = np.array([list(joint_names).index(j) for j in traj.joints])
        self.start = JointTargets.hold(start, limits.kp_default, limits.kd_default)
        first = traj.sample(0.0)
        self.first = self.start.copy()
        for arr, values in zip((self.first.position, self.first.velocity, self.first.effort,
                                self.first.kp, self.first.kd), first, strict=True):
            arr[self.columns] = values
        distance = np.abs(self.first.position - self.start.position)
        needed = float(np.max(MIN_JERK_PEAK * distance / (0.5 * limits.velocity)))
        self.ramp_time = max(float(ramp_time), needed)
        self.duration = self.ramp_time + traj.duration

    def done(self, t: float) -> bool:
        return t >= self.duration

    def targets(self, t: float) -> JointTargets:
        """Targets at ``t`` [s] after the replay started."""
        if t < self.ramp_time:
            s = max(t, 0.0) / self.ramp_time
            h = s**3 * (10.0 - 15.0 * s + 6.0 * s * s)
            dh = 30.0 * s * s * (1.0 - s) ** 2 / self.ramp_time
            out = self.first.copy()
            delta = self.first.position - self.start.position
            out.position = self.start.position + h * delta
            out.velocity = dh * delta
            out.effort = h * self.first.effort
            return out
        out = self.start.copy()
        sample = self.traj.sample(min(t - self.ramp_time, self.traj.duration))
        for arr, values in zip((out.position, out.velocity, out.effort, out.kp, out.kd), sample, strict=True):
            arr[self.columns] = values
        if t >= self.duration:  # hold the last pose still
            out.velocity[:] = 0.0
        return out
