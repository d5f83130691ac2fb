"""Issue 22 item 9: small defects of real logs, each one line (or one per-joint warning), printed
once. On CSV files of a simulated two-link arm (test/robots/two_link.urdf) edited the way real
logs come: no header line, epoch stamps with 9 significant digits, a jittered log identified with
``--resample off``, a velocity column that is all NaN or holds one NaN."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import TEST_ROBOTS

from sysid_ros.cli import main
from sysid_ros.core.data.dataset import write_csv
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.synthetic import simulate_dataset

MODEL = TEST_ROBOTS / "two_link.urdf"


@pytest.fixture(scope="module")
def recording():
    return simulate_dataset(RobotModel.from_mjcf(MODEL), duration=6.0, seed=4, rate=500.0)


def _identify(path, tmp_path, capsys, *extra) -> tuple[int, list[str]]:
    code = main(["identify", str(path), "--model", str(MODEL), "--out", str(tmp_path / "out"),
                 "--no-plots", *extra])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.strip()]


def _errors(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("sysid identify: error:")]


def test_a_csv_without_header_says_so(recording, tmp_path, capsys):
    path = write_csv(recording, tmp_path / "log.csv")
    path.write_text("\n".join(path.read_text().splitlines()[1:]) + "\n")
    code, lines = _identify(path, tmp_path, capsys)
    assert code == 1
    (line,) = _errors(lines)
    assert line.startswith(f"sysid identify: error: {path}: the first line holds numbers (")
    assert line.endswith("expected a header line naming the columns (time, q_<joint>, dq_<joint>, "
                         "tau_<joint>, ...; another layout: --columns)")


def test_epoch_stamps_with_too_few_digits_name_the_precision(recording, tmp_path, capsys):
    path = write_csv(recording, tmp_path / "log.csv")
    rows = path.read_text().splitlines()
    epoch = [f"{1.7327123e9 + float(r.split(',', 1)[0]):.9g}," + r.split(",", 1)[1] for r in rows[1:]]
    path.write_text("\n".join([rows[0], *epoch]) + "\n")
    code, lines = _identify(path, tmp_path, capsys)
    assert code == 1
    (line,) = _errors(lines)
    assert "timestamps repeat (" in line and "too few significant digits" in line, line
    assert re.search(r"write it with at least 1[3-6] significant digits", line), line
    assert "timestamps must increase" not in line


def test_resample_off_on_a_jittered_log_is_one_short_line(recording, tmp_path, capsys):
    # a logger that drops every 40th cycle and reads its clock with 5 % jitter
    rng = np.random.default_rng(0)
    keep = np.ones(len(recording), dtype=bool)
    keep[20::40] = False
    ds = recording.samples(keep)
    ds = type(ds)(**{**ds.__dict__, "t": ds.t + rng.normal(0.0, 1e-4, len(ds.t))})
    path = write_csv(ds, tmp_path / "log.csv")
    code, lines = _identify(path, tmp_path, capsys, "--resample", "off")
    assert code == 1
    (line,) = _errors(lines)
    assert len(line) < 600, len(line)
    assert "and 7" in line and "more" in line and "--resample auto" in line, line
