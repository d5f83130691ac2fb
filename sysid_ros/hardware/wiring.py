"""How one joint is wired to its Damiao motor: the fields the bridge and the emulator share."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MotorWiring"]


@dataclass(frozen=True)
class MotorWiring:
    """One joint's motor: its name (as in the MJCF and on ``/joint_states``), Damiao model,
    ESC_ID (``can_id``) and MST_ID (``master_id``), and the joint ↔ motor mapping — ``direction``
    (±1), ``position_offset`` [rad, joint position at motor position 0] and ``gear_ratio`` (motor
    shaft turns per joint turn); see :mod:`sysid_ros.hardware.joint_map`. No checks here: the
    bridge's ``JointConfig`` and the emulator validate what they use."""

    name: str
    motor: str
    can_id: int
    master_id: int
    direction: int = 1
    position_offset: float = 0.0
    gear_ratio: float = 1.0
