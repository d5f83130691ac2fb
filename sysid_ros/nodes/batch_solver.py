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

The solve is :func:`sysid_ros.app.identify.run_identify`, the one that ``sysid identify`` runs:
every option of the command has its request field or node parameter here (:data:`FROM_NODE`,
checked by a test), online estimators included (replayed on the data, their options the
estimator node's parameter names).
"""

from __future__ import annotations

import json
import math
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
from sysid_ros.app.identify import (
    ALL_METHODS,
    CHOICES,
    ONLINE_OPTIONS,
    STAGES,
    Canceled,
    IdentifyRequest,
    check_choice,
    run_identify,
)
from sysid_ros.core.blas import on_one_thread_from_start, single_threaded_blas
from sysid_ros.core.data.bag import CSV_SUFFIXES
from sysid_ros.core.data.columns import ColumnMap, time_scale
from sysid_ros.core.data.controller import ControllerDescription
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.target import Plausibility
from sysid_ros.core.online.options import OPTION_HELP, OnlineOptions
from sysid_ros.core.resources import default_robot_path
from sysid_ros.msg import ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.nodes.conversions import to_estimate_msg
from sysid_ros.nodes.markers import MARKER_PARAMETERS, InertiaMarkerPublisher, check_markers_frame
from sysid_ros.nodes.parameters import declare_parameters, parameter_value, requested_value
from sysid_ros.nodes.qos import LATCHED
from sysid_ros.nodes.robot_model import MODEL_PARAMETERS, RobotModelSource
from sysid_ros.srv import BatchSolve


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


#: the online estimators' options (methods rls, rls_logdet, momentum, ekf, mhe replayed on the
#: data): the estimator node's session parameters, same names and defaults, except ``sample_rate``
#: (0: the data's median rate)
ONLINE_PARAMETERS = tuple(
    (name, 0.0, "online methods: the stream's nominal rate [Hz] (0: the data's median rate)")
    if name == "sample_rate" else
    (name, getattr(OnlineOptions(), name), f"online methods: {OPTION_HELP[name]}")
    for name in ONLINE_OPTIONS)

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
    ("effort_lag", math.nan, "how late the effort is [sample periods] (0.5: the Damiao bridge; NaN: "
                             "what the bag declares, else 0 for the batch methods, -0.5 online)"),
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
    ("differentiator", "central", "positions to velocity/acceleration: central or savgol"),
    ("velocity", "auto", "measured velocity when recorded (auto), always (measured), or never "
                         "(differentiate)"),
    ("stribeck_velocity", 0.0, "Stribeck velocity qs of the stribeck terms [rad/s] (0: the one that "
                               "minimises the least-squares residual, searched)"),
    ("sigmoid_shape", Parameter.Type.DOUBLE_ARRAY, "[phi2 s/rad, phi3 rad/s] of every joint's sigmoid "
                                                   "friction (unset: searched per joint)"),
    ("drop_outliers", False, "leave out the regression rows whose torque residual is beyond 8 robust "
                             "sigma of a least-squares fit (reported either way)"),
    *ONLINE_PARAMETERS,
)


class BatchSolverNode(Node):
    """Thin ROS adapter over :func:`sysid_ros.app.identify.run_identify` (the use case of ``sysid
    identify``): parameters and the request make an :class:`IdentifyRequest` (:data:`FROM_NODE`),
    the outcome makes the response, the feedback and the published estimate."""

    def __init__(self, **kwargs) -> None:
        super().__init__("batch_solver", **kwargs)
        # BLAS on one thread for the node's life (small matrices: sysid_ros/core/blas.py), set from
        # this thread: a limit set in the solve's worker thread may not hold (OpenBLAS 0.3.31)
        self._one_blas_thread = None if on_one_thread_from_start() else single_threaded_blas()
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
                               f"{[str(r) for r in self._model_roots()]}, methods {list(ALL_METHODS)}")

    # -------------------------------------------------------------------------------- params
    def _validate(self, params) -> SetParametersResult:
        from sysid_ros.core.batch.friction_shape import check_sigmoid_option, check_stribeck_velocity

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
                if prm.name in CHOICES:
                    check_choice(prm.name, prm.value)
                if prm.name == "stribeck_velocity":
                    check_stribeck_velocity(_searched_if_zero(requested_value(self, prm)))
                if prm.name == "sigmoid_shape":
                    check_sigmoid_option(_pair(requested_value(self, prm)))
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
            if name is not None:
                stage[0] = name
            goal_handle.publish_feedback(BatchSolveAction.Feedback(
                stage=stage[0], progress=STAGES[stage[0]], message=message))

        await self._in_worker(goal_handle.request, result, report, lambda: goal_handle.is_cancel_requested)
        if result.message.startswith("canceled during "):
            goal_handle.canceled()
        elif result.success:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    async def _in_worker(self, request, response, report=None, cancel=None):
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
                self._handle(request, response, report, cancel)
            finally:
                finished.set_result(True)

        threading.Thread(target=work, name="batch_solve", daemon=True).start()
        await finished
        return response

    def _handle(self, request, response, report=None, cancel=None) -> None:
        """Solve (in the worker thread); every outcome lands in ``response`` (the service's
        response or the action's result: the same fields)."""
        start = time.perf_counter()
        try:
            self._current = f"{request.method or '(no method)'} on {request.bag_path!r}"
            self._solve(request, response, report or (lambda _stage, _message: None), cancel)
        except Canceled as exc:
            response.success = False
            response.message = f"canceled during {exc.stage}; nothing written"
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

    def _solve(self, request, response, report, cancel=None) -> None:
        """One solve of ``request`` (:func:`~sysid_ros.app.identify.run_identify`) into
        ``response``; ``report(stage, message)`` is called as each stage begins (``stage`` a key of
        :data:`STAGES`) and with each log line (``stage`` None); ``cancel()`` stops it."""
        if not request.method:
            raise SysIdError(f"method is empty: expected one of {list(ALL_METHODS)} (there is no default)")
        if request.method not in ALL_METHODS:
            from sysid_ros.core.batch.identify import check_method

            check_method(request.method)  # the one line naming the methods

        def progress(stage: str | None, message: str) -> None:
            if stage is None:
                self.get_logger().info(message)
            report(stage, f"reading {request.bag_path}" if stage == "reading" else message)  # as given

        job = self._request(request)
        outcome = run_identify(job, progress, cancel, warn=self.get_logger().warning)
        result, evaluation, out, method = outcome.result, outcome.evaluation, Path(job.out), job.method
        paths = outcome.paths
        response.estimate = to_estimate_msg(
            result, divergence_to_prior=evaluation.divergence_to_prior,
            divergence_to_truth=evaluation.divergence_to_truth, stamp=self.get_clock().now().to_msg())
        response.output_files = [str(p) for p in paths]
        response.success, response.message = answer(outcome, method, out)
        self._publisher.publish(response.estimate)
        params = result.parameters
        self._markers.publish(outcome.target, params.names, params.values, std=params.std,
                              stamp=response.estimate.header.stamp)
        logger = self.get_logger()
        (logger.info if response.success else logger.warning)(response.message)
        report("done", response.message)

    # ------------------------------------------------------------------ request -> IdentifyRequest
    def _request(self, msg) -> IdentifyRequest:
        """The :class:`IdentifyRequest` of a BatchSolve request (or goal) and the node's parameters,
        field by field as :data:`FROM_NODE` says; paths confined to their roots."""
        values = {}
        for name, spec in FROM_NODE.items():
            given = None
            for source in (spec if isinstance(spec, tuple) else (spec,)):
                kind, key = source.split(".", 1)
                given = getattr(msg, key) if kind == "request" else self._get(key)
                if given is not None and (not hasattr(given, "__len__") or len(given)):
                    break  # a tuple's later source only when this one is empty
            values[name] = _CONVERT.get(name, lambda v, _self: v)(given, self)
        if not any(Path(p).suffix.lower() in CSV_SUFFIXES for p in values["data"]):
            values["csv_columns"], values["time_unit"] = "", "s"  # the CSV layout is for CSV requests
        model_path = (str(resolve_inside_any(self._model_roots(), msg.model_path, "model_path"))
                      if msg.model_path else "")
        values["model"] = self._models.load(model_path=model_path, joint_terms=())
        if not msg.output_dir:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            data = values["data"]
            runs = f"+{len(data) - 1}" if len(data) > 1 else ""
            values["out"] = resolve_inside(self._output_root(), f"{data[0].name}{runs}-{msg.method}-{stamp}",
                                           "output_dir")
        online = {name: self._get(name) for name in ONLINE_OPTIONS}
        online["sample_rate"] = online["sample_rate"] or None  # 0: the data's rate
        return IdentifyRequest(**values, online=online)

    def _bags(self, text: str) -> tuple[Path, ...]:
        """``bag_path`` (comma-separated runs) resolved under ``data_root``, each one existing."""
        bags = []
        for given in text.split(","):
            bag = resolve_inside(self._data_root(), given.strip(), "bag_path")
            if not bag.exists():
                raise SysIdError(f"bag {given.strip()!r} not found under {self._data_root()}")
            bags.append(bag)
        return tuple(bags)

    def _validation_path(self, text: str) -> Path | None:
        if not text:
            return None
        path = resolve_inside(self._data_root(), text, "validation_path")
        if not path.exists():
            raise SysIdError(f"validation recording {text!r} not found under {self._data_root()}")
        return path

    def destroy_node(self) -> None:
        if self._one_blas_thread is not None:
            self._one_blas_thread.restore_original_limits()
        super().destroy_node()


#: IdentifyRequest field -> where the batch_solver takes it: ``request.<field>`` (the BatchSolve
#: request or goal) or ``param.<name>`` (a node parameter); a pair: the request's value, or the
#: parameter's when the request leaves it empty. ``online``: the parameters named as the fields of
#: :data:`~sysid_ros.app.identify.ONLINE_OPTIONS`. The model: ``request.model_path``, else the
#: node's model parameters (:mod:`~sysid_ros.nodes.robot_model`).
FROM_NODE: dict[str, str | tuple[str, str]] = {
    "data": "request.bag_path",
    "model": "request.model_path",
    "out": "request.output_dir",
    "method": "request.method",
    "base": "param.base",
    "payload_body": "request.payload_body",
    "friction": "request.friction",
    "armature": "request.armature",
    "stribeck_velocity": "param.stribeck_velocity",
    "sigmoid_shape": "param.sigmoid_shape",
    "joint_states_topic": ("request.joint_states_topic", "param.joint_states_topic"),
    "command_topic": ("request.motor_command_topic", "param.motor_command_topic"),
    "csv_columns": "param.csv_columns",
    "time_unit": "param.time_unit",
    "torque_scale": ("request.torque_scale", "param.torque_scale"),
    "torque_offset": ("request.torque_offset", "param.torque_offset"),
    "controller": "param.controller",
    "bandwidth": "param.bandwidth",
    "differentiator": "param.differentiator",
    "velocity": "param.velocity",
    "min_segment": "param.min_segment",
    "stationary_cut": "param.stationary_cut",
    "resample": "param.resample",
    "bridge_gaps": "param.bridge_gaps",
    "effort_lag": "param.effort_lag",
    "regularization": "request.regularization_weight",
    "max_samples": "param.max_samples",
    "drop_outliers": "param.drop_outliers",
    "mass_factor": "param.mass_factor",
    "extent_factor": "param.extent_factor",
    "com_radius": "param.com_radius",
    "friction_prior": "param.friction_prior",
    "payloads": "param.known_payloads",
    "drive_gains": "param.drive_gains",
    "validate": "request.validation_path",
    "plots": "param.plots",
    "accept_cost": "param.accept_cost",
}


def _as(kind):
    """A converter taking the value as ``kind`` (float, int, bool)."""
    return lambda v, node: kind(v)


def _armature(value: int) -> bool | None:
    """BatchSolve's ``armature`` (an ``ARMATURE_`` constant) as the request's: None (as the model
    declares), True (identified), False (not identified)."""
    choices = {0: None, 1: True, 2: False}
    if int(value) not in choices:
        raise SysIdError(f"armature must be 0 (as the model declares), 1 (identify) or 2 (none), got {value}")
    return choices[int(value)]


def _list_or_none(values) -> list | None:
    """A per-joint array parameter or request field: None when unset or empty."""
    return list(values) if values is not None and len(values) else None


#: how a source's value becomes the request's, ``convert(value, node)`` (the others as they come;
#: ``model`` and an automatic ``out`` are set by :meth:`BatchSolverNode._request`)
_CONVERT = {
    "data": lambda v, node: node._bags(v),
    "model": lambda v, node: None,
    "out": lambda v, node: resolve_inside(node._output_root(), v, "output_dir") if v else None,
    "base": lambda v, node: v or None,
    # the CLI's default: no friction given identifies the joint terms the model declares
    "friction": lambda v, node: ",".join(v) if list(v) else "model",
    "armature": lambda v, node: _armature(v),
    "stribeck_velocity": lambda v, node: _searched_if_zero(float(v)),
    "sigmoid_shape": lambda v, node: _pair(v),
    "torque_scale": lambda v, node: _list_or_none(v),
    "torque_offset": lambda v, node: _list_or_none(v),
    "bandwidth": _as(float),
    "min_segment": _as(float),
    "bridge_gaps": _as(float),
    "effort_lag": lambda v, node: None if math.isnan(float(v)) else float(v),
    "regularization": _as(float),
    "max_samples": _as(int),
    "mass_factor": _as(float),
    "extent_factor": _as(float),
    "com_radius": _as(float),
    "stationary_cut": _as(bool),
    "drop_outliers": _as(bool),
    "drive_gains": _as(bool),
    "plots": _as(bool),
    "accept_cost": _as(bool),
    "payloads": lambda v, node: _payload_list(v) if v else None,
    "validate": lambda v, node: node._validation_path(v),
}


def _searched_if_zero(value: float) -> float | None:
    """A Stribeck velocity parameter: 0 means searched (None)."""
    return None if value == 0.0 else value


def _pair(values) -> tuple[float, float] | None:
    """The ``sigmoid_shape`` parameter: unset or empty = searched (None), else ``(phi2, phi3)``."""
    if values is None or not len(values):
        return None
    if len(values) != 2:
        raise SysIdError(f"sigmoid_shape: expected [phi2, phi3] (steepness [s/rad], offset [rad/s]), "
                         f"got {list(values)}")
    return float(values[0]), float(values[1])


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


def answer(outcome, method: str, out: Path) -> tuple[bool, str]:
    """The BatchSolve answer ``(success, message)`` for a finished solve: False, as ``sysid
    identify`` exits 3, when bounds or the prior cost too much torque (unless accepted) or the
    estimate is not trustworthy (solver status, consistency); the files are written either way."""
    if outcome.message:
        hint = "; parameter accept_cost keeps them" if outcome.cost_warning else ""
        return False, f"{outcome.message} (files in {out}{hint})"
    result = outcome.result
    return True, (f"{method}: rank {result.diagnostics.rank}, relative error "
                  f"{result.diagnostics.relative_error:.3g} %, {len(outcome.paths)} files in {out}")


def main(args=None) -> None:
    spin(BatchSolverNode, SingleThreadedExecutor, args)


if __name__ == "__main__":
    main()
