"""The joint states' time base read from a local clock, for a command thread that must send one
command per control cycle whatever the delivery of the joint states does (no ROS).

A command stream paced by the joint states it receives follows their delivery: on a busy host a
subscriber that wakes every 20 ms (one state in ten taken, the others dropped by a keep-last
queue) commands at 50 Hz in steps, and a motor holds each step until the next (seen at load 9-20:
1,218 commands in 60 s at 500 Hz, gaps up to 0.32 s; the wrist joints stopped and restarted at
every step, in Coulomb friction's stick-slip, and the identified payload CoM came out 6-11 mm off).
:class:`StateClock` instead maps the local monotonic clock to the states' stamps, so a thread
woken at a fixed rate can command the trajectory at the states' time *now*.

Each state gives a pair ``(stamp, received)``: ``stamp = a + b·received − b·delay`` with a
delivery delay ``delay ≥ 0``. So every pair's ``stamp − b·received`` is at most the offset ``a``,
and the least-delayed pair of a recent window gives the best estimate (the lower envelope, as
NTP does). The rate ``b`` (the states' seconds per local second: 1 for a robot or a real-time
simulator, another value for a simulator at a real-time factor) is the slope between the window's
first and last pairs, taken as exactly 1 within ``snap`` of it (delivery delays would otherwise
make the command times wobble by their spread over the window).

Times: ``stamp`` [s] in the states' time base, ``received`` and ``now`` [s] of a monotonic clock.
"""

from __future__ import annotations

from collections import deque

from sysid_ros.core.errors import SysIdError

__all__ = ["StateClock"]


class StateClock:
    """The states' time at a local instant, from recently received ``(stamp, received)`` pairs.

    ``window`` [s, local]: pairs kept for the estimates; ``timeout`` [s, local]: with no state for
    this long :meth:`now` is ``None`` (the commands stop and the motors' watchdog takes over);
    ``snap``: a rate within this relative distance of 1 is taken as 1.
    """

    def __init__(self, *, window: float = 2.0, timeout: float = 1.0, snap: float = 0.05) -> None:
        if not (window > 0 and timeout > 0 and 0 <= snap < 1):
            raise SysIdError(f"StateClock: expected window > 0 s, timeout > 0 s and 0 <= snap < 1, got "
                             f"{window}, {timeout}, {snap}")
        self.window, self.timeout, self.snap = float(window), float(timeout), float(snap)
        self._pairs: deque[tuple[float, float]] = deque()
        self._last: float | None = None  # the latest time handed out (never goes back)

    def reset(self) -> None:
        """Forget every pair (a new run, a jump of the stamps)."""
        self._pairs.clear()
        self._last = None

    def observe(self, stamp: float, received: float) -> None:
        """One state stamped ``stamp`` received at ``received``. A stamp that goes back (a
        restarted simulator, a replayed bag) restarts the estimate."""
        pairs = self._pairs
        if pairs and stamp < pairs[-1][0]:
            self.reset()
        pairs.append((float(stamp), float(received)))
        while len(pairs) > 1 and received - pairs[0][1] > self.window:
            pairs.popleft()

    @property
    def rate(self) -> float:
        """``b``: the states' seconds per local second (1 until the window spans 0.2 s)."""
        pairs = self._pairs
        if len(pairs) < 2 or pairs[-1][1] - pairs[0][1] < 0.2:
            return 1.0
        b = (pairs[-1][0] - pairs[0][0]) / (pairs[-1][1] - pairs[0][1])
        if abs(b - 1.0) <= self.snap or not b > 0:
            return 1.0
        return b

    def now(self, now: float) -> float | None:
        """The states' time at local instant ``now``, or ``None`` before the first state and once
        the newest is older than ``timeout``. Never earlier than a time it returned before."""
        pairs = self._pairs
        if not pairs or now - pairs[-1][1] > self.timeout:
            return None
        b = self.rate
        offset = max(s - b * r for s, r in pairs)
        t = offset + b * now
        if self._last is not None and t < self._last:
            t = self._last
        self._last = t
        return t
