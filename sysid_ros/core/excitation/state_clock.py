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
NTP does). The pairs are kept one per ``bucket`` (the least-delayed of each), so an estimate costs
the same at any state rate. The rate ``b`` (the states' seconds per local second: 1 for a robot
or a real-time simulator, another value for a simulator at a real-time factor) is the slope
between the least-delayed pairs of the window's first and last thirds (found at rate 1, then at
the rate so found: at another rate the first pass picks by time, not delay; the first and last pairs
would carry their own delays into it: on a busy host a pair 0.3 s late made the rate 15 % off),
taken as exactly 1 within ``snap`` of it.

The time handed out never goes back and changes speed smoothly: it runs at the estimated rate, and
moves towards a new estimate (a less-delayed state, the window's least-delayed pair leaving it) at
most ``slew`` faster or slower (5 %: 0.1 ms per 2 ms cycle), never in a step; only an estimate
more than ``jump`` away, or one during the first ``window`` after a (re)start (the rate not yet
measured), is taken at once. Holding the time while
an estimate came back (seen: 16 % of a loaded run's commands repeated the previous time, others
then jumped ahead) made the commanded trajectory a staircase again.

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
    ``snap``: a rate within this relative distance of 1 is taken as 1; ``slew``: the largest
    relative change of speed while following a new estimate; ``jump`` [s]: a larger difference is
    taken at once; ``bucket`` [s, local]: one pair (the least delayed) kept per bucket.
    """

    def __init__(self, *, window: float = 2.0, timeout: float = 1.0, snap: float = 0.05, slew: float = 0.05,
                 jump: float = 0.25, bucket: float = 0.01) -> None:
        if not (window > 0 and timeout > 0 and 0 <= snap < 1 and 0 < slew < 1 and jump > 0
                and 0 < bucket < window):
            raise SysIdError(f"StateClock: expected window > 0 s, timeout > 0 s, 0 <= snap < 1, "
                             f"0 < slew < 1, jump > 0 s and 0 < bucket < window, got {window}, {timeout}, "
                             f"{snap}, {slew}, {jump}, {bucket}")
        self.window, self.timeout, self.snap = float(window), float(timeout), float(snap)
        self.slew, self.jump, self.bucket = float(slew), float(jump), float(bucket)
        self._pairs: deque[tuple[float, float]] = deque()  # one per bucket, by reception
        self._newest: float | None = None  # reception time of the newest state
        self._rate = 1.0
        self._offset: float | None = None  # the estimate: stamp = offset + rate * local
        self._last: tuple[float, float] | None = None  # (local, time) handed out last
        self._since: float | None = None  # reception of the first state since the (re)start

    def reset(self) -> None:
        """Forget every pair (a new run, a jump of the stamps)."""
        self._pairs.clear()
        self._newest = self._offset = self._last = self._since = None
        self._rate = 1.0

    def observe(self, stamp: float, received: float) -> None:
        """One state stamped ``stamp`` received at ``received``. A stamp that goes back (a
        restarted simulator, a replayed bag) restarts the estimate."""
        stamp, received = float(stamp), float(received)
        pairs = self._pairs
        if pairs and stamp < pairs[-1][0]:
            self.reset()
        self._newest = received
        if self._since is None:
            self._since = received
        if pairs and received - pairs[-1][1] < self.bucket:  # the same bucket: keep the least delayed
            if stamp - received > pairs[-1][0] - pairs[-1][1]:
                pairs[-1] = (stamp, received)
        else:
            pairs.append((stamp, received))
        while len(pairs) > 1 and received - pairs[0][1] > self.window:
            pairs.popleft()
        self._estimate()

    def _estimate(self) -> None:
        pairs = self._pairs
        rate = 1.0
        span = pairs[-1][1] - pairs[0][1]
        if span >= 0.3:
            third = span / 3.0
            head = [p for p in pairs if p[1] <= pairs[0][1] + third]
            tail = [p for p in pairs if p[1] >= pairs[-1][1] - third]
            b = 1.0
            for _ in range(2):  # the least delayed at the rate found (first pass: at 1)
                first = max(head, key=lambda p, b=b: p[0] - b * p[1])
                last = max(tail, key=lambda p, b=b: p[0] - b * p[1])
                if not last[1] > first[1]:
                    break
                b = (last[0] - first[0]) / (last[1] - first[1])
                if not b > 0:
                    b = 1.0
                    break
            if abs(b - 1.0) > self.snap:
                rate = b
        self._rate = rate
        self._offset = max(s - rate * r for s, r in pairs)

    @property
    def rate(self) -> float:
        """``b``: the states' seconds per local second (1 until the window spans 0.3 s)."""
        return self._rate

    def now(self, now: float) -> float | None:
        """The states' time at local instant ``now``, or ``None`` before the first state and once
        the newest is older than ``timeout``. Never earlier than a time it returned before."""
        if self._offset is None or now - self._newest > self.timeout:
            return None
        target = self._offset + self._rate * now
        last = self._last
        settling = now - self._since < self.window  # the rate not measured yet: each estimate as it comes
        if last is None or settling or abs(target - (last[1] + self._rate * (now - last[0]))) > self.jump:
            t = target
        else:
            dt = max(now - last[0], 0.0)
            free = last[1] + self._rate * dt
            step = self.slew * self._rate * dt
            t = free + min(max(target - free, -step), step)
        if last is not None and t < last[1]:
            t = last[1]
        self._last = (now, t)
        return t
