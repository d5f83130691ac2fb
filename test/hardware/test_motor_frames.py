"""The bridge's hot path (:class:`MotorFrames`): joint targets → MIT payloads and motor replies →
joint state, through its public API only — golden bytes, every clamping rule, the joint map,
unwrapping across ±PMAX, the start-up turn resolution, and property tests against the plain
numpy reference pipeline of ``test/oracles/damiao_reference.py``."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import damiao_reference as ref
from support.damiao_rig import CONFIG

from sysid_ros.hardware.bridge_config import load_bridge_config
from sysid_ros.hardware.codec import MitCodec, MitCommand, MitLimits, MotorState, decode_mit, resolution
from sysid_ros.hardware.motor_frames import MotorFrames, StartupPoseError
from sysid_ros.hardware.safety import JointTargets

YAM = load_bridge_config(CONFIG).joints
DM4340, DM4310 = MitLimits(12.5, 10.0, 28.0), MitLimits(12.5, 30.0, 10.0)
LIMITS = [DM4340] * 3 + [DM4310] * 3
HALF_P = resolution(-12.5, 12.5, 16) / 2  # half a position count [rad]
HOME = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
MAPPING = [(1, 0.0, 1.0), (-1, 0.3, 2.0), (1, -0.2, 1.5), (-1, 0.0, 1.0), (1, 0.1, 3.0), (-1, -0.4, 1.0)]


def mapped_joints(**changes):
    """The YAM joints with every mapping feature: direction −1, offsets, gear ratios."""
    return tuple(replace(j, direction=d, position_offset=o, gear_ratio=g, **changes)
                 for j, (d, o, g) in zip(YAM, MAPPING, strict=True))


def feedback(frames: MotorFrames, i: int, p: float, v: float = 0.0, t: float = 0.0) -> bytes:
    """Motor ``i``'s feedback payload as the firmware sends it (motor space; ``p`` wrapped into
    ±PMAX as the 16-bit field does)."""
    lim = frames.mit_limits[i]
    wrapped = (p + lim.pmax) % (2 * lim.pmax) - lim.pmax
    return MitCodec(lim).encode_feedback(i + 1, MotorState.ENABLED, wrapped, v, t, 25, 25)


def take(frames: MotorFrames, payloads) -> None:
    """One cycle's replies (``None``: no reply from that motor)."""
    frames.update([None if d is None else frames.read(i, d) for i, d in enumerate(payloads)])


def targets(position, velocity=0.0, effort=0.0, kp=10.0, kd=0.5) -> JointTargets:
    n = len(position)
    return JointTargets(*(np.broadcast_to(np.asarray(x, dtype=float), (n,)).copy()
                          for x in (position, velocity, effort, kp, kd)))


# ------------------------------------------------------------------------------------ golden bytes
def test_golden_frames_of_the_worked_example():
    """Identity mapping: q = dq = τ = 0, kp = 10, kd = 0.5 → the rounded worked example, on
    DM4310 and on DM4340 (VMAX 10, TMAX 28 put zero on the same codes)."""
    frames = MotorFrames(YAM, LIMITS)
    out, clamped = frames.encode(targets(np.zeros(6)))
    assert out[3] == bytes.fromhex("80 00 80 00 52 19 A8 00") and not clamped
    assert out[0] == bytes.fromhex("80 00 80 00 52 19 A8 00")


def test_clamping_every_field_on_the_way_to_the_bus():
    frames = MotorFrames(YAM, LIMITS)
    lim = frames.limits
    t = targets([10.0, 0, 0, -9.0, 0, 0], velocity=[50.0, 0, 0, -99.0, 0, 0],
                effort=[100.0, 0, 0, -100.0, 0, 0], kp=[-5.0, 10, 10, 20.0, 10, 10],
                kd=[1.0, 0.5, 0.5, 0.0, 0.5, 0.5])
    out, clamped = frames.encode(t)
    assert clamped
    j1, j4 = decode_mit(out[0], DM4340), decode_mit(out[3], DM4310)
    assert j1.position == pytest.approx(lim.upper[0], abs=HALF_P)
    assert j4.position == pytest.approx(lim.lower[3], abs=HALF_P)
    assert j1.velocity == pytest.approx(lim.velocity[0], abs=resolution(-10, 10, 12))
    assert j4.velocity == pytest.approx(-lim.velocity[3], abs=resolution(-30, 30, 12))
    assert j1.torque == pytest.approx(lim.torque[0], abs=resolution(-28, 28, 12))
    assert j4.torque == pytest.approx(-lim.torque[3], abs=resolution(-10, 10, 12))
    assert j1.kp == 0.0                                                          # negative stiffness refused
    assert j4.kd == pytest.approx(lim.kd_default[3], abs=resolution(0, 5, 12))  # kp > 0 with kd = 0: default
    # the joint limits of the YAM are the motor table's: VMAX and TMAX (gear ratio 1)
    np.testing.assert_array_equal(lim.velocity, [10, 10, 10, 30, 30, 30])
    np.testing.assert_array_equal(lim.torque, [28, 28, 28, 10, 10, 10])
    # beyond the MIT ranges (kp 1000 > 500, kd 7 > 5): the codec's clamp, not counted as clamped
    out, clamped = frames.encode(targets(HOME, kp=1000.0, kd=7.0))
    assert (decode_mit(out[0], DM4340).kp, decode_mit(out[0], DM4340).kd) == (500.0, 5.0) and not clamped
    assert frames.encode(targets(HOME, velocity=0.5, effort=1.0))[1] is False


def test_joint_map_of_targets_and_of_replies():
    frames = MotorFrames(mapped_joints(), LIMITS)
    q = np.array([0.5, 1.0, 1.0, 0.1, -0.2, 0.3])
    dq = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    tau = np.array([2.0, 4.0, 1.5, 1.0, 6.0, -1.0])
    out, clamped = frames.encode(targets(q, dq, tau, kp=18.0, kd=0.9))
    assert not clamped
    cmd = decode_mit(out[1], DM4340)  # joint2: direction −1, offset 0.3, gear 2
    assert cmd.position == pytest.approx(-1 * 2.0 * (1.0 - 0.3), abs=HALF_P)      # p = d·G·(q − o)
    assert cmd.velocity == pytest.approx(-2.0 * 0.2, abs=resolution(-10, 10, 12))  # v = d·G·dq
    assert cmd.torque == pytest.approx(-4.0 / 2.0, abs=resolution(-28, 28, 12))    # t = d·τ/G
    assert cmd.kp == pytest.approx(18.0 / 4.0, abs=resolution(0, 500, 12))         # kp / G²
    assert cmd.kd == pytest.approx(0.9 / 4.0, abs=resolution(0, 5, 12))            # kd / G²
    # motors reporting what was commanded give back q, dq, τ (two quantisations each way)
    motor = [decode_mit(d, lim) for d, lim in zip(out, LIMITS, strict=True)]
    take(frames, [feedback(frames, i, m.position, m.velocity, m.torque) for i, m in enumerate(motor)])
    np.testing.assert_allclose(frames.position, q, atol=2 * HALF_P)
    np.testing.assert_allclose(frames.velocity, dq, atol=2 * 60 / 4095)
    np.testing.assert_allclose(frames.effort, tau, atol=2 * 3.0 * 56 / 4095)
    # power is the same on both sides: τ·dq == t·v
    assert float(tau @ dq) == pytest.approx(sum(m.torque * m.velocity for m in motor), rel=0.02)


def test_unwrapping_follows_a_motor_across_the_pmax_edge():
    frames = MotorFrames([replace(j, position_min=-20.0, position_max=20.0) for j in YAM], LIMITS)
    truth = np.linspace(11.0, 15.0, 41)  # joint1 crosses +PMAX = 12.5
    seen = []
    for p in truth:
        take(frames, [feedback(frames, 0, p)] + [feedback(frames, i, HOME[i]) for i in range(1, 6)])
        seen.append(frames.position[0])
    np.testing.assert_allclose(seen, truth, atol=HALF_P)
    np.testing.assert_allclose(frames.unwrap_offset, [25.0, 0, 0, 0, 0, 0])
    # a command goes back to the motor's reported frame: 14 rad unwrapped is 14 − 25 reported
    out, _ = frames.encode(targets([14.0, 1.0, 1.0, 0.0, 0.0, 0.0]))
    assert decode_mit(out[0], DM4340).position == pytest.approx(14.0 - 25.0, abs=HALF_P)
    # a missed reply keeps the position; velocity and effort are NaN for that cycle
    take(frames, [None] + [feedback(frames, i, HOME[i], 0.1, 0.2) for i in range(1, 6)])
    assert frames.position[0] == pytest.approx(15.0, abs=HALF_P)
    assert math.isnan(frames.velocity[0]) and math.isnan(frames.effort[0])
    assert frames.velocity[1] == pytest.approx(0.1, abs=20 / 4095)


def test_startup_turns_resolved_against_joint_limits():
    frames = MotorFrames(YAM, LIMITS)

    def first_readings(f: MotorFrames, positions):
        return [f.read(i, feedback(f, i, p)) for i, p in enumerate(positions)]

    turned = HOME + np.array([0, 2 * math.pi, 0, 0, 0, 0])  # joint2 read one shaft turn off
    np.testing.assert_array_equal(frames.start(first_readings(frames, turned)), [0, -1, 0, 0, 0, 0])
    np.testing.assert_allclose(frames.position, HOME, atol=HALF_P)
    outside = HOME.copy()
    outside[3] = 2.5  # joint4 range ±1.5708: neither 2.5 nor 2.5 − 2π fits
    with pytest.raises(StartupPoseError, match=r"joint4: at \+2.500 rad, outside its limits"):
        frames.start(first_readings(frames, outside))
    wide = MotorFrames([replace(j, position_min=-7.0, position_max=7.0) for j in YAM], LIMITS)
    with pytest.raises(StartupPoseError, match="joint1: ambiguous start-up position"):
        wide.start(first_readings(wide, HOME))  # ranges wider than a shaft turn


def test_reads_refuse_what_is_no_feedback_frame():
    frames = MotorFrames(YAM, LIMITS)
    assert frames.read(0, bytes(7)) is None
    assert frames.read(0, bytes.fromhex("21 80 00 80 07 FF 19 1A")) is None  # state 0x2: unknown
    assert frames.read(0, bytes.fromhex("11 80 00 80 07 FF 19 1A"))[0] == MotorState.ENABLED


# ---------------------------------------------------------------------- against the oracle
@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(-60.0, 60.0, allow_nan=False), min_size=30, max_size=30),
       wraps=st.lists(st.integers(-2, 2), min_size=6, max_size=6))
def test_frames_are_the_reference_pipeline(values, wraps):
    """After motors wound up to ±2 times across the ±PMAX edge, the frames of arbitrary targets
    are the bytes of the oracle's clamp_targets → JointMap → unwrap offset → clamp_to_motor →
    encode_mit (numpy, field by field), with the same 'clamped' verdict."""
    frames, unwrap = MotorFrames(mapped_joints(), LIMITS), ref.PositionUnwrapper([12.5] * 6)
    jm = ref.JointMap(mapped_joints())
    for s in np.linspace(0.0, 1.0, 61):  # motor i turns from 0.3 to 0.3 + 25·wraps[i] rad
        payloads = [feedback(frames, i, 0.3 + 25.0 * k * s) for i, k in enumerate(wraps)]
        take(frames, payloads)
        unwrap.update([ref.decode_feedback(d, lim).position for d, lim in zip(payloads, LIMITS, strict=True)])
    np.testing.assert_allclose(frames.unwrap_offset, 25.0 * np.array(wraps))
    v = np.array(values).reshape(5, 6)
    t = JointTargets(v[0] / 10, v[1], v[2], np.abs(v[3]) * 5 - 20, v[4] / 10)  # kp, kd partly < 0
    out, clamped = frames.encode(t)
    c, changed = ref.clamp_targets(t, frames.limits)
    fields = ref.clamp_to_motor(unwrap.to_reported(jm.position_to_motor(c.position)),
                                jm.velocity_to_motor(c.velocity), jm.torque_to_motor(c.effort),
                                jm.gain_to_motor(c.kp), jm.gain_to_motor(c.kd),
                                *(np.array([getattr(lim, f) for lim in LIMITS])
                                  for f in ("pmax", "vmax", "tmax", "kp_max", "kd_max")))
    p, vel, tau, kp, kd = (f.tolist() for f in fields)
    expected = [ref.encode_mit(MitCommand(p[i], vel[i], kp[i], kd[i], tau[i]), LIMITS[i]) for i in range(6)]
    assert out == expected
    assert clamped == any(changed.values())


@settings(max_examples=100, deadline=None)
@given(raw=st.lists(st.binary(min_size=8, max_size=8), min_size=6, max_size=6),
       fresh=st.lists(st.booleans(), min_size=6, max_size=6))
def test_joint_state_is_the_reference_mapping(raw, fresh):
    """Replies → joint state equal the oracle's unwrapper + JointMap.to_joint over arbitrary
    feedback payloads; a motor without a reply keeps its position with NaN velocity and effort."""
    frames, unwrap = MotorFrames(mapped_joints(), LIMITS), ref.PositionUnwrapper([12.5] * 6)
    jm = ref.JointMap(mapped_joints())
    for step in range(2):  # a first reading, then one that may wrap
        data = [bytes([0x11]) + r[1:] if step else bytes([0x11]) + r[::-1][1:] for r in raw]
        ok = [True] * 6 if step == 0 else fresh
        take(frames, [d if ok[i] else None for i, d in enumerate(data)])
        fbs = [ref.decode_feedback(d, lim) for d, lim in zip(data, LIMITS, strict=True)]
        p = unwrap.update(np.array([fb.position for fb in fbs]), np.array(ok))
        q, dq, tau = jm.to_joint(p, [fb.velocity for fb in fbs], [fb.torque for fb in fbs])
        np.testing.assert_array_equal(frames.position, q)
        np.testing.assert_array_equal(frames.velocity, np.where(ok, dq, np.nan))
        np.testing.assert_array_equal(frames.effort, np.where(ok, tau, np.nan))
