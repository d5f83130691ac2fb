"""Mistakes a user makes get one line saying what was expected and what came (exit code 1), never
a traceback, a silent acceptance or a runaway allocation: bad numbers on the command line,
models the tools do not support, commands a simulated motor could not obey, a diverging
simulation, and partial output folders of killed runs."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.cli import main
from sysid_ros.core.data.bag import dataset_topics, write_bag
from sysid_ros.core.errors import DataError, ModelError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.report.files import remove_stale_staging
from sysid_ros.core.sim.mit_simulator import MitSimulator
from sysid_ros.core.sim.plant import SimulationError
from sysid_ros.core.sim.synthetic import simulate_dataset

UR5E = TEST_ROBOTS / "ur5e.xml"
NO_JOINT = """<mujoco><worldbody><body name="box"><geom type="box" size=".1 .1 .1" mass="1"/>
</body></worldbody></mujoco>"""
# a hinge, then a ball joint (a spherical wrist): MuJoCo's joint types, mujoco.readthedocs.io XML reference
BALL = """<mujoco><worldbody><body name="upper"><joint name="shoulder" axis="0 0 1"/>
<geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" mass="1"/>
<body name="lower" pos=".3 0 0"><joint name="wrist" type="ball"/>
<geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" mass="1"/></body></body></worldbody></mujoco>"""
BALL_MESSAGE = "supports hinge and slide joints only: joint 'wrist' is a ball joint"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    (root / "nojoint.xml").write_text(NO_JOINT)
    (root / "ball.xml").write_text(BALL)
    ds = simulate_dataset(RobotModel.from_mjcf(UR5E), duration=3.0, seed=1)
    write_bag(root / "bag", dataset_topics(ds), truth=ds.truth)
    return root


def _run(argv, capsys) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--rate", "1e9"], "30 s at 1e+09 Hz is 3e+10 samples, more than the limit of 2e+06: lower the rate "
                        "or the duration"),
    (["--rate", "-10"], "the rate must be a finite number > 0 Hz, got -10.0"),
    (["--rate", "0"], "the rate must be a finite number > 0 Hz, got 0.0"),
    (["--duration", "nan"], "the duration must be a finite number > 0 s, got nan s"),
    (["--duration", "-1"], "the duration must be a finite number > 0 s, got -1.0 s"),
    (["--noise", "torque=-1"], "torque_noise must be a finite number >= 0, got -1.0"),
    (["--noise", "torque=abc"], "--noise takes position=RAD,velocity=RAD_S,torque=NM, got 'torque=abc'"),
    (["--noise", "speed=0.1"], "--noise takes position=RAD,velocity=RAD_S,torque=NM, got 'speed=0.1'"),
    (["--encoder-resolution", "nan"], "encoder_resolution must be a finite number >= 0, got nan"),
])
def test_simulate_refuses_bad_numbers(extra, message, tmp_path, capsys):
    code, err = _run(["simulate", UR5E, "--out", tmp_path / "bag", *extra], capsys)
    assert (code, err) == (1, f"sysid simulate: error: {message}\n")
    assert not (tmp_path / "bag").exists()


@pytest.mark.parametrize("extra, message", [
    (["--max-samples", "0", "--method", "dual_metric"], "max_samples must be >= 10, got 0"),
    (["--bandwidth", "-1"], "bandwidth must be a finite number > 0 Hz, got -1.0"),
    (["--min-segment", "nan"], "min_segment must be a finite number >= 0 s, got nan"),
    (["--regularization", "inf"], "regularization must be a finite number (<= 0: the default), got inf"),
    (["--mass-factor", "-1"], "the mass factor must be a finite number > 1 (or 0 for none), got -1.0"),
    (["--com-radius", "nan"], "the CoM radius must be a finite number >= 0 m (0 for none), got nan"),
])
def test_identify_refuses_bad_numbers(extra, message, files, tmp_path, capsys):
    code, err = _run(["identify", files / "bag", "--model", UR5E, "--out", tmp_path / "out", *extra], capsys)
    assert (code, err) == (1, f"sysid identify: error: {message}\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra, message", [
    (["--rate", "1e9"], "15 s at 1e+09 Hz is 1.5e+10 samples, more than the limit of 2e+06"),
    (["--rate", "inf"], "rate must be a finite number > 0 Hz, got inf"),
    (["--harmonics", "0"], "expected at least 1 harmonic, got 0"),
    (["--max-acceleration", "nan"], "the acceleration limits must be finite numbers > 0, got [nan, nan"),
])
def test_trajectory_refuses_bad_numbers(extra, message, tmp_path, capsys):
    code, err = _run(["trajectory", UR5E, "--export", tmp_path / "t.csv", *extra], capsys)
    assert code == 1 and err.startswith(f"sysid trajectory: error: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "t.csv").exists()


def test_a_model_without_joints_is_refused(files, capsys):
    for command in (["inspect"], ["simulate", "--out", files / "never"]):
        code, err = _run([command[0], files / "nojoint.xml", *command[1:]], capsys)
        assert (code, err) == (1, f"sysid {command[0]}: error: {files / 'nojoint.xml'} has no joints: no "
                                  "body moves, so there are no dynamics to identify (expected at least "
                                  "one hinge, slide, ball or free joint)\n")
    with pytest.raises(ModelError, match=r"^the model has no joints"):
        RobotModel.from_xml_string(NO_JOINT)


def test_ball_joints_are_named_where_they_are_not_supported(files, tmp_path, capsys):
    code, err = _run(["inspect", files / "ball.xml", "--json"], capsys)  # the regressor supports them
    assert code == 0 and err == ""
    for argv in (["simulate", files / "ball.xml", "--out", tmp_path / "b"],
                 ["identify", files / "bag", "--model", files / "ball.xml", "--out", tmp_path / "o"],
                 ["trajectory", files / "ball.xml", "--export", tmp_path / "t.csv"]):
        code, err = _run(argv, capsys)
        assert code == 1 and BALL_MESSAGE in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_the_simulator_refuses_absurd_commands_and_stays_usable():
    sim = MitSimulator(RobotModel.from_mjcf(UR5E))
    n = len(sim.joint_names)
    with pytest.raises(DataError, match=r"^kp: expected magnitudes <= 1e\+06, got \[1e\+308"):
        sim.command(sim.joint_names, np.zeros(n), np.zeros(n), np.zeros(n), np.full(n, 1e308),
                    np.full(n, 1e308))
    with pytest.raises(DataError, match=r"^effort: expected magnitudes <= 1e\+06"):
        sim.command(sim.joint_names[:1], [0.0], [0.0], [1e7])
    q0 = sim.step().q
    for _ in range(50):
        sample = sim.step()
    # nothing was taken: the robot still holds its start pose under its default gains (a PD sag
    # under gravity of a few mrad) and the simulator keeps stepping
    np.testing.assert_allclose(sample.q, q0, atol=0.02)
    assert sim.counters["commands"] == 0 and sample.mode == "hold"


def test_a_diverging_simulation_stops_instead_of_resetting():
    """Gains of 1e6 N·m/rad on a UR5e at 1 kHz make semi-implicit Euler unstable: MuJoCo flags the
    huge acceleration and resets the robot to its reference pose; the plant says so and stops."""
    sim = MitSimulator(RobotModel.from_mjcf(UR5E))
    n = len(sim.joint_names)
    sim.command(sim.joint_names, np.ones(n), np.zeros(n), np.zeros(n), np.full(n, 1e6), np.full(n, 1e3))
    with pytest.raises(SimulationError, match=r"^the physics diverged at step \d+ \(t=0\.\d+ s\): MuJoCo "
                       r"found a NaN, infinite or huge \(> 1e10\) acceleration at dof \d "
                       r"\(joint '\w+'\) and reset"):
        for _ in range(100):
            sim.step()
    steps = sim.step_count
    with pytest.raises(SimulationError, match=r"^the physics diverged"):  # and stays stopped
        sim.step()
    assert sim.step_count == steps


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.slow
def test_partial_outputs_of_killed_runs_are_removed(files, tmp_path, capsys, caplog):
    out = tmp_path / "out"
    dead, alive, old = (out / f".sysid-partial-{_dead_pid()}-x1", out / f".sysid-partial-{os.getppid()}-x2",
                        out / ".sysid-partial-abc123")
    for folder in (dead, alive, old):
        folder.mkdir(parents=True)
        (folder / "result.json").write_text("{}")
    with caplog.at_level(logging.WARNING, logger="sysid_ros.core.report.files"):
        assert remove_stale_staging(out) == [dead]
    assert not dead.exists() and alive.exists() and old.exists()
    assert f"removed {dead}: partial output of process" in caplog.text
    assert f"{old}: partial output of an older version, left as it is" in caplog.text

    dead2 = out / f".sysid-partial-{_dead_pid()}-x3"
    dead2.mkdir()
    code, _ = _run(["identify", files / "bag", "--model", UR5E, "--out", out, "--no-plots"], capsys)
    assert code == 0 and not dead2.exists()
    assert sorted(p.name for p in out.iterdir()) == sorted([alive.name, old.name, "identified.xml",
                                                            "identified.urdf", "result.json", "torques.npz",
                                                            "report.html"])
