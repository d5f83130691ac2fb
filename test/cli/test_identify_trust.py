"""``sysid identify`` does not pass an estimate it cannot stand behind with exit code 0: a solver
that ended inaccurate or did not converge, or exported parameters that are not physically
consistent, make it exit with 3 and say why (the files are still written, saying so)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.cli.identify import _trust
from sysid_ros.core import RobotModel
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.result import SolverStatus, estimate_result


def _payload_result(mass: float, solver: SolverStatus):
    target = payload_target(RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml"), "wrist_3_link")
    theta = np.array([mass, 0.0, 0.0, 0.05 * mass, 0.01, 0, 0, 0.01, 0, 0.01])
    return estimate_result(target, theta, method="energy", solver=solver)


def test_an_optimal_consistent_estimate_exits_0(capsys):
    assert _trust(_payload_result(1.0, SolverStatus(solver="CLARABEL"))) == 0
    assert capsys.readouterr().err == ""


def test_an_inaccurate_solve_exits_3(capsys):
    result = _payload_result(1.0, SolverStatus(solver="CLARABEL", status="optimal_inaccurate"))
    assert _trust(result) == 3
    assert ("the energy estimate is not trustworthy: solver CLARABEL ended with status "
            "optimal_inaccurate") in capsys.readouterr().err


def test_inconsistent_parameters_exit_3(capsys):
    result = _payload_result(-0.5, SolverStatus(solver="CLARABEL"))
    assert _trust(result) == 3
    assert "not physically consistent (payload)" in capsys.readouterr().err
    result = replace(result, solver=SolverStatus(solver="pc_iv", converged=False))
    assert _trust(result) == 3
    assert "not converged" in capsys.readouterr().err


@pytest.mark.slow
def test_an_inconsistent_estimate_names_what_fails(capsys):
    """Issue 14: "NOT consistent: []". Negative joint terms of an arm estimate (the online path:
    estimate_result) are named in the summary and in the exit-3 message."""
    from sysid_ros.core.model.target import arm_target
    from sysid_ros.core.report.files import summary

    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml", joint_terms=("Fc", "Fv", "Ia"))
    target = arm_target(model)
    theta = target.prior.copy()
    theta[target.names.index("joint2.Fv")] = -0.1
    theta[target.names.index("joint5.Ia")] = -92.3
    result = estimate_result(target, theta, method="rls_logdet")
    assert result.consistency.failures == ("joint2.Fv", "joint5.Ia")
    assert "NOT consistent: joint2.Fv, joint5.Ia" in summary(result).splitlines()
    assert _trust(result) == 3
    assert "not physically consistent (joint2.Fv, joint5.Ia)" in capsys.readouterr().err
