"""Launch arguments and ``-p`` overrides reach the nodes in either number form.

``ros2 launch ... real_time_factor:=2`` (or ``-p alpha:=10``) hands an integer to a parameter
declared as a float; a switch may come as ``1``. rclpy alone would refuse both and the node
would die with ``InvalidParameterTypeException``. These run the real node executables.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.waits import stop_process

pytestmark = pytest.mark.ros
START_TIMEOUT = 60.0  # s: a node's start on a loaded 2-core machine (imports, MuJoCo model)


def _start(module: str, domain_id: int, *params: str, params_file: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", f"sysid_ros.nodes.{module}", "--ros-args"]
    if params_file is not None:
        cmd += ["--params-file", str(params_file)]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_line(proc: subprocess.Popen, needle: str) -> list[str]:
    """Lines of ``proc`` up to the one containing ``needle`` (bounded by the test timeout; the
    process ending first fails the test with its output)."""
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if needle in line:
            return lines
    pytest.fail(f"process ended (status {proc.wait()}) before printing {needle!r}:\n{''.join(lines)}")


@pytest.mark.timeout(120)
def test_integer_values_reach_float_parameters_and_one_reaches_a_switch(ros_domain_id):
    proc = _start("mujoco_sim", ros_domain_id, "real_time_factor:=2", "rate:=500", "floating_base:=0",
                  "command_timeout:=1")
    try:
        lines = _wait_for_line(proc, "simulating")
        assert "at 500 Hz, real-time factor 2" in lines[-1], lines[-1]
    finally:
        out = stop_process(proc)
    assert proc.returncode == 0, out
    assert "Exception" not in "".join(lines) + out

    proc = _start("estimator", ros_domain_id, "alpha:=10", "torque_noise:=1", "reliable_input:=1",
                  "publish_rate:=5")
    try:
        _wait_for_line(proc, "estimating")
    finally:
        out = stop_process(proc)
    assert proc.returncode == 0, out


@pytest.mark.timeout(120)
def test_a_value_of_the_wrong_kind_ends_the_node_with_the_reason(ros_domain_id):
    proc = _start("mujoco_sim", ros_domain_id, "rate:=fast")
    out, _ = proc.communicate(timeout=START_TIMEOUT)
    assert proc.returncode == 1, out
    assert "parameter rate: expected a number, got 'fast'" in out
    assert "Traceback" not in out


@pytest.mark.timeout(180)
def test_the_bridge_takes_one_for_its_switches(ros_domain_id):
    """``use_emulator:=1 autostart:=1`` (as ``ros2 launch ... use_emulator:=1`` gives them): the
    bridge starts its emulated motors and activates itself; Ctrl-C disables them."""
    proc = _start("damiao_bridge", ros_domain_id, "use_emulator:=1", "autostart:=1", "rate:=500",
                  params_file=Path(__file__).parents[3] / "config" / "yam_damiao.yaml")
    try:
        lines = _wait_for_line(proc, "EMULATED motors on virtual channel")
        lines += _wait_for_line(proc, "active: 6 motors enabled")
    finally:
        out = stop_process(proc)
    assert proc.returncode == 0, "".join(lines) + out
    assert "Exception" not in "".join(lines) + out
    assert "all 6 motors disabled" in out and "confirmed" in out, out
