"""The bridge core against emulated motors on a python-can virtual bus, configure phase: the
register handshake frame by frame, and the errors for silent motors, a dead bus and limits
unlike the motor table."""

from __future__ import annotations

import logging

import pytest
from support.damiao_rig import DM4340, N_JOINTS, Frame, is_special, rigs, wait_until

from sysid_ros.hardware.bridge import Bridge, HandshakeError
from sysid_ros.hardware.codec import Special
from sysid_ros.hardware.codec_registers import Register
from sysid_ros.hardware.transport import BusError

rig_factory = pytest.fixture(rigs, name="rig_factory")


def test_handshake_frames_and_registers(rig_factory):
    rig = rig_factory(motor_timeout=0.25)
    rig.bridge.configure()

    def replies_of(can_id: int, frames: list[Frame]) -> list[Frame]:
        return [f for f in frames if f.arbitration_id == 0x10 + can_id and f.data[2] in (0x33, 0x55)]

    # the monitor sees the bus on its own thread: wait for the last reply the bridge got
    assert wait_until(lambda: len(replies_of(N_JOINTS, rig.monitor.frames)) == 7)
    frames = rig.monitor.snapshot()
    requests = [f.data for f in frames if f.arbitration_id == 0x7FF]
    for can_id in range(1, N_JOINTS + 1):
        mine = [d for d in requests if d[0] == can_id and d[1] == 0]
        reads = [d[3] for d in mine if d[2] == 0x33]
        writes = [(d[3], int.from_bytes(d[4:8], "little")) for d in mine if d[2] == 0x55]
        assert reads[:3] == [Register.PMAX, Register.VMAX, Register.TMAX]
        assert writes == [(Register.CTRL_MODE, 1), (Register.TIMEOUT, 5000)]  # 0.25 s / 50 us
        assert reads[3:] == [Register.CTRL_MODE, Register.TIMEOUT]  # each write read back
        motor = rig.emulator.motor(can_id)
        assert motor.register(Register.CTRL_MODE) == 1 and motor.register(Register.TIMEOUT) == 5000
        assert len(replies_of(can_id, frames)) == 7  # 5 reads + 2 write echoes
    # a disable to every motor before anything else: never start with a motor left enabled
    assert all(is_special(f, Special.DISABLE) for f in frames[:1])
    assert not any(is_special(f, Special.ENABLE) for f in frames)
    assert [m.limits for m in rig.bridge.motors][:1] == [DM4340]


def test_configure_explains_silent_motors_and_a_dead_bus(rig_factory):
    rig = rig_factory()
    rig.emulator.inject_comm_loss("joint4")  # one motor does not answer at all
    with pytest.raises(HandshakeError, match=r"joint4 \(motor DM4310, CAN ID 0x04, master ID 0x14\) does not "
                                             r"answer a register read of PMAX after 3 tries: is it powered"):
        rig.bridge.configure()
    rig.emulator.restore_comm("joint4")
    dead = rig_factory()
    dead.emulator.inject_bus_off()  # nobody acknowledges: SocketCAN's ENOBUFS on send
    with pytest.raises(BusError, match=r"Errno 105.*Likely cause: no device acknowledges the frames \(ENOBUFS"
                                       r", errno 105\): the motors are unpowered, the bitrate is wrong"):
        dead.bridge.configure()
    assert dead.bridge.phase == "unconfigured"


def test_handshake_refuses_limits_unlike_the_model(rig_factory, caplog):
    rig = rig_factory()
    rig.emulator.motor("joint3").registers[Register.VMAX] = 45.0
    with pytest.raises(HandshakeError, match=r"joint3: DM4340: registers PMAX/VMAX/TMAX = 12.5/45/28"):
        rig.bridge.configure()
    assert rig.bridge.phase == "unconfigured"
    relaxed = Bridge(rig.config.replace(limit_mismatch="warn"), bus=rig.bus)
    with caplog.at_level(logging.WARNING):
        relaxed.configure()
    assert "using the registers' values" in caplog.text
    assert relaxed.motors[2].limits.vmax == 45.0
    relaxed.shutdown()
