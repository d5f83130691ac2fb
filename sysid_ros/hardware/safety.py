"""Fail-safe rules of the Damiao bridge, free of I/O: what a command may contain, when the
command stream counts as lost, which motor states and reply gaps stop everything, and how a bus
error is explained to a person.

* :class:`JointTargets` / :class:`CommandLimits`: joint-space MIT targets and the joint limits
  every commanded field is clamped to on its way to the bus (the clamping itself is
  :meth:`sysid_ros.hardware.motor_frames.MotorFrames.encode`'s).
* :func:`parse_command`: a ``MotorCommand`` (by joint name) → new joint targets; NaN/inf or
  inconsistent array lengths refuse the whole message; unknown joint names are counted.
* :class:`CommandShaper`: per control cycle, position targets move toward the commanded ones
  at most ``position_rate`` [rad/s] (a jump becomes a ramp), and for ``ramp_time`` [s] after
  enable the velocity and feed-forward torque targets rise linearly from 0.
* :class:`Watchdog`: no command for ``command_timeout`` → hold the measured position with the
  default gains (damping), no fresh command for ``hold_timeout`` more → disable.
* :class:`Trip`: why everything was disabled (which motor, which reason) — one per incident.
* :func:`explain_bus_error`: a CAN error → one message naming the likely causes.
"""

from __future__ import annotations

import errno
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_config import JointConfig

__all__ = [
    "CommandError",
    "CommandLimits",
    "CommandShaper",
    "JointTargets",
    "Trip",
    "TripKind",
    "Watchdog",
    "WatchdogMode",
    "explain_bus_error",
    "parse_command",
]

TARGET_FIELDS = ("position", "velocity", "effort", "kp", "kd")


class CommandError(SysIdError):
    """A command message was refused as a whole (NaN, wrong array lengths); the previous targets stay."""


@dataclass
class JointTargets:
    """Joint-space MIT targets, each ``(n,)``: position [rad], velocity [rad/s], effort
    (feed-forward torque) [N·m], kp [N·m/rad], kd [N·m·s/rad]."""

    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    kp: np.ndarray
    kd: np.ndarray

    def copy(self) -> JointTargets:
        return JointTargets(*(getattr(self, f).copy() for f in TARGET_FIELDS))

    @classmethod
    def hold(cls, position: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> JointTargets:
        """Stay at ``position`` with zero velocity and feed-forward (stiffness ``kp``, damping ``kd``)."""
        position = np.asarray(position, dtype=float).copy()
        zeros = np.zeros_like(position)
        return cls(position, zeros, zeros.copy(), np.asarray(kp, dtype=float).copy(),
                   np.asarray(kd, dtype=float).copy())


@dataclass(frozen=True)
class CommandLimits:
    """Joint-space limits, each ``(n,)``: positions [rad], speeds [rad/s], torques [N·m]; default
    gains used where a command gives none."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    torque: np.ndarray
    kp_default: np.ndarray
    kd_default: np.ndarray

    @classmethod
    def from_joints(cls, joints: Sequence[JointConfig]) -> CommandLimits:
        def col(attr: str) -> np.ndarray:
            return np.array([float(getattr(j, attr)) for j in joints])

        return cls(col("position_min"), col("position_max"), col("velocity_limit"), col("torque_limit"),
                   col("kp"), col("kd"))


@dataclass
class ParsedCommand:
    """New targets from one command message and what was ignored in it."""

    targets: JointTargets
    unknown_names: list[str] = field(default_factory=list)


def parse_command(names: Sequence[str], position: Sequence[float], velocity: Sequence[float],
                  effort: Sequence[float], kp: Sequence[float], kd: Sequence[float], *,
                  joint_names: Sequence[str], previous: JointTargets, limits: CommandLimits) -> ParsedCommand:
    """Apply one ``MotorCommand`` (arrays matched by ``names``) to ``previous`` targets.

    ``position`` has one entry per name; ``velocity``/``effort`` may be empty (0) and ``kp``/``kd``
    empty (the joint's default gains), otherwise one entry per name. Joints not named keep their
    previous targets; names that are not configured joints are returned in ``unknown_names``.
    Raises :class:`CommandError` (saying what was expected and what came) for inconsistent
    lengths, duplicate names or any non-finite value; nothing is applied then.
    """
    n = len(names)
    if len(set(names)) != n:
        raise CommandError(f"joint names repeat in the command: {list(names)}")
    arrays = {"position": position, "velocity": velocity, "effort": effort, "kp": kp, "kd": kd}
    for key, values in arrays.items():
        allowed = (n,) if key == "position" else (0, n)
        if len(values) not in allowed:
            raise CommandError(f"{key} has {len(values)} entries for {n} names; expected "
                                  f"{' or '.join(map(str, allowed))}")
        if not all(math.isfinite(x) for x in values):
            bad = [nm for nm, x in zip(names, values, strict=False) if not math.isfinite(x)]
            raise CommandError(f"non-finite {key} for joints {bad}: the command is refused")
    index = {name: i for i, name in enumerate(joint_names)}
    out = previous.copy()
    unknown = []
    for k, name in enumerate(names):
        i = index.get(name)
        if i is None:
            unknown.append(name)
            continue
        out.position[i] = position[k]
        out.velocity[i] = velocity[k] if len(velocity) else 0.0
        out.effort[i] = effort[k] if len(effort) else 0.0
        out.kp[i] = kp[k] if len(kp) else limits.kp_default[i]
        out.kd[i] = kd[k] if len(kd) else limits.kd_default[i]
    return ParsedCommand(out, unknown)


class CommandShaper:
    """What the bridge sends each cycle, shaped on top of the clamps: the position target moves
    toward the commanded one by at most ``position_rate × period`` per cycle (per joint,
    ``(n,)`` [rad/s]), so a jump in the commands (a bad publisher, a stale command after a
    pause) reaches the motors as a ramp; during the first ``ramp_time`` [s] after enable the
    velocity [rad/s] and feed-forward torque [N·m] targets are scaled by ``t / ramp_time``
    (0 → 1), so nothing is kicked at enable. Gains pass unchanged."""

    def __init__(self, position_rate: np.ndarray, ramp_time: float) -> None:
        rate = np.asarray(position_rate, dtype=float)
        if not np.all(rate > 0) or not ramp_time >= 0:
            raise SysIdError(f"position rates must be > 0 rad/s and ramp_time >= 0 s, got {rate}, "
                             f"{ramp_time}")
        self.position_rate = rate
        self.ramp_time = float(ramp_time)
        self._last: np.ndarray | None = None
        self._t0 = 0.0

    def start(self, position: np.ndarray, t: float) -> None:
        """Enable at time ``t`` [s] with the motors at ``position`` (n,) [rad]."""
        self._last = np.asarray(position, dtype=float).copy()
        self._t0 = float(t)

    def shape(self, targets: JointTargets, t: float, period: float) -> JointTargets:
        """The targets to send in the cycle at ``t`` [s] (cycles ``period`` [s] apart)."""
        if self._last is None:
            self.start(targets.position, t)
        step = self.position_rate * period
        position = np.clip(targets.position, self._last - step, self._last + step)
        self._last = position
        if self.ramp_time > 0:
            k = min(max((t - self._t0) / self.ramp_time, 0.0), 1.0)
            velocity, effort = targets.velocity * k, targets.effort * k
        else:
            velocity, effort = targets.velocity, targets.effort
        return JointTargets(position, velocity, effort, targets.kp, targets.kd)


class WatchdogMode(Enum):
    IDLE = "idle"        # active, no command yet: hold the activation pose (no time-out)
    TRACK = "track"      # fresh commands: follow them
    HOLD = "hold"        # commands stopped for command_timeout: hold the measured pose, damped
    DISABLE = "disable"  # held for hold_timeout without a fresh command: disable every motor


class Watchdog:
    """Command-stream watchdog on a monotonic clock [s]."""

    def __init__(self, command_timeout: float, hold_timeout: float) -> None:
        self.command_timeout = float(command_timeout)
        self.hold_timeout = float(hold_timeout)
        self._last: float | None = None

    def reset(self) -> None:
        """Back to IDLE (activation)."""
        self._last = None

    def feed(self, now: float) -> None:
        """A valid command arrived at ``now``."""
        self._last = now

    def mode(self, now: float) -> WatchdogMode:
        if self._last is None:
            return WatchdogMode.IDLE
        silence = now - self._last
        if silence <= self.command_timeout:
            return WatchdogMode.TRACK
        if silence <= self.command_timeout + self.hold_timeout:
            return WatchdogMode.HOLD
        return WatchdogMode.DISABLE

    def silence(self, now: float) -> float:
        """Seconds since the last command (0 before the first)."""
        return 0.0 if self._last is None else now - self._last


class TripKind(Enum):
    MOTOR_FAULT = "motor fault"
    MISSED_REPLIES = "missed replies"
    BUS_ERROR = "bus error"
    WATCHDOG = "command watchdog"
    EXCEPTION = "internal error"
    SHUTDOWN = "shutdown"


@dataclass(frozen=True)
class Trip:
    """Why every motor was disabled: the kind, the joint concerned (``""`` if not one joint) and
    a sentence for a person."""

    kind: TripKind
    joint: str
    message: str

    def __str__(self) -> str:
        where = f" on {self.joint}" if self.joint else ""
        return f"{self.kind.value}{where}: {self.message}"


_ENOBUFS = getattr(errno, "ENOBUFS", 105)
_ENETDOWN = getattr(errno, "ENETDOWN", 100)
_ENODEV = getattr(errno, "ENODEV", 19)
_ENOENT = getattr(errno, "ENOENT", 2)
_EACCES = getattr(errno, "EACCES", 13)
_EAFNOSUPPORT = getattr(errno, "EAFNOSUPPORT", 97)


def bus_error_code(exc: BaseException) -> int | None:
    """The OS error number behind a python-can error (``error_code``, ``errno`` or a chained
    ``OSError``), ``None`` if there is none."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for attr in ("error_code", "errno"):
            code = getattr(exc, attr, None)
            if isinstance(code, int):
                return code
        exc = exc.__cause__ or exc.__context__
    return None


def explain_bus_error(exc: BaseException, *, interface: str, channel: str, bitrate: int) -> str:
    """One message for a person: what failed and the likely causes, without a traceback."""
    code = bus_error_code(exc)
    text = (str(exc).strip() or type(exc).__name__).rstrip(".")
    lowered = text.lower()
    where = f"CAN bus {interface}:{channel} at {bitrate} bit/s"
    if code == _ENOBUFS or "no buffer space" in lowered:
        cause = ("no device acknowledges the frames (ENOBUFS, errno 105): the motors are unpowered, "
                 "the bitrate is wrong, the 120 Ω termination is missing or the cable is unplugged")
    elif "bus-off" in lowered or "bus off" in lowered or "busoff" in lowered:
        cause = ("the CAN controller went bus-off after too many errors: wrong bitrate, missing "
                 "termination, CANH/CANL swapped or shorted, or unpowered motors")
    elif code == _ENETDOWN or "network is down" in lowered:
        cause = (f"the interface is down: bring it up, e.g. `sudo ip link set {channel} up type can "
                 f"bitrate {bitrate}`")
    elif code == _ENODEV or "no such device" in lowered:
        cause = f"there is no CAN device {channel!r}: adapter unplugged or wrong channel name"
    elif code == _ENOENT or "no such file" in lowered:
        cause = f"there is no device {channel!r}: adapter unplugged or wrong device path"
    elif code == _EACCES or "permission denied" in lowered:
        cause = f"no permission to open {channel!r} (e.g. add the user to the dialout group)"
    elif code == _EAFNOSUPPORT or "address family not supported" in lowered:
        cause = "this system has no SocketCAN (Linux with the can and can_raw kernel modules)"
    elif "library" in lowered or "not installed" in lowered or isinstance(exc, ImportError):
        cause = f"the driver of the {interface!r} interface is not installed"
    else:
        cause = ("check that the motors are powered, the bitrate matches theirs and the bus is "
                 "terminated (120 Ω at both ends)")
    return f"{where} failed: {text}. Likely cause: {cause}."
