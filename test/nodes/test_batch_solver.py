"""One option set for one use case: every `sysid identify` option is a field of IdentifyRequest and
the batch_solver node takes each field from its BatchSolve request or a parameter, and the other way
round, with the same defaults. Both sides are read from the code: the argparse parser, the .srv and
.action definitions, the node's parameter table, and each adapter's table (FROM_ARGS, FROM_NODE),
which the adapters themselves use to build the request."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

from sysid_ros.app.identify import ONLINE_OPTIONS, IdentifyOutcome, IdentifyRequest, verdict
from sysid_ros.cli import build_parser
from sysid_ros.cli.identify import FROM_ARGS, request_from_args
from sysid_ros.core.online.session import OnlineOptions

pytest.importorskip("rclpy")
batch_solver = pytest.importorskip("sysid_ros.nodes.batch_solver")
from rclpy.parameter import Parameter  # noqa: E402

answer = batch_solver.answer

ROOT = Path(__file__).resolve().parents[2]

#: `sysid identify` options that cannot apply to a service: --json prints result.json on stdout
#: (the service returns the estimate and the files' paths)
CLI_ONLY = {"json"}
#: batch_solver parameters that are no identify options: where requests may read and write
#: (data_root, output_root, model_root: a service confines paths, a command does not need to), the
#: ROS ways to give the robot model when a request names none (model_path, robot_description and its
#: topic and timeout; the command has --model), and the frame of the ~/markers it publishes
NODE_ONLY = {"data_root", "output_root", "model_root", "model_path", "robot_description",
             "robot_description_topic", "robot_description_timeout", "markers_frame"}


def _identify_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["identify"]


def _cli_options() -> set[str]:
    return {a.dest for a in _identify_parser()._actions if not isinstance(a, argparse._HelpAction)}


def _fields(path: Path) -> list[str]:
    """The request (goal) fields of a .srv/.action file: ``type name  # comment`` lines before the
    first ``---`` (constants, ``type NAME=value``, are no fields)."""
    names = []
    for line in path.read_text().split("---")[0].splitlines():
        code = line.split("#")[0].split()
        if code and "=" not in code[1]:
            names.append(code[1])
    return names


def _sources(kind: str) -> set[str]:
    out = set()
    for spec in batch_solver.FROM_NODE.values():
        for source in spec if isinstance(spec, tuple) else (spec,):
            k, name = source.split(".", 1)
            if k == kind:
                out.add(name)
    return out


def test_the_service_and_the_action_take_the_same_request():
    srv = _fields(ROOT / "srv" / "BatchSolve.srv")
    assert srv == _fields(ROOT / "action" / "BatchSolve.action")
    assert {"torque_scale", "torque_offset", "validation_path"} <= set(srv)


def test_every_cli_option_is_a_request_field_and_every_field_an_option():
    request = set(IdentifyRequest.names())
    assert set(FROM_ARGS) | {"online"} == request
    used = list(FROM_ARGS.values()) + list(ONLINE_OPTIONS)
    assert len(used) == len(set(used)), "two request fields from one option"
    assert set(used) | CLI_ONLY == _cli_options()
    assert set(ONLINE_OPTIONS) == set(OnlineOptions.names()) - {"method", "stationary_cut", "effort_lag"}


def test_every_request_field_has_its_batch_solve_field_or_node_parameter_and_back():
    assert set(batch_solver.FROM_NODE) | {"online"} == set(IdentifyRequest.names())
    assert _sources("request") == set(_fields(ROOT / "srv" / "BatchSolve.srv"))
    parameters = {name for name, _, _ in batch_solver.PARAMETERS}
    assert len(parameters) == len(batch_solver.PARAMETERS), "a parameter declared twice"
    params = _sources("param")
    assert params | set(ONLINE_OPTIONS) | NODE_ONLY == parameters
    assert not params & NODE_ONLY and not set(ONLINE_OPTIONS) & NODE_ONLY


def test_the_cli_and_the_node_default_to_the_requests_defaults():
    """Same defaults: `sysid identify DATA --model M --out O` and a node with its parameters as
    declared make the request's own defaults (except where the value is the user's by nature)."""
    args = _identify_parser().parse_args(["run.mcap", "--model", "m.xml", "--out", "o"])
    cli = request_from_args(args)
    defaults = {f.name: f.default for f in fields(IdentifyRequest) if f.name not in ("data", "model", "out")}
    for name, default in defaults.items():
        if name != "online":
            assert getattr(cli, name) == default, name
    assert cli.online == {n: getattr(OnlineOptions(), n) for n in ONLINE_OPTIONS} | {"sample_rate": None}

    declared = {name: (None if value is Parameter.Type.DOUBLE_ARRAY else value)
                for name, value, _ in batch_solver.PARAMETERS}
    by_node = {"data", "model", "out", "validate"}  # paths resolved under the node's roots
    for name, spec in batch_solver.FROM_NODE.items():
        source = (spec if isinstance(spec, tuple) else (spec,))[-1]
        kind, key = source.split(".", 1)
        if name in by_node or kind != "param":
            continue
        value = batch_solver._CONVERT.get(name, lambda v, _node: v)(declared[key], None)
        assert value == defaults[name], (name, value, defaults[name])
    online = {n: declared[n] for n in ONLINE_OPTIONS}
    assert online == {n: getattr(OnlineOptions(), n) for n in ONLINE_OPTIONS} | {"sample_rate": 0.0}


def _outcome(status: str = "optimal", mass: float = 1.0, cost_warning: str | None = None) -> IdentifyOutcome:
    """A finished payload solve (files written): the CLI exits with ``outcome.exit_code``."""
    import numpy as np
    from support.robots import TEST_ROBOTS

    from sysid_ros.core import RobotModel
    from sysid_ros.core.model.target import payload_target
    from sysid_ros.core.result import SolverStatus, estimate_result

    target = payload_target(RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml"), "wrist_3_link")
    theta = np.array([mass, 0.0, 0.0, 0.05 * mass, 0.01, 0, 0, 0.01, 0, 0.01])
    solver = SolverStatus(solver="CLARABEL", status=status)
    result = estimate_result(target, theta, method="energy", solver=solver)
    _, problems = verdict(result)
    return IdentifyOutcome(result, None, target, [Path("/out/result.json")], {}, None, cost_warning, problems)


def test_batch_solve_answers_no_wherever_the_cli_exits_3():
    """BatchSolve's ``success`` follows ``sysid identify``'s exit code: a solver that ended
    inaccurate, inconsistent parameters or a too costly export answer False with the reason, in
    the words ``sysid identify`` prints (:attr:`IdentifyOutcome.message`)."""
    out = Path("/out")
    ok = _outcome()
    assert ok.exit_code == 0 and answer(ok, "energy", out)[0]
    inaccurate = _outcome(status="optimal_inaccurate")
    assert inaccurate.exit_code == 3
    assert answer(inaccurate, "energy", out) == (False, (
        "the energy estimate is not trustworthy: solver CLARABEL ended with status optimal_inaccurate "
        "(files in /out)"))
    inconsistent = _outcome(mass=-0.5)
    assert inconsistent.exit_code == 3
    success, message = answer(inconsistent, "energy", out)
    assert not success and "not physically consistent (payload)" in message
    costly = _outcome(cost_warning="bounds cost +12 % of torque RMS")
    assert costly.exit_code == 3
    assert answer(costly, "energy", out) == (
        False, "WARNING: bounds cost +12 % of torque RMS (files in /out; parameter accept_cost keeps them)")


def test_armature_says_as_the_model_identify_or_none():
    """BatchSolve's ``armature`` takes the CLI's three choices (a bool could not say --no-armature);
    ``true`` from an older caller still means identify."""
    from sysid_ros.srv import BatchSolve

    from sysid_ros.core.errors import SysIdError

    req = BatchSolve.Request
    choices = (req.ARMATURE_AS_MODEL, req.ARMATURE_IDENTIFY, req.ARMATURE_NONE)
    assert [batch_solver._armature(v) for v in choices] == [None, True, False]
    assert batch_solver._armature(True) is True and batch_solver._armature(False) is None
    with pytest.raises(SysIdError, match=r"armature must be 0 \(as the model declares\), 1 \(identify\) or 2 "
                                         r"\(none\), got 5"):
        batch_solver._armature(5)
