"""The identification use case: one request, one function, one outcome.

    IdentifyRequest ──► run_identify ──► IdentifyOutcome

``sysid identify`` (:mod:`sysid_ros.cli.identify`) and the ``batch_solver`` node's ``BatchSolve``
service and action (:mod:`sysid_ros.nodes.batch_solver`) are adapters: each fills an
:class:`IdentifyRequest` from what its user gave (command-line options; node parameters and the
request), calls :func:`run_identify` and formats the :class:`IdentifyOutcome` (a summary and an exit
code; a response, feedback and a published estimate). Neither reads data, prepares it, solves or
writes files itself. Each adapter's table of where every request field comes from
(``cli.identify.FROM_ARGS``, ``nodes.batch_solver.FROM_NODE``) is checked by a test against the
parser, the BatchSolve definitions and the node's parameters.

What one run does::

    model (joint terms chosen) ─ target (plausibility, joint prior) ─ preprocessing, method options
    data: one recording, or several runs of one arm with their known payloads
      ─ read_data (bag or CSV; CSV layout) ─ for the model's joints ─ torque calibration ─ controller
      ─ prepare (segments, filters, regressor; Stribeck/sigmoid shapes searched unless given)
      ─ run_method (batch methods) | replay (online estimators, the estimator node's options)
      ─ evaluate (fit, validation recording, truth) ─ write_outputs (result.json, MJCF, URDF, plots)

Example (a notebook, no ROS)::

    from sysid_ros.app import IdentifyRequest, run_identify

    outcome = run_identify(IdentifyRequest(data=("run.mcap",), model="arm.xml", out="out",
                                           method="pc_ls", friction="coulomb,viscous"))
    print(outcome.result.diagnostics.relative_error, outcome.paths, outcome.exit_code)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sysid_ros.core.batch.cost import COST_EXIT_CODE, cost_exceeded
from sysid_ros.core.batch.options import COMMAND_METHODS, METHODS, IdentifyOptions
from sysid_ros.core.data.bag import JOINT_STATES, MOTOR_COMMAND
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.target import Plausibility
from sysid_ros.core.online.options import ONLINE_METHODS, OnlineOptions

if TYPE_CHECKING:
    from sysid_ros.core.data.dataset import Dataset
    from sysid_ros.core.data.preprocessing import Preprocessing
    from sysid_ros.core.model.robot import RobotModel
    from sysid_ros.core.model.target import Target
    from sysid_ros.core.report.metrics import Evaluation
    from sysid_ros.core.result import IdentificationResult

# The request, its choices and the method names load nothing heavy (a node declares its parameters
# from them); reading, preparing, solving and writing are imported where run_identify uses them.

__all__ = ["ALL_METHODS", "CHOICES", "ONLINE_OPTIONS", "STAGES", "Canceled", "IdentifyOutcome",
           "IdentifyRequest", "online_effort_lag", "online_options", "run_identify", "verdict"]

#: every method :func:`run_identify` runs: the batch methods, then the online ones (replayed)
ALL_METHODS: tuple[str, ...] = METHODS + ONLINE_METHODS
#: the choices of the request's string options (the CLI's ``choices``, the node's parameter check)
CHOICES: dict[str, tuple[str, ...]] = {"differentiator": ("central", "savgol"),
                                       "velocity": ("auto", "measured", "differentiate"),
                                       "resample": ("auto", "off")}
#: ``IdentifyRequest.effort_lag`` that searches the lag the data fit best
AUTO_LAG = "auto"
#: the online estimators' options a request carries in ``online`` (the estimator node's session
#: parameters; ``method`` is the request's, ``stationary_cut`` and ``effort_lag`` shared with the
#: batch methods)
ONLINE_OPTIONS: tuple[str, ...] = tuple(n for n in OnlineOptions.names()
                                        if n not in ("method", "stationary_cut", "effort_lag"))
#: the run's stages in order, with the fraction of the work done when each begins ("done": the
#: adapter's, once it has the outcome)
STAGES: dict[str, float] = {"reading": 0.0, "preparing": 0.1, "solving": 0.3, "evaluating": 0.8,
                            "writing": 0.9, "done": 1.0}

#: ``progress(stage, message)``: ``stage`` a key of :data:`STAGES` when one begins, None for a log line
Progress = Callable[[str | None, str], None]


class Canceled(Exception):  # noqa: N818 (a request, not an error)
    """The caller's ``cancel()`` said stop: raised at the next stage boundary or log line, before
    any file is written; ``args[0]`` is the stage that was running."""

    @property
    def stage(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class IdentifyRequest:
    """One identification job: every option of ``sysid identify`` and of ``BatchSolve`` (with the
    command line's defaults; units as in ``sysid identify --help``).

    ``data``: recordings (rosbag2 folders or CSV files); several are runs of the same arm,
    identified jointly. ``model``: an MJCF/URDF path (or XML text), loaded with ``base``; or a
    :class:`RobotModel` the adapter loaded (without joint terms: ``friction``/``armature`` choose
    them here). ``out``: the output folder (the adapter checks it may write there).
    """

    data: Sequence[str | os.PathLike[str]]
    model: str | os.PathLike[str] | RobotModel
    out: str | os.PathLike[str]
    method: str = "ols"
    #: '' keeps what the model says, 'fixed' or 'floating' (a path ``model`` only)
    base: str | None = None
    #: '' for the arm, else the body a payload to identify is attached to
    payload_body: str = ""
    # --- the joint terms (core.model.joint_defaults) and the friction shapes
    #: 'model' (the terms the model's joints declare), 'none', or a comma list of coulomb, viscous,
    #: offset, stribeck, sigmoid
    friction: str = "model"
    #: rotor inertia per joint: None when the model declares armature, True, False
    armature: bool | None = None
    #: [rad/s] q̇s of the Stribeck terms; None: searched
    stribeck_velocity: float | None = None
    #: (φ2 [s/rad], φ3 [rad/s]) of every joint's sigmoid friction; None: searched per joint
    sigmoid_shape: tuple[float, float] | None = None
    # --- reading the recordings
    joint_states_topic: str = JOINT_STATES
    command_topic: str = MOTOR_COMMAND
    #: CSV files: the file's column of each field ('' = the project's layout), the time unit
    csv_columns: str = ""
    time_unit: str = "s"
    #: logged effort × scale + offset = torque [N·m]: one value or one per joint (None: 1 and 0)
    torque_scale: Sequence[float] | None = None
    torque_offset: Sequence[float] | None = None
    #: the closed loop of a log without MotorCommand (iv/pc_iv): 'pd:kp=..;kd=..' or 'velocity:kv=..'
    controller: str = ""
    # --- preprocessing (core.data.preprocessing.Preprocessing)
    bandwidth: float = 5.0
    differentiator: str = "central"
    velocity: str = "auto"
    min_segment: float = 2.0
    stationary_cut: bool = True
    resample: str = "auto"
    bridge_gaps: float = -1.0
    #: [sample periods] how late the effort is (core.data.effort_timing); None: the recording's
    #: declaration, else each method's default (batch 0, online -0.5); "auto": the lag the data
    #: fit best (core.batch.effort_lag_search; one recording)
    effort_lag: float | str | None = None
    # --- the method (core.batch.options.IdentifyOptions)
    regularization: float = 0.0
    max_samples: int = 2000
    drop_outliers: bool = False
    # --- plausible exported parameters and the joint-term prior (arm targets)
    mass_factor: float = Plausibility.mass_factor
    extent_factor: float = Plausibility.extent_factor
    com_radius: float = Plausibility.com_radius
    friction_prior: str = "model"
    # --- several runs (core.batch.multi_run)
    #: known payloads, one per run: a JSON file's path, or the JSON list itself (None: no payloads)
    payloads: str | os.PathLike[str] | Sequence[Any] | None = None
    drive_gains: bool = False
    # --- validation, online estimators, outputs
    #: another recording to score the torque prediction on
    validate: str | os.PathLike[str] | None = None
    #: online methods: :data:`ONLINE_OPTIONS` by name (the estimator node's parameters; absent:
    #: the default; ``sample_rate`` None or 0: the data's median rate)
    online: Mapping[str, Any] = field(default_factory=dict)
    plots: bool = True
    #: exit code 0 / success even when bounds or the prior cost more torque than the limit
    accept_cost: bool = False

    def __post_init__(self) -> None:
        for name in CHOICES:
            check_choice(name, getattr(self, name))
        if isinstance(self.effort_lag, str) and self.effort_lag != AUTO_LAG:
            raise SysIdError(f"effort_lag must be a number of sample periods or {AUTO_LAG!r}, "
                             f"got {self.effort_lag!r}")
        if self.effort_lag == AUTO_LAG and self.several_runs:
            raise SysIdError("effort_lag 'auto' searches one recording's lag; with several recordings, "
                             "known payloads or drive gains, state it (e.g. 0.5 for the Damiao bridge)")
        unknown = sorted(set(self.online) - set(ONLINE_OPTIONS))
        if unknown:
            raise SysIdError(f"online options: expected names among {list(ONLINE_OPTIONS)}, got {unknown}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The request's fields, in order."""
        return tuple(f.name for f in fields(cls))

    @property
    def several_runs(self) -> bool:
        """The runs are identified jointly: several recordings, known payloads or drive gains."""
        return len(self.data) > 1 or bool(self.payloads) or self.drive_gains

    @property
    def inputs(self) -> list[str | os.PathLike[str]]:
        """The files hashed into result.json's provenance: the data, then the validation recording."""
        return [*self.data, *([self.validate] if self.validate else [])]

    def preprocessing(self) -> Preprocessing:
        from sysid_ros.core.data.preprocessing import Preprocessing

        return Preprocessing(bandwidth=self.bandwidth, differentiator=self.differentiator,
                             velocity=self.velocity, min_segment=self.min_segment,
                             stationary_cut=self.stationary_cut, resample=self.resample,
                             bridge_gaps=self.bridge_gaps,
                             effort_lag=None if self.effort_lag == AUTO_LAG else self.effort_lag)


def check_choice(name: str, value: str) -> None:
    """:class:`SysIdError` unless ``value`` is one of :data:`CHOICES` ``[name]``."""
    if value not in CHOICES[name]:
        raise SysIdError(f"{name} must be one of {list(CHOICES[name])}, got {value!r}")


@dataclass(frozen=True)
class IdentifyOutcome:
    """What :func:`run_identify` did: the ``result`` and its ``evaluation`` (fit, validation,
    truth), the ``target`` it was identified on (with the friction shapes found), the files
    written (``paths``, absolute) and the content of ``result.json`` (``document``); ``online``:
    the online estimator replayed (None for a batch method); ``cost_warning`` and ``problems``:
    see :func:`verdict`."""

    result: IdentificationResult
    evaluation: Evaluation
    target: Target
    paths: list[Path]
    document: dict[str, Any]
    online: Any = None
    cost_warning: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """0: the estimate can be used; 3 (:data:`~sysid_ros.core.batch.cost.COST_EXIT_CODE`): it
        costs too much torque (unless accepted) or it is not trustworthy (files written all the same)."""
        if self.cost_warning:
            return COST_EXIT_CODE
        return 3 if self.problems else 0

    @property
    def message(self) -> str | None:
        """Why this estimate is not to be used as is (:func:`verdict_message`), or None."""
        return verdict_message(self.result.method, self.cost_warning, self.problems)


def verdict(result: IdentificationResult, *, accept_cost: bool = False) -> tuple[str | None, tuple[str, ...]]:
    """``(cost_warning, problems)`` of ``result``: the cost message when bounds or the prior cost
    more torque than the limit (:func:`~sysid_ros.core.batch.cost.cost_exceeded`; None when
    ``accept_cost``), and why the estimate is not trustworthy (the solver did not reach an optimal,
    converged solution; the exported parameters are not physically consistent)."""
    too_costly = cost_exceeded(result.diagnostics.extra)
    problems = []
    if not result.solver.optimal:
        problems.append(f"solver {result.solver.solver} ended with status {result.solver.status}"
                        + ("" if result.solver.converged else ", not converged"))
    cons = result.consistency
    if cons is not None and not cons.consistent:
        problems.append(f"the exported parameters are not physically consistent ({', '.join(cons.failures)})")
    return (None if accept_cost else too_costly), tuple(problems)


def verdict_message(method: str, cost_warning: str | None, problems: tuple[str, ...]) -> str | None:
    """The one line that says why an estimate of ``method`` is not to be used as is (``sysid
    identify`` prints it on stderr, BatchSolve answers it), or None when it can be: the cost
    warning, else the problems of :func:`verdict`."""
    if cost_warning:
        return f"WARNING: {cost_warning}"
    if problems:
        return f"the {method} estimate is not trustworthy: {'; '.join(problems)}"
    return None


def online_options(method: str, values: Mapping[str, Any], data_rate: float) -> OnlineOptions:
    """The session options of an online ``method`` from ``values`` (:class:`OnlineOptions` fields
    by name; absent: the default); the sample rate is ``data_rate`` unless given (None)."""
    values = dict(values)
    if values.get("sample_rate") is None:
        values["sample_rate"] = data_rate
    return OnlineOptions(method=method, **values)


def online_effort_lag(requested: float | None, meta: Mapping[str, Any]) -> float:
    """The effort lag [sample periods] an online estimator replays a recording with: the one
    ``requested``, else the one the recording declares (``meta``), else the online default."""
    from sysid_ros.core.data.effort_timing import ONLINE_DEFAULT, effective_lag

    return effective_lag(requested, dict(meta), default=ONLINE_DEFAULT)


class _Run:
    """One run's progress and cancel: every stage and log line goes to ``progress`` after
    ``cancel()`` was asked."""

    def __init__(self, progress: Progress | None, cancel: Callable[[], bool] | None,
                 warn: Callable[[str], None] | None) -> None:
        self._progress = progress or (lambda _stage, _message: None)
        self._cancel = cancel or (lambda: False)
        self.warn = warn or (lambda message: self.say(message))
        self.stage_name = "reading"

    def stage(self, name: str, message: str) -> None:
        if self._cancel():
            raise Canceled(self.stage_name)
        self.stage_name = name
        self._progress(name, message)

    def say(self, message: str) -> None:
        if self._cancel():
            raise Canceled(self.stage_name)
        self._progress(None, message)


def run_identify(request: IdentifyRequest, progress: Progress | None = None,
                 cancel: Callable[[], bool] | None = None, *,
                 warn: Callable[[str], None] | None = None) -> IdentifyOutcome:
    """Read, prepare, identify, evaluate and write (module docstring). ``progress(stage,
    message)``: each stage as it begins and each log line; ``cancel()``: asked before each, a True
    stops the run with :class:`Canceled` (nothing written); ``warn(message)``: what the user should
    read (default: a log line). Raises :class:`~sysid_ros.core.errors.SysIdError` (one line saying
    what was expected and what came) on bad input, before any file is written."""
    from sysid_ros.core.batch.identify import check_method
    from sysid_ros.core.model.joint_defaults import default_joint_terms, excluded_line
    from sysid_ros.core.model.robot import RobotModel
    from sysid_ros.core.model.target import batch_target, joint_prior_spec

    if request.method in ONLINE_METHODS:
        if request.several_runs:
            raise SysIdError(f"{request.method} replays one run; several runs take a batch method")
    else:
        check_method(request.method)
    if not request.data:
        raise SysIdError("no recording to identify from (expected at least one bag or CSV file)")
    run = _Run(progress, cancel, warn)
    model = (request.model if isinstance(request.model, RobotModel)
             else RobotModel.load(str(request.model), joint_terms=(), base=request.base))
    model = model.with_joint_terms(default_joint_terms(model.mj, request.friction, request.armature))
    target = batch_target(model, request.payload_body, plausibility=Plausibility(
        request.mass_factor, request.extent_factor, request.com_radius),
        joint_prior=joint_prior_spec(request.friction_prior))
    options = IdentifyOptions(method=request.method, preprocessing=request.preprocessing(),
                              regularization=request.regularization, max_samples=request.max_samples,
                              progress=run.say, stribeck_velocity=request.stribeck_velocity,
                              sigmoid_shape=request.sigmoid_shape, drop_outliers=request.drop_outliers)
    excluded = excluded_line(model.mj, model.joint_terms)  # once the options are checked
    if excluded and not request.payload_body:
        run.warn(excluded)
    run.stage("reading", "reading " + ",".join(str(p) for p in request.data))
    if request.several_runs:
        return _identify_runs(request, run, model, target, options)
    return _identify_one(request, run, model, target, options)


def _identify_one(request: IdentifyRequest, run: _Run, model: RobotModel, target: Target,
                  options: IdentifyOptions) -> IdentifyOutcome:
    from sysid_ros.core.batch.identify import prepare, run_method
    from sysid_ros.core.report.files import write_outputs
    from sysid_ros.core.report.metrics import evaluate, truth_parameters

    ds = _read(request, model, request.data[0], commands=_reads_commands(request))
    run.stage("preparing", f"preparing {len(ds)} samples")
    effort_lag = request.effort_lag
    if effort_lag == AUTO_LAG:
        from sysid_ros.core.batch.effort_lag_search import find_effort_lag

        search = find_effort_lag(ds, target, options.preprocessing, online=request.method in ONLINE_METHODS)
        run.say(search.describe())
        effort_lag = search.lag
        options = replace(options, preprocessing=replace(options.preprocessing, effort_lag=effort_lag))
    prep = prepare(ds, target, options.preprocessing, min_speed=options.min_speed, progress=options.progress,
                   stribeck_velocity=options.stribeck_velocity, sigmoid_shape=options.sigmoid_shape)
    target = prep.target  # with the Stribeck velocity and sigmoid shapes found, if searched
    run.stage("solving", request.method)
    online = None
    if request.method in ONLINE_METHODS:
        from sysid_ros.core.online.replay import online_result, replay

        values = {**request.online, "stationary_cut": request.stationary_cut,
                  "effort_lag": online_effort_lag(effort_lag, ds.meta)}
        session_options = online_options(request.method, values, ds.sample_rate)
        online = replay(ds, target, session_options, truth=truth_parameters(ds.truth, target),
                        progress=options.progress).estimator
        result = online_result(prep, online)
        extra = result.diagnostics.extra  # the lag the replay paired efforts with
        extra = extra | {"online": extra["online"] | {"effort_lag": session_options.effort_lag}}
        result = replace(result, diagnostics=replace(result.diagnostics, extra=extra))
    else:
        result = run_method(prep, options)
    run.stage("evaluating", "evaluating the estimate")
    evaluation = evaluate(result, prep, validation=_validation(request, model, target, options, prep))
    run.stage("writing", f"writing results into {request.out}")
    paths, doc = write_outputs(request.out, result, target, evaluation, plots=request.plots,
                               inputs=request.inputs)
    if online is not None:
        from sysid_ros.core.online.replay import plot_convergence, write_trajectory

        paths.append(write_trajectory(Path(request.out) / "estimates.csv", online))
        if request.plots:
            paths.append(plot_convergence(Path(request.out) / "convergence.png", online))
    return _outcome(request, result, evaluation, target, paths, doc, online)


def _identify_runs(request: IdentifyRequest, run: _Run, model: RobotModel, target: Target,
                   options: IdentifyOptions) -> IdentifyOutcome:
    """Several runs of the arm, each with its known payload (:mod:`sysid_ros.core.batch.multi_run`)."""
    from sysid_ros.core.batch.multi_run import identify_runs, prepare_runs
    from sysid_ros.core.report.files import write_outputs
    from sysid_ros.core.report.metrics import evaluate

    n = len(request.data)
    payloads = _payloads(request.payloads, n)
    datasets = [_read(request, model, path, commands=_reads_commands(request)) for path in request.data]
    run.stage("preparing", f"preparing {n} runs")
    multi = prepare_runs(datasets, payloads, target, options.preprocessing, min_speed=options.min_speed,
                         progress=options.progress, stribeck_velocity=options.stribeck_velocity,
                         sigmoid_shape=options.sigmoid_shape, gains=request.drive_gains)
    target = multi.prep.target
    run.stage("solving", f"{request.method} on {n} runs")
    result, prep, gains = identify_runs(multi, options, gains=request.drive_gains)
    run.stage("evaluating", "evaluating the estimate")
    validation = _validation(request, model, target, options, prep)
    if validation is not None:
        validation = replace(validation, y=validation.y * gains[None, :])
    evaluation = evaluate(result, prep, validation=validation)
    run.stage("writing", f"writing results into {request.out}")
    paths, doc = write_outputs(request.out, result, target, evaluation, plots=request.plots,
                               inputs=request.inputs)
    return _outcome(request, result, evaluation, target, paths, doc)


def _outcome(request: IdentifyRequest, result, evaluation, target, paths, doc,
             online=None) -> IdentifyOutcome:
    cost_warning, problems = verdict(result, accept_cost=request.accept_cost)
    return IdentifyOutcome(result, evaluation, target, paths, doc, online, cost_warning, problems)


def _payloads(payloads, n: int) -> list:
    """The known payloads of ``n`` runs: from a JSON file's path or the JSON list (None: none)."""
    from sysid_ros.core.batch.multi_run import load_payloads, parse_payloads

    if not payloads:
        return [None] * n
    if isinstance(payloads, str | os.PathLike):
        return load_payloads(payloads, n)
    return parse_payloads(list(payloads), n)


def _read(request: IdentifyRequest, model: RobotModel, path: str | os.PathLike[str], *,
          commands: bool, controller: bool = True) -> Dataset:
    """One recording for ``model``'s joints: read (the CSV layout applies to CSV files), torque
    calibrated, with the ``controller``'s command log (when ``controller``)."""
    # a bag refuses a column map or a time unit other than s, with one line (read_data)
    from sysid_ros.core.data.bag import read_data
    from sysid_ros.core.data.columns import ColumnMap
    from sysid_ros.core.data.controller import ControllerDescription

    ds = read_data(path, joint_states_topic=request.joint_states_topic, command_topic=request.command_topic,
                   joint_names=model.dof_joint_names, commands=commands,
                   columns=ColumnMap.parse(request.csv_columns) if request.csv_columns else None,
                   time_unit=request.time_unit)
    ds = ds.for_model(model).with_torque_calibration(request.torque_scale, request.torque_offset)
    if controller and request.controller:
        ds = ControllerDescription.parse(request.controller).apply(ds)
    return ds


def _reads_commands(request: IdentifyRequest) -> bool:
    """Only the IV methods simulate the recorded closed loop: only they read a bag's commands."""
    return request.method in COMMAND_METHODS or bool(request.controller)


def _validation(request: IdentifyRequest, model: RobotModel, target: Target, options: IdentifyOptions,
                prep) -> Any:
    """The validation recording prepared like the identification data (shapes as found, on the
    identification part's grid), or None."""
    from sysid_ros.core.batch.identify import prepare

    if not request.validate:
        return None
    val = _read(request, model, request.validate, commands=False, controller=False)
    timebase = getattr(prep, "timebase", None)
    return prepare(val, target, options.preprocessing, min_speed=options.min_speed, progress=options.progress,
                   search_stribeck=False, search_sigmoid=False, held_out=True,
                   grid_period=None if timebase is None else float(timebase.period))
