"""No silent wrong answer: models whose couplings the rigid-body regressor cannot represent are
refused, absurd measured values are refused with their time and column, and torque outliers are
found by the robust residual test, reported, and left out on request."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.cli import main
from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method
from sysid_ros.core.data.dataset import write_csv
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import ModelError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.report.metrics import truth_parameters
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset

UR5E = TEST_ROBOTS / "ur5e.xml"
PAYLOAD = "body=wrist_3_link,mass=1.0,com=0,0.02,0.05"

# two hinges; MuJoCo XML reference (mujoco.readthedocs.io): <tendon><fixed> couples joints linearly,
# <equality><joint> ties one joint's position to another's
_ARM = """<mujoco><worldbody><body name="upper"><joint name="j1" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" mass="1"/>
<body name="lower" pos=".3 0 0"><joint name="j2" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" mass="1"/></body></body></worldbody>{extra}</mujoco>"""
TENDON = _ARM.format(extra='<tendon><fixed name="coupler" stiffness="50"><joint joint="j1" coef="1"/>'
                     '<joint joint="j2" coef="-1"/></fixed></tendon>')
EQUALITY = _ARM.format(extra='<equality><joint name="gear" joint1="j1" joint2="j2" polycoef="0 2 0 0 0"/>'
                       '</equality>')


@pytest.mark.parametrize("xml, what", [
    (TENDON, "has tendons ['coupler']: they couple joints with forces the rigid-body regressor cannot "
             "represent"),
    (EQUALITY, "has equality constraints ['gear (joint)']: they couple joints with forces the rigid-body "
               "regressor cannot represent"),
], ids=["tendon", "equality"])
def test_coupled_models_are_refused_in_one_line(tmp_path, capsys, xml, what):
    with pytest.raises(ModelError) as refused:
        RobotModel.from_xml_string(xml)
    assert what in str(refused.value) and "\n" not in str(refused.value)
    path = tmp_path / "coupled.xml"
    path.write_text(xml)
    assert main(["inspect", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and what in err and err.startswith(f"sysid inspect: error: {path} has ")
    assert RobotModel.from_xml_string(_ARM.format(extra="")).nv == 2  # the same chain uncoupled loads


@pytest.fixture(scope="module")
def recording():
    model = RobotModel.from_mjcf(UR5E)
    return simulate_dataset(model, duration=12.0, seed=3, payload=Payload.parse(PAYLOAD),
                            sensor=SensorModel(torque_noise=0.02, seed=3))


@pytest.mark.parametrize("column, value, message", [
    ("tau", 1e300, "tau of joint 'elbow_joint' is 1e+300 at sample 700 (t=1.400000 s); expected |tau| <= "
                   "1e+06 (a unit or logging error?)"),
    ("tau", -2e6, "tau of joint 'elbow_joint' is -2e+06 at sample 700 (t=1.400000 s); expected |tau| <= "
                  "1e+06 (a unit or logging error?)"),
    ("dq", 5e4, "dq of joint 'elbow_joint' is 50000 at sample 700 (t=1.400000 s); expected |dq| <= 10000 "
                "(a unit or logging error?)"),
    ("q", np.inf, "q of joint 'elbow_joint' is inf at sample 700 (t=1.400000 s)"),
])
@pytest.mark.slow
def test_absurd_values_are_refused_with_time_and_column(tmp_path, capsys, recording, column, value, message):
    arr = getattr(recording, column).copy()
    arr[700, 2] = value
    csv = write_csv(replace(recording, **{column: arr}), tmp_path / "log.csv")
    out = tmp_path / "result"
    assert main(["identify", str(csv), "--model", str(UR5E), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def _payload_error(recording, *, drop: bool) -> tuple[float, object]:
    target = payload_target(RobotModel.from_mjcf(UR5E), "wrist_3_link")
    prep = prepare(recording, target, Preprocessing())
    result = run_method(prep, IdentifyOptions(method="ols", drop_outliers=drop))
    truth = truth_parameters(recording.truth, target)
    return abs(result.parameters.values[0] - truth[0]) / truth[0], result


def test_clean_recording_has_no_outliers(recording):
    error, result = _payload_error(recording, drop=False)
    assert error < 0.01
    assert result.diagnostics.extra["data"]["outliers"]["count"] == 0
    assert not any("outlier" in w for w in result.diagnostics.extra.get("warnings", []))


@pytest.mark.slow
def test_one_corrupt_torque_is_reported_and_dropped_on_request(recording):
    tau = recording.tau.copy()
    tau[3000, 1] *= 1000  # one effort sample logged ×1000 (t = 6 s at 500 Hz)
    corrupt = replace(recording, tau=tau)
    error, result = _payload_error(corrupt, drop=False)
    report = result.diagnostics.extra["data"]["outliers"]
    assert report["count"] >= 1 and not report["dropped"]
    assert all(5.5 < t < 6.5 for t in report["times"])  # found where the sample is, nowhere else
    line = [w for w in result.diagnostics.extra["warnings"] if "outlier" in w]
    assert len(line) == 1 and "worst joint 'shoulder_lift_joint' at t=" in line[0], line
    assert "kept (--drop-outliers leaves them out)" in line[0]
    assert error > 0.05  # what the one sample does to an unguarded fit
    dropped_error, dropped = _payload_error(corrupt, drop=True)
    assert dropped.diagnostics.extra["data"]["outliers"]["dropped"]
    assert dropped_error < 0.01, dropped_error  # back to the clean fit's accuracy


def _online(recording, **options):
    from sysid_ros.core.online.replay import online_result, replay
    from sysid_ros.core.online.session import OnlineOptions

    target = payload_target(RobotModel.from_mjcf(UR5E), "wrist_3_link")
    prep = prepare(recording, target, Preprocessing())
    session = replay(recording, target, OnlineOptions(sample_rate=recording.sample_rate, **options))
    return online_result(prep, session.estimator)


@pytest.mark.slow
def test_an_online_estimate_far_from_the_fit_of_its_data_says_so(recording, caplog):
    converged = _online(recording, method="rls_logdet")
    assert not converged.diagnostics.extra.get("warnings")
    # a prior weighted 1e9 times the data: the estimate stays at the prior (no payload)
    stuck = _online(recording, method="rls_logdet", alpha=1e9)
    (line,) = stuck.diagnostics.extra["warnings"]
    assert line.startswith("the online estimate's torque error on this data, ") and (
        "is far from a least-squares fit of the same data" in line), line
    assert line in caplog.text


@pytest.mark.slow
def test_the_whole_arm_ekf_on_fast_data_warns(recording):
    from sysid_ros.core.model.target import arm_target
    from sysid_ros.core.online.replay import EKF_ARM_RATE, ekf_rate_warning

    arm = arm_target(RobotModel.from_mjcf(UR5E))
    line = ekf_rate_warning(arm, "ekf", 5000.0)
    assert line.startswith("ekf on the whole arm (") and "at 5000 Hz: one update per sample" in line
    assert ekf_rate_warning(arm, "ekf", EKF_ARM_RATE) is None  # 1 kHz and below: no warning
    assert ekf_rate_warning(arm, "rls_logdet", 5000.0) is None
    assert ekf_rate_warning(payload_target(arm.model, "wrist_3_link"), "ekf", 5000.0) is None
    fast = simulate_dataset(RobotModel.from_mjcf(UR5E), duration=0.3, seed=1, rate=5000.0)
    said = []
    from sysid_ros.core.online.replay import replay
    from sysid_ros.core.online.session import OnlineOptions

    replay(fast, arm, OnlineOptions(method="ekf", sample_rate=5000.0), progress=said.append)
    assert said[0] == f"warning: {ekf_rate_warning(arm, 'ekf', fast.sample_rate)}"


def test_non_finite_figures_are_no_answer(recording):
    from sysid_ros.core.errors import IdentificationError

    target = payload_target(RobotModel.from_mjcf(UR5E), "wrist_3_link")
    prep = prepare(recording, target, Preprocessing())
    huge = replace(prep, y=prep.y * 1e300)  # finite torques whose squares overflow
    # the overflows are the point: numpy's warnings about them are expected, the answer is the check
    with np.errstate(over="ignore", invalid="ignore"), \
            pytest.raises(IdentificationError, match=r"^ols gave non-finite figures \(.*\): no estimate$"):
        run_method(huge, IdentifyOptions(method="ols"))


@pytest.mark.slow
def test_monitor_json_is_strict_json(tmp_path, capsys, recording):
    import json

    csv = write_csv(recording, tmp_path / "log.csv")
    assert main(["monitor", str(csv), "--model", str(UR5E), "--threshold", "5", "--json"]) == 0
    out = capsys.readouterr().out

    def refuse(name):
        raise AssertionError(f"{name} is not JSON")

    doc = json.loads(out, parse_constant=refuse)  # given thresholds have no calibration rms: null
    assert doc["calibration_rms_nm"]["elbow_joint"] is None and doc["thresholds_nm"]["elbow_joint"] == 5.0
