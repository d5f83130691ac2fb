"""Thin rclpy nodes: parameters, topics and services around :mod:`sysid_ros.core`."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from sysid_ros import headless  # noqa: F401  (before MuJoCo's first import: no OpenGL probe at start)
from sysid_ros.core.blas import one_thread_from_start

one_thread_from_start()  # before NumPy's first import: a node's linear algebra is small (core/blas.py)

__all__ = ["spin", "stop_quietly_until_spinning"]


def stop_quietly_until_spinning() -> None:
    """Until :func:`spin` takes over: SIGINT/SIGTERM end the process at once with status 0 (a
    Ctrl-C while the node is still importing or starting leaves nothing to finish). Called first
    by every node executable (``scripts/*`` and ``python -m sysid_ros.nodes.<node>``), before the
    node's imports; without it a signal during start-up ends the process by KeyboardInterrupt
    (status -2 under launch)."""

    def leave(_signum, _frame) -> None:
        os._exit(0)  # nothing is open yet; an exception could be swallowed by the import under way

    global _EXECUTABLE
    _EXECUTABLE = True
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, leave)


#: set by :func:`stop_quietly_until_spinning`: this process is a node executable, which
#: :func:`spin` ends itself once the node is torn down
_EXECUTABLE = False


# `python -m sysid_ros.nodes.<node>`: this package is imported before the node's module (and its
# imports, which take seconds on a busy host); sys.argv[0] is "-m" only while that module is found
if sys.argv[:1] == ["-m"] and threading.current_thread() is threading.main_thread():
    stop_quietly_until_spinning()


def die_with_parent() -> None:
    """A node started by :class:`~sysid_ros.nodes.processes.NodeProcess` (the environment names
    its parent's pid) asks Linux for SIGTERM when that parent dies — its clean shutdown path — so
    no node outlives a demo or test that was killed. Elsewhere (or off Linux) nothing happens."""
    import ctypes
    import os

    parent = os.environ.get("SYSID_DIE_WITH_PARENT", "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the parent died before the request: nobody to serve
        os.kill(os.getpid(), signal.SIGTERM)


def spin(make_node: Callable, executor_factory: Callable, args=None) -> None:
    """Run one node until shutdown, the same way on Jazzy and Kilted: Ctrl-C, SIGTERM and external
    shutdown end it quietly; the executor is shut down and the node destroyed on every path.
    A node that cannot start for a reason the user can fix (a :class:`SysIdError`: bad model,
    bad parameter) says why in one line and the process exits with status 1.

    Signals are this function's, not rclpy's: rclpy's handler shuts the context down the moment
    SIGINT arrives, and a node that then logs while it finishes its files (to ``/rosout``, through
    that context) can crash in rcl (seen: SIGSEGV in ``destroy_node``'s last log line). Here the
    executor spins in a thread of its own while the main thread waits for a stop request (the
    first SIGINT/SIGTERM, the end of spinning, or an error in a callback); then the executor is
    stopped and, once it has, shut down, the node destroyed while its context is still valid, and
    the context shut down last. A second signal during teardown says "already stopping" and does
    not cut it short (files are finished there); signals after teardown are ignored (the process
    is ending: any number of Ctrl-Cs at any spacing give exit status 0); SIGKILL still ends the
    process (its files stay recoverable).

    A node class may set ``STOP_GRACE`` [s]: if a callback still runs that long after the stop
    request (a long computation that holds nothing to finish), the process ends without waiting
    for it. Node executables (:func:`stop_quietly_until_spinning`) end with ``os._exit`` once torn
    down, so a stop does not also wait for the interpreter's finalisation."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.signals import SignalHandlerOptions
    from rclpy.task import Future

    from sysid_ros.core.errors import SysIdError
    from sysid_ros.core.stop_request import StopRequest

    stop = StopRequest()  # (not a threading.Event: see stop_request)
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        signal.signal(sig, _stop_requester(stop))
    die_with_parent()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    executor = executor_factory()
    raised: list[BaseException] = []  # from callbacks
    failed = False

    # the executor spins until this future is done: completing it (from the main thread) wakes
    # the executor, which returns once the callback in progress has finished. (Executor.shutdown
    # from another thread while it spins is not safe: rclpy destroys its guard condition without
    # waiting for the spinning thread, which then fails on it.)
    stopped = Future()

    def run() -> None:
        try:
            executor.spin_until_future_complete(stopped)
        except ExternalShutdownException:
            pass
        except BaseException as exc:  # handed to the main thread
            raised.append(exc)
        finally:
            stop.request()

    try:
        node = make_node()
        executor.add_node(node)
        spinner = threading.Thread(target=run, name="executor")
        spinner.start()
        stop.wait()  # (a signal's handler runs at once)
        stopped.set_result(None)
        grace = getattr(node, "STOP_GRACE", None)
        spinner.join(grace)
        if spinner.is_alive():
            # a long callback (planning, a backlog) would hold the exit past launch's 5 s: nothing
            # of this node's must be finished, so the process ends without waiting for it
            print(f"[{type(node).__name__}] a callback still runs {grace:g} s after the stop request: "
                  "left unfinished", file=sys.stderr, flush=True)
            _leave(0)
    except SysIdError as exc:
        # only the words: the exception's frames would keep a half-built node alive for the
        # context's clean-up to destroy
        print(f"[{getattr(make_node, '__name__', 'node')}] cannot start: {exc}", file=sys.stderr)
        failed = True
    finally:
        stop.request()  # from here on a signal only says "already stopping"
        try:
            executor.shutdown()
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
        finally:
            for sig in signals:  # the process ends after this: a late signal changes nothing
                signal.signal(sig, signal.SIG_IGN)
            stop.close()
    for exc in raised:
        if isinstance(exc, SysIdError):
            print(f"[{getattr(make_node, '__name__', 'node')}] stopped: {exc}", file=sys.stderr)
            failed = True
        else:
            raise exc
    if _EXECUTABLE:
        _leave(1 if failed else 0)  # torn down: the interpreter's own finalisation adds nothing
    if failed:
        sys.exit(1)


def _leave(status: int) -> None:
    """End a node executable now (its output flushed), without the interpreter's finalisation
    (seconds of module teardown on a busy host, past launch's SIGINT-to-SIGTERM 5 s)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)  # C stdio too (rcutils' console output)
    except (OSError, AttributeError):
        pass
    os._exit(status)


def _stop_requester(stop):
    """A SIGINT/SIGTERM handler: the first signal asks :func:`spin` to stop, a later one says the
    node is already stopping. It takes no lock (it may run inside any code of the main thread:
    :mod:`~sysid_ros.core.stop_request`)."""

    def handle(signum, _frame) -> None:
        if stop.is_requested():
            try:
                os.write(2, f"[{signal.Signals(signum).name}] already stopping: finishing files first\n"
                         .encode())  # (not print: the main thread may be inside a write to stderr)
            except OSError:
                pass
        stop.request()

    return handle
