"""The DM-USBCU1 python-can interface over a real pseudo-terminal pair: bytes written by
``send()`` are byte-exact, adapter frames injected on the master side come out of ``recv()``."""

from __future__ import annotations

import os
import struct
import time

import can
import pytest

import sysid_ros.hardware  # noqa: F401  (registers the interface)
from sysid_ros.hardware.codec import Special, special_frame
from sysid_ros.hardware.usb2can import DamiaoUsbBus, encode_tx_frame


@pytest.fixture
def pty_bus():
    """(bus on the slave tty opened by name through ``can.Bus``, master fd)."""
    master, slave = os.openpty()
    name = os.ttyname(slave)
    bus = can.Bus(interface="damiao_usb", channel=name)
    os.close(slave)
    yield bus, master
    bus.shutdown()
    os.close(master)


def read_exactly(fd: int, n: int, timeout: float = 2.0) -> bytes:
    import select

    out = b""
    deadline = time.monotonic() + timeout
    while len(out) < n:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"only {len(out)} of {n} bytes arrived: {out.hex(' ')}"
        out += os.read(fd, n - len(out))
    return out


def rx(can_id: int, data: bytes, *, extended: bool = False, cmd: int = 0x11) -> bytes:
    flags = len(data) | (0x40 if extended else 0)
    return bytes((0xAA, cmd, flags)) + struct.pack("<I", can_id) + data.ljust(8, b"\x00") + b"\x55"


def test_registered_interface(pty_bus):
    bus, _ = pty_bus
    assert isinstance(bus, DamiaoUsbBus) and "damiao_usb" in can.VALID_INTERFACES
    assert bus.channel_info.startswith("Damiao USB2CAN on /dev/")


def test_send_is_byte_exact(pty_bus):
    bus, master = pty_bus
    bus.send(can.Message(arbitration_id=0x001, data=special_frame(Special.ENABLE), is_extended_id=False))
    assert read_exactly(master, 30) == bytes.fromhex(
        "55 AA 1E 03  01 00 00 00  0A 00 00 00  00  01 00 00 00  00  08  00  00"
        "  FF FF FF FF FF FF FF FC  00")
    bus.send(can.Message(arbitration_id=0x12345678 & 0x1FFFFFFF, data=b"\x01\x02\x03", is_extended_id=True))
    assert read_exactly(master, 30) == bytes.fromhex(
        "55 AA 1E 03  01 00 00 00  0A 00 00 00  01  78 56 34 12  00  03  00  00"
        "  01 02 03 00 00 00 00 00  00")


def test_checksum_variants():
    msg = can.Message(arbitration_id=0x7FF, data=bytes.fromhex("01 00 33 15 00 00 00 00"),
                      is_extended_id=False)
    body = encode_tx_frame(msg)[:29]
    assert encode_tx_frame(msg, checksum="sum8")[-1] == sum(body) & 0xFF
    xor = 0
    for b in body:
        xor ^= b
    assert encode_tx_frame(msg, checksum="xor8")[-1] == xor


def test_recv_little_endian_id_and_unpadded_short_payloads(pty_bus):
    bus, master = pty_bus
    os.write(master, rx(0x123, bytes.fromhex("11 83 27 7F F7 FF 00 00")))
    msg = bus.recv(2.0)
    assert (msg.arbitration_id, msg.is_extended_id, msg.dlc) == (0x123, False, 8)
    assert bytes(msg.data) == bytes.fromhex("11 83 27 7F F7 FF 00 00")
    os.write(master, rx(0x1ABCDE, bytes.fromhex("01 00 AA 01"), extended=True))
    msg = bus.recv(2.0)
    assert (msg.arbitration_id, msg.is_extended_id, msg.dlc) == (0x1ABCDE, True, 4)
    assert bytes(msg.data) == bytes.fromhex("01 00 AA 01")  # the first dlc bytes, not front-padded


def test_recv_resynchronises_and_skips_other_commands(pty_bus):
    bus, master = pty_bus
    frame = rx(0x011, bytes.fromhex("01 83 27 7F E7 FF 1A 19"))
    os.write(master, b"\x00\x55\xaa\x13" + rx(0x022, b"\x01", cmd=0x12) + frame[:7])
    assert bus.recv(0.05) is None  # half a frame only: bounded wait, nothing yet
    os.write(master, frame[7:] + rx(0x033, b""))
    first, second = bus.recv(2.0), bus.recv(2.0)
    assert first.arbitration_id == 0x011 and bytes(first.data) == bytes.fromhex("01 83 27 7F E7 FF 1A 19")
    assert second.arbitration_id == 0x033 and second.dlc == 0


def test_refuses_what_the_adapter_cannot_send(pty_bus):
    bus, _ = pty_bus
    with pytest.raises(can.CanOperationError, match="only classic data/remote frames"):
        bus.send(can.Message(arbitration_id=1, data=bytes(12), is_fd=True))
    with pytest.raises(can.CanOperationError, match=r"0x800 exceeds 0x7FF, the largest standard \(11-bit\)"):
        bus.send(can.Message(arbitration_id=0x800, data=b"", is_extended_id=False))


def test_unopenable_port():
    with pytest.raises(can.CanInitializationError, match="cannot open '/dev/nonexistent-damiao'"):
        can.Bus(interface="damiao_usb", channel="/dev/nonexistent-damiao")
