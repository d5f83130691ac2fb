"""Emulated Damiao motors handed to a host as a python-can bus (no ROS).

:class:`EmulatedBus` starts a :class:`~sysid_ros.hardware.emulator.MotorEmulator` on a private
python-can ``virtual`` channel and opens the host's bus on the same channel: the bridge gets that
bus (``Bridge(config, bus=emulated.bus)``) exactly as it would get a SocketCAN one, and nothing in
the bridge knows it talks to an emulator. ``virtual`` connects buses inside one process only;
across processes run the ``damiao_emulator`` node on a shared bus (``vcan0``) instead.

The host's bus fails like SocketCAN while the emulator is bus-off (``send`` raises ENOBUFS).

:data:`EMULATOR_PARAMETERS` is the ``emulator.*`` parameter group of both nodes that emulate
motors (``damiao_bridge`` with ``use_emulator: true``, ``damiao_emulator``);
:class:`EmulatorOptions` holds its values.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import can

from sysid_ros.hardware.wiring import KIND_TEXT, ConfigError, convert

if TYPE_CHECKING:  # the emulator (MuJoCo) is imported only when one is built
    from sysid_ros.hardware.emulator import JointLike

__all__ = ["EMULATOR_PARAMETERS", "EmulatedBus", "EmulatorOptions"]

PREFIX = "emulator."

#: ``(name under "emulator.", default, description)`` of the emulator parameter group.
EMULATOR_PARAMETERS: tuple[tuple[str, Any, str], ...] = (
    ("model_path", "", "MJCF driven by the emulator ('' = the package's default robot)"),
    ("initial_pose", "home", "keyframe of the MJCF the emulated arm starts in ('' = qpos0)"),
    ("payload", "", "emulated payload 'body=NAME,mass=KG,com=X,Y,Z[,inertia=...]' ('' = none)"),
    ("clock", "lockstep", "emulated physics: 'lockstep' (a control period per command round, "
                          "deterministic) or 'realtime' (wall clock)"),
    ("physics_rate", 1000.0, "[Hz] physics step rate (lockstep: rounded to a whole number of steps "
                             "per control period)"),
    ("firmware", "v13", "v13 (low 8 ID bits compared, wrong-mode frames misread) | legacy (exact IDs)"),
    ("timeout_registers", 0, "TIMEOUT register at power-up (50 us units; 0 = off, as shipped)"),
    ("realtime_priority", 50, "SCHED_FIFO priority (1-99) of the emulated motors' thread; 0 = normal "
                              "scheduling"),
)


@dataclass(frozen=True)
class EmulatorOptions:
    """The emulated robot and firmware (see :data:`EMULATOR_PARAMETERS`)."""

    model_path: str = ""
    initial_pose: str = "home"
    payload: str = ""
    clock: Literal["lockstep", "realtime"] = "lockstep"
    physics_rate: float = 1000.0
    firmware: Literal["v13", "legacy"] = "v13"
    timeout_registers: int = 0
    realtime_priority: int = 50

    def __post_init__(self) -> None:
        if self.clock not in ("lockstep", "realtime"):
            raise ConfigError(f"emulator.clock must be 'lockstep' or 'realtime', got {self.clock!r}")
        if self.firmware not in ("v13", "legacy"):
            raise ConfigError(f"emulator.firmware must be 'v13' or 'legacy', got {self.firmware!r}")
        if not 0 <= self.realtime_priority <= 99:
            raise ConfigError(f"emulator.realtime_priority must be 0..99, got {self.realtime_priority}")
        if not self.physics_rate > 0 or self.timeout_registers < 0:
            raise ConfigError(f"emulator.physics_rate must be > 0 and timeout_registers >= 0, got "
                              f"{self.physics_rate}, {self.timeout_registers}")

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> EmulatorOptions:
        """From flat ROS-style parameters (``"emulator.clock"`` ...; others are ignored); missing
        ones take their defaults."""
        values = {}
        for name, default, _ in EMULATOR_PARAMETERS:
            value = params.get(PREFIX + name, default)
            try:
                values[name] = convert(type(default), value)
            except (TypeError, ValueError):
                raise ConfigError(f"{PREFIX}{name}: expected {KIND_TEXT[type(default)]}, "
                                  f"got {value!r}") from None
        return cls(**values)


class EmulatedBus:
    """Emulated motors for ``joints`` on a private virtual channel, and a host's bus on it.

    ``period`` [s] is the host's control period: with ``clock="lockstep"`` the emulated physics
    advances exactly one period per command round (the physics step is the period divided into
    the whole number of steps nearest ``physics_rate``), and :attr:`timebase` tells the bridge to
    count time in rounds. ``initial_pose`` (joint positions [rad], configured order) replaces the
    options' keyframe. Own everything it opens: :meth:`close` stops the emulator and shuts the
    host's bus (also as a context manager).
    """

    def __init__(self, joints: Iterable[JointLike], *, period: float, options: EmulatorOptions | None = None,
                 channel: str | None = None, initial_pose: Sequence[float] | None = None) -> None:
        from sysid_ros.core.sim.synthetic import Payload
        from sysid_ros.hardware.emulator import MotorEmulator

        self.options = options or EmulatorOptions()
        if not period > 0:
            raise ConfigError(f"the host's control period must be > 0 s, got {period}")
        self.channel = channel or f"emulated-{uuid.uuid4().hex[:12]}"
        self.payload = Payload.parse(self.options.payload) if self.options.payload else None
        physics_rate = self.options.physics_rate
        if self.options.clock == "lockstep":
            physics_rate = max(1, round(physics_rate * period)) / period
        o = self.options
        pose = initial_pose if initial_pose is not None else o.initial_pose or None
        self.emulator = MotorEmulator(
            joints, channel=self.channel, interface="virtual", model_path=o.model_path or None,
            initial_pose=pose, payload=self.payload, physics_rate=physics_rate,
            clock=o.clock, lockstep_period=period, timeout_registers=o.timeout_registers, firmware=o.firmware,
            realtime_priority=o.realtime_priority)
        try:
            self._raw_bus = can.Bus(interface="virtual", channel=self.channel, receive_own_messages=False)
        except BaseException:
            self.emulator.stop()
            raise
        self.bus: can.BusABC = self.emulator.host_bus(self._raw_bus)
        self._closed = False

    @property
    def timebase(self) -> Literal["wall", "rounds"]:
        """The bridge's time base for this emulator: ``"rounds"`` in lockstep, else ``"wall"``."""
        return "rounds" if self.options.clock == "lockstep" else "wall"

    def start(self) -> EmulatedBus:
        """Start the emulator answering frames (idempotent)."""
        self.emulator.start()
        return self

    def close(self) -> None:
        """Stop the emulator and shut the host's bus (idempotent)."""
        self.emulator.stop()
        if not self._closed:
            self._closed = True
            self.bus.shutdown()

    def __enter__(self) -> EmulatedBus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
