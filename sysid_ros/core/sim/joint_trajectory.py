"""A joint trajectory as ros2_control's ``joint_trajectory_controller`` follows it (no ROS here).

A trajectory is a start time ``t0`` [s] and waypoints at ``t0 + time_from_start`` with positions
and, optionally, velocities and accelerations (:class:`TrajectoryPoints`). Between two waypoints
the reference is the spline the controller uses for what the waypoints give: quintic when both
carry position, velocity and acceleration; cubic with position and velocity; linear with
positions only. Before the first waypoint the reference runs from the state the arm was
commanded when the trajectory started (``t0``) to that waypoint, by the same rule; after the last
one it holds the last position at rest.

:class:`TrajectoryFollower` keeps the trajectory being executed. A new trajectory replaces the
remaining one from its start time on (a start time of 0, or one in the past, means "now"); the
old one goes on until then. A trajectory without waypoints stops the arm: it holds the position
commanded when it arrives. Waypoints name their joints in any order (all of the controller's
joints; a trajectory naming others is refused whole), times must increase strictly, values must
be finite; :func:`limit_violation` is the check a controller that refuses points beyond its
limits applies to a whole trajectory before accepting it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from sysid_ros.core.errors import DataError

__all__ = ["TrajectoryFollower", "TrajectoryPoints", "evaluate_polynomial", "limit_violation",
           "segment_coefficients"]


@dataclass(frozen=True)
class TrajectoryPoints:
    """Waypoints of one trajectory in the controller's joint order: ``times (K,)`` [s] from the
    trajectory's start (``time_from_start``), ``positions (K, n)`` [rad], ``velocities`` and
    ``accelerations`` ``(K, n)`` or ``None`` (not given)."""

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None

    @classmethod
    def from_message(cls, joint_names, names, times, positions, velocities=(),
                     accelerations=()) -> TrajectoryPoints:
        """Waypoints named ``names`` (any order) reordered into ``joint_names``: ``times (K,)``,
        ``positions`` etc. as ``K`` sequences of ``len(names)`` values each (a message's points;
        empty velocity/acceleration sequences: not given). Raises :class:`DataError` naming
        what is wrong: unknown or missing joints, sizes, non-increasing times, non-finite values."""
        names, joint_names = list(names), list(joint_names)
        if len(set(names)) != len(names):
            raise DataError(f"joint names repeat: {names}")
        unknown = [n for n in names if n not in joint_names]
        missing = [n for n in joint_names if n not in names]
        if unknown or missing:
            raise DataError(f"expected the joints {joint_names} (any order), got {names}"
                            + (f": unknown {unknown}" if unknown else "")
                            + (f", missing {missing}" if missing else ""))
        order = [names.index(j) for j in joint_names]
        k, n = len(times), len(names)
        t = np.asarray(times, dtype=float).reshape(-1)

        def table(rows, what: str, optional: bool) -> np.ndarray | None:
            rows = list(rows)
            if optional and all(len(r) == 0 for r in rows):
                return None
            if len(rows) != k or any(len(r) != n for r in rows):
                raise DataError(f"{what}: expected {k} points of {n} values (one per joint name), got "
                                f"{[len(r) for r in rows]}")
            arr = np.asarray(rows, dtype=float).reshape(k, n)[:, order]
            if not np.all(np.isfinite(arr)):
                raise DataError(f"{what}: non-finite values")
            return arr

        q = table(positions, "positions", False)
        dq = table(velocities if velocities else [()] * k, "velocities", True)
        ddq = table(accelerations if accelerations else [()] * k, "accelerations", True)
        if not np.all(np.isfinite(t)) or np.any(t < 0) or np.any(np.diff(t) <= 0):
            raise DataError(f"time_from_start must be finite, >= 0 and strictly increasing, got {t.tolist()}")
        return cls(t, q, dq, ddq)

    @property
    def empty(self) -> bool:
        return self.times.size == 0


def segment_coefficients(span: float, a: tuple, b: tuple) -> np.ndarray:
    """Polynomial coefficients ``(6, n)`` in local time ``s ∈ [0, span]`` [s] (``q(s) = Σ c_k s^k``)
    of the segment from ``a = (q, dq, ddq)`` to ``b`` (each ``(n,)``; ``dq``/``ddq`` None when not
    given): quintic when both ends give velocity and acceleration, cubic with velocities, linear
    with positions only (joint_trajectory_controller's spline rule); a segment of no length jumps
    to ``b``'s position."""
    p0, v0, a0 = a
    p1, v1, a1 = b
    c = np.zeros((6, p1.size))
    span = float(span)
    if span <= 0:
        c[0] = p1
        return c
    c[0] = p0
    if v0 is None or v1 is None:  # linear
        c[1] = (p1 - p0) / span
        return c
    c[1] = v0
    if a0 is None or a1 is None:  # cubic (Hermite)
        dp = p1 - p0
        c[2] = (3 * dp - (2 * v0 + v1) * span) / span**2
        c[3] = (-2 * dp + (v0 + v1) * span) / span**3
        return c
    c[2] = 0.5 * a0
    dp = p1 - p0 - v0 * span - 0.5 * a0 * span**2
    dv = v1 - v0 - a0 * span
    da = a1 - a0
    c[3] = (10 * dp - 4 * dv * span + 0.5 * da * span**2) / span**3
    c[4] = (-15 * dp + 7 * dv * span - da * span**2) / span**4
    c[5] = (6 * dp - 3 * dv * span + 0.5 * da * span**2) / span**5
    return c


_D1 = np.arange(1, 6, dtype=float)  # derivative factors
_D2 = np.array([2.0, 6.0, 12.0, 20.0])


def evaluate_polynomial(c: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q, dq, ddq)`` each ``(N, n)`` of coefficients ``c (N, 6, n)`` at local times ``s (N,)``."""
    powers = np.asarray(s, dtype=float)[:, None] ** np.arange(6)  # (N, 6)
    q = np.einsum("nk,nkj->nj", powers, c)
    dq = np.einsum("nk,nkj->nj", powers[:, :5] * _D1, c[:, 1:])
    ddq = np.einsum("nk,nkj->nj", powers[:, :4] * _D2, c[:, 2:])
    return q, dq, ddq


def limit_violation(points: TrajectoryPoints, lower: np.ndarray, upper: np.ndarray,
                    velocity: np.ndarray, acceleration: np.ndarray | None = None,
                    joint_names=None, tolerance: float = 1e-9) -> str:
    """The first waypoint beyond the limits, as one line ('' when every one is within them):
    positions in ``[lower, upper] (n,)`` [rad], ``|velocity| ≤ velocity (n,)`` [rad/s],
    ``|acceleration| ≤ acceleration (n,)`` [rad/s²] (None: not checked)."""
    names = list(joint_names) if joint_names is not None else [f"joint {j}" for j in range(len(lower))]
    checks = [("position", points.positions, lambda x: (x < lower - tolerance) | (x > upper + tolerance),
               lambda j: f"[{lower[j]:.4g}, {upper[j]:.4g}] rad")]
    if points.velocities is not None:
        checks.append(("velocity", points.velocities, lambda x: np.abs(x) > velocity + tolerance,
                       lambda j: f"±{velocity[j]:.4g} rad/s"))
    if points.accelerations is not None and acceleration is not None:
        checks.append(("acceleration", points.accelerations, lambda x: np.abs(x) > acceleration + tolerance,
                       lambda j: f"±{acceleration[j]:.4g} rad/s²"))
    for what, values, bad, allowed in checks:
        hits = np.argwhere(bad(values))
        if hits.size:
            k, j = (int(x) for x in hits[0])
            return (f"point {k} (t={points.times[k]:.3f} s): {names[j]} {what} {values[k, j]:.4g} "
                    f"outside {allowed(j)} ({len(hits)} value(s) beyond the limits)")
    return ""


class TrajectoryFollower:
    """The reference of a joint_trajectory_controller over time: :meth:`replace` with a new
    trajectory, :meth:`sample` at any time (see the module docstring). ``hold (n,)``: the
    position held before the first trajectory [rad]."""

    def __init__(self, hold: np.ndarray) -> None:
        hold = np.asarray(hold, dtype=float).copy()
        self.n = hold.size
        self._zero = np.zeros(self.n)
        self._segments: list[_Segments] = []  # by start time; each runs until the next starts
        self._hold = hold
        self.accepted = 0

    @property
    def horizon(self) -> float:
        """[s] the end (last waypoint) of the newest trajectory; -inf before any. A trajectory
        without waypoints (stop) reaches +inf: the arm holds for good."""
        return self._segments[-1].end if self._segments else -np.inf

    def replace(self, points: TrajectoryPoints, *, start: float, now: float) -> None:
        """Execute ``points`` timed from ``start`` [s] (0: from ``now``) on, taking over at
        ``max(start, now)``; what was due before stays. Waypoints due by then are dropped (a
        trajectory stamped in the past is joined where it is now; one wholly in the past goes to
        its last waypoint)."""
        if not points.empty and points.positions.shape[1:] != (self.n,):
            raise DataError(f"expected waypoints of {self.n} joints, got {points.positions.shape}")
        origin = float(now) if start <= 0 else float(start)
        t0 = max(origin, float(now))
        anchor = tuple(x[0] for x in self.sample(np.array([t0])))
        if points.empty:
            anchor = (anchor[0], self._zero, self._zero)
        times = origin + points.times
        keep = times > t0 + 1e-12
        if not points.empty and not keep.all():
            last = points.positions[-1]
            points = TrajectoryPoints(points.times[keep], points.positions[keep],
                                      None if points.velocities is None else points.velocities[keep],
                                      None if points.accelerations is None else points.accelerations[keep])
            times = times[keep]
            if points.empty:  # every waypoint in the past: go to the last one
                points, times = TrajectoryPoints(np.array([0.0]), last[None]), np.array([t0])
        self._segments = [seg for seg in self._segments if seg.start < t0]  # replaced from t0 on
        self._segments.append(_Segments(t0, anchor, times, points))
        while len(self._segments) > 1 and self._segments[1].start <= now:  # over: never sampled again
            self._segments.pop(0)
        self.accepted += 1

    def sample(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Reference ``(q, dq, ddq)`` each ``(N, n)`` at times ``t (N,)`` [s]."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        coeffs = np.zeros((t.size, 6, self.n))
        coeffs[:, 0] = self._hold
        local = np.zeros(t.size)
        starts = [seg.start for seg in self._segments]
        for i, seg in enumerate(self._segments):
            stop = starts[i + 1] if i + 1 < len(starts) else np.inf
            mask = (t >= seg.start) & (t < stop)
            if mask.any():
                # piece of each t: a waypoint's own time ends the piece before it (the last
                # waypoint's velocity holds at its time; the hold starts after it)
                k = np.maximum(np.searchsorted(seg.knots, t[mask], side="left") - 1, 0)
                coeffs[mask] = seg.coeffs[k]
                local[mask] = np.minimum(t[mask] - seg.knots[k], seg.spans[k])
        return evaluate_polynomial(coeffs, local)


    def sample_one(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`sample` at one time ``t`` [s]: ``(q, dq, ddq)`` each ``(n,)`` (the per-step path
        of a simulation: no array bookkeeping)."""
        seg = None
        for candidate in self._segments:
            if candidate.start <= t:
                seg = candidate
            else:
                break
        if seg is None:
            return self._hold.copy(), self._zero.copy(), self._zero.copy()
        k = max(bisect.bisect_left(seg.knot_list, t) - 1, 0)
        c = seg.coeffs[k]
        s = min(t - seg.knot_list[k], seg.spans[k])
        s2, s3 = s * s, s * s * s
        q = c[0] + s * c[1] + s2 * c[2] + s3 * c[3] + s2 * s2 * c[4] + s3 * s2 * c[5]
        dq = c[1] + 2 * s * c[2] + 3 * s2 * c[3] + 4 * s3 * c[4] + 5 * s2 * s2 * c[5]
        ddq = 2 * c[2] + 6 * s * c[3] + 12 * s2 * c[4] + 20 * s3 * c[5]
        return q, dq, ddq


class _Segments:
    """One trajectory as polynomial pieces: ``knots (K+1,)`` absolute start times [s] of the
    pieces (the anchor to waypoint 0, waypoint k−1 to k, then the hold after the last),
    ``spans (K+1,)`` their lengths (inf for the hold), ``coeffs (K+1, 6, n)``."""

    def __init__(self, start: float, anchor: tuple, times: np.ndarray, points: TrajectoryPoints) -> None:
        self.start = start
        self.stop = bool(points.empty)
        n = anchor[0].size
        if points.empty:
            self.knots, self.spans = np.array([start]), np.array([np.inf])
            self.knot_list = [start]
            self.coeffs = np.zeros((1, 6, n))
            self.coeffs[0, 0] = anchor[0]
            self.end = np.inf
            return
        vel, acc = points.velocities, points.accelerations

        def state(k: int) -> tuple:
            if k < 0:  # the anchor, with the fields the waypoints give
                return (anchor[0], None if vel is None else anchor[1],
                        None if vel is None or acc is None else anchor[2])
            return (points.positions[k], None if vel is None else vel[k], None if acc is None else acc[k])

        knots = np.r_[start, times]
        pieces = [segment_coefficients(knots[k + 1] - knots[k], state(k - 1), state(k))
                  for k in range(times.size)]
        hold = np.zeros((6, n))
        hold[0] = points.positions[-1]
        self.knots = knots
        self.knot_list = knots.tolist()
        self.spans = np.r_[np.diff(knots), np.inf]
        self.coeffs = np.stack([*pieces, hold])
        self.end = float(times[-1])
