"""The identification use case: one request, one function, one outcome.

    IdentifyRequest ──► run_identify ──► IdentifyOutcome

``sysid identify`` (:mod:`sysid_ros.cli.identify`) and the ``batch_solver`` node's ``BatchSolve``
service (:mod:`sysid_ros.nodes.batch_solver`) are adapters: each fills an :class:`IdentifyRequest`
from what its user gave (command-line options; node parameters and the service request), calls
:func:`run_identify` and formats the :class:`IdentifyOutcome` (a summary and an exit code; a
service response and a published estimate). Neither reads data, prepares it, solves or writes
files itself. :data:`REQUEST_SOURCES` says where each request field comes from in each adapter (a
test checks that the two adapters offer the same options).

What the request holds and how it is run::

    data (one recording, or several runs of one arm with their known payloads)
      ─ read_data (bag or CSV; CSV layout) ─ for the model's joints ─ torque calibration ─ controller
      ─ prepare (segments, filters, regressor; Stribeck/sigmoid shapes searched unless given)
      ─ run_method (batch methods)  |  replay (online estimators, options of the estimator node)
      ─ evaluate (fit, validation recording, truth) ─ write_outputs (result.json, MJCF, URDF, plots)

Example (a notebook, no ROS)::

    from sysid_ros.app import IdentifyRequest, run_identify
    from sysid_ros.core.model.robot import RobotModel, joint_terms

    model = RobotModel.load("arm.xml", joint_terms=joint_terms("coulomb,viscous", False))
    outcome = run_identify(IdentifyRequest(data=("run.mcap",), model=model, out="out", method="pc_ls"))
    print(outcome.result.diagnostics.relative_error, outcome.paths)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sysid_ros.core.batch.identify import (
    COMMAND_METHODS,
    METHODS,
    IdentifyOptions,
    check_method,
    prepare,
    run_method,
)
from sysid_ros.core.batch.multi_run import identify_runs, parse_payloads, prepare_runs
from sysid_ros.core.data.bag import CSV_SUFFIXES, JOINT_STATES, MOTOR_COMMAND, read_data
from sysid_ros.core.data.columns import ColumnMap
from sysid_ros.core.data.controller import ControllerDescription
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import Plausibility, Target, batch_target, joint_prior_spec
from sysid_ros.core.online.session import ONLINE_METHODS, OnlineOptions
from sysid_ros.core.report.files import write_outputs
from sysid_ros.core.report.metrics import Evaluation, evaluate, truth_parameters
from sysid_ros.core.result import IdentificationResult

__all__ = ["REQUEST_SOURCES", "IdentifyOutcome", "IdentifyRequest", "run_identify"]


@dataclass(frozen=True)
class IdentifyRequest:
    """One identification job (every option of ``sysid identify`` and of ``BatchSolve``).

    ``data``: recordings (rosbag2 folders or CSV files); several are runs of the same arm,
    identified jointly, each with its entry of ``known_payloads``. ``model``: the robot, loaded by
    the adapter with the joint terms to identify (friction, armature) and its base. ``out``: the
    output folder. The other fields, grouped as below, have the command line's defaults.
    """

    data: Sequence[str | os.PathLike[str]]
    model: RobotModel
    out: str | os.PathLike[str]
    method: str = "ols"
    #: '' for the arm, else the body a payload to identify is attached to
    payload_body: str = ""
    # --- reading the recordings
    joint_states_topic: str = JOINT_STATES
    command_topic: str = MOTOR_COMMAND
    #: CSV files: the file's column of each field (``time=timestamp,q=actual_q_{i},..``; '' = the
    #: project's layout) and the unit of the time column
    csv_columns: str = ""
    time_unit: str = "s"
    #: logged effort × scale + offset = torque [N·m]: one value or one per joint (None: 1 and 0)
    torque_scale: Sequence[float] | None = None
    torque_offset: Sequence[float] | None = None
    #: the closed loop of a log without MotorCommand (iv/pc_iv): ``pd:kp=..;kd=..`` or ``velocity:kv=..``
    controller: str = ""
    # --- preprocessing (:class:`~sysid_ros.core.data.preprocessing.Preprocessing`)
    bandwidth: float = 5.0
    differentiator: str = "central"
    velocity: str = "auto"
    min_segment: float = 2.0
    stationary_cut: bool = True
    resample: str = "auto"
    bridge_gaps: float = -1.0
    # --- the method (:class:`~sysid_ros.core.batch.identify.IdentifyOptions`)
    regularization: float = 0.0
    max_samples: int = 2000
    #: [rad/s] q̇s of the Stribeck terms; None: searched
    stribeck_velocity: float | None = None
    #: (φ2 [s/rad], φ3 [rad/s]) of every joint's sigmoid friction; None: searched per joint
    sigmoid_shape: tuple[float, float] | None = None
    # --- plausible exported parameters and the joint-term prior (arm targets)
    mass_factor: float = Plausibility.mass_factor
    extent_factor: float = Plausibility.extent_factor
    com_radius: float = Plausibility.com_radius
    friction_prior: str = "model"
    # --- several runs (:mod:`sysid_ros.core.batch.multi_run`)
    #: the JSON list of known payloads, one entry per run (None: no payloads)
    known_payloads: Sequence[Any] | None = None
    drive_gains: bool = False
    # --- validation and online estimators
    #: another recording to score the torque prediction on
    validate: str | os.PathLike[str] | None = None
    #: online methods: :class:`~sysid_ros.core.online.session.OnlineOptions` fields by name (the
    #: estimator node's parameters), ``sample_rate`` None = the data's median rate
    online: Mapping[str, Any] = field(default_factory=dict)
    plots: bool = True
    #: called with one-line progress messages (the CLI prints them, the node logs them)
    progress: Callable[[str], None] | None = None

    @property
    def several_runs(self) -> bool:
        """Whether the runs are identified jointly (several recordings, known payloads or drive gains)."""
        return len(self.data) > 1 or bool(self.known_payloads) or self.drive_gains

    def preprocessing(self) -> Preprocessing:
        return Preprocessing(bandwidth=self.bandwidth, differentiator=self.differentiator,
                             velocity=self.velocity, min_segment=self.min_segment,
                             stationary_cut=self.stationary_cut, resample=self.resample,
                             bridge_gaps=self.bridge_gaps)

    def options(self) -> IdentifyOptions:
        return IdentifyOptions(method=self.method, preprocessing=self.preprocessing(),
                               regularization=self.regularization, max_samples=self.max_samples,
                               progress=self.progress, stribeck_velocity=self.stribeck_velocity,
                               sigmoid_shape=self.sigmoid_shape)

    def target(self) -> Target:
        return batch_target(self.model, self.payload_body, plausibility=Plausibility(
            self.mass_factor, self.extent_factor, self.com_radius),
            joint_prior=joint_prior_spec(self.friction_prior))


@dataclass(frozen=True)
class IdentifyOutcome:
    """What :func:`run_identify` did: the ``result`` and its ``evaluation`` (fit, validation,
    truth), the ``target`` it was identified on (with the friction shapes found), the files
    written (``paths``, absolute) and the content of ``result.json`` (``document``, JSON types);
    ``online``: the online estimator replayed (None for a batch method)."""

    result: IdentificationResult
    evaluation: Evaluation
    target: Target
    paths: list[Path]
    document: dict[str, Any]
    online: Any = None


#: where each :class:`IdentifyRequest` field comes from: ``(sysid identify's option dest, the
#: batch_solver node's source)``, the latter ``"param:<name>"`` (node parameter),
#: ``"request:<field>"`` (BatchSolve request field) or ``"estimator:<name>"`` (the online options:
#: the estimator node's parameters; the batch_solver runs batch methods only)
REQUEST_SOURCES: dict[str, tuple[str, str]] = {
    "data": ("data", "request:bag_path"),
    "model": ("model", "request:model_path"),
    "out": ("out", "request:output_dir"),
    "method": ("method", "request:method"),
    "payload_body": ("payload_only", "request:payload_body"),
    "joint_states_topic": ("joint_states_topic", "request:joint_states_topic"),
    "command_topic": ("command_topic", "request:motor_command_topic"),
    "csv_columns": ("columns", "param:csv_columns"),
    "time_unit": ("time_unit", "param:time_unit"),
    "torque_scale": ("torque_scale", "param:torque_scale"),
    "torque_offset": ("torque_offset", "param:torque_offset"),
    "controller": ("controller", "param:controller"),
    "bandwidth": ("bandwidth", "param:bandwidth"),
    "differentiator": ("differentiator", "param:differentiator"),
    "velocity": ("velocity", "param:velocity"),
    "min_segment": ("min_segment", "param:min_segment"),
    "stationary_cut": ("stationary_cut", "param:stationary_cut"),
    "resample": ("resample", "param:resample"),
    "bridge_gaps": ("bridge_gaps", "param:bridge_gaps"),
    "regularization": ("regularization", "request:regularization_weight"),
    "max_samples": ("max_samples", "param:max_samples"),
    "stribeck_velocity": ("stribeck_velocity", "param:stribeck_velocity"),
    "sigmoid_shape": ("sigmoid_shape", "param:sigmoid_shape"),
    "mass_factor": ("mass_factor", "param:mass_factor"),
    "extent_factor": ("extent_factor", "param:extent_factor"),
    "com_radius": ("com_radius", "param:com_radius"),
    "friction_prior": ("friction_prior", "param:friction_prior"),
    "known_payloads": ("payloads", "param:known_payloads"),
    "drive_gains": ("drive_gains", "param:drive_gains"),
    "validate": ("validate", "param:validation_path"),
    "online": ("(online options)", "estimator:(session parameters)"),
    "plots": ("no_plots", "param:plots"),
}
#: options that choose how the model is loaded (the adapter loads it): ``sysid identify``'s dest
#: and the node's source, as above
MODEL_SOURCES: dict[str, tuple[str, str]] = {
    "friction": ("friction", "request:friction"),
    "armature": ("armature", "request:armature"),
    "base": ("base", "param:base"),
}


def run_identify(request: IdentifyRequest) -> IdentifyOutcome:
    """Read, prepare, identify, evaluate and write (see the module docstring); raises
    :class:`~sysid_ros.core.errors.SysIdError` (one line saying what was expected and what came)
    on bad input, before any file is written."""
    if request.method in ONLINE_METHODS:
        if request.several_runs:
            raise SysIdError(f"{request.method} replays one run; several runs take a batch method")
    else:
        check_method(request.method)
    if not request.data:
        raise SysIdError("no recording to identify from (expected at least one bag or CSV file)")
    if request.several_runs:
        return _identify_runs(request)
    return _identify_one(request)


def read_recording(request: IdentifyRequest, path: str | os.PathLike[str], *, commands: bool,
                   controller: bool = True) -> Dataset:
    """One recording of ``request`` for its model's joints: read (the CSV layout applies to CSV
    files), torque calibrated, and with the ``controller``'s command log (when ``controller``)."""
    path = Path(path)
    layout = {}
    if path.suffix.lower() in CSV_SUFFIXES:
        layout = {"columns": ColumnMap.parse(request.csv_columns) if request.csv_columns else None,
                  "time_unit": request.time_unit}
    ds = read_data(path, joint_states_topic=request.joint_states_topic,
                   command_topic=request.command_topic, joint_names=request.model.dof_joint_names,
                   commands=commands, **layout)
    ds = ds.for_model(request.model).with_torque_calibration(request.torque_scale, request.torque_offset)
    if controller and request.controller:
        ds = ControllerDescription.parse(request.controller).apply(ds)
    return ds


def _reads_commands(request: IdentifyRequest) -> bool:
    """Only the IV methods simulate the recorded closed loop: only they read a bag's commands."""
    return request.method in COMMAND_METHODS or bool(request.controller)


def _identify_one(request: IdentifyRequest) -> IdentifyOutcome:
    options = request.options()
    ds = read_recording(request, request.data[0], commands=_reads_commands(request))
    prep = prepare(ds, request.target(), options.preprocessing, min_speed=options.min_speed,
                   progress=options.progress, stribeck_velocity=options.stribeck_velocity,
                   sigmoid_shape=options.sigmoid_shape)
    target = prep.target  # with the Stribeck velocity and sigmoid shapes found, if searched
    online = None
    if request.method in ONLINE_METHODS:
        from sysid_ros.core.online.replay import online_result, replay

        online = replay(ds, target, _online_options(request, ds.sample_rate),
                        truth=truth_parameters(ds.truth, target), progress=options.progress).estimator
        result = online_result(prep, online)
    else:
        result = run_method(prep, options)
    evaluation = evaluate(result, prep, validation=_validation(request, target, options))
    paths, doc = write_outputs(request.out, result, target, evaluation, plots=request.plots)
    if online is not None:
        from sysid_ros.core.online.replay import plot_convergence, write_trajectory

        paths.append(write_trajectory(Path(request.out) / "estimates.csv", online))
        if request.plots:
            paths.append(plot_convergence(Path(request.out) / "convergence.png", online))
    return IdentifyOutcome(result, evaluation, target, paths, doc, online)


def _identify_runs(request: IdentifyRequest) -> IdentifyOutcome:
    """Several runs of the arm, each with its known payload (:mod:`sysid_ros.core.batch.multi_run`)."""
    options = request.options()
    datasets = [read_recording(request, path, commands=_reads_commands(request)) for path in request.data]
    payloads = (parse_payloads(list(request.known_payloads), len(datasets)) if request.known_payloads
                else [None] * len(datasets))
    multi = prepare_runs(datasets, payloads, request.target(), options.preprocessing,
                         min_speed=options.min_speed, progress=options.progress,
                         stribeck_velocity=options.stribeck_velocity,
                         sigmoid_shape=options.sigmoid_shape, gains=request.drive_gains)
    target = multi.prep.target
    result, prep, gains = identify_runs(multi, options, gains=request.drive_gains)
    validation = _validation(request, target, options)
    if validation is not None:
        validation = replace(validation, y=validation.y * gains[None, :])
    evaluation = evaluate(result, prep, validation=validation)
    paths, doc = write_outputs(request.out, result, target, evaluation, plots=request.plots)
    return IdentifyOutcome(result, evaluation, target, paths, doc)


def _validation(request: IdentifyRequest, target: Target, options: IdentifyOptions):
    """The validation recording prepared like the identification data (shapes as found), or None."""
    if not request.validate:
        return None
    val = read_recording(request, request.validate, commands=False, controller=False)
    return prepare(val, target, options.preprocessing, min_speed=options.min_speed,
                   progress=options.progress, search_stribeck=False, search_sigmoid=False)


def _online_options(request: IdentifyRequest, data_rate: float) -> OnlineOptions:
    """The session options of an online method; the sample rate is the data's unless given."""
    values = dict(request.online)
    values.pop("method", None)
    if values.get("sample_rate") is None:
        values["sample_rate"] = data_rate
    return OnlineOptions(method=request.method, **values)


#: every method ``run_identify`` runs: the batch methods, then the online ones (replayed)
ALL_METHODS: tuple[str, ...] = METHODS + ONLINE_METHODS
