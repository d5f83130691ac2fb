"""Motor models: default mapping limits of Damiao DM-J motors (``docs/damiao-protocol.md`` §6).

``PMAX`` [rad], ``VMAX`` [rad/s], ``TMAX`` [N·m] are the MIT-mode mapping ranges (registers
21/22/23), a sanity table only: the bridge reads the registers at start-up. ``TMAX`` is a mapping
range, not the rated torque. A robot model names its motors with MJCF custom text entries
``<text name="motor:JOINT" data="DM4340"/>``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MotorModel:
    name: str
    pmax: float
    vmax: float
    tmax: float


DAMIAO_MOTORS: dict[str, MotorModel] = {
    m.name: m
    for m in (
        MotorModel("DM4310", 12.5, 30.0, 10.0),
        MotorModel("DM4310-48V", 12.5, 50.0, 10.0),
        MotorModel("DM4340", 12.5, 10.0, 28.0),
        MotorModel("DM4340-48V", 12.5, 10.0, 28.0),
        MotorModel("DM6006", 12.5, 45.0, 20.0),
        MotorModel("DM8006", 12.5, 45.0, 40.0),
    )
}
