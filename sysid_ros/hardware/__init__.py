"""Damiao DM-J motors on CAN: the protocol codec and the transports around python-can.

* :mod:`.codec` — pure encoders/decoders of every frame (MIT, other modes, special commands,
  feedback, registers), the per-model limit table, no I/O;
* :mod:`.usb2can` — Damiao's DM-USBCU1 USB-serial adapter as a python-can interface
  ``can.Bus(interface="damiao_usb", channel="/dev/ttyACM0")``, registered when this package is
  imported (:func:`.usb2can.register`);
* :mod:`.emulator` — emulated motors speaking the protocol on a python-can bus, shafts driven by
  MuJoCo, with fault injection (no ROS).

Protocol reference: ``docs/damiao-protocol.md``.
"""

from __future__ import annotations

from sysid_ros.hardware.usb2can import register as _register_usb2can

_register_usb2can()
