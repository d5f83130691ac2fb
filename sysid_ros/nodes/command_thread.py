"""The trajectory publisher's command thread: one MIT command per control cycle on the joint
states' clock, whatever the node's executor is doing.

A command stream paced by the joint states a node's executor takes follows that executor: on a
busy host it takes one state in ~10 from its depth-1 queue, and the bridge got ~55 commands/s in
steps (the wrists' stick-slip biased the identified payload CoM; docs/damiao-bridge.md). This
thread instead wakes at ``rate`` on a fixed schedule (``SCHED_FIFO`` at ``realtime_priority``
where the host allows it, said once if not) and asks the node for the command at the states' time
*now* (:class:`~sysid_ros.core.excitation.state_clock.StateClock`). A wake-up later than a period
skips the cycles it missed (never a burst of catch-up commands) and counts them.

Fail-safe: nothing is sent while the states are silent for ``state_timeout`` (the motors' or the
simulator's watchdog takes over); :meth:`CommandThread.stop` (called by the node's
``destroy_node``, which :func:`sysid_ros.nodes.spin` runs on every exit path: SIGINT, SIGTERM, an
error in a callback) ends the thread before the publisher is destroyed; an error in the thread
stops the commands and is raised in the node's executor (a guard condition), which ends the node.

The states reach the thread without the executor: ``poll`` (the trajectory publisher's) takes the
newest joint state from the subscription at the start of each cycle, and the subscription and its
QoS events are left out of the executor's wait set, so no state wakes the executor. The node's
other threads then have little to do, and the node runs them at ``SCHED_FIFO 1`` (the executor holds
the GIL while it runs; Fast DDS's threads take the writer locks a publish takes): no CPU hog
preempts one of them while it holds what this thread needs. Measured in the emulated hardware graph
on the shared 2-core host (test_hardware_launch_graph_converges beside two CPU hogs, 500 Hz):

* before (each state a callback of the normally scheduled executor): 44-49 % of the cycles missed
  (load 11-18);
* states taken by this thread, the other threads still normal: 59-63 % missed (11,530 of 19,387 and
  11,974 of 19,080, load 9-22), wake-ups late by 19-33 ms at p99: not enough by itself;
* and the executor and DDS threads at ``SCHED_FIFO 1``: 3,128 of 63,500 missed (4.9 %, load 18-29),
  wake-ups late by 0.6-1.4 ms at p99; but rclpy still waited on the polled subscription's QoS
  events, which woke the executor's ``rcl_wait`` for every state (0.56-0.78 of a core at real-time
  priority, the node alone fed 600 states/s at load 15);
* with those events left out too (as landed): the executor 0.04 of a core (38 wake-ups/s: its two
  timers), the command thread 0.2-0.35; in the graph the whole node 0.3-0.4 of a core at real-time
  priority; 4.7-6.5 % of the cycles missed (1,161 of 24,886; 830 of 16,154; 775 of 11,886; load
  13-20).

Before, with every thread of the node at ``SCHED_FIFO 1`` (executor taking each state), 2.4-3.5 % were
missed but the node took 0.9-1.2 of the 2 cores and the estimator and recorder starved.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.excitation.state_clock import StateClock

__all__ = ["CommandThread"]


class CommandThread:
    """Calls ``command(t)`` once per period ``1/rate`` [s] with ``t`` the joint states' time now
    [s] (``lock`` held); ``command`` returns whether a run's command was sent (such cycles, and
    the ones skipped in between, are counted). ``node``: the rclpy node (logger, guard condition).
    States are fed with :meth:`observe` (``lock`` held): by ``poll``, called at the start of every
    cycle (``lock`` held) to take the joint states that came since the last one, or by the node's
    executor when ``poll`` is None."""

    def __init__(self, node, *, rate: float, priority: int, state_timeout: float, lock: threading.Lock,
                 command: Callable[[float], bool], poll: Callable[[], None] | None = None) -> None:
        if not rate > 0:
            raise SysIdError(f"rate must be > 0 Hz, got {rate}")
        if not 0 <= priority <= 99:
            raise SysIdError(f"realtime_priority must be 0 (normal scheduling) or a SCHED_FIFO priority "
                             f"1..99, got {priority}")
        if not state_timeout > 0:
            raise SysIdError(f"state_timeout must be > 0 s, got {state_timeout}")
        self.clock = StateClock(timeout=state_timeout)
        self.period = 1.0 / rate
        self.priority = int(priority)
        self.cycles = 0  # this run's command cycles sent
        self.missed = 0  # and skipped (late wake-ups)
        self._node, self._lock, self._command, self._poll = node, lock, command, poll
        self._log = node.get_logger()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        # an error in the thread is raised by the executor (which ends the node): guard
        # conditions are rclpy's way to wake an executor from another thread
        self._failed = node.create_guard_condition(self._raise_error)
        self._thread = threading.Thread(target=self._run, name="commands", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def observe(self, stamp: float) -> None:
        """A joint state stamped ``stamp`` [s] has just been taken (call with ``lock`` held)."""
        self.clock.observe(stamp, time.monotonic())

    def reset(self) -> None:
        """A new run: its counts from zero (call with ``lock`` held)."""
        self.cycles = self.missed = 0

    def summary(self) -> str:
        """The run's counts, for the log line that says it is done."""
        return (f"{self.missed} of {self.cycles + self.missed} command cycles missed (late wake-ups of "
                "the command thread, skipped)")

    def stop(self, timeout: float = 2.0) -> bool:
        """Ask the thread to end and wait for it (up to ``timeout`` [s]); True once it has ended
        (no command is sent after that)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    # ------------------------------------------------------------------------------ the thread
    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # no more commands (the watchdogs hold the arm); the node ends
            if self._stop.is_set():
                return  # torn down under it (the publisher destroyed): nothing is wrong
            self._error = exc
            self._log.error(f"the command thread failed: {type(exc).__name__}: {exc}; no more commands")
            self._failed.trigger()

    def _raise_error(self) -> None:
        """In the executor: the thread's error ends the node (:func:`sysid_ros.nodes.spin`)."""
        if self._error is not None:
            raise SysIdError(f"the command thread failed ({type(self._error).__name__}: {self._error}): "
                             "no more commands were sent") from self._error

    def _loop(self) -> None:
        from sysid_ros.hardware.realtime import request_realtime

        grant = request_realtime(self.priority, lock_memory=False)
        if grant.priority and not grant.granted:
            self._log.warning(f"command thread: normal scheduling ({grant.refused}); on a busy host it can "
                              "miss command cycles (counted when the run is done)")
        period, stop, poll = self.period, self._stop, self._poll
        counting = False
        due = time.monotonic()
        while not stop.is_set():
            with self._lock:
                if poll is not None:
                    poll()
                t = self.clock.now(time.monotonic())
                counting = t is not None and self._command(t)
                if counting:
                    self.cycles += 1
            due += period
            now = time.monotonic()
            if now > due:  # overran or woke late: skip the lost cycles, keep the phase
                skipped = int((now - due) // period) + 1
                due += skipped * period
                if counting:
                    with self._lock:
                        self.missed += skipped
            stop.wait(max(due - time.monotonic(), 0.0))
