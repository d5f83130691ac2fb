"""Motor models: every fact the package uses about a Damiao DM-J motor, in one table.

Per model: the default MIT-mode mapping ranges ``PMAX`` [rad], ``VMAX`` [rad/s], ``TMAX`` [N·m]
(registers 21/22/23 of Damiao's DM-J motor manual; the MIT fields are fixed-point over
``[−PMAX, PMAX]``, ``[−VMAX, VMAX]`` and ``[−TMAX, TMAX]``), the built-in gearbox ratio (register
``Gr``, 20) and the torque constant at the output shaft [N·m/A] (register ``KT_Value``, 1) where the
package knows them. ``TMAX`` is a mapping range, not the rated torque (a DM-J8009P peaks at
40 N·m with TMAX 54). The ranges are a sanity table only: the bridge reads the registers at
start-up and uses what the motor says. A robot model names its motors with MJCF custom text
entries ``<text name="motor:JOINT" data="DM4340"/>``.

Damiao's SDKs disagree on some defaults; ``alternatives`` holds the other documented
``(pmax, vmax, tmax)`` triples so a register read that matches one of them is recognised
(:meth:`MotorModel.matches`). Everything else derives from this table: the hardware codec's
``DAMIAO_LIMITS``, the bridge's default joint velocity and torque limits, the emulator's registers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DAMIAO_MOTORS", "MotorModel"]


@dataclass(frozen=True)
class MotorModel:
    """One motor model: common default mapping ranges, the other documented defaults, and the
    built-in gearbox ratio (rotor turns per output-shaft turn) and torque constant [N·m/A, output
    shaft] where known (``None``: not in the package's sources)."""

    name: str
    pmax: float
    vmax: float
    tmax: float
    alternatives: tuple[tuple[float, float, float], ...] = ()
    note: str = ""
    gear_ratio: float | None = None
    torque_constant: float | None = None

    @property
    def defaults(self) -> tuple[float, float, float]:
        """The common default ``(pmax, vmax, tmax)``."""
        return (self.pmax, self.vmax, self.tmax)

    def matches(self, pmax: float, vmax: float, tmax: float, *, rel_tol: float = 1e-3) -> bool:
        """Whether read registers equal the common default or one of the documented alternatives
        (relative tolerance ``rel_tol``, registers are float32)."""
        read = (pmax, vmax, tmax)
        return any(
            all(math.isclose(r, d, rel_tol=rel_tol) for r, d in zip(read, known, strict=True))
            for known in (self.defaults, *self.alternatives)
        )


DAMIAO_MOTORS: dict[str, MotorModel] = {
    m.name: m
    for m in (
        MotorModel("DM3507", 12.566, 50.0, 5.0),
        MotorModel("DM4310", 12.5, 30.0, 10.0, gear_ratio=10.0, torque_constant=0.945),
        MotorModel("DM4310-48V", 12.5, 50.0, 10.0, ((12.5, 30.0, 10.0),), "one wiki says VMAX 30",
                   gear_ratio=10.0, torque_constant=0.945),
        MotorModel("DM4340", 12.5, 10.0, 28.0, ((12.5, 8.0, 28.0),), "older SDK VMAX 8",
                   gear_ratio=40.0, torque_constant=4.074),
        MotorModel("DM4340-48V", 12.5, 10.0, 28.0, ((12.5, 20.0, 28.0),), "newer SDK VMAX 20",
                   gear_ratio=40.0, torque_constant=4.074),
        MotorModel("DM6006", 12.5, 45.0, 20.0, ((12.5, 45.0, 12.0),), "newer SDK TMAX 12"),
        MotorModel("DM6248", 12.566, 20.0, 120.0),
        MotorModel("DM8006", 12.5, 45.0, 40.0, ((12.5, 45.0, 20.0),), "newer SDK TMAX 20"),
        MotorModel("DM8009", 12.5, 45.0, 54.0),
        MotorModel("DM10010L", 12.5, 25.0, 200.0),
        MotorModel("DM10010", 12.5, 20.0, 200.0),
        MotorModel("DMH3510", 12.5, 280.0, 1.0),
        MotorModel("DMH6215", 12.5, 45.0, 10.0),
        MotorModel("DMG6220", 12.5, 45.0, 10.0),
    )
}
