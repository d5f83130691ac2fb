"""MitPlant.run's compiled loop (core/sim/compiled_loop.py) against the plant's own Python loop:
the same states, torques and saturation bit for bit, and the same divergence error."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from test_plant import ARM, DT, LIMIT, reference

from sysid_ros.core.sim import compiled_loop
from sysid_ros.core.sim.plant import MitPlant, SensorModel, SimulationError


def _run(compiled: bool, monkeypatch, cmd, decimation: int = 1, **plant_options):
    mj = mujoco.MjModel.from_xml_string(ARM)
    plant = MitPlant(mj, timestep=DT, torque_limit=LIMIT, **plant_options)
    assert plant._compiled_run_possible() == (not plant_options)  # an ideal plant steps compiled
    if not compiled:
        monkeypatch.setattr(MitPlant, "_compiled_run_possible", lambda self: False)
    plant.set_state(q=cmd.position[0], dq=cmd.velocity[0])
    run = plant.run(*cmd, decimation=decimation)
    monkeypatch.undo()
    return plant, run


@pytest.mark.parametrize("decimation", [1, 3])
def test_compiled_run_is_the_python_loop_bit_for_bit(monkeypatch, decimation):
    mj = mujoco.MjModel.from_xml_string(ARM)
    assert compiled_loop.available(mj, mujoco.MjData(mj))
    cmd = reference(np.arange(1500) * DT)
    fast_plant, fast = _run(True, monkeypatch, cmd, decimation)
    slow_plant, slow = _run(False, monkeypatch, cmd, decimation)
    assert fast.saturated[:, 1].any()  # the elbow's limit clips the law at times
    assert len(fast.q) == len(range(0, 1500, decimation))
    for name in fast._fields:
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)
    np.testing.assert_array_equal(fast_plant.data.qpos, slow_plant.data.qpos)  # final state
    assert fast_plant.step_count == slow_plant.step_count == 1500


def test_a_noisy_sensor_runs_the_python_loop(monkeypatch):
    """The compiled loop has no sensor model: a plant with noise does not use it."""
    cmd = reference(np.arange(200) * DT)
    _, run = _run(False, monkeypatch, cmd, sensor=SensorModel(position_noise=1e-3, seed=2))
    assert np.any(run.q[:, 0] != run.q_true[:, 0])


def test_divergence_is_reported_as_by_the_python_loop(monkeypatch):
    """Gains far too stiff for the step: MuJoCo flags the state and resets it; the compiled run
    restores its start and the Python loop raises with the step and joint."""
    cmd = reference(np.arange(400) * DT)
    cmd = cmd._replace(kp=np.full(2, 1e9), kd=np.full(2, 1e7))
    errors = []
    for compiled in (True, False):
        mj = mujoco.MjModel.from_xml_string(ARM)
        plant = MitPlant(mj, timestep=DT)
        if not compiled:
            monkeypatch.setattr(MitPlant, "_compiled_run_possible", lambda self: False)
        plant.set_state(q=cmd.position[0] + 0.5, dq=cmd.velocity[0])
        with pytest.raises(SimulationError, match=r"^the physics diverged at step \d+") as info:
            plant.run(*cmd)
        monkeypatch.undo()
        errors.append(str(info.value))
    assert errors[0] == errors[1]
