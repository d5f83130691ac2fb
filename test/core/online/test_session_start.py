"""What an OnlineSession sets up when (core/online/session.py, conditioning.py, rows.py): building one
loads no compiled kernel (a node's constructor builds one), ``prepare`` loads them without changing
the session, and a prepared session estimates exactly as an unprepared one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sysid_ros.core import RobotModel
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.online import CausalConditioner, OnlineOptions, OnlineSession
from sysid_ros.core.resources import default_robot_path
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import simulate_dataset

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import sys
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.online.session import OnlineOptions, OnlineSession
from sysid_ros.core.resources import default_robot_path

heavy = ("numba", "scipy.linalg")
session = OnlineSession(arm_target(RobotModel.load(default_robot_path())), OnlineOptions(method=sys.argv[1]))
print(*[m in sys.modules for m in heavy])
session.prepare()
print(*[m in sys.modules for m in heavy])
print(*session.counters.values())
"""


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SYSID_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("method", ["rls_logdet", "rls"])
def test_a_session_is_built_without_its_kernels_and_prepare_loads_them(private_cache, method):
    arm_target(RobotModel.load(default_robot_path()))  # its base parameters stored (as by an earlier run)
    env = dict(os.environ, SYSID_CACHE_DIR=str(private_cache))
    out = subprocess.run([sys.executable, "-c", PROBE, method], env=env, capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    built, prepared, counters = out.stdout.splitlines()
    assert built == "False False"  # numba, scipy.linalg: not at construction
    assert prepared.split()[0] == "True"  # numba: set up by prepare
    assert set(counters.split()) == {"0"}  # nothing received, accepted or updated


def test_a_prepared_session_estimates_exactly_as_an_unprepared_one():
    model = RobotModel.load(default_robot_path())
    ds = simulate_dataset(model, duration=1.0, seed=3, sensor=SensorModel(torque_noise=0.05, seed=4))
    target = arm_target(model)
    plain, prepared = (OnlineSession(target, OnlineOptions()) for _ in range(2))
    prepared.prepare()
    assert prepared.counters == plain.counters
    for session in (plain, prepared):
        session.push_batch(ds.t, ds.q, ds.dq, ds.tau)
    a, b = plain.snapshot(), prepared.snapshot()
    assert a.updates == b.updates > 0
    np.testing.assert_array_equal(a.theta, b.theta)
    assert a.counters == b.counters


def test_a_conditioner_sets_its_settling_time_when_first_asked():
    """Built, it has run no filter; its ``settle`` ("auto") is the velocity filter's settling time
    (≈ 1/cutoff for the 2nd-order Butterworth) and withholds as before."""
    cond = CausalConditioner(2, 500.0, 50.0, settle="auto")
    assert cond._f_v._sos is None  # nothing designed yet
    assert 0.5 / 50.0 < cond.settle < 3.0 / 50.0
    t = np.arange(40) / 500.0
    q = np.sin(t)[:, None] * np.ones(2)
    out = cond.push_batch(t, q, np.cos(t)[:, None] * np.ones(2), q)
    assert out[0][0] >= cond.settle and len(out[0]) == np.sum(t[:-1] >= cond.settle)
