"""The bridge core against emulated motors on a python-can virtual bus, active phase, checked on
the frames themselves (a bus monitor sees every frame): tracking and clamped fields, and every
fail-safe — after the frame that shows a fault (or the cycle whose replies exceed the
missed-reply limit) the bridge's next frames are the disable frames ``FF…FD`` to every motor, no
further MIT round in between (within the same control period), and the motors end disabled;
the command watchdog holds with damping, then disables; a start outside the joint limits enables
nothing."""

from __future__ import annotations

import logging
import time

import can
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.damiao_rig import (
    DM4310,
    DM4340,
    N_JOINTS,
    WAIT,
    assert_disabled_right_after,
    is_mit,
    is_special,
    rigs,
    wait_until,
)

from sysid_ros.hardware.bridge import BridgeError
from sysid_ros.hardware.codec import REGISTER_REQUEST_ID as REGISTER_ID
from sysid_ros.hardware.codec import MotorState, Special, decode_feedback, decode_mit
from sysid_ros.hardware.motor_frames import StartupPoseError
from sysid_ros.hardware.safety import CommandError, TripKind

rig_factory = pytest.fixture(rigs, name="rig_factory")


def test_tracking_and_clamped_frames(rig_factory):
    # single commands, not a stream: no watchdog here; the hardware's wall-clock time base
    # the clamps alone: no slew limit, no ramp after enable (tested below)
    rig = rig_factory(command_timeout=30.0, clock="realtime", max_position_rate=1e6, enable_ramp_time=0.0)
    cfg = rig.config
    rig.bridge.configure()
    rig.bridge.activate()
    assert rig.states() == [MotorState.ENABLED] * N_JOINTS
    rig.run_cycles(10)
    # the feedback is the emulated shafts' state (16-bit counts); on the wall-clock time base a
    # loaded machine can make a cycle's replies late (NaN for those joints): the last full cycle
    def last_full() -> np.ndarray:
        return next(s.position for s in reversed(rig.samples) if np.all(np.isfinite(s.position))).copy()

    assert wait_until(lambda: np.all(np.isfinite(rig.samples[-1].position))
                      and np.allclose(last_full(), rig.emulator.joint_positions(), atol=0.01)), \
        (rig.samples[-1], rig.emulator.joint_positions())
    home = last_full()
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


FAULTS = ("over_temperature", "motor_reset", "comm_loss", "dropped_replies", "bus_off")


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_disables_every_motor_within_the_cycle(rig_factory, fault, caplog):
    rig = rig_factory(max_missed_replies=10, motor_timeout=0.5)
    emu = rig.emulator
    rig.bridge.configure()
    rig.bridge.activate()
    rig.run_cycles(20)
    assert rig.trips == [], f"tripped before any fault was injected: {rig.trips}"
    mark = len(rig.monitor.frames)
    with caplog.at_level(logging.INFO):
        if fault == "over_temperature":
            emu.inject_overtemperature("joint5", "mosfet")
        elif fault == "motor_reset":  # a motor that rebooted (power glitch) answers "disabled"
            emu.motor("joint3").power_cycle()
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
        elif fault == "motor_reset":
            assert trip.kind == TripKind.MOTOR_FAULT and trip.joint == "joint3"
            assert "0x0 disabled while it should be enabled (reset or power cut?)" in trip.message
            seen = next(k for k, f in enumerate(frames) if f.arbitration_id == 0x13
                        and decode_feedback(f.data, DM4340).state == 0x0)
            assert_disabled_right_after(frames, seen)
            assert wait_until(lambda: rig.states() == [MotorState.DISABLED] * N_JOINTS)
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
        else:  # bus-off: nothing can be sent; the motors' own TIMEOUT stops them
            assert trip.kind == TripKind.BUS_ERROR
            assert "bus-off" in trip.message and "Likely cause" in trip.message
            assert "unpowered motors" in trip.message or "termination" in trip.message
            assert emu.wait_for(lambda: all(m.state == MotorState.COMM_LOST for m in emu.motors), WAIT)
        messages = lambda: [r.getMessage() for r in caplog.records]  # noqa: E731
        if fault not in ("over_temperature", "motor_reset"):
            # nothing confirms the disable: never "disabled", the disable frames go on (back-off)
            assert any(m.startswith("MOTORS MAY BE ENABLED") for m in messages())
            assert not any("ALL MOTORS DISABLED" in m for m in messages())
            mark = len(rig.monitor.frames)
            if fault == "comm_loss":
                assert wait_until(lambda: sum(is_special(f, Special.DISABLE) and f.arbitration_id == 2
                                              for f in rig.monitor.frames[mark:]) >= 3)
                emu.restore_comm("joint2")
            elif fault == "dropped_replies":
                assert wait_until(lambda: sum(is_special(f, Special.DISABLE) and f.arbitration_id == 6
                                              for f in rig.monitor.frames[mark:]) >= 3)
                emu.drop_replies("joint6", 0)
            else:
                emu.clear_bus_off()
            # the motor answers again (its own timeout stopped it: 0xD): now confirmed
            assert wait_until(lambda: any(m.startswith("ALL MOTORS DISABLED (confirmed after")
                                          for m in messages())), messages()
        else:
            assert any(m.startswith("ALL MOTORS DISABLED (confirmed)") for m in messages())
        assert not any("Traceback" in m for m in messages())
    # the bridge is still alive and reports; the trip stays latched
    status = rig.bridge.status()
    assert status.phase == "active" and status.trip is trip and len(rig.trips) == 1
    assert rig.bridge.deactivate() == []
    with pytest.raises(BridgeError, match="a fault is latched"):
        rig.bridge.activate()


@pytest.mark.slow
def test_fault_then_reactivation_after_clear(rig_factory):
    rig = rig_factory()
    rig.bridge.configure()
    rig.bridge.activate()
    rig.run_cycles(5)
    rig.emulator.inject_overtemperature("joint1", "coil")
    assert wait_until(lambda: rig.bridge.trip is not None)
    rig.bridge.deactivate()
    with pytest.raises(BridgeError, match=r"a fault is latched .*joint1.*: check the robot"):
        rig.bridge.activate()  # not acknowledged: nothing is enabled
    assert rig.states()[1:] == [MotorState.DISABLED] * (N_JOINTS - 1)
    with pytest.raises(BridgeError, match="joint1 0xC coil over-temperature"):
        rig.bridge.clear_fault()  # still hot: clear-error does not clear it
    rig.emulator.cool_down("joint1")
    assert "joint1 0x0" in rig.bridge.clear_fault()  # clear-error (0xFB), states read back
    rig.bridge.activate()  # enable
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
    mark = len(rig.monitor.frames)
    rig.bridge.submit_command(["joint1"], [0.0])  # a late command does not re-enable anything
    # the tripped loop only polls (refresh frames at diagnostics_rate): no command frame, no sample
    samples = len(rig.samples)
    assert wait_until(lambda: sum(f.arbitration_id == REGISTER_ID for f in rig.monitor.frames[mark:])
                      >= N_JOINTS)
    assert not any(is_mit(f) for f in rig.monitor.frames[mark:]) and len(rig.samples) == samples
    assert rig.states() == [MotorState.DISABLED] * N_JOINTS


def test_startup_outside_the_limits_is_refused_without_enabling(rig_factory):
    # joint1 (vertical axis: gravity does not move it) range [-2.618, 3.054]; -3 + 2π is outside too
    rig = rig_factory(initial_pose=[-3.0, 1.047, 1.047, 0.0, 0.0, 0.0])
    rig.bridge.configure()
    with pytest.raises(StartupPoseError, match=r"joint1: at -[23]\.\d+ rad, outside its limits"):
        rig.bridge.activate()
    assert not any(is_special(f, Special.ENABLE) for f in rig.monitor.frames)
    assert rig.states() == [MotorState.DISABLED] * N_JOINTS


@pytest.mark.slow
@pytest.mark.parametrize("outage", [0.05, 0.2, 2.0])
def test_a_bus_outage_mid_motion_ends_with_every_motor_disabled_once_the_bus_is_back(
        rig_factory, outage, caplog):
    """The bus refuses every frame (ENOBUFS, as an unplugged adapter or a bus-off gives) for
    ``outage`` seconds while the arm moves. The motors' own timeout is long (5 s), so only the
    bridge can stop them: while the bus is down the bridge never says "disabled" (it says the
    motors may be enabled); once the bus is back the first frames it sends are the disable frames
    to every motor (no command frame ever again) and the motors end disabled, confirmed."""
    rig = rig_factory(command_timeout=30.0, motor_timeout=5.0)
    rig.bridge.configure()
    rig.bridge.activate()
    rig.run_cycles(5)
    home = next(s.position for s in reversed(rig.samples) if np.all(np.isfinite(s.position)))
    target = home + np.array([0.3, 0.0, 0.0, 0.3, 0.0, 0.0])
    rig.bridge.submit_command(list(rig.config.names), target.tolist(), kp=[20.0] * 6, kd=[2.0] * 6)
    assert wait_until(lambda: abs(rig.samples[-1].position[0] - home[0]) > 0.02)  # moving
    messages = lambda: [r.getMessage() for r in caplog.records]  # noqa: E731
    with caplog.at_level(logging.INFO):
        rig.emulator.inject_bus_off()
        assert wait_until(lambda: any(m.startswith("MOTORS MAY BE ENABLED") for m in messages()))
        assert rig.bridge.trip.kind == TripKind.BUS_ERROR
        time.sleep(outage)  # the fault's duration (not a synchronisation)
        said = messages()
        assert not any("ALL MOTORS DISABLED" in m or "motors disabled" in m for m in said), said
        assert rig.states() == [MotorState.ENABLED] * N_JOINTS  # nothing reached them
        mark = len(rig.monitor.frames)
        rig.emulator.clear_bus_off()
        assert wait_until(lambda: rig.states() == [MotorState.DISABLED] * N_JOINTS), rig.states()
        assert wait_until(lambda: any(m.startswith("ALL MOTORS DISABLED (confirmed after")
                                      for m in messages()))
    sent = [f for f in rig.monitor.snapshot()[mark:] if 1 <= f.arbitration_id <= N_JOINTS]
    assert {f.arbitration_id for f in sent[:N_JOINTS]} == set(range(1, N_JOINTS + 1))
    assert all(is_special(f, Special.DISABLE) for f in sent[:N_JOINTS]), sent[:N_JOINTS]
    assert not any(is_mit(f) for f in sent)
    assert rig.bridge.status().disabled
    assert rig.bridge.deactivate() == []
    with pytest.raises(BridgeError, match="a fault is latched"):
        rig.bridge.activate()
    assert rig.states() == [MotorState.DISABLED] * N_JOINTS


@pytest.mark.slow
def test_position_jumps_are_slew_limited_and_feed_forward_ramps_in_after_enable(rig_factory):
    """A command that jumps joint4 by 1 rad and asks for velocity and feed-forward torque at once:
    on the bus the position target moves at most ``max_position_rate × period`` per MIT round,
    and the velocity and torque targets rise from 0 over ``enable_ramp_time`` after enable."""
    # [rad/s], [s]; the command must land in the first half of the ramp: with 2 s (500 lockstep
    # rounds) the test thread may be held off for a second on a loaded machine
    rate, ramp = 2.0, 2.0
    rig = rig_factory(command_timeout=30.0, max_position_rate=rate, enable_ramp_time=ramp)
    cfg = rig.config
    rig.bridge.configure()
    mark = len(rig.monitor.frames)
    rig.bridge.activate()
    rig.run_cycles(2)
    home = rig.full_sample().position
    target = home.copy()
    target[3] += 1.0
    rig.bridge.submit_command(list(cfg.names), target.tolist(), velocity=[0.5] * 6, effort=[0.4] * 6,
                              kp=[20.0] * 6, kd=[1.0] * 6)
    step = rate / cfg.rate
    # lockstep: one MIT round per period; the ramp takes 0.5 s / step rounds to cover 1 rad
    def joint4_rounds() -> int:
        return sum(is_mit(f) and f.arbitration_id == 4 for f in rig.monitor.frames[mark:])

    assert rig.wait_running(lambda: joint4_rounds() >= 1.0 / step + ramp * cfg.rate + 10), rig.bridge.status()
    joint4 = [decode_mit(f.data, DM4310) for f in rig.monitor.snapshot()[mark:]
              if is_mit(f) and f.arbitration_id == 4]
    position = np.array([m.position for m in joint4])
    half_count_p = 25.0 / 65535
    assert np.max(np.abs(np.diff(position))) <= step + 2 * half_count_p
    assert position[-1] == pytest.approx(target[3], abs=2 * half_count_p)  # it gets there
    torque = np.array([m.torque for m in joint4])
    velocity = np.array([m.velocity for m in joint4])
    count_t, count_v = 20.0 / 4095, 60.0 / 4095  # one count of the DM4310's MIT torque, speed
    first = int(np.argmax(np.abs(torque) > count_t))  # the first round after the command
    rounds_in_ramp = int(ramp * cfg.rate)
    assert 0 < first < rounds_in_ramp // 2 and np.all(np.abs(torque[:first]) <= count_t)
    # (t - t0) / ramp_time: the k-th MIT round since enable is at control time k × period
    expected = 0.4 * np.clip(np.arange(len(torque)) / cfg.rate / ramp, 0, 1)
    assert np.allclose(torque[first:], expected[first:], atol=count_t)
    assert torque[first] < 0.4 * 0.5  # well below the command while the ramp runs
    assert velocity[rounds_in_ramp + 5] == pytest.approx(0.5, abs=count_v)


#: ids the emulated motors act on (MIT/special frames to 1..6, register requests on 0x7FF): random
#: frames there would be another controller commanding the motors, not noise to be tolerated
_MOTOR_INPUT_IDS = {*range(1, N_JOINTS + 1), REGISTER_ID}
_REPLY_IDS = {0x10 + k for k in range(1, N_JOINTS + 1)}
_noise_frame = st.one_of(
    st.tuples(st.integers(0, 0x7FF).filter(lambda i: i not in _MOTOR_INPUT_IDS | _REPLY_IDS),
              st.binary(min_size=0, max_size=8)),
    # a motor's reply id with a frame of the wrong length (not a feedback frame)
    st.tuples(st.sampled_from(sorted(_REPLY_IDS)), st.binary(min_size=0, max_size=7)))
_command = st.lists(st.floats(-20.0, 20.0), min_size=3 * N_JOINTS, max_size=3 * N_JOINTS)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=st.lists(_noise_frame, min_size=50, max_size=300), commands=st.lists(_command, min_size=3,
                                                                               max_size=6))
def test_random_frames_during_motion_never_crash_trip_or_unclamp_the_bridge(rig_factory, noise, commands):
    """Random frames from another node (unknown ids, any length and payload; malformed frames on
    the motors' reply ids) while random, partly out-of-range commands drive the arm: the loop
    keeps running, nothing trips (none of these frames is a fault by the protocol), the frames
    are counted, and every MIT frame on the bus stays inside the joint's limits."""
    # one rig per example, closed at its end: hypothesis runs the examples inside one test, and
    # rigs left running (two real-time threads each) until the test ends starve the newest one
    rig = rig_factory(command_timeout=30.0, enable_ramp_time=0.0)
    try:
        cfg = rig.config
        rig.bridge.configure()
        rig.bridge.activate()
        rig.run_cycles(3)
        mark = len(rig.monitor.frames)
        intruder = can.Bus(interface="virtual", channel=rig.emulated.channel)
        try:
            chunk = max(1, len(noise) // len(commands))
            for k, values in enumerate(commands):
                q, dq, tau = (values[j * N_JOINTS:(j + 1) * N_JOINTS] for j in range(3))
                rig.bridge.submit_command(list(cfg.names), q, velocity=dq, effort=tau)
                for arbitration_id, data in noise[k * chunk:(k + 1) * chunk]:
                    intruder.send(can.Message(arbitration_id=arbitration_id, data=data, is_extended_id=False))
                rig.run_cycles(2)
            for arbitration_id, data in noise[len(commands) * chunk:]:
                intruder.send(can.Message(arbitration_id=arbitration_id, data=data, is_extended_id=False))
            rig.run_cycles(5)
        finally:
            intruder.shutdown()
        assert rig.bridge.trip is None, rig.bridge.trip
        status = rig.bridge.status()
        assert status.phase == "active"
        seen = status.counters["unknown_frames"] + sum(m.bad_frames for m in status.motors)
        assert seen > 0
    finally:
        rig.close()
    limits = rig.bridge.limits
    models = {1: DM4340, 2: DM4340, 3: DM4340, 4: DM4310, 5: DM4310, 6: DM4310}
    for f in rig.monitor.snapshot()[mark:]:
        if not is_mit(f):
            continue
        j = f.arbitration_id - 1
        m = decode_mit(f.data, models[f.arbitration_id])
        half_p = models[f.arbitration_id].pmax / 65535 + 1e-9  # one count of 16 bits over ±PMAX
        assert limits.lower[j] - half_p <= m.position <= limits.upper[j] + half_p, (j, m)
        assert abs(m.velocity) <= limits.velocity[j] + 2 * models[f.arbitration_id].vmax / 4095, (j, m)
        assert abs(m.torque) <= limits.torque[j] + 2 * models[f.arbitration_id].tmax / 4095, (j, m)
