"""Thin rclpy nodes: parameters, topics and services around :mod:`sysid_ros.core`."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable


def spin(make_node: Callable, executor_factory: Callable, args=None) -> None:
    """Run one node until shutdown, the same way on Jazzy and Kilted: Ctrl-C and external
    shutdown end it quietly; the executor is shut down and the node destroyed on every path.
    A node that cannot start for a reason the user can fix (a :class:`SysIdError`: bad model,
    bad parameter) says why in one line and the process exits with status 1."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    from sysid_ros.core.errors import SysIdError

    rclpy.init(args=args)
    node = None
    executor = executor_factory()
    failed = False
    try:
        node = make_node()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except SysIdError as exc:
        print(f"[{getattr(make_node, '__name__', 'node')}] cannot start: {exc}", file=sys.stderr)
        failed = True
    except RuntimeError:
        # SIGINT arriving while the executor takes a message surfaces from rclpy's C++ take as a
        # RuntimeError (pybind11 "unable to convert call argument"); rclpy's signal handler shuts
        # the context down at the same moment. That is the normal end, not a failure.
        deadline = time.monotonic() + 1.0
        while rclpy.ok() and time.monotonic() < deadline:
            time.sleep(0.01)
        if rclpy.ok():
            raise
    finally:
        # one Ctrl-C ends the node; a second one (a terminal's process group, `timeout -s INT`)
        # must not cut its teardown short: files are finished there
        previous = _ignore_interrupts_while_stopping()
        try:
            executor.shutdown()
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
        finally:
            signal.signal(signal.SIGINT, previous)
    if failed:
        sys.exit(1)


def _ignore_interrupts_while_stopping():
    """Make SIGINT and SIGTERM say "already stopping" instead of interrupting; returns the
    previous SIGINT handler. SIGKILL still ends the process (its files stay recoverable)."""

    def note(signum, _frame) -> None:
        print(f"[{signal.Signals(signum).name}] already stopping: finishing files first", file=sys.stderr,
              flush=True)

    previous = signal.signal(signal.SIGINT, note)
    signal.signal(signal.SIGTERM, note)
    return previous
