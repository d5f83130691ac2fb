"""The bridge's fail-safe rules, pure: command parsing (NaN and inconsistent lengths refuse the
whole message), the command watchdog, bus-error explanations, and the replay source's ramp."""

from __future__ import annotations

import errno

import can
import numpy as np
import pytest
from support.damiao_rig import CONFIG

from sysid_ros.core.data.trajectory_file import TrajectoryFile
from sysid_ros.hardware.bridge_config import load_bridge_config
from sysid_ros.hardware.bridge_replay import ReplaySource
from sysid_ros.hardware.safety import (
    CommandError,
    CommandLimits,
    JointTargets,
    Watchdog,
    WatchdogMode,
    explain_bus_error,
    parse_command,
)
from sysid_ros.hardware.transport import BusError, open_bus

NAMES = [f"joint{i}" for i in range(1, 7)]


def _limits() -> CommandLimits:
    return CommandLimits.from_joints(load_bridge_config(CONFIG).joints)


def test_commands_by_name_and_refusals():
    lim = _limits()
    prev = JointTargets.hold(np.zeros(6), lim.kp_default, lim.kd_default)
    parsed = parse_command(["joint1", "joint4", "gripper"], [10.0, -9.0, 0.0], [50.0, -99.0, 0.0],
                           [100.0, -100.0, 0.0], [-5.0, 20.0, 0.0], [1.0, 0.0, 0.0], joint_names=NAMES,
                           previous=prev, limits=lim)
    assert parsed.unknown_names == ["gripper"]
    out = parsed.targets  # as given: the clamping is MotorFrames.encode's (test_motor_frames)
    assert (out.position[0], out.velocity[3], out.kp[0], out.kd[3]) == (10.0, -99.0, -5.0, 0.0)
    assert out.position[1] == 0.0 and out.kp[1] == lim.kp_default[1]  # joints not named keep theirs
    defaults = parse_command(["joint2"], [0.5], [], [], [], [], joint_names=NAMES, previous=prev, limits=lim)
    assert (defaults.targets.velocity[1], defaults.targets.kd[1]) == (0.0, lim.kd_default[1])
    with pytest.raises(CommandError, match=r"non-finite velocity for joints \['joint1'\]"):
        parse_command(["joint1"], [0.0], [float("nan")], [], [], [], joint_names=NAMES, previous=prev,
                      limits=lim)
    with pytest.raises(CommandError, match="effort has 1 entries for 2 names"):
        parse_command(["joint1", "joint2"], [0.0, 0.0], [], [1.0], [], [], joint_names=NAMES,
                      previous=prev, limits=lim)
    with pytest.raises(CommandError, match="joint names repeat"):
        parse_command(["joint1", "joint1"], [0.0, 0.0], [], [], [], [], joint_names=NAMES, previous=prev,
                      limits=lim)


def test_watchdog_tracks_holds_then_disables():
    wd = Watchdog(command_timeout=0.1, hold_timeout=0.5)
    assert wd.mode(100.0) == WatchdogMode.IDLE  # before the first command: hold, no time-out
    wd.feed(100.0)
    assert wd.mode(100.05) == WatchdogMode.TRACK
    assert wd.mode(100.2) == WatchdogMode.HOLD
    assert wd.mode(100.61) == WatchdogMode.DISABLE
    wd.feed(100.7)
    assert wd.mode(100.75) == WatchdogMode.TRACK


def test_bus_errors_are_explained():
    enobufs = can.CanOperationError("Failed to transmit: [Errno 105] No buffer space available",
                                    error_code=errno.ENOBUFS)
    text = explain_bus_error(enobufs, interface="socketcan", channel="can0", bitrate=1000000)
    assert "CAN bus socketcan:can0 at 1000000 bit/s failed" in text
    assert "motors are unpowered, the bitrate is wrong, the 120 Ω termination is missing" in text
    down = explain_bus_error(OSError(errno.ENETDOWN, "Network is down"), interface="socketcan",
                             channel="can0", bitrate=1000000)
    assert "sudo ip link set can0 up type can bitrate 1000000" in down
    assert "bus-off" in explain_bus_error(can.CanOperationError("error frame: bus-off (id 0x40)"),
                                          interface="pcan", channel="PCAN_USBBUS1", bitrate=1000000)
    no_socketcan = OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
    assert "this system has no SocketCAN" in explain_bus_error(no_socketcan, interface="socketcan",
                                                               channel="can0", bitrate=1000000)
    # a real open through python-can (the package's damiao_usb interface) of a missing adapter
    with pytest.raises(BusError, match=r"Likely cause: there is no device '/dev/ttyNOPE0': adapter unplug"):
        open_bus(load_bridge_config(CONFIG, interface="damiao_usb", channel="/dev/ttyNOPE0"))


def test_replay_ramps_from_the_measured_pose():
    lim = _limits()
    t = np.linspace(0.0, 1.0, 101)
    pos = np.column_stack([0.5 + 0.1 * np.sin(2 * np.pi * t), np.full(101, 1.2)])
    zeros = np.zeros_like(pos)
    traj = TrajectoryFile(t, ("joint1", "joint2"), ("DM4340", "DM4340"), pos, zeros, zeros,
                          np.full_like(pos, 30.0), np.full_like(pos, 2.0))
    start = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    src = ReplaySource(traj, NAMES, start, lim, ramp_time=0.5)
    np.testing.assert_allclose(src.targets(0.0).position, start)
    first = src.targets(src.ramp_time)
    assert first.position[0] == pytest.approx(0.5) and first.position[1] == pytest.approx(1.2)
    assert first.position[2] == pytest.approx(1.0)  # joints the file does not name hold
    assert src.targets(src.ramp_time + 0.25).position[0] == pytest.approx(0.6, abs=1e-3)
    assert src.done(src.duration) and not src.done(src.duration - 0.01)
    peak = max(abs(src.targets(s).velocity[0]) for s in np.linspace(0, src.ramp_time, 200))
    assert peak <= 0.5 * lim.velocity[0]
