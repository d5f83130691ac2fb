"""The nodes' joint-state stream (sysid_ros.core.online.stream): names to the model's columns, one
line per refused message, effort to torque, progress; the prior a target starts from."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core import RobotModel, SysIdError
from sysid_ros.core.model.layout import BODY_FIELDS
from sysid_ros.core.online.stream import JointMessage, JointStream, load_prior


def _message(names, stamp, *, velocity=True, received=0):
    k = len(names)
    return JointMessage(tuple(names), [0.1] * k, [0.2] * k if velocity else [], [1.0 + i for i in range(k)],
                        stamp, received)


def test_the_stream_maps_names_to_the_models_columns_and_refuses_others_with_one_line():
    stream = JointStream(("j1", "j2"), scale=np.array([2.0, 3.0]), offset=np.array([0.5, 0.0]))
    batch = stream.batch([_message(("j2", "x", "j1"), 1_000), _message(("j1",), 2_000),
                          JointMessage(("j1", "j2"), [0.0, 0.0], [], [1.0], 3_000, 0),
                          _message(("j1", "j2"), 4_000, velocity=False)])
    np.testing.assert_array_equal(batch.ns, [1_000, 4_000])
    np.testing.assert_allclose(batch.tau, [[2.0 * 3.0 + 0.5, 3.0 * 1.0], [2.0 * 1.0 + 0.5, 3.0 * 2.0]])
    assert batch.dq is None  # one message without velocities: the session differentiates the batch
    assert batch.refused == (
        "joint state rejected: joints ['j2'] of the model are not in the data; the data has ['j1']",
        "joint state rejected: expected positions and efforts for the 2 names ['j1', 'j2'], got 2, 1")
    assert stream.progress_ns == 4_000
    monitor = JointStream(("j1", "j2"), velocity=True)  # the collision monitor needs velocities
    refused = monitor.batch([_message(("j1", "j2"), 5, velocity=False)]).refused
    assert refused == ("joint state rejected: expected positions, velocities and efforts for the 2 names "
                       "['j1', 'j2'], got 2, 2, 0",)

def test_a_held_first_message_counts_as_progress_at_zero():
    stream = JointStream(("j1",))
    assert len(stream.batch([_message(("j1",), 0, received=50)])) == 0
    assert stream.progress_ns == 0 and stream.stamps.holding
    assert stream.batch([], final=True).ns.tolist() == [0]


def test_a_prior_comes_from_a_result_file_of_the_batch_schema(tmp_path):
    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    assert load_prior(model, "arm", "nominal") is None and load_prior(model, "hand", "uninformative") is None
    name = model.param_names[0]
    path = tmp_path / "result.json"
    payload = {f"payload.{f}": float(k + 1) for k, f in enumerate(BODY_FIELDS)}
    path.write_text(json.dumps({"exported_parameters": {"from": "ols", "values": {name: 7.5, **payload}}}))
    theta = load_prior(model, "arm", str(path))
    assert theta[0] == 7.5 and np.array_equal(theta[1:], model.nominal[1:])
    np.testing.assert_array_equal(load_prior(model, "hand", str(path)), np.arange(1.0, 11.0))
    with pytest.raises(SysIdError, match=r"prior must be 'nominal', 'uninformative' or a result.json path, "
                                         r"got '/nowhere.json'"):
        load_prior(model, "arm", "/nowhere.json")
    path.write_text(json.dumps({"exported_parameters": {"values": {name: 7.5}}}))
    with pytest.raises(SysIdError, match=r"result.json: expected a payload's exported parameters .* missing "
                                         r"\['payload.m'"):
        load_prior(model, "hand", str(path))
    path.write_text("{}")
    with pytest.raises(SysIdError, match=r"expected a result\.json with exported_parameters\.values"):
        load_prior(model, "arm", str(path))
