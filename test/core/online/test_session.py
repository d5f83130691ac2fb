"""OnlineSession: one pipeline (stream checks, gaps, conditioning, rows, estimator) for the node and
the CLI. The estimate must not depend on how the stream is cut; gaps restart the filters and
windows; bad samples are counted and leave the estimate as if they had never come."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core import DataError, RobotModel
from sysid_ros.core.atomic import write_json
from sysid_ros.core.batch.identify import prepare
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.model.target import arm_target, payload_target
from sysid_ros.core.online import CausalConditioner, OnlineEstimate, OnlineOptions, OnlineSession
from sysid_ros.core.online.replay import online_result, replay
from sysid_ros.core.online.stream import load_prior
from sysid_ros.core.result import IdentificationResult
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset

PAYLOAD = Payload("hand", 5.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5.0 * 0.1**2 / 6)


@pytest.fixture(scope="module")
def run():
    """4 s of the Panda carrying 5 kg in its hand at 500 Hz, noisy torques and velocities."""
    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    ds = simulate_dataset(model, duration=4.0, seed=1, payload=PAYLOAD,
                          sensor=SensorModel(torque_noise=0.05, velocity_noise=0.002, seed=2))
    return payload_target(model, "hand"), ds


def _pushed(session: OnlineSession, t, q, dq, tau, sizes) -> list:
    """Push the stream in batches of the given sizes (cycled); return every event."""
    events, k, i = [], 0, 0
    while k < len(t):
        n = sizes[i % len(sizes)]
        events += session.push_batch(t[k:k + n], q[k:k + n], None if dq is None else dq[k:k + n],
                                     tau[k:k + n])
        k, i = k + n, i + 1
    return events


@pytest.mark.slow
@pytest.mark.parametrize("method", ["rls_logdet", "momentum", "rls"])
def test_replay_and_node_sized_batches_give_the_same_estimate(run, method):
    target, ds = run
    options = OnlineOptions(method=method, alpha=10.0, cutoff=20.0, sample_rate=ds.sample_rate)
    replayed = replay(ds, target, options, truth=PAYLOAD.params).snapshot()
    live = OnlineSession(target, options, truth=PAYLOAD.params)
    assert _pushed(live, ds.t, ds.q, ds.dq, ds.tau, sizes=[5, 1, 7, 40, 2]) == []  # a node's ticks
    est = live.snapshot()
    np.testing.assert_allclose(est.theta, replayed.theta, rtol=1e-9, atol=1e-12)
    assert est.counters == replayed.counters
    assert est.updates > 0.9 * len(ds) and est.rejected == {"nan": 0, "stale": 0, "update": 0}
    assert est.time == replayed.time and est.latest == ds.t[-1]
    assert est.divergence_to_truth == pytest.approx(replayed.divergence_to_truth, rel=1e-9)
    single = OnlineSession(target, options)
    for k in range(300):
        single.push(ds.t[k], ds.q[k], ds.dq[k], ds.tau[k])
    head = OnlineSession(target, options)
    head.push_batch(ds.t[:300], ds.q[:300], ds.dq[:300], ds.tau[:300])
    np.testing.assert_allclose(single.snapshot().theta, head.snapshot().theta, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("method", ["rls_logdet", "momentum"])
def test_one_solve_per_batch_reaches_the_estimate_of_a_solve_at_every_sample(run, method):
    """A node's session (``solve_per_batch``: a batch's rows folded in one product, one Newton
    solve at its end) ends at the estimate of a solve after every sample: the same minimiser of
    the same objective, here from an uninformative payload prior, batches of up to 0.5 s (a
    backlog's). Both stop Newton at 1e-12 of the objective (the default 1e-9 lets directions the
    data hardly determine sit anywhere within it): the objectives agree within that, the
    parameters to 1e-4 relative or 5e-6 absolute (kg·m, kg·m²: the products of inertia of a 5 kg
    payload); the same counters."""
    target, ds = run
    n = 1200
    every = OnlineSession(target, OnlineOptions(method=method, alpha=10.0, cutoff=20.0), truth=PAYLOAD.params)
    batched = OnlineSession(target, OnlineOptions(method=method, alpha=10.0, cutoff=20.0, update_rate=50.0),
                            truth=PAYLOAD.params, solve_per_batch=True)
    for session in (every, batched):
        session.estimator.core.tol = 1e-12
    assert _pushed(every, ds.t[:n], ds.q[:n], ds.dq[:n], ds.tau[:n], sizes=[1]) == []
    assert _pushed(batched, ds.t[:n], ds.q[:n], ds.dq[:n], ds.tau[:n], sizes=[7, 40, 3, 250]) == []
    a, b = every.snapshot(), batched.snapshot()
    core = batched.estimator.core
    np.testing.assert_allclose(core.omega, every.estimator.core.omega, rtol=1e-12,
                               atol=1e-12 * np.abs(core.omega).max())
    objective = [core._objective(np.array(e.theta), core._chol(np.array(e.theta))) for e in (a, b)]
    assert abs(objective[1] - objective[0]) <= 1e-12 * abs(float(core.b @ a.theta))
    np.testing.assert_allclose(b.theta, a.theta, rtol=1e-4, atol=5e-6)
    assert b.counters == a.counters and b.updates > 0.9 * n and b.time == a.time
    # (the divergence weighs most the inertia directions 2.4 s of data hardly determine)
    assert b.divergence_to_truth == pytest.approx(a.divergence_to_truth, rel=1e-2)


def test_a_node_session_with_the_ekf_takes_batches_as_a_replay_does(run):
    """The node asks every session for ``solve_per_batch``; the EKF has no rows to fold and takes
    the batch sample by sample (it ended the estimator node's processing with a TypeError)."""
    target, ds = run
    n = 300
    options = OnlineOptions(method="ekf", cutoff=20.0, sample_rate=ds.sample_rate)
    node = OnlineSession(target, options, solve_per_batch=True)
    plain = OnlineSession(target, options)
    assert not node.solve_per_batch
    assert _pushed(node, ds.t[:n], ds.q[:n], ds.dq[:n], ds.tau[:n], sizes=[7, 40, 125]) == []
    assert _pushed(plain, ds.t[:n], ds.q[:n], ds.dq[:n], ds.tau[:n], sizes=[7, 40, 125]) == []
    assert node.estimator.samples == plain.estimator.samples > 0
    np.testing.assert_array_equal(node.snapshot().theta, plain.snapshot().theta)


@pytest.mark.parametrize("method", ["rls_logdet", "momentum"])
def test_rows_folded_in_blocks_give_the_estimate_of_rows_folded_one_by_one(run, method):
    """With an ``update_rate`` and no log of every estimate (a node) the rows between two solves
    are folded in one product; the solves come at the same samples as sample by sample (a
    replay, whose log keeps every estimate), so the estimates agree to round-off (forgetting
    too), and so do the residuals and counters."""
    target, ds = run
    options = OnlineOptions(method=method, alpha=10.0, cutoff=20.0, sample_rate=ds.sample_rate,
                            update_rate=50.0, forgetting=0.999)
    replayed = replay(ds, target, options).snapshot()
    live = OnlineSession(target, options)
    assert _pushed(live, ds.t, ds.q, ds.dq, ds.tau, sizes=[5, 1, 7, 40, 2]) == []
    est = live.snapshot()
    np.testing.assert_allclose(est.theta, replayed.theta, rtol=1e-7, atol=1e-10)
    assert est.counters == replayed.counters
    assert est.residual_rms == pytest.approx(replayed.residual_rms, rel=1e-9)


def test_a_refused_row_in_a_folded_batch_is_counted_alone(run):
    target, ds = run
    tau = ds.tau.copy()
    tau[1000, 2] = 1e15  # a corrupt torque: implausible rows while it is in the low-pass
    session = OnlineSession(target, OnlineOptions(alpha=10.0, cutoff=20.0, update_rate=50.0),
                            solve_per_batch=True)
    events = _pushed(session, ds.t, ds.q, ds.dq, tau, sizes=[50])
    est = session.snapshot()
    assert est.rejected["update"] > 0 and any(e.reason == "update" for e in events)
    assert "implausible" in next(e.detail for e in events if e.reason == "update")
    assert est.updates + est.rejected["update"] == est.conditioned and est.consistent


def test_the_estimate_carries_its_diagnostics(run):
    target, ds = run
    session = OnlineSession(target, OnlineOptions(alpha=10.0, cutoff=20.0))
    empty = session.snapshot()
    assert empty.updates == 0 and empty.rank == 0 and np.isnan(empty.time) and np.isnan(empty.std).all()
    assert np.isnan(empty.divergence_to_truth) and empty.divergence_to_prior == pytest.approx(0.0, abs=1e-9)
    session.push_batch(ds.t, ds.q, ds.dq, ds.tau)
    est = session.snapshot()
    assert isinstance(est, OnlineEstimate) and est.names[0] == "payload.m" and est.target == "hand"
    assert est.rank == 10 and 1.0 <= est.condition_number < 1e6 and np.all(np.isfinite(est.std))
    assert est.consistent and est.theta[0] == pytest.approx(5.0, rel=0.02)
    assert np.isnan(est.divergence_to_truth) and est.divergence_to_prior > 1.0
    np.testing.assert_allclose(est.beta, target.base.of(est.theta))
    session.truth = PAYLOAD.params
    truth = target.divergence(est.theta, PAYLOAD.params)
    assert np.isfinite(truth) and session.snapshot().divergence_to_truth == pytest.approx(truth)
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.updates = 0
    with pytest.raises(ValueError, match="read-only"):
        est.theta[0] = 1.0
    session.push_batch(ds.t[-1:] + 1e-3, ds.q[-1:], ds.dq[-1:], ds.tau[-1:])
    assert est.received == len(ds)  # a snapshot does not follow later pushes
    rls = OnlineSession(target, OnlineOptions(method="rls", cutoff=20.0))
    rls.push_batch(ds.t, ds.q, ds.dq, ds.tau)
    assert rls.snapshot().rank == 10  # RLS keeps the data's information too


@pytest.mark.slow
def test_an_online_estimate_is_the_batch_paths_typed_result(run, tmp_path):
    """OnlineEstimate.to_result: result.json's schema (what ``sysid identify`` writes), the online
    figures under diagnostics["online"]; saved, it is a prior the next session can start from."""
    target, ds = run
    options = OnlineOptions(cutoff=20.0)
    session = OnlineSession(target, options)
    session.push_batch(ds.t, ds.q, ds.dq, ds.tau)
    est = session.snapshot()
    result = session.result(est)
    assert isinstance(result, IdentificationResult)
    assert result.method == "rls_logdet" and result.target == "hand"
    assert result.joint_names == target.model.dof_joint_names and result.consistent == est.consistent
    doc = result.as_dict()
    assert set(doc) == {"method", "base_parameters", "base", "diagnostics", "joint_names", "parameters",
                        "exported_parameters"}
    assert doc["exported_parameters"] == {"from": "rls_logdet",
                                          "values": dict(zip(est.names, map(float, est.theta), strict=True))}
    online = doc["diagnostics"]["online"]
    assert online["counters"] == est.counters and online["options"] == options.as_dict()
    assert doc["diagnostics"]["rank"] == est.rank == 10 and doc["diagnostics"]["n_samples"] == est.updates
    np.testing.assert_array_equal(result.parameters.std, est.std)
    # the CLI's replay of the same data writes the same figures (its own add the fit's)
    replayed = online_result(prepare(ds, target, Preprocessing()), replay(ds, target, options).estimator)
    assert doc["method"] == replayed.method and set(doc) <= set(replayed.as_dict())
    shared = set(replayed.diagnostics.extra["online"]) - {"update_time_us"}
    assert shared <= set(online), shared - set(online)
    same = ("estimator", "regression", "updates", "rejected")
    assert {k: online[k] for k in same} == {k: replayed.diagnostics.extra["online"][k] for k in same}
    np.testing.assert_allclose(result.parameters.values, replayed.parameters.values, rtol=1e-9, atol=1e-12)
    path = write_json(tmp_path / "result.json", doc)
    np.testing.assert_array_equal(load_prior(target.model, "hand", str(path)), est.theta)
    with pytest.raises(DataError, match=r"expected the target of this estimate \(10 parameters"):
        est.to_result(arm_target(target.model))


@pytest.mark.slow
def test_bad_samples_are_counted_and_leave_the_estimate_untouched(run):
    """NaN values, a NaN time, a repeated time and an older sample, inserted into a clean stream:
    each is counted by reason and the estimate is exactly the clean stream's."""
    target, ds = run
    options = OnlineOptions(method="momentum", alpha=10.0, cutoff=20.0)
    clean = OnlineSession(target, options)
    clean.push_batch(ds.t, ds.q, ds.dq, ds.tau)
    t, q, dq, tau = (list(a) for a in (ds.t, ds.q, ds.dq, ds.tau))
    bad = {  # index -> (time, which signal gets NaN)
        400: (ds.t[400] - 1e-4, "tau"), 401: (ds.t[400] + 1e-4, "dq"), 900: (np.nan, None),
        1200: (ds.t[1199], None), 1500: (ds.t[700], None),
    }
    for k in sorted(bad, reverse=True):
        when, signal = bad[k]
        row = {"t": when, "q": ds.q[k].copy(), "dq": ds.dq[k].copy(), "tau": ds.tau[k].copy()}
        if signal:
            row[signal][3] = np.nan
        for name, seq in (("t", t), ("q", q), ("dq", dq), ("tau", tau)):
            seq.insert(k, row[name])
    session = OnlineSession(target, options)
    events = _pushed(session, np.array(t), np.array(q), np.array(dq), np.array(tau), sizes=[5])
    est = session.snapshot()
    assert est.rejected == {"nan": 3, "stale": 2, "update": 0}
    assert est.received == len(ds) + 5 and est.accepted == len(ds) and est.gaps == 0
    counted = {reason: sum(e.count for e in events if e.reason == reason) for reason in ("nan", "stale")}
    assert counted == {"nan": 3, "stale": 2}
    np.testing.assert_allclose(est.theta, clean.snapshot().theta, rtol=1e-9, atol=1e-12)  # round-off
    session.reject("names", 2)  # what a caller refused before pushing
    assert session.snapshot().rejected["names"] == 2 and session.counters["rejected_names"] == 2


@pytest.mark.slow
def test_a_gap_restarts_the_filters_and_windows(run):
    """A 40 ms hole in a 500 Hz stream: one gap event, the filters settle again after it, and the
    estimate equals the estimator fed by two independently conditioned segments (momentum windows
    restarted between them)."""
    target, ds = run
    options = OnlineOptions(method="momentum", alpha=10.0, cutoff=20.0)
    keep = np.r_[0:1000, 1020:len(ds)]
    session = OnlineSession(target, options)
    events = _pushed(session, ds.t[keep], ds.q[keep], ds.dq[keep], ds.tau[keep], sizes=[5, 13])
    assert [(e.reason, e.t) for e in events] == [("gap", ds.t[1020])] and "42.0 ms" in events[0].detail
    est = session.snapshot()
    assert est.gaps == 1 and est.counters["gaps"] == 1

    reference = OnlineSession(target, options).estimator  # the same estimator, fed by hand
    settled = 0
    for part in (slice(0, 1000), slice(1020, len(ds))):
        cond = CausalConditioner(7, 500.0, 20.0, settle="auto")
        out = cond.push_batch(ds.t[part], ds.q[part], ds.dq[part], ds.tau[part])
        reference.rows.restart()
        reference.push_batch(*out, log=False)
        settled += len(out[0])
    assert est.conditioned == settled < len(keep) - 2 * round(cond.settle * 500.0)
    np.testing.assert_allclose(est.theta, reference.theta, rtol=1e-9, atol=1e-12)
    filtered_across = OnlineSession(target, dataclasses.replace(options, gap_periods=30.0))
    filtered_across.push_batch(ds.t[keep], ds.q[keep], ds.dq[keep], ds.tau[keep])
    assert filtered_across.snapshot().gaps == 0
    assert not np.allclose(filtered_across.snapshot().theta, est.theta, rtol=1e-6)


@pytest.mark.slow
def test_rows_the_estimator_refuses_are_counted(run):
    target, ds = run
    tau = ds.tau.copy()
    tau[1000, 2] = 1e15  # a corrupt torque: implausible rows while it is in the low-pass
    session = OnlineSession(target, OnlineOptions(alpha=10.0, cutoff=20.0))
    events = _pushed(session, ds.t, ds.q, ds.dq, tau, sizes=[50])
    est = session.snapshot()
    assert est.rejected["update"] > 0 and any(e.reason == "update" for e in events)
    assert "implausible" in next(e.detail for e in events if e.reason == "update")
    assert est.updates + est.rejected["update"] == est.conditioned and est.consistent


def test_options_are_checked_in_one_place(run):
    target, ds = run
    for bad, match in (({"method": "ukf"}, "method must be one of"), ({"cutoff": 0.0}, "cutoff must be > 0"),
                       ({"forgetting": 1.5}, r"forgetting must be in \(0, 1\]"),
                       ({"gap_periods": 0.5}, "gap_periods must be > 1"),
                       ({"weighting": "robust"}, "weighting must be one of"),
                       ({"sample_rate": float("nan")}, "sample_rate must be > 0")):
        with pytest.raises(DataError, match=match):
            OnlineOptions(**bad)
    options = OnlineOptions(cutoff=400.0, sample_rate=500.0)
    assert options.effective_cutoff == 225.0 and options.max_step == pytest.approx(0.006)
    assert OnlineOptions(method="momentum").regression == "momentum"
    assert OnlineOptions(method="rls").estimator == "rls"
    session = OnlineSession(target, OnlineOptions(cutoff=5.0))
    assert session.settle == pytest.approx(1.0 / 5.0, rel=0.3)
    with pytest.raises(DataError, match=r"expected tau of shape \(2, 7\)"):
        session.push_batch(ds.t[:2], ds.q[:2], None, ds.tau[:2, :6])
    with pytest.raises(DataError, match="true parameters of shape"):
        session.truth = np.zeros(3)


def test_cli_options_are_the_session_options():
    """``sysid identify`` exposes every session option with the session's defaults (the node
    declares the same names); the sample rate defaults to the data's."""
    from sysid_ros.cli import build_parser
    from sysid_ros.cli.identify import _online_options

    base = ["identify", "bag", "--model", "m.xml", "--out", "o"]
    args = build_parser().parse_args([*base, "--method", "momentum"])
    assert _online_options(args, 1000.0) == OnlineOptions(method="momentum", sample_rate=1000.0)
    args = build_parser().parse_args([*base, "--method", "rls", "--cutoff", "5", "--gap-periods", "10",
                                      "--sample-rate", "250", "--weight-memory", "2"])
    options = _online_options(args, 1000.0)
    assert (options.cutoff, options.gap_periods, options.sample_rate) == (5.0, 10.0, 250.0)
    assert options.weight_memory == 2.0 and options.method == "rls"


def _with_hold(ds, at: int, seconds: float, bias: float):
    """The stream with the arm held still for ``seconds`` after sample ``at``: positions frozen,
    velocities 0, torques off by ``bias`` on every joint (static friction holding the arm)."""
    h = 1.0 / ds.sample_rate
    n = round(seconds / h)
    t = np.r_[ds.t[:at], ds.t[at - 1] + h * np.arange(1, n + 1), ds.t[at:] + n * h]
    q = np.r_[ds.q[:at], np.repeat(ds.q[at - 1:at], n, axis=0), ds.q[at:]]
    dq = np.r_[ds.dq[:at], np.zeros((n, ds.dq.shape[1])), ds.dq[at:]]
    tau = np.r_[ds.tau[:at], np.repeat(ds.tau[at - 1:at] + bias, n, axis=0), ds.tau[at:]]
    return t, q, dq, tau, n


@pytest.mark.slow
def test_stationary_samples_add_no_rows_however_the_stream_is_cut(run):
    """A 1 s hold with a 2 N·m static-friction torque: its samples are counted as stationary and
    add no row; the counts and the estimate are the same for any batch cut (the plain RLS is
    linear, so the comparison is exact); ``stationary_cut=False`` feeds every row."""
    target, ds = run
    t, q, dq, tau, n = _with_hold(ds, 1000, 1.0, 2.0)
    options = OnlineOptions(method="rls", cutoff=20.0, sample_rate=ds.sample_rate)
    whole = OnlineSession(target, options)
    whole.push_batch(t, q, dq, tau)
    cut = OnlineSession(target, options)
    assert _pushed(cut, t, q, dq, tau, sizes=[3, 1, 250, 17, 600]) == []
    est, reference = cut.snapshot(), whole.snapshot()
    np.testing.assert_allclose(est.theta, reference.theta, rtol=1e-9, atol=1e-12)
    assert est.counters == reference.counters
    # the hold, less the filter's few samples of decaying velocity at each end
    assert n - 40 <= est.stationary <= n and est.updates == est.conditioned - est.stationary, est.counters
    kept = OnlineSession(target, dataclasses.replace(options, stationary_cut=False))
    kept.push_batch(t, q, dq, tau)
    assert kept.snapshot().stationary == 0 and kept.snapshot().updates == est.conditioned


@pytest.mark.slow
def test_samples_missing_from_the_stream_are_counted(run):
    """Steps of k nominal periods miss k − 1 samples: one lost sample (not a gap) and five lost
    in a row (a gap: the filters restart)."""
    target, ds = run
    keep = np.ones(len(ds), dtype=bool)
    keep[[300]] = False
    keep[600:605] = False
    session = OnlineSession(target, OnlineOptions(sample_rate=ds.sample_rate))
    events = session.push_batch(ds.t[keep], ds.q[keep], ds.dq[keep], ds.tau[keep])
    est = session.snapshot()
    assert (est.missing, est.gaps) == (6, 1)
    assert [e.reason for e in events] == ["gap"] and "gap of 12.0 ms" in events[0].detail
