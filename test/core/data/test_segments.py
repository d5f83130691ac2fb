"""Recordings with gaps and stationary ends (issue 12): split at gaps, per-segment conditioning,
stationary start and end cut.

Data: 20 s of the UR5e carrying an unknown 1 kg payload, noise-free, 500 Hz (2 ms), as in
``test/cli/test_identify_methods.py``. The gappy copy misses 8 samples after t = 6.998 s (an 18 ms step) and
4 after t = 12.998 s (a 10 ms step, which the former rule of 5 median periods let pass as if the
sampling were uniform).

Tolerance (the one of ``test/cli/test_identify_methods.py`` on the complete data): every base parameter whose
contribution to the measured torque is at least 1e-4 of the torque norm within 0.5 %.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core import DataError, RobotModel
from sysid_ros.core.batch.identify import IdentifyOptions, identify, prepare
from sysid_ros.core.data.dataset import CommandLog, Dataset
from sysid_ros.core.data.preprocessing import Preprocessing, segment
from sysid_ros.core.data.segments import split as split_at_gaps
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.report.metrics import truth_parameters
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset

pytestmark = pytest.mark.slow  # a module fixture of several seconds

MODEL = TEST_ROBOTS / "ur5e.xml"
PAYLOAD = "body=wrist_3_link,mass=1.0,com=0,0.02,0.05"
GAP_18MS = (3500, 3508)  # samples removed: 8 (t = 7.000 … 7.014 s)
GAP_10MS = (6500, 6504)  # 4 (t = 13.000 … 13.006 s)
GAP_LINES = ("gap of 18.0 ms after t=6.998000 s (before sample 3500, 8 samples missing)",
             "gap of 10.0 ms after t=12.998000 s (before sample 6492, 4 samples missing)")
REL_TOL = 0.5  # percent, on the significant base parameters


def _without(ds: Dataset, *holes: tuple[int, int]) -> Dataset:
    """``ds`` without samples ``a:b`` for every hole (the command log stays whole, as recorded)."""
    keep = np.ones(len(ds), dtype=bool)
    for a, b in holes:
        keep[a:b] = False
    return replace(ds, t=ds.t[keep], q=ds.q[keep], dq=ds.dq[keep], tau=ds.tau[keep], meta={})


@pytest.fixture(scope="module")
def complete():
    model = RobotModel.from_mjcf(MODEL)
    return simulate_dataset(model, duration=20.0, seed=0, payload=Payload.parse(PAYLOAD))


@pytest.fixture(scope="module")
def gappy(complete):
    return _without(complete, GAP_18MS, GAP_10MS)


@pytest.fixture(scope="module")
def target():
    return arm_target(RobotModel.from_mjcf(MODEL, joint_terms=("Ia",)))


@pytest.fixture(scope="module")
def truth(complete, target):
    """True base parameters and which of them are significant (on the complete data)."""
    beta_true = target.base.of(truth_parameters(complete.truth, target))
    w, rhs, _ = prepare(complete, target, Preprocessing()).rows()
    significant = np.linalg.norm(w * beta_true, axis=0) / np.linalg.norm(rhs) >= 1e-4
    assert significant.sum() >= 15
    return beta_true, significant


def _max_rel(beta, truth) -> float:
    beta_true, significant = truth
    return float(np.max(100 * np.abs(beta - beta_true)[significant] / np.abs(beta_true[significant])))


def test_two_holes_split_the_recording_into_three_segments_with_a_warning_per_gap(gappy, target, caplog):
    split = segment(gappy, Preprocessing())
    assert [g.describe() for g in split.gaps] == list(GAP_LINES)
    assert [(s.start, s.stop) for s in split.kept] == [(0, 3500), (3500, 6492), (6492, 9988)]
    assert not split.dropped and split.cut == 0
    assert [len(d) for d in split_at_gaps(gappy, min_length=2.0).datasets()] == [3500, 2992, 3496]
    assert [len(d) for d in split_at_gaps(gappy, min_length=6.5).datasets()] == [3500, 3496]
    for seg in split.datasets():  # each segment's command log covers exactly its time span
        cmd = seg.command
        assert cmd.t[0] <= seg.t[0] < cmd.t[1] and cmd.t[-1] <= seg.t[-1]

    lines: list[str] = []
    with caplog.at_level(logging.WARNING, logger="sysid_ros.core.batch.identify"):
        prep = prepare(gappy, target, Preprocessing(), progress=lines.append)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    for line, message in zip(GAP_LINES, warnings, strict=True):
        assert message == f"{gappy.source}: {line}: the recording is split there"
        assert f"warning: {message}" in lines
    assert lines[-1] == ("3 segments with 9988 of 9988 samples used (2 gaps, 0 short segments "
                         "dropped, 0 stationary samples cut at segment ends)")
    assert len(prep.segments) == 3
    # no kept sample lies within the trimmed edge (0.3 s) of a gap
    for part in prep.segments:
        t = prep.t[part.rows]
        assert t[0] - part.dataset.t[0] >= 0.3 - 1e-9 and part.dataset.t[-1] - t[-1] >= 0.3 - 2e-3


@pytest.mark.parametrize("method", ["ols", "pc_iv", "dual_metric"])
def test_gappy_recording_recovers_the_truth_like_the_complete_one(complete, gappy, target, truth, method):
    options = IdentifyOptions(method=method, max_samples=300)
    whole = identify(complete, target, options)
    split = identify(gappy, target, options)
    assert _max_rel(whole.beta, truth) < REL_TOL
    assert _max_rel(split.beta, truth) < REL_TOL, _max_rel(split.beta, truth)
    assert split.diagnostics.relative_error < 0.01  # percent: the torque is reproduced
    data = split.diagnostics.extra["data"]
    assert data["samples_used"] == 9988 and len(data["segments"]) == 3
    assert [g["missing"] for g in data["gaps"]] == [8, 4]
    if method == "pc_iv":
        assert split.solver.converged and split.consistency.consistent


def test_a_bag_with_gaps_is_read_and_identified(gappy, target, truth, tmp_path):
    from sysid_ros.core.data.bag import dataset_topics, read_bag, write_bag

    ds = read_bag(write_bag(tmp_path / "gappy", dataset_topics(gappy), truth=gappy.truth))
    assert [g.describe() for g in ds.gaps()] == list(GAP_LINES)
    result = identify(ds, target, IdentifyOptions(method="ols"))
    assert len(result.diagnostics.extra["data"]["segments"]) == 3
    assert _max_rel(result.beta, truth) < REL_TOL


def test_rows_never_straddle_a_gap(gappy, target):
    """A torque spike and a position jump on the last sample before the 18 ms gap change nothing
    after the gap, bit for bit."""
    spiked = replace(gappy, q=gappy.q.copy(), tau=gappy.tau.copy())
    spiked.tau[3499] += 1000.0  # N·m
    spiked.q[3499] += 0.5  # rad
    clean = prepare(gappy, target, Preprocessing())
    hit = prepare(spiked, target, Preprocessing())
    first, *after = zip(clean.segments, hit.segments, strict=True)
    for a, b in after:
        assert a.rows == b.rows
        for name in ("x", "y", "q", "dq", "ddq", "t"):
            np.testing.assert_array_equal(getattr(clean, name)[a.rows], getattr(hit, name)[b.rows])
    a, b = first
    assert not np.array_equal(clean.y[a.rows], hit.y[b.rows])  # the spike is in its own segment


def test_a_short_segment_is_dropped_with_a_warning(complete, target, truth, caplog):
    ds = _without(complete, (3500, 3508), (4000, 4004))  # 0.98 s between the holes
    with caplog.at_level(logging.WARNING, logger="sysid_ros.core.batch.identify"):
        result = identify(ds, target, IdentifyOptions(method="ols"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[2] == (f"{ds.source}: dropped the segment at t=7.016–7.998 s, 492 samples: "
                           "shorter than 2.00 s (1000 samples)")
    assert len(warnings) == 3  # two gaps, one drop
    data = result.diagnostics.extra["data"]
    assert data["dropped_segments"] == 1 and data["samples_used"] == 9988 - 492
    assert [round(a, 3) for a, _ in data["segments"]] == [0.0, 8.008]
    assert _max_rel(result.beta, truth) < REL_TOL


def test_no_segment_long_enough_is_a_data_error_naming_the_gaps(complete, target):
    short = complete.window(0, 1500)  # 3 s, holes at 1 s and 2 s (6 ms: gaps only when the
    ds = _without(short, (500, 502), (1000, 1002))  # bridge limit is set below them)
    with pytest.raises(DataError) as err:
        identify(ds, target, IdentifyOptions(method="ols", preprocessing=Preprocessing(
            min_segment=1.5, bridge_gaps=0.005)))
    assert str(err.value) == (
        f"{ds.source}: no segment of the recording is at least 1.50 s (750 samples) long: "
        "3 segment(s), 1496 samples; gaps: gap of 6.0 ms after t=0.998000 s (before sample 500, "
        "2 samples missing); gap of 6.0 ms after t=1.998000 s (before sample 998, 2 samples missing)")


def _held(ds: Dataset, target, seconds: float, stiction: float) -> Dataset:
    """``ds`` with ``seconds`` of its first pose held before it and of its last pose after it:
    zero velocity, gravity torque plus an unmodelled static-friction offset [N·m] per joint, the
    command holding the pose."""
    n, h = round(seconds / 0.002), 0.002
    theta = truth_parameters(ds.truth, target)
    offset = stiction * np.array([1, -1, 1, -1, 1, -1])

    def hold(k: int, times: np.ndarray):
        q = np.tile(ds.q[k], (n, 1))
        zero = np.zeros_like(q)
        y, known = target.regressor(q, zero, zero)
        tau = y @ theta + known + offset  # the true gravity torque plus stiction
        return times, q, zero if ds.has_velocity else np.full_like(q, np.nan), tau

    before = hold(0, ds.t[0] - h * np.arange(n, 0, -1))
    after = hold(-1, ds.t[-1] + h * np.arange(1, n + 1))
    t, q, dq, tau = (np.concatenate(parts) for parts in zip(before, (ds.t, ds.q, ds.dq, ds.tau), after,
                                                            strict=True))
    c = ds.command
    cmd_t = np.concatenate((before[0], c.t, after[0]))

    def pad(a: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
        return np.concatenate((np.tile(first, (n, 1)), a, np.tile(last, (n, 1))))

    zero = np.zeros(c.q_ref.shape[1])
    command = CommandLog(cmd_t, pad(c.q_ref, ds.q[0], ds.q[-1]), pad(c.dq_ref, zero, zero),
                         pad(c.tau_ff, c.tau_ff[0], c.tau_ff[-1]), pad(c.kp, c.kp[0], c.kp[-1]),
                         pad(c.kd, c.kd[0], c.kd[-1]))
    return replace(ds, t=t, q=q, dq=dq, tau=tau, command=command, meta={})


@pytest.mark.parametrize("velocity", ["measured", "differentiated"])
def test_stationary_start_and_end_are_cut(complete, target, truth, velocity):
    ds = complete if velocity == "measured" else replace(complete, dq=np.full_like(complete.dq, np.nan))
    held = _held(ds, target, 2.0, stiction=0.5)
    assert len(held) == len(ds) + 2000
    lines: list[str] = []
    options = IdentifyOptions(method="ols", progress=lines.append)
    reference = identify(ds, target, options)
    result = identify(held, target, options)
    assert lines[-2] == (f"1 segment with {len(ds)} of {len(held)} samples used (0 gaps, 0 short "
                         "segments dropped, 2000 stationary samples cut at segment ends)")
    assert result.diagnostics.extra["data"]["stationary_cut"] == 2000
    np.testing.assert_allclose(result.beta, reference.beta, rtol=1e-9, atol=1e-12)
    if velocity == "measured":  # (differentiated velocities cost accuracy, cut or not)
        assert _max_rel(result.beta, truth) < REL_TOL
    # the held rows, kept, pull the fit away (a stiction the model does not have)
    kept = identify(held, target, replace(options, preprocessing=Preprocessing(stationary_cut=False)))
    assert kept.diagnostics.extra["data"]["stationary_cut"] == 0
    assert _max_rel(kept.beta, (reference.beta, truth[1])) > 10 * REL_TOL


def test_stationary_cut_keeps_the_iv_instruments(complete, target):
    """pc_iv: the command log of the held recording, cut to the moving span, drives the same
    simulation: the estimate is unchanged."""
    held = _held(complete, target, 2.0, stiction=0.5)
    options = IdentifyOptions(method="pc_iv")
    np.testing.assert_allclose(identify(held, target, options).beta,
                               identify(complete, target, options).beta, rtol=1e-9, atol=1e-12)
