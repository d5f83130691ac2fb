"""The one stamp policy and the one gap rule (sysid_ros.core.data.stream_time): the batch paths (a
bag's times, a dataset's gaps) and the online ones (the session, the recorder's tracker, the nodes'
stream) report the same on the same stamps."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core import RobotModel
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.stream_time import (
    GAP_FACTOR,
    GapTracker,
    StampPolicy,
    find_gaps,
    missing_samples,
    stream_times,
)
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.online import OnlineOptions, OnlineSession

PERIOD_NS = 2_000_000  # 500 Hz
#: samples left out of a 500 Hz stream: one, three in a row, one, seven in a row
DROPPED = {40, 90, 91, 92, 150, *range(200, 207)}
N = 300


def _stamps_ns() -> np.ndarray:
    return np.array([k * PERIOD_NS for k in range(N) if k not in DROPPED], dtype=np.int64)


def _expected() -> list[tuple[float, int]]:
    """(time of the sample before the gap [s], samples missing) of the dropped runs."""
    return [(0.078, 1), (0.178, 3), (0.298, 1), (0.398, 7)]


@pytest.mark.slow
def test_the_batch_and_online_paths_report_the_same_gaps_on_the_same_stamps():
    ns = _stamps_ns()
    t = ns * 1e-9
    zeros = np.zeros((t.size, 2))
    dataset = Dataset(t=t, joint_names=("a", "b"), q=zeros, dq=zeros, tau=zeros)
    batch = [(g.t, g.missing) for g in dataset.gaps()]
    assert [(round(a, 6), m) for a, m in batch] == _expected()
    assert [(round(g.t, 6), g.missing) for g in find_gaps(t, period=PERIOD_NS * 1e-9)] == _expected()
    tracker = GapTracker()  # the recorder's: the running median of the stamps' steps
    per_stamp = [tracker.add(int(s)) for s in ns]
    at = [(round(t[k - 1], 6), m) for k, m in enumerate(per_stamp) if m]
    assert at == _expected() and tracker.missing == 12
    # the online session at the nominal rate, restarting at the same rule's gaps (gap_periods = 1.5)
    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    session = OnlineSession(arm_target(model), OnlineOptions(sample_rate=500.0, gap_periods=GAP_FACTOR))
    nq = len(model.dof_joint_names)
    events = session.push_batch(t, np.zeros((t.size, nq)), np.zeros((t.size, nq)), np.zeros((t.size, nq)))
    starts = [round(e.t, 6) for e in events if e.reason == "gap"]
    assert starts == [round(a + (m + 1) * 0.002, 6) for a, m in _expected()]  # the sample after each gap
    assert session.counters["missing"] == 12 and session.counters["gaps"] == 4
    # the default gap_periods (3) restarts only at the longer gaps; the missing samples are the same
    default = OnlineSession(arm_target(model), OnlineOptions(sample_rate=500.0))
    default.push_batch(t, np.zeros((t.size, nq)), np.zeros((t.size, nq)), np.zeros((t.size, nq)))
    assert default.counters["missing"] == 12 and default.counters["gaps"] == 2


def test_jitter_within_the_factor_is_no_gap_and_a_gap_misses_round_step_over_period_minus_one():
    steps = np.array([1.0, 1.4, 1.5, 1.6, 2.4, 2.6, 9.7])
    np.testing.assert_array_equal(missing_samples(steps, 1.0), [0, 0, 0, 1, 1, 2, 9])
    jitter = GapTracker()
    for k in range(100):
        jitter.add(k * 1_000_000 + (100_000 if k % 2 else 0))
    assert jitter.missing == 0


@pytest.mark.parametrize(("stamps", "expected", "warned"), [
    ([0, 2, 4, 6], [0, 2, 4, 6], False),  # a simulation: the first stamp is 0, a time like any other
    ([0, 0, 0, 0], [100, 103, 105, 108], True),  # a driver that does not stamp: receive times
    ([7, 0, 9, 11], [7, 0, 9, 11], False),  # stamped: a later 0 stays 0 (the session calls it stale)
    ([0], [0], False),  # one message stamped 0, then the end: a stamped sample at 0
])
def test_one_stamp_policy_for_a_bag_and_a_live_stream_cut_any_way(stamps, expected, warned, caplog):
    received = [100, 103, 105, 108][:len(stamps)]
    with caplog.at_level(logging.WARNING, logger="sysid_ros.core.data.stream_time"):
        assert stream_times(stamps, received, "bag:/joint_states").tolist() == expected
    assert ("bag:/joint_states: not stamped (header stamp 0 twice in a row)" in caplog.text) == warned
    for cut in range(len(stamps) + 1):  # live: two batches, the first ending anywhere
        lines: list[str] = []
        policy: StampPolicy[int] = StampPolicy("/joint_states", lines.append)
        items = list(zip(range(len(stamps)), stamps, received, strict=True))
        timed = policy.times(items[:cut]) + policy.times(items[cut:])
        timed = policy.release() + timed
        assert [ns for _, ns in timed] == expected and [i for i, _ in timed] == list(range(len(stamps)))
        assert len(lines) == int(warned)
