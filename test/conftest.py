"""Shared fixtures. Every ROS test runs on loopback only, in its own context and DDS domain."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

# DDS stays on this machine, for every test in this session (set before rclpy is imported).
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_STATIC_PEERS", None)

ROOT = Path(__file__).resolve().parent.parent
TEST_ROBOTS = ROOT / "test" / "robots"  # written for this repository from published figures
DEFAULT_ROBOT = ROOT / "config" / "robots" / "yam_damiao.xml"
ROBOT_FILES = sorted(TEST_ROBOTS.glob("*.xml"))

# Domain ids 1..100 stay inside the default port range; spread concurrent pytest processes apart.
# SYSID_TEST_DOMAINS=LO-HI keeps this session's tests inside that range (parallel checkouts).
_range = os.environ.get("SYSID_TEST_DOMAINS", "").strip()
_lo, _hi = (int(v) for v in _range.split("-")) if _range else (1, 100)
_domains = itertools.cycle(range(_lo, _hi + 1)) if _range else itertools.count(1 + (os.getpid() % 50) * 2)


def pytest_sessionstart(session) -> None:
    """Compile the regressor kernels (or load them from numba's disk cache) once, before any
    test: the first compilation takes seconds and must not land inside a bounded wait."""
    from sysid_ros.core.model.newton_euler import compile_kernels

    compile_kernels()


@pytest.fixture
def ros_domain_id() -> int:
    """A DDS domain id of this test alone (use it for every context the test creates)."""
    return next(_domains) if _range else 1 + (next(_domains) - 1) % 100


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


def robot_params():
    """pytest params over the test robots plus the default robot."""
    files = [*ROBOT_FILES, DEFAULT_ROBOT]
    return [pytest.param(f, id=f.stem) for f in files]


def wait_until(condition, timeout: float, what: str, proc=None) -> None:
    """Wait (bounded) until ``condition()``; fail naming ``what`` on timeout, or at once if the
    node process ``proc`` ends first."""
    import threading
    import time

    deadline = time.monotonic() + timeout
    event = threading.Event()
    while not condition():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the node process exited ({proc.returncode}) while waiting for {what}")
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


class SpinningNode:
    """A test's own ROS side: a context in ``domain_id``, one node spun by a background thread
    until :meth:`close`; :meth:`publish` waits out a reliable writer's back-pressure."""

    def __init__(self, name: str, domain_id: int) -> None:
        import threading

        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.backpressure = 0  # writes refused while a reader caught up (each retried)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # the context shut down under it
                return

    def publish(self, pub, msg, timeout: float = 60.0) -> None:
        """Publish ``msg`` on ``pub``: a reliable KEEP_ALL writer whose history is full (its
        reader has not acknowledged yet) refuses a write after its blocking time; the same
        sample is then written again, never skipped."""
        import threading
        import time

        from rclpy.impl.implementation_singleton import rclpy_implementation

        deadline = time.monotonic() + timeout
        while True:
            try:
                pub.publish(msg)
                return
            except rclpy_implementation.RCLError:
                if time.monotonic() > deadline:
                    raise
                self.backpressure += 1
                threading.Event().wait(0.005)

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self._thread.join(timeout=5)


@pytest.fixture
def read_only(tmp_path):
    """A read-only tmpfs at tmp_path/ro (skipped where mounting is not allowed); unmounted after."""
    import subprocess

    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, timeout=30)
