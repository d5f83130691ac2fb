"""Bad output paths and interruptions end in one line and leave nothing partial: output paths are
checked before any work (an existing file as --out, a path under a file, a folder as --export, a
read-only file system: a read-only tmpfs mounted for the test, since root ignores mode bits), and
SIGINT to `sysid identify` ends with exit code 130 and one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.cli import main
from sysid_ros.core.data.bag import dataset_topics, write_bag
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.synthetic import simulate_dataset

UR5E = TEST_ROBOTS / "ur5e.xml"


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    ds = simulate_dataset(RobotModel.from_mjcf(UR5E), duration=4.0, seed=1)
    return write_bag(tmp_path_factory.mktemp("bags") / "run", dataset_topics(ds), truth=ds.truth)


def _one_line(argv, capsys) -> str:
    started = time.monotonic()
    assert main([str(a) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert time.monotonic() - started < 60  # refused before the work, not after it
    return err


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_identify_out_an_existing_file_or_under_one(tmp_path, bag, capsys):
    (tmp_path / "taken").write_text("mine\n")
    err = _one_line(["identify", bag, "--model", UR5E, "--out", tmp_path / "taken"], capsys)
    taken = tmp_path / "taken"
    assert err == (f"sysid identify: error: --out {taken} is a file; expected a folder (existing or to be "
                   "made)\n")
    err = _one_line(["identify", bag, "--model", UR5E, "--out", tmp_path / "taken" / "result"], capsys)
    assert err.startswith(f"sysid identify: error: --out {tmp_path / 'taken' / 'result'}: ")
    assert (tmp_path / "taken").read_text() == "mine\n"


@pytest.mark.parametrize("command", ["identify", "simulate", "trajectory", "validate", "demo"])
def test_a_read_only_file_system_is_one_line_before_any_work(read_only, bag, capsys, command):
    target = read_only / "out"
    argv = {"identify": ["identify", bag, "--model", UR5E, "--out", target],
            "simulate": ["simulate", UR5E, "--out", target, "--duration", "2"],
            "trajectory": ["trajectory", UR5E, "--export", read_only / "x.csv"],
            "validate": ["validate", "--model", UR5E, "--quick", "--only", "torque_prediction",
                         "--out", target],
            "demo": ["demo", "--duration", "2", "--out", target]}[command]
    err = _one_line(argv, capsys)
    assert err.startswith(f"sysid {command}: error: --")
    assert f"cannot write in {read_only} (Read-only file system)" in err, err
    assert not _files(read_only)


def test_trajectory_export_a_folder(tmp_path, capsys):
    err = _one_line(["trajectory", UR5E, "--export", tmp_path], capsys)
    assert err == f"sysid trajectory: error: --export {tmp_path} is a folder; expected a file name\n"


@pytest.mark.slow
def test_sigint_to_identify_is_exit_130_and_one_line(tmp_path, bag):
    out = tmp_path / "result"
    proc = subprocess.Popen([sys.executable, "-m", "sysid_ros.cli", "identify", str(bag), "--model",
                             str(UR5E), "--method", "pc_iv", "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    first = proc.stderr.readline()  # the first progress line: the work has started
    assert first.startswith("[sysid identify] "), first
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130
    lines = [line for line in rest.splitlines() if not line.startswith("[sysid identify] ")]
    assert lines == ["sysid identify: interrupted (nothing written)"], rest
    assert not _files(out)


@pytest.mark.slow
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_written_files_honour_the_umask(tmp_path, bag, umask, mode):
    out = tmp_path / "result"
    for argv in (["identify", str(bag), "--model", str(UR5E), "--out", str(out), "--no-plots"],
                 ["trajectory", str(UR5E), "--duration", "2", "--export", str(tmp_path / "x.csv")]):
        proc = subprocess.run([sys.executable, "-m", "sysid_ros.cli", *argv], capture_output=True, text=True,
                              timeout=600, preexec_fn=lambda: os.umask(umask))
        assert proc.returncode in (0, 3), proc.stderr
    files = [*out.iterdir(), tmp_path / "x.csv"]
    assert {p.name for p in files} >= {"result.json", "identified.xml", "identified.urdf", "x.csv"}
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in files} == {p.name: oct(mode) for p in files}
