"""Vendor logs: CSV column maps (``--columns``, ``--time-unit``, sniffed delimiters) and the IV
methods on a log without MotorCommand (``--controller``), on the RTDE-style recording of a
velocity-controlled UR5e carrying an unknown 1 kg payload (:mod:`support.rtde_log`, which cites
the facts it is written from).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from support.rtde_log import COLUMNS as RTDE
from support.rtde_log import KT, MODEL, PAYLOAD, write_rtde_log
from support.rtde_log import numbers as _join

from sysid_ros.cli import main
from sysid_ros.core import DataError, RobotModel
from sysid_ros.core.data.bag import read_data
from sysid_ros.core.data.columns import ColumnMap
from sysid_ros.core.data.controller import ControllerDescription
from sysid_ros.core.data.dataset import read_csv

pytestmark = pytest.mark.slow  # a module fixture of several seconds


@pytest.fixture(scope="module")
def rtde_log(tmp_path_factory):
    """The recording (10 s at 500 Hz, noisy) and the velocity gains ``kv (6,)``."""
    path = tmp_path_factory.mktemp("rtde") / "robot_data.csv"
    return path, write_rtde_log(path)


def _identify(path: Path, out: Path, method: str, *extra: str) -> int:
    return main(["identify", str(path), "--model", str(MODEL), "--payload-only", "wrist_3_link",
                 "--method", method, "--out", str(out), "--no-plots", "--columns", RTDE,
                 "--time-unit", "ms", "--torque-scale", _join(KT), *extra])


def _payload(out: Path) -> tuple[float, np.ndarray]:
    """Identified payload mass [kg] and CoM [m] from result.json."""
    values = json.loads((out / "result.json").read_text())["exported_parameters"]["values"]
    mass = values["payload.m"]
    return mass, np.array([values[f"payload.h{a}"] for a in "xyz"]) / mass


def test_rtde_log_with_a_column_map_identifies_the_payload(rtde_log, tmp_path, capsys):
    """pc_ls on the mapped RTDE log: the payload's mass within 1 %, its CoM within 2 mm."""
    path, _ = rtde_log
    ds = read_data(path, joint_names=RobotModel.from_mjcf(MODEL).dof_joint_names,
                   columns=ColumnMap.parse(RTDE), time_unit="ms")
    assert ds.sample_rate == pytest.approx(500.0)
    assert _identify(path, tmp_path / "ls", "pc_ls") == 0, capsys.readouterr().err
    mass, com = _payload(tmp_path / "ls")
    assert mass == pytest.approx(PAYLOAD.mass, rel=0.01)
    np.testing.assert_allclose(com, PAYLOAD.com, atol=2e-3)


def test_iv_on_a_velocity_controlled_log_takes_a_controller_description(rtde_log, tmp_path, capsys):
    """pc_iv with ``--controller velocity:kv=...`` and the recorded dq_ref, τ_ff (no gains in the
    file): converged, the payload's mass within 1 %, its CoM within 2 mm. Without the description
    the error (exit 1) names the controller forms and the mapped reference columns."""
    path, kv = rtde_log
    assert _identify(path, tmp_path / "iv", "pc_iv", "--controller", f"velocity:kv={_join(kv)}") == 0, \
        capsys.readouterr().err
    diag = json.loads((tmp_path / "iv" / "result.json").read_text())["diagnostics"]
    assert diag["converged"] and diag["pi_rank"] == 10, diag
    mass, com = _payload(tmp_path / "iv")
    assert mass == pytest.approx(PAYLOAD.mass, rel=0.01)
    np.testing.assert_allclose(com, PAYLOAD.com, atol=2e-3)
    capsys.readouterr()
    assert _identify(path, tmp_path / "none", "pc_iv") == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"sysid identify: error: {path}: the IV methods need the closed loop's reference and gains, and "
        "a CSV file has no gains: give a controller description, --controller "
        "'pd:kp=K[,K...];kd=D[,D...]' with the reference q_ref = columns target_q_0 … target_q_5; "
        "dq_ref = columns target_qd_0 … target_qd_5, or --controller 'velocity:kv=D[,D...]' with dq_ref "
        "= columns target_qd_0 … target_qd_5 (tau_ff = columns ff_0 … ff_5 added when present); this "
        "file has q_ref, dq_ref, tau_ff")
    assert not (tmp_path / "none").exists()


def test_controller_description_makes_the_command_log(rtde_log):
    """velocity: kp = 0, kd = kv, the recorded dq_ref and τ_ff; pd: kp, kd per joint with q_ref."""
    path, kv = rtde_log
    model = RobotModel.from_mjcf(MODEL)
    ds = read_csv(path, joint_names=model.dof_joint_names, columns=ColumnMap.parse(RTDE),
                  time_unit="ms").for_model(model)
    assert ds.command is not None and np.all(np.isnan(ds.command.kp))
    vel = ControllerDescription.parse(f"velocity:kv={_join(kv)}").apply(ds).command
    np.testing.assert_array_equal(vel.kp, 0.0)
    np.testing.assert_array_equal(vel.kd, np.tile(kv, (len(ds), 1)))
    np.testing.assert_array_equal(vel.dq_ref, ds.command.dq_ref)
    np.testing.assert_array_equal(vel.tau_ff, ds.command.tau_ff)
    pd = ControllerDescription.parse("pd: kp=100 ; kd=1,2,3,4,5,6").apply(ds).command
    np.testing.assert_array_equal(pd.kp[0], [100.0] * 6)
    np.testing.assert_array_equal(pd.kd[-1], [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(pd.q_ref, ds.command.q_ref)
    with pytest.raises(DataError, match=r"^--controller: kd: expected 1 or 6 values \(joints .*\), got 2$"):
        ControllerDescription.parse("pd:kp=1;kd=1,2").apply(ds)
    only_dq = read_csv(path, joint_names=model.dof_joint_names, time_unit="ms", columns=ColumnMap.parse(
        "time=timestamp,q=actual_q_{i},tau=actual_current_{i},dq_ref=target_qd_{i}"))
    with pytest.raises(DataError) as exc:
        ControllerDescription.parse("pd:kp=1;kd=1").apply(only_dq)
    assert str(exc.value) == (
        f"{path}: --controller pd needs the reference q_ref, not in the file (or not finite): q_ref = "
        "columns q_ref_shoulder_pan_joint … q_ref_wrist_3_joint (name the file's with --columns "
        "q_ref=COLUMN)")
    assert ControllerDescription.parse("velocity:kv=2").apply(only_dq).command.kd[0, 0] == 2.0


@pytest.mark.parametrize("spec, message", [
    ("pid:kp=1;kd=1;ki=1", "an integral term (ki) is not simulated by the IV methods"),
    ("pd:kp=1;kd=1;ki=0.5", "an integral term (ki) is not simulated by the IV methods"),
    ("torque:k=1", "expected 'pd:kp=K[,K...];kd=D[,D...]' or 'velocity:kv=D[,D...]', got 'torque:k=1'"),
    ("pd:kp=1", "pd needs kd"),
    ("velocity:kv=1;kd=2", "velocity takes kv once each"),
    ("pd:kp=1;kd=-2", "kd: expected finite gains >= 0, got '-2'"),
    ("velocity:kv=a", "kv: expected comma-separated numbers, got 'a'"),
])
def test_bad_controller_descriptions_are_refused(spec, message):
    with pytest.raises(DataError) as exc:
        ControllerDescription.parse(spec)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def _table(path: Path, header: list[str], rows: np.ndarray, sep: str) -> Path:
    path.write_text(sep.join(header) + "\n" + "\n".join(sep.join(f"{x:.6g}" for x in r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize("sep", [",", ";", "\t", " ", "   "])
def test_the_delimiter_is_told_by_the_header_and_other_columns_are_ignored(tmp_path, sep):
    """Comma, semicolon, tab, one or more spaces; a text column the map does not use is ignored;
    ``{n}`` counts from 1; µs become s."""
    t = np.arange(5) * 2000.0  # µs
    rows = np.column_stack((t, np.arange(5), 10 + np.arange(5), 0.5 * np.arange(5), -np.arange(5)))
    header = ["stamp_us", "pos1", "pos2", "eff1", "eff2"]
    text = (sep.join([*header, "mode"]) + "\n"
            + "\n".join(sep.join([*(f"{x:g}" for x in r), "RUNNING"]) for r in rows) + "\n")
    path = tmp_path / "log.txt"
    path.write_text(text)
    ds = read_data(path, joint_names=("a", "b"), time_unit="us",
                   columns=ColumnMap.parse("time=stamp_us,q=pos{n},tau=eff{n}"))
    np.testing.assert_allclose(ds.t, [0, 0.002, 0.004, 0.006, 0.008])
    np.testing.assert_array_equal(ds.q, rows[:, 1:3])
    np.testing.assert_array_equal(ds.tau, rows[:, 3:5])
    assert np.all(np.isnan(ds.dq)) and ds.command is None


def test_default_layout_reads_reference_columns_and_joint_names(tmp_path):
    """The project's layout with the optional reference columns: joints from q_<joint> (q_ref_<joint>
    is not a joint), the reference in the command log, gains NaN (not recorded)."""
    header = ["time", "q_j1", "q_j2", "tau_j1", "tau_j2", "q_ref_j1", "q_ref_j2", "dq_ref_j1", "dq_ref_j2"]
    rows = np.column_stack((np.arange(4) * 0.01, np.arange(4 * 8).reshape(4, 8)))
    ds = read_csv(_table(tmp_path / "run.csv", header, rows, ","))
    assert ds.joint_names == ("j1", "j2")
    np.testing.assert_array_equal(ds.command.q_ref, rows[:, 5:7])
    np.testing.assert_array_equal(ds.command.dq_ref, rows[:, 7:9])
    assert np.all(np.isnan(ds.command.tau_ff)) and np.all(np.isnan(ds.command.kd))


def test_missing_columns_and_bad_maps_are_one_line_errors(tmp_path):
    header = ["timestamp"] + [f"actual_q_{i}" for i in range(6)] + [f"actual_current_{i}" for i in range(6)]
    path = _table(tmp_path / "log.csv", header, np.zeros((4, 13)) + np.arange(4)[:, None], ";")
    names = RobotModel.from_mjcf(MODEL).dof_joint_names
    with pytest.raises(DataError) as exc:
        read_csv(path, joint_names=names, columns=ColumnMap.parse(
            "time=timestamp,q=actual_q_{i},dq=actual_qd_{i},tau=actual_current_{i}"))
    assert str(exc.value) == (
        f"{path}: no column 'actual_qd_0' (dq of joint 'shoulder_pan_joint', mapped by dq=actual_qd_{{i}}); "
        "the file has 13 columns: timestamp, actual_q_0, actual_q_1, actual_q_2, actual_q_3, actual_q_4, "
        "actual_q_5, actual_current_0, …")
    with pytest.raises(DataError, match=r"no column 'time' \(time, mapped by time=time\)"):
        read_csv(path, joint_names=names, columns=ColumnMap.parse("q=actual_q_{i},tau=actual_current_{i}"))
    with pytest.raises(DataError, match=r"columns by joint index \(q=actual_q_\{i\}\) need the joint names"):
        read_csv(path, columns=ColumnMap.parse("time=timestamp,q=actual_q_{i},tau=actual_current_{i}"))
    with pytest.raises(DataError, match=r"q=actual_q names one column for 6 joints; use \{i\}, \{n\} or "):
        read_csv(path, joint_names=names, columns=ColumnMap.parse("time=timestamp,q=actual_q,tau=x{i}"))
    with pytest.raises(DataError, match=re.escape("the first column must be 'time', got ['timestamp'] "
                                                  "(another layout: --columns time=NAME,...)")):
        read_csv(path)
    with pytest.raises(DataError, match=re.escape("time unit: expected one of ['s', 'ms', 'us', 'ns'], "
                                                  "got 'min'")):
        read_csv(path, time_unit="min")
    bad = tmp_path / "bad.csv"
    bad.write_text("time;q_a;tau_a\n0;1;2\n0.1;x;2\n0.2;1;2\n")
    with pytest.raises(DataError) as exc:
        read_csv(bad)
    assert str(exc.value) == f"{bad}:3: column 'q_a': expected a number, got 'x'"
    part = tmp_path / "part.csv"
    part.write_text("time,q_a,q_b,dq_a,tau_a,tau_b\n0,1,2,3,4,5\n")
    with pytest.raises(DataError, match=r"no column 'dq_b' \(dq of joint 'b', mapped by dq=dq_\{joint\}\)"):
        read_csv(part)
    with pytest.raises(DataError, match="a column map and a time unit apply to CSV files"):
        read_data(tmp_path / "some_bag", columns=ColumnMap())
    for spec, message in [
        ("q=actual_q_{j}", "unknown placeholder {j}; expected {i}, {n} or {joint}"),
        ("position=x_{i}", "expected FIELD=COLUMN"),
        ("q=a_{i},q=b_{i}", "field 'q' given twice"),
        ("time=t_{i}", "the time is one column"),
        ("q=", "expected FIELD=COLUMN"),
        ("", "expected FIELD=COLUMN"),
    ]:
        with pytest.raises(DataError) as exc:
            ColumnMap.parse(spec)
        assert message in str(exc.value), (spec, str(exc.value))


def test_cli_bad_column_map_exits_1(tmp_path, capsys):
    path = tmp_path / "x.csv"
    path.write_text("time,q_a,tau_a\n0,0,0\n")
    code = main(["identify", str(path), "--model", str(MODEL), "--out", str(tmp_path / "o"),
                 "--columns", "q=pos_{k}"])
    assert code == 1
    assert capsys.readouterr().err == ("sysid identify: error: --columns: q=pos_{k}: unknown placeholder "
                                       "{k}; expected {i}, {n} or {joint}\n")
