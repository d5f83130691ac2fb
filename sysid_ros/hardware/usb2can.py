"""Damiao's DM-USBCU1 USB-to-CAN adapter as a python-can interface: ``interface="damiao_usb"``.

The adapter (VID:PID 2e88:4603) is a USB CDC serial device (921600 baud, 8N1), not SocketCAN.
Frame formats (Damiao's USB2CAN host protocol), all multi-byte fields little-endian:

Host → adapter, 30 bytes, one CAN frame to transmit::

    55 AA 1E 03 | count u32 = 1 | interval u32 = 10 | idtype u8 | can_id u32 | frametype u8 |
    dlc u8 | idAcc u8 = 0 | dataAcc u8 = 0 | data[8] | trailer u8

``1E`` is the length (30), ``03`` the "send CAN frame" command; ``idtype`` 0 = standard 11-bit,
1 = extended 29-bit; ``frametype`` 0 = data, 1 = remote (both inference: Damiao's examples send 0
for a standard data frame); ``data`` is zero-padded to 8 bytes after the ``dlc`` bytes.

Adapter → host, 16 bytes, one received CAN frame::

    AA | cmd (0x11 = received frame) | flags: dlc bits 0-5, IDE bit 6, RTR bit 7 |
    can_id u32 | data[8] | 55

The CAN ID is little-endian and the payload is the *first* ``dlc`` bytes of ``data`` (the PyPI
plugin ``python-can-damiao`` reads the ID big-endian and front-pads short payloads — apparent
bugs this module does not share). Bytes outside a ``AA … 55`` frame, and frames with another
``cmd``, are skipped (the stream resynchronises on the next ``AA`` whose 16th byte is ``55``).

**Trailer ("crc") — assumption.** Damiao's description names the last host→adapter byte ``crc``
without giving the algorithm. Damiao's own host examples send it as a constant ``00``, i.e. the adapter
does not appear to check it; that is the default here (``checksum="zero"``). If a firmware
turns out to verify it, ``checksum="sum8"`` (sum of bytes 0..28 mod 256) and ``"xor8"`` (XOR of
bytes 0..28) are available as ``can.Bus(..., checksum="sum8")``.

Only classic CAN frames with at most 8 data bytes are supported (no CAN-FD, no error frames).
The adapter's CAN bit rate is set with Damiao's configuration tool (1 Mbit/s by default); the
``bitrate`` argument is accepted for symmetry with other interfaces and only checked.

Registration: python-can's documented plugin mechanism is an entry point in the group
``can.interface`` (for a pip install: ``damiao_usb = "sysid_ros.hardware.usb2can:DamiaoUsbBus"``).
This package is not pip-installed, so :func:`register` (called when ``sysid_ros.hardware`` is
imported) does what python-can does with entry points at its import: adds the interface to
``can.interfaces.BACKENDS`` and to the ``VALID_INTERFACES`` sets built from it.
"""

from __future__ import annotations

import logging
import select
import struct
import time
from typing import Any, Literal

import can

log = logging.getLogger(__name__)

__all__ = ["INTERFACE_NAME", "DamiaoUsbBus", "decode_rx_frame", "encode_tx_frame", "register"]

INTERFACE_NAME = "damiao_usb"
SERIAL_BAUDRATE = 921600
TX_LENGTH = 30
RX_LENGTH = 16
RX_HEAD, RX_TAIL, RX_FRAME = 0xAA, 0x55, 0x11
_TX_HEADER = bytes((0x55, 0xAA, TX_LENGTH, 0x03))
Checksum = Literal["zero", "sum8", "xor8"]


def _trailer(body: bytes, checksum: Checksum) -> int:
    if checksum == "zero":
        return 0
    if checksum == "sum8":
        return sum(body) & 0xFF
    value = 0
    for b in body:
        value ^= b
    return value


def encode_tx_frame(msg: can.Message, *, checksum: Checksum = "zero") -> bytes:
    """The 30-byte host→adapter frame transmitting ``msg`` once."""
    if msg.is_fd or msg.is_error_frame:
        raise can.CanOperationError(f"{INTERFACE_NAME}: only classic data/remote frames can be sent, got "
                                    f"{'an FD' if msg.is_fd else 'an error'} frame")
    if msg.dlc > 8 or len(msg.data) > 8:
        raise can.CanOperationError(f"{INTERFACE_NAME}: at most 8 data bytes, got {len(msg.data)}")
    limit = 0x1FFFFFFF if msg.is_extended_id else 0x7FF
    kind = "extended (29-bit)" if msg.is_extended_id else "standard (11-bit)"
    if not 0 <= msg.arbitration_id <= limit:
        raise can.CanOperationError(f"{INTERFACE_NAME}: arbitration ID 0x{msg.arbitration_id:X} exceeds "
                                    f"0x{limit:X}, the largest {kind} ID")
    data = bytes(msg.data).ljust(8, b"\x00")
    body = _TX_HEADER + struct.pack(
        "<IIBIBBBB", 1, 10, 1 if msg.is_extended_id else 0, msg.arbitration_id,
        1 if msg.is_remote_frame else 0, msg.dlc, 0, 0) + data
    return body + bytes((_trailer(body, checksum),))


def decode_rx_frame(frame: bytes, *, timestamp: float = 0.0, channel: Any = None) -> can.Message | None:
    """The :class:`can.Message` of one 16-byte adapter→host frame (``None`` if not a received
    CAN frame: another command, or not framed by ``AA … 55``)."""
    if len(frame) != RX_LENGTH or frame[0] != RX_HEAD or frame[-1] != RX_TAIL or frame[1] != RX_FRAME:
        return None
    flags = frame[2]
    dlc = flags & 0x3F
    extended, remote = bool(flags & 0x40), bool(flags & 0x80)
    if dlc > 8:
        log.debug("%s: frame with dlc %d skipped", INTERFACE_NAME, dlc)
        return None
    (can_id,) = struct.unpack_from("<I", frame, 3)
    can_id &= 0x1FFFFFFF if extended else 0x7FF
    return can.Message(timestamp=timestamp, arbitration_id=can_id, is_extended_id=extended,
                       is_remote_frame=remote, dlc=dlc, data=b"" if remote else frame[7:7 + dlc],
                       channel=channel, is_rx=True)


class DamiaoUsbBus(can.BusABC):
    """python-can bus over a DM-USBCU1 adapter: ``can.Bus(interface="damiao_usb",
    channel="/dev/ttyACM0")``. ``channel`` is any pyserial port name or URL."""

    def __init__(self, channel: str, *, baudrate: int = SERIAL_BAUDRATE, bitrate: int | None = None,
                 checksum: Checksum = "zero", can_filters: can.typechecking.CanFilters | None = None,
                 **kwargs: Any) -> None:
        import serial

        if not channel:
            raise can.CanInitializationError(f"{INTERFACE_NAME}: a serial port is needed as channel, "
                                             "e.g. /dev/ttyACM0")
        if checksum not in ("zero", "sum8", "xor8"):
            raise can.CanInitializationError(f"{INTERFACE_NAME}: checksum must be 'zero', 'sum8' or 'xor8', "
                                             f"got {checksum!r}")
        if bitrate not in (None, 1_000_000):
            log.warning("%s: the adapter's CAN bit rate is set with Damiao's tool; %s bit/s requested",
                        INTERFACE_NAME, bitrate)
        try:
            self._serial = serial.serial_for_url(channel, baudrate=baudrate, bytesize=8, parity="N",
                                                 stopbits=1, timeout=0, write_timeout=1.0)
        except (serial.SerialException, ValueError) as exc:
            raise can.CanInitializationError(f"{INTERFACE_NAME}: cannot open {channel!r}: {exc}") from exc
        try:  # wait for input with select() on the descriptor; reads themselves never block
            self._fd: int | None = self._serial.fileno()
        except (AttributeError, OSError, ValueError, serial.SerialException):
            self._fd = None  # a pyserial URL without a descriptor: reads wait up to 1 ms each
            self._serial.timeout = 0.001
        self._checksum: Checksum = checksum
        self._buffer = bytearray()
        self.channel = channel
        self.channel_info = f"Damiao USB2CAN on {channel}"
        super().__init__(channel, can_filters=can_filters, **kwargs)

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        import serial

        frame = encode_tx_frame(msg, checksum=self._checksum)
        try:
            wanted = timeout if timeout is not None else 1.0
            if self._serial.write_timeout != wanted:  # setting it reconfigures the port: only on change
                self._serial.write_timeout = wanted
            written = self._serial.write(frame)
        except serial.SerialTimeoutException as exc:
            raise can.CanOperationError(f"{INTERFACE_NAME}: write timed out on {self.channel}") from exc
        except serial.SerialException as exc:
            raise can.CanOperationError(f"{INTERFACE_NAME}: {self.channel}: {exc}") from exc
        if written != len(frame):
            raise can.CanOperationError(f"{INTERFACE_NAME}: wrote {written} of {len(frame)} bytes")

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        import serial

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            msg = self._take_frame()
            if msg is not None:
                return msg, False
            try:
                waiting = self._serial.in_waiting
                if waiting or self._fd is None:
                    chunk = self._serial.read(max(waiting, 1))
                    self._buffer += chunk
                    if chunk:
                        continue
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None, False
                if self._fd is not None:
                    select.select([self._fd], [], [], remaining)
            except (OSError, serial.SerialException) as exc:
                raise can.CanOperationError(f"{INTERFACE_NAME}: {self.channel}: {exc}") from exc

    def _take_frame(self) -> can.Message | None:
        """The first complete received frame of the buffer; skips bytes that frame nothing."""
        buf = self._buffer
        while True:
            start = buf.find(RX_HEAD)
            if start < 0:
                buf.clear()
                return None
            del buf[:start]
            if len(buf) < RX_LENGTH:
                return None
            if buf[RX_LENGTH - 1] != RX_TAIL:  # not a frame: resynchronise on the next AA
                del buf[:1]
                continue
            frame = bytes(buf[:RX_LENGTH])
            del buf[:RX_LENGTH]
            msg = decode_rx_frame(frame, timestamp=time.time(), channel=self.channel)
            if msg is not None:
                return msg
            log.debug("%s: skipped adapter frame %s", INTERFACE_NAME, frame.hex(" "))

    def shutdown(self) -> None:
        super().shutdown()
        self._serial.close()


def register() -> None:
    """Make ``can.Bus(interface="damiao_usb", ...)`` work (idempotent)."""
    import can.interfaces
    import can.util

    can.interfaces.BACKENDS.setdefault(INTERFACE_NAME, (__name__, DamiaoUsbBus.__name__))
    valid = frozenset(can.interfaces.VALID_INTERFACES | {INTERFACE_NAME})
    for module in (can, can.interfaces, can.util):
        if hasattr(module, "VALID_INTERFACES"):
            module.VALID_INTERFACES = valid
