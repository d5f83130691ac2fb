"""Clarabel on the consistency program's conic form (sysid_ros/core/batch/conic.py) against the same
program stated in cvxpy (core/batch/convex.py): pc_ls's plausible fit and the dual metric's
re-weighting steps give the same θ, objective and binding constraints either way; a Clarabel
failure on the direct form falls back to the cvxpy statement.

Data: the two-link arm of test_interior (MuJoCo simulation, joint terms Fv and Ia), 6 s, torque
noise 0.01 N·m, with a 0.3 kg payload on the forearm the model does not know (its mass bound of
1 % binds) or without (only the pseudo-inertia LMIs and the non-negative joint terms)."""

from __future__ import annotations

import numpy as np
import pytest
from oracles.arm_2r import ARM_2R

from sysid_ros.core import RobotModel
from sysid_ros.core.batch import conic, convex, dual_metric
from sysid_ros.core.batch.identify import prepare
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.model.target import Plausibility, arm_target, batch_target
from sysid_ros.core.sim.synthetic import Payload, SensorModel, simulate_dataset

TERMS = ("Fv", "Ia")
PAYLOAD = "body=fore,mass=0.3,com=0.1,0,0"


def _prepared(payload: str | None, target_of):
    model = RobotModel.from_xml_string(ARM_2R, joint_terms=TERMS)
    ds = simulate_dataset(model, duration=6.0, seed=0,
                          payload=None if payload is None else Payload.parse(payload),
                          sensor=SensorModel(torque_noise=0.01, seed=1))
    target = target_of(model)
    if payload is not None:
        target = Plausibility(mass_factor=1.01).apply(target)
    return target, prepare(ds, target, Preprocessing())


CASES = {"mass bound binds": (PAYLOAD, batch_target), "plausibility bounds": (None, batch_target),
         "LMIs only": (PAYLOAD, arm_target)}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return _prepared(*CASES[request.param])


#: Clarabel's gap tolerances (absolute, relative): its defaults, and core.batch.convex's precise ones
GAP = {False: (1e-8, 1e-8), True: (1e-13, 1e-11)}


def _agree(direct, reference, target, *, gap: tuple[float, float], theta_rel: float):
    assert direct.solver == reference.solver == "CLARABEL"
    assert direct.status == reference.status
    if reference.status != "optimal":  # Clarabel did not reach "Solved": the direct path fell back
        np.testing.assert_array_equal(direct.theta, reference.theta)
        return
    # both within the solver's gap of the optimum
    assert abs(direct.objective - reference.objective) <= 2 * (gap[0] + gap[1] * reference.objective)
    # what the data determine (base parameters) and θ itself, relative to their largest entry
    b_d, b_r = target.base.of(direct.theta), target.base.of(reference.theta)
    np.testing.assert_allclose(b_d, b_r, rtol=0, atol=theta_rel * np.abs(b_r).max())
    # along the directions the objective barely sees (tie-break, prior pull) an interior-point
    # answer stays off the optimum by up to 3e-3 of max|θ| at default tolerances (test_interior)
    np.testing.assert_allclose(direct.theta, reference.theta, rtol=0,
                               atol=(3e-3 if theta_rel >= 1e-5 else 1e-5) * np.abs(reference.theta).max())
    # the binding constraints agree, but for one held so weakly that relaxing it by the whole size
    # of θ would change the objective by less than the solver's gap (multiplier·max|θ| below it):
    # whether an answer touches such a bound or stops 1e-5 short is the solver's tolerance's call
    # (seen: a mass bound with multiplier 1e-9, met exactly by one path, 7e-6 kg inside by the other)
    budget = 2 * (gap[0] + gap[1] * reference.objective)
    weak = {label for label, value in reference.multipliers.items()
            if value * np.abs(reference.theta).max() <= budget}
    assert set(direct.binding()) - weak == set(reference.binding()) - weak
    assert set(direct.multipliers) == set(reference.multipliers)
    for label in reference.binding():
        assert direct.multipliers[label] == pytest.approx(reference.multipliers[label], rel=1e-3)


@pytest.mark.parametrize("precise", [False, True])
def test_pc_ls_program_direct_equals_cvxpy(case, precise):
    target, prep = case
    w, rhs, _ = prep.rows(np.arange(target.n_params))
    direct = convex.least_squares_program(target, w, rhs, closed_form=False, precise=precise, direct=True)
    reference = convex.least_squares_program(target, w, rhs, closed_form=False, precise=precise,
                                             direct=False)
    _agree(direct, reference, target, gap=GAP[precise], theta_rel=1e-7 if precise else 1e-4)
    assert convex.ConvexProgram(target, scale=np.abs(target.prior) + 1).feasible(
        direct.theta, convex.FEASIBILITY_TOLERANCE)


def test_dual_metric_steps_direct_equal_cvxpy(case):
    target, prep = case
    sel = np.linspace(0, len(prep.t) - 1, 150).round().astype(int)
    ym, m_known = target.mass_matrix(prep.q[sel])
    args = (target, prep.x[sel], prep.y[sel], ym, m_known)
    direct = dual_metric.dual_metric_program(*args, direct=True)
    reference = dual_metric.dual_metric_program(*args, direct=False)
    assert direct.iterations == reference.iterations
    _agree(direct, reference, target, gap=GAP[False], theta_rel=1e-4)


def test_feasible_set_is_the_programs_constraints(case):
    """The conic form's violation at random points is cvxpy's, constraint by constraint's max."""
    target, _ = case
    scale = np.abs(target.prior) + 0.1
    feasible = conic.feasible_set(target, scale, convex.CONSISTENCY_MARGIN)
    prog = convex.ConvexProgram(target, scale=scale)
    assert [label for label, _, _ in feasible.rows] == sorted(prog.labels, key=lambda x: x.endswith(".J"))
    rng = np.random.default_rng(2)
    for theta in [target.prior, *(target.prior * rng.uniform(0.3, 1.7, target.n_params)
                                  for _ in range(20))]:
        prog.theta_scaled.value = theta / scale
        violation = max(float(np.max(c.violation())) for c in prog.constraints)
        assert feasible.violation(theta / scale) == pytest.approx(violation, rel=1e-9, abs=1e-15)


def test_a_clarabel_failure_falls_back_to_cvxpy(case, monkeypatch):
    target, prep = case
    w, rhs, _ = prep.rows(np.arange(target.n_params))
    objective = conic.SquaresObjective((np.eye(target.n_params), target.prior), norm=None)
    feasible = conic.feasible_set(target, np.ones(target.n_params), convex.CONSISTENCY_MARGIN)
    assert conic.solve_squares(objective, feasible, {"max_iter": 1}) == "MaxIterations"
    real = conic.solve_squares
    monkeypatch.setattr(conic, "solve_squares", lambda o, f, s=None: real(o, f, {"max_iter": 1}))
    fallback = convex.least_squares_program(target, w, rhs, closed_form=False, direct=True)
    reference = convex.least_squares_program(target, w, rhs, closed_form=False, direct=False)
    np.testing.assert_array_equal(fallback.theta, reference.theta)
    assert fallback.solver == "CLARABEL" and fallback.binding() == reference.binding()
