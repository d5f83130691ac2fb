"""`sysid demo` under misuse: invalid numbers refused before any node starts; SIGTERM or SIGINT to
the demo's own process ends every node it started (none orphaned), finalises the bag and prints one
line; without ROS 2 one line says how to get it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros
START_TIMEOUT = 240.0  # s: the nodes' start on a loaded 2-core machine (imports, MuJoCo, DDS)


def _demo(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sysid_ros.cli", "demo", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("option, value, message", [
    ("--duration", "-5", "the duration must be a finite number > 0 s, got -5.0"),
    ("--duration", "nan", "the duration must be a finite number > 0 s, got nan"),
    ("--real-time-factor", "-1", "the real-time factor must be a finite number >= 0 (0: as fast as the "
                                 "graph goes), got -1.0"),
    ("--domain-id", "500", "--domain-id must be in 0-101"),
    ("--domain-probe", "0", "--domain-probe must be a finite number > 0 s, got 0.0"),
])
def test_invalid_numbers_are_refused_before_any_node_starts(tmp_path, option, value, message):
    out = tmp_path / "demo"
    started = time.monotonic()
    proc = _demo(option, value, "--out", str(out))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("sysid demo: error: ") and message in stderr, stderr
    assert not out.exists()  # nothing started, nothing written
    assert time.monotonic() - started < 120


def test_without_ros_one_line_says_how_to_get_it(tmp_path):
    # rclpy made unimportable in this process only (what `pip install .` without ROS gives)
    code = ("import sys; sys.modules['rclpy'] = None; from sysid_ros.cli import main; "
            f"sys.exit(main(['demo', '--duration', '2', '--out', {str(tmp_path / 'demo')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("sysid demo: error: the demo runs ROS 2 nodes, and ROS 2 (rclpy) is not "
                                  "installed here: run `make demo`"), proc.stderr


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_demo_ends_every_node_and_finalises_the_bag(tmp_path, sig):
    out = tmp_path / "demo"
    # the demo chooses its own free domain (its default): an in-process test's shut-down rclpy
    # context can keep its participant, and a node such as damiao_bridge, visible in the domain this
    # test would be given (the demo then refuses it, as it should)
    env = {k: v for k, v in os.environ.items() if k != "ROS_DOMAIN_ID"}
    env.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
    proc = _demo("--duration", "60", "--out", str(out), env=env)
    lines = []
    deadline = time.monotonic() + START_TIMEOUT
    for line in proc.stderr:  # bounded: the demo prints progress every 3 s, or exits
        lines.append(line)
        if ("t = " in line and " samples" in line) or time.monotonic() > deadline:
            break  # data flows: the recorder has something to finalise
    assert any("t = " in line and " samples" in line for line in lines), "".join(lines)
    nodes = _children(proc.pid)
    assert len(nodes) == 5, nodes  # recorder, estimator, trajectory_publisher, batch_solver, mujoco_sim
    proc.send_signal(sig)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130
    last = [line for line in rest.splitlines() if not line.startswith("[sysid demo]")]
    assert last == ["sysid demo: interrupted (every node stopped; the recording so far is in "
                    f"{out / 'bag'})"], rest
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in nodes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in nodes if _alive(p)]  # none orphaned
    assert (out / "bag" / "metadata.yaml").is_file()  # the bag is finalised under its name
    assert not list(out.glob(".bag.partial-*"))


@pytest.mark.timeout(300)
def test_a_domain_in_use_is_refused_with_the_nodes_found(tmp_path, free_ros_domain_id):
    ros_domain_id = free_ros_domain_id  # no other node there: the refusal names the intruder alone
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    intruder = rclpy.create_node("someone_elses_node", context=context)
    try:
        out = tmp_path / "demo"
        env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        # a probe long enough for discovery on a loaded host: this checks the refusal, not how fast it is
        proc = _demo("--domain-id", str(ros_domain_id), "--domain-probe", "30", "--duration", "2",
                     "--out", str(out), env=env)
        _, stderr = proc.communicate(timeout=240)
    finally:
        intruder.destroy_node()
        rclpy.try_shutdown(context=context)
    assert proc.returncode == 1, stderr
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"sysid demo: error: ROS domain {ros_domain_id} (--domain-id) is in use on this "
                             "machine by nodes ['someone_elses_node']"), stderr
    assert not out.exists()  # refused before anything was written or started


def test_a_free_running_recording_is_accepted_within_its_loss_bound(tmp_path):
    from support.robots import TEST_ROBOTS

    from sysid_ros.core.data.bag import dataset_topics, write_bag
    from sysid_ros.core.model.robot import RobotModel
    from sysid_ros.core.sim.synthetic import simulate_dataset
    from sysid_ros.nodes.sim_demo import _accepted_losses

    ds = simulate_dataset(RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml"), duration=2.0, seed=1)  # 1000 states
    bag = write_bag(tmp_path / "bag", dataset_topics(ds))
    commands_only = "LOST DATA: /motor_command: 0 lost (DDS), 17556 missing in stamp gaps"
    line = _accepted_losses(commands_only, bag)
    assert line.startswith("free-running run: 0 of 1000 joint states not recorded (0.00 %, within the 1 % ")
    few = "LOST DATA: /joint_states: 2 lost (DDS), 3 missing in stamp gaps; " + commands_only[11:]
    assert "5 of 1005 joint states not recorded (0.50 %" in _accepted_losses(few, bag)
    assert _accepted_losses("LOST DATA: /joint_states: 0 lost (DDS), 11 missing in stamp gaps", bag) is None
    assert _accepted_losses("LOST DATA: /motor_command: 4 lost (DDS), 0 missing in stamp gaps", bag) is None
    assert _accepted_losses("LOST DATA: something else", bag) is None
