"""The bridge's own process (no ROS): ``python -m sysid_ros.hardware.bridge_worker RPC_FD STREAM_FD``.

:class:`~sysid_ros.hardware.bridge_process.BridgeProcess` starts this process and talks to it over
two connected sockets (:class:`multiprocessing.connection.Connection`, pickled messages). It owns
the CAN bus (and, with ``use_emulator``, the emulated motors and their MuJoCo physics) and the
:class:`~sysid_ros.hardware.bridge.Bridge`: the control loop never shares an interpreter lock with
rclpy, its executor or any thread a busy host can preempt. Every Python thread of this process runs
at ``SCHED_FIFO`` when the bridge asks for real-time scheduling (the loop at
``realtime_priority``, the others at :data:`OTHERS_PRIORITY`), so no normally scheduled thread
can hold the interpreter lock the loop waits for while a CPU hog runs in its place.

Protocol (requests are answered in order, one at a time):

* RPC socket, host → worker: ``(seq, method, args)``; worker → host: ``(seq, "ok", value)`` or
  ``(seq, "error", exception class name, message)`` (``seq`` lets a host that gave up waiting
  skip a late answer). Methods: ``configure(params)`` (the flat parameter
  snapshot, as :meth:`.BridgeConfig.from_parameters` takes it, with ``use_emulator`` and
  ``emulator.*``) → ``{"truth": (names, values) | None, "note": str}``; ``activate()``;
  ``deactivate()`` → joints not confirmed disabled; ``clear_fault()`` → the motors' states;
  ``status()`` → :class:`~.bridge_types.BridgeStatus`; ``emulator(name, args)`` (tests and
  demos: :data:`EMULATOR_CALLS` on the emulated motors); ``shutdown()``: motors disabled
  (confirmed), bus closed, then the process ends.
* Stream socket, worker → host: lists of events ``("sample", stamp, cycle, position, velocity,
  effort)`` (lists of floats, NaN where a motor did not reply), ``("trip", Trip)``,
  ``("replay_done",)``, ``("log", level, text)``, ``("warn", key, text)`` (a counted warning);
  host → worker: ``("command", names, position, velocity, effort, kp, kd)``.

The loop only appends to an unbounded queue; a sender thread pickles and writes, so a host that
reads late (a loaded node process) delays its joint states but never the loop, and loses none.

Exit paths: ``shutdown``; the host's end of the RPC socket closing (the node ended or was killed:
``SIGKILL`` included); ``SIGTERM`` (also sent by Linux when the host dies, ``PR_SET_PDEATHSIG``).
Each disables every motor (confirmed, :meth:`.Bridge.shutdown`) before the process ends. ``SIGINT``
is ignored: a Ctrl-C in a terminal reaches the whole process group, and the host decides when the
motors go off. SIGTERM's handler only records the request
(:class:`~sysid_ros.core.stop_request.StopRequest`), which the request loop waits on beside the RPC
socket: a request in progress finishes first (each is bounded by the bus's timeouts), and no signal
can cut the disable short. (A killed host closes the socket and then, a moment later, sends the
SIGTERM: a handler that raised landed inside the disable, and the motors stopped on their CAN
timeout instead.)
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any

from sysid_ros.core.stop_request import StopRequest

__all__ = ["EMULATOR_CALLS", "OTHERS_PRIORITY", "main"]

OTHERS_PRIORITY = 1
"""``SCHED_FIFO`` priority of this process's other threads (RPC, command reader, sender) when the
loop is real-time: above every normal task, below the loop."""
#: the emulated motors' methods a host may call (fault injection and inspection, for tests)
EMULATOR_CALLS = frozenset({"inject_overtemperature", "cool_down", "motor_states"})
_BATCH = 256  # events per write at most


class _EventLog:
    """``logging.Logger``-style calls (``%``-formatting) sent to the host as ``log`` events."""

    def __init__(self, events: queue.SimpleQueue) -> None:
        self._events = events

    def _put(self, level: str, msg: str, args: tuple) -> None:
        try:
            text = msg % args if args else msg
        except (TypeError, ValueError):
            text = f"{msg} {args}"
        self._events.put(("log", level, text))

    def debug(self, msg: str, *args: Any) -> None:
        self._put("debug", msg, args)

    def info(self, msg: str, *args: Any) -> None:
        self._put("info", msg, args)

    def warning(self, msg: str, *args: Any) -> None:
        self._put("warning", msg, args)

    def error(self, msg: str, *args: Any) -> None:
        self._put("error", msg, args)


class Worker:
    """The worker's state: one bridge (and emulated bus) at a time."""

    def __init__(self, rpc: Connection, stream: Connection) -> None:
        self.rpc = rpc
        self.stream = stream
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.log = _EventLog(self.events)
        self.bridge = None
        self.emulated = None
        self.realtime = 0
        self._said_threads = False
        self._sender = threading.Thread(target=self._send_events, name="bridge_events", daemon=True)
        self._reader = threading.Thread(target=self._read_commands, name="bridge_commands", daemon=True)

    # ------------------------------------------------------------------------------ threads
    def start(self) -> None:
        self._sender.start()
        self._reader.start()

    def _send_events(self) -> None:
        """Pickle and write the queued events in batches; ``None`` ends the thread."""
        get, get_nowait = self.events.get, self.events.get_nowait
        while True:
            batch, done = [], False
            item = get()
            while True:
                if item is None:
                    done = True
                    break
                batch.append(_wire(item))
                if len(batch) >= _BATCH:
                    break
                try:
                    item = get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self.stream.send(batch)
                except OSError:
                    return  # the host is gone: the RPC loop sees it too and shuts down
            if done:
                return

    def _read_commands(self) -> None:
        while True:
            try:
                message = self.stream.recv()
            except (EOFError, OSError):
                return
            if message[0] == "command":
                self._command(*message[1:])

    def _command(self, names, position, velocity, effort, kp, kd) -> None:
        from sysid_ros.core.errors import SysIdError
        from sysid_ros.hardware.safety import CommandError

        bridge = self.bridge
        if bridge is None:
            self.events.put(("warn", "ignored_commands",
                             "MotorCommand ignored: the bridge is not configured"))
            return
        try:
            parsed = bridge.submit_command(names, position, velocity, effort, kp, kd)
        except CommandError as exc:
            self.events.put(("warn", "rejected_commands", f"MotorCommand refused: {exc}"))
            return
        except SysIdError as exc:
            self.events.put(("warn", "ignored_commands", f"MotorCommand ignored: {exc}"))
            return
        if parsed.unknown_names:
            self.events.put(("warn", "unknown_joints", f"MotorCommand names joints this bridge does not "
                                                       f"drive: {parsed.unknown_names} (it drives "
                                                       f"{list(bridge.names)})"))

    def raise_threads(self) -> None:
        """Every normally scheduled Python thread of this process at ``SCHED_FIFO``
        :data:`OTHERS_PRIORITY` (threads started since the last call included), when the loop is
        real-time; a refusal is said once."""
        if self.realtime <= 0:
            return
        from sysid_ros.hardware.realtime import raise_process_threads

        raised, refused = raise_process_threads(OTHERS_PRIORITY, prefixes=())
        if refused and not self._said_threads:
            self._said_threads = True
            self.log.warning("the bridge process's other threads keep normal scheduling (%s): on a busy "
                             "host they can hold the interpreter lock the control loop waits for", refused)
        elif raised and not self._said_threads:
            self._said_threads = True
            self.log.info("bridge process (pid %d, no ROS): its other threads (requests, commands, "
                          "events) at SCHED_FIFO %d", os.getpid(), OTHERS_PRIORITY)

    # ------------------------------------------------------------------------------ requests
    def configure(self, params: dict) -> dict:
        from sysid_ros.hardware.bridge import Bridge
        from sysid_ros.hardware.bridge_config import BridgeConfig

        if self.bridge is not None:
            raise_bridge_error("configure: the bridge process is configured already")
        config = BridgeConfig.from_parameters(params)
        self.realtime = int(config.realtime_priority)
        self.raise_threads()
        bus, timebase, truth = None, "wall", None
        try:
            if params.get("use_emulator"):
                from sysid_ros.hardware.emulated_bus import EmulatedBus, EmulatorOptions

                self.emulated = EmulatedBus(config.joints, period=config.period,
                                            options=EmulatorOptions.from_parameters(params)).start()
                config = config.replace(interface="virtual", channel=self.emulated.channel)
                bus, timebase = self.emulated.bus, self.emulated.timebase
                names, values = self.emulated.emulator.true_parameters()
                truth = (list(names), [float(v) for v in values])
                payload = self.emulated.payload
                self.log.warning("EMULATED motors on virtual channel %r (no hardware)%s", config.channel,
                                 f", payload {payload.mass} kg on {payload.body}" if payload else "")
            self.bridge = Bridge(config, bus=bus, on_sample=self._on_sample, on_trip=self._on_trip,
                                 on_replay_done=self._on_replay_done, logger=self.log, timebase=timebase)
            self.bridge.configure()
        except BaseException:
            self.bridge = None
            self._close_emulated()
            raise
        self.raise_threads()
        return {"truth": truth}

    def activate(self) -> None:
        self._bridge().activate()
        self.raise_threads()

    def deactivate(self) -> list[str]:
        unconfirmed = self._bridge().deactivate()
        self.raise_threads()  # a keeper thread re-sending disable frames
        return unconfirmed

    def clear_fault(self) -> str:
        return self._bridge().clear_fault()

    def status(self):
        return self._bridge().status()

    def emulator(self, name: str, args: tuple) -> Any:
        if self.emulated is None:
            raise_bridge_error("no emulated motors in this bridge (use_emulator is false)")
        if name not in EMULATOR_CALLS:
            raise_bridge_error(f"emulator call {name!r} is not one of {sorted(EMULATOR_CALLS)}")
        emulator = self.emulated.emulator
        if name == "motor_states":
            return [int(m.state) for m in emulator.motors]
        return getattr(emulator, name)(*args)

    def shutdown(self) -> None:
        """Motors disabled (confirmed), bus closed, emulator stopped; idempotent."""
        bridge, self.bridge = self.bridge, None
        if bridge is not None:
            bridge.shutdown()
        self._close_emulated()

    def _close_emulated(self) -> None:
        if self.emulated is not None:
            states = ", ".join(f"{m.joint.name}=0x{int(m.state):X}" for m in self.emulated.emulator.motors)
            self.log.info("emulator motor states at stop: %s", states)
            self.emulated.close()
            self.emulated = None

    def _bridge(self):
        if self.bridge is None:
            raise_bridge_error("the bridge is not configured")
        return self.bridge

    # ------------------------------------------------------------------------------ loop callbacks
    def _on_sample(self, sample) -> None:
        self.events.put(sample)  # converted by the sender thread, not in the loop

    def _on_trip(self, trip) -> None:
        self.events.put(("trip", trip))

    def _on_replay_done(self) -> None:
        self.events.put(("replay_done",))

    # ------------------------------------------------------------------------------ main loop
    def serve(self, stop: StopRequest) -> int:
        """Answer requests until ``shutdown``, the host's end closing or ``stop`` (SIGTERM); the
        motors are disabled on every one of these paths. Returns the exit status."""
        calls = {"configure": self.configure, "activate": self.activate, "deactivate": self.deactivate,
                 "clear_fault": self.clear_fault, "status": self.status, "emulator": self.emulator}
        status = 0
        try:
            while True:
                wait([self.rpc, stop])
                if stop.is_requested():
                    self.log.warning("bridge process: SIGTERM: disabling every motor")
                    break
                try:
                    seq, method, args = self.rpc.recv()
                except (EOFError, OSError):
                    self.log.error("the bridge's host process went away: disabling every motor")
                    break
                if method == "shutdown":
                    self.shutdown()
                    self._finish_events()
                    self._reply((seq, "ok", None))
                    return 0
                try:
                    value = calls[method](*args)
                except BaseException as exc:  # answered: the host decides (the node stays up)
                    if not _is_sysid_error(exc):
                        self.log.error("bridge process: %s failed:\n%s", method, traceback.format_exc())
                    self._reply((seq, "error", type(exc).__name__, str(exc)))
                    continue
                self._reply((seq, "ok", value))
        except BaseException:
            traceback.print_exc()
            status = 1
        self.shutdown()
        self._finish_events()
        return status

    def _reply(self, answer: tuple) -> None:
        try:
            self.rpc.send(answer)
        except (OSError, ValueError):
            pass  # the host is gone; the next recv says so

    def _finish_events(self) -> None:
        self.events.put(None)
        self._sender.join(timeout=2.0)


def _wire(item: Any) -> tuple:
    """An event as sent: a joint sample as plain lists (pickled faster than arrays)."""
    if isinstance(item, tuple):
        return item
    return ("sample", item.stamp, item.cycle, item.position.tolist(), item.velocity.tolist(),
            item.effort.tolist())


def _is_sysid_error(exc: BaseException) -> bool:
    from sysid_ros.core.errors import SysIdError

    return isinstance(exc, SysIdError)


def raise_bridge_error(text: str) -> None:
    from sysid_ros.hardware.bridge_types import BridgeError

    raise BridgeError(text)


def _die_with_parent() -> None:
    """SIGTERM from Linux when the host process ends (its clean path here: motors disabled)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or not all(a.isdigit() for a in argv):
        print("usage: python -m sysid_ros.hardware.bridge_worker RPC_FD STREAM_FD (started by "
              "sysid_ros.hardware.bridge_process.BridgeProcess)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = StopRequest()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.request())  # taken between requests
    _die_with_parent()
    parent = os.environ.get("SYSID_BRIDGE_HOST_PID", "")
    if parent.isdigit() and os.getppid() != int(parent):
        return 0  # the host died before the request: nothing was opened
    from sysid_ros.core.blas import one_thread_from_start

    one_thread_from_start()
    worker = Worker(Connection(int(argv[0])), Connection(int(argv[1])))
    worker.start()
    status = worker.serve(stop)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (the interpreter's exit would restore the default)
    stop.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
