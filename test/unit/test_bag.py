"""rosbag2 and CSV input: real bags written and read with rosbags; bad input named clearly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import DEFAULT_ROBOT

from sysid_ros.core import DataError, RobotModel
from sysid_ros.core.data.bag import (
    JOINT_STATE_TYPE,
    TopicData,
    dataset_topics,
    joint_state_message,
    read_bag,
    read_data,
    write_bag,
)
from sysid_ros.core.data.dataset import read_csv, write_csv
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
    nan = list(good)
    nan[7] = (nan[7][0], np.array([0.1, np.nan]))
    with pytest.raises(DataError, match=r"q of joint 'joint2' is nan at sample 7"):
        read_bag(_write_states(tmp_path / "b2", names, nan))
    stamps = [ns for ns, _ in good]
    stamps[5] = stamps[3]  # a stale header stamp, logged in order
    with pytest.raises(DataError, match=r"timestamps must increase; sample 5 at t=0\.006000 s"):
        read_bag(_write_states(tmp_path / "b3", names, good, stamps))
    gap = good[:10] + [(ns + 500_000_000, q) for ns, q in good[10:]]
    with pytest.raises(DataError, match=r"gap of 502\.0 ms before sample 10"):
        read_bag(_write_states(tmp_path / "b4", names, gap))
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
