"""Real-time scheduling for a thread that must keep deadlines on a busy host (no ROS).

:func:`request_realtime` is called by the thread itself (the bridge's control loop, the emulated
motors' thread): it asks the kernel for ``SCHED_FIFO`` at a priority (1–99) for the calling thread,
and — once per process — locks the process's memory (``mlockall(MCL_CURRENT | MCL_FUTURE |
MCL_ONFAULT)``: no page of the loop is ever swapped out or paged in from disk) and lowers Python's
GIL switch interval to :data:`SWITCH_INTERVAL` (a thread waiting for the GIL gets it within that
time rather than the default 5 ms). A ``SCHED_FIFO`` thread runs before every normal thread of the
machine (CPU hogs, compilers, other nodes) whenever it is ready, so its wake-up latency stays in
the tens of microseconds whatever the load; the kernel's real-time throttling (95 % of each
second by default) keeps a runaway loop from freezing the host.

Where the host refuses (no ``CAP_SYS_NICE`` and no ``rtprio`` limit — ``ulimit -r`` — at least the
priority; see docs/damiao-bridge.md), the thread keeps normal scheduling and
:meth:`RealtimeGrant.report` says so once per process and reason, with what to do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
import threading
from dataclasses import dataclass

__all__ = ["MAX_PRIORITY", "SWITCH_INTERVAL", "RealtimeGrant", "raise_process_threads", "request_realtime",
           "restore_threads"]

MAX_PRIORITY = 99
"""Highest ``SCHED_FIFO`` priority on Linux (1 is the lowest)."""
SWITCH_INTERVAL = 5e-4
"""[s] Python's GIL switch interval in a process with a deadline thread (default 5e-3)."""

_MCL_CURRENT, _MCL_FUTURE, _MCL_ONFAULT = 1, 2, 4
_process_lock = threading.Lock()
_memory: tuple[bool, str] | None = None  # (locked, why not) once per process
_said: set[str] = set()                  # refusal texts already reported in this process


@dataclass(frozen=True)
class RealtimeGrant:
    """What the calling thread got. ``priority`` is the one asked for (0: none asked);
    ``scheduling`` the policy in force, e.g. ``"SCHED_FIFO 50"`` or ``"SCHED_OTHER"``;
    ``refused`` why real-time scheduling or the memory lock was not granted (empty if both were)."""

    priority: int
    granted: bool
    memory_locked: bool
    scheduling: str
    refused: str = ""

    def report(self, log: logging.Logger, who: str) -> None:
        """One log line: info when granted; a warning when refused, once per process and reason
        (a bridge re-activated ten times says it once)."""
        if self.priority == 0:
            text = (f"{who}: normal scheduling ({self.scheduling}; realtime_priority 0: no real-time "
                    "scheduling asked)")
            if text not in _said:
                _said.add(text)
                log.info("%s", text)
            return
        if not self.refused:
            memory = ("memory locked (mlockall)" if self.memory_locked
                      else "memory not locked (lock_memory false)")
            log.info("%s: real-time scheduling %s, %s", who, self.scheduling, memory)
            return
        text = (f"{who}: real-time scheduling NOT fully granted: {self.refused}; the thread runs with "
                f"{self.scheduling}{', memory locked' if self.memory_locked else ''} and may miss its "
                "deadlines on a busy host. Grant it: an rtprio limit for this user in "
                "/etc/security/limits.d (docs/damiao-bridge.md), or CAP_SYS_NICE; realtime_priority:=0 "
                "asks for none")
        with _process_lock:
            if text in _said:
                return
            _said.add(text)
        log.warning("%s", text)


#: SCHED_FIFO with SCHED_RESET_ON_FORK: a process or thread started from a real-time thread (a
#: test runner that ran a bridge in-process, a node that spawns a helper) starts with normal
#: scheduling instead of inheriting real-time priority (seen: pytest's later node processes and a
#: simulator at SCHED_FIFO 1, starving the normally scheduled estimator)
_FIFO = os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0) if hasattr(os, "SCHED_FIFO") else 0


def _policy_text() -> str:
    policy = os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)  # the flag is or-ed in
    names = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}
    name = names.get(policy, f"policy {policy}")
    if policy in (os.SCHED_FIFO, os.SCHED_RR):
        return f"{name} {os.sched_getparam(0).sched_priority}"
    return name


def _lock_memory() -> tuple[bool, str]:
    """``mlockall`` once per process; ``(locked, why not)``."""
    global _memory
    with _process_lock:
        if _memory is not None:
            return _memory
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        except OSError as exc:
            _memory = (False, f"mlockall unavailable ({exc})")
            return _memory
        flags = _MCL_CURRENT | _MCL_FUTURE
        if libc.mlockall(flags | _MCL_ONFAULT) != 0:
            err = ctypes.get_errno()
            # kernels before 4.4 know no MCL_ONFAULT (EINVAL): lock every page now instead
            if err != 22 or libc.mlockall(flags) != 0:
                err = ctypes.get_errno()
                _memory = (False, f"mlockall: [Errno {err}] {os.strerror(err)} (memlock limit "
                                  "`ulimit -l` too low)")
                return _memory
        _memory = (True, "")
        return _memory


def request_realtime(priority: int, *, lock_memory: bool = True) -> RealtimeGrant:
    """Ask ``SCHED_FIFO`` at ``priority`` (1–99; 0 asks nothing) for the **calling thread** and,
    with ``lock_memory``, ``mlockall`` for the process (once). Never raises: a refusal is in the
    grant (:meth:`RealtimeGrant.report` says it)."""
    priority = int(priority)
    if priority == 0:
        return RealtimeGrant(0, False, False, _policy_text())
    if not 1 <= priority <= MAX_PRIORITY:
        return RealtimeGrant(priority, False, False, _policy_text(),
                             f"priority {priority} is outside SCHED_FIFO's 1..{MAX_PRIORITY}")
    if sys.getswitchinterval() > SWITCH_INTERVAL:
        sys.setswitchinterval(SWITCH_INTERVAL)
    refused = []
    granted = False
    if not hasattr(os, "sched_setscheduler"):
        refused.append("SCHED_FIFO: not available on this platform")
    else:
        try:
            os.sched_setscheduler(0, _FIFO, os.sched_param(priority))  # 0: this thread
            granted = True
        except OSError as exc:
            refused.append(f"SCHED_FIFO priority {priority}: [Errno {exc.errno}] {exc.strerror}")
    locked = False
    if lock_memory:
        locked, why = _lock_memory()
        if not locked:
            refused.append(why)
    return RealtimeGrant(priority, granted, locked, _policy_text(), "; ".join(refused))


def raise_process_threads(priority: int, *, python_threads: bool = True,
                          prefixes: tuple[str, ...] = ("dds.",),
                          exclude: frozenset[int] = frozenset()) -> tuple[list[int], str]:
    """The threads of this process that share locks with a deadline thread get ``SCHED_FIFO``
    ``priority`` if they run with normal scheduling: the Python threads (the GIL, which any Python
    thread holds while it runs) and the middleware's threads, by name prefix (Fast DDS names its
    ``dds.*``: rclpy's ``publish`` holds the GIL while DDS takes a writer lock that DDS's own
    threads also take). A normal thread preempted by a CPU hog while holding one stalls the
    deadline thread for the hog's time slice (seen: 20–50 ms publishes and 0xD at load 12). At the
    lowest real-time priority no normal task preempts them, and the deadline thread (higher)
    still preempts them all. Other native threads (BLAS workers, which spin) are left alone, and so
    are the ids in ``exclude``: a CPU-bound real-time thread would run into the kernel's real-time
    throttling, which stops every real-time thread of the CPU for the rest of the second.
    Threads and processes created later start with normal scheduling (SCHED_RESET_ON_FORK).
    Returns ``(thread ids raised, why not)``; never raises (:func:`restore_threads` undoes it)."""
    raised: list[int] = []
    refused = ""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError as exc:
        return [], f"cannot list this process's threads: {exc}"
    python = {t.native_id for t in threading.enumerate()} if python_threads else set()
    for tid in tids:
        if tid in exclude:
            continue
        if tid not in python:
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            if not name.startswith(prefixes):
                continue
        try:
            if os.sched_getscheduler(tid) & ~getattr(os, "SCHED_RESET_ON_FORK", 0) != os.SCHED_OTHER:
                continue
            os.sched_setscheduler(tid, _FIFO, os.sched_param(priority))
            raised.append(tid)
        except ProcessLookupError:  # ended meanwhile
            continue
        except OSError as exc:
            refused = (f"SCHED_FIFO priority {priority} for the process's threads: [Errno {exc.errno}] "
                       f"{exc.strerror}")
            break
    return raised, refused


def restore_threads(tids: list[int]) -> None:
    """Normal scheduling again for the threads :func:`raise_process_threads` raised (those still
    alive)."""
    for tid in tids:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            continue
