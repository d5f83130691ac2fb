"""The bag reader's CDR column path (``sysid_ros.core.data.cdr``) against rosbags' own
deserialisation, message by message and field by field (bit for bit, NaN included), on real bags:
written by ``write_bag`` (rosbags' serialiser) and by ``BagRecording`` (the recorder's writer) from
messages serialised by rclpy (the middleware's type support, which leaves alignment padding
uninitialised), MCAP and sqlite3."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from rosbags.serde import SerdeError

from sysid_ros.core import DataError
from sysid_ros.core.data.bag import (
    JOINT_STATE_TYPE,
    MOTOR_COMMAND_TYPE,
    BagRecording,
    TopicData,
    joint_state_message,
    motor_command_message,
    read_bag,
    typestore,
    write_bag,
)
from sysid_ros.core.data.cdr import MAX_LAYOUTS, joint_array_fields, read_joint_arrays

NAN = float("nan")
ORDER_A = ["j1", "j2", "j3"]
ORDER_B = ["j3", "j1", "j2"]  # the same joints in another order


def _raws(path, topic):
    with Reader(path) as reader:
        conns = [c for c in reader.connections if c.topic == topic]
        return [bytes(raw) for _, _, raw in reader.messages(connections=conns)]


def _assert_same_as_rosbags(groups, raws, msgtype):
    """Every message of ``groups`` equals rosbags' deserialisation of ``raws``: stamp, names and
    each array field (length and bits)."""
    store = typestore()
    fields = joint_array_fields(store, msgtype)
    seen = np.zeros(len(raws), dtype=int)
    for g in groups:
        for row, k in enumerate(g.index):
            msg = store.deserialize_cdr(raws[k], msgtype)
            seen[k] += 1
            assert g.names == tuple(msg.name), k
            assert g.stamps[row] == msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            for field, array in zip(fields, g.arrays, strict=True):
                expected = np.asarray(getattr(msg, field), dtype=np.float64)
                assert array[row].tobytes() == expected.tobytes(), (k, field)
    assert np.all(seen == 1)  # every message exactly once


def _state_messages():
    """Joint states in three layouts, with NaN efforts, missing velocities and a frame id."""
    rng = np.random.default_rng(3)
    out = []
    for k in range(40):
        ns = 1_700_000_000_123_456_789 + k * 1_000_123
        names = ORDER_A if k < 30 else ORDER_B
        q, dq, tau = rng.normal(size=(3, 3))
        if k in (4, 17):
            tau[1] = NAN  # a motor that missed its reply
        if 20 <= k < 25:
            dq = np.zeros(0)  # a driver that publishes no velocity
        msg = joint_state_message(ns, names, q, dq, tau)
        if k >= 35:
            msg.header.frame_id = "base_link"
        out.append((ns, msg))
    return out


def _command_messages(ns0=1_700_000_000_123_456_789):
    """Motor commands naming the joints in several orders, some without gains, NaN feed-forward."""
    rng = np.random.default_rng(4)
    out = []
    for k in range(30):
        ns = ns0 + k * 1_000_123
        names = (ORDER_A, ORDER_B, ["j2", "j3", "j1"])[k % 3]
        q, dq, tau, kp, kd = rng.normal(size=(5, 3))
        if k % 7 == 0:
            kp, kd = np.zeros(0), np.zeros(0)  # the receiver's default gains
        if k == 11:
            tau[2] = NAN
        out.append((ns, motor_command_message(ns, names, q, dq, tau, kp, kd)))
    return out


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_columns_equal_rosbags_on_a_written_bag(tmp_path, storage):
    path = write_bag(tmp_path / "bag", [
        TopicData("/joint_states", JOINT_STATE_TYPE, _state_messages()),
        TopicData("/motor_command", MOTOR_COMMAND_TYPE, _command_messages())], storage=storage)
    store = typestore()
    for topic, msgtype, layouts in (("/joint_states", JOINT_STATE_TYPE, 4),
                                    ("/motor_command", MOTOR_COMMAND_TYPE, 6)):
        raws = _raws(path, topic)
        groups = read_joint_arrays(raws, store, msgtype)
        _assert_same_as_rosbags(groups, raws, msgtype)
        # one group per layout (names, array lengths, frame id): read as columns, not one by one
        assert len(groups) == layouts, topic
        assert [int(g.index[0]) for g in groups] == sorted(int(g.index[0]) for g in groups)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_columns_equal_rosbags_on_middleware_serialised_messages(tmp_path, storage):
    serialization = pytest.importorskip("rclpy.serialization")
    msgs = pytest.importorskip("sensor_msgs.msg")
    rng = np.random.default_rng(5)
    # frame ids and names of lengths that leave alignment padding, which the middleware's
    # serialiser does not initialise: messages of one layout differ in their padding bytes
    names = ["a", "elbow", "wrist_3_joint"]
    recording = BagRecording(tmp_path / "rec", storage=storage)
    recording.add_topic("/joint_states", JOINT_STATE_TYPE)
    for k in range(60):
        msg = msgs.JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = 100 + k // 7, (k * 142_857_143) % 1_000_000_000
        msg.header.frame_id = "x" if k < 50 else "base"
        msg.name = names
        msg.position, msg.velocity, msg.effort = (rng.normal(size=3).tolist() for _ in range(3))
        if k % 9 == 0:
            msg.effort = [msg.effort[0], NAN, msg.effort[2]]
        recording.write("/joint_states", 1_000_000 * k, serialization.serialize_message(msg))
    path = recording.close()
    raws = _raws(path, "/joint_states")
    groups = read_joint_arrays(raws, typestore(), JOINT_STATE_TYPE)
    _assert_same_as_rosbags(groups, raws, JOINT_STATE_TYPE)
    assert len(groups) == 2  # two frame ids; the padding bytes do not split a layout
    ds = read_bag(path)  # samples with a NaN effort are skipped (missed motor replies)
    reference = [typestore().deserialize_cdr(raw, JOINT_STATE_TYPE) for raw in raws]
    kept = [m for m in reference if np.all(np.isfinite(m.effort))]
    assert len(ds) == len(kept) == 53
    np.testing.assert_array_equal(ds.q, [m.position for m in kept])
    np.testing.assert_array_equal(ds.dq, [m.velocity for m in kept])
    np.testing.assert_array_equal(ds.tau, [m.effort for m in kept])


def test_what_the_columns_do_not_read_goes_through_rosbags(tmp_path):
    store = typestore()
    # big-endian CDR: not read as columns
    big = [bytes(store.serialize_cdr(msg, JOINT_STATE_TYPE, little_endian=False))
           for _, msg in _state_messages()[:5]]
    groups = read_joint_arrays(big, store, JOINT_STATE_TYPE)
    _assert_same_as_rosbags(groups, big, JOINT_STATE_TYPE)
    assert len(groups) == 5  # one message each
    # a new layout every message (names of growing length): columns for the first MAX_LAYOUTS
    changing = [bytes(store.serialize_cdr(joint_state_message(k, ["j" * (k + 1)], [k], [k], [NAN]),
                                          JOINT_STATE_TYPE)) for k in range(MAX_LAYOUTS + 8)]
    groups = read_joint_arrays(changing, store, JOINT_STATE_TYPE)
    _assert_same_as_rosbags(groups, changing, JOINT_STATE_TYPE)
    # a message cut short: rosbags' own error, as before
    with pytest.raises(SerdeError, match="Invalid sequence length"):
        read_joint_arrays([big[0], bytes(store.serialize_cdr(_state_messages()[0][1],
                                                             JOINT_STATE_TYPE))[:-9]],
                          store, JOINT_STATE_TYPE)
    with pytest.raises(ValueError, match="not a header, string\\[\\] name and float64 arrays"):
        read_joint_arrays([], store, "std_msgs/msg/Header")


def test_commands_are_matched_by_name_and_read_only_when_asked(tmp_path, caplog):
    states = [(ns, msg) for ns, msg in _state_messages()[:20]]  # ORDER_A, one layout change
    commands = _command_messages()
    path = write_bag(tmp_path / "bag", [TopicData("/joint_states", JOINT_STATE_TYPE, states),
                                        TopicData("/motor_command", MOTOR_COMMAND_TYPE, commands)])
    with caplog.at_level(logging.WARNING):
        ds = read_bag(path)
    assert "skipped commands: 1 non-finite targets" in caplog.text
    used = [msg for _, msg in commands if np.all(np.isfinite(msg.effort))]
    assert len(ds.command.t) == len(used) == 29
    for k, msg in enumerate(used):
        cols = [list(msg.name).index(j) for j in ds.joint_names]
        np.testing.assert_array_equal(ds.command.q_ref[k], msg.position[cols])
        np.testing.assert_array_equal(ds.command.tau_ff[k], msg.effort[cols])
        expected_kp = msg.kp[cols] if len(msg.kp) else np.full(3, NAN)
        np.testing.assert_array_equal(ds.command.kp[k], expected_kp)
    np.testing.assert_allclose(ds.command.t[0], 0.0, atol=1e-12)
    # commands nobody can use: an error when read, nothing when the method does not need them
    unusable = [(ns, motor_command_message(ns, ["other"], [0.0], [0.0], [0.0], [], []))
                for ns, _ in states]
    path = write_bag(tmp_path / "bad_commands", [
        TopicData("/joint_states", JOINT_STATE_TYPE, states),
        TopicData("/motor_command", MOTOR_COMMAND_TYPE, unusable)])
    with pytest.raises(DataError, match=r"no usable command: 20 not naming joints \['j1', 'j2', 'j3'\]"):
        read_bag(path)
    assert read_bag(path, commands=False).command is None


def test_a_topic_changing_its_joints_is_named_at_the_first_changed_sample(tmp_path):
    msgs = _state_messages()  # ORDER_B from sample 30 on
    path = write_bag(tmp_path / "bag", [TopicData("/joint_states", JOINT_STATE_TYPE, msgs)])
    with pytest.raises(DataError, match=r"sample 30 names joints \['j3', 'j1', 'j2'\], the first "
                       r"sample named \['j1', 'j2', 'j3'\]"):
        read_bag(path)
    short = [(ns, joint_state_message(ns, ORDER_A, [0.0, 1.0, 2.0], [], [1.0, 2.0] if k == 7
                                      else [1.0, 2.0, 3.0])) for k, (ns, _) in enumerate(msgs[:10])]
    path = write_bag(tmp_path / "short", [TopicData("/joint_states", JOINT_STATE_TYPE, short)])
    with pytest.raises(DataError, match="sample 7 has 3 positions and 2 efforts for 3 joints"):
        read_bag(path)


def test_the_command_line_reads_commands_for_the_iv_methods_only(tmp_path, capsys):
    from support.robots import TEST_ROBOTS

    from sysid_ros.cli import main

    states = _state_messages()[:20]
    unusable = [(ns, motor_command_message(ns, ["other"], [0.0], [0.0], [0.0], [], []))
                for ns, _ in states]
    bag = write_bag(tmp_path / "bag", [TopicData("/joint_states", JOINT_STATE_TYPE, states),
                                       TopicData("/motor_command", MOTOR_COMMAND_TYPE, unusable)])
    argv = ["identify", str(bag), "--model", str(TEST_ROBOTS / "ur5e.xml"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--method", "pc_iv"]) == 1
    assert "no usable command: 20 not naming joints ['j1', 'j2', 'j3']" in capsys.readouterr().err
    # ols never reads them: it gets as far as matching the bag's joints to the model's
    assert main([*argv, "--method", "ols"]) == 1
    err = capsys.readouterr().err
    assert "usable command" not in err and "of the model are not in the data" in err, err
