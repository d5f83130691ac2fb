"""The EKF's whole-arm estimate is exported projected onto the physically consistent, plausible
set in the metric of the filter's posterior (core/online/projection.py): on a short noisy run of
a three-joint arm the raw estimate is inconsistent, the exported one is consistent and is the
program's optimum; where the raw estimate is consistent already it is exported unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.linalg
from oracles.three_link_arm import three_link_arm

from sysid_ros.core import RobotModel
from sysid_ros.core.batch.convex import ConvexProgram
from sysid_ros.core.data.dataset import write_csv
from sysid_ros.core.model.consistency import check_consistency
from sysid_ros.core.model.robot import joint_terms
from sysid_ros.core.model.target import batch_target
from sysid_ros.core.online.drift import INITIAL_STD, parameter_scale
from sysid_ros.core.online.projection import ConsistentProjection
from sysid_ros.core.online.session import OnlineOptions, OnlineSession
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import simulate_dataset

RATE = 250.0  # Hz
FRICTION = "coulomb,viscous"
# the overview seed's test-stand noise: encoders ±0.001 rad, velocity ±0.01 rad/s, torque ±0.05 N·m
NOISY = SensorModel(position_noise=1e-3, velocity_noise=1e-2, torque_noise=0.05, seed=3)


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    path = tmp_path_factory.mktemp("arm") / "three_link_arm.xml"
    path.write_text(three_link_arm())
    model = RobotModel.from_mjcf(str(path), joint_terms=joint_terms(FRICTION, False))
    return path, model, batch_target(model)  # with the default plausibility bounds, as the CLI


def _ekf(model, target, *, duration: float, sensor: SensorModel | None):
    ds = simulate_dataset(model, duration=duration, seed=1, sensor=sensor, rate=RATE)
    session = OnlineSession(target, OnlineOptions(method="ekf", sample_rate=RATE, history=True))
    session.push_batch(ds.t, ds.q, ds.dq, ds.tau)
    return ds, session


def _objective(target, core, theta) -> float:
    """The projection's objective, computed independently: (Bθ − β̂)ᵀ P_β⁻¹ (Bθ − β̂) plus the
    prior's weight on the directions the base parameters do not see, ‖Nᵀ(θ − θ₀)⊘s‖²/σ₀²."""
    b, s = target.base.matrix, parameter_scale(target)
    e = b @ theta - core.beta
    null = scipy.linalg.null_space(b * s)
    return float(e @ np.linalg.solve(core.p_beta, e)
                 + np.sum((null.T @ ((theta - target.prior) / s)) ** 2) / INITIAL_STD**2)


def test_an_inconsistent_arm_estimate_is_projected_to_the_nearest_consistent_plausible_one(arm):
    """2 s of noisy data: the filter's own estimate breaks two bodies' pseudo-inertia (and a mass
    bound); the exported one is consistent and within the bounds, its Mahalanobis distance is
    what the objective says, and no feasible point tried (the prior, the truth, points between
    them and the projection) does better: the projection is the program's optimum."""
    _path, model, target = arm
    _ds, session = _ekf(model, target, duration=2.0, sensor=NOISY)
    core = session.estimator.core
    raw = core.theta
    assert not check_consistency(model, raw).consistent  # what this test is about
    snap = session.snapshot()
    proj = session.estimator.projection()
    assert proj.status == "optimal" and np.array_equal(snap.theta, proj.theta)
    assert snap.consistent and check_consistency(model, proj.theta).consistent
    prog = ConvexProgram(target)
    assert prog.feasible(proj.theta, tol=1e-9)  # consistency margin and plausibility bounds
    bad = [label for label, body in target.consistency(raw)["bodies"].items() if not body["consistent"]]
    assert {f"{b}.J" for b in bad} <= set(proj.violated) and set(bad) <= set(proj.moved)
    assert snap.projection["violated_by_raw_estimate"] == list(proj.violated)
    best = _objective(target, core, proj.theta)
    assert proj.distance == pytest.approx(np.sqrt(best), rel=1e-6)
    assert snap.projection["mahalanobis_distance"] == pytest.approx(proj.distance)
    assert 0 < proj.base_distance <= proj.distance
    truth = model.nominal  # the simulated arm is the model itself
    for other in (target.prior, truth, 0.5 * (truth + proj.theta), 0.9 * proj.theta + 0.1 * truth):
        assert prog.feasible(other, tol=1e-9)
        assert _objective(target, core, other) >= best * (1 - 1e-6)
    assert np.isfinite(snap.divergence_to_prior)


def test_a_consistent_arm_estimate_is_exported_unchanged(arm):
    """0.2 s of noise-free data: the filter's estimate is consistent and plausible, so it is its
    own projection (distance 0, not a digit changed). Nudged just outside the set (one Coulomb
    coefficient at −1e-9 N·m), the program's answer is that estimate again, to 1e-4 of each
    parameter's scale, at a distance below 1e-3."""
    _path, model, target = arm
    _ds, session = _ekf(model, target, duration=0.2, sensor=None)
    core = session.estimator.core
    assert check_consistency(model, core.theta).consistent
    snap = session.snapshot()
    assert snap.projection["status"] == "unchanged" and snap.projection["mahalanobis_distance"] == 0.0
    assert snap.projection["moved"] == {} and np.array_equal(snap.theta, core.theta)
    nudged = core.theta.copy()
    fc = target.names.index("j3.Fc")
    nudged[fc] = -1e-9
    proj = ConsistentProjection(target).project(target.base.matrix @ nudged, core.p_beta, nudged)
    assert proj.violated == ("j3.Fc",) and proj.status == "optimal"
    assert proj.distance < 1e-3
    scale = parameter_scale(target)
    assert np.max(np.abs(proj.theta - nudged) / scale) < 1e-4


def test_identify_with_the_ekf_exports_the_projected_arm(arm, tmp_path, capsys):
    """``sysid identify --method ekf`` on the noisy run's CSV: the last row of estimates.csv (the
    filter's own estimate) is inconsistent, yet the command exits 0; result.json and
    identified.xml hold the projection, consistent, and result.json and the summary say how far
    it moved."""
    from sysid_ros.cli import main

    path, model, target = arm
    ds = simulate_dataset(model, duration=2.0, seed=1, sensor=NOISY, rate=RATE)
    csv = write_csv(ds, tmp_path / "run.csv")
    out = tmp_path / "out"
    code = main(["identify", str(csv), "--model", str(path), "--method", "ekf", "--friction", FRICTION,
                 "--no-armature", "--sample-rate", str(RATE), "--out", str(out), "--no-plots"])
    raw = np.loadtxt(out / "estimates.csv", delimiter=",", skiprows=1)[-1, 2:]
    assert not check_consistency(model, raw).consistent
    assert code == 0
    doc = json.loads((out / "result.json").read_text())
    projection = doc["diagnostics"]["online"]["projection"]
    assert projection["status"] == "optimal" and projection["mahalanobis_distance"] > 0
    assert projection["violated_by_raw_estimate"] and projection["moved"]
    assert (f"projection of the filter's estimate (optimal): Mahalanobis distance "
            f"{projection['mahalanobis_distance']:.3g}") in capsys.readouterr().out
    assert doc["diagnostics"]["consistency"]["consistent"]
    exported = np.array([doc["parameters"][n]["value"] for n in model.param_names])
    assert check_consistency(model, exported).consistent
    assert ConvexProgram(target).feasible(exported, tol=1e-9)
    written = RobotModel.from_mjcf(str(out / "identified.xml"), joint_terms=joint_terms(FRICTION, False))
    np.testing.assert_allclose(written.nominal, exported, rtol=1e-6, atol=1e-9)
