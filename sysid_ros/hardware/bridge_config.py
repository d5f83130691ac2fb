"""Configuration of the Damiao bridge: the CAN bus, the control loop, the fail-safe timeouts and the
joints, loaded from the same ROS parameters file the node reads (``config/yam_damiao.yaml``).

The joints are parallel arrays under ``joints.`` (:mod:`sysid_ros.hardware.wiring`): the wiring
(names, motors, CAN IDs, direction, offset, gear) and the bridge's limits and gains.
:func:`load_bridge_config` reads the YAML file without ROS (tests, the benchmark); the node builds
the same :class:`BridgeConfig` from its declared parameters with :meth:`BridgeConfig.from_parameters`.

Units: positions [rad], velocities [rad/s], torques [N·m], gains kp [N·m/rad] and kd
[N·m·s/rad], all in **joint space**; times [s]; rates [Hz]; bit rates [bit/s].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from sysid_ros.core.model.motors import DAMIAO_MOTORS
from sysid_ros.hardware.wiring import (
    KIND_TEXT,
    WIRING_PARAMETERS,
    ConfigError,
    JointParameter,
    MotorWiring,
    convert,
    joint_rows,
)

__all__ = ["BUS_PARAMETERS", "JOINT_PARAMETERS", "BridgeConfig", "ConfigError", "JointConfig",
           "load_bridge_config", "load_parameters"]

NODE_NAME = "damiao_bridge"


#: ``(parameter name, default, description)`` of every scalar parameter of the bridge.
BUS_PARAMETERS: tuple[tuple[str, Any, str], ...] = (
    ("interface", "virtual", "python-can interface: socketcan, pcan, gs_usb, damiao_usb, virtual, ..."),
    ("channel", "damiao", "python-can channel (can0, PCAN_USBBUS1, /dev/ttyACM0, a virtual name, ...)"),
    ("bitrate", 1000000, "nominal CAN bit rate [bit/s]"),
    ("fd", False, "CAN-FD frames with bit-rate switch (motors set above 1 Mbit/s reply only in FD)"),
    ("data_bitrate", 5000000, "CAN-FD data-phase bit rate [bit/s]"),
    ("rate", 1000.0, "control loop rate [Hz]"),
    ("reply_deadline", 0.8, "fraction of a period spent waiting for every motor's reply"),
    ("command_timeout", 0.1, "no MotorCommand for this long [s] -> hold position with damping"),
    ("hold_timeout", 1.0, "holding for this long [s] without a fresh command -> disable"),
    ("max_missed_replies", 5, "consecutive missed replies of one motor before everything is disabled"),
    ("motor_timeout", 0.1, "CAN watchdog on each motor [s] (register TIMEOUT, 50 us units): a motor "
                           "that hears nothing for this long stops itself (host or bridge killed)"),
    ("motor_timeout_max", 0.5, "[s] longest motor CAN timeout the sizing from measured loop latency may "
                               "choose (motor_timeout is raised to deadline_margin x the loop's worst gap)"),
    ("deadline_margin", 4.0, "motor CAN timeout and command_timeout are at least this many times the "
                             "control loop's worst measured gap between two frames to a motor"),
    ("realtime_priority", 50, "SCHED_FIFO priority (1-99) asked for the control loop thread; 0 = normal "
                              "scheduling"),
    ("lock_memory", True, "mlockall the process when real-time scheduling is asked (no page faults to disk)"),
    ("unsafe_no_motor_timeout", False, "allow motor_timeout 0 (no motor watchdog: after a kill -9 of "
                                       "the bridge the motors keep their last command)"),
    ("max_position_rate", 0.0, "[rad/s] position targets move at most this fast toward the commanded "
                               "ones (a jump becomes a ramp); 0 = each joint's velocity limit"),
    ("enable_ramp_time", 0.5, "[s] after enable, velocity and feed-forward torque targets rise "
                              "linearly from 0 over this time (0 = at once)"),
    ("limit_mismatch", "error", "PMAX/VMAX/TMAX registers unlike the model table: 'error' or 'warn'"),
    ("startup_limit_margin", 0.05, "[rad] tolerance of the start-up joint-limit check"),
    ("diagnostics_rate", 5.0, "DiagnosticArray rate [Hz]"),
    ("autostart", False, "configure and activate at start (no lifecycle CLI needed)"),
    ("replay_file", "", "exported trajectory file to play instead of listening to motor_command"),
    ("replay_ramp_time", 3.0, "[s] ramp from the measured pose to the file's first sample"),
)

#: The per-joint parallel arrays: the wiring, then the bridge's limits and gains (joint space);
#: velocity and torque limits default to the motor's VMAX and TMAX through the gear ratio.
JOINT_PARAMETERS: tuple[JointParameter, ...] = (
    *WIRING_PARAMETERS,
    JointParameter("position_min", "position_min", float, "[rad] lower joint limit"),
    JointParameter("position_max", "position_max", float, "[rad] upper joint limit"),
    JointParameter("velocity_limits", "velocity_limit", float,
                   "[rad/s] joint speed limit (default: the motor's VMAX / gear ratio)", True),
    JointParameter("torque_limits", "torque_limit", float,
                   "[N·m] joint torque limit, the feed-forward clamp (default: the motor's TMAX × gear "
                   "ratio)", True),
    JointParameter("kp", "kp", float, "[N·m/rad] default stiffness (commands without kp, hold)", True),
    JointParameter("kd", "kd", float, "[N·m·s/rad] default damping (commands without kd, hold)", True),
)

#: Parameters of the node that are not the bridge's: ``use_emulator`` and the ``emulator.*``
#: group (:mod:`sysid_ros.hardware.emulated_bus`); :meth:`BridgeConfig.from_parameters` skips them.
NODE_ONLY_PARAMETERS = ("use_emulator", "emulator.")


@dataclass(frozen=True)
class JointConfig(MotorWiring):
    """One joint and its motor (the wiring), with limits and gains in joint space. Velocity and
    torque limits left at ``None`` are the motor's VMAX / gear ratio and TMAX × gear ratio."""

    position_min: float = -math.pi
    position_max: float = math.pi
    velocity_limit: float | None = None
    torque_limit: float | None = None
    kp: float = 10.0
    kd: float = 0.5

    def __post_init__(self) -> None:
        where = f"joint {self.name!r}"
        motor = DAMIAO_MOTORS.get(self.motor)
        if motor is None:
            raise ConfigError(f"{where}: unknown motor model {self.motor!r}; known: {sorted(DAMIAO_MOTORS)}")
        if not 0 < self.can_id < 0x7FF or not 0 <= self.master_id < 0x7FF:
            raise ConfigError(f"{where}: can_id must be in 1..0x7FE and master_id in 0..0x7FE, got "
                              f"{self.can_id:#x}, {self.master_id:#x}")
        if self.direction not in (1, -1):
            raise ConfigError(f"{where}: direction must be +1 or -1, got {self.direction}")
        if not self.gear_ratio > 0:
            raise ConfigError(f"{where}: gear_ratio must be > 0, got {self.gear_ratio}")
        if self.velocity_limit is None:
            object.__setattr__(self, "velocity_limit", motor.vmax / self.gear_ratio)
        if self.torque_limit is None:
            object.__setattr__(self, "torque_limit", motor.tmax * self.gear_ratio)
        if not self.position_min < self.position_max:
            raise ConfigError(f"{where}: position_min {self.position_min} must be below position_max "
                              f"{self.position_max}")
        for name in ("velocity_limit", "torque_limit"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{where}: {name} must be > 0, got {getattr(self, name)}")
        if not (self.kp >= 0 and self.kd > 0):
            raise ConfigError(f"{where}: need kp >= 0 and kd > 0 (kd = 0 with kp > 0 oscillates), got "
                              f"kp={self.kp}, kd={self.kd}")
        values = [getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), float)]
        if not all(math.isfinite(v) for v in values):
            raise ConfigError(f"{where}: every number must be finite, got {values}")


@dataclass(frozen=True)
class BridgeConfig:
    """The bus, loop and safety settings (see :data:`BUS_PARAMETERS`) and the joints."""

    joints: tuple[JointConfig, ...]
    interface: str = "virtual"
    channel: str = "damiao"
    bitrate: int = 1_000_000
    fd: bool = False
    data_bitrate: int = 5_000_000
    rate: float = 1000.0
    reply_deadline: float = 0.8
    command_timeout: float = 0.1
    hold_timeout: float = 1.0
    max_missed_replies: int = 5
    motor_timeout: float = 0.1
    motor_timeout_max: float = 0.5
    deadline_margin: float = 4.0
    realtime_priority: int = 50
    lock_memory: bool = True
    unsafe_no_motor_timeout: bool = False
    max_position_rate: float = 0.0
    enable_ramp_time: float = 0.5
    limit_mismatch: str = "error"
    startup_limit_margin: float = 0.05
    diagnostics_rate: float = 5.0
    autostart: bool = False
    replay_file: str = ""
    replay_ramp_time: float = 3.0

    def __post_init__(self) -> None:
        if not self.joints:
            raise ConfigError("the bridge needs at least one joint (joints.names is empty)")
        for attr in ("name", "can_id", "master_id"):
            values = [getattr(j, attr) for j in self.joints]
            if len(set(values)) != len(values):
                raise ConfigError(f"joint {attr}s must be unique, got {values}")
        ids = {j.can_id & 0xFF for j in self.joints}
        if len(ids) != len(self.joints):
            raise ConfigError("can_ids must differ in their low 8 bits (firmware V13 compares only those)")
        clash = ids & {j.master_id & 0xFF for j in self.joints}
        if clash:
            raise ConfigError(f"master_ids must differ from every can_id, both use {sorted(clash)}")
        if not self.rate > 0 or not 0.1 <= self.reply_deadline < 1.0:
            raise ConfigError(f"need rate > 0 and reply_deadline in [0.1, 1), got {self.rate}, "
                              f"{self.reply_deadline}")
        if not (self.command_timeout > 0 and self.hold_timeout >= 0 and self.motor_timeout >= 0):
            raise ConfigError("command_timeout must be > 0, hold_timeout and motor_timeout >= 0")
        if self.max_missed_replies < 1:
            raise ConfigError(f"max_missed_replies must be >= 1, got {self.max_missed_replies}")
        if self.limit_mismatch not in ("error", "warn"):
            raise ConfigError(f"limit_mismatch must be 'error' or 'warn', got {self.limit_mismatch!r}")
        if self.motor_timeout == 0 and not self.unsafe_no_motor_timeout:
            raise ConfigError("motor_timeout 0 turns off the motors' own CAN watchdog: if the host or "
                              "the bridge dies the motors keep their last command; set "
                              "unsafe_no_motor_timeout: true to allow it")
        if self.motor_timeout and self.motor_timeout < 2.0 / self.rate:
            raise ConfigError(f"motor_timeout {self.motor_timeout} s is shorter than two control periods")
        if not self.motor_timeout_max > 0 or not self.deadline_margin >= 1.0:
            raise ConfigError(f"need motor_timeout_max > 0 and deadline_margin >= 1, got "
                              f"{self.motor_timeout_max}, {self.deadline_margin}")
        if not 0 <= self.realtime_priority <= 99:
            raise ConfigError(f"realtime_priority must be 0 (normal scheduling) or a SCHED_FIFO priority "
                              f"1..99, got {self.realtime_priority}")
        if self.max_position_rate < 0 or self.enable_ramp_time < 0:
            raise ConfigError(f"max_position_rate and enable_ramp_time must be >= 0, got "
                              f"{self.max_position_rate}, {self.enable_ramp_time}")
        if not self.diagnostics_rate > 0 or self.replay_ramp_time < 0:
            raise ConfigError("diagnostics_rate must be > 0 and replay_ramp_time >= 0")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def period(self) -> float:
        """Control period [s]."""
        return 1.0 / self.rate

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> BridgeConfig:
        """From flat ROS-style parameters (``"rate"``, ``"joints.names"`` ...); missing scalars take
        their defaults, every ``joints.*`` array must be given with one entry per joint (the
        optional ones may be omitted: defaults). The node's own parameters
        (:data:`NODE_ONLY_PARAMETERS`) are skipped; any other unknown name is an error."""
        known = {n for n, _, _ in BUS_PARAMETERS} | {f"joints.{p.key}" for p in JOINT_PARAMETERS}
        unknown = {k for k in params if k not in known and not k.startswith(NODE_ONLY_PARAMETERS)}
        if unknown:
            raise ConfigError(f"unknown bridge parameters {sorted(unknown)}")
        joints = tuple(JointConfig(**row) for row in joint_rows(params, JOINT_PARAMETERS))
        scalars = {}
        for name, default, _ in BUS_PARAMETERS:
            value = params.get(name, default)
            try:
                scalars[name] = (_as_bool(name, value) if isinstance(default, bool)
                                 else convert(type(default), value))
            except (TypeError, ValueError):
                raise ConfigError(f"{name}: expected {KIND_TEXT[type(default)]}, got {value!r}") from None
        return cls(joints=joints, **scalars)

    def replace(self, **changes: Any) -> BridgeConfig:
        """A copy with some scalar settings changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return BridgeConfig(**values)


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{name}: expected true/false, got {value!r}")


def flatten_parameters(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"joints": {"names": [...]}}`` → ``{"joints.names": [...]}`` (ROS parameter naming)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_parameters(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def load_parameters(path: str | Path, *, node_name: str) -> dict[str, Any]:
    """The flat ROS parameters (``"joints.names"`` ...) a node called ``node_name`` gets from a ROS
    parameters YAML file: those of its sections ``/**``, ``node_name:``, ``/node_name:`` or a
    namespaced ``/ns/node_name:``, applied in the file's order (a later section wins, as rcl
    does). :class:`ConfigError` if the file is missing, not YAML, or has no such section."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"parameters file {str(path)!r} not found")
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(document, Mapping):
        raise ConfigError(f"{path}: expected a mapping of node names, got {type(document).__name__}")
    sections = [value.get("ros__parameters") for key, value in document.items()
                if str(key).lstrip("/").split("/")[-1] in ("**", node_name) and isinstance(value, Mapping)]
    sections = [s for s in sections if isinstance(s, Mapping)]
    if not sections:
        raise ConfigError(f"{path}: no '{node_name}: ros__parameters:' section")
    params: dict[str, Any] = {}
    for section in sections:
        params.update(flatten_parameters(section))
    return params


def load_bridge_config(path: str | Path, *, node_name: str = NODE_NAME, **overrides: Any) -> BridgeConfig:
    """The bridge's parameters in a ROS parameters YAML file (:func:`load_parameters`) as a
    :class:`BridgeConfig`; ``overrides`` replace scalar parameters (``rate=500.0``)."""
    params = load_parameters(path, node_name=node_name)
    params.update(overrides)
    return BridgeConfig.from_parameters(params)
