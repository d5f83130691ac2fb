"""The Damiao motor emulator answers real frame sequences on python-can's virtual bus like the
firmware: registers, enable/disable, the MIT law moving MuJoCo's shafts, TIMEOUT, faults; and the
``damiao_emulator`` node in process (truth, true joint states, fault commands)."""

from __future__ import annotations

import copy
import itertools
import os

import can
import mujoco
import numpy as np
import pytest
from support.damiao_rig import CONFIG
from support.ros import spin_in_background

from sysid_ros.core.sim.synthetic import Payload
from sysid_ros.hardware.codec import (
    REGISTER_REQUEST_ID,
    MitCommand,
    MitLimits,
    MotorState,
    Special,
    decode_feedback,
    decode_mit,
    encode_mit,
    special_frame,
)
from sysid_ros.hardware.codec_registers import (
    Register,
    encode_pos_vel,
    parse_register_reply,
    read_register_frame,
    refresh_frame,
    save_frame,
    write_register_frame,
)
from sysid_ros.hardware.emulator import BUS_OFF_ERROR_ID, EmulatorError, EmulatorJoint, MotorEmulator

MODELS = ("DM4340", "DM4340", "DM4340", "DM4310", "DM4310", "DM4310")
JOINTS = [EmulatorJoint(f"joint{i + 1}", m, i + 1, i + 0x11) for i, m in enumerate(MODELS)]
_channels = itertools.count()


def channel() -> str:
    return f"emu-test-{os.getpid()}-{next(_channels)}"


class Host:
    """The host side of the bus: send a frame, wait (bounded) for the reply."""

    def __init__(self, name: str) -> None:
        self.bus = can.Bus(interface="virtual", channel=name)

    def send(self, arbitration_id: int, data: bytes) -> None:
        self.bus.send(can.Message(arbitration_id=arbitration_id, data=data, is_extended_id=False))

    def ask(self, arbitration_id: int, data: bytes, timeout: float = 2.0) -> can.Message:
        self.send(arbitration_id, data)
        reply = self.bus.recv(timeout)
        assert reply is not None, f"no reply to 0x{arbitration_id:03X} {data.hex(' ')} within {timeout} s"
        return reply

    def silent(self, arbitration_id: int, data: bytes, sentinel_id: int = 6) -> bool:
        """Whether a frame gets no reply: the emulator handles frames in order, so if the next
        message after it is the reply to a refresh of another motor, it did not answer."""
        self.send(arbitration_id, data)
        first = self.ask(REGISTER_REQUEST_ID, refresh_frame(sentinel_id))
        reply = first
        while reply.arbitration_id != sentinel_id + 0x10:  # drain up to the sentinel's reply
            reply = self.bus.recv(2.0)
            assert reply is not None, "the sentinel motor did not answer"
        return first is reply

    def feedback(self, can_id: int, data: bytes, model: str) -> tuple[can.Message, object]:
        reply = self.ask(can_id, data)
        return reply, decode_feedback(reply.data, MitLimits.for_model(model))


@pytest.fixture
def rig(request):
    """(emulator, host) on a fresh virtual channel; ``request.param`` = emulator options."""
    options = dict(getattr(request, "param", {}))
    name = channel()
    emu = MotorEmulator(options.pop("joints", JOINTS), channel=name, **options)
    host = Host(name)
    emu.start()
    yield emu, host
    emu.stop()
    host.bus.shutdown()
    assert emu.error is None


def read_back(host: Host, can_id: int, rid: Register) -> float:
    return parse_register_reply(host.ask(REGISTER_REQUEST_ID, read_register_frame(can_id, rid)).data).value


def test_register_reads_return_the_model_limits(rig):
    _, host = rig
    for joint in JOINTS:
        limits = MitLimits.for_model(joint.motor)
        for rid, expected in ((Register.PMAX, limits.pmax), (Register.VMAX, limits.vmax),
                              (Register.TMAX, limits.tmax)):
            reply = host.ask(REGISTER_REQUEST_ID, read_register_frame(joint.can_id, rid))
            assert reply.arbitration_id == joint.master_id and not reply.is_extended_id and reply.dlc == 8
            parsed = parse_register_reply(reply.data, can_id=joint.can_id)
            assert (parsed.op, parsed.rid) == ("read", rid)
            assert parsed.value == pytest.approx(expected, rel=1e-7)  # float32
    reply = host.ask(REGISTER_REQUEST_ID, read_register_frame(3, Register.MST_ID))
    assert parse_register_reply(reply.data).value == 0x13


def test_ctrl_mode_write_echoes_and_reads_back(rig):
    emu, host = rig
    request = write_register_frame(2, Register.CTRL_MODE, 2)
    echo = host.ask(REGISTER_REQUEST_ID, request)
    assert echo.arbitration_id == 0x12 and bytes(echo.data) == request
    assert read_back(host, 2, Register.CTRL_MODE) == 2
    # an invalid mode is echoed but not stored: reading back tells
    bad = write_register_frame(2, Register.CTRL_MODE, 7)
    assert bytes(host.ask(REGISTER_REQUEST_ID, bad).data) == bad
    assert read_back(host, 2, Register.CTRL_MODE) == 2
    # TIMEOUT is a uint32 register
    host.ask(REGISTER_REQUEST_ID, write_register_frame(2, Register.TIMEOUT, 4000))
    assert emu.motor("joint2").register(Register.TIMEOUT) == 4000
    # unknown RIDs and read-only registers get no answer
    assert host.silent(REGISTER_REQUEST_ID, bytes.fromhex("02 00 33 63 00 00 00 00"))
    assert host.silent(REGISTER_REQUEST_ID, bytes.fromhex("02 00 55 51 00 00 00 00"))  # write XOUT


def test_enable_disable_and_one_reply_per_frame(rig):
    emu, host = rig
    _, fb = host.feedback(4, encode_mit(MitCommand(0, 0, 0, 0, 0), MitLimits.for_model("DM4310")), "DM4310")
    assert fb.state is MotorState.DISABLED and fb.motor_id == 4
    reply, fb = host.feedback(4, special_frame(Special.ENABLE), "DM4310")
    assert reply.arbitration_id == 0x14 and fb.state is MotorState.ENABLED
    assert emu.motor(4).enabled
    limits = MitLimits.for_model("DM4310")
    for _ in range(20):  # every command gets exactly one feedback frame, in order
        _, fb = host.feedback(4, encode_mit(MitCommand(0, 0, 0, 0, 0.5), limits), "DM4310")
        assert fb.state is MotorState.ENABLED
    assert fb.torque == pytest.approx(0.5, abs=limits.tmax / 4095)
    assert host.bus.recv(0) is None  # nothing extra queued: no streaming
    motor = emu.motor(4)
    assert (motor.frames_received, motor.replies_sent) == (22, 22)
    _, fb = host.feedback(4, special_frame(Special.DISABLE), "DM4310")
    assert fb.state is MotorState.DISABLED and fb.torque == pytest.approx(0.0, abs=limits.tmax / 4095)
    assert motor.torque(0.0, 0.0) == 0.0
    # a command while disabled is answered but not acted on
    _, fb = host.feedback(4, encode_mit(MitCommand(0, 0, 0, 0, 5.0), limits), "DM4310")
    assert fb.state is MotorState.DISABLED and motor.command is None


def _direct_simulation(emu: MotorEmulator, qpos0, qvel0, dof: int, torques: list[float]) -> np.ndarray:
    """An independent MuJoCo run of the same model: ``torques[k]`` [N·m] on ``dof`` at step k."""
    mj = copy.deepcopy(emu.mj)
    data = mujoco.MjData(mj)
    data.qpos[:], data.qvel[:] = qpos0, qvel0
    for tau in torques:
        data.qfrc_applied[:] = 0.0
        data.qfrc_applied[dof] = tau
        mujoco.mj_step(mj, data)
    return data.qpos.copy()


@pytest.mark.parametrize("direction", [1, -1])
def test_mit_torque_moves_the_shaft_in_lockstep(direction):
    """kp = kd = 0, τff = +2 N·m on joint1 (motor space): the shaft turns in the motor's positive
    direction, exactly as MuJoCo with ±2·G N·m applied (direction d, gear G = 2)."""
    joints = [EmulatorJoint("joint1", "DM4340", 1, 0x11, direction=direction, position_offset=0.1,
                            gear_ratio=2.0), *JOINTS[1:]]
    name = channel()
    emu = MotorEmulator(joints, channel=name, clock="lockstep", initial_pose="home")
    host = Host(name)
    limits = MitLimits.for_model("DM4340")
    try:
        qpos0, qvel0 = emu.data.qpos.copy(), emu.data.qvel.copy()
        emu.start()
        _, fb0 = host.feedback(1, special_frame(Special.ENABLE), "DM4340")
        assert fb0.position == pytest.approx(direction * 2.0 * (0.0 - 0.1), abs=limits.pmax / 65535)
        frames = 200
        for _ in range(frames):
            _, fb = host.feedback(1, encode_mit(MitCommand(0, 0, 0, 0, 2.0), limits), "DM4340")
        # a round completes at every frame after the enable: 200 steps of 1 ms, the first before
        # any command was applied (zero torque), the others under τ = 2 N·m
        assert emu.sim_time == pytest.approx(0.200, abs=1e-12)
        moved = fb.position - fb0.position
        assert moved > 0.05  # the motor turned the way it was told
        joint1 = mujoco.mj_name2id(emu.mj, mujoco.mjtObj.mjOBJ_JOINT, "joint1")
        dof, qadr = int(emu.mj.jnt_dofadr[joint1]), int(emu.mj.jnt_qposadr[joint1])
        applied = decode_mit(encode_mit(MitCommand(0, 0, 0, 0, 2.0), limits), limits).torque  # 2.0034 N·m
        expected = _direct_simulation(emu, qpos0, qvel0, dof, [0.0] + [direction * 2.0 * applied] * 199)
        q = emu.joint_positions()
        np.testing.assert_allclose(q[0], expected[qadr], atol=1e-12)
        assert np.sign(q[0] - qpos0[qadr]) == direction
        # the last feedback shows the state after the last step, quantised to half a count
        p_motor = direction * 2.0 * (q[0] - 0.1)
        assert fb.position == pytest.approx(p_motor, abs=limits.pmax / 65535)
        assert fb.torque == pytest.approx(2.0, abs=limits.tmax / 4095)
    finally:
        emu.stop()
        host.bus.shutdown()


def test_position_hold_in_realtime():
    """MIT kp/kd hold the arm at 'home' against gravity in real-time mode; disabled, it falls."""
    name = channel()
    emu = MotorEmulator(JOINTS, channel=name, initial_pose="home")
    host = Host(name)
    try:
        emu.start()
        home = emu.joint_positions()
        for j in JOINTS:
            host.ask(j.can_id, special_frame(Special.ENABLE))
        start = emu.sim_time
        while emu.sim_time < start + 0.3:  # command every motor until 0.3 s of physics passed
            for j in JOINTS:
                limits = MitLimits.for_model(j.motor)
                hold = MitCommand(float(home[j.can_id - 1]), 0.0, 200.0, 5.0, 0.0)
                host.ask(j.can_id, encode_mit(hold, limits))
        held = emu.joint_positions()
        np.testing.assert_allclose(held, home, atol=0.05)
        for j in JOINTS:
            host.ask(j.can_id, special_frame(Special.DISABLE))
        assert emu.wait_for(lambda: np.abs(emu.joint_positions() - home).max() > 0.1, timeout=5.0)
    finally:
        emu.stop()
        host.bus.shutdown()


@pytest.mark.parametrize("rig", [{"timeout_registers": 400}], indirect=True)  # 400 × 50 µs = 20 ms
def test_can_timeout_latches_comm_lost(rig):
    emu, host = rig
    limits = MitLimits.for_model("DM4310")
    host.ask(5, special_frame(Special.ENABLE))
    host.ask(5, encode_mit(MitCommand(0, 0, 0, 0, 1.0), limits))
    assert emu.wait_for(lambda: emu.motor(5).state is MotorState.COMM_LOST, timeout=5.0)
    _, fb = host.feedback(5, encode_mit(MitCommand(0, 0, 0, 0, 1.0), limits), "DM4310")
    assert fb.state is MotorState.COMM_LOST and fb.torque == pytest.approx(0.0, abs=limits.tmax / 4095)
    _, fb = host.feedback(5, special_frame(Special.ENABLE), "DM4310")
    assert fb.state is MotorState.COMM_LOST  # a latched fault ignores enable
    _, fb = host.feedback(5, special_frame(Special.CLEAR_ERROR), "DM4310")
    assert fb.state is MotorState.DISABLED
    _, fb = host.feedback(5, special_frame(Special.ENABLE), "DM4310")
    assert fb.state is MotorState.ENABLED


@pytest.mark.parametrize("rig", [{"timeout_registers": 400}], indirect=True)  # 20 ms
def test_a_starved_emulator_judges_the_timeout_by_bus_time(rig):
    """Frames sent in time are in time even when the emulator thread gets to them late: here the
    emulator is held off for 60 ms (three TIMEOUTs) after a frame sent 0 ms after the last one."""
    import time

    emu, host = rig
    limits = MitLimits.for_model("DM4310")
    host.ask(5, special_frame(Special.ENABLE))

    def starve() -> bool:  # wait_for holds the emulator's lock while it asks: its thread waits
        host.send(5, encode_mit(MitCommand(0, 0, 0, 0, 0.1), limits))
        held = time.monotonic() + 0.060
        while time.monotonic() < held:
            pass
        return True

    assert emu.wait_for(starve, timeout=1.0)
    reply = host.bus.recv(2.0)
    assert reply is not None
    assert decode_feedback(reply.data, limits).state is MotorState.ENABLED
    # without frames, the watchdog does fire
    assert emu.wait_for(lambda: emu.motor(5).state is MotorState.COMM_LOST, timeout=5.0)


@pytest.mark.parametrize("kind,state", [("mosfet", MotorState.MOSFET_OVER_TEMP),
                                        ("coil", MotorState.COIL_OVER_TEMP)])
def test_over_temperature(rig, kind, state):
    emu, host = rig
    host.ask(3, special_frame(Special.ENABLE))
    emu.inject_overtemperature("joint3", kind)
    _, fb = host.feedback(3, encode_mit(MitCommand(0, 0, 0, 0, 5.0), MitLimits.for_model("DM4340")), "DM4340")
    assert fb.state is state and fb.state.is_fault
    hot = fb.t_mos if kind == "mosfet" else fb.t_rotor
    assert hot >= 120 and emu.motor(3).torque(0.0, 0.0) == 0.0
    _, fb = host.feedback(3, special_frame(Special.CLEAR_ERROR), "DM4340")
    assert fb.state is state  # still hot: the fault stays
    emu.cool_down(3)
    _, fb = host.feedback(3, special_frame(Special.CLEAR_ERROR), "DM4340")
    assert fb.state is MotorState.DISABLED and (fb.t_mos, fb.t_rotor) == (25, 25)


def test_injected_state_codes(rig):
    emu, host = rig
    for code in (MotorState.OVER_VOLTAGE, MotorState.UNDER_VOLTAGE, MotorState.OVER_CURRENT,
                 MotorState.OVERLOAD):
        emu.inject_state(2, code)
        _, fb = host.feedback(REGISTER_REQUEST_ID, refresh_frame(2), "DM4340")
        assert fb.state is code
    with pytest.raises(EmulatorError, match="is not a fault code"):
        emu.inject_state(2, MotorState.ENABLED)
    with pytest.raises(EmulatorError, match="no emulated motor 'joint9'"):
        emu.inject_state("joint9", MotorState.OVERLOAD)


def test_comm_loss_silences_the_motor(rig):
    emu, host = rig
    emu.inject_comm_loss("joint1")
    assert host.silent(1, special_frame(Special.ENABLE))
    assert host.silent(REGISTER_REQUEST_ID, read_register_frame(1, Register.PMAX))
    assert emu.motor(1).frames_received == 0 and not emu.motor(1).enabled
    emu.restore_comm("joint1")
    assert host.ask(1, special_frame(Special.ENABLE)).arbitration_id == 0x11


def test_dropped_replies(rig):
    emu, host = rig
    emu.drop_replies(2, 3)
    silent = [host.silent(REGISTER_REQUEST_ID, refresh_frame(2)) for _ in range(5)]
    assert silent == [True, True, True, False, False]
    assert emu.motor(2).replies_dropped == 3 and emu.motor(2).frames_received == 5
    emu.drop_fraction(2, 0.5, seed=1)
    answered = sum(not host.silent(REGISTER_REQUEST_ID, refresh_frame(2)) for _ in range(200))
    assert 70 <= answered <= 130  # binomial(200, 0.5): ±4 sigma
    # a dropped reply does not drop the command: the motor still enables
    emu.drop_fraction(2, 0.0)
    emu.drop_replies(2, 1)
    assert host.silent(2, special_frame(Special.ENABLE))
    assert emu.motor(2).enabled


def test_bus_off(rig):
    emu, host = rig
    guarded = emu.host_bus(host.bus)
    emu.inject_bus_off()
    error = host.bus.recv(2.0)
    assert error is not None and error.is_error_frame and error.arbitration_id == BUS_OFF_ERROR_ID
    with pytest.raises(can.CanOperationError, match="No buffer space") as info:
        guarded.send(can.Message(arbitration_id=1, data=special_frame(Special.ENABLE), is_extended_id=False))
    assert info.value.error_code == 105
    host.send(1, special_frame(Special.ENABLE))  # on the raw bus: nobody listens
    assert host.bus.recv(0.05) is None and emu.motor(1).frames_received == 0
    emu.clear_bus_off()
    guarded.send(can.Message(arbitration_id=1, data=special_frame(Special.ENABLE), is_extended_id=False))
    reply = guarded.recv(2.0)
    assert reply is not None and reply.arbitration_id == 0x11


def test_wrong_mode_is_misread_on_v13_and_ignored_on_legacy():
    for firmware in ("v13", "legacy"):
        name = channel()
        emu = MotorEmulator(JOINTS, channel=name, firmware=firmware, clock="lockstep")
        host = Host(name)
        try:
            emu.start()
            host.ask(REGISTER_REQUEST_ID, write_register_frame(1, Register.CTRL_MODE, 2))  # pos-vel
            host.ask(0x101, special_frame(Special.ENABLE))
            mit = encode_mit(MitCommand(0, 0, 10, 1, 0), MitLimits.for_model("DM4340"))
            if firmware == "v13":  # low 8 bits match: the MIT bytes are read as two floats
                assert host.ask(0x001, mit).arbitration_id == 0x11
                assert emu.motor(1).command is None
            else:
                assert host.silent(0x001, mit)
            assert host.ask(0x101, encode_pos_vel(0.5, 1.0)).arbitration_id == 0x11
            # the pos-vel stand-in at rest 0.5 rad short of its target: speed limited to 1 rad/s,
            # velocity loop kv = TMAX/10 → 2.8 N·m (a misread target would give something else)
            assert emu.motor(1).torque(0.0, 0.0) == pytest.approx(28.0 / 10 * 1.0)
        finally:
            emu.stop()
            host.bus.shutdown()


def test_save_and_deferred_id_change(rig):
    emu, host = rig
    host.ask(REGISTER_REQUEST_ID, write_register_frame(6, Register.ESC_ID, 9))
    assert host.ask(REGISTER_REQUEST_ID, refresh_frame(6)).arbitration_id == 0x16  # still ID 6
    reply = host.ask(REGISTER_REQUEST_ID, save_frame(6))
    assert parse_register_reply(reply.data).op == "save"
    emu.motor(6).power_cycle()
    assert host.ask(REGISTER_REQUEST_ID, refresh_frame(9)).arbitration_id == 0x16
    host.ask(9, special_frame(Special.ENABLE))
    assert host.silent(REGISTER_REQUEST_ID, save_frame(9), sentinel_id=5)  # no save while enabled


def test_true_parameters_with_a_payload():
    payload = Payload.parse("body=link_6,mass=0.5,com=0,0,0.05")
    emu = MotorEmulator(JOINTS, channel=channel(), payload=payload)
    try:
        names, values = emu.true_parameters()
        assert len(names) == len(values) == emu.model.n_params + 10
        truth = dict(zip(names, values, strict=True))
        assert truth["payload.m"] == pytest.approx(0.5)
        assert truth["payload.hz"] == pytest.approx(0.025)
        nominal = dict(zip(emu.model.param_names, emu.model.nominal, strict=True))
        assert truth["link_6.m"] == pytest.approx(nominal["link_6.m"] + 0.5)
    finally:
        emu.stop()


def test_configuration_errors():
    with pytest.raises(EmulatorError, match="'jointX' is no hinge/slide joint"):
        MotorEmulator([EmulatorJoint("jointX", "DM4310", 1, 0x11)], channel=channel())
    with pytest.raises(EmulatorError, match="unknown motor 'DM1'"):
        MotorEmulator([EmulatorJoint("joint1", "DM1", 1, 0x11)], channel=channel())
    with pytest.raises(EmulatorError, match="no keyframe of that name"):
        MotorEmulator(JOINTS, channel=channel(), initial_pose="nowhere")
    with pytest.raises(EmulatorError, match="can_ids must be unique"):
        MotorEmulator([JOINTS[0], JOINTS[0]], channel=channel())


# --- the ROS node ---------------------------------------------------------------------------------


def _ros():
    rclpy = pytest.importorskip("rclpy")
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    return rclpy, SingleThreadedExecutor, latched


@pytest.mark.ros
def test_node_in_process_truth_state_and_faults(ros_domain_id):
    """The node in a private context: latched truth with the payload, true joint states, CAN
    answers on its virtual channel, and fault commands on ~/fault (a bad one is only logged)."""

    rclpy, SingleThreadedExecutor, latched = _ros()
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from sysid_ros.msg import ParameterEstimate

    from sysid_ros.hardware.bridge_config import load_parameters
    from sysid_ros.nodes.damiao_emulator import DamiaoEmulatorNode

    name = channel()
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    params = load_parameters(CONFIG, node_name="damiao_emulator")
    params.update({"interface": "virtual", "channel": name,
                   "emulator.payload": "body=link_6,mass=0.5,com=0,0,0.05"})
    node = DamiaoEmulatorNode(context=context,
                              parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    probe = rclpy.create_node("probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(probe)
    host = Host(name)
    got: dict = {}
    probe.create_subscription(ParameterEstimate, "/sim/true_parameters", lambda m: got.setdefault("truth", m),
                              latched)
    probe.create_subscription(JointState, "/damiao_emulator/joint_states",
                              lambda m: got.setdefault("state", m), qos_profile_sensor_data)
    faults = probe.create_publisher(String, "/damiao_emulator/fault", 10)
    stop_spinning = spin_in_background(executor)
    emu = node.emulator
    try:
        assert emu.wait_for(lambda: "truth" in got and "state" in got, timeout=20.0)
        truth = dict(zip(got["truth"].names, got["truth"].values, strict=True))
        assert got["truth"].method == "truth" and truth["payload.m"] == pytest.approx(0.5)
        assert list(got["state"].name) == [j.name for j in JOINTS] and len(got["state"].effort) == 6
        _, fb = host.feedback(3, special_frame(Special.ENABLE), "DM4340")
        assert fb.state is MotorState.ENABLED
        assert emu.wait_for(lambda: probe.count_subscribers("/damiao_emulator/fault") >= 1, timeout=20.0)
        faults.publish(String(data="explode joint3"))
        faults.publish(String(data="overtemp joint3 coil"))
        assert emu.wait_for(lambda: emu.motor(3).state is MotorState.COIL_OVER_TEMP, timeout=20.0)
        _, fb = host.feedback(REGISTER_REQUEST_ID, refresh_frame(3), "DM4340")
        assert fb.state is MotorState.COIL_OVER_TEMP and fb.t_rotor >= 120
        faults.publish(String(data="comm_loss 0x2"))
        assert emu.wait_for(lambda: emu.motor(2).comm_lost, timeout=20.0)
        assert host.silent(REGISTER_REQUEST_ID, refresh_frame(2))
    finally:
        stop_spinning()
        node.destroy_node()
        probe.destroy_node()
        rclpy.try_shutdown(context=context)
        host.bus.shutdown()
    assert not emu.running
