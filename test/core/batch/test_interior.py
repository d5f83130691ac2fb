"""The plausible fit's closed form (sysid_ros/core/batch/interior.py): when the unconstrained
minimiser of least_squares_program's objective is strictly inside every constraint it is the
program's optimum (convexity, KKT with zero multipliers) and no conic solver (nor cvxpy) is needed;
otherwise the program is solved as before.

Data: the two-link arm of test_metrics (MuJoCo simulation, joint terms Fv and Ia, as the model
has them), 6 s; torque noise 0.01 N·m where a residual is wanted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from oracles.arm_2r import ARM_2R
from support.robots import ROOT

from sysid_ros.core import RobotModel
from sysid_ros.core.batch import convex
from sysid_ros.core.batch.identify import prepare
from sysid_ros.core.batch.interior import unconstrained_minimiser
from sysid_ros.core.data.bag import dataset_topics, write_bag
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.model.target import Plausibility, arm_target, batch_target
from sysid_ros.core.sim.synthetic import Payload, SensorModel, simulate_dataset

TERMS = ("Fv", "Ia")


def _rows(noise: float, payload: Payload | None = None, target_of=batch_target):
    model = RobotModel.from_xml_string(ARM_2R, joint_terms=TERMS)
    ds = simulate_dataset(model, duration=6.0, seed=0, payload=payload,
                          sensor=SensorModel(torque_noise=noise, seed=1))
    target = target_of(model)
    w, rhs, _ = prepare(ds, target, Preprocessing()).rows(np.arange(target.n_params))
    return target, w, rhs


def test_interior_optimum_is_the_programs_without_cvxpy_solving():
    target, w, rhs = _rows(0.01)
    closed = convex.least_squares_program(target, w, rhs)
    assert closed.solver == convex.CLOSED_FORM and closed.status == "optimal"
    assert closed.binding() == [] and closed.active == []
    # the same objective solved by cvxpy/Clarabel without the (inactive) constraints: the same θ
    free = convex.least_squares_program(target, w, rhs, consistent=False, closed_form=False)
    assert free.solver == "CLARABEL" and free.status == "optimal"
    np.testing.assert_allclose(closed.theta, free.theta, rtol=0, atol=1e-6 * np.abs(free.theta).max())
    assert closed.objective == pytest.approx(free.objective, rel=1e-9)
    # with the constraints, Clarabel's interior-point answer stays off the optimum along the
    # directions the objective barely sees (up to 3e-3 of max|θ| here, 6e-5 with tight
    # tolerances): its objective is no lower than the closed form's, above it by less than
    # Clarabel's absolute gap tolerance (1e-8)
    program = convex.least_squares_program(target, w, rhs, closed_form=False)
    assert program.status == "optimal" and program.binding() == []
    assert closed.objective <= program.objective * (1 + 1e-12)
    assert program.objective - closed.objective <= 1e-8
    assert convex.near_boundary(target, closed.theta, rel=convex.INTERIOR_SLACK,
                                margin=convex.CONSISTENCY_MARGIN) == []


def test_a_binding_bound_falls_back_to_the_program():
    # a 0.3 kg payload on the forearm the model does not know: its mass wants +40 %, the bound 1 %
    target, w, rhs = _rows(0.01, Payload.parse("body=fore,mass=0.3,com=0.1,0,0"))
    target = Plausibility(mass_factor=1.01).apply(target)
    sol = convex.least_squares_program(target, w, rhs)
    assert sol.solver == "CLARABEL" and sol.status == "optimal"
    assert "fore.m <= 0.707" in sol.binding()
    before = convex.least_squares_program(target, w, rhs, closed_form=False)  # the program as before
    np.testing.assert_array_equal(sol.theta, before.theta)
    assert sol.binding() == before.binding() and sol.multipliers == before.multipliers


def test_exact_fit_and_tie_break_only():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(12, 6)) @ np.diag([1, 1, 1, 1, 1, 0])  # one unseen direction
    null = np.eye(6)[:, 5:]
    prior = rng.normal(size=6)
    # tie-break only (a payload-style target): the least-squares fit, the prior along the null
    c = rng.normal(size=12)
    cand = unconstrained_minimiser(a, c, prior, 0.1, np.sqrt(1e-6) * null.T, null)
    expected = np.linalg.lstsq(a, c, rcond=None)[0]
    expected[5] = prior[5]
    np.testing.assert_allclose(cand.theta_scaled, expected, rtol=1e-12)
    # an exact fit with a weak prior pull: the kink e = 0, the exact fit closest to the prior
    theta_true = rng.normal(size=6)
    c = a @ theta_true
    l_root = np.vstack([np.sqrt(1e-6) * null.T, np.diag(rng.uniform(1, 2, size=6))])
    cand = unconstrained_minimiser(a, c, prior, 1e-8, l_root, null)
    assert cand.residual <= 1e-13
    # exact fits are θ_true + t e₅; the closest to the prior in L's metric:
    m = l_root.T @ l_root
    t = -(m[5] @ (theta_true - prior)) / m[5, 5]
    np.testing.assert_allclose(cand.theta_scaled, theta_true + t * np.eye(6)[5], rtol=1e-10)


def test_noise_free_arm_without_bounds_is_least_squares_with_the_prior_where_unseen():
    # the arm without plausibility bounds (tie-break only), noise-free: least squares with the
    # prior along the unseen directions; the program's objective is no lower
    target, w, rhs = _rows(0.0, target_of=arm_target)
    closed = convex.least_squares_program(target, w, rhs)
    assert closed.solver == convex.CLOSED_FORM
    program = convex.least_squares_program(target, w, rhs, closed_form=False)
    assert closed.objective <= program.objective * (1 + 1e-12)
    base = target.base
    np.testing.assert_allclose(base.of(closed.theta), base.of(program.theta), rtol=0,
                               atol=1e-5 * np.abs(base.of(program.theta)).max())


@pytest.mark.slow
def test_identify_ols_on_an_interior_fit_never_imports_cvxpy(tmp_path):
    model_file = tmp_path / "arm_2r.xml"
    model_file.write_text(ARM_2R)
    model = RobotModel.from_xml_string(ARM_2R, joint_terms=TERMS)
    ds = simulate_dataset(model, duration=6.0, seed=0)
    bag = write_bag(tmp_path / "bag", dataset_topics(ds), truth=ds.truth)
    out = tmp_path / "out"
    argv = ["identify", str(bag), "--model", str(model_file), "--method", "ols", "--friction",
            "viscous", "--armature", "--no-plots", "--out", str(out)]
    code = ("import sys; from sysid_ros import cli; rc = cli.main(sys.argv[1:]); "
            "print('cvxpy imported:', 'cvxpy' in sys.modules); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "cvxpy imported: False" in proc.stdout
    assert "exported parameters' fit: closed form (interior optimum), optimal" in proc.stdout
    doc = json.loads(Path(out, "result.json").read_text())
    diagnostics = doc["diagnostics"]
    assert diagnostics["exported_fit"]["solver"] == convex.CLOSED_FORM
    assert diagnostics["binding_constraints"] == [] and diagnostics["consistency"]["consistent"]
