"""The offline pipeline and the `sysid` command line, end to end on simulated data."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.cli import sysid
from support.robots import DEFAULT_ROBOT, ROOT, TEST_ROBOTS

from sysid_ros.core import RobotModel, run_offline_pipeline, simulate_mit
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.model.regressor import torque_regressor


@pytest.mark.slow
def test_noise_free_base_parameters_recovered_within_0_1_percent():
    report = run_offline_pipeline(DEFAULT_ROBOT, duration=20.0, seed=3)
    rel, abs_err = report.base_errors()
    assert np.nanmax(rel) < 0.1  # percent, every base parameter with |true| >= 1e-6
    assert abs_err[np.isnan(rel)].max() < 1e-8  # the (near-)zero ones
    assert np.all(report.validation_rmse < 1e-6)  # N·m on the held-out trajectory
    assert report.result.diagnostics.rank == report.base.rank
    assert report.result.beta_std.shape == report.result.beta.shape


@pytest.mark.slow
def test_noise_free_recovery_on_the_panda():
    report = run_offline_pipeline(TEST_ROBOTS / "panda.xml", duration=20.0, seed=1)
    assert report.max_relative_error < 0.1


def test_simulation_records_consistent_dynamics_and_tracks_the_reference():
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    traj = FourierTrajectory.random(Limits.of(model), seed=2)
    rec = simulate_mit(model, traj, 4.0)
    assert len(rec) == 2000 and not rec.saturated.any()
    assert np.abs(rec.q - rec.q_ref).max() < 0.01  # rad: feed-forward + PD tracks well
    resid = torque_regressor(model, rec.q, rec.dq, rec.ddq) @ model.nominal - rec.tau
    fast = np.abs(rec.dq) >= 0.1
    assert np.abs(resid[fast]).max() < 1e-9


def _sysid(*args: str):
    return sysid(*args, cwd=ROOT)


@pytest.mark.slow
def test_cli_inspect_json():
    out = _sysid("inspect", str(DEFAULT_ROBOT), "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["nv"] == 6 and info["n_params"] == 84 and info["base_rank"] == 58
    assert info["motors"]["joint1"] == "DM4340"
    assert [j["name"] for j in info["joints"]] == [f"joint{i}" for i in range(1, 7)]


@pytest.mark.slow
def test_cli_demo_writes_a_report(tmp_path):
    out = _sysid("pipeline", "--duration", "12", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "held-out trajectory torque RMSE" in out.stdout
    report = json.loads((tmp_path / "pipeline_report.json").read_text())
    assert report["max_relative_error_percent"] < 0.1
    assert len(report["truth_comparison"]) == 58


def test_cli_errors_name_the_problem(tmp_path):
    out = _sysid("inspect", str(tmp_path / "nope.xml"))
    assert out.returncode == 1
    assert "expected an MJCF or URDF file" in out.stderr and "Traceback" not in out.stderr
    assert _sysid("frobnicate").returncode == 2
