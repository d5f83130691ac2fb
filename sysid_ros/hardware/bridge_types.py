"""The Damiao bridge's errors, its fail-safe timing constants and the snapshots it hands out
(one cycle's joint state, one motor's status, the diagnostics' status)."""

import logging
from dataclasses import dataclass, field

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_timing import TimingSummary
from sysid_ros.hardware.codec import MitLimits, MotorState, describe
from sysid_ros.hardware.deadlines import Deadlines
from sysid_ros.hardware.safety import (
    Trip,
)

__all__ = ["BridgeError", "BridgeStatus", "HandshakeError", "JointSample", "MotorStatus"]

log = logging.getLogger(__name__)

REGISTER_TIMEOUT = 0.05   # [s] wait for one register reply
REGISTER_TRIES = 3
CONFIRM_TIMEOUT = 0.03    # [s] wait for the replies to one round of enable/disable frames
CONFIRM_TRIES = 4
DISABLE_RETRY_CAP = 4     # [control periods] longest wait between two disable rounds while unconfirmed
REOPEN_AFTER = 5          # failed disable rounds (bus errors) before a bus the bridge opened is re-opened
UNCONFIRMED_REPORT = 1.0  # [s] between two "still not confirmed" reports
SHUTDOWN_DISABLE_TIME = 1.0  # [s] cleanup/shutdown keep re-sending disable frames this long at most
ACTIVATE_TIMEOUT = 10.0  # [s] activate waits this long at most for the loop thread to enable the motors
LOCKSTEP_REPLY_TIMEOUT = 0.05  # [s] reply deadline with timebase "rounds" (a lockstep emulator)

STATES = {int(s): s for s in MotorState}
ENABLED_CODE = int(MotorState.ENABLED)



class BridgeError(SysIdError):
    """The bridge cannot do what was asked (not configured, motors not answering...)."""


class HandshakeError(BridgeError):
    """A motor failed the configure-time register handshake."""


@dataclass(frozen=True)
class JointSample:
    """One cycle's joint-space state, each ``(n,)``: position [rad], velocity [rad/s], effort
    (measured torque) [N·m]; NaN for a motor that did not reply this cycle. ``stamp`` is wall-clock
    time [s] at the start of the cycle, ``fresh (n,)`` which motors replied."""

    stamp: float
    cycle: int
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    fresh: np.ndarray


@dataclass
class MotorStatus:
    """What is known about one motor (for diagnostics)."""

    joint: str
    motor: str
    can_id: int
    master_id: int
    limits: MitLimits | None = None
    state: MotorState | None = None
    t_mos: int = 0
    t_rotor: int = 0
    replies: int = 0
    missed_consecutive: int = 0
    missed_total: int = 0
    late: int = 0
    bad_frames: int = 0

    @property
    def state_text(self) -> str:
        return "no reply yet" if self.state is None else describe(self.state)


@dataclass
class BridgeStatus:
    """A snapshot for diagnostics."""

    phase: str
    mode: str
    motors: list[MotorStatus]
    timing: TimingSummary | None
    trip: Trip | None
    counters: dict[str, int] = field(default_factory=dict)
    replay: str = ""
    disabled: bool = False  # every motor confirmed disabled (since the last enable)
    deadlines: Deadlines | None = None  # sized at activate from the loop's measured latency
    cycles: int = 0  # joint samples handed out since the bridge was made

