"""How joints are wired to their Damiao motors, and the per-joint parameter arrays both the bridge
and the emulator read it from.

ROS parameters cannot hold lists of dictionaries, so the joints are **parallel arrays** under the
``joints.`` prefix (``joints.names``, ``joints.motors``, ``joints.can_ids`` ...): entry ``i`` of
every array belongs to joint ``i``. :data:`WIRING_PARAMETERS` are the arrays of the wiring itself
(:class:`MotorWiring`); the bridge adds limits and gains
(:data:`sysid_ros.hardware.bridge_config.JOINT_PARAMETERS`). :func:`joint_rows` turns such arrays
into one dictionary per joint, checking lengths and types in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sysid_ros.core.errors import SysIdError

__all__ = ["WIRING_PARAMETERS", "ConfigError", "JointParameter", "MotorWiring", "convert", "joint_rows",
           "wiring_from_parameters"]


class ConfigError(SysIdError):
    """A hardware configuration is incomplete or inconsistent."""


@dataclass(frozen=True)
class MotorWiring:
    """One joint's motor: its name (as in the MJCF and on ``joint_states``), Damiao model,
    ESC_ID (``can_id``) and MST_ID (``master_id``), and the joint ↔ motor mapping — ``direction``
    (±1), ``position_offset`` [rad, joint position at motor position 0] and ``gear_ratio`` (motor
    shaft turns per joint turn); see :mod:`sysid_ros.hardware.motor_frames`. No checks here: the
    bridge's ``JointConfig`` and the emulator validate what they use."""

    name: str
    motor: str
    can_id: int
    master_id: int
    direction: int = 1
    position_offset: float = 0.0
    gear_ratio: float = 1.0


@dataclass(frozen=True)
class JointParameter:
    """One per-joint parameter array: ``joints.<key>`` holds field ``field`` of every joint, each
    a ``kind`` (str, int or float); ``optional`` arrays may be missing or empty (the field's
    default then)."""

    key: str
    field: str
    kind: type
    description: str
    optional: bool = False


WIRING_PARAMETERS: tuple[JointParameter, ...] = (
    JointParameter("names", "name", str, "joint names (as in the MJCF and on joint_states)"),
    JointParameter("motors", "motor", str, "Damiao model per joint (DM4340, DM4310, ...)"),
    JointParameter("can_ids", "can_id", int, "motor CAN ID (ESC_ID, register 8)"),
    JointParameter("master_ids", "master_id", int,
                   "feedback ID (MST_ID, register 7), convention can_id + 0x10"),
    JointParameter("directions", "direction", int, "+1 or -1: sign between motor and joint", True),
    JointParameter("position_offsets", "position_offset", float, "[rad] joint position at motor position 0",
                   True),
    JointParameter("gear_ratios", "gear_ratio", float, "motor shaft turns per joint turn (1 = direct drive)",
                   True),
)

KIND_TEXT = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def convert(kind: type, value: Any) -> Any:
    """``value`` as ``kind`` (str, int, float); an int must be a whole number, bools are refused
    as numbers (ValueError/TypeError otherwise)."""
    if kind is str:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    if kind is int:
        if float(value) != int(value):
            raise ValueError(f"expected a whole number, got {value!r}")
        return int(value)
    return float(value)


def joint_rows(params: Mapping[str, Any], table: Sequence[JointParameter]) -> list[dict[str, Any]]:
    """One ``{field: value}`` per joint from flat ROS-style parameters (``"joints.names"`` ...):
    every array of ``table`` must be given with one entry per joint name, except the optional
    ones (missing or empty: left out). :class:`ConfigError` says what was expected and what came."""
    names = list(params.get("joints.names") or [])
    if not names:
        raise ConfigError("joints.names is missing or empty")
    n = len(names)
    columns: dict[str, list] = {}
    for p in table:
        values = params.get(f"joints.{p.key}")
        if values is None or (p.optional and len(values) == 0):
            if p.optional:
                continue
            raise ConfigError(f"joints.{p.key} is missing: one entry per joint {names}")
        values = list(values)
        if len(values) != n:
            raise ConfigError(f"joints.{p.key} has {len(values)} entries, expected {n} "
                              f"(one per joint {names})")
        try:
            columns[p.field] = [convert(p.kind, v) for v in values]
        except (TypeError, ValueError):
            raise ConfigError(f"joints.{p.key}: expected {KIND_TEXT[p.kind]} per joint, "
                              f"got {values}") from None
    return [{field: column[i] for field, column in columns.items()} for i in range(n)]


def wiring_from_parameters(params: Mapping[str, Any]) -> tuple[MotorWiring, ...]:
    """The wiring of every joint from its ``joints.*`` arrays (:data:`WIRING_PARAMETERS`; other
    keys are ignored)."""
    return tuple(MotorWiring(**row) for row in joint_rows(params, WIRING_PARAMETERS))
