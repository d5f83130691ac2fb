"""The one MuJoCo plant under the MIT law (pure: no ROS). Checked against an independent MuJoCo
loop written here, and for its sensor model, delays, watchdog and saturation."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.sim.plant import JointCommand, MitPlant, SensorModel, mit_torque

# two hinges in a vertical plane under gravity, friction loss and damping on the first
ARM = """
<mujoco>
  <option timestep="0.002" integrator="implicitfast"/>
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0" frictionloss="0.05" damping="0.1" armature="0.01"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1.2"/>
      <body name="lower" pos="0 0 -0.3">
        <joint name="elbow" type="hinge" axis="0 1 0" armature="0.005"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.025" mass="0.8"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
LIMIT = np.array([6.0, 0.4])  # [N·m]
DT = 1e-3


@pytest.fixture
def mj() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(ARM)


def reference(t: np.ndarray) -> JointCommand:
    """A smooth reference (K, 2) with feed-forward large enough to saturate the elbow at times."""
    q = np.stack([0.6 * np.sin(2.0 * t), -0.4 * np.cos(3.0 * t)], axis=1)
    dq = np.stack([1.2 * np.cos(2.0 * t), 1.2 * np.sin(3.0 * t)], axis=1)
    effort = np.stack([0.5 * np.sin(t), 4.0 * np.sin(5.0 * t)], axis=1)
    return JointCommand(q, dq, effort, np.array([40.0, 15.0]), np.array([1.5, 0.4]))


def direct_loop(mj: mujoco.MjModel, cmd: JointCommand, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The oracle: MuJoCo stepped by hand under the saturated MIT law from the true state,
    semi-implicit Euler without implicit damping, actuators off. Returns (qpos, torque) per step."""
    m = mujoco.MjModel.from_xml_string(ARM)
    m.opt.timestep = DT
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EULERDAMP | mujoco.mjtDisableBit.mjDSBL_ACTUATION
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = cmd.position[0], cmd.velocity[0]
    qs, taus = [], []
    for k in range(steps):
        tau = np.clip(cmd.kp * (cmd.position[k] - d.qpos) + cmd.kd * (cmd.velocity[k] - d.qvel)
                      + cmd.effort[k], -LIMIT, LIMIT)
        qs.append(d.qpos.copy())
        taus.append(tau)
        d.qfrc_applied[:] = tau
        mujoco.mj_step(m, d)
    return np.array(qs), np.array(taus)


def test_run_matches_an_independent_mujoco_loop(mj):
    steps = 1500
    cmd = reference(np.arange(steps) * DT)
    plant = MitPlant(mj, timestep=DT, torque_limit=LIMIT)
    plant.set_state(q=cmd.position[0], dq=cmd.velocity[0])
    run = plant.run(*cmd)
    q_ref, tau_ref = direct_loop(mj, cmd, steps)
    np.testing.assert_allclose(run.q, q_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.tau, tau_ref, rtol=0, atol=1e-12)
    assert run.saturated[:, 1].any() and not run.saturated[:, 0].any()
    np.testing.assert_array_equal(run.saturated, np.abs(tau_ref) == LIMIT)
    # samples are consistent with semi-implicit Euler: v₊ = v + h·a, q₊ = q + h·v₊
    np.testing.assert_allclose(np.diff(run.dq_true, axis=0), DT * run.ddq[:-1], atol=1e-12)
    np.testing.assert_allclose(np.diff(run.q_true, axis=0), DT * run.dq_true[1:], atol=1e-12)
    assert plant.step_count == steps and plant.time == pytest.approx(steps * DT)


def test_mujoco_options_are_set_once_on_a_copy(mj):
    plant = MitPlant(mj, timestep=DT, solver_tolerance=1e-12)
    flags = int(plant.mj.opt.disableflags)
    assert flags & int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    assert flags & int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    assert plant.mj.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    assert plant.mj.opt.timestep == DT and plant.mj.opt.tolerance == 1e-12
    # the caller's model is untouched; integrator=None keeps the model's
    assert mj.opt.disableflags == 0 and mj.opt.timestep == 0.002
    kept = MitPlant(mj, timestep=DT, integrator=None)
    assert kept.mj.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST


def test_step_and_run_are_the_same_law_and_sensor(mj):
    """step() command by command and run() on the whole reference give the same samples, noise
    included (one sensor model, one random stream)."""
    steps = 1200
    cmd = reference(np.arange(steps) * DT)
    sensor = SensorModel(position_noise=1e-3, velocity_noise=1e-2, torque_noise=0.05,
                         encoder_resolution=1e-3, seed=3)
    a = MitPlant(mj, timestep=DT, torque_limit=LIMIT, sensor=sensor)
    b = MitPlant(mj, timestep=DT, torque_limit=LIMIT, sensor=sensor)
    for p in (a, b):
        p.set_state(q=cmd.position[0], dq=cmd.velocity[0])
    run = a.run(*cmd)
    samples = [b.step(JointCommand(cmd.position[k], cmd.velocity[k], cmd.effort[k], cmd.kp, cmd.kd))
               for k in range(steps)]
    np.testing.assert_array_equal(run.q, [s.q for s in samples])
    np.testing.assert_array_equal(run.dq, [s.dq for s in samples])
    np.testing.assert_array_equal(run.tau, [s.tau for s in samples])
    np.testing.assert_array_equal(run.saturated, [s.saturated for s in samples])
    assert b.counters["saturated_steps"] == run.saturated.any(axis=1).sum() > 0


def test_sensor_quantises_positions_and_adds_white_noise(mj):
    res, sigma_v, sigma_t = 2e-3, 0.05, 0.2
    plant = MitPlant(mj, timestep=DT, sensor=SensorModel(velocity_noise=sigma_v, torque_noise=sigma_t,
                                                         encoder_resolution=res, seed=1))
    hold = JointCommand(np.zeros(2), np.zeros(2), np.zeros(2), np.array([50.0, 20.0]), np.array([2.0, 0.5]))
    samples = [plant.step(hold) for _ in range(3000)]
    q = np.array([s.q for s in samples])
    np.testing.assert_allclose(q / res, np.round(q / res), atol=1e-9)  # whole counts
    true_dq = np.array([s.dq for s in samples]) - 0.0
    assert np.std(true_dq[500:]) == pytest.approx(sigma_v, rel=0.1)  # at rest: the noise alone
    noise = np.array([s.tau - s.applied for s in samples])
    assert np.std(noise) == pytest.approx(sigma_t, rel=0.1) and abs(np.mean(noise)) < 0.02
    # measure_torque=False: no noise drawn, tau is the applied torque
    s = plant.step(hold, measure_torque=False)
    np.testing.assert_array_equal(s.tau, s.applied)


def test_delays_are_whole_steps(mj):
    plant = MitPlant(mj, timestep=DT, command_delay_steps=3, measurement_delay_steps=2)
    push = JointCommand(np.zeros(2), np.zeros(2), np.array([0.25, -0.25]), np.zeros(2), np.zeros(2))
    assert plant.step() is None and plant.step() is None  # the measurement pipeline fills
    first = plant.step()
    assert first.step == 0 and first.mode == "hold"
    plant.send(push)  # sent before step 3: acts from step 6, measured 2 steps later
    samples = [plant.step() for _ in range(8)]
    acting = [s.step for s in samples if np.array_equal(s.applied, push.effort)]
    assert acting[0] == 6 and samples[-1].step == plant.step_count - 3


def test_watchdog_goes_limp_after_a_silence_and_saturates(mj):
    plant = MitPlant(mj, timestep=DT, torque_limit=LIMIT, command_timeout_steps=20, limp_damping=100.0)
    plant.set_state(dq=np.array([1.0, -3.0]))
    plant.send(JointCommand(np.zeros(2), np.zeros(2), np.array([0.3, 0.3]), np.zeros(2), np.zeros(2)))
    modes = [plant.step().mode for _ in range(25)]
    assert modes[:21] == ["command"] * 21 and modes[-1] == "limp"
    s = plant.step()
    np.testing.assert_array_equal(s.applied, np.clip(-100.0 * s.dq, -LIMIT, LIMIT))
    assert s.saturated.all() and plant.counters["limp_steps"] == 5


def test_step_torque_applies_the_given_torque_on_named_joints(mj):
    plant = MitPlant(mj, timestep=DT, joints=["elbow"], integrator=None)
    np.testing.assert_array_equal(plant.dof_indices, [1])
    ref = mujoco.MjData(plant.mj)
    for k in range(50):
        plant.step_torque(np.array([0.1 * k]))
        ref.qfrc_applied[:] = [0.0, 0.1 * k]
        mujoco.mj_step(plant.mj, ref)
    np.testing.assert_array_equal(plant.data.qpos, ref.qpos)


def test_mit_torque_is_the_law():
    c = JointCommand(np.array([1.0]), np.array([2.0]), np.array([0.5]), np.array([10.0]), np.array([0.3]))
    assert mit_torque(c, np.array([0.9]), np.array([1.0]))[0] == pytest.approx(10 * 0.1 + 0.3 * 1.0 + 0.5)


def test_bad_input_is_refused_with_the_reason(mj):
    with pytest.raises(SysIdError, match="joint 'wrist' is no hinge/slide joint"):
        MitPlant(mj, timestep=DT, joints=["wrist"])
    with pytest.raises(SysIdError, match="integrator must be 'euler' or 'rk4', got 'rk45'"):
        MitPlant(mj, timestep=DT, integrator="rk45")
    with pytest.raises(SysIdError, match=r"expected 2 torque limits >= 0"):
        MitPlant(mj, timestep=DT, torque_limit=np.ones(3))
    plant = MitPlant(mj, timestep=DT)
    with pytest.raises(DataError, match=r"command kp: expected shape \(2,\), got \(3,\)"):
        plant.send(JointCommand(np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(3), np.zeros(2)))
    with pytest.raises(SysIdError, match="without a measurement delay"):
        MitPlant(mj, timestep=DT, measurement_delay_steps=1).run(*reference(np.arange(3) * DT))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize(("numeric", "friction"), [
    # Stribeck: Fs·exp(−|q̇|/q̇s)·sign(q̇) with Fs 0.5 N·m, q̇s 0.05 rad/s
    ('name="stribeck:r" data="0.5 0.05"', lambda dq: np.sign(dq) * 0.5 * np.exp(-abs(dq) / 0.05)),
    # sigmoid (Gaz et al. 2019): φ1·(σ(φ2(q̇ + φ3)) − σ(φ2 φ3)) with φ = 0.5 N·m, 8 s/rad, 0.03 rad/s
    ('name="sigmoid:r" data="0.5 8 0.03"', lambda dq: 0.5 * (_sigmoid(8 * (dq + 0.03)) - _sigmoid(8 * 0.03))),
])
def test_plant_applies_the_models_nonlinear_friction(numeric, friction):
    """A free rotor (Izz 0.02 kg·m², no gravity torque, no other friction) spinning at q̇ under no
    command decelerates at friction(q̇)/Izz, for both signs of q̇: the model file's numerics are
    the simulated truth."""
    from sysid_ros.core import RobotModel
    from sysid_ros.core.sim.simulation import run_mit

    rotor = f"""<mujoco><compiler angle="radian"/><option timestep="0.001"/><worldbody>
      <body name="rotor"><joint name="r" axis="0 0 1"/>
        <inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.02"/></body></worldbody>
      <custom><numeric {numeric}/></custom></mujoco>"""
    model = RobotModel.from_xml_string(rotor)
    zero = np.zeros((1, 1))
    for dq0 in (0.03, -0.2):
        run = run_mit(model.mj, zero, zero, zero, np.zeros(1), np.zeros(1), np.full(1, np.inf), dt=0.001,
                      q0=np.zeros(1), dq0=np.array([dq0]))
        assert run.ddq[0, 0] == pytest.approx(-friction(dq0) / 0.02, rel=1e-9)
