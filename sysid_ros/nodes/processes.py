"""This package's nodes as child processes, each with its parameter file: how the demo, the
process-based tests and the benchmarks run the graph where ``ros2 launch`` is not installed
(on a ROS install the launch files in ``launch/`` start the same nodes with the same files).

Every process gets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and the caller's domain id; it is
stopped with SIGINT (the nodes' clean shutdown path), killed only if it does not exit in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.resources import find_share_file

__all__ = ["NodeProcess", "ros_value", "stop_all", "terminate_as_interrupt"]

#: set in a child's environment: the node asks the kernel for SIGTERM when its parent dies
#: (:func:`sysid_ros.nodes.die_with_parent`), so no node outlives a killed demo or test
DIE_WITH_PARENT = "SYSID_DIE_WITH_PARENT"


def ros_value(value) -> str:
    """A parameter value in ``--ros-args -p name:=value`` syntax (YAML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(ros_value(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"' if (not value or ":" in value or "," in value) else value
    return repr(float(value)) if isinstance(value, float) else str(value)


class NodeProcess:
    """``python -m sysid_ros.nodes.<module>`` with ``config/<config>.yaml`` and overrides.

    ``log``: file the process's stdout and stderr go to (default: a temporary file; never a
    pipe nobody reads, which would stall a chatty node). :attr:`output` holds it after :meth:`stop`.
    """

    def __init__(self, module: str, *, domain_id: int, config: str | None = None,
                 overrides: dict | None = None, log: Path | None = None, args: tuple[str, ...] = ()):
        self.module = module
        cmd = [sys.executable, "-m", f"sysid_ros.nodes.{module}", *args, "--ros-args"]
        if config:
            cmd += ["--params-file", str(find_share_file(f"config/{config}.yaml"))]
        for name, value in (overrides or {}).items():
            cmd += ["-p", f"{name}:={ros_value(value)}"]
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   PYTHONUNBUFFERED="1")
        env.pop(DIE_WITH_PARENT, None)  # (inherited: another process's pid)
        if threading.current_thread() is threading.main_thread():  # Linux ties it to the forking thread
            env[DIE_WITH_PARENT] = str(os.getpid())
        env.pop("ROS_STATIC_PEERS", None)
        if log is None:
            fd, name = tempfile.mkstemp(prefix=f"sysid_{module}_", suffix=".log")
            os.close(fd)
            log, self._temporary = Path(name), True
        else:
            self._temporary = False
        self.log = Path(log)
        self._out = open(self.log, "w")  # closed in stop()
        self.command = cmd
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._out, stderr=subprocess.STDOUT, text=True)
        self.output = ""
        self._interrupted = False  # SIGINT sent (once: a second one would only say "already stopping")

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def check_running(self) -> None:
        """:class:`SysIdError` with the process's last output if it has exited."""
        if not self.running:
            self.stop()
            raise SysIdError(f"{self.module} exited with status {self.proc.returncode}:\n"
                             f"{self.output[-2000:]}")

    def interrupt(self) -> None:
        """SIGINT, once (the node's clean stop: it finishes its files)."""
        if not self._interrupted and self.proc.poll() is None:
            self._interrupted = True
            self.proc.send_signal(signal.SIGINT)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGINT, wait up to ``timeout`` s (then kill); returns the exit status. Idempotent."""
        self.interrupt()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._out is not None:
            self._out.close()
            self._out = None
            self.output = self.log.read_text(errors="replace")
            if self._temporary:
                self.log.unlink(missing_ok=True)
        return self.proc.returncode


def stop_all(procs, timeout: float = 20.0) -> list[int]:
    """Stop every process at once: SIGINT to all, then wait for each within one shared
    ``timeout`` [s], killing what is left; returns their exit statuses in order."""
    procs = list(procs)
    for p in procs:
        p.interrupt()
    deadline = time.monotonic() + timeout
    return [p.stop(timeout=max(deadline - time.monotonic(), 0.1)) for p in procs]


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises :class:`KeyboardInterrupt` in the main thread, as SIGINT does, so
    that a terminated run stops its children and finishes its files (no-op off the main thread)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.default_int_handler)
