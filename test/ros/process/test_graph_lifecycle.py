"""The graph's life as processes (no launch tooling needed): a run that cannot go on ends instead
of hanging, Ctrl-C ends every node with status 0 however many times it comes, and parameters that
only take effect at start-up are read-only.

Each test runs the real node executables (``python -m sysid_ros.nodes.<node>``) over DDS on this
machine, in the test's own domain; waits are bounded and say what they waited for.
"""

from __future__ import annotations

import signal
import time

import pytest
from builtin_interfaces.msg import Time
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from support.robots import DEFAULT_ROBOT
from support.ros import SpinningNode
from support.waits import wait_until, wait_with_nodes

from sysid_ros.core.data.bag import partial_folders, read_bag
from sysid_ros.nodes.processes import NodeProcess
from sysid_ros.nodes.qos import PROGRESS

pytestmark = pytest.mark.ros
START = 300.0  # [s] a node process's start on a 2-core host at load 40 (imports, MuJoCo model)
TIMEOUT = 30.0  # [s of wall time] lockstep_timeout: longer than a live consumer lags on a loaded host
STOP = 60.0  # [s] bound on a node's exit after SIGINT at load 40 (the 2 s figure: benchmarks/node_startup.py)


def _log_has(proc: NodeProcess, text: str) -> bool:
    return text in proc.log.read_text(errors="replace")


def _wait_for_line(proc: NodeProcess, text: str, timeout: float = START) -> None:
    wait_with_nodes(lambda: _log_has(proc, text), timeout, f"{proc.module} to say {text!r}", procs=[proc])


def _exit_status(proc: NodeProcess, timeout: float = STOP) -> int:
    """Wait (bounded) for ``proc`` to exit on its own; its status (the output is in ``proc.output``)."""
    wait_until(lambda: not proc.running, timeout, f"{proc.module} to exit")
    return proc.stop()


@pytest.mark.timeout(600)
def test_a_recorder_asked_for_an_existing_bag_refuses_in_one_line(tmp_path, ros_domain_id):
    bag = tmp_path / "run1"
    bag.mkdir()
    (bag / "keep.txt").write_text("an earlier run")
    rec = NodeProcess("recorder", domain_id=ros_domain_id, config="recorder", overrides={"output": str(bag)})
    status = _exit_status(rec, START)
    assert status == 1, rec.output
    assert (f"[RecorderNode] cannot start: output {bag} exists; choose another output or remove it"
            in rec.output)
    assert "Traceback" not in rec.output
    assert sorted(p.name for p in bag.iterdir()) == ["keep.txt"]  # nothing written, nothing removed
    assert partial_folders(bag) == []


@pytest.mark.timeout(900)
def test_a_consumer_killed_mid_run_ends_the_run_and_the_bag_is_finished(tmp_path, ros_domain_id):
    """Lockstep simulator waiting for the estimator's and the recorder's progress; ``kill -9`` of
    the estimator: after ``lockstep_timeout`` of wall time the simulator says what it waited for
    and exits with status 1 (a launch then stops the graph); the recorder, stopped with SIGINT as
    a launch would, finishes the bag of what was simulated."""
    bag = tmp_path / "run"
    common = {"model_path": str(DEFAULT_ROBOT)}
    sim = NodeProcess("mujoco_sim", domain_id=ros_domain_id, config="mujoco_sim", overrides={
        **common, "real_time_factor": 0.0, "lockstep": True, "lockstep_command": False,
        "lockstep_wait_for": ["estimator/progress", "recorder/progress"], "lockstep_timeout": TIMEOUT})
    est = NodeProcess("estimator", domain_id=ros_domain_id, config="estimator",
                      overrides={**common, "use_sim_time": True, "reliable_input": True})
    rec = NodeProcess("recorder", domain_id=ros_domain_id, config="recorder",
                      overrides={"output": str(bag), "use_sim_time": True})
    procs = [sim, est, rec]
    try:
        _wait_for_line(sim, ", mode ")  # stepping (its 5 s report): the graph runs
        est.proc.kill()
        killed = time.monotonic()
        status = _exit_status(sim, timeout=TIMEOUT + 60.0)
        waited = time.monotonic() - killed
        assert status == 1, sim.output
        assert "(lockstep_timeout) for /estimator/progress >=" in sim.output, sim.output[-3000:]
        assert "a consumer died or did not start; the run ends" in sim.output
        assert "[MujocoSimNode] stopped: " in sim.output
        assert "Traceback" not in sim.output
        assert waited >= TIMEOUT, waited  # not before the timeout
        assert rec.running, "the recorder outlives the simulator until it is stopped"
        assert rec.stop(STOP) == 0, rec.output
    finally:
        for p in procs:
            p.stop(STOP)
    data = read_bag(bag)
    assert len(data) > 100 and partial_folders(bag) == []
    assert "bag finished: " in rec.output


@pytest.mark.timeout(900)
@pytest.mark.parametrize("spacing", [0.0, 0.1, 0.3, 1.0])
def test_two_ctrl_c_at_any_spacing_end_a_node_with_status_0(spacing, tmp_path, ros_domain_id):
    """Two SIGINTs, as two Ctrl-Cs or the terminal's plus launch's: the node (here the recorder
    while it records the running simulator, the node with the most to finish) exits 0, its bag
    whole."""
    bag = tmp_path / "run"
    sim = NodeProcess("mujoco_sim", domain_id=ros_domain_id, config="mujoco_sim",
                      overrides={"model_path": str(DEFAULT_ROBOT), "real_time_factor": 1.0})
    rec = NodeProcess("recorder", domain_id=ros_domain_id, config="recorder", overrides={"output": str(bag)})
    listener = SpinningNode("progress_listener", ros_domain_id)
    try:
        _wait_for_line(rec, "recording [")
        _wait_for_line(sim, ", mode ")  # stepping for 5 s (its report)
        # the recorder has joint states in its bag (its ~/progress: the newest one's stamp) before
        # the Ctrl-Cs: a log line of the simulator does not say that its states reached the recorder
        # (at load 14 none had: nothing recorded, no bag made, both nodes rightly exited 0)
        progress: list = []
        listener.node.create_subscription(Time, "/recorder/progress", progress.append, PROGRESS)
        wait_with_nodes(lambda: progress, START, "the recorder's ~/progress (joint states in its bag)",
                        procs=[rec, sim])
        for proc in (rec, sim):
            proc.proc.send_signal(signal.SIGINT)
            time.sleep(spacing)  # the spacing under test (0: back to back), not synchronisation
            proc.proc.send_signal(signal.SIGINT)
        assert _exit_status(rec) == 0, rec.output[-3000:]
        assert _exit_status(sim) == 0, sim.output[-3000:]
    finally:
        listener.close()
        sim.stop(STOP)
        rec.stop(STOP)
    assert "Traceback" not in rec.output + sim.output
    assert len(read_bag(bag)) > 0 and partial_folders(bag) == []


def _set(node, service: str, name: str, value: ParameterValue, proc: NodeProcess):
    """``set_parameters`` of one parameter on ``proc``'s node; fails at once, with the node's output,
    if the node process ends meanwhile (a node whose parameter service raised looked like a hang)."""
    client = node.node.create_client(SetParameters, service)
    assert client.wait_for_service(timeout_sec=START)
    future = client.call_async(SetParameters.Request(parameters=[Parameter(name=name, value=value)]))
    try:
        wait_until(future.done, START, f"the answer of {service}", proc=proc.proc)
    except BaseException:
        proc.stop(STOP)
        print(proc.output[-3000:])
        raise
    return future.result().results[0]


@pytest.mark.timeout(900)
def test_start_up_parameters_are_read_only_and_run_time_ones_apply(tmp_path, ros_domain_id):
    sim = NodeProcess("mujoco_sim", domain_id=ros_domain_id, config="mujoco_sim",
                      overrides={"model_path": str(DEFAULT_ROBOT), "real_time_factor": 2})
    traj = NodeProcess("trajectory_publisher", domain_id=ros_domain_id, config="trajectory_publisher",
                       overrides={"model_path": str(DEFAULT_ROBOT)})
    node = SpinningNode("param_client", ros_domain_id)
    try:
        _wait_for_line(sim, "real-time factor 2")  # the override at start still applies
        _wait_for_line(traj, "excitation ready")
        # parameters set while the command thread commands a run (its StateClock once shadowed
        # the node's ROS clock, and the first successful set raised in the executor)
        _wait_for_line(traj, "excitation started")
        double = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=0.5)
        result = _set(node, "/mujoco_sim/set_parameters", "real_time_factor", double, sim)
        assert not result.successful
        assert result.reason == "Trying to set a read-only parameter: real_time_factor."
        result = _set(node, "/trajectory_publisher/set_parameters", "rate", double, traj)
        assert not result.successful and "read-only" in result.reason
        # applies to the next run (~/start): settable
        result = _set(node, "/trajectory_publisher/set_parameters", "excitation_time",
                      ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=5.0), traj)
        assert result.successful, result.reason
        assert traj.running and "Traceback" not in traj.log.read_text(errors="replace")
    finally:
        node.close()
        sim.stop(STOP)
        traj.stop(STOP)
    assert sim.proc.returncode == 0 and traj.proc.returncode == 0, sim.output + traj.output


@pytest.mark.timeout(900)
def test_free_running_simulation_is_recorded_from_its_first_state(tmp_path, ros_domain_id):
    """``lockstep: false`` with consumers named: physics starts only once the recorder is
    connected (the start gate), so the bag begins at the first state instead of seconds into the
    run (issue 24: 2.2 s were missing)."""
    bag = tmp_path / "run"
    sim = NodeProcess("mujoco_sim", domain_id=ros_domain_id, config="mujoco_sim", overrides={
        "model_path": str(DEFAULT_ROBOT), "real_time_factor": 1.0, "lockstep": False,
        "lockstep_command": False, "lockstep_wait_for": ["recorder/progress"]})
    rec = NodeProcess("recorder", domain_id=ros_domain_id, config="recorder", overrides={"output": str(bag)})
    try:
        _wait_for_line(sim, ", mode ")  # 5 s of stepping
        assert rec.stop(STOP) == 0, rec.output
    finally:
        sim.stop(STOP)
        rec.stop(STOP)
    data = read_bag(bag)
    assert data.t[0] < 0.01, data.t[:3]  # [s] the first published state (every 2nd step at 1 kHz)
    assert data.t[-1] > 1.0
