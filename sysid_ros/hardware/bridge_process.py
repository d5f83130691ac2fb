"""The Damiao bridge in a process of its own, driven from a host process (no ROS).

A ROS node runs an rclpy executor, DDS and Python threads that a busy host preempts; a thread
preempted while it holds Python's interpreter lock stalls every other thread of its process for
the hog's time slice — tens to hundreds of milliseconds at load 10–20, longer than the motors'
0.1 s CAN timeout. So the control loop does not live in the node's process: :class:`BridgeProcess`
starts :mod:`sysid_ros.hardware.bridge_worker` (the bus, the emulated motors if any, the
:class:`~sysid_ros.hardware.bridge.Bridge` and its loop, every thread at ``SCHED_FIFO``) and
talks to it over two sockets (the protocol is in that module's docstring).

* Life cycle calls (:meth:`configure`, :meth:`activate`, :meth:`deactivate`, :meth:`clear_fault`,
  :meth:`status`, :meth:`shutdown`) are requests answered by the worker, each with a bounded wait
  (:data:`TIMEOUTS`); the worker's errors come back as the same exception classes
  (:class:`~.bridge_types.BridgeError`, :class:`~.transport.BusError`,
  :class:`~.wiring.ConfigError`, a model's :class:`~sysid_ros.core.errors.ModelError`...).
* :meth:`submit_command` only writes to the socket: the worker applies it (a refused command
  comes back as a counted warning, ``on_warning``).
* A reader thread of this process receives the joint samples, trips, replay end, log lines and
  warnings and calls the callbacks in order (``on_sample`` for every cycle, none lost: the worker
  queues what this process has not read yet).
* The worker disables every motor (confirmed) before it ends, whichever way this process ends —
  :meth:`shutdown`, an exception, ``SIGKILL`` (its socket closes) — and ``on_exit`` says when the
  worker ended without being asked (the motors then stop by their CAN timeout).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from sysid_ros.core.errors import DataError, ModelError, SysIdError
from sysid_ros.hardware.bridge_config import BridgeConfig
from sysid_ros.hardware.bridge_types import ACTIVATE_TIMEOUT, BridgeError, BridgeStatus, HandshakeError
from sysid_ros.hardware.safety import CommandError, Trip
from sysid_ros.hardware.transport import BusError
from sysid_ros.hardware.wiring import ConfigError

__all__ = ["TIMEOUTS", "BridgeProcess", "EmulatorHandle"]

log = logging.getLogger(__name__)

#: [s] longest wait for the worker's answer to each request (``configure`` loads MuJoCo for an
#: emulator and runs the register handshake; on a loaded host both take seconds)
TIMEOUTS = {"configure": 120.0, "activate": ACTIVATE_TIMEOUT + 10.0, "deactivate": 15.0,
            "clear_fault": 15.0, "status": 10.0, "emulator": 10.0, "shutdown": 15.0}
EXIT_WAIT = 5.0  # [s] for the worker to end after its answer to shutdown (then SIGKILL)
_ERRORS: dict[str, type[SysIdError]] = {cls.__name__: cls for cls in (
    SysIdError, ModelError, DataError, ConfigError, BridgeError, HandshakeError, BusError, CommandError)}

SampleCallback = Callable[[float, list, list, list], None]
"""``on_sample(stamp [s], position [rad], velocity [rad/s], effort [N·m])``, lists of ``n``."""


class BridgeProcess:
    """One bridge worker process for ``config`` (built from ``params``, the flat parameter
    snapshot it is sent; see the module docstring). The process starts in :meth:`configure`."""

    def __init__(self, config: BridgeConfig, params: dict, *, on_sample: SampleCallback | None = None,
                 on_trip: Callable[[Trip], None] | None = None,
                 on_replay_done: Callable[[], None] | None = None,
                 on_warning: Callable[[str, str], None] | None = None,
                 on_exit: Callable[[str], None] | None = None,
                 logger: Any = None) -> None:
        self.config = config
        self.params = dict(params)
        self.on_sample = on_sample
        self.on_trip = on_trip
        self.on_replay_done = on_replay_done
        self.on_warning = on_warning
        self.on_exit = on_exit
        self.log = logger or log
        self.names = config.names
        self.truth: tuple[list[str], list[float]] | None = None  # the emulated robot's true parameters
        self._process: subprocess.Popen | None = None
        self._rpc: Connection | None = None
        self._stream: Connection | None = None
        self._reader: threading.Thread | None = None
        self._rpc_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._seq = itertools.count(1)
        self._closing = False
        self._ended = ""  # why the worker ended without being asked ("" while it runs)
        self.samples = 0  # joint samples received
        #: samples still queued when shutdown began, not handed out (counted, said at the end)
        self.unpublished_at_stop = 0

    # ------------------------------------------------------------------------------ process
    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None and not self._ended

    def _start(self) -> None:
        rpc_host, rpc_worker = socket.socketpair()
        stream_host, stream_worker = socket.socketpair()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        env["SYSID_BRIDGE_HOST_PID"] = str(os.getpid())
        fds = (rpc_worker.fileno(), stream_worker.fileno())
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "sysid_ros.hardware.bridge_worker", *map(str, fds)],
                pass_fds=fds, stdin=subprocess.DEVNULL, env=env, close_fds=True)
        finally:
            rpc_worker.close()
            stream_worker.close()
        self._rpc = Connection(rpc_host.detach())
        self._stream = Connection(stream_host.detach())
        self._reader = threading.Thread(target=self._read_events, name="bridge_process_events", daemon=True)
        self._reader.start()

    def _read_events(self) -> None:
        """Dispatch the worker's events in order until its end of the stream closes."""
        stream = self._stream
        while True:
            try:
                batch = stream.recv()
            except (EOFError, OSError):
                break
            for event in batch:
                try:
                    self._dispatch(event)
                except Exception as exc:  # a callback's error must not end the stream
                    self.log.error("bridge event %s: %s", event[0], exc)
        if not self._closing:
            try:
                status = self._process.wait(EXIT_WAIT) if self._process is not None else None
            except subprocess.TimeoutExpired:
                status = "still running, its events closed"
            self._ended = (f"the bridge's loop process ended unexpectedly (exit status {status}): the "
                           "motors were disabled by it only if it ended cleanly, otherwise they stop "
                           "by their own CAN timeout")
            self.log.error("%s", self._ended)
            if self.on_exit is not None:
                self.on_exit(self._ended)

    def _dispatch(self, event: tuple) -> None:
        kind = event[0]
        if kind == "sample":
            if self._closing:
                # a busy host's backlog of states (seconds of them) must not hold up the worker's
                # last words behind it (its disable confirmation came after the reader's join
                # timeout, unsaid, at load 10): counted instead, and said once the worker has ended
                self.unpublished_at_stop += 1
                return
            self.samples += 1
            if self.on_sample is not None:
                self.on_sample(event[1], event[3], event[4], event[5])
        elif kind == "log":
            getattr(self.log, event[1], self.log.info)("%s", event[2])
        elif kind == "warn":
            if self.on_warning is not None:
                self.on_warning(event[1], event[2])
        elif kind == "trip":
            if self.on_trip is not None:
                self.on_trip(event[1])
        elif kind == "replay_done":
            if self.on_replay_done is not None:
                self.on_replay_done()

    def _call(self, method: str, *args: Any) -> Any:
        """One request and its answer (bounded wait; the worker's exception re-raised here)."""
        with self._rpc_lock:
            if self._rpc is None or not self.alive:
                raise BridgeError(self._ended or f"{method}: the bridge process is not running")
            try:
                answer = self._exchange(method, args)
            except (EOFError, OSError) as exc:
                raise BridgeError(self._ended or f"{method}: the bridge process ended ({exc})") from None
        if answer[1] == "ok":
            return answer[2]
        name, text = answer[2], answer[3]
        cls = _ERRORS.get(name)
        if cls is None:
            raise BridgeError(f"{method} failed in the bridge process: {name}: {text}")
        raise cls(text)

    def _exchange(self, method: str, args: tuple) -> tuple:
        """Send one request and wait (bounded by :data:`TIMEOUTS`) for its answer, skipping late
        answers to earlier requests; ``_rpc_lock`` held by the caller."""
        seq = next(self._seq)
        self._rpc.send((seq, method, args))
        deadline = time.monotonic() + TIMEOUTS[method]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._rpc.poll(remaining):
                raise BridgeError(f"the bridge process did not answer {method} within {TIMEOUTS[method]:g} s")
            answer = self._rpc.recv()
            if answer[0] == seq:
                return answer

    # ------------------------------------------------------------------------------ life cycle
    def configure(self) -> None:
        """Start the worker, open the bus (emulated motors with ``use_emulator``) and run the
        register handshake there. On failure the worker is ended and the error raised."""
        if self._process is not None:
            raise BridgeError("configure: this bridge process was started already")
        self._start()
        try:
            answer = self._call("configure", self.params)
        except BaseException:
            self.shutdown()
            raise
        self.truth = answer["truth"]

    def activate(self) -> None:
        """Check the pose, enable every motor (confirmed) and start the control loop."""
        self._call("activate")

    def deactivate(self) -> list[str]:
        """Stop the loop and disable every motor; the joints whose disable was not confirmed."""
        return self._call("deactivate")

    def clear_fault(self) -> str:
        """Acknowledge a trip (see :meth:`.Bridge.clear_fault`); the motors' states."""
        return self._call("clear_fault")

    def status(self) -> BridgeStatus:
        return self._call("status")

    def submit_command(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float] = (),
                       effort: Sequence[float] = (), kp: Sequence[float] = (),
                       kd: Sequence[float] = ()) -> None:
        """Hand a command to the worker (no wait; see :meth:`.Bridge.submit_command` for what it
        does with it). :class:`BridgeError` if the worker is not running."""
        if self._stream is None or not self.alive:
            raise BridgeError(self._ended or "commands need a configured bridge")
        message = ("command", list(names), list(position), list(velocity), list(effort), list(kp), list(kd))
        try:
            with self._send_lock:
                self._stream.send(message)
        except OSError as exc:
            raise BridgeError(f"the bridge process does not take commands: {exc}") from None

    def emulator(self, name: str, *args: Any) -> Any:
        """Call one of the emulated motors' methods in the worker (tests, demos; see
        :data:`~.bridge_worker.EMULATOR_CALLS`)."""
        return self._call("emulator", name, args)

    def shutdown(self) -> None:
        """Disable every motor (confirmed, in the worker), close the bus and end the worker;
        idempotent, never raises. Events sent before the end are dispatched first."""
        process = self._process
        if process is None or self._closing:
            return
        self._closing = True
        if process.poll() is None:
            try:
                self._call_shutdown()
            except BaseException as exc:
                self.log.error("bridge process shutdown: %s: ending it with SIGTERM (it disables the "
                               "motors on SIGTERM too)", exc)
                process.terminate()
            try:
                process.wait(EXIT_WAIT)
            except subprocess.TimeoutExpired:
                self.log.error("the bridge process did not end within %g s: killed; the motors stop by "
                               "their own CAN timeout", EXIT_WAIT)
                process.kill()
                process.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=EXIT_WAIT)
        if self.unpublished_at_stop:
            self.log.warning("%d joint states queued at shutdown were not published (the loop was "
                             "ahead of this process's share of the CPU)", self.unpublished_at_stop)
        for conn in (self._rpc, self._stream):
            if conn is not None:
                conn.close()
        self._rpc = self._stream = None

    def _call_shutdown(self) -> None:
        with self._rpc_lock:  # (the process may be ending: no liveness check, unlike _call)
            self._exchange("shutdown", ())


class EmulatorHandle:
    """The emulated motors of a :class:`BridgeProcess`, seen from the host (tests, demos)."""

    def __init__(self, process: BridgeProcess) -> None:
        self._process = process

    @property
    def running(self) -> bool:
        return self._process.alive

    def motor_states(self) -> list[int]:
        """Every motor's state code, configured order."""
        return self._process.emulator("motor_states")

    def inject_overtemperature(self, joint: str, sensor: str = "mosfet") -> None:
        self._process.emulator("inject_overtemperature", joint, sensor)

    def cool_down(self, joint: str) -> None:
        self._process.emulator("cool_down", joint)
