"""The Damiao bridge: pure rules (joint map, unwrapping, clamping, watchdog, bus-error texts), the
bridge core against the motor emulator on a python-can virtual bus (every frame observed by a bus
monitor), and the lifecycle node over real DDS (in-process and as a process stopped by SIGINT).

Fault reactions are checked on the frames themselves: after the frame that shows a fault (or the
cycle whose replies exceed the missed-reply limit) the bridge's next frames are the disable
frames ``FF…FD`` to every motor — no further MIT round in between, i.e. within the same control
period — and the emulated motors end disabled.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace

import can
import numpy as np
import pytest
from conftest import DEFAULT_ROBOT, ROOT, stop_process
from hypothesis import given, settings
from hypothesis import strategies as st

from sysid_ros.core.data.trajectory_file import TrajectoryFile, write_trajectory_file
from sysid_ros.core.errors import DataError
from sysid_ros.hardware.bridge import Bridge, BridgeError, HandshakeError
from sysid_ros.hardware.bridge_config import BridgeConfig, ConfigError, load_bridge_config
from sysid_ros.hardware.bridge_replay import ReplaySource
from sysid_ros.hardware.codec import (
    MitCommand,
    MitLimits,
    MotorState,
    Register,
    Special,
    decode_feedback,
    decode_mit,
    encode_mit,
    parse_special,
)
from sysid_ros.hardware.emulator import MotorEmulator
from sysid_ros.hardware.joint_map import JointMap, PositionUnwrapper, StartupPoseError, resolve_turns
from sysid_ros.hardware.safety import (
    CommandError,
    CommandLimits,
    JointTargets,
    TripKind,
    Watchdog,
    WatchdogMode,
    clamp_targets,
    clamp_to_motor,
    explain_bus_error,
    parse_command,
)
from sysid_ros.hardware.transport import BusError

CONFIG = ROOT / "config" / "yam_damiao.yaml"
RATE = 250.0  # [Hz] in-process tests on a shared, loaded machine (1 kHz is the benchmark's business)
WAIT = 10.0   # [s] bound of every wait on a condition
N_JOINTS = 6
DM4340, DM4310 = MitLimits(12.5, 10.0, 28.0), MitLimits(12.5, 30.0, 10.0)  # the emulator's registers


def wait_until(predicate, timeout: float = WAIT, poll: float = 0.002) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def test_config(**overrides) -> BridgeConfig:
    """The package's YAM configuration on a fresh virtual channel."""
    values = dict(interface="virtual", channel=f"test-{uuid.uuid4().hex[:8]}", rate=RATE,
                  max_missed_replies=50)  # tests not about missed replies tolerate a stalled machine
    values.update(overrides)
    return load_bridge_config(CONFIG, **values)


test_config.__test__ = False  # a helper, not a test


# ------------------------------------------------------------------------------------------ pure
def test_config_file_loads_six_joints_with_ids_and_limits():
    cfg = load_bridge_config(CONFIG)
    assert cfg.names == tuple(f"joint{i}" for i in range(1, 7))
    assert [j.motor for j in cfg.joints] == ["DM4340"] * 3 + ["DM4310"] * 3
    assert [j.can_id for j in cfg.joints] == [1, 2, 3, 4, 5, 6]
    assert [j.master_id for j in cfg.joints] == [0x11, 0x12, 0x13, 0x14, 0x15, 0x16]
    from sysid_ros.core.model.robot import RobotModel

    lower, upper = RobotModel.from_mjcf(DEFAULT_ROBOT).joint_limits()
    np.testing.assert_allclose([j.position_min for j in cfg.joints], lower, atol=1e-6)
    np.testing.assert_allclose([j.position_max for j in cfg.joints], upper, atol=1e-6)


def test_config_errors_say_what_was_expected(tmp_path):
    params = {"joints.names": ["a", "b"], "joints.motors": ["DM4310"], "joints.can_ids": [1, 2],
              "joints.master_ids": [17, 18], "joints.position_min": [-1, -1], "joints.position_max": [1, 1],
              "joints.velocity_limits": [1, 1], "joints.torque_limits": [1, 1]}
    with pytest.raises(ConfigError, match=r"joints.motors has 1 entries, expected 2"):
        BridgeConfig.from_parameters(params)
    with pytest.raises(ConfigError, match=r"master_ids must differ from every can_id"):
        BridgeConfig.from_parameters({**params, "joints.motors": ["DM4310"] * 2,
                                      "joints.master_ids": [2, 18]})
    with pytest.raises(ConfigError, match="unknown motor model 'DM9999'"):
        BridgeConfig.from_parameters({**params, "joints.motors": ["DM4310", "DM9999"]})
    assert load_bridge_config(CONFIG, rate=500, max_missed_replies=3.0).rate == 500.0  # YAML ints are fine
    with pytest.raises(ConfigError, match=r"max_missed_replies: expected an integer, got 2.5"):
        load_bridge_config(CONFIG, max_missed_replies=2.5)
    bad = tmp_path / "bad.yaml"
    bad.write_text("other_node:\n  ros__parameters: {}\n")
    with pytest.raises(ConfigError, match="no 'damiao_bridge: ros__parameters:' section"):
        load_bridge_config(bad)


def _mapped_joints():
    cfg = load_bridge_config(CONFIG)
    from dataclasses import replace

    joints = list(cfg.joints)
    joints[0] = replace(joints[0], direction=-1, position_offset=0.3, gear_ratio=2.0)
    return joints


def test_joint_map_round_trips_and_scales_torque_and_gains():
    jm = JointMap(_mapped_joints())
    q = np.array([0.5, 1.0, 1.0, 0.1, -0.2, 0.3])
    p = jm.position_to_motor(q)
    assert p[0] == pytest.approx(-1 * 2.0 * (0.5 - 0.3))  # p = d·G·(q − o)
    np.testing.assert_allclose(jm.position_to_joint(p), q, atol=1e-12)
    dq = np.arange(6.0)
    np.testing.assert_allclose(jm.velocity_to_joint(jm.velocity_to_motor(dq)), dq, atol=1e-12)
    tau = np.array([4.0, 1, 1, 1, 1, 1])
    assert jm.torque_to_motor(tau)[0] == pytest.approx(-2.0)  # t = d·τ/G
    assert jm.gain_to_motor(np.full(6, 8.0))[0] == pytest.approx(2.0)  # kp_motor = kp / G²
    # power is the same on both sides: τ·dq == t·v
    assert float(tau @ dq) == pytest.approx(float(jm.torque_to_motor(tau) @ jm.velocity_to_motor(dq)))


def test_unwrapper_follows_a_motor_across_the_pmax_edge():
    pmax = 12.5
    unwrap = PositionUnwrapper([pmax])
    truth = np.linspace(11.0, 15.0, 41)  # crosses +PMAX
    reported = (truth + pmax) % (2 * pmax) - pmax  # what the 16-bit field shows
    out = [unwrap.update(np.array([r]))[0] for r in reported]
    np.testing.assert_allclose(out, truth, atol=1e-9)
    assert unwrap.to_reported(np.array([14.0]))[0] == pytest.approx(14.0 - 2 * pmax)
    held = unwrap.update(np.array([np.nan]), np.array([False]))  # a missed reply keeps the value
    assert held[0] == pytest.approx(15.0)


def test_startup_turns_resolved_against_joint_limits():
    cfg = load_bridge_config(CONFIG)
    jm = JointMap(cfg.joints)
    lo = np.array([j.position_min for j in cfg.joints])
    hi = np.array([j.position_max for j in cfg.joints])
    home = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    turned = home + np.array([0, 2 * math.pi, 0, 0, 0, 0])  # joint2 read one shaft turn off
    np.testing.assert_array_equal(resolve_turns(jm, turned, lo, hi), [0, -1, 0, 0, 0, 0])
    outside = home.copy()
    outside[3] = 2.5  # joint4 range ±1.5708: neither 2.5 nor 2.5 − 2π fits
    with pytest.raises(StartupPoseError, match=r"joint4: at \+2.500 rad, outside its limits"):
        resolve_turns(jm, outside, lo, hi)
    wide = np.full(6, -7.0), np.full(6, 7.0)  # ranges wider than a shaft turn
    with pytest.raises(StartupPoseError, match="joint1: ambiguous start-up position"):
        resolve_turns(jm, home, *wide)


def _limits() -> CommandLimits:
    return CommandLimits.from_joints(load_bridge_config(CONFIG).joints)


def test_clamping_every_field_and_refusing_nan():
    lim = _limits()
    names = [f"joint{i}" for i in range(1, 7)]
    prev = JointTargets.hold(np.zeros(6), lim.kp_default, lim.kd_default)
    parsed = parse_command(["joint1", "joint4", "gripper"], [10.0, -9.0, 0.0], [50.0, -99.0, 0.0],
                           [100.0, -100.0, 0.0], [-5.0, 20.0, 0.0], [1.0, 0.0, 0.0], joint_names=names,
                           previous=prev, limits=lim)
    assert parsed.unknown_names == ["gripper"]
    out, changed = clamp_targets(parsed.targets, lim)
    assert out.position[0] == lim.upper[0] and out.position[3] == lim.lower[3]
    assert out.velocity[0] == lim.velocity[0] and out.velocity[3] == -lim.velocity[3]
    assert out.effort[0] == lim.torque[0] and out.effort[3] == -lim.torque[3]
    assert out.kp[0] == 0.0                   # negative stiffness refused
    assert out.kd[3] == lim.kd_default[3]     # kp > 0 with kd = 0 would oscillate: default damping
    assert out.position[1] == 0.0 and out.kp[1] == lim.kp_default[1]  # joints not named keep theirs
    assert changed == {"position": 2, "velocity": 2, "effort": 2, "kp": 1, "kd": 1}
    with pytest.raises(CommandError, match=r"non-finite velocity for joints \['joint1'\]"):
        parse_command(["joint1"], [0.0], [float("nan")], [], [], [], joint_names=names, previous=prev,
                      limits=lim)
    with pytest.raises(CommandError, match="effort has 1 entries for 2 names"):
        parse_command(["joint1", "joint2"], [0.0, 0.0], [], [1.0], [], [], joint_names=names,
                      previous=prev, limits=lim)


def _mapped_bridge() -> Bridge:
    """A bridge (not configured: no bus) over joints with every mapping feature (direction −1,
    offsets, gear ratios) and the emulator's register limits, its hot path prepared."""
    cfg = load_bridge_config(CONFIG)
    mapping = [(1, 0.0, 1.0), (-1, 0.3, 2.0), (1, -0.2, 1.5), (-1, 0.0, 1.0), (1, 0.1, 3.0), (-1, -0.4, 1.0)]
    joints = tuple(replace(j, direction=d, position_offset=o, gear_ratio=g)
                   for j, (d, o, g) in zip(cfg.joints, mapping, strict=True))
    bridge = Bridge(replace(cfg, joints=joints))
    bridge._use_limits([DM4340] * 3 + [DM4310] * 3)
    return bridge


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(-60.0, 60.0, allow_nan=False), min_size=30, max_size=30),
       turns=st.lists(st.integers(-2, 2), min_size=6, max_size=6))
def test_loop_frames_are_the_reference_pipeline(values, turns):
    """The loop's per-joint float path gives the very bytes of clamp_targets → JointMap → unwrap →
    clamp_to_motor → encode_mit (the reference rules, numpy), and says whether anything was clamped."""
    bridge = _mapped_bridge()
    bridge._unwrap.add_turns(np.array(turns))
    v = np.array(values).reshape(5, 6)
    targets = JointTargets(v[0] / 10, v[1], v[2], np.abs(v[3]) * 5 - 20, v[4] / 10)  # kp, kd partly < 0
    frames, clamped = bridge._encode(targets)
    ref, changed = clamp_targets(targets, bridge.limits)
    jm = bridge.map
    fields = clamp_to_motor(bridge._unwrap.to_reported(jm.position_to_motor(ref.position)),
                            jm.velocity_to_motor(ref.velocity), jm.torque_to_motor(ref.effort),
                            jm.gain_to_motor(ref.kp), jm.gain_to_motor(ref.kd),
                            *(np.array([getattr(lim, f) for lim in bridge._mit_limits])
                              for f in ("pmax", "vmax", "tmax", "kp_max", "kd_max")))
    p, vel, tau, kp, kd = (f.tolist() for f in fields)
    expected = [encode_mit(MitCommand(p[i], vel[i], kp[i], kd[i], tau[i]), bridge._mit_limits[i])
                for i in range(6)]
    assert frames == expected
    assert clamped == any(changed.values())


@settings(max_examples=100, deadline=None)
@given(raw=st.lists(st.binary(min_size=8, max_size=8), min_size=6, max_size=6),
       fresh=st.lists(st.booleans(), min_size=6, max_size=6))
def test_loop_state_is_the_reference_mapping(raw, fresh):
    """Readings → joint state in the loop equal PositionUnwrapper.update + JointMap.to_joint (numpy),
    a motor without a reply keeping its position with NaN velocity and effort."""
    bridge, reference = _mapped_bridge(), PositionUnwrapper([12.5] * 6)
    lims = [DM4340] * 3 + [DM4310] * 3
    for step in range(2):  # a first reading, then one that may wrap
        data = [bytes([0x11]) + r[1:] if step else bytes([0x11]) + r[::-1][1:] for r in raw]
        ok = [True] * 6 if step == 0 else fresh
        readings = [bridge._codecs[i].decode_feedback(d) if ok[i] else None for i, d in enumerate(data)]
        bridge._store_state(readings)
        fbs = [decode_feedback(d, lim) for d, lim in zip(data, lims, strict=True)]
        p = reference.update(np.array([fb.position for fb in fbs]), np.array(ok))
        q, dq, tau = bridge.map.to_joint(p, np.array([fb.velocity for fb in fbs]),
                                         np.array([fb.torque for fb in fbs]))
        np.testing.assert_array_equal(bridge._position, q)
        np.testing.assert_array_equal(bridge._velocity, np.where(ok, dq, np.nan))
        np.testing.assert_array_equal(bridge._effort, np.where(ok, tau, np.nan))


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
    from sysid_ros.hardware.transport import open_bus

    with pytest.raises(BusError, match=r"Likely cause: there is no device '/dev/ttyNOPE0': adapter unplug"):
        open_bus(load_bridge_config(CONFIG, interface="damiao_usb", channel="/dev/ttyNOPE0"))


def test_replay_ramps_from_the_measured_pose(tmp_path):
    lim = _limits()
    names = [f"joint{i}" for i in range(1, 7)]
    t = np.linspace(0.0, 1.0, 101)
    pos = np.column_stack([0.5 + 0.1 * np.sin(2 * np.pi * t), np.full(101, 1.2)])
    zeros = np.zeros_like(pos)
    traj = TrajectoryFile(t, ("joint1", "joint2"), ("DM4340", "DM4340"), pos, zeros, zeros,
                          np.full_like(pos, 30.0), np.full_like(pos, 2.0))
    start = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    src = ReplaySource(traj, names, start, lim, ramp_time=0.5)
    np.testing.assert_allclose(src.targets(0.0).position, start)
    first = src.targets(src.ramp_time)
    assert first.position[0] == pytest.approx(0.5) and first.position[1] == pytest.approx(1.2)
    assert first.position[2] == pytest.approx(1.0)  # joints the file does not name hold
    assert src.targets(src.ramp_time + 0.25).position[0] == pytest.approx(0.6, abs=1e-3)
    assert src.done(src.duration) and not src.done(src.duration - 0.01)
    peak = max(abs(src.targets(s).velocity[0]) for s in np.linspace(0, src.ramp_time, 200))
    assert peak <= 0.5 * lim.velocity[0]


# ----------------------------------------------------------------------- bridge vs the emulator
@dataclass
class Frame:
    stamp: float
    arbitration_id: int
    data: bytes
    error: bool


@dataclass
class Monitor(can.Listener):
    """Every frame on the channel, in bus order."""

    frames: list[Frame] = field(default_factory=list)

    def on_message_received(self, msg: can.Message) -> None:
        self.frames.append(Frame(msg.timestamp, msg.arbitration_id, bytes(msg.data), msg.is_error_frame))

    def snapshot(self) -> list[Frame]:
        return list(self.frames)


class Rig:
    """Emulated YAM motors, a bus monitor and a bridge on one virtual channel.

    ``clock="lockstep"`` (default): the emulator's physics advances one control period per command
    round and the bridge runs on that time base (its replies are awaited up to 50 ms), so a loaded
    machine slows the run down instead of making replies late; ``"realtime"``: wall-clock physics
    and time base, as on hardware."""

    def __init__(self, config: BridgeConfig, *, bus_off_aware: bool = False, initial_pose="home",
                 on_sample=None, clock: str = "lockstep") -> None:
        self.config = config
        self.emulator = MotorEmulator(config.joints, channel=config.channel, interface="virtual",
                                      initial_pose=initial_pose, clock=clock, lockstep_period=config.period)
        self.monitor_bus = can.Bus(interface="virtual", channel=config.channel)
        self.monitor = Monitor()
        self.notifier = can.Notifier(self.monitor_bus, [self.monitor], timeout=0.05)
        self.samples: list = []
        self.trips: list = []
        self.done = threading.Event()
        self.host_bus = can.Bus(interface="virtual", channel=config.channel)
        bus = self.emulator.host_bus(self.host_bus) if bus_off_aware else self.host_bus
        self.bridge = Bridge(config, bus=bus, on_sample=on_sample or self.samples.append,
                             on_trip=self.trips.append, on_replay_done=self.done.set,
                             timebase="rounds" if clock == "lockstep" else "wall")
        self.emulator.start()

    def close(self) -> None:
        self.bridge.shutdown()
        self.emulator.stop()
        self.notifier.stop()
        self.monitor_bus.shutdown()
        self.host_bus.shutdown()

    def states(self) -> list[MotorState]:
        return [m.state for m in self.emulator.motors]

    def run_cycles(self, count: int) -> None:
        start = len(self.samples)
        assert wait_until(lambda: len(self.samples) >= start + count), "the control loop stalled"


@pytest.fixture
def rig_factory():
    rigs = []

    def make(**kwargs) -> Rig:
        bus_off_aware = kwargs.pop("bus_off_aware", False)
        initial_pose = kwargs.pop("initial_pose", "home")
        on_sample = kwargs.pop("on_sample", None)
        clock = kwargs.pop("clock", "lockstep")
        rig = Rig(test_config(**kwargs), bus_off_aware=bus_off_aware, initial_pose=initial_pose,
                  on_sample=on_sample, clock=clock)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()


def is_special(frame: Frame, kind: Special) -> bool:
    return 1 <= frame.arbitration_id <= N_JOINTS and parse_special(frame.data) == kind


def is_mit(frame: Frame) -> bool:
    return 1 <= frame.arbitration_id <= N_JOINTS and parse_special(frame.data) is None


def assert_disabled_right_after(frames: list[Frame], index: int) -> list[Frame]:
    """After ``frames[index]`` (where the fault shows) the bridge sends no MIT frame before the
    disable frames to all six motors. Returns the disable frames."""
    later = [f for f in frames[index + 1:] if 1 <= f.arbitration_id <= N_JOINTS]
    first_disable = next(k for k, f in enumerate(later) if is_special(f, Special.DISABLE))
    before = later[:first_disable]
    # only the rest of the same MIT round may precede: no motor gets two MIT frames
    ids = [f.arbitration_id for f in before if is_mit(f)]
    assert len(ids) == len(set(ids)), f"a new MIT round was sent before disabling: {ids}"
    disables = [f for f in later[first_disable:] if is_special(f, Special.DISABLE)]
    assert {f.arbitration_id for f in disables} == set(range(1, N_JOINTS + 1))
    return disables


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
    dead = rig_factory(bus_off_aware=True)
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
    relaxed = Bridge(rig.config.replace(limit_mismatch="warn"), bus=rig.host_bus)
    with caplog.at_level(logging.WARNING):
        relaxed.configure()
    assert "using the registers' values" in caplog.text
    assert relaxed.motors[2].limits.vmax == 45.0
    relaxed.shutdown()


def test_tracking_and_clamped_frames(rig_factory):
    # single commands, not a stream: no watchdog here; the hardware's wall-clock time base
    rig = rig_factory(command_timeout=30.0, clock="realtime")
    cfg = rig.config
    rig.bridge.configure()
    rig.bridge.activate()
    assert rig.states() == [MotorState.ENABLED] * N_JOINTS
    rig.run_cycles(10)
    home = rig.samples[-1].position.copy()  # the feedback is the emulated shafts' state (16-bit counts)
    np.testing.assert_allclose(home, rig.emulator.joint_positions(), atol=0.01)
    # a step on joint1 is tracked (measured by the emulator's physics and by the feedback)
    target = home.copy()
    target[0] += 0.2
    rig.bridge.submit_command(list(cfg.names), target.tolist(), kp=[60.0] * 6, kd=[6.0] * 6,
                              effort=[0.0] * 6)
    assert wait_until(lambda: abs(rig.samples[-1].position[0] - target[0]) < 0.01), rig.samples[-1]
    assert abs(rig.emulator.joint_positions()[0] - target[0]) < 0.015
    # out-of-range command: every field of the frame on the bus is clamped
    rig.bridge.submit_command(["joint1", "joint4", "no_such_joint"], [9.0, -9.0, 0.0],
                              velocity=[99.0, -99.0, 0.0], effort=[99.0, -99.0, 0.0], kp=[1000.0, -3.0, 0.0],
                              kd=[7.0, 0.5, 0.0])
    mark = len(rig.monitor.frames)
    assert wait_until(lambda: sum(is_mit(f) for f in rig.monitor.frames[mark:]) >= 2 * N_JOINTS)
    frames = [f for f in rig.monitor.frames[mark:] if is_mit(f)]
    j1 = decode_mit(next(f.data for f in reversed(frames) if f.arbitration_id == 1), DM4340)
    j4 = decode_mit(next(f.data for f in reversed(frames) if f.arbitration_id == 4), DM4310)
    half_count_p = 25.0 / 65535
    assert j1.position == pytest.approx(cfg.joints[0].position_max, abs=half_count_p)
    assert j4.position == pytest.approx(cfg.joints[3].position_min, abs=half_count_p)
    assert j1.velocity == pytest.approx(cfg.joints[0].velocity_limit, abs=20.0 / 4095)
    assert j4.velocity == pytest.approx(-cfg.joints[3].velocity_limit, abs=60.0 / 4095)
    assert j1.torque == pytest.approx(cfg.joints[0].torque_limit, abs=56.0 / 4095)
    assert j4.torque == pytest.approx(-cfg.joints[3].torque_limit, abs=20.0 / 4095)
    assert j1.kp == pytest.approx(500.0) and j1.kd == pytest.approx(5.0)  # MIT ranges
    assert j4.kp == 0.0
    assert rig.bridge.status().counters["unknown_names"] == 1
    # NaN: the whole command is refused, the frames do not change
    with pytest.raises(CommandError, match="non-finite position"):
        rig.bridge.submit_command(["joint1"], [float("nan")])
    mark = len(rig.monitor.frames)
    assert wait_until(lambda: sum(f.arbitration_id == 1 for f in rig.monitor.frames[mark:]) >= 3)
    assert rig.bridge.last_frame(0) == next(f.data for f in frames[::-1] if f.arbitration_id == 1)
    assert rig.bridge.status().counters["rejected"] == 1
    assert rig.bridge.trip is None
    assert rig.bridge.deactivate() == []
    assert rig.states() == [MotorState.DISABLED] * N_JOINTS


FAULTS = ("over_temperature", "comm_loss", "dropped_replies", "bus_off")


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_disables_every_motor_within_the_cycle(rig_factory, fault, caplog):
    rig = rig_factory(max_missed_replies=10, motor_timeout=0.5, bus_off_aware=fault == "bus_off")
    emu = rig.emulator
    rig.bridge.configure()
    rig.bridge.activate()
    rig.run_cycles(20)
    assert rig.trips == [], f"tripped before any fault was injected: {rig.trips}"
    mark = len(rig.monitor.frames)
    with caplog.at_level(logging.INFO):
        if fault == "over_temperature":
            emu.inject_overtemperature("joint5", "mosfet")
        elif fault == "comm_loss":
            emu.inject_comm_loss("joint2")
        elif fault == "dropped_replies":
            emu.drop_replies("joint6", 1000)
        else:
            emu.inject_bus_off()
        assert wait_until(lambda: rig.trips), "no trip"  # reported after the disable round
        trip = rig.bridge.trip
        if fault != "bus_off":  # the monitor reads the bus on its own thread: let it catch up
            assert wait_until(lambda: {f.arbitration_id for f in rig.monitor.frames[mark:]
                                       if is_special(f, Special.DISABLE)} == set(range(1, N_JOINTS + 1)))
        frames = rig.monitor.snapshot()[mark:]
        if fault == "over_temperature":
            assert trip.kind == TripKind.MOTOR_FAULT and trip.joint == "joint5"
            hot = round(emu.motor("joint5").t_mos)
            assert "MOSFET over-temperature" in trip.message and f"MOSFET {hot} °C" in trip.message
            seen = next(k for k, f in enumerate(frames) if f.arbitration_id == 0x15
                        and decode_feedback(f.data, DM4310).state == 0xB)
            assert_disabled_right_after(frames, seen)
            assert wait_until(lambda: rig.states() == [MotorState.DISABLED] * 4
                              + [MotorState.MOSFET_OVER_TEMP, MotorState.DISABLED])
        elif fault in ("comm_loss", "dropped_replies"):
            joint, master = ("joint2", 0x12) if fault == "comm_loss" else ("joint6", 0x16)
            assert trip.kind == TripKind.MISSED_REPLIES and trip.joint == joint
            assert "missed 11 replies in a row (limit 10)" in trip.message
            last_reply = max(k for k, f in enumerate(frames) if f.arbitration_id == master) \
                if any(f.arbitration_id == master for f in frames) else -1
            rounds = [f for f in frames[last_reply + 1:] if is_mit(f) and f.arbitration_id == master - 0x10]
            # never before the limit: ≥ 10 rounds after the last reply on the bus (11 missed counted
            # when that last reply came after its cycle's deadline: a late reply is a missed one)
            assert len(rounds) >= 10
            last_mit = max(k for k, f in enumerate(frames) if is_mit(f))
            assert_disabled_right_after(frames, last_mit - N_JOINTS)
            if fault == "comm_loss":  # the cut-off motor stops itself: its CAN TIMEOUT (0.5 s) expires
                assert emu.wait_for(lambda: emu.motor("joint2").state == MotorState.COMM_LOST, WAIT)
                assert [s for k, s in enumerate(rig.states()) if k != 1] == [MotorState.DISABLED] * 5
            else:
                assert wait_until(lambda: rig.states() == [MotorState.DISABLED] * N_JOINTS), rig.states()
        else:  # bus-off: nothing can be sent any more; the motors' own TIMEOUT stops them
            assert trip.kind == TripKind.BUS_ERROR
            assert "bus-off" in trip.message and "Likely cause" in trip.message
            assert "unpowered motors" in trip.message or "termination" in trip.message
            assert emu.wait_for(lambda: all(m.state == MotorState.COMM_LOST for m in emu.motors), WAIT)
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            assert len(errors) <= 2, [r.getMessage() for r in errors]
            assert not any("Traceback" in r.getMessage() for r in caplog.records)
    assert any("ALL MOTORS DISABLED" in r.getMessage() for r in caplog.records)
    # the bridge is still alive and reports
    status = rig.bridge.status()
    assert status.phase == "active" and status.trip is trip and len(rig.trips) == 1
    assert rig.bridge.deactivate() is not None


def test_fault_then_reactivation_after_clear(rig_factory):
    rig = rig_factory()
    rig.bridge.configure()
    rig.bridge.activate()
    rig.run_cycles(5)
    rig.emulator.inject_overtemperature("joint1", "coil")
    assert wait_until(lambda: rig.bridge.trip is not None)
    rig.bridge.deactivate()
    with pytest.raises(BridgeError, match="joint1 0xC coil over-temperature"):
        rig.bridge.activate()  # still hot: clear-error does not clear it
    rig.emulator.cool_down("joint1")
    rig.bridge.activate()  # clear-error (0xFB) then enable
    assert rig.bridge.trip is None and rig.states() == [MotorState.ENABLED] * N_JOINTS
    assert any(is_special(f, Special.CLEAR_ERROR) and f.arbitration_id == 1 for f in rig.monitor.frames)


def test_exception_in_the_loop_disables_every_motor(rig_factory):
    count = [0]

    def failing(sample) -> None:
        count[0] += 1
        if count[0] == 30:
            raise RuntimeError("publisher exploded")

    rig = rig_factory(on_sample=failing)
    rig.bridge.configure()
    rig.bridge.activate()
    assert wait_until(lambda: rig.bridge.trip is not None)
    assert rig.bridge.trip.kind == TripKind.EXCEPTION
    assert "RuntimeError: publisher exploded" in rig.bridge.trip.message
    assert wait_until(lambda: rig.states() == [MotorState.DISABLED] * N_JOINTS)
    # the monitor reads on its own thread: wait for the disable frames of the start and of the trip
    assert wait_until(lambda: sum(is_special(f, Special.DISABLE) for f in rig.monitor.frames) >= 2 * N_JOINTS)


def test_watchdog_holds_with_damping_then_disables(rig_factory):
    rig = rig_factory(command_timeout=0.05, hold_timeout=0.3)
    cfg = rig.config
    rig.bridge.configure()
    rig.bridge.activate()
    rig.run_cycles(5)
    target = rig.samples[-1].position + np.array([0.0, 0.0, 0.0, 0.1, 0.0, 0.0])
    rig.bridge.submit_command(list(cfg.names), target.tolist(), velocity=[0.3] * 6, effort=[0.2] * 6,
                              kp=[40.0] * 6, kd=[2.0] * 6)
    assert wait_until(lambda: rig.bridge.status().mode == "hold")
    mark = len(rig.monitor.frames)
    assert wait_until(lambda: sum(f.arbitration_id == 4 for f in rig.monitor.frames[mark:]) >= 2)
    held = decode_mit(next(f.data for f in rig.monitor.frames[mark:] if f.arbitration_id == 4), DM4310)
    assert held.velocity == pytest.approx(0.0, abs=60 / 4095)
    assert held.torque == pytest.approx(0.0, abs=20 / 4095)
    assert held.kp == pytest.approx(cfg.joints[3].kp, abs=0.2)
    assert held.kd == pytest.approx(cfg.joints[3].kd, abs=0.01)
    assert wait_until(lambda: rig.bridge.trip is not None)
    assert rig.bridge.trip.kind == TripKind.WATCHDOG and "no MotorCommand for" in rig.bridge.trip.message
    assert wait_until(lambda: rig.states() == [MotorState.DISABLED] * N_JOINTS)
    rig.bridge.submit_command(["joint1"], [0.0])  # a late command does not re-enable anything
    rig.run_cycles(1)
    assert rig.states() == [MotorState.DISABLED] * N_JOINTS


def test_startup_outside_the_limits_is_refused_without_enabling(rig_factory):
    # joint1 (vertical axis: gravity does not move it) range [-2.618, 3.054]; -3 + 2π is outside too
    rig = rig_factory(initial_pose=[-3.0, 1.047, 1.047, 0.0, 0.0, 0.0])
    rig.bridge.configure()
    with pytest.raises(StartupPoseError, match=r"joint1: at -[23]\.\d+ rad, outside its limits"):
        rig.bridge.activate()
    assert not any(is_special(f, Special.ENABLE) for f in rig.monitor.frames)
    assert rig.states() == [MotorState.DISABLED] * N_JOINTS


def test_replay_of_a_trajectory_file(rig_factory, tmp_path):
    t = np.arange(0, 1501) / 1000.0
    n = t.size
    pos = np.column_stack([0.3 * np.sin(2 * np.pi * t / 1.5), np.full(n, 1.047), np.full(n, 1.2)])
    vel = np.column_stack([0.3 * 2 * np.pi / 1.5 * np.cos(2 * np.pi * t / 1.5), np.zeros(n), np.zeros(n)])
    traj = TrajectoryFile(t, ("joint1", "joint2", "joint3"), ("DM4340",) * 3, pos, vel, np.zeros_like(pos),
                          np.full_like(pos, 80.0), np.full_like(pos, 6.0))
    path = write_trajectory_file(tmp_path / "excite.csv", traj)
    rig = rig_factory(replay_file=str(path), replay_ramp_time=0.3)
    rig.bridge.configure()
    rig.bridge.activate()
    with pytest.raises(BridgeError, match="being replayed"):
        rig.bridge.submit_command(["joint1"], [0.0])
    assert rig.done.wait(WAIT), rig.bridge.status()
    assert rig.bridge.trip is None
    replay = rig.bridge._replay
    samples = list(rig.samples)  # the loop goes on appending
    stamps = np.array([s.stamp for s in samples])
    q = np.array([s.position for s in samples])
    t_replay = stamps - stamps[0]
    inside = (t_replay > replay.ramp_time + 0.2) & (t_replay < replay.duration - 0.05)
    ref = np.array([replay.targets(x).position for x in t_replay[inside]])
    err = q[inside, :3] - ref[:, :3]
    fresh = np.array([s.fresh for s in samples])[inside, :3]
    assert fresh.mean() > 0.8  # late replies (a loaded machine) count as missed
    rms = np.sqrt(np.mean(np.where(fresh, err, 0.0) ** 2, axis=0))
    assert rms[0] < 0.02, rms          # joint1 (vertical axis) tracks within a loop period's lag
    assert np.all(rms[1:] < 0.1), rms  # joints 2-3 sag under gravity (PD only, no feed-forward)
    end_error = np.abs(rig.emulator.joint_positions()[:3] - pos[-1])
    assert np.all(end_error < [0.03, 0.1, 0.1]), end_error  # holds the end (2-3 sag under gravity)


def test_replay_file_of_other_joints_is_refused(rig_factory, tmp_path):
    t = np.array([0.0, 1.0])
    one = np.zeros((2, 1))
    path = write_trajectory_file(tmp_path / "wrong.csv",
                                 TrajectoryFile(t, ("elbow",), ("DM4340",), one, one, one, one, one))
    rig = rig_factory(replay_file=str(path))
    rig.bridge.configure()
    with pytest.raises(DataError, match=r"joints \['elbow'\] are not configured on the bridge"):
        rig.bridge.activate()
    assert not any(is_special(f, Special.ENABLE) for f in rig.monitor.frames)


# ------------------------------------------------------------------------------ the ROS 2 node
rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from sysid_ros.msg import MotorCommand, ParameterEstimate  # noqa: E402

from sysid_ros.hardware.bridge_config import flatten_parameters  # noqa: E402


class Listener:
    """A private rclpy context with a spinning executor, collecting joint states and diagnostics."""

    def __init__(self, domain_id: int, name: str = "bridge_test") -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.states: list[tuple[float, JointState]] = []
        self.diagnostics: list[DiagnosticArray] = []
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, "/joint_states",
                                      lambda m: self.states.append((time.monotonic(), m)), reliable)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self.commands = self.node.create_publisher(MotorCommand, "/motor_command", 10)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def add(self, node) -> None:
        self.executor.add_node(node)

    def status(self, name: str) -> DiagnosticStatus | None:
        for array in reversed(list(self.diagnostics)):
            for s in array.status:
                if s.name == name:
                    return s
        return None

    def command(self, names, position) -> None:
        self.commands.publish(MotorCommand(name=list(names), position=[float(x) for x in position]))

    def call(self, client, request, timeout: float = WAIT):
        assert client.wait_for_service(timeout_sec=timeout), f"no service {client.srv_name}"
        future = client.call_async(request)
        assert wait_until(future.done, timeout), f"{client.srv_name} did not answer"
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self._thread.join(timeout=5)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def node_parameters(config: BridgeConfig | None = None, **overrides) -> dict:
    """The YAM parameters file as flat ROS parameters, with overrides."""
    import yaml

    params = flatten_parameters(yaml.safe_load(CONFIG.read_text())["damiao_bridge"]["ros__parameters"])
    params.update(overrides)
    return params


@pytest.mark.ros
def test_node_reports_a_fault_in_diagnostics_and_recovers_through_the_lifecycle(ros_domain_id):
    """In-process lifecycle node (no autostart), emulated motors on its virtual channel, lifecycle
    transitions requested over the real ChangeState service."""
    from sysid_ros.nodes.damiao_bridge import DamiaoBridgeNode

    channel = f"node-{uuid.uuid4().hex[:8]}"
    params = node_parameters(interface="virtual", channel=channel, rate=RATE, max_missed_replies=50,
                             diagnostics_rate=20.0)
    cfg = BridgeConfig.from_parameters(params)
    # lockstep physics (one control period per command round): this process also runs the node's
    # executor, the listener's and the loop; a realtime emulator could starve on a loaded machine
    emulator = MotorEmulator(cfg.joints, channel=channel, interface="virtual", initial_pose="home",
                             clock="lockstep", lockstep_period=cfg.period).start()
    ros = Listener(ros_domain_id)
    bridge = DamiaoBridgeNode(context=ros.context,
                              parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    ros.add(bridge)
    change = ros.node.create_client(ChangeState, "/damiao_bridge/change_state")
    get_state = ros.node.create_client(GetState, "/damiao_bridge/get_state")
    try:
        assert ros.call(get_state, GetState.Request()).current_state.label == "unconfigured"
        for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
            assert ros.call(change, ChangeState.Request(transition=Transition(id=transition))).success
        assert emulator.wait_for(lambda: all(m.state == MotorState.ENABLED for m in emulator.motors), WAIT)
        assert wait_until(lambda: len(ros.states) > 20)
        emulator.inject_overtemperature("joint5", "mosfet")
        assert wait_until(lambda: (s := ros.status("damiao_bridge: control loop")) is not None
                          and s.message.startswith("ALL MOTORS DISABLED"))
        loop = ros.status("damiao_bridge: control loop")
        assert loop.level == DiagnosticStatus.ERROR
        assert "motor fault on joint5: motor 0x05 reports 0xB MOSFET over-temperature" in loop.message
        assert wait_until(lambda: ros.status("damiao_bridge: joint5").level == DiagnosticStatus.ERROR)
        joint5 = ros.status("damiao_bridge: joint5")
        values = {kv.key: kv.value for kv in joint5.values}
        assert "MOSFET over-temperature" in joint5.message and int(values["mosfet_temperature_C"]) >= 120
        assert ros.status("damiao_bridge: joint1").level == DiagnosticStatus.OK
        assert emulator.wait_for(lambda: [m.state for m in emulator.motors] == [MotorState.DISABLED] * 4
                                 + [MotorState.MOSFET_OVER_TEMP, MotorState.DISABLED], WAIT)
        # still alive: the disabled motors are polled, joint states keep coming
        count = len(ros.states)
        assert wait_until(lambda: len(ros.states) > count + 3)
        assert ros.call(get_state, GetState.Request()).current_state.label == "active"
        # recover: cool down, deactivate, activate (clear-error, enable)
        emulator.cool_down("joint5")
        for transition in (Transition.TRANSITION_DEACTIVATE, Transition.TRANSITION_ACTIVATE):
            assert ros.call(change, ChangeState.Request(transition=Transition(id=transition))).success
        assert emulator.wait_for(lambda: all(m.state == MotorState.ENABLED for m in emulator.motors), WAIT)
        assert wait_until(lambda: ros.status("damiao_bridge: control loop").level == DiagnosticStatus.OK)
        deactivate = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_DEACTIVATE))
        assert ros.call(change, deactivate).success
        assert [m.state for m in emulator.motors] == [MotorState.DISABLED] * N_JOINTS
    finally:
        ros.executor.remove_node(bridge)
        bridge.destroy_node()
        ros.close()
        emulator.stop()


@pytest.mark.ros
def test_node_refuses_a_bad_configuration_and_stays_up(ros_domain_id):
    from lifecycle_msgs.msg import State
    from rclpy.lifecycle import TransitionCallbackReturn

    from sysid_ros.nodes.damiao_bridge import DamiaoBridgeNode

    params = node_parameters(interface="virtual", channel=f"bad-{uuid.uuid4().hex[:8]}", rate=500)
    params["joints.can_ids"] = [1, 2, 3]  # six joints
    ros = Listener(ros_domain_id)
    node = DamiaoBridgeNode(context=ros.context,
                            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    ros.add(node)
    get_state = ros.node.create_client(GetState, "/damiao_bridge/get_state")
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        state = ros.call(get_state, GetState.Request()).current_state
        assert state.id == State.PRIMARY_STATE_UNCONFIGURED  # still up, can be configured again
        assert node.bridge is None and node.emulator is None
    finally:
        ros.executor.remove_node(node)
        node.destroy_node()
        ros.close()


@pytest.fixture
def bridge_process(ros_domain_id):
    procs = []

    def start(*params: str) -> subprocess.Popen:
        env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        proc = subprocess.Popen(
            [sys.executable, "-m", "sysid_ros.nodes.damiao_bridge", "--ros-args",
             "--params-file", str(CONFIG), "-p", "interface:=virtual", "-p", "emulator:=true",
             "-p", "autostart:=true",
             "-p", f"channel:=proc-{uuid.uuid4().hex[:8]}", *[a for p in params for a in ("-p", p)]],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        print(stop_process(proc)[-4000:])  # shown when a test fails


@pytest.mark.ros
def test_node_process_tracks_commands_over_dds_and_disables_on_sigint(bridge_process, ros_domain_id):
    proc = bridge_process("rate:=500", "max_missed_replies:=50", "motor_timeout:=1.0")  # an int rate
    ros = Listener(ros_domain_id)
    try:
        assert wait_until(lambda: len(ros.states) > 10, 30.0), "no joint states from the bridge process"
        first = ros.states[-1][1]
        assert list(first.name) == [f"joint{i}" for i in range(1, 7)]
        q0 = np.array(first.position)
        ramp, amplitude = 1.0, 0.3
        sent = []
        start = time.monotonic()
        while (t := time.monotonic() - start) < ramp + 1.0:  # 100 Hz stream: ramp joint1, hold the rest
            target = q0.copy()
            target[0] += amplitude * min(t / ramp, 1.0)
            ros.command(first.name, target)
            sent.append((time.monotonic(), target[0]))
            time.sleep(0.01)
        stamps = np.array([t for t, _ in ros.states])
        q1 = np.array([m.position[0] for _, m in ros.states])
        cmd = np.interp(stamps, [t for t, _ in sent], [x for _, x in sent])
        moving = (stamps > sent[0][0] + 0.2) & (stamps < sent[0][0] + ramp)
        assert moving.sum() > 50
        error = np.abs(q1[moving] - cmd[moving])  # includes the DDS round trip and loop latency
        assert np.nanmedian(error) < 0.03 and np.nanmax(error) < 0.1, error  # tracks the 0.3 rad/s ramp
        assert abs(np.nanmedian(q1[-20:]) - (q0[0] + amplitude)) < 0.01  # and settles on the target
        loop = ros.status("damiao_bridge: control loop")
        assert loop is not None and loop.level == DiagnosticStatus.OK
        values = {kv.key: kv.value for kv in loop.values}
        assert values["mode"] == "track" and float(values["rate_hz"]) > 0.0  # loop timing is reported
        assert {"period_p99_us", "jitter_us", "overruns", "missed_cycles"} <= set(values)
        assert proc.poll() is None
    finally:
        ros.close()
    log = stop_process(proc)
    assert proc.returncode == 0, log
    assert "all 6 motors disabled (deactivate), confirmed" in log
    assert "emulator motor states at stop: joint1=0x0, joint2=0x0, joint3=0x0, joint4=0x0, joint5=0x0, " \
           "joint6=0x0" in log
    assert "Traceback" not in log


@pytest.fixture
def excitation_file(tmp_path):
    """An exported excitation (Fourier period 8 s, 16 s, ramps in and out, nominal feed-forward) at 500 Hz."""
    from sysid_ros.core.excitation.fourier import FourierTrajectory, Limits
    from sysid_ros.core.excitation.plan import ExcitationPlan
    from sysid_ros.core.model.robot import RobotModel

    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    limits = Limits.of(model)
    trajectory = FourierTrajectory.random(limits, harmonics=5, period=8.0, seed=0)
    plan = ExcitationPlan.build(model, trajectory, np.array([0.0, 1.047, 1.047, 0.0, 0.0, 0.0]),
                                excitation_time=16.0, ramp_time=1.0)
    return write_trajectory_file(tmp_path / "excitation.csv", plan.sampled(500.0))


@pytest.mark.slow
@pytest.mark.ros
def test_acceptance_payload_estimate_converges_through_the_hardware_graph(bridge_process, excitation_file,
                                                                          ros_domain_id):
    """Bridge replaying an exported excitation on emulated motors carrying an unknown 0.8 kg payload,
    its joint states over DDS into the estimator node (RLS log-det, payload target, uninformative
    prior): the estimated payload converges to the emulator's truth."""
    from std_msgs.msg import Bool

    mass, com = 0.8, np.array([0.02, -0.01, 0.06])
    bridge = bridge_process("rate:=500.0", "max_missed_replies:=50", "motor_timeout:=1.0",
                            f"replay_file:={excitation_file}",
                            "replay_ramp_time:=1.0",
                            f"emulator_payload:=body=link_6,mass={mass},com={','.join(map(str, com))}")
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    estimator = subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.nodes.estimator", "--ros-args", "-p", "target:=link_6",
         "-p", "method:=rls_logdet", "-p", "prior:=uninformative", "-p", "sample_rate:=500.0",
         "-p", "publish_rate:=5.0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ros = Listener(ros_domain_id)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=rclpy.qos.DurabilityPolicy.TRANSIENT_LOCAL)
    estimates, done, truth = [], [], []
    ros.node.create_subscription(ParameterEstimate, "/estimator/estimate", estimates.append, latched)
    ros.node.create_subscription(Bool, "/damiao_bridge/replay_done", lambda m: done.append(m.data), latched)
    ros.node.create_subscription(ParameterEstimate, "/sim/true_parameters", truth.append, latched)
    try:
        assert wait_until(lambda: True in done, 120.0), f"the replay did not finish: {done}"
        count = len(estimates)
        assert wait_until(lambda: len(estimates) > count + 2, 30.0)  # estimates after the last samples
        final = estimates[-1]
        assert final.target == "link_6" and final.names[0] == "payload.m"
        assert all(e.physically_consistent for e in estimates)
        assert final.sample_count > 3000
        assert final.values[0] == pytest.approx(mass, rel=0.05)             # payload mass [kg]
        np.testing.assert_allclose(np.array(final.values[1:4]) / final.values[0], com, atol=0.015)  # CoM [m]
        names = dict(zip(truth[-1].names, truth[-1].values, strict=True))  # the emulator publishes the truth
        assert names["payload.m"] == pytest.approx(mass)
        assert np.isfinite(final.divergence_to_truth)
        assert bridge.poll() is None and estimator.poll() is None
    finally:
        ros.close()
        est_log = stop_process(estimator)
    log = stop_process(bridge)
    assert bridge.returncode == 0 and estimator.returncode == 0, est_log[-2000:]
    assert "replay of" in log and "done" in log
    assert "emulator motor states at stop: joint1=0x0" in log


ATEXIT_SCRIPT = """
import atexit, sys
from sysid_ros.hardware.bridge import Bridge
from sysid_ros.hardware.bridge_config import load_bridge_config
from sysid_ros.hardware.emulator import MotorEmulator
config = load_bridge_config(sys.argv[1], interface="virtual", channel="atexit", rate=250.0,
                            max_missed_replies=50, motor_timeout=0.0)
emulator = MotorEmulator(config.joints, channel="atexit", interface="virtual", clock="lockstep",
                         lockstep_period=config.period).start()
# registered first, so it runs after the bridge's own exit handler (atexit is last-in, first-out)
atexit.register(lambda: print("states at exit:", [int(m.state) for m in emulator.motors], flush=True))
bridge = Bridge(config, timebase="rounds")
bridge.configure()
bridge.activate()
assert emulator.wait_for(lambda: all(m.frames_received > 50 for m in emulator.motors), 10.0)
print("enabled:", [int(m.state) for m in emulator.motors], flush=True)
raise SystemExit("the program ends without a word to the bridge")
"""


def test_motors_disabled_when_the_program_exits_without_shutdown(tmp_path):
    """Interpreter exit (here an uncaught SystemExit) runs the bridge's atexit handler: every motor
    is disabled (motor timeout off, so only the bridge can have done it)."""
    script = tmp_path / "exit_without_shutdown.py"
    script.write_text(ATEXIT_SCRIPT)
    out = subprocess.run([sys.executable, str(script), str(CONFIG)], capture_output=True, text=True,
                         timeout=60)
    assert "enabled: [1, 1, 1, 1, 1, 1]" in out.stdout, out.stdout + out.stderr
    assert "states at exit: [0, 0, 0, 0, 0, 0]" in out.stdout, out.stdout + out.stderr
    assert out.returncode == 1 and "the program ends without a word to the bridge" in out.stderr


@pytest.mark.slow
@pytest.mark.ros
def test_hardware_launch_graph_converges(bridge_process, ros_domain_id):
    """The graph of launch/hardware_identify.launch.py with use_emulator:=true, as processes with
    the same parameter files and overrides: trajectory_publisher (shipped optimised excitation,
    10 s) → /motor_command → damiao_bridge (emulated motors, unknown 0.8 kg payload) →
    /joint_states → estimator (payload target). The payload estimate converges to the truth."""
    from std_msgs.msg import Bool

    mass, com = 0.8, np.array([0.02, -0.01, 0.06])
    rate = 500.0
    bridge = bridge_process(f"rate:={rate}", "max_missed_replies:=50", "motor_timeout:=1.0",
                            f"emulator_payload:=body=link_6,mass={mass},com={','.join(map(str, com))}")
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    config = ROOT / "config"
    optimised = config / "excitation" / "yam_damiao_optimized.json"
    nodes = (("trajectory_publisher", ["excitation_time:=10.0", f"coefficients_file:={optimised}"]),
             ("estimator", [f"sample_rate:={rate}", "target:=link_6", "method:=rls_logdet",
                            "prior:=uninformative", "reliable_input:=true", "publish_rate:=5.0"]))
    others = [subprocess.Popen([sys.executable, "-m", f"sysid_ros.nodes.{name}", "--ros-args",
                                "--params-file", str(config / f"{name}.yaml"),
                                *[a for p in params for a in ("-p", p)]],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for name, params in nodes]
    ros = Listener(ros_domain_id)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=rclpy.qos.DurabilityPolicy.TRANSIENT_LOCAL)
    estimates, done = [], []
    ros.node.create_subscription(ParameterEstimate, "/estimator/estimate", estimates.append, latched)
    ros.node.create_subscription(Bool, "/trajectory_publisher/done", lambda m: done.append(m.data), latched)
    try:
        assert wait_until(lambda: True in done, 150.0), f"the excitation did not finish: {done}"
        count = len(estimates)
        assert wait_until(lambda: len(estimates) > count + 2, 30.0)
        final = estimates[-1]
        assert final.values[0] == pytest.approx(mass, rel=0.05)                                 # [kg]
        np.testing.assert_allclose(np.array(final.values[1:4]) / final.values[0], com, atol=0.01)  # [m]
        assert all(e.physically_consistent for e in estimates)
        assert bridge.poll() is None and all(p.poll() is None for p in others)
    finally:
        ros.close()
        logs = [stop_process(p) for p in others]
    log = stop_process(bridge)
    assert bridge.returncode == 0 and [p.returncode for p in others] == [0, 0], logs
    assert "emulator motor states at stop: joint1=0x0" in log and "ALL MOTORS DISABLED" not in log
