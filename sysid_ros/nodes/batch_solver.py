"""Node ``batch_solver``: ``BatchSolve`` on recorded bags (and CSV files), as an action and a service.

The action ``batch_solve`` (``sysid_ros/action/BatchSolve``) reports each stage of the solve as
feedback (``stage``: reading, preparing, solving, evaluating, writing; ``progress``: the fraction
of stages begun; ``message``: the stage's latest log line) and can be canceled: the solve stops at
the next stage boundary or log line, no output is written, and the result says during which stage.
The service ``batch_solve`` (``sysid_ros/srv/BatchSolve``, same request and response) is kept for
one blocking call. Both are relative names (``/batch_solve`` in the root namespace).

Requests name a bag relative to the configured ``data_root``, an output folder relative to
``output_root`` and optionally a model relative to ``model_root`` (default: ``data_root``; the
package's own robot models are accepted too); paths resolving outside them are refused. The
``model_path`` parameter, set by whoever starts the node, is not confined. The service callback
is a coroutine: the solve runs in a worker thread while the (single-threaded) executor keeps
serving, so a second request (or goal) while one is running is refused at once with a clear
message. The latest estimate is also published (latched) on ``~/estimate``.

Several runs of the same arm: ``bag_path`` lists them comma-separated (``run0,run2kg,run5kg``);
the ``known_payloads`` parameter gives each its known payload and ``drive_gains`` adds a torque
gain per joint (:mod:`sysid_ros.core.batch.multi_run`; the service type is unchanged).
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future

from sysid_ros.action import BatchSolve as BatchSolveAction
from sysid_ros.core.batch.cost import cost_exceeded
from sysid_ros.core.batch.identify import (
    COMMAND_METHODS,
    METHODS,
    IdentifyOptions,
    check_method,
    prepare,
    run_method,
)
from sysid_ros.core.batch.multi_run import identify_runs, parse_payloads, prepare_runs
from sysid_ros.core.blas import single_threaded_blas
from sysid_ros.core.data.bag import CSV_SUFFIXES, read_data
from sysid_ros.core.data.columns import ColumnMap, time_scale
from sysid_ros.core.data.controller import ControllerDescription
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.joint_defaults import default_joint_terms, excluded_line
from sysid_ros.core.model.target import Plausibility, batch_target, joint_prior_spec
from sysid_ros.core.report.files import write_outputs
from sysid_ros.core.report.metrics import evaluate
from sysid_ros.core.resources import default_robot_path
from sysid_ros.msg import ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.nodes.conversions import to_estimate_msg
from sysid_ros.nodes.markers import MARKER_PARAMETERS, InertiaMarkerPublisher, check_markers_frame
from sysid_ros.nodes.parameters import declare_parameters, parameter_value, requested_value
from sysid_ros.nodes.qos import LATCHED
from sysid_ros.nodes.robot_model import MODEL_PARAMETERS, RobotModelSource
from sysid_ros.srv import BatchSolve

#: the solve's stages, in order, with the fraction of the work done when each begins
STAGES = {"reading": 0.0, "preparing": 0.1, "solving": 0.3, "evaluating": 0.8, "writing": 0.9, "done": 1.0}


class CanceledError(Exception):
    """A goal's cancel request, raised in the solve's thread at a stage boundary or log line."""


def resolve_inside(root: Path, given: str, what: str) -> Path:
    """``given`` (relative to ``root``, or absolute inside it) as an absolute path; refuses paths
    that leave ``root`` (``..``, symlinks, absolute paths elsewhere)."""
    return resolve_inside_any((root,), given, what)


def resolve_inside_any(roots: Sequence[Path], given: str, what: str) -> Path:
    """``given`` (relative to the first of ``roots``, or absolute) as an absolute path inside one
    of ``roots``; refuses paths that leave them all (``..``, symlinks, absolute paths elsewhere)."""
    if not given:
        raise SysIdError(f"{what} is empty")
    resolved = [Path(r).expanduser().resolve() for r in roots]
    path = Path(given).expanduser()
    candidate = (path if path.is_absolute() else resolved[0] / path).resolve()
    if not any(candidate.is_relative_to(r) for r in resolved):
        raise SysIdError(f"{what} {given!r} resolves to {candidate}, outside "
                         f"{' and '.join(str(r) for r in resolved)}; refused")
    return candidate


#: ``(name, default, description)`` of every parameter of the node
PARAMETERS = (
    ("data_root", "sysid_data", "folder holding the bags; requests are relative to it"),
    ("output_root", "sysid_results", "results are written only under this folder"),
    *MODEL_PARAMETERS,
    *MARKER_PARAMETERS,
    ("model_root", "", "a request's model_path must lie under this folder (relative paths "
                       "start there) or among the package's robot models ('' = data_root)"),
    ("joint_states_topic", "/joint_states", "default JointState topic in the bags"),
    ("motor_command_topic", "/motor_command", "default MotorCommand topic in the bags"),
    ("bandwidth", 5.0, "position closed-loop bandwidth [Hz] for filtering"),
    ("max_samples", 2000, "samples kept for the dual-metric SDP"),
    ("min_segment", 2.0, "data between gaps shorter than this is not used [s]"),
    ("resample", "auto", "irregular sampling put on a uniform grid (auto) or used as recorded (off)"),
    ("bridge_gaps", -1.0, "dropped-cycle gaps up to this long are interpolated over [s] "
                          "(< 0: automatic, 5 ms or 3.5 median periods)"),
    ("stationary_cut", True, "cut the stationary start and end of each segment (every joint "
                             "slower than 0.01 rad/s)"),
    ("plots", True, "write PNG plots with each result"),
    ("torque_scale", Parameter.Type.DOUBLE_ARRAY, "logged effort x this = torque: one value or one "
                                                  "per joint of the model (unset: 1)"),
    ("torque_offset", Parameter.Type.DOUBLE_ARRAY, "added to the scaled torque [N m]: one value or "
                                                   "one per joint (unset: 0)"),
    ("mass_factor", Plausibility.mass_factor,
     "arm: every body's mass within [m/K, m*K] of the model's (0: off)"),
    ("extent_factor", Plausibility.extent_factor,
     "arm: every body's mass inside this many times its nominal extent (0: off)"),
    ("com_radius", Plausibility.com_radius,
     "arm: every body's CoM within this of the model's, per axis [m] (0: off)"),
    ("friction_prior", "model", "arm: prior of the joint terms: model, zero or a JSON file of "
                                "values by name"),
    ("csv_columns", "", "CSV requests: the file's column of each field, e.g. time=timestamp,"
                        "q=actual_q_{i},tau=actual_current_{i} (empty: the project's layout)"),
    ("time_unit", "s", "CSV requests: unit of the time column (s, ms, us, ns)"),
    ("controller", "", "iv/pc_iv without MotorCommand: pd:kp=K[,K..];kd=D[,D..] or "
                       "velocity:kv=D[,D..] with the reference columns (empty: none)"),
    ("known_payloads", "", "several bags (bag_path 'a,b,c'): JSON list, one entry per bag: null "
                           "or {\"body\": NAME, \"mass\": KG, \"com\": [X, Y, Z][, \"inertia\": "
                           "[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]]} (empty: no payloads)"),
    ("drive_gains", False, "several bags: identify a torque gain per joint (needs two different "
                           "known payloads)"),
    ("accept_cost", False, "succeed even when the exported model fits the data more than 5 % worse "
                           "than the method's fit without bounds or prior"),
)


class BatchSolverNode(Node):
    """Thin ROS facade over :func:`sysid_ros.core.batch.identify.run_method`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("batch_solver", **kwargs)
        # BLAS on one thread for the node's life (small matrices: sysid_ros/core/blas.py), set from
        # this thread: a limit set in the solve's worker thread may not hold (OpenBLAS 0.3.31)
        self._one_blas_thread = single_threaded_blas()
        declare_parameters(self, PARAMETERS)
        self.add_on_set_parameters_callback(self._validate)
        self._models = RobotModelSource(self)
        self._busy = threading.Lock()
        self._current = ""
        # reentrant: a new request is taken while an earlier one awaits its worker (and is refused)
        self._service = self.create_service(BatchSolve, "batch_solve", self._on_request,
                                            callback_group=ReentrantCallbackGroup())
        self._action = ActionServer(self, BatchSolveAction, "batch_solve", self._on_goal,
                                    cancel_callback=lambda _goal: CancelResponse.ACCEPT,
                                    callback_group=ReentrantCallbackGroup())
        self._publisher = self.create_publisher(ParameterEstimate, "~/estimate", LATCHED)
        self._markers = InertiaMarkerPublisher(self)
        self.get_logger().info(f"batch_solve ready; data_root={self._data_root()}, "
                               f"output_root={self._output_root()}, model roots "
                               f"{[str(r) for r in self._model_roots()]}, methods {list(METHODS)}")

    # -------------------------------------------------------------------------------- params
    def _validate(self, params) -> SetParametersResult:
        for prm in params:
            if prm.name == "bandwidth" and not requested_value(self, prm) > 0:
                return SetParametersResult(successful=False,
                                           reason=f"bandwidth must be > 0 Hz, got {prm.value}")
            if prm.name == "min_segment" and not requested_value(self, prm) >= 0:
                return SetParametersResult(successful=False,
                                           reason=f"min_segment must be >= 0 s, got {prm.value}")
            if prm.name == "max_samples" and prm.value < 10:
                return SetParametersResult(successful=False,
                                           reason=f"max_samples must be >= 10, got {prm.value}")
            if prm.name in ("data_root", "output_root") and not prm.value:
                return SetParametersResult(successful=False, reason=f"{prm.name} must not be empty")
            try:
                if prm.name == "csv_columns" and prm.value:
                    ColumnMap.parse(prm.value)
                if prm.name == "time_unit":
                    time_scale(prm.value)
                if prm.name == "controller" and prm.value:
                    ControllerDescription.parse(prm.value)
                if prm.name == "known_payloads" and prm.value:
                    _payload_list(prm.value)
                if prm.name == "markers_frame":
                    check_markers_frame(prm.value)
            except SysIdError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _get(self, name: str):
        return parameter_value(self, name)

    def _data_root(self) -> Path:
        return Path(self._get("data_root")).expanduser().resolve()

    def _output_root(self) -> Path:
        return Path(self._get("output_root")).expanduser().resolve()

    def _model_roots(self) -> list[Path]:
        """Where a request's model may be: ``model_root`` (else ``data_root``), where relative
        paths start, and the folder of the package's robot models."""
        roots = [Path(self._get("model_root")).expanduser().resolve() if self._get("model_root")
                 else self._data_root()]
        try:
            roots.append(default_robot_path().parent.resolve())
        except SysIdError:  # no installed robot models
            pass
        return roots

    # ------------------------------------------------------------------- service and action
    async def _on_request(self, request: BatchSolve.Request, response: BatchSolve.Response):
        return await self._in_worker(request, response)

    async def _on_goal(self, goal_handle):
        """The action: the same solve, its stages as feedback, cancel honoured between them."""
        result = BatchSolveAction.Result()
        stage = ["reading"]

        def report(name: str | None, message: str) -> None:
            if goal_handle.is_cancel_requested:
                raise CanceledError(stage[0])
            if name is not None:
                stage[0] = name
            goal_handle.publish_feedback(BatchSolveAction.Feedback(
                stage=stage[0], progress=STAGES[stage[0]], message=message))

        await self._in_worker(goal_handle.request, result, report)
        if result.message.startswith("canceled during "):
            goal_handle.canceled()
        elif result.success:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    async def _in_worker(self, request, response, report=None):
        """Run :meth:`_handle` in a worker thread while the executor keeps serving; a second
        request while one runs is refused at once."""
        if not self._busy.acquire(blocking=False):
            response.success = False
            response.message = f"busy: another solve is running ({self._current}); try again later"
            return response
        finished = Future(executor=self.executor)
        finished.add_done_callback(lambda _f: None)  # a done callback makes the executor wake up

        def work() -> None:
            try:
                self._handle(request, response, report)
            finally:
                finished.set_result(True)

        threading.Thread(target=work, name="batch_solve", daemon=True).start()
        await finished
        return response

    def _handle(self, request, response, report=None) -> None:
        """Solve (in the worker thread); every outcome lands in ``response`` (the service's
        response or the action's result: the same fields)."""
        start = time.perf_counter()
        try:
            self._current = f"{request.method or '(no method)'} on {request.bag_path!r}"
            self._solve(request, response, report or (lambda _stage, _message: None))
        except CanceledError as stage:
            response.success = False
            response.message = f"canceled during {stage}; nothing written"
            self.get_logger().info(f"BatchSolve {response.message}")
        except SysIdError as exc:
            response.success = False
            response.message = str(exc)
            self.get_logger().warning(f"BatchSolve refused or failed: {exc}")
        except Exception as exc:  # keep serving; report the unexpected with its location
            response.success = False
            response.message = f"internal error: {type(exc).__name__}: {exc}"
            self.get_logger().error(f"BatchSolve crashed:\n{traceback.format_exc()}")
        finally:
            response.solve_time = time.perf_counter() - start
            self._current = ""
            self._busy.release()

    def _solve(self, request, response, report) -> None:
        """One solve of ``request`` into ``response``; ``report(stage, message)`` is called as each
        stage begins (``stage`` a key of :data:`STAGES`) and with each log line (``stage`` None);
        it may raise :class:`CanceledError`."""
        report("reading", f"reading {request.bag_path}")
        method = request.method
        if not method:
            raise SysIdError(f"method is empty: expected one of {list(METHODS)} (there is no default)")
        check_method(method)
        bags = []
        for given in request.bag_path.split(","):
            bag = resolve_inside(self._data_root(), given.strip(), "bag_path")
            if not bag.exists():
                raise SysIdError(f"bag {given.strip()!r} not found under {self._data_root()}")
            bags.append(bag)
        bag = bags[0]
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        runs = f"+{len(bags) - 1}" if len(bags) > 1 else ""
        out = resolve_inside(self._output_root(), request.output_dir or f"{bag.name}{runs}-{method}-{stamp}",
                             "output_dir")
        model_path = (str(resolve_inside_any(self._model_roots(), request.model_path, "model_path"))
                      if request.model_path else "")
        model = self._models.load(model_path=model_path, joint_terms=())
        # the CLI's default: no friction given identifies the joint terms the model declares
        friction = ",".join(request.friction) if list(request.friction) else "model"
        armature = True if request.armature else None
        model = model.with_joint_terms(default_joint_terms(model.mj, friction, armature))
        excluded = excluded_line(model.mj, model.joint_terms)
        if excluded and not request.payload_body:
            self.get_logger().warning(excluded)
        target = batch_target(model, request.payload_body, plausibility=Plausibility(
            float(self._get("mass_factor")), float(self._get("extent_factor")),
            float(self._get("com_radius"))), joint_prior=joint_prior_spec(str(self._get("friction_prior"))))
        settings = Preprocessing(bandwidth=float(self._get("bandwidth")),
                                 min_segment=float(self._get("min_segment")),
                                 stationary_cut=bool(self._get("stationary_cut")),
                                 resample=str(self._get("resample")),
                                 bridge_gaps=float(self._get("bridge_gaps")))
        options = IdentifyOptions(method=method, preprocessing=settings,
                                  regularization=float(request.regularization_weight),
                                  max_samples=int(self._get("max_samples")),
                                  progress=lambda msg: (self.get_logger().info(msg), report(None, msg)))
        def read(bag: Path):
            ds = read_data(bag,
                           joint_states_topic=request.joint_states_topic or self._get("joint_states_topic"),
                           command_topic=request.motor_command_topic or self._get("motor_command_topic"),
                           joint_names=model.dof_joint_names, **self._csv_layout(bag),
                           commands=method in COMMAND_METHODS or bool(self._get("controller"))
                           ).for_model(model).with_torque_calibration(
                self._get("torque_scale"), self._get("torque_offset"))
            if self._get("controller"):
                ds = ControllerDescription.parse(self._get("controller")).apply(ds)
            return ds

        known = self._get("known_payloads")
        if len(bags) > 1 or known or self._get("drive_gains"):
            payloads = parse_payloads(_payload_list(known), len(bags)) if known else [None] * len(bags)
            datasets = [read(b) for b in bags]
            report("preparing", f"preparing {len(bags)} runs")
            multi = prepare_runs(datasets, payloads, target, settings,
                                 min_speed=options.min_speed, progress=options.progress,
                                 gains=bool(self._get("drive_gains")))
            report("solving", f"{method} on {len(bags)} runs")
            result, prep, _ = identify_runs(multi, options, gains=bool(self._get("drive_gains")))
        else:
            data = read(bag)
            report("preparing", f"preparing {len(data)} samples")
            prep = prepare(data, target, settings, min_speed=options.min_speed,
                           progress=options.progress)
            report("solving", f"{method}")
            result = run_method(prep, options)
        report("evaluating", "evaluating the estimate")
        evaluation = evaluate(result, prep)
        report("writing", f"writing results into {out}")
        paths, _ = write_outputs(out, result, prep.target, evaluation, plots=bool(self._get("plots")),
                                 inputs=bags)
        response.estimate = to_estimate_msg(
            result, divergence_to_prior=evaluation.divergence_to_prior,
            divergence_to_truth=evaluation.divergence_to_truth, stamp=self.get_clock().now().to_msg())
        response.output_files = [str(p) for p in paths]
        response.success = True
        response.message = (f"{method}: rank {result.diagnostics.rank}, relative error "
                            f"{result.diagnostics.relative_error:.3g} %, {len(paths)} files in {out}")
        too_costly = cost_exceeded(result.diagnostics.extra)
        if too_costly and not bool(self._get("accept_cost")):  # files written, the answer says so
            response.success = False
            response.message = f"{method}: {too_costly} (files in {out}; parameter accept_cost keeps them)"
            self.get_logger().warning(response.message)
        self._publisher.publish(response.estimate)
        params = result.parameters
        self._markers.publish(prep.target, params.names, params.values, std=params.std,
                              stamp=response.estimate.header.stamp)
        self.get_logger().info(response.message)
        try:
            report("done", response.message)
        except CanceledError:
            pass  # the files are written: the solve is complete


    def _csv_layout(self, path: Path) -> dict:
        """``csv_columns`` / ``time_unit`` for a CSV file (a bag ignores them)."""
        if path.suffix.lower() not in CSV_SUFFIXES:
            return {}
        spec = self._get("csv_columns")
        return {"columns": ColumnMap.parse(spec) if spec else None, "time_unit": self._get("time_unit")}

    def destroy_node(self) -> None:
        self._one_blas_thread.restore_original_limits()
        super().destroy_node()


def _payload_list(text: str) -> list:
    """The ``known_payloads`` parameter's JSON list (checked per bag by ``parse_payloads``)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SysIdError(f"known_payloads: expected a JSON list, got text that does not parse "
                         f"({exc})") from None
    if not isinstance(doc, list):
        raise SysIdError("known_payloads: expected a JSON list (one entry per bag), got "
                         f"{type(doc).__name__}")
    return doc


def main(args=None) -> None:
    spin(BatchSolverNode, SingleThreadedExecutor, args)


if __name__ == "__main__":
    main()
