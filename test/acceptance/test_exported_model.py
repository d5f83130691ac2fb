"""Issue 22's acceptance of the exported model (``core.batch.plausible``) on a real-like vendor log of
a 7-DOF arm (``REAL_LIKE_7DOF`` on test/robots/panda.xml: 1 kHz with a jittered logger clock,
dropped cycles and an 8 ms stall, currents with per-joint drive gains, the upper arm's and the
forearm's CAD inertia 30 % off, the last joint barely moved, joint friction and offsets the model
file does not have), held out on another motion of the same robot.

Asserted per method: held-out torque error near the true robot's, every link's mass within
[½, 2] x the truth's and the model file's, every link's smallest principal moment at least 10 % of
the model file's, dual_metric within 10 % of pc_ls, joint friction from the data, each method's
own export, and the report of what came from the data and what from the model file."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method
from sysid_ros.core.batch.plausible import MOMENT_FLOOR, principal_moments
from sysid_ros.core.model.robot import RobotModel, joint_terms
from sysid_ros.core.model.target import Plausibility, batch_target
from sysid_ros.core.report.files import summary
from sysid_ros.core.report.metrics import heldout_torque
from sysid_ros.core.sim.vendor_log import REAL_LIKE_7DOF, vendor_log

METHODS = ("ols", "wls", "pc_ls", "dual_metric", "wls_logdet")


@pytest.fixture(scope="module")
def case():
    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml",
                                 joint_terms=joint_terms("coulomb,viscous,offset", True))
    log = vendor_log(model, REAL_LIKE_7DOF, duration=8.0, seed=1)
    log = log.with_torque_calibration(list(REAL_LIKE_7DOF.torque_per_amp), None)
    held_out = vendor_log(model, REAL_LIKE_7DOF, duration=5.0, seed=1, motion_seed=5, clean=True)
    truth = model.from_dict({k: v for k, v in log.truth["parameters"].items() if k in set(model.param_names)})
    target = batch_target(model)
    prep = prepare(log, target, IdentifyOptions().preprocessing)
    results = {m: run_method(prep, IdentifyOptions(method=m)) for m in METHODS}
    return model, target, prep, held_out, truth, results


def _heldout(case, theta) -> float:
    _, target, _, held_out, _, _ = case
    return heldout_torque(target, held_out, theta).errors.rms


@pytest.mark.parametrize("method", METHODS)
def test_held_out_torque_is_near_the_true_robots(case, method):
    model, _, _, _, truth, results = case
    error = _heldout(case, results[method].parameters.values)
    assert error <= 1.3 * _heldout(case, truth), (error, _heldout(case, truth))
    assert error <= 0.1 * _heldout(case, model.nominal)


@pytest.mark.parametrize("method", METHODS)
def test_every_link_is_plausible(case, method):
    """Masses within [½, 2] x the truth's and the model file's; smallest principal moment about the
    CoM at least 10 % of the model file's (the needles of issue 22 were 1e-5 x)."""
    model, _, _, _, truth, results = case
    theta = results[method].parameters.values
    for b in model.param_bodies:
        sl = model.body_slice(b)
        name = model.body_name(b)
        for reference in (truth, model.nominal):
            assert 0.5 <= theta[sl][0] / reference[sl][0] <= 2.0, (name, theta[sl][0], reference[sl][0])
        ratio = principal_moments(theta[sl])[0] / principal_moments(model.nominal[sl])[0]
        assert ratio >= MOMENT_FLOOR, (name, ratio)
    assert results[method].consistent


def test_dual_metric_is_within_10_percent_of_pc_ls_on_held_out_torque(case):
    _, _, _, _, _, results = case
    dual, ls = (_heldout(case, results[m].parameters.values) for m in ("dual_metric", "pc_ls"))
    assert dual <= 1.10 * ls, (dual, ls)


def test_dual_metric_identifies_friction_from_the_data(case):
    """Coulomb friction from the data, not pinned to the model file's 0: within 20 % of the truth on
    the six joints that move (the seventh barely does)."""
    model, _, _, _, truth, results = case
    theta = results["dual_metric"].parameters.values
    for name in model.dof_joint_names[:6]:
        i = model.index(f"{name}.Fc")
        assert theta[i] == pytest.approx(truth[i], rel=0.2), name
    assert theta[model.index(f"{model.dof_joint_names[6]}.Fc")] > 0.05


def test_each_method_exports_its_own_estimate_and_says_so_first(case):
    _, _, _, _, _, results = case
    values = {m: results[m].parameters.values for m in ("ols", "wls", "pc_ls")}
    assert not np.array_equal(values["ols"], values["wls"])
    assert not np.array_equal(values["ols"], values["pc_ls"])
    for method, result in results.items():
        first = summary(result).splitlines()[0]
        assert first.startswith(f"exported model: {method}'s estimate, moved within its noise to the "
                                "parameters nearest the model file (log-det divergence): torque RMS "), first
        assert first.endswith(" %)"), first
        export = result.diagnostics.extra["exported_model"]
        rms = export["torque_rms"]
        assert rms["exported"] <= rms["estimate"] * 1.05  # within the estimate's noise


def test_the_report_says_what_came_from_the_data_and_what_from_the_model_file(case):
    """The first link of a fixed-base arm has no observable mass: it comes from the model file
    (mass from data ~0, exported = nominal); the forearm's is determined by the data."""
    model, _, _, _, _, results = case
    bodies = results["pc_ls"].diagnostics.extra["exported_model"]["bodies"]
    assert set(bodies) == {model.body_name(b) for b in model.param_bodies}
    link1 = bodies["link1"]
    assert link1["mass_from_data"] < 0.05 and link1["mass_ratio"] == pytest.approx(1.0, abs=1e-3)
    assert bodies["link4"]["mass_from_data"] > 0.8
    for body in bodies.values():
        assert 0.0 <= body["data_directions"] <= 10.0 and body["plausible"]
    text = summary(results["pc_ls"])
    assert "from data" in text and "mass from data" in text


def test_mass_and_extent_factors_change_what_they_say(case):
    """Tight mass bounds (x1.02 of the model file) shape the export; with the bounds off they do not."""
    model, _, prep, _, _, _ = case
    tight = batch_target(model, plausibility=Plausibility(1.02, 0.0, 0.0))
    off = batch_target(model, plausibility=Plausibility.off())
    out = {label: run_method(replace(prep, target=target), IdentifyOptions(method="pc_ls"))
           for label, target in (("tight", tight), ("off", off))}
    masses = {label: np.array([r.parameters[f"{model.body_name(b)}.m"] for b in model.param_bodies])
              for label, r in out.items()}
    nominal = np.array([model.nominal[model.body_slice(b)][0] for b in model.param_bodies])
    assert np.all(masses["tight"] <= nominal * 1.02 * (1 + 1e-6))
    assert np.all(masses["tight"] >= nominal / 1.02 * (1 - 1e-6))
    assert np.max(np.abs(masses["off"] / nominal - 1)) > 0.05  # the data move a mass when allowed
    assert out["tight"].diagnostics.extra["plausibility"]["bounds"]["mass_factor"] == 1.02


def test_a_wrong_drive_gain_costs_torque_and_says_so(case):
    """Currents converted with 0.3 x the drive gains: the masses the torques need are below half
    the model file's. With the default bounds the fit pays for it (cost above the limit, named
    bounds, the command's exit 3); without bounds the export follows the data and the summary names
    the bodies the data push out of plausible ranges and what keeping them plausible costs."""
    from sysid_ros.core.batch.cost import COST_LIMIT_PERCENT, cost_exceeded

    model, _, prep, _, _, _ = case
    scaled = replace(prep, y=prep.y * 0.3)
    bounded = run_method(scaled, IdentifyOptions(method="pc_ls"))
    message = cost_exceeded(bounded.diagnostics.extra)
    assert bounded.diagnostics.extra["plausibility"]["cost_percent"] > COST_LIMIT_PERCENT
    assert message is not None and message.startswith("the exported model fits the data "), message
    assert "binding bounds" in message and "--accept-cost keeps this model" in message
    assert f"WARNING: {message}" in summary(bounded).splitlines()
    free = run_method(replace(scaled, target=batch_target(model, plausibility=Plausibility.off())),
                      IdentifyOptions(method="pc_ls"))
    bodies = free.diagnostics.extra["exported_model"]["bodies"]
    pushed = [name for name, body in bodies.items() if not body["plausible"]]
    assert pushed, bodies
    for name in pushed:
        assert bodies[name]["plausibility_cost_nm"] is None or bodies[name]["plausibility_cost_nm"] >= 0
    lines = [line for line in summary(free).splitlines() if line.startswith("WARNING: ")]
    assert any(line.startswith(f"WARNING: {pushed[0]}: mass ") and "the data demand it" in line
               for line in lines), lines


#: (model, folder): the repository's other arms
ROBOTS = [("gen3.xml", TEST_ROBOTS), ("ur5e.xml", TEST_ROBOTS),
          ("yam_damiao.xml", TEST_ROBOTS.parent.parent / "config" / "robots")]


@pytest.mark.slow
@pytest.mark.parametrize(("robot", "folder"), ROBOTS, ids=[r for r, _ in ROBOTS])
def test_every_robot_exports_a_plausible_model_that_predicts_held_out_torque(robot, folder):
    """The repository's other robots, each as a vendor log (the REAL_LIKE_7DOF style's clock,
    gaps and noise; true inertials 10 % off and its second and fourth links' CAD 30 % off; joint
    friction and offsets the model file does not have), pc_ls and dual_metric: every link's mass
    within [½, 2] x the truth's and smallest principal moment at least 10 % of the model file's,
    pc_ls's held-out torque within 2x the true robot's (UR5e-like: 1.75x measured, gen3 < 1.3x),
    dual_metric's within 10 % of pc_ls's (it was 1.45x and 1.38x on the UR5e-like and Damiao arms
    while the metric was minimised over too, see core.batch.dual_metric)."""
    model = RobotModel.from_mjcf(folder / robot, joint_terms=joint_terms("coulomb,viscous,offset", True))
    names = [model.body_name(b) for b in model.param_bodies]
    style = replace(REAL_LIKE_7DOF, torque_per_amp=1.0, offset=0.1, coulomb=0.3, viscous=0.2,
                    amplitude=1.0, cad_off=(names[1], names[3]) if len(names) > 3 else (names[-1],),
                    noise=replace(REAL_LIKE_7DOF.noise, torque_noise=0.02))
    log = vendor_log(model, style, duration=8.0, seed=2)
    held_out = vendor_log(model, style, duration=4.0, seed=2, motion_seed=6, clean=True)
    truth = model.from_dict({k: v for k, v in log.truth["parameters"].items() if k in set(model.param_names)})
    target = batch_target(model)
    prep = prepare(log, target, IdentifyOptions().preprocessing)
    error = {}
    for method in ("pc_ls", "dual_metric"):
        theta = run_method(prep, IdentifyOptions(method=method)).parameters.values
        error[method] = heldout_torque(target, held_out, theta).errors.rms
        for b in model.param_bodies:
            sl = model.body_slice(b)
            assert 0.5 <= theta[sl][0] / truth[sl][0] <= 2.0, (robot, method, model.body_name(b))
            ratio = principal_moments(theta[sl])[0] / principal_moments(model.nominal[sl])[0]
            assert ratio >= MOMENT_FLOOR, (robot, method, model.body_name(b), ratio)
    reference = heldout_torque(target, held_out, truth).errors.rms
    assert error["pc_ls"] <= 2.0 * reference, (error, reference)
    assert error["dual_metric"] <= 1.10 * error["pc_ls"], error
