"""The sim loop's core: the step-wise MIT simulator, excitation plans, condition-number design,
trajectory files and streamed bag recordings (no ROS)."""

from __future__ import annotations

import numpy as np
import pytest
from support.cli import sysid
from support.robots import DEFAULT_ROBOT, ROOT

from sysid_ros.core.data.bag import BagRecording, read_bag
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.data.trajectory_file import TrajectoryFile, read_trajectory_file, write_trajectory_file
from sysid_ros.core.errors import DataError
from sysid_ros.core.excitation.design import condition_number, optimize_excitation
from sysid_ros.core.excitation.plan import ExcitationPlan, quintic
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.mit_simulator import MitSimulator, SimOptions
from sysid_ros.core.sim.synthetic import Payload, true_parameters


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return RobotModel.from_mjcf(DEFAULT_ROBOT)


# ------------------------------------------------------------------------------ MIT simulator
def test_mit_law_saturates_at_the_motor_limit_and_reports_the_applied_torque(model):
    sim = MitSimulator(model)
    names = list(sim.joint_names)
    limit = sim.torque_limit
    assert limit[0] == 28.0 and limit[5] == 10.0  # DM4340 / DM4310 mapping ranges
    effort = np.array([100.0, -100.0, 1.0, 0.5, -50.0, 0.0])
    sim.command(names, np.zeros(6), np.zeros(6), effort, np.zeros(6), np.zeros(6))
    sample = sim.step()
    np.testing.assert_array_equal(sample.tau, np.clip(effort, -limit, limit))
    assert sample.mode == "command" and sim.counters["saturated_steps"] == 1


def test_a_stamped_command_takes_effect_one_period_after_its_stamp(model):
    sim = MitSimulator(model, SimOptions(rate=500.0))
    names, zero = list(sim.joint_names), np.zeros(6)
    effort = np.full(6, 0.25)
    # sent early, stamped at the state of step 3 (t = 6 ms): acts from step 4 on
    sim.command(names, zero, zero, effort, zero, zero, stamp=0.006)
    assert sim.command_horizon == 0.006
    taus = [sim.step().tau for _ in range(6)]
    assert [bool(np.allclose(t, effort)) for t in taus] == [False] * 4 + [True] * 2
    # late (stamp long past): takes effect at the next step; an empty command changes nothing
    sim.command(names, zero, zero, 2 * effort, zero, zero, stamp=0.0)
    sim.command([], [], [], [], stamp=0.004)
    np.testing.assert_allclose(sim.step().tau, 2 * effort)
    assert sim.command_horizon == 0.006
    with pytest.raises(DataError, match="stamp: non-finite"):
        sim.command(names, zero, zero, zero, stamp=float("nan"))


def test_pd_law_uses_the_measured_state(model):
    sim = MitSimulator(model)
    names = list(sim.joint_names)
    q0 = sim.step().q
    kp, kd = np.full(6, 2.0), np.full(6, 0.1)
    target = q0 + 0.1
    sim.command(names, target, np.zeros(6), np.zeros(6), kp, kd)
    s = sim.step()
    np.testing.assert_allclose(s.tau, kp * (target - s.q) + kd * (0.0 - s.dq), rtol=1e-12)


def test_bad_commands_are_refused_whole_with_a_clear_reason(model):
    sim = MitSimulator(model)
    names = list(sim.joint_names)
    sim.step()
    with pytest.raises(DataError, match=r"unknown joint names \['elbow'\]"):
        sim.command(["elbow"], [0.0], [0.0], [0.0])
    with pytest.raises(DataError, match="effort: non-finite"):
        sim.command(names, np.zeros(6), np.zeros(6), [np.nan] + [0.0] * 5)
    with pytest.raises(DataError, match="velocity: expected 6 values"):
        sim.command(names, np.zeros(6), np.zeros(3), np.zeros(6))
    with pytest.raises(DataError, match="kp: gains must be >= 0"):
        sim.command(names, np.zeros(6), np.zeros(6), np.zeros(6), -np.ones(6), np.ones(6))
    assert sim.counters["commands"] == 0 and sim.mode == "hold"
    assert sim.step().mode == "hold"  # nothing was taken: still holding its initial pose


def test_holds_the_last_command_then_goes_limp(model):
    sim = MitSimulator(model, SimOptions(command_timeout=0.05, limp_damping=0.7))
    names = list(sim.joint_names)
    sim.command(names, np.zeros(6), np.zeros(6), np.full(6, 0.3), np.zeros(6), np.zeros(6))
    modes = [sim.step().mode for _ in range(60)]
    assert modes[:51] == ["command"] * 51 and modes[-1] == "limp"
    s = sim.step()
    np.testing.assert_allclose(s.tau, np.clip(-0.7 * s.dq, -sim.torque_limit, sim.torque_limit))


def test_command_and_measurement_delays_are_whole_steps(model):
    sim = MitSimulator(model, SimOptions(rate=1000.0, command_delay=0.003, measurement_delay=0.002))
    names = list(sim.joint_names)
    assert sim.step() is None and sim.step() is None  # measurement pipeline filling
    first = sim.step()
    assert first.t == pytest.approx(0.0)
    sim.command(names, np.zeros(6), np.zeros(6), np.full(6, 0.25), np.zeros(6), np.zeros(6))
    k0 = sim.step_count
    taus = [sim.step() for _ in range(6)]
    applied = [s for s in taus if np.allclose(s.tau, 0.25)]
    # the command acts from step k0 + 3; its measurement is published 2 steps later
    assert applied and applied[0].t == pytest.approx((k0 + 3) / 1000.0)


def test_true_parameters_include_the_payload_and_the_simulated_joint_terms(model):
    payload = Payload.parse("body=link_6,mass=0.5,com=0,0.01,0.04")
    sim = MitSimulator(model, SimOptions(payload=payload, joint_friction=False))
    names, values = sim.true_parameters()
    expected = true_parameters(model, payload)
    vals = dict(zip(names, values, strict=True))
    np.testing.assert_allclose([vals[n] for n in model.param_names if not n.endswith((".Fc", ".Fv"))],
                               [e for n, e in zip(model.param_names, expected, strict=True)
                                if not n.endswith((".Fc", ".Fv"))])
    assert vals["joint3.Fc"] == 0.0 and vals["joint3.Ia"] == pytest.approx(0.032)
    np.testing.assert_allclose([vals[f"payload.{f}"] for f in ("m", "hx", "hy", "hz")], [0.5, 0, 0.005, 0.02])


def test_floating_base_in_zero_gravity_keeps_its_momentum(model):
    options = SimOptions(floating_base=True, integrator="rk4", initial_position=np.full(6, 0.5))
    sim = MitSimulator(model, options)
    assert sim.mj.nq == model.nq + 7 and np.allclose(sim.mj.opt.gravity, 0.0)
    names = list(sim.joint_names)
    sim.command(names, np.zeros(6), np.zeros(6), np.full(6, 0.2), np.zeros(6), np.zeros(6))
    import mujoco

    total = []
    for _ in range(200):
        sim.step()
        com_vel = np.zeros(6)
        mujoco.mj_subtreeVel(sim.mj, sim.data)
        com_vel[:3] = sim.data.subtree_linvel[0]
        total.append(com_vel[:3].copy())
    np.testing.assert_allclose(total[-1], total[0], atol=1e-9)  # internal torques only


# ------------------------------------------------------------------------------ excitation plan
def test_quintic_meets_its_boundary_conditions():
    start = (np.array([0.1, -0.2]), np.array([0.0, 0.5]), np.array([0.0, -1.0]))
    end = (np.array([1.0, 0.3]), np.array([0.2, 0.0]), np.array([0.0, 0.0]))
    q, dq, ddq = quintic(np.array([0.0, 1.5]), 1.5, start, end)
    for got, want in zip((q, dq, ddq), zip(start, end, strict=True), strict=True):
        np.testing.assert_allclose(got, np.stack(want), atol=1e-12)


def test_plan_ramps_in_and_out_smoothly_and_stays_inside_every_limit(model):
    limits = Limits.of(model)
    traj = FourierTrajectory.random(limits, seed=3)
    start = np.array([0.0, 0.3, 0.4, 0.1, 0.0, 0.0])
    plan = ExcitationPlan.build(model, traj, start, excitation_time=12.0, ramp_time=1.0)
    t = np.linspace(0.0, plan.duration, round(plan.duration / 0.001) + 1)
    q, dq, ddq = plan.reference(t)
    np.testing.assert_allclose(q[0], start, atol=1e-12)
    np.testing.assert_allclose(dq[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(q[-1], start, atol=1e-9)  # rest = start
    np.testing.assert_allclose(dq[-1], 0.0, atol=1e-9)
    # continuity at the phase boundaries: no jumps larger than one step's worth of motion
    assert np.abs(np.diff(q, axis=0)).max() <= limits.velocity.max() * 0.001 * 1.01
    assert np.abs(np.diff(dq, axis=0)).max() <= limits.acceleration.max() * 0.001 * 1.5
    assert np.all(np.abs(dq) <= limits.velocity + 1e-9) and np.all(np.abs(ddq) <= limits.acceleration + 1e-9)
    assert np.all(q >= limits.lower - 1e-9) and np.all(q <= limits.upper + 1e-9)
    cmd = plan.command(t)
    assert plan.clamps.total == 0, plan.clamps.summary()
    assert np.all(np.abs(cmd[2]) <= limits.torque)
    assert np.all(cmd[3] <= 500.0) and np.all(cmd[4] <= 5.0)  # MIT gain ranges


def test_unreachable_requests_are_clamped_and_reported(model):
    limits = Limits.of(model)
    start = limits.upper + 0.3  # measured beyond the joint range (e.g. a wrong offset)
    plan = ExcitationPlan.build(model, FourierTrajectory.random(limits, seed=1), start, excitation_time=2.0)
    q, *_ = plan.command(np.linspace(0.0, 0.2, 50))
    assert np.all(q <= limits.upper + 1e-12)
    assert plan.clamps.counts["position"].sum() > 0
    assert "clamped: position joint1" in plan.clamps.summary()


@pytest.mark.slow
def test_optimised_coefficients_have_a_lower_condition_number(model):
    limits = Limits.of(model)
    design = optimize_excitation(model, limits, seed=2, max_iterations=3, n_samples=60)
    assert design.condition_number < 0.9 * design.initial_condition_number
    _, dv, da = design.trajectory.peaks()
    assert np.all(dv <= limits.velocity + 1e-9) and np.all(da <= limits.acceleration + 1e-9)
    assert condition_number(model, design.trajectory) == pytest.approx(design.condition_number)


# ------------------------------------------------------------------------------ trajectory files
def test_trajectory_file_round_trip_and_sampling(tmp_path, model):
    limits = Limits.of(model)
    plan = ExcitationPlan.build(model, FourierTrajectory.random(limits, seed=4), limits.lower + 0.5,
                                excitation_time=3.0)
    sampled = plan.sampled(500.0)
    path = write_trajectory_file(tmp_path / "exc.csv", sampled)
    assert [p.name for p in tmp_path.iterdir()] == ["exc.csv"]  # no temporary left behind
    back = read_trajectory_file(path)
    assert back.joints == model.dof_joint_names and back.motors[0] == "DM4340" and back.motors[5] == "DM4310"
    np.testing.assert_allclose(back.position, sampled.position, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(back.time, sampled.time, atol=5e-7)
    mid = 0.5 * (back.time[10] + back.time[11])
    np.testing.assert_allclose(back.sample(mid)[0], 0.5 * (back.position[10] + back.position[11]))
    np.testing.assert_allclose(back.sample(1e9)[0], back.position[-1])


def _nan_row(line: str) -> str:
    time, _, *rest = line.split(",")
    return ",".join([time, "nan", *rest])


@pytest.mark.parametrize("edit, message", [
    (lambda lines: ["# something else", *lines[1:]], "expected first line"),
    (lambda lines: [*lines[:3], lines[3].replace("joint1.kp", "joint1.K"), *lines[4:]], "expected columns"),
    (lambda lines: [*lines[:5], _nan_row(lines[5]), *lines[6:]], "non-finite"),
    (lambda lines: [*lines[:5], lines[6], lines[5], *lines[7:]], "strictly increasing"),
])
def test_bad_trajectory_files_say_what_is_wrong(tmp_path, edit, message):
    t = np.arange(4) * 0.01
    z = np.zeros((4, 2))
    good = TrajectoryFile(t, ("joint1", "joint2"), ("DM4340", "DM4340"), z, z, z, z + 5, z + 0.5)
    lines = write_trajectory_file(tmp_path / "x.csv", good).read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(edit(lines)) + "\n")
    with pytest.raises(DataError, match=message):
        read_trajectory_file(bad)


@pytest.mark.slow
def test_cli_exports_a_replayable_trajectory(tmp_path):
    out = tmp_path / "excitation.csv"
    coeffs = tmp_path / "coefficients.json"
    proc = sysid("trajectory", DEFAULT_ROBOT, "--export", out, "--duration", "4", "--rate", "200",
                 "--save-coefficients", coeffs, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "no clamping" in proc.stdout
    traj = read_trajectory_file(out)
    assert traj.duration == pytest.approx(8.0, abs=0.01)  # 2 s ramps + 4 s excitation
    assert np.all(np.abs(traj.effort[:, :3]) <= 28.0) and np.all(np.abs(traj.effort[:, 3:]) <= 10.0)
    bad = sysid("trajectory", tmp_path / "missing.xml", "--export", tmp_path / "y.csv", cwd=ROOT)
    assert bad.returncode == 1 and "missing.xml" in bad.stderr and not (tmp_path / "y.csv").exists()


# ------------------------------------------------------------------------------ bag recordings
def test_bag_recording_is_atomic(tmp_path, model):
    from sysid_ros.core.data.bag import joint_state_message, typestore

    store = typestore()
    path = tmp_path / "run"
    with BagRecording(path) as rec:
        rec.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        for k in range(20):
            msg = joint_state_message(k * 2_000_000, model.dof_joint_names, np.zeros(6), np.zeros(6),
                                      np.ones(6))
            rec.write("/joint_states", k * 2_000_000, store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
        assert not path.exists()  # still under its temporary name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert len(read_bag(path)) == 20
    with pytest.raises(DataError, match="exists"):
        BagRecording(path)
    aborted = BagRecording(tmp_path / "aborted")
    aborted.add_topic("/joint_states", "sensor_msgs/msg/JointState")
    aborted.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    with pytest.raises(DataError, match="unknown to the bag type store"):
        BagRecording(tmp_path / "other").add_topic("/x", "nonexistent_msgs/msg/Thing")


def test_commands_a_robot_would_refuse_are_skipped_when_reading_a_bag(tmp_path, model, caplog):
    from sysid_ros.core.data.bag import TopicData, joint_state_message, motor_command_message, write_bag

    names = model.dof_joint_names
    z = np.zeros(6)
    states = [(k * 2_000_000, joint_state_message(k * 2_000_000, names, z, z, z)) for k in range(1, 50)]
    commands = [(k * 2_000_000, motor_command_message(k * 2_000_000, names, z + k, z, z, z + 5, z + 0.5))
                for k in range(1, 50)]
    commands[10] = (commands[10][0], motor_command_message(commands[10][0], ["elbow"], [0.0], [0.0], [0.0],
                                                           [1.0], [0.1]))
    commands[20] = (commands[20][0], motor_command_message(commands[20][0], names, z + np.nan, z, z, z, z))
    bag = write_bag(tmp_path / "b", [TopicData("/joint_states", "sensor_msgs/msg/JointState", states),
                                     TopicData("/motor_command", "sysid_ros/msg/MotorCommand", commands)])
    data = read_bag(bag)
    assert len(data.command.t) == 47
    assert "1 not naming joints" in caplog.text and "1 non-finite targets" in caplog.text


def test_joint_states_logged_out_of_order_are_read_in_stamp_order(tmp_path, model):
    from sysid_ros.core.data.bag import TopicData, joint_state_message, write_bag

    names = model.dof_joint_names
    stamps = [(k + 1) * 2_000_000 for k in range(30)]
    stamps[0], stamps[1] = stamps[1], stamps[0]  # the live sample arrived before the repaired one
    states = [(1_000 + i, joint_state_message(ns, names, np.full(6, ns * 1e-9), np.zeros(6), np.zeros(6)))
              for i, ns in enumerate(stamps)]  # logged in arrival order
    data = read_bag(write_bag(tmp_path / "b", [TopicData("/joint_states", "sensor_msgs/msg/JointState",
                                                         states)]))
    np.testing.assert_allclose(data.t, np.arange(30) * 0.002, atol=1e-12)
    np.testing.assert_allclose(data.q[:, 0], (np.arange(30) + 1) * 0.002)
