"""The effort lag (sysid_ros.core.data.effort_timing): an effort that acted half a period before its
stamp, as a Damiao MIT reply's, biases a payload estimate unless it is stated; stated, the batch
and the online estimators both recover the payload."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT

from sysid_ros.app.identify import online_effort_lag
from sysid_ros.core.batch.effort_lag_search import find_effort_lag
from sysid_ros.core.batch.identify import identify
from sysid_ros.core.batch.options import IdentifyOptions
from sysid_ros.core.data.bag import dataset_topics, read_bag, write_bag
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.effort_timing import (
    BAG_KEY,
    DAMIAO_REPLY,
    aligned_effort,
    check_effort_lag,
    declared_lag,
    online_weight,
)
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.data.preprocessing import Preprocessing, effort_lag_of
from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.online.conditioning import CausalConditioner
from sysid_ros.core.online.options import OnlineOptions
from sysid_ros.core.online.replay import replay
from sysid_ros.core.sim.plant import MitPlant
from sysid_ros.core.sim.simulation import default_gains
from sysid_ros.core.sim.synthetic import Payload, with_payload

RATE = 500.0  # [Hz] the bridge's rate in the hardware launch test: one command, one reply per period
MASS, COM = 0.8, np.array([0.02, -0.01, 0.06])  # [kg], [m] in link_6's frame


def test_aligned_effort_interpolates_at_the_stated_instant():
    t = np.arange(0.0, 1.0, 0.002)
    tau = np.column_stack([np.sin(7 * t), t**2])
    # an effort that acted half a period before its stamp: the value at t is the one stamped t + h/2
    late = np.column_stack([np.sin(7 * (t - 0.001)), (t - 0.001) ** 2])
    out = aligned_effort(t, late, 0.5)
    # linear interpolation half a step off a sample: error ≤ (h/2)²/2·max|τ''| = 2.45e-5 for sin 7t
    np.testing.assert_allclose(out[:-1], tau[:-1], atol=2.5e-5)
    assert aligned_effort(t, late, 0.0) is late
    assert online_weight(0.5) == 1.0 and online_weight(-0.5) == 0.0 and online_weight(0.0) == 0.5


def test_bad_lags_are_refused_with_the_value():
    with pytest.raises(DataError, match=r"effort_lag must be a finite number of sample periods, got nan"):
        check_effort_lag(float("nan"))
    with pytest.raises(DataError, match=r"within ±0.5 sample periods for the online estimators.*got 0.75"):
        OnlineOptions(effort_lag=0.75)
    with pytest.raises(DataError, match=r"the recording declares effort_lag must be a number.*'soon'"):
        declared_lag({"effort_lag": "soon"})
    assert declared_lag({}) is None and declared_lag({"effort_lag": "0.5"}) == 0.5
    with pytest.raises(DataError, match="effort_lag"):
        Preprocessing(effort_lag=float("inf"))


def test_the_online_conditioner_takes_the_effort_of_the_accelerations_instant():
    """Forward differences belong to mid-period: the effort paired with them is τ_{k−1} (a
    simulator's, lag −0.5), their mean (lag 0) or τ_k (a Damiao reply's, lag +0.5)."""
    t = np.arange(6) * 0.002
    q = np.zeros((6, 1))
    tau = np.arange(6.0)[:, None]
    for lag, first in ((-0.5, 0.0), (0.0, 0.5), (0.5, 1.0)):
        cond = CausalConditioner(1, RATE, 200.0, effort_lag=lag)
        out = cond.push_batch(t, q, q, tau)
        one = CausalConditioner(1, RATE, 200.0, effort_lag=lag)
        singles = [one.push(t[k], q[k], q[k], tau[k]) for k in range(6)]
        assert out[0][0] == 0.0
        # the filter starts at rest on its first input: that input is the paired effort
        assert out[4][0, 0] == pytest.approx(first)
        assert singles[1][4][0] == pytest.approx(first)
        np.testing.assert_allclose(np.array([s[4][0] for s in singles[1:]]), out[4][:, 0])


@pytest.fixture(scope="module")
def two_conventions() -> tuple[Dataset, Dataset]:
    """One 20 s run of the YAM arm with an unknown 0.8 kg payload at 500 Hz (one physics step per
    command; a cycle missed now and then: the command held 1-4 periods, then a step), recorded
    twice: each sample's effort the torque of the step *after* it (a simulator's, lag −0.5) and of
    the step *before* it (a Damiao MIT reply's, the previous command's torque, lag +0.5)."""
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    payload = Payload.parse(f"body=link_6,mass={MASS},com={','.join(map(str, COM))}")
    traj = FourierTrajectory.random(Limits.of(model), harmonics=5, period=10.0, seed=3)
    steps = int(20.0 * RATE)
    t = np.arange(steps) / RATE
    q_ref, dq_ref, _ = traj.evaluate(t)
    rng = np.random.default_rng(11)
    used = np.arange(steps)
    k = 0
    while k < steps:  # about 6 % of the cycles missed
        if rng.random() < 0.025:
            hold = int(rng.integers(1, 5))
            used[k:k + hold] = used[k - 1] if k else 0
            k += hold
        k += 1
    kp, kd = default_gains(model)
    plant = MitPlant(with_payload(model, payload), timestep=1.0 / RATE, integrator="euler")
    plant.set_state(qpos=q_ref[0], qvel=dq_ref[0])
    run = plant.run(q_ref[used], dq_ref[used], np.zeros_like(q_ref), kp, kd)
    # run.tau[k]: the torque applied over [t_k, t_{k+1}]
    names, source = model.dof_joint_names, "simulated YAM arm with a payload"
    simulator = Dataset(t[1:-1], names, run.q[1:-1], run.dq[1:-1], run.tau[1:-1], source=source)
    damiao = Dataset(t[1:-1], names, run.q[1:-1], run.dq[1:-1], run.tau[:-2], source=source)
    return simulator, damiao


def _payload(theta) -> tuple[float, np.ndarray]:
    return float(theta[0]), np.asarray(theta[1:4]) / theta[0]


def _batch(ds: Dataset, target, lag: float) -> np.ndarray:
    return np.asarray(identify(ds, target, IdentifyOptions(
        method="pc_ls", preprocessing=Preprocessing(effort_lag=lag))).parameters.values)


@pytest.mark.slow
def test_a_stated_lag_turns_one_convention_into_the_other(two_conventions):
    """The Damiao recording with its lag stated (+0.5) gives the simulator's recording's estimate
    with its own (−0.5): online the same rows exactly, in batch the same interpolated efforts (the
    last sample aside); both recover the payload within 1 % and 2 mm. Unstated (0), the batch
    estimate differs."""
    simulator, damiao = two_conventions
    target = payload_target(RobotModel.from_mjcf(DEFAULT_ROBOT), "link_6")
    batch = {lag: _batch(damiao, target, lag) for lag in (0.0, DAMIAO_REPLY)}
    # equal but for the last sample's effort (held at the end), which reaches the filtered rows
    # through the zero-phase filter's padding: ~1e-8 of parameters of 1e-4..1
    np.testing.assert_allclose(batch[DAMIAO_REPLY], _batch(simulator, target, -0.5), rtol=1e-4, atol=1e-7)
    assert np.abs(batch[0.0] - batch[DAMIAO_REPLY]).max() > 1e-5  # the lag is applied
    online = {}
    for name, ds, lag in (("damiao", damiao, DAMIAO_REPLY), ("simulator", simulator, -0.5)):
        session = replay(ds, target, OnlineOptions(method="rls_logdet", sample_rate=RATE, effort_lag=lag))
        online[name] = session.estimator.theta
    np.testing.assert_allclose(online["damiao"], online["simulator"], rtol=1e-9, atol=1e-12)
    for theta in (batch[DAMIAO_REPLY], online["damiao"]):
        mass, com = _payload(theta)
        assert mass == pytest.approx(MASS, rel=0.01)                # [kg]
        np.testing.assert_allclose(com, COM, atol=0.002)           # [m]


def test_a_bags_declaration_is_the_default(two_conventions, tmp_path):
    """The recorder writes the lag it was told into the bag; read back, it is what the batch
    methods and online replays use unless the user states another."""
    _, damiao = two_conventions
    bag = write_bag(tmp_path / "bag", dataset_topics(damiao), custom_data={BAG_KEY: "0.5"})
    declared = read_bag(bag)
    assert declared.meta["effort_lag"] == "0.5"
    assert effort_lag_of(declared, Preprocessing()) == 0.5
    assert online_effort_lag(None, declared.meta) == 0.5 and online_effort_lag(0.0, declared.meta) == 0.0
    assert online_effort_lag(None, {}) == -0.5
    assert effort_lag_of(declared, Preprocessing(effort_lag=0.0)) == 0.0
    assert effort_lag_of(damiao, Preprocessing()) == 0.0


@pytest.mark.slow
def test_the_lag_search_sees_a_one_period_shift(two_conventions):
    """``--effort-lag auto``: the least-squares residual of the batch preparation is smallest where
    each effort meets its own acceleration. For the simulator's semi-implicit Euler samples that is
    lag 0 (the positions' second difference is exactly the step's acceleration); the same run
    with each effort one step late fits best one period later."""
    simulator, damiao = two_conventions
    target = payload_target(RobotModel.from_mjcf(DEFAULT_ROBOT), "link_6")
    found = {name: find_effort_lag(ds, target, Preprocessing())
             for name, ds in (("simulator", simulator), ("damiao", damiao))}
    assert found["simulator"].lag == pytest.approx(0.0, abs=0.1), found["simulator"].describe()
    shift = found["damiao"].lag - found["simulator"].lag
    assert shift == pytest.approx(1.0, abs=0.1), found["damiao"].describe()
    residuals = dict(found["simulator"].residuals)
    assert residuals[0.0] < 0.9 * min(residuals[-0.5], residuals[0.5]), found["simulator"].describe()
    online = find_effort_lag(damiao, target, Preprocessing(), online=True)
    assert [lag for lag, _ in online.residuals] == [-0.5, -0.25, 0.0, 0.25, 0.5]
    assert online.lag == 0.5  # the edge of what the online estimators take


def test_auto_is_the_only_word_the_option_takes():
    from sysid_ros.app.identify import IdentifyRequest
    from sysid_ros.cli.identify import _effort_lag

    assert _effort_lag("auto") == "auto" and _effort_lag(" 0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match="a number of sample periods or 'auto', got 'soon'"):
        _effort_lag("soon")
    with pytest.raises(SysIdError, match="a number of sample periods or 'auto', got 'late'"):
        IdentifyRequest(data=["a.mcap"], model="m.xml", out="o", effort_lag="late")
    with pytest.raises(SysIdError, match=r"with several recordings.*state it"):
        IdentifyRequest(data=["a.mcap", "b.mcap"], model="m.xml", out="o", effort_lag="auto")
