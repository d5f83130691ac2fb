"""The vendor-log generator's issue-22 features (``core.sim.vendor_log``): links whose CAD inertia is
30 % off, a barely moved joint, per-joint drive gains, a jittered logger clock at the real rate,
dropped cycles and one 8-9 ms gap, and a held-out log of the same robot along another motion."""

from __future__ import annotations

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core.model.robot import RobotModel, inertial_from_body_params, joint_terms
from sysid_ros.core.sim.vendor_log import REAL_LIKE_7DOF, VendorStyle, vendor_log

pytestmark = pytest.mark.slow  # a module fixture of several seconds

STYLE = REAL_LIKE_7DOF


@pytest.fixture(scope="module")
def panda():
    return RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml",
                                joint_terms=joint_terms("coulomb,viscous,offset", True))


@pytest.fixture(scope="module")
def logs(panda):
    log = vendor_log(panda, STYLE, duration=6.0, seed=1)
    other = vendor_log(panda, STYLE, duration=3.0, seed=1, motion_seed=9, clean=True)
    return log, other


def _truth(model, log):
    return model.from_dict({k: v for k, v in log.truth["parameters"].items() if k in set(model.param_names)})


def test_stamps_jitter_around_1_khz_with_dropped_cycles_and_one_8_to_9_ms_gap(logs):
    log, _ = logs
    steps = np.diff(log.t)
    assert np.all(steps > 0)
    true_steps = np.diff(log.meta["t_true"])
    jitter = log.t - log.meta["t_true"]
    assert 2e-5 < float(np.std(jitter)) < 6e-5  # 40 µs
    assert np.count_nonzero(np.isclose(true_steps, 0.002)) == STYLE.dropped  # one cycle left out
    gap = np.flatnonzero(true_steps > 0.003)
    assert gap.size == 1 and 0.0078 <= steps[gap[0]] <= 0.0092, steps[gap]  # 8 ms ± the jitter
    assert log.t[gap[0]] == pytest.approx(4.965, abs=2e-4)


def test_the_log_holds_currents_of_per_joint_drive_gains(panda, logs):
    log, _ = logs
    gain = np.array(STYLE.torque_per_amp)
    np.testing.assert_allclose(log.tau * gain, log.meta["tau_true"], atol=0.5)  # current noise only
    assert log.truth["log"]["torque_per_amp"] == list(gain)


def test_cad_off_links_are_30_percent_heavier_than_the_model(panda, logs):
    log, _ = logs
    truth = _truth(panda, log)
    for body in STYLE.cad_off:
        sl = panda.body_slice(panda.body_id(body))
        m, _, inertia = inertial_from_body_params(truth[sl])
        m0, _, inertia0 = inertial_from_body_params(panda.nominal[sl])
        # parameter_error (10 %) then +30 %
        assert 1.3 * 0.9 - 1e-9 <= m / m0 <= 1.3 * 1.1 + 1e-9
        assert np.trace(inertia) / np.trace(inertia0) > 1.3 * 0.9 - 1e-9


def test_the_barely_moved_joint_moves_little(logs):
    log, _ = logs
    span = np.ptp(log.meta["q_true"], axis=0)
    assert span[-1] < 0.25 * np.median(span[:-1]), span


def test_a_held_out_log_is_the_same_robot_along_another_motion(panda, logs):
    log, other = logs
    assert other.truth["parameters"] == log.truth["parameters"]
    n = min(len(other.t), 500)
    assert not np.allclose(other.meta["q_true"][:n], log.meta["q_true"][:n])
    assert other.truth["log"]["motion_seed"] == 9


def test_bad_style_values_are_one_line_errors(panda):
    with pytest.raises(Exception, match=r"cad_off bodies \['nope'\] are not bodies of the model"):
        vendor_log(panda, VendorStyle(cad_off=("nope",), periods=(0.001,)), duration=0.1)
    with pytest.raises(Exception, match=r"a gap is \(time \[s\], length > 0 \[s\]\)"):
        vendor_log(panda, VendorStyle(gaps=((0.05, -1.0),), periods=(0.001,)), duration=0.1)
