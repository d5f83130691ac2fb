"""How ``trajectory_publisher`` takes its joint states (a mixin of
:class:`~sysid_ros.nodes.trajectory_publisher.TrajectoryPublisherNode`).

Lockstep and ros2_control runs take each state in the executor (:meth:`JointStateIntake._on_state`).
MIT commands outside lockstep: the command thread takes them itself, the newest once per cycle
(:meth:`JointStateIntake._take_states`, the subscription in a :class:`~sysid_ros.nodes.intake.PolledGroup`
without its QoS events), so no state wakes the executor; an executor timer plans a run asked for
(:meth:`JointStateIntake._start_if_asked`), and the executor's and Fast DDS's threads run at
``SCHED_FIFO 1`` (:meth:`JointStateIntake._raise_others`). Why: docs/damiao-bridge.md, "The commands".
"""

from __future__ import annotations

import numpy as np
from sensor_msgs.msg import JointState

from sysid_ros.nodes.intake import take_pending

__all__ = ["TAKE_LIMIT", "JointStateIntake"]

#: states taken per command cycle at most (the subscription keeps one: the newest)
TAKE_LIMIT = 8


class JointStateIntake:
    """The joint-state callbacks of the trajectory publisher (``self`` is the node)."""

    def _on_state(self, msg: JointState) -> None:
        """A joint state taken by the executor (lockstep, ros2_control, or an rclpy that cannot
        take messages outside it)."""
        q = self._pose(msg)
        if q is None:
            return
        with self._lock:
            stamp = self._state(msg, q)
            self._tick(q, stamp)

    def _take_states(self) -> None:
        """The command thread's cycle (``self._lock`` held): the newest joint state that came since
        the last cycle, if any, feeds the states' clock; the first one after a run was planned
        starts it (the older ones of a batch say nothing more: only the newest matters)."""
        taken = take_pending(self._states, TAKE_LIMIT)
        if not taken:
            return
        msg = taken[-1]
        q = self._pose(msg)
        if q is None:
            return
        stamp = self._state(msg, q)
        if self.plan is not None and self._t0 is None:
            self._tick(q, stamp)

    def _start_if_asked(self) -> None:
        """Polled states (executor timer): a run asked for is planned from the newest state (once
        the ``start_after`` consumers are ready); the command thread then starts it. The first call
        raises the executor's and the middleware's threads (:meth:`_raise_others`)."""
        if not self._others_raised:
            self._others_raised = True
            self._raise_others()
        with self._lock:
            if self.plan is None and self._start_requested and self._latest is not None:
                self._tick(*self._latest)

    def _raise_others(self) -> None:
        """In the executor: with a real-time command thread, this node's other Python threads (the
        executor: it holds the GIL while it runs) and Fast DDS's threads (a publish takes the writer
        locks they take) at ``SCHED_FIFO 1``, so no CPU hog preempts one of them while it holds
        what the command thread needs. They take little CPU: no state wakes the executor."""
        if self.commands is None or self.commands.priority == 0:
            return
        from sysid_ros.hardware.realtime import raise_process_threads

        raised, refused = raise_process_threads(1)
        if refused:
            self.get_logger().warning(f"the executor and DDS threads keep normal scheduling ({refused}): "
                                      "on a busy host the command thread can miss cycles")
        else:
            self.get_logger().info(f"{len(raised)} threads of the executor and DDS at SCHED_FIFO 1 (they "
                                   "share the GIL and DDS's locks with the command thread)")

    def _pose(self, msg: JointState) -> np.ndarray | None:
        """The model's joint positions [rad] from a state, or None (warned, throttled) when it
        lacks one or one is not finite."""
        values = dict(zip(msg.name, msg.position, strict=False))
        missing = [n for n in self.names if n not in values]
        if missing:
            self.get_logger().warning(f"joint states lack joints {missing} (got {list(msg.name)})",
                                      throttle_duration_sec=5.0)
            return None
        q = np.array([values[n] for n in self.names])
        if not np.all(np.isfinite(q)):
            self.get_logger().warning(f"non-finite joint positions {q.tolist()}: ignored",
                                      throttle_duration_sec=5.0)
            return None
        return q

    def _state(self, msg: JointState, q: np.ndarray) -> float:
        """``self._lock`` held: the state's stamp [s] (the node's clock for a driver that never
        stamps), kept as the newest and fed to the states' clock."""
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if self._latest is not None and stamp == self._latest[1] == 0.0:
            self._unstamped = True  # a driver that never stamps: the node's clock
        if self._unstamped:
            stamp = self.get_clock().now().nanoseconds * 1e-9
        self._latest = (q, stamp)
        if self.commands is not None:
            self.commands.observe(stamp)
        return stamp

