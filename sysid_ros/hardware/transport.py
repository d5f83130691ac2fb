"""The python-can side of the bridge: open the configured bus, send 8-byte frames, receive the
motors' frames, and turn every CAN error into one :class:`BusError` with a message for a person.

Any python-can interface works (``socketcan``, ``pcan``, ``gs_usb``, ``damiao_usb``, ``virtual``,
``udp_multicast`` ...). Adapters that echo their own frames (gs_usb) are handled by skipping
received messages whose ``is_rx`` is false. With ``fd`` every frame is sent as CAN-FD with bit-rate
switch (never mix FD and classic devices on one bus).
"""

from __future__ import annotations

import logging

import can

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_config import BridgeConfig
from sysid_ros.hardware.safety import explain_bus_error

__all__ = ["BusError", "Payload", "Transport", "describe_error_frame", "open_bus"]

log = logging.getLogger(__name__)


class Payload(bytearray):
    """A frame's data bytes as handed to python-can: a ``bytearray`` (what ``can.Message`` keeps
    as is) whose deep copy is a plain copy. python-can's ``virtual`` bus deep-copies every message
    for every receiver; the generic deep copy of a ``bytearray`` goes through ``__reduce_ex__``
    and costs about twice the rest of the message's copy (4.7 → 2.2 us per message measured). The
    receiver still gets its own ``bytearray``; every other interface just reads the bytes."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict) -> bytearray:
        return bytearray(self)


class BusError(SysIdError):
    """The CAN bus failed (error frame, bus-off, ENOBUFS, adapter gone); the message explains it."""


def open_bus(config: BridgeConfig) -> can.BusABC:
    """A python-can bus from the configuration; :class:`BusError` with the likely cause if it
    cannot be opened."""
    kwargs: dict = {"interface": config.interface, "channel": config.channel, "bitrate": config.bitrate}
    if config.fd:
        kwargs.update(fd=True, data_bitrate=config.data_bitrate)
    if config.interface == "virtual":
        kwargs["receive_own_messages"] = False
    try:
        return can.Bus(**kwargs)
    except (can.CanError, OSError, ValueError, ImportError) as exc:
        raise BusError(explain_bus_error(exc, interface=config.interface, channel=config.channel,
                                         bitrate=config.bitrate)) from exc


#: SocketCAN error-frame classes (``linux/can/error.h``: bits of the error frame's CAN ID)
ERROR_CLASSES = ((0x001, "TX timeout"), (0x002, "lost arbitration"), (0x004, "controller problem"),
                 (0x008, "protocol violation"), (0x010, "transceiver status"),
                 (0x020, "no acknowledgement on transmission"), (0x040, "bus-off"),
                 (0x080, "bus error"), (0x100, "controller restarted"))


def describe_error_frame(msg: can.Message) -> str:
    """``"error frame: bus-off (id 0x40 ...)"`` from a SocketCAN-style error frame."""
    classes = [text for bit, text in ERROR_CLASSES if msg.arbitration_id & bit] or ["unknown class"]
    return (f"error frame: {', '.join(classes)} (id 0x{msg.arbitration_id:X}, data "
            f"{bytes(msg.data).hex(' ')})")


class Transport:
    """Frames in and out of one bus. Owns the bus only if it opened it (``close`` then shuts it)."""

    def __init__(self, config: BridgeConfig, bus: can.BusABC | None = None) -> None:
        self.config = config
        self._owned = bus is None
        self.bus = open_bus(config) if bus is None else bus
        self.sent = 0
        self.received = 0
        self.echoes = 0

    def _fault(self, exc: BaseException) -> BusError:
        return BusError(explain_bus_error(exc, interface=self.config.interface, channel=self.config.channel,
                                          bitrate=self.config.bitrate))

    def send(self, arbitration_id: int, data: bytes) -> None:
        """Send one standard-ID frame; :class:`BusError` on any CAN or OS error."""
        msg = can.Message(arbitration_id=arbitration_id, data=Payload(data), is_extended_id=False,
                          is_fd=self.config.fd, bitrate_switch=self.config.fd)
        try:
            self.bus.send(msg)
        except (can.CanError, OSError) as exc:
            raise self._fault(exc) from exc
        self.sent += 1

    def recv(self, timeout: float) -> can.Message | None:
        """The next frame from another node within ``timeout`` [s] (``None`` if none); error frames
        raise :class:`BusError`."""
        try:
            msg = self.bus.recv(timeout=max(timeout, 0.0))
        except (can.CanError, OSError) as exc:
            raise self._fault(exc) from exc
        if msg is None:
            return None
        if not msg.is_rx:
            self.echoes += 1
            return None
        if msg.is_error_frame:
            raise self._fault(can.CanOperationError(describe_error_frame(msg)))
        self.received += 1
        return msg

    def drain(self) -> int:
        """Discard every frame already waiting; returns how many."""
        count = 0
        while True:
            try:
                msg = self.bus.recv(timeout=0.0)
            except (can.CanError, OSError):
                return count
            if msg is None:
                return count
            count += 1

    @property
    def owned(self) -> bool:
        """Whether this transport opened its bus (and may close and re-open it)."""
        return self._owned

    def reopen(self) -> None:
        """Close and open again a bus this transport opened (after an adapter was unplugged and
        plugged back, or a bus-off that needs a restart); :class:`BusError` if it cannot be opened."""
        if not self._owned:
            raise BusError("this bus was handed in: only its owner can re-open it")
        try:
            self.bus.shutdown()
        except (can.CanError, OSError) as exc:
            log.debug("closing the failed CAN bus: %s", exc)
        try:
            self.bus = open_bus(self.config)
        except (can.CanError, OSError) as exc:
            raise self._fault(exc) from exc

    def close(self) -> None:
        if self._owned:
            try:
                self.bus.shutdown()
            except (can.CanError, OSError) as exc:  # closing a failed adapter: report, go on
                log.warning("closing the CAN bus failed: %s", exc)
