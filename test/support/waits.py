"""Bounded waits and stopping node processes."""

from __future__ import annotations

import pytest


def stop_process(proc) -> str:
    """SIGINT a node process, wait (kill after 20 s) and return its output."""
    import signal
    import subprocess

    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    except ValueError:  # already stopped and read by the test
        return ""
    return out or ""


def wait_until(condition, timeout: float, what: str, proc=None, output=None) -> None:
    """Wait (bounded) until ``condition()``; fail naming ``what`` on timeout, or at once if the
    node process ``proc`` ends first (with ``output()``, the process's output so far, if given)."""
    import threading
    import time

    deadline = time.monotonic() + timeout
    event = threading.Event()
    while not condition():
        if proc is not None and proc.poll() is not None:
            said = f": {output()}" if output is not None else ""
            pytest.fail(f"the node process exited ({proc.returncode}) while waiting for {what}{said}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        event.wait(0.01)


def wait_with_nodes(condition, timeout: float, what: str, procs=()) -> None:
    """Wait (bounded) until ``condition()``, failing at once if one of the node processes
    ``procs`` (:class:`sysid_ros.nodes.processes.NodeProcess`) has ended (its ``check_running``
    says which and why), else naming ``what`` on timeout."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        for p in procs:
            p.check_running()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
