"""Replaying a recorded run to the estimator node over DDS, paced by what it has processed
(rclpy imported only when a replay is made)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import numpy as np

#: [s] added to the run's times in the stamps sent (an unstamped, zero time would mean "now")
STAMP_OFFSET = 100.0


class PacedReplay:
    """Publishes ``run`` (a :class:`sysid_ros.core.data.Dataset`: ``t`` [s] (N,), ``q``, ``dq``,
    ``tau`` (N, n)) as stamped JointState messages on ``/joint_states`` from ``node``, up to
    ``per_tick`` per 10 ms timer tick once the estimator subscribes, and never more than
    ``window`` samples ahead of the data time the estimator reports on ``/estimator/progress``:
    flow control, so that a loaded host slows the replay down instead of losing samples (below
    the writer's 1,000-deep reliable history, DDS never drops one).

    ``extra(k)`` (optional) gives messages to publish just before sample ``k`` (bad input)."""

    def __init__(self, node, run, *, window: int = 500, per_tick: int = 20,
                 extra: Callable[[int], Iterable] | None = None) -> None:
        from builtin_interfaces.msg import Time
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        from sysid_ros.nodes.qos import PROGRESS

        self._node, self._run, self._window, self._per_tick, self._extra = node, run, window, per_tick, extra
        self._JointState = JointState
        self.stamps = STAMP_OFFSET + np.asarray(run.t)  # [s] the stamps sent
        self.sent = 0  # samples published
        self.processed = 0  # samples the estimator has reported processed
        node.create_subscription(Time, "/estimator/progress", self._on_progress, PROGRESS)
        self._pub = node.create_publisher(JointState, "/joint_states",
                                          QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        node.create_timer(0.01, self._tick)

    def message(self, k: int):
        """Sample ``k`` as a JointState stamped ``STAMP_OFFSET + t[k]``."""
        run = self._run
        msg = self._JointState(name=list(run.joint_names), position=run.q[k].tolist(),
                               velocity=run.dq[k].tolist(), effort=run.tau[k].tolist())
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round(self.stamps[k] * 1e9), 1_000_000_000)
        return msg

    def _on_progress(self, msg) -> None:
        self.processed = int(np.searchsorted(self.stamps, msg.sec + 1e-9 * msg.nanosec, side="right"))

    def _tick(self) -> None:
        if self._pub.get_subscription_count() == 0:
            return
        for _ in range(self._per_tick):
            k = self.sent
            if k >= len(self._run) or k - self.processed >= self._window:
                return
            for bad in self._extra(k) if self._extra is not None else ():
                self._pub.publish(bad)
            self._pub.publish(self.message(k))
            self.sent += 1

    def wait(self, condition: Callable[[], bool], what: Callable[[], str], *, proc=None,
             stall: float = 60.0, cap: float = 600.0) -> None:
        """Until ``condition()``, bounded on progress: fails (naming ``what()``, the samples sent
        and processed) when the estimator has processed nothing new for ``stall`` [s] of wall
        time once the replay started, after ``cap`` [s] in all, or at once when its process
        ``proc`` has exited."""
        start = last_change = time.monotonic()
        seen = -1
        while not condition():
            now = time.monotonic()
            if proc is not None:
                assert proc.poll() is None, f"the estimator exited {proc.returncode} waiting for {what()}"
            if self.processed != seen or self.sent == 0:  # (the node's start-up: bounded by cap)
                seen, last_change = self.processed, now
            assert now - last_change < stall and now - start < cap, (
                f"{what()}: sent {self.sent}, processed {self.processed} of {len(self._run)} "
                f"({now - start:.0f} s, {now - last_change:.0f} s without progress)")
            time.sleep(0.05)
