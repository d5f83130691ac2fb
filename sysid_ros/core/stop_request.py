"""A stop request that a signal handler, the main thread and other threads can make at any moment.

:func:`sysid_ros.nodes.spin` waits in the main thread for the first SIGINT/SIGTERM or for the
executor thread to end; the bridge's loop process (:mod:`sysid_ros.hardware.bridge_worker`) waits
for its host's next request or a SIGTERM. A :class:`threading.Event` cannot serve here: Python runs a signal's
handler in the main thread between two bytecodes, also while that thread is inside
``Event.set``/``Event.wait`` holding the event's (non-reentrant) lock, and a handler that calls
``Event.set`` then waits for itself forever. Seen: ``sysid demo``'s two SIGINTs 1 ms apart left
the recorder deadlocked in its handler until it was killed, the bag unfinished.

Here the request is a flag plus one byte written to a non-blocking pipe (no lock anywhere), and
the waiter sleeps in ``select`` on the pipe: a signal interrupts it, the handler writes its byte,
and the retried ``select`` (PEP 475) returns. A handler that raises to break a wait is no better:
the exception lands in whatever the main thread runs at that moment (seen: the bridge worker's
motor-disabling shutdown, cut short by the SIGTERM Linux sends when the host dies, so the motors
stopped on their CAN timeout instead). :meth:`StopRequest.fileno` lets the waiter select on the
request beside its own sockets.
"""

from __future__ import annotations

import os
import select


class StopRequest:
    """Made once by any thread or signal handler (:meth:`request`); :meth:`wait` blocks until then."""

    def __init__(self) -> None:
        self._requested = False
        self._closed = False
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def request(self) -> None:
        """Ask for the stop (idempotent, safe in a signal handler: takes no lock)."""
        self._requested = True
        if self._closed:  # (its descriptors' numbers may belong to another file by now)
            return
        try:
            os.write(self._write, b"\0")
        except OSError:  # the pipe is full (a request is waiting already) or closed (all done)
            pass

    def is_requested(self) -> bool:
        return self._requested

    def fileno(self) -> int:
        """The pipe's read end: readable once requested (for ``select`` or
        :func:`multiprocessing.connection.wait` beside other descriptors)."""
        return self._read

    def wait(self) -> None:
        """Block until :meth:`request` has been called (signals' handlers run meanwhile)."""
        while not self._requested:
            try:
                select.select([self._read], [], [])
            except (OSError, ValueError):  # closed: nothing left to wait for
                return

    def close(self) -> None:
        """Release the pipe; call once no handler or thread can request any more."""
        if self._closed:
            return
        self._closed = True
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
