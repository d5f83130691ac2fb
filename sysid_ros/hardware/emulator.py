"""Emulated Damiao motors on a python-can bus, their shafts driven by MuJoCo (no ROS).

:class:`EmulatedMotor` is one motor's firmware as Damiao's DM-J manual describes it (registers,
enable/disable/zero/clear-error, the MIT law, state codes, the CAN TIMEOUT watchdog, one reply per
frame received) with faults on demand.
:class:`MotorEmulator` puts several of them on one bus and closes their loops through a MuJoCo
model of the robot (the package's default robot unless told otherwise).

**Bus.** python-can's ``virtual`` interface connects buses inside one process only, so the
emulator is primarily used in-process: a host (the bridge, a test) opens a bus on the same
virtual channel and the emulator answers from its own thread (:meth:`MotorEmulator.start`);
:class:`sysid_ros.hardware.emulated_bus.EmulatedBus` does both. Any other python-can bus works the
same way (``socketcan`` on ``vcan0`` across processes, the ``damiao_emulator`` node).

**Time.** ``clock="realtime"``: physics follows the monotonic wall clock; between frames every
motor keeps applying its last command, re-evaluating its law at every physics step with the
current shaft state (what the firmware's servo loop does). ``clock="lockstep"``: physics
advances by ``lockstep_period`` whenever a command *round* completes (a motor receives its second
command-type frame since the last advance), so a host that commands every motor once per cycle
sees exactly one period of physics per cycle whatever its timing jitter — deterministic runs for
tests. In both modes the TIMEOUT watchdog runs on the wall clock (a motor's own clock).

**An honest CAN timeout.** A real motor stops itself when no frame has been *on the bus* for its
TIMEOUT (0.1 s: a dead or stalled host); it is never late to hear a frame. So the emulator judges
the timeout on bus time, not on when its own thread got to run: every frame is handled at the
instant it was on the bus (its bus timestamp), and the "nothing came" instant given to the
watchdogs is the moment taken *before* the queue was last seen empty — a frame sent before that
moment is in the queue and is handled first. A starved emulator thread (a loaded host, a lock
held) thus never declares 0xD for a host that kept sending; a host that really fell silent finds
the motor latched at ``last frame + TIMEOUT``, in the physics too (``realtime``: the watchdogs
run at every physics step's own time, so the torque stops at that step even when the steps are
computed late; ``lockstep``: physics advances only on command rounds, and the first frame after
the expiry finds the motor latched). No separate timer thread is needed for that honesty; the
thread asks for real-time scheduling (``realtime_priority``, :mod:`.realtime`) so that replies
are timely as well.

The motors' firmware (registers, modes, faults) is :mod:`.emulated_motor`'s.

Units: motor space is the motor's output shaft (rad, rad/s, N·m); joint space is MuJoCo's. Per
joint with direction ``d``, offset ``o`` and gear ratio ``G``: ``p = d·G·(q − o)``,
``v = d·G·q̇``, ``τ_joint = d·G·t``.
"""

from __future__ import annotations

import errno
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import can
import mujoco
import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.plant import MitPlant
from sysid_ros.hardware.codec import REGISTER_REQUEST_ID, MotorState
from sysid_ros.hardware.emulated_motor import (
    AMBIENT_C,
    OVER_TEMPERATURE_C,
    EmulatedMotor,
    EmulatorError,
    EmulatorJoint,
    JointLike,
    as_joint,
)
from sysid_ros.hardware.realtime import RealtimeGrant, request_realtime
from sysid_ros.hardware.transport import Payload

log = logging.getLogger(__name__)

__all__ = ["BUS_OFF_ERROR_ID", "EmulatedMotor", "EmulatorError", "EmulatorJoint", "JointLike",
           "MotorEmulator"]

BUS_OFF_ERROR_ID = 0x40
"""Error-frame class of a bus-off (SocketCAN ``CAN_ERR_BUSOFF``)."""

_MAX_BATCH = 64  # frames handled per wake-up at most (a flooding host still gets replies)


class MotorEmulator:
    """Several :class:`EmulatedMotor` on one python-can bus, shafts driven by MuJoCo.

    See the module docstring. Thread-safe: the emulator runs in its own thread after
    :meth:`start`; inspection and fault injection take its lock.
    """

    def __init__(self, joints: Iterable[JointLike], *, channel: str = "damiao", interface: str = "virtual",
                 bus: can.BusABC | None = None, model_path: str | Path | None = None,
                 initial_pose: str | Sequence[float] | None = "home", payload: Any = None,
                 physics_rate: float = 1000.0, clock: Literal["realtime", "lockstep"] = "realtime",
                 lockstep_period: float | None = None, timeout_registers: int = 0,
                 firmware: Literal["v13", "legacy"] = "v13", poll_period: float = 0.002,
                 realtime_priority: int = 0) -> None:
        self.joints = tuple(as_joint(j) for j in joints)
        if not self.joints:
            raise EmulatorError("the emulator needs at least one joint")
        ids = [j.can_id for j in self.joints]
        if len(set(ids)) != len(ids):
            raise EmulatorError(f"can_ids must be unique, got {ids}")
        if clock not in ("realtime", "lockstep"):
            raise EmulatorError(f"clock must be 'realtime' or 'lockstep', got {clock!r}")
        if not physics_rate > 0:
            raise EmulatorError(f"physics_rate must be > 0 Hz, got {physics_rate}")
        self.clock = clock
        self.dt = 1.0 / physics_rate
        period = self.dt if lockstep_period is None else float(lockstep_period)
        self.lockstep_steps = max(1, round(period / self.dt))
        self.poll_period = poll_period
        self.realtime_priority = int(realtime_priority)
        self.grant: RealtimeGrant | None = None  # the thread's scheduling (after start)

        from sysid_ros.core import resources
        from sysid_ros.core.sim.synthetic import with_payload

        path = Path(model_path) if model_path else resources.default_robot_path()
        self.model = RobotModel.from_mjcf(path)
        self.payload = payload
        # the shafts: the package's MuJoCo plant (its options, the model's integrator), driven by
        # the torques the motors' firmware computes and saturates (MitPlant.step_torque)
        try:
            self.plant = MitPlant(with_payload(self.model, payload) if payload is not None else self.model.mj,
                                  timestep=self.dt, joints=[j.name for j in self.joints], integrator=None)
        except SysIdError as exc:
            raise EmulatorError(f"{exc} of {path}") from None
        self.mj, self.data = self.plant.mj, self.plant.data
        self._qadr, self._dof = self.plant.qpos_indices, self.plant.dof_indices
        self._tau = np.zeros(len(self.joints))  # joint torques of the current step [N·m]
        self._direction = np.array([float(j.direction) for j in self.joints])
        self._offset = np.array([j.position_offset for j in self.joints])
        self._gear = np.array([j.gear_ratio for j in self.joints])
        # per motor (d·G, qpos address, dof address, offset) as Python numbers for the hot path
        self._map = tuple((float(d * g), int(a), int(v), float(o)) for d, g, a, v, o in zip(
            self._direction, self._gear, self._qadr, self._dof, self._offset, strict=True))
        self._set_pose(initial_pose, path)
        mujoco.mj_forward(self.mj, self.data)

        self.motors = tuple(EmulatedMotor(j, timeout=timeout_registers, firmware=firmware, rng_seed=i)
                            for i, j in enumerate(self.joints))
        self._by_key: dict[Any, EmulatedMotor] = {}
        for m in self.motors:
            self._by_key[m.joint.name] = m
            self._by_key[m.joint.can_id] = m

        self._own_bus = bus is None
        self.bus = can.Bus(interface=interface, channel=channel) if bus is None else bus
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._running = threading.Event()
        self._round: set[int] = set()
        self._t0 = time.monotonic()
        self._steps = 0
        self.bus_off = False
        self._error: BaseException | None = None

    # -- set-up ------------------------------------------------------------------------------

    def _set_pose(self, pose: str | Sequence[float] | None, path: Path) -> None:
        if pose is None or (isinstance(pose, str) and pose == ""):
            return
        if isinstance(pose, str):
            kid = mujoco.mj_name2id(self.mj, mujoco.mjtObj.mjOBJ_KEY, pose)
            if kid < 0:
                raise EmulatorError(f"initial_pose {pose!r}: no keyframe of that name in {path}")
            mujoco.mj_resetDataKeyframe(self.mj, self.data, kid)
            return
        q = np.asarray(pose, dtype=float)
        if q.shape != (len(self.joints),) or not np.all(np.isfinite(q)):
            raise EmulatorError(f"initial_pose: expected {len(self.joints)} finite joint positions, "
                                f"got {pose!r}")
        self.data.qpos[self._qadr] = q

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> MotorEmulator:
        """Start answering frames in a daemon thread (idempotent)."""
        with self._lock:
            if self._thread is not None:
                return self
            self._t0 = time.monotonic() - self._steps * self.dt
            now = time.monotonic()
            for m in self.motors:
                m.last_rx = now
            self._running.set()
            self._thread = threading.Thread(target=self._run, name="damiao-emulator", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and shut down the emulator's own bus (idempotent)."""
        self._running.clear()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        if self._own_bus and self.bus is not None:
            self.bus.shutdown()
            self._own_bus = False

    def __enter__(self) -> MotorEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """The exception that ended the emulator thread, if any."""
        return self._error

    def _run(self) -> None:
        """Wait for a frame, take every frame already queued behind it, handle them in order and
        send their replies in one burst: one wake-up of this thread (and of the host waiting for
        the replies) per command round rather than per frame. Time is bus time (module
        docstring): frames at their bus timestamps, "nothing came" only up to the moment taken
        before the queue was seen empty."""
        self.grant = request_realtime(self.realtime_priority, lock_memory=True)
        if self.realtime_priority:
            self.grant.report(log, "damiao emulator")
        recv = self.bus.recv
        replies: list[tuple[int, bytes]] = []
        try:
            last = time.monotonic()
            while self._running.is_set():
                first = recv(timeout=self.poll_period)
                # the instant up to which the queue is known: taken before the drain below, so a
                # frame sent before it is in the batch (a virtual or SocketCAN bus queues a frame
                # as it is sent)
                mono, wall = time.monotonic(), time.time()
                batch = [] if first is None else [first]
                while len(batch) < _MAX_BATCH and (more := recv(timeout=0.0)) is not None:
                    batch.append(more)
                with self._lock:
                    for msg in batch:
                        # at the moment it was on the bus, not when this thread got to it
                        age = wall - msg.timestamp
                        now = max(last, mono - age) if 0.0 <= age < 1.0 else mono
                        last = now
                        self._handle(msg, now, replies)
                    if not batch:  # nothing on the bus up to mono
                        last = max(last, mono)
                        self._handle(None, last, replies)
                    for arbitration_id, data in replies:
                        self._send(arbitration_id, data)
                replies.clear()
        except BaseException as exc:  # a dead emulator must be visible to the tests that use it
            log.exception("damiao emulator stopped")
            self._error = exc
            raise

    # -- the core step (public so a host can drive the emulator without a thread) -------------

    def process(self, msg: can.Message | None, now: float) -> None:
        """Advance to ``now`` [s, monotonic] and handle ``msg`` (``None``: only advance); the
        reply, if any, is sent at once."""
        replies: list[tuple[int, bytes]] = []
        with self._lock:
            self._handle(msg, now, replies)
            for arbitration_id, data in replies:
                self._send(arbitration_id, data)

    def _handle(self, msg: can.Message | None, now: float, replies: list[tuple[int, bytes]]) -> None:
        """:meth:`process` with the replies appended to ``replies`` as ``(arbitration_id, payload)``
        instead of sent (the caller holds the lock)."""
        if self.clock == "realtime":
            self._advance_to(now)
        if msg is None or msg.is_error_frame or msg.is_remote_frame or msg.is_fd or self.bus_off:
            self._watchdogs(now)
            return
        if msg.is_extended_id:
            return
        arbitration_id = msg.arbitration_id
        data = bytes(msg.data)
        lockstep = self.clock == "lockstep" and arbitration_id != REGISTER_REQUEST_ID
        for i, motor in enumerate(self.motors):
            if motor.comm_lost or not motor.addressed(arbitration_id, data):
                continue
            if lockstep:
                if i in self._round:
                    self._round.clear()
                    for _ in range(self.lockstep_steps):
                        self._step()
                self._round.add(i)
            motor.watchdog(now)  # a frame after the expiry finds the motor latched
            p, v = self._motor_state(i)
            reply = motor.receive(arbitration_id, data, now, p, v)
            if reply is not None:
                replies.append((motor.mst_id, reply))

    def _send(self, arbitration_id: int, data: bytes, *, error: bool = False) -> None:
        msg = can.Message(arbitration_id=arbitration_id, data=Payload(data), is_extended_id=False,
                          is_error_frame=error)
        try:
            self.bus.send(msg)
        except can.CanError as exc:
            log.warning("emulator could not send 0x%03X: %s", arbitration_id, exc)

    def _advance_to(self, now: float) -> None:
        target = math.floor((now - self._t0) / self.dt)
        behind = target - self._steps
        if behind > 2000:  # starved for > 2 s of physics: skip ahead rather than stall
            log.warning("emulator fell %d physics steps behind; skipping ahead", behind)
            self._t0 += (behind - 1) * self.dt
            target = self._steps + 1
        while self._steps < target:
            self._watchdogs(self._t0 + self._steps * self.dt)
            self._step()

    def _watchdogs(self, now: float) -> None:
        for m in self.motors:
            m.watchdog(now)

    def _motor_state(self, i: int) -> tuple[float, float]:
        """Motor-space ``(position, velocity)`` of motor ``i`` (unwrapped)."""
        scale, qadr, dof, offset = self._map[i]
        return scale * (float(self.data.qpos[qadr]) - offset), scale * float(self.data.qvel[dof])

    def _step(self) -> None:
        tau = self._tau
        for i, m in enumerate(self.motors):
            p, v = self._motor_state(i)
            tau[i] = self._map[i][0] * m.torque(p, v)
        self.plant.step_torque(tau)
        self._steps += 1

    def advance(self, steps: int = 1) -> None:
        """Step physics ``steps`` times under the motors' current commands (lockstep hosts)."""
        with self._lock:
            for _ in range(steps):
                self._step()

    # -- inspection ---------------------------------------------------------------------------

    def motor(self, key: str | int) -> EmulatedMotor:
        try:
            return self._by_key[key]
        except KeyError:
            raise EmulatorError(f"no emulated motor {key!r}; joints {[j.name for j in self.joints]}, "
                                f"can_ids {[j.can_id for j in self.joints]}") from None

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def sim_time(self) -> float:
        """Simulated time [s] since the start."""
        return self._steps * self.dt

    def joint_positions(self) -> np.ndarray:
        """True joint positions ``(n,)`` [rad], configured order."""
        with self._lock:
            return self.data.qpos[self._qadr].copy()

    def joint_velocities(self) -> np.ndarray:
        with self._lock:
            return self.data.qvel[self._dof].copy()

    def joint_torques(self) -> np.ndarray:
        """Joint torques ``(n,)`` [N·m] the motors apply now."""
        with self._lock:
            return np.array([d * g * m.torque_applied
                             for d, g, m in zip(self._direction, self._gear, self.motors, strict=True)])

    def true_parameters(self) -> tuple[list[str], np.ndarray]:
        """The truth for scoring: the arm's parameters (payload merged into its body) and, with a
        payload, its own 10 parameters as ``payload.*``."""
        from sysid_ros.core.model.robot import BODY_FIELDS
        from sysid_ros.core.sim.synthetic import true_parameters

        names = list(self.model.param_names)
        values = true_parameters(self.model, self.payload)
        if self.payload is not None:
            names += [f"payload.{f}" for f in BODY_FIELDS]
            values = np.concatenate([values, self.payload.params])
        return names, np.asarray(values, dtype=float)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, poll: float = 0.001) -> bool:
        """Poll ``predicate`` until true or ``timeout`` [s] passes (for tests and hosts)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if predicate():
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

    # -- fault injection ----------------------------------------------------------------------

    def inject_overtemperature(self, key: str | int, kind: Literal["mosfet", "coil"] = "mosfet") -> None:
        with self._lock:
            m = self.motor(key)
            if kind == "mosfet":
                m.t_mos = OVER_TEMPERATURE_C + 5.0
                m.fault(MotorState.MOSFET_OVER_TEMP)
            elif kind == "coil":
                m.t_rotor = OVER_TEMPERATURE_C + 10.0
                m.fault(MotorState.COIL_OVER_TEMP)
            else:
                raise EmulatorError(f"over-temperature kind must be 'mosfet' or 'coil', got {kind!r}")

    def cool_down(self, key: str | int) -> None:
        with self._lock:
            m = self.motor(key)
            m.t_mos = m.t_rotor = AMBIENT_C

    def inject_state(self, key: str | int, state: MotorState | int) -> None:
        with self._lock:
            self.motor(key).fault(MotorState(state))

    def inject_comm_loss(self, key: str | int) -> None:
        with self._lock:
            self.motor(key).comm_lost = True

    def restore_comm(self, key: str | int) -> None:
        with self._lock:
            self.motor(key).comm_lost = False

    def drop_replies(self, key: str | int, count: int) -> None:
        with self._lock:
            self.motor(key).drop_next = int(count)

    def drop_fraction(self, key: str | int, fraction: float, seed: int = 0) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise EmulatorError(f"fraction must be in [0, 1], got {fraction}")
        with self._lock:
            m = self.motor(key)
            m.drop_probability = float(fraction)
            m._rng.seed(seed)

    def inject_bus_off(self) -> None:
        with self._lock:
            if not self.bus_off:
                self.bus_off = True
                self._send(BUS_OFF_ERROR_ID, bytes(8), error=True)

    def clear_bus_off(self) -> None:
        with self._lock:
            self.bus_off = False

    def clear_faults(self) -> None:
        """Remove every injection (comm loss, drops, bus-off, temperatures); latched motor states
        stay until the host sends CLEAR_ERROR."""
        with self._lock:
            self.bus_off = False
            for m in self.motors:
                m.comm_lost, m.drop_next, m.drop_probability = False, 0, 0.0
                m.t_mos = m.t_rotor = AMBIENT_C

    def host_bus(self, bus: can.BusABC) -> can.BusABC:
        """``bus`` (the host's) wrapped so that ``send()`` raises ENOBUFS while bus-off."""
        return _BusOffAwareBus(bus, self)


class _BusOffAwareBus(can.BusABC):
    """A host bus that fails like SocketCAN while the emulator is bus-off (nobody acknowledges):
    ``send()`` raises ``CanOperationError`` with ``error_code=105`` (ENOBUFS)."""

    def __init__(self, inner: can.BusABC, emulator: MotorEmulator) -> None:
        self._inner = inner
        self._emulator = emulator
        self.channel_info = f"bus-off-aware {getattr(inner, 'channel_info', '')}"
        super().__init__(channel=getattr(inner, "channel", None))

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        if self._emulator.bus_off:
            raise can.CanOperationError("Failed to transmit: [Errno 105] No buffer space available",
                                        error_code=errno.ENOBUFS)
        self._inner.send(msg, timeout)

    def recv(self, timeout: float | None = None) -> can.Message | None:
        """The inner bus's next frame (its own filters apply; no second layer on the hot path)."""
        return self._inner.recv(timeout)

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        return self._inner.recv(timeout), False

    def shutdown(self) -> None:
        super().shutdown()
        self._inner.shutdown()
