"""A DM-USBCU1 USB-to-CAN adapter with emulated Damiao motors behind it, in a process of its own:
the cross-process bus for tests where the bridge must die alone (``kill -9``).

This kernel has no SocketCAN (no ``vcan``), and python-can's ``virtual`` bus joins buses inside
one process only. The adapter, though, is a serial device: this script opens a pseudo-terminal
pair, speaks the adapter's serial protocol on the master side (host→adapter 30-byte frames in,
adapter→host 16-byte frames out; :mod:`sysid_ros.hardware.usb2can` has the format) and hands the
CAN frames to a :class:`~sysid_ros.hardware.emulator.MotorEmulator` (wall-clock physics, as
hardware) on a private ``virtual`` channel. The bridge opens the slave side with
``interface="damiao_usb"``, exactly as it opens a real adapter.

Protocol with the test (stdout/stdin lines): prints ``tty <path>`` once ready; answers a line
``states`` with ``states <hex code per motor> <TIMEOUT register per motor>``; ``quit`` ends it.

    python test/support/usb2can_adapter.py CONFIG.yaml
"""

from __future__ import annotations

import os
import select
import struct
import sys
import threading
from pathlib import Path

import can

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sysid_ros.hardware.bridge_config import load_bridge_config  # noqa: E402
from sysid_ros.hardware.codec_registers import Register  # noqa: E402
from sysid_ros.hardware.emulator import MotorEmulator  # noqa: E402
from sysid_ros.hardware.usb2can import TX_LENGTH  # noqa: E402

TX_HEAD = b"\x55\xaa\x1e\x03"


def rx_frame(msg: can.Message) -> bytes:
    """The 16-byte adapter→host frame of a received CAN frame."""
    flags = msg.dlc | (0x40 if msg.is_extended_id else 0) | (0x80 if msg.is_remote_frame else 0)
    return bytes((0xAA, 0x11, flags)) + struct.pack("<I", msg.arbitration_id) \
        + bytes(msg.data).ljust(8, b"\x00") + b"\x55"


def tx_message(frame: bytes) -> can.Message:
    """The CAN frame a 30-byte host→adapter frame asks to transmit."""
    _count, _interval, idtype, can_id, frametype, dlc, _ia, _da = struct.unpack_from("<IIBIBBBB", frame, 4)
    return can.Message(arbitration_id=can_id, is_extended_id=bool(idtype), is_remote_frame=bool(frametype),
                       dlc=dlc, data=b"" if frametype else frame[21:21 + dlc])


def main(config_path: str) -> int:
    config = load_bridge_config(config_path)
    channel = f"adapter-{os.getpid()}"
    # the motors are powered (and their shafts start to move) when the host first talks to the
    # adapter: a limp arm does not sag past its limits while a loaded host is still starting the
    # bridge process (frames sent before are queued on the emulator's bus)
    emulator = MotorEmulator(config.joints, channel=channel, interface="virtual", clock="realtime")
    cable = can.Bus(interface="virtual", channel=channel)  # the adapter's side of the CAN bus
    master, slave = os.openpty()
    stop = threading.Event()

    def to_host() -> None:  # CAN → serial
        while not stop.is_set():
            msg = cable.recv(timeout=0.05)
            if msg is not None:
                try:
                    os.write(master, rx_frame(msg))
                except OSError:  # the host side is gone (killed): frames fall on the floor
                    pass

    def from_host() -> None:  # serial → CAN
        buffer = b""
        while not stop.is_set():
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                buffer += os.read(master, 4096)
            except OSError:  # no host has the tty open (before it opens it, after a kill)
                stop.wait(0.01)
                continue
            while (start := buffer.find(TX_HEAD)) >= 0 and len(buffer) - start >= TX_LENGTH:
                frame, buffer = buffer[start:start + TX_LENGTH], buffer[start + TX_LENGTH:]
                cable.send(tx_message(frame))
                emulator.start()  # idempotent

    threads = [threading.Thread(target=f, daemon=True) for f in (to_host, from_host)]
    for t in threads:
        t.start()
    print(f"tty {os.ttyname(slave)}", flush=True)
    for line in sys.stdin:
        if line.strip() == "states":
            codes = " ".join(f"{int(m.state):X}" for m in emulator.motors)
            timeouts = " ".join(str(int(m.register(Register.TIMEOUT))) for m in emulator.motors)
            print(f"states {codes} {timeouts}", flush=True)
        elif line.strip() == "quit":
            break
    stop.set()
    for t in threads:
        t.join(timeout=1.0)
    emulator.stop()
    cable.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
