"""Base-parameter reduction: rank, regrouping and the standard-to-base map."""

from __future__ import annotations

import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT, robot_params

from sysid_ros.core import (
    IdentificationError,
    RobotModel,
    base_parameters,
    ols,
    random_states,
    torque_regressor,
)

PLANAR_2R = """
<mujoco><option gravity="0 -9.81 0"/><worldbody>
  <body name="l1"><joint name="j1" axis="0 0 1"/>
    <inertial pos="0.3 0.01 0" mass="2" diaginertia="0.01 0.02 0.03"/>
    <body name="l2" pos="0.6 0 0"><joint name="j2" axis="0 0 1"/>
      <inertial pos="0.2 -0.02 0" mass="1" diaginertia="0.005 0.006 0.007"/>
    </body>
  </body>
</worldbody></mujoco>"""


def test_planar_two_link_arm_has_the_textbook_base_parameters():
    """Planar 2R with gravity in the plane: 7 rigid-body base parameters (ZZ1R, MX1R, MY1R,
    ZZ2, MX2, MY2 ... and none of the out-of-plane terms), plus Fc, Fv, Fo per joint and Ia2
    (Ia1 regroups with ZZ1)."""
    model = RobotModel.from_xml_string(PLANAR_2R)
    base = base_parameters(model)
    rigid = [n for n in base.names if ".F" not in n and ".Ia" not in n.split(" ")[0]]
    assert len(rigid) == 6
    assert base.rank == 6 + 3 * 2 + 1
    assert {n.split(" ")[0] for n in base.names} >= {"j1.Fc", "j2.Fc", "j2.Ia"}


@pytest.mark.slow
@pytest.mark.parametrize("path", robot_params())
def test_base_regressor_reproduces_the_full_regressor(path):
    model = RobotModel.from_mjcf(path)
    base = base_parameters(model)
    assert base.matrix.shape == (base.rank, model.n_params)
    q, dq, ddq = random_states(model, 30, seed=99)
    y = torque_regressor(model, q, dq, ddq)
    theta = model.nominal * np.random.default_rng(1).uniform(0.5, 1.5, model.n_params)
    full = y @ theta
    np.testing.assert_allclose(base.columns(y) @ base.of(theta), full, atol=1e-10 * np.abs(full).max())
    # the base columns are independent on fresh data
    assert np.linalg.matrix_rank(base.columns(y).reshape(-1, base.rank)) == base.rank
    np.testing.assert_allclose(base.of(base.standard_from_base(base.of(theta))), base.of(theta))


@pytest.mark.slow
def test_reduction_is_deterministic_and_reports_conditioning():
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    a, b = base_parameters(model, seed=0), base_parameters(model, seed=0)
    assert a.names == b.names
    assert a.rank == 58
    assert 1.0 < a.condition_number < 100.0
    assert a.as_dict()["rank"] == 58


@pytest.mark.slow
def test_poor_excitation_is_reported_not_solved():
    """A robot held still in one pose cannot reveal its inertias: a clear error, no estimate."""
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    base = base_parameters(model)
    q = np.tile(np.array([0.1, 1.0, 1.0, 0.0, 0.2, 0.0]), (200, 1))
    dq = np.zeros_like(q)
    y = torque_regressor(model, q, dq, dq)
    tau = y @ model.nominal
    with pytest.raises(IdentificationError, match=r"do not excite base parameters|excitation is too poor"):
        ols(y, tau, base)
    with pytest.raises(IdentificationError, match="regression rows"):
        ols(y[:2], tau[:2], base)
