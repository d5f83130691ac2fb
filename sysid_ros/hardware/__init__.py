"""Damiao DM-J motors on CAN: the protocol, the bridge's hot path and the transports around python-can.

* :mod:`.codec` — pure encoders/decoders of the MIT command and feedback frames and the special
  commands (:class:`.codec.MitCodec` is the one MIT codec); :mod:`.codec_registers` — register
  requests/replies and the other modes' payloads;
* :mod:`.motor_frames` — joint-space targets ⇄ CAN payloads (clamping, joint map, unwrapping,
  codec): what the bridge runs every cycle, pure;
* :mod:`.wiring`, :mod:`.bridge_config` — the joints' wiring and the bridge's parameters;
* :mod:`.safety` — command parsing, the command watchdog, trips, bus-error explanations;
* :mod:`.bridge` — the bridge without ROS, its life cycle; by concern :mod:`.bridge_handshake`
  (bus helpers, register handshake, confirmed enable), :mod:`.bridge_loop` (the control loop),
  :mod:`.bridge_disable` (confirmed disable, retries, keeper, trips), :mod:`.bridge_types`; with
  :mod:`.realtime` (SCHED_FIFO, mlockall), :mod:`.deadlines` (motor CAN timeout, watchdog and
  heartbeat sized from the measured loop latency), :mod:`.bridge_replay`, :mod:`.bridge_timing`,
  :mod:`.transport`;
* :mod:`.usb2can` — Damiao's DM-USBCU1 USB-serial adapter as a python-can interface
  ``can.Bus(interface="damiao_usb", channel="/dev/ttyACM0")``, registered when this package is
  imported (:func:`.usb2can.register`);
* :mod:`.emulator` — emulated motors speaking the protocol on a python-can bus, shafts driven by
  MuJoCo, with fault injection (one motor's firmware: :mod:`.emulated_motor`);
  :mod:`.emulated_bus` hands them to a host as a bus (no ROS).

Facts about the motors (limits, gear, torque constant) come from one table,
:mod:`sysid_ros.core.model.motors`.
"""

from __future__ import annotations

from sysid_ros.hardware.usb2can import register as _register_usb2can

_register_usb2can()
