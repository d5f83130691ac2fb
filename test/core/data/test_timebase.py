"""Irregular sampling (issue 14): a log whose stamps alternate 10/12 ms, a 1 kHz log with dropped
cycles, a log whose time column is in milliseconds. Positions are an analytic trajectory, so
velocities and accelerations have exact references; identification runs on the UR5e-like test
robot simulated at 1 kHz (noise-free) and then resampled at the irregular stamps.

Tolerances: accelerations from second differences on the regularised grid within 1 % of the
largest true acceleration (10/12 ms stamps taken as uniform are off by tens of percent); the
payload's mass within 1 % and the held-out torque error within twice the uniform log's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.interpolate import CubicSpline
from support.robots import TEST_ROBOTS

from sysid_ros.core import DataError, RobotModel
from sysid_ros.core.batch.identify import IdentifyOptions, identify
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.data.timebase import regularise
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset

pytestmark = pytest.mark.slow  # a module fixture of several seconds

W = 2 * np.pi * np.array([0.3, 0.7])  # [rad/s] two joints


def _analytic(t: np.ndarray) -> Dataset:
    q = np.sin(W * t[:, None])
    dq = W * np.cos(W * t[:, None])
    return Dataset(t, ("a", "b"), q, dq, np.cos(W * t[:, None]), source="analytic")


def _alternating(duration: float, steps=(0.010, 0.012)) -> np.ndarray:
    n = int(duration / np.mean(steps))
    return np.concatenate([[0.0], np.cumsum(np.resize(steps, n))])


def _second_difference(ds: Dataset) -> np.ndarray:
    h = ds.t[1] - ds.t[0]
    return (ds.q[2:] - 2 * ds.q[1:-1] + ds.q[:-2]) / h**2


def test_alternating_stamps_are_resampled_onto_their_mean_period():
    ds = _analytic(_alternating(10.0))
    out, report = regularise(ds)
    assert report.resampled and report.period == pytest.approx(0.011, rel=1e-3)  # mean step
    assert report.deviation == pytest.approx(0.2, rel=1e-6) and not report.bridged
    assert np.allclose(np.diff(out.t), report.period, atol=1e-12)
    true_ddq = -(W**2) * np.sin(W * out.t[1:-1, None])
    scale = np.max(np.abs(true_ddq))
    assert np.max(np.abs(_second_difference(out) - true_ddq)) < 0.01 * scale
    naive = _second_difference(ds)  # the stamps taken as uniform: the wrong grid
    assert np.max(np.abs(naive - (-(W**2) * np.sin(W * ds.t[1:-1, None])))) > 0.2 * scale
    assert f"resampled onto a uniform {1e3 * report.period:.3f} ms grid" in report.describe()


def test_dropped_cycles_are_bridged_and_longer_gaps_split():
    t = np.arange(0, 5.0, 0.001)
    keep = np.ones(t.size, dtype=bool)
    keep[1000:1007] = False  # 8 ms step: bridged (bridge_gaps 0.01)
    keep[3000:3050] = False  # 51 ms: a gap
    ds = _analytic(t[keep])
    out, report = regularise(ds, max_bridge=0.01)
    assert [round(length * 1e3, 3) for _, length in report.bridged] == [8.0]
    assert report.gaps == 1 and report.resampled
    assert [round(g.length * 1e3) for g in out.gaps()] == [51]
    assert np.allclose(out.q, np.sin(W * out.t[:, None]), atol=1e-9)
    assert "1 dropped-cycle gap(s) up to 8.0 ms bridged" in report.describe()
    # with bridging off the dropped cycles split the data as well
    out, report = regularise(ds, max_bridge=0.0)
    assert report.gaps == 2 and not report.bridged and not report.resampled and out is ds


def test_uniform_data_are_used_as_recorded():
    ds = _analytic(np.arange(0, 2.0, 0.002) + 1e-6 * np.sin(np.arange(1000)))  # stamping noise
    out, report = regularise(ds)
    assert out is ds and not report.resampled and report.jitter < 0.01
    assert "uniform, used as recorded" in report.describe()


@pytest.mark.parametrize("scale, words", [(1e3, "is the time column in milliseconds"),
                                          (1e-6, "are the times in seconds")])
def test_implausible_time_units_are_refused(scale, words):
    ds = _analytic(np.arange(0, 2.0, 0.001) * scale)
    with pytest.raises(DataError, match=words):
        regularise(ds)


@pytest.fixture(scope="module")
def run():
    model = RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml")
    payload = Payload.parse("body=wrist_3_link,mass=1.5,com=0,0.02,0.05")
    return model, payload, simulate_dataset(model, duration=20.0, seed=1, payload=payload, rate=1000.0)


def _sampled_at(ds: Dataset, t: np.ndarray) -> Dataset:
    """What a logger stamping at ``t`` records of the 1 kHz simulation (cubic through q, q̇; τ
    is piecewise constant, as a controller's zero-order hold gives)."""
    idx = np.searchsorted(ds.t, t, side="right") - 1
    return replace(ds, t=t, q=CubicSpline(ds.t, ds.q)(t), dq=CubicSpline(ds.t, ds.dq)(t), tau=ds.tau[idx],
                   command=None, meta={})


def test_a_log_with_alternating_stamps_identifies_like_a_uniform_one(run):
    model, payload, ds = run
    target = payload_target(model, "wrist_3_link")
    uniform = _sampled_at(ds, np.arange(0.0, 19.9, 0.011))
    irregular = _sampled_at(ds, _alternating(19.9)[_alternating(19.9) < 19.9])
    options = IdentifyOptions(method="ols")
    ref = identify(uniform, target, options)
    got = identify(irregular, target, options)
    off = identify(irregular, target, replace(options, preprocessing=Preprocessing(resample="off")))
    assert got.diagnostics.extra["data"]["timebase"]["resampled"]
    assert got.parameters.values[0] == pytest.approx(payload.mass, rel=0.01)
    assert got.diagnostics.relative_error < 2 * ref.diagnostics.relative_error + 0.05
    # as recorded (the wrong grid) the fit is worse than resampled
    assert off.diagnostics.relative_error > got.diagnostics.relative_error


def test_the_automatic_bridge_limit_follows_the_rate():
    """Negative max_bridge (the default): dropped cycles up to 3.5 median periods (at least 5 ms)
    are bridged, so one or two lost cycles of a 100 Hz log are not gaps; longer steps are."""
    t = np.arange(0, 10, 0.01)
    keep = np.ones(t.size, dtype=bool)
    keep[[200, 400, 401]] = False      # 20 ms and 30 ms steps: bridged
    keep[600:604] = False              # 50 ms: a gap
    q = np.sin(t[keep])[:, None]
    ds = Dataset(t[keep], ("j",), q, np.cos(t[keep])[:, None], q.copy(), source="log")
    _, report = regularise(ds)
    assert [round(1e3 * length) for _, length in report.bridged] == [20, 30]
    assert report.gaps == 1
    _, fixed = regularise(ds, max_bridge=0.005)
    assert fixed.bridged == () and fixed.gaps == 3

