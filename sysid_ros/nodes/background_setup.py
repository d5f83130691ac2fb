"""One-off set-up of a node's compiled kernels in a thread of its own, after the node is ready.

The estimator and the collision monitor need numba's kernels, LAPACK bindings and filter designs
before their first sample (~1-1.5 s of CPU). Their constructors do not wait for that: the node is in
the graph and answers its services at once, and this thread does the set-up and says so in one log
line (``ready to process: compiled kernels set up in ...``). Samples that arrive first are queued by
the node or set the kernels up themselves; a set-up that fails is only said (the first samples set
them up again and report what fails). After :meth:`BackgroundSetUp.close` (the node's
``destroy_node``) the thread logs nothing: the node's logger may be gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["BackgroundSetUp"]


class BackgroundSetUp:
    """Runs ``prepare()`` in a daemon thread started here and logs the outcome on ``logger``
    (an rclpy logger) unless :meth:`close` came first."""

    def __init__(self, logger, prepare: Callable[[], None]) -> None:
        self._logger = logger
        self._prepare = prepare
        self._lock = threading.Lock()  # held by close(): the thread logs only before it
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="prepare", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start, cpu = time.monotonic(), time.thread_time()
        try:
            self._prepare()
            text = (f"ready to process: compiled kernels set up in {time.monotonic() - start:.2f} s "
                    f"({time.thread_time() - cpu:.2f} s of CPU)")
        except Exception as exc:  # the first samples set them up again and say what fails
            text = f"setting up ahead of the first samples failed ({exc}): done when they arrive"
        with self._lock:
            if not self._closed:
                self._logger.info(text)

    def close(self) -> None:
        """No log line from the thread after this returns (it may still be running)."""
        with self._lock:
            self._closed = True
