"""Momentum regression on an arm it was not tuned on (issue 15): a Kinova-Gen3-like 7-DOF arm
(``test/robots/gen3.xml``) carries an unknown 3 kg payload on its last body, and the simulated run
is replayed as ``sysid identify --method momentum --payload-only bracelet_link`` replays a bag.

Recordings at 500 Hz of one excitation: physics at 4 kHz (a continuous-time arm sampled at 500 Hz,
where the momentum balance holds to the trapezoidal rule's accuracy) and physics at the 500 Hz
sample rate, the issue's bag (MuJoCo's semi-implicit Euler steps: the trapezoidal rule is off by a
relative ~1e-3 there, more than a payload this compact can take, and the rows are the balance
summed over the Euler steps instead). ``momentum_scheme`` "auto" must find which from the data."""

from __future__ import annotations

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core import RobotModel
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.model.consistency import pseudo_inertia
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.online import OnlineOptions
from sysid_ros.core.online.replay import replay
from sysid_ros.core.sim.plant import SensorModel
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset

#: 3 kg solid cube of 5 cm, CoM off every axis of the bracelet's frame: its pseudo-inertia's
#: smallest eigenvalue (m s²/12 = 6.25e-4 kg·m²) is 2e-4 of its trace — close to the boundary
PAYLOAD = Payload("bracelet_link", 3.0, np.array([0.01, -0.02, -0.08]), np.eye(3) * 3.0 * 0.05**2 / 6)
RATE = 500.0  # Hz, the recording


@pytest.fixture(scope="module")
def gen3() -> RobotModel:
    return RobotModel.from_mjcf(TEST_ROBOTS / "gen3.xml")


def _recording(model: RobotModel, physics_rate: float, duration: float = 10.0,
               sensor: SensorModel | None = None) -> Dataset:
    """``duration`` [s] with the payload, physics at ``physics_rate`` [Hz], every sample at 500 Hz kept."""
    ds = simulate_dataset(model, duration=duration, seed=0, payload=PAYLOAD, rate=physics_rate, sensor=sensor)
    every = round(physics_rate / RATE)
    return Dataset(ds.t[::every], ds.joint_names, ds.q[::every], ds.dq[::every], ds.tau[::every],
                   source=f"gen3, physics at {physics_rate:g} Hz")


def _replayed(model: RobotModel, ds: Dataset, method: str, **options):
    """(final estimate, information trace, momentum windows per scheme) of the CLI's replay with
    its default options (and ``options``)."""
    session = replay(ds, payload_target(model, "bracelet_link"), OnlineOptions(method=method, **options),
                     truth=PAYLOAD.params, progress=lambda _: None)
    windows = getattr(session.estimator.rows, "windows", None)
    return session.snapshot(), float(np.trace(session.estimator.information)), windows


def _smallest_relative_eigenvalue(theta: np.ndarray) -> float:
    """λ_min(J) / tr(J) of the payload's pseudo-inertia (truth: 2.1e-4)."""
    j = pseudo_inertia(theta)
    return float(np.linalg.eigvalsh(j)[0] / np.trace(j))


@pytest.mark.slow
def test_momentum_recovers_a_compact_payload_on_a_gen3_sampled_from_continuous_physics(gen3):
    est, _, windows = _replayed(gen3, _recording(gen3, 4000.0), "momentum")
    assert windows == {"trapezoidal": 20, "euler": 0}  # the kinematics say: continuous motion
    assert est.consistent and est.rejected == {"nan": 0, "stale": 0, "update": 0}
    assert est.divergence_to_truth < 0.05  # measured 0.038
    assert est.theta[0] == pytest.approx(3.0, rel=1e-3)
    assert _smallest_relative_eigenvalue(est.theta) > 0.5 * _smallest_relative_eigenvalue(PAYLOAD.params)


@pytest.mark.slow
def test_momentum_on_the_issues_bag_30_s_simulated_at_the_recording_rate(gen3):
    """The issue's run: 30 s, physics at the 500 Hz recording rate. The rows are the balance summed
    over the Euler steps (exact for these samples), chosen from the data; a window weighs as its
    torque samples do (3/(σ²T²); 1/(σ²hT) each had counted ~T/(3h) = 83 times that, Ω 56 times
    the force rows')."""
    ds = _recording(gen3, RATE, duration=30.0)
    momentum, info_momentum, windows = _replayed(gen3, ds, "momentum")
    force, info_force, _ = _replayed(gen3, ds, "rls_logdet")
    assert windows == {"trapezoidal": 0, "euler": 60}
    assert 1 / 3 < info_momentum / info_force < 3  # measured 0.68 (was 56)
    assert momentum.consistent and force.consistent
    assert momentum.divergence_to_truth < 0.05  # measured 0.003 (2.8 with trapezoidal rows, 25 in the issue)
    assert _smallest_relative_eigenvalue(momentum.theta) > 0.5 * _smallest_relative_eigenvalue(PAYLOAD.params)
    assert momentum.theta[0] == pytest.approx(3.0, rel=1e-4)
    np.testing.assert_allclose(momentum.theta[1:4], PAYLOAD.params[1:4], atol=1e-4)  # m·c [kg·m]
    assert force.divergence_to_truth < 0.05  # measured 0.003
    # forcing the trapezoidal rule on these samples is what the issue saw: off the truth
    trapezoidal, _, _ = _replayed(gen3, ds, "momentum", momentum_scheme="trapezoidal")
    assert trapezoidal.divergence_to_truth > 10 * momentum.divergence_to_truth  # measured 2.8


@pytest.mark.slow
def test_momentum_with_sensor_noise_beats_force_rows_on_the_issues_bag(gen3):
    """Encoder, velocity and torque noise (1e-5 rad, 1e-3 rad/s, 0.02 N·m), 30 s at 500 Hz: the
    momentum rows' velocity differences telescope, where differenced accelerations amplify noise."""
    ds = _recording(gen3, RATE, duration=30.0, sensor=SensorModel(1e-5, 1e-3, 0.02, seed=3))
    momentum, _, windows = _replayed(gen3, ds, "momentum", torque_noise=0.02)
    force, _, _ = _replayed(gen3, ds, "rls_logdet", torque_noise=0.02)
    assert windows["euler"] == 60
    assert momentum.consistent
    assert momentum.divergence_to_truth < 0.05  # measured 0.010 (seed 0)
    assert force.divergence_to_truth > 5 * momentum.divergence_to_truth  # measured 5.8 (seed 0)
