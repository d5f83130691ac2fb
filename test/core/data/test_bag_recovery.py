"""Corrupt bags end in one line naming the file and the byte offset, never a traceback: a seeded
loop of 100 random byte flips (1 to 200 bytes) in a real MCAP bag written by ``write_bag`` (which
seals the MCAP CRCs), and flips in a bag without CRCs (what the ``rosbags`` writer alone makes),
which must give a one-line error or a dataset that passes validation."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core.data import mcap_crc
from sysid_ros.core.data.bag import dataset_topics, read_bag, write_bag
from sysid_ros.core.errors import DataError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.synthetic import simulate_dataset

UR5E = TEST_ROBOTS / "ur5e.xml"


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    ds = simulate_dataset(RobotModel.from_mjcf(UR5E), duration=2.0, seed=2)
    return write_bag(tmp_path_factory.mktemp("bags") / "run", dataset_topics(ds), truth=ds.truth)


def _flipped(bag, tmp_path, seed: int, *, unsealed: bool = False):
    copy = shutil.copytree(bag, tmp_path / f"flip{seed}")
    file = copy / "run.mcap" if (copy / "run.mcap").exists() else next(copy.glob("*.mcap"))
    data = bytearray(file.read_bytes())
    if unsealed:  # the CRC fields back to 0: the rosbags writer's output
        _zero_crcs(data)
    rng = np.random.default_rng(seed)
    for offset in rng.integers(0, len(data), size=int(rng.integers(1, 201))):
        data[offset] ^= int(rng.integers(1, 256))
    file.write_bytes(bytes(data))
    return copy, file


def _zero_crcs(data: bytearray) -> None:
    import struct

    for _pos, op, body, _length in mcap_crc._walk(data):
        if op == 0x06:
            struct.pack_into("<I", data, body + 24, 0)
        elif op == 0x0F:
            struct.pack_into("<I", data, body, 0)
        elif op == 0x02:
            struct.pack_into("<I", data, body + 16, 0)


def test_a_written_bag_is_sealed_and_reads_back(bag):
    file = next(bag.glob("*.mcap"))
    mcap_crc.verify(file)  # no error
    data = bytearray(file.read_bytes())
    crcs = [(op, body) for _p, op, body, _l in mcap_crc._walk(data) if op in (0x06, 0x0F, 0x02)]
    assert crcs and all(int.from_bytes(data[b + (24 if op == 6 else 16 if op == 2 else 0):][:4], "little")
                        for op, b in crcs)  # every CRC field filled in
    assert len(read_bag(bag)) == 1000


@pytest.mark.parametrize("seed", range(100))
def test_flipped_bytes_give_one_line_naming_file_and_offset(bag, tmp_path, seed):
    copy, file = _flipped(bag, tmp_path, seed)
    with pytest.raises(DataError) as refused:
        read_bag(copy)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{file}: corrupt MCAP file at byte "), message


@pytest.mark.parametrize("seed", range(20))
def test_flips_in_a_bag_without_crcs_never_raise_a_traceback(bag, tmp_path, seed):
    copy, _file = _flipped(bag, tmp_path, seed, unsealed=True)
    try:
        ds = read_bag(copy)
    except DataError as exc:
        assert "\n" not in str(exc) and str(copy) in str(exc), str(exc)
    else:  # flips that hit only values: a dataset that passed validation (finite, sane, ordered)
        assert np.all(np.isfinite(ds.q)) and np.all(np.abs(ds.tau) <= 1e6) and np.all(np.diff(ds.t) > 0)


@pytest.mark.slow
def test_sysid_identify_on_a_corrupt_bag_is_one_line(bag, tmp_path):
    copy, file = _flipped(bag, tmp_path, 7)
    out = tmp_path / "result"
    proc = subprocess.run([sys.executable, "-m", "sysid_ros.cli", "identify", str(copy), "--model", str(UR5E),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"sysid identify: error: {file}: corrupt MCAP file at byte "), proc.stderr
    assert not out.exists()
