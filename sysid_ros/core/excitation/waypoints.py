"""An excitation run as joint-trajectory waypoints for a position-controlled arm (no ROS here).

A ros2_control arm takes ``trajectory_msgs/JointTrajectory`` waypoints (position, velocity,
acceleration at a ``time_from_start``) and interpolates between them. :class:`WaypointStream`
turns an :class:`~sysid_ros.core.excitation.plan.ExcitationPlan` (quintic approach from the
measured pose, the Fourier excitation repeated as long as asked, quintic return to rest) into
waypoints ``spacing`` [s] apart, sent ahead in chunks of ``chunk`` [s]: each chunk starts where
the previous one ended (its start time is the previous chunk's last waypoint), so the controller
takes it over seamlessly, and an arm whose commander stops sending stops at the end of what it
got. :meth:`WaypointStream.stop_at` ends the excitation early (the precision was reached): the
waypoints already sent stay valid (the plan is the same up to the stop) and the next chunk
returns to rest.

Every waypoint is within the plan's position, velocity and acceleration limits (the plan clamps
its reference; :func:`~sysid_ros.core.sim.joint_trajectory.limit_violation` checks the chunk
again before it is handed out, so a waypoint beyond the limits is never sent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.excitation.plan import ExcitationPlan
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.joint_trajectory import TrajectoryPoints, limit_violation

__all__ = ["Chunk", "WaypointStream"]


@dataclass(frozen=True)
class Chunk:
    """Waypoints to send: ``start`` [s from the run's start] is the trajectory's start time
    (the message's header stamp is the run's start plus this), ``points.times`` from it; ``last``:
    the chunk ends the run (the arm is at rest at its last waypoint)."""

    start: float
    points: TrajectoryPoints
    last: bool


class WaypointStream:
    """Chunks of waypoints of one run (see the module docstring). ``model``, ``trajectory``,
    ``limits``, ``start (n,)`` [rad] (measured pose), ``ramp_time`` [s], ``rest (n,)`` or None
    (the start pose) as for :meth:`ExcitationPlan.build`; ``excitation_time`` [s] of excitation
    (it repeats the Fourier period as needed); ``spacing`` [s] between waypoints; ``chunk`` [s]
    of waypoints per message; ``lead`` [s]: a chunk is due when the arm is this close to the end
    of what it has."""

    def __init__(self, model: RobotModel, trajectory: FourierTrajectory, limits: Limits, start: np.ndarray, *,
                 excitation_time: float, ramp_time: float = 2.0, rest: np.ndarray | None = None,
                 spacing: float = 0.02, chunk: float = 2.0, lead: float = 1.0) -> None:
        if not (np.isfinite(spacing) and spacing > 0):
            raise SysIdError(f"waypoint spacing must be a finite number > 0 s, got {spacing}")
        if not (np.isfinite(chunk) and chunk >= spacing):
            raise SysIdError(f"chunk must be at least one waypoint spacing ({spacing:g} s), got {chunk}")
        if not (np.isfinite(lead) and 0 <= lead):
            raise SysIdError(f"lead must be a finite number >= 0 s, got {lead}")
        self.spacing, self.chunk, self.lead = float(spacing), float(chunk), float(lead)
        self._build = dict(model=model, trajectory=trajectory, start=np.asarray(start, dtype=float),
                           ramp_time=ramp_time, rest=rest, limits=limits, feedforward=False)
        self.plan = ExcitationPlan.build(excitation_time=excitation_time, **self._build)
        self.joint_names = model.dof_joint_names
        self.sent_until = 0.0  # [s from the run's start] last waypoint sent
        self.finished = False
        self.stopped_early = False

    @property
    def duration(self) -> float:
        """[s] of the whole run as planned now (approach, excitation, return)."""
        return self.plan.duration

    @property
    def excitation_end(self) -> float:
        """[s from the start] when the excitation ends (the return to rest begins)."""
        return self.plan.excitation_window[1]

    def stop_at(self, t: float) -> float:
        """End the excitation at ``t`` [s from the start] or, if later, where the waypoints
        already sent end (or where the approach ends); returns when the return to rest begins.
        Nothing changes if the excitation already ends by then; :attr:`stopped_early` says
        whether it did."""
        end = self.excitation_end
        self.limit_to(t)
        self.stopped_early = self.stopped_early or self.excitation_end < end
        return self.excitation_end

    def limit_to(self, t: float) -> None:
        """:meth:`stop_at` as planned from the start (a longest run), not counted as early."""
        t_stop = max(float(t), self.sent_until, self.plan.ramp_in + self.spacing)
        if t_stop < self.excitation_end:
            self.plan = ExcitationPlan.build(excitation_time=t_stop - self.plan.ramp_in, **self._build)

    def due(self, now: float) -> Chunk | None:
        """The next chunk when the arm at ``now`` [s from the start] is within ``lead`` of the
        end of what was sent (None otherwise, and after the last chunk)."""
        if self.finished or now + self.lead < self.sent_until:
            return None
        return self.next_chunk()

    def next_chunk(self) -> Chunk:
        """The waypoints after :attr:`sent_until`, ``chunk`` [s] of them (to the end of the run
        at most). Raises :class:`SysIdError` if one is beyond the limits (never sent)."""
        begin = self.sent_until
        end = min(begin + self.chunk, self.duration)
        k0 = int(np.floor(begin / self.spacing + 1e-9)) + 1
        k1 = int(np.floor(end / self.spacing + 1e-9))
        t = np.arange(k0, k1 + 1) * self.spacing
        if t.size == 0 or t[-1] < end - 1e-9:
            t = np.r_[t, end]  # the run's last waypoint exactly at its end
        q, dq, _, _, _, ddq = self.plan.command(t)
        last = t[-1] >= self.duration - 1e-9
        if last:  # at rest at the end: the controller holds there
            dq[-1], ddq[-1] = 0.0, 0.0
        points = TrajectoryPoints(t - begin, q, dq, ddq)
        lim = self.plan.limits
        why = limit_violation(points, lim.lower, lim.upper, lim.velocity, lim.acceleration, self.joint_names)
        if why:
            raise SysIdError(f"a waypoint would be beyond the limits, not sent: {why}")
        self.sent_until = float(t[-1])
        self.finished = last
        return Chunk(begin, points, last)
