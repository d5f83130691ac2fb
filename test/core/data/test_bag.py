"""rosbag2 and CSV input: real bags written and read with rosbags; bad input named clearly."""

from __future__ import annotations

import logging
import re
from dataclasses import replace

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from support.cli import sysid
from support.robots import DEFAULT_ROBOT

from sysid_ros.core import DataError, RobotModel
from sysid_ros.core.data.bag import (
    JOINT_STATE_TYPE,
    MOTOR_COMMAND_TYPE,
    BagRecording,
    TopicData,
    bag_custom_data,
    dataset_topics,
    header_stamp_ns,
    joint_state_message,
    partial_folders,
    read_bag,
    read_data,
    typestore,
    write_bag,
)
from sysid_ros.core.data.bag_recovery import recover_bag
from sysid_ros.core.data.dataset import read_csv, write_csv
from sysid_ros.core.data.stream_time import GapTracker
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset


@pytest.fixture(scope="module")
def dataset():
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    return simulate_dataset(model, duration=3.0, seed=1,
                            payload=Payload.parse("body=link_6,mass=0.4,com=0,0,0.05"))


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_round_trip(tmp_path, dataset, storage):
    path = write_bag(tmp_path / "run", dataset_topics(dataset), storage=storage, truth=dataset.truth)
    assert (path / "metadata.yaml").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    back = read_bag(path)
    assert back.joint_names == dataset.joint_names
    np.testing.assert_array_equal(back.q, dataset.q)
    np.testing.assert_array_equal(back.tau, dataset.tau)
    np.testing.assert_allclose(back.t, dataset.t, atol=1e-9)
    np.testing.assert_array_equal(back.command.kp, dataset.command.kp)
    np.testing.assert_allclose(back.command.t, dataset.command.t, atol=1e-9)
    assert back.truth["payload"]["mass"] == 0.4
    assert back.truth["parameters"] == dataset.truth["parameters"]
    with pytest.raises(DataError, match="exists"):
        write_bag(path, dataset_topics(dataset))


def test_csv_round_trip_and_numbered_columns(tmp_path, dataset):
    path = write_csv(dataset, tmp_path / "run.csv")
    back = read_data(path)
    np.testing.assert_array_equal(back.q, dataset.q)
    lines = path.read_text().splitlines()
    numbered = ["time"] + [f"{k}{i + 1}" for k in ("q", "dq", "tau") for i in range(6)]
    (tmp_path / "num.csv").write_text("\n".join([",".join(numbered), *lines[1:]]) + "\n")
    back = read_csv(tmp_path / "num.csv", joint_names=dataset.joint_names)
    np.testing.assert_array_equal(back.tau, dataset.tau)
    with pytest.raises(DataError, match="need 6 joint names"):
        read_csv(tmp_path / "num.csv")


def _write_states(path, names, rows, stamps=None):
    """JointStates logged at ``rows[k][0]`` ns, header stamps ``stamps[k]`` (default the same)."""
    def messages():
        for k, (ns, q) in enumerate(rows):
            stamp = ns if stamps is None else stamps[k]
            yield ns, joint_state_message(stamp, names, q, np.zeros(len(names)), np.ones(len(names)))

    return write_bag(path, [TopicData("/joint_states", JOINT_STATE_TYPE, messages())])


def test_bad_bags_are_named(tmp_path, dataset):
    names = ["joint1", "joint2"]
    good = [(1_000_000_000 + k * 2_000_000, np.full(2, 0.1 * k)) for k in range(20)]
    with pytest.raises(DataError, match="not found"):
        read_bag(tmp_path / "nothing")
    path = _write_states(tmp_path / "b1", names, good)
    with pytest.raises(DataError, match=r"no topic '/states'; the bag has \['/joint_states'\]"):
        read_bag(path, joint_states_topic="/states")
    nan = [(ns, np.array([0.1, np.nan])) for ns, _ in good]
    with pytest.raises(DataError, match=r"every one of the 20 samples has a non-finite position"):
        read_bag(_write_states(tmp_path / "b2", names, nan))
    stamps = [ns for ns, _ in good]
    stamps[5] = stamps[3]  # a stale header stamp, logged in order
    with pytest.raises(DataError, match=r"timestamps must increase; sample 5 at t=0\.006000 s"):
        read_bag(_write_states(tmp_path / "b3", names, good, stamps))
    gap = good[:10] + [(ns + 500_000_000, q) for ns, q in good[10:]]
    # a gap is not an error: the reader names it and the batch methods split the data there
    assert [g.describe() for g in read_bag(_write_states(tmp_path / "b4", names, gap)).gaps()] == [
        "gap of 502.0 ms after t=0.018000 s (before sample 10, 250 samples missing)"]
    ds = read_bag(path)
    with pytest.raises(DataError, match=r"joints \['joint3', 'joint4', 'joint5', 'joint6'\] of the model"):
        ds.for_model(RobotModel.from_mjcf(DEFAULT_ROBOT))
    (tmp_path / "not_a_bag").mkdir()
    with pytest.raises(DataError, match="not a readable rosbag2 bag"):
        read_bag(tmp_path / "not_a_bag")


def test_dataset_validation_messages(dataset):
    bad = replace(dataset, tau=dataset.tau.copy())
    bad.tau[11, 2] = np.inf
    with pytest.raises(DataError, match=r"tau of joint 'joint3' is inf at sample 11"):
        bad.validate()


def _joint_states(n, start_ns=0, period_ns=2_000_000, skip=()):
    names = ["joint1", "joint2"]
    return [(start_ns + k * period_ns, joint_state_message(start_ns + k * period_ns, names, [0.01 * k, 0.0],
                                                            [0.0, 0.0], [1.0, 1.0]))
            for k in range(n) if k not in skip]


def test_a_first_stamp_of_zero_is_a_valid_time(tmp_path):
    # a simulation's first joint state is stamped exactly 0, logged a little later
    msgs = [(ns + 5_000_000, msg) for ns, msg in _joint_states(30)]
    path = write_bag(tmp_path / "sim", [TopicData("/joint_states", JOINT_STATE_TYPE, msgs)])
    ds = read_bag(path)
    assert len(ds) == 30
    assert ds.t[0] == 0.0
    np.testing.assert_allclose(np.diff(ds.t), 0.002, atol=1e-12)


def test_an_unstamped_stream_falls_back_to_log_times_with_a_warning(tmp_path, caplog, dataset):
    names = ["joint1", "joint2"]
    rows = [(1_000_000_000 + k * 2_000_000, np.full(2, 0.1 * k)) for k in range(20)]
    path = _write_states(tmp_path / "driver", names, rows, stamps=[0] * len(rows))
    with caplog.at_level(logging.WARNING, logger="sysid_ros.core.data.bag"):
        ds = read_bag(path)
    np.testing.assert_allclose(ds.t, np.arange(20) * 0.002, atol=1e-12)
    assert "driver:/joint_states: not stamped (header stamp 0 twice in a row)" in caplog.text
    # MotorCommand: the same rule
    topics = dataset_topics(dataset)
    states = list(topics[0].messages)
    commands = [(ns, replace_stamp(msg, 0)) for ns, msg in topics[1].messages]
    caplog.clear()
    path = write_bag(tmp_path / "cmd", [TopicData("/joint_states", JOINT_STATE_TYPE, states),
                                        TopicData("/motor_command", MOTOR_COMMAND_TYPE, commands)])
    with caplog.at_level(logging.WARNING, logger="sysid_ros.core.data.bag"):
        back = read_bag(path)
    assert "cmd:/motor_command: not stamped (header stamp 0 twice in a row)" in caplog.text
    assert "/joint_states: not stamped" not in caplog.text
    np.testing.assert_allclose(back.command.t, dataset.command.t, atol=1e-9)


def replace_stamp(msg, ns):
    msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
    return msg


def test_header_stamps_are_read_from_cdr_bytes_of_either_byte_order():
    store = typestore()
    msg = joint_state_message(1_234_567_890_123, ["a"], [0.0], [0.0], [0.0])
    little = bytes(store.serialize_cdr(msg, JOINT_STATE_TYPE))
    big = bytes(store.serialize_cdr(msg, JOINT_STATE_TYPE, little_endian=False))
    assert little[1] == 1 and big[1] == 0
    assert header_stamp_ns(little) == header_stamp_ns(big) == 1_234_567_890_123
    assert header_stamp_ns(b"\x00\x02\x00\x00" + bytes(8)) is None  # parameter-list CDR
    assert header_stamp_ns(little[:8]) is None


def test_gaps_in_stamps_count_the_missing_messages():
    gaps = GapTracker()
    missed = [gaps.add(k * 2_000_000) for k in range(50) if k not in (10, 20, 21, 22)]
    assert sum(missed) == 4 and gaps.missing == 4
    assert gaps.add(49 * 2_000_000) == 0  # a repeated stamp is not a gap
    jitter = GapTracker()  # steps within 1.5 periods are not gaps
    for k in range(100):
        jitter.add(k * 1_000_000 + (100_000 if k % 2 else 0))
    assert jitter.missing == 0


def test_a_bag_that_cannot_be_finished_stays_recoverable(tmp_path):
    rec = BagRecording(tmp_path / "run")
    rec.add_topic("/joint_states", JOINT_STATE_TYPE)
    store = typestore()
    for ns, msg in _joint_states(100):
        rec.write("/joint_states", ns + 1, store.serialize_cdr(msg, JOINT_STATE_TYPE))
    (tmp_path / "run").mkdir()  # the final name taken by a non-empty folder: the rename fails
    (tmp_path / "run" / "other").write_text("x")
    with pytest.raises(OSError):
        rec.close()
    assert len(partial_folders(tmp_path / "run")) == 1  # nothing deleted
    (tmp_path / "run" / "other").unlink()
    (tmp_path / "run").rmdir()
    with pytest.raises(DataError, match=r"recording was interrupted; run `sysid bag recover "):
        read_bag(tmp_path / "run")
    recovered = recover_bag(tmp_path / "run")
    assert recovered.counts == {"/joint_states": 100} and recovered.gaps == {"/joint_states": 0}
    assert len(read_bag(tmp_path / "run")) == 100
    assert partial_folders(tmp_path / "run") == []


@pytest.mark.slow
@pytest.mark.parametrize("cut", [0, 37, 600])
def test_a_killed_recording_is_recovered_from_its_flushed_chunks(tmp_path, cut):
    """The writer is never closed (as after kill -9): what was flushed is recovered, once each.
    A file cut short by ``cut`` bytes (37: into the last chunk's message index, 600: into the
    last chunk, uncompressed) keeps every complete message before the cut."""
    rec = BagRecording(tmp_path / "run")
    rec.add_topic("/joint_states", JOINT_STATE_TYPE)
    rec.add_topic("/other", JOINT_STATE_TYPE)
    store = typestore()
    msgs = _joint_states(1000, start_ns=0, skip=range(500, 505))  # 5 lost upstream
    for k, (ns, msg) in enumerate(msgs):
        rec.write("/joint_states", ns + 7, store.serialize_cdr(msg, JOINT_STATE_TYPE))
        if k % 97 == 0:
            rec.flush()
    rec.flush()
    rec.write("/joint_states", 10**12, store.serialize_cdr(msgs[0][1], JOINT_STATE_TYPE))  # not flushed
    rec.set_metadata("sysid_ros.effort_lag", "0.5")  # what the recorder was told (the Damiao bridge)
    rec.save_state({"lost": {"/joint_states": 3}})
    folder = partial_folders(tmp_path / "run")[0]
    mcap = next(folder.rglob("*.mcap"))
    if cut:
        mcap.write_bytes(mcap.read_bytes()[:-cut])
    out = sysid("bag", "recover", folder)
    assert out.returncode == 0, out.stderr
    kept = int(re.search(r"/joint_states: (\d+) messages recovered, 5 missing in stamp gaps",
                         out.stdout)[1])
    assert kept == 995 if cut < 100 else 970 < kept < 995, out.stdout
    assert "/other: 0 messages recovered" in out.stdout
    custom = bag_custom_data(tmp_path / "run")
    with Reader(tmp_path / "run") as reader:
        stamps = [header_stamp_ns(raw) for _, _, raw in reader.messages()]
    assert stamps == [ns for ns, _ in msgs[:kept]]  # in order, no duplicates
    assert custom["sysid_ros.recovered./joint_states"] == str(kept)
    assert custom["sysid_ros.gaps./joint_states"] == "5"
    assert custom["sysid_ros.lost./joint_states"] == "3"
    assert custom["sysid_ros.effort_lag"] == "0.5"
    assert not folder.exists()


def test_missed_motor_replies_are_skipped_and_leave_gaps(tmp_path, caplog):
    """The Damiao bridge publishes NaN for a motor that missed its reply: those samples are
    skipped (counted in a warning) and the data is split there instead of being refused."""
    names = ["joint1", "joint2"]
    rows = [(1_000_000_000 + k * 2_000_000, np.array([0.01 * k, -0.01 * k])) for k in range(50)]
    for k in (7, 30, 31):
        rows[k] = (rows[k][0], np.array([0.01 * k, np.nan]))
    with caplog.at_level("WARNING"):
        ds = read_bag(_write_states(tmp_path / "missed", names, rows))
    assert len(ds) == 47 and np.all(np.isfinite(ds.q))
    assert "3 of 50 samples skipped (non-finite position or torque: missed motor replies)" in caplog.text
    assert [(g.index, g.missing) for g in ds.gaps()] == [(7, 1), (29, 2)]
