"""Issue 22 item 9: small defects of real logs, each one line (or one per-joint warning), printed
once. On CSV files of a simulated two-link arm (test/robots/two_link.urdf) edited the way real
logs come: no header line, epoch stamps with 9 significant digits, a jittered log identified with
``--resample off``, a velocity column that is all NaN or holds one NaN."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

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


def test_a_velocity_column_with_nan_is_one_warning_per_joint_printed_once(recording, tmp_path, capsys):
    dq = recording.dq.copy()
    dq[:, 0] = np.nan       # shoulder: no velocity logged
    dq[1234, 1] = np.nan    # elbow: one dropped field
    path = write_csv(type(recording)(**{**recording.__dict__, "dq": dq}), tmp_path / "log.csv")
    code, lines = _identify(path, tmp_path, capsys, "--method", "ols")
    assert code == 0, lines
    velocity = [line for line in lines if "measured velocity used for" in line]
    assert velocity == [f"[sysid identify] warning: {path}: measured velocity used for 0 of 2 joints; "
                        "differentiated from positions for shoulder (all NaN), elbow (1 NaN of 3000 "
                        "samples)"]
    assert not [line for line in lines if line.startswith("WARNING ")]  # not the logger's copy too
    assert len(set(lines)) == len(lines), "a line printed twice"


@pytest.mark.slow
def test_hold_out_gaps_and_grid_in_the_files_terms(recording, tmp_path, capsys):
    """The validation part: its own clock runs 0.4 % slow (steps of 2.008 ms against the
    identification part's 2.000 ms), its stamps jitter, and an 8.5 ms stall at t = 3.2 s leaves
    pieces of 3.2 s and 1.8 s (shorter than the 2 s minimum segment of identification data)."""
    model = RobotModel.from_mjcf(MODEL)
    held = simulate_dataset(model, duration=5.0, seed=9, rate=500.0)
    rng = np.random.default_rng(1)
    t = held.t * 1.004 + rng.normal(0.0, 2e-4, len(held.t))
    keep = ~((t > 3.2) & (t < 3.2085))
    held = held.samples(keep)
    held = type(held)(**{**held.__dict__, "t": t[keep]})
    before = int(np.flatnonzero(np.diff(held.t) > 0.005)[0])
    t_gap, length = held.t[before], held.t[before + 1] - held.t[before]
    ident = write_csv(recording, tmp_path / "ident.csv")
    val = write_csv(held, tmp_path / "val.csv")
    code, lines = _identify(ident, tmp_path, capsys, "--method", "ols", "--validate", str(val))
    assert code == 0, lines
    gap = [line for line in lines if "gap of" in line and str(val) in line]
    assert gap == [f"[sysid identify] warning: {val}: gap of {1e3 * length:.1f} ms after t={t_gap:.6f} s "
                   f"(before sample {gap[0].split('before sample ')[1].split(',')[0]}, "
                   f"{round(length / 0.002) - 1} samples missing): the recording is split there"]
    timebases = [line for line in lines if "time base:" in line]
    assert len(timebases) == 2, timebases  # identification part: uniform 2 ms, used as recorded
    assert "median step 2.000 ms" in timebases[0] and "uniform, used as recorded" in timebases[0]
    assert "resampled onto a uniform 2.000 ms grid" in timebases[1]  # not its own 2.008 ms
    assert f"{1e3 * length:.2f} ms after t = {t_gap:.6g} s, the file's stamps" in timebases[1]
    summaries = [line for line in lines if "segments with" in line]
    assert "0 short segments dropped" in summaries[-1], summaries
    assert not [line for line in lines if "dropped the segment" in line]
