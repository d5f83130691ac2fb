"""One emulated motor's firmware without a bus or physics: position wrap in its feedback, zeroing
only while disabled, XOUT/P_M reads, the other modes' stand-ins and torque saturation at TMAX,
and its registers from the motor table."""

from __future__ import annotations

import pytest

from sysid_ros.core.model.motors import DAMIAO_MOTORS
from sysid_ros.hardware.codec import (
    REGISTER_REQUEST_ID,
    MitCommand,
    MitLimits,
    Special,
    decode_feedback,
    encode_mit,
    special_frame,
)
from sysid_ros.hardware.codec_registers import (
    Register,
    encode_velocity,
    parse_register_reply,
    read_register_frame,
    write_register_frame,
)
from sysid_ros.hardware.emulator import EmulatedMotor, EmulatorJoint


def test_registers_come_from_the_motor_table():
    for name in ("DM4310", "DM4340", "DM8009"):
        motor = EmulatedMotor(EmulatorJoint("joint1", name, 1, 0x11))
        model = DAMIAO_MOTORS[name]
        ranges = tuple(motor.register(r) for r in (Register.PMAX, Register.VMAX, Register.TMAX))
        assert ranges == model.defaults
        assert motor.register(Register.GR) == (model.gear_ratio or 1.0)
        assert motor.register(Register.KT_VALUE) == (model.torque_constant or 0.0)
    assert EmulatedMotor(EmulatorJoint("joint4", "DM4310", 4, 0x14)).register(Register.GR) == 10.0


def test_firmware_model_details():
    limits = MitLimits.for_model("DM4310")
    motor = EmulatedMotor(EmulatorJoint("joint4", "DM4310", 4, 0x14))
    fb = decode_feedback(motor.feedback(13.0, 0.0), limits)  # one turn past +PMAX wraps to −PMAX side
    assert fb.position == pytest.approx(13.0 - 25.0, abs=limits.pmax / 65535)
    motor.receive(4, special_frame(Special.SET_ZERO), 0.0, 1.0, 0.0)
    assert decode_feedback(motor.feedback(1.5, 0.0), limits).position == pytest.approx(0.5, abs=1e-3)
    reply = motor.receive(REGISTER_REQUEST_ID, read_register_frame(4, Register.XOUT), 0.0, 1.5, 0.0)
    assert parse_register_reply(reply).value == pytest.approx(0.5, rel=1e-6)
    reply = motor.receive(REGISTER_REQUEST_ID, read_register_frame(4, Register.P_M), 0.0, 1.5, 0.0)
    assert parse_register_reply(reply).value == pytest.approx(0.5 * 10.0, rel=1e-6)  # GR 10
    motor.receive(4, special_frame(Special.ENABLE), 0.0, 1.5, 0.0)
    motor.receive(4, special_frame(Special.SET_ZERO), 0.0, 3.0, 0.0)  # ignored while enabled
    assert motor.zero_offset == 1.0
    motor.receive(4, encode_mit(MitCommand(0.0, 0.0, 500.0, 0.0, 0.0), limits), 0.0, 1.5, 0.0)
    assert motor.torque(1.5, 0.0) == -10.0  # kp·(0 − 0.5) = −250 N·m saturated at −TMAX
    motor.receive(4, special_frame(Special.DISABLE), 0.0, 1.5, 0.0)
    motor.receive(REGISTER_REQUEST_ID, write_register_frame(4, Register.CTRL_MODE, 3), 0.0, 1.5, 0.0)
    motor.receive(4, special_frame(Special.ENABLE), 0.0, 1.5, 0.0)
    assert motor.receive(4, encode_velocity(2.0), 0.0, 1.5, 0.0) is not None  # DLC 4 in velocity mode
    assert motor.torque(1.5, 0.0) == pytest.approx(10.0 / 10.0 * 2.0)  # kv = TMAX/10
