"""A node refused at start says why in one line and exits 1: no traceback, no second error from
tearing down the half-built node, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros


def _run(module: str, domain_id: int, *params: str) -> tuple[int, str]:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    cmd = [sys.executable, "-m", f"sysid_ros.nodes.{module}", "--ros-args"]
    for p in params:
        cmd += ["-p", p]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    return proc.returncode, proc.stdout + proc.stderr


def test_recorder_without_topics(tmp_path, ros_domain_id):
    code, out = _run("recorder", ros_domain_id, "topics:=[]", f"output:={tmp_path / 'bag'}")
    assert code == 1
    assert out.strip().splitlines() == ["[RecorderNode] cannot start: topics: expected at least one topic to "
                                        "record (e.g. ['/joint_states']), got none"], out
    assert not list(tmp_path.iterdir())


def test_recorder_with_an_unwritable_output(read_only, ros_domain_id):
    code, out = _run("recorder", ros_domain_id, f"output:={read_only / 'bag'}")
    assert code == 1
    assert out.strip().splitlines() == [f"[RecorderNode] cannot start: output {read_only / 'bag'}: cannot "
                                        f"write in {read_only} (Read-only file system)"], out


def test_recorder_with_a_declared_type_the_bag_cannot_hold(tmp_path, ros_domain_id):
    """The bag is opened by the writer thread once the node is ready (its start does not wait for
    the type store): a declared type rclpy knows and the bag's type store does not (sysid_ros's
    Precision) still ends the node with one line and status 1, nothing left behind."""
    code, out = _run("recorder", ros_domain_id, "topics:=['estimator/precision']",
                     "types:=['sysid_ros/msg/Precision']", f"output:={tmp_path / 'bag'}")
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[-1] == ("[RecorderNode] stopped: cannot record /estimator/precision: message type "
                         "sysid_ros/msg/Precision is unknown to the bag type store (ROS 2 Kilted types "
                         "and sysid_ros messages)"), out
    assert not [line for line in lines[:-1] if "Traceback" in line or "ERROR" in line], out
    assert not list(tmp_path.iterdir())


def test_estimator_with_a_bad_model_path(ros_domain_id):
    code, out = _run("estimator", ros_domain_id, "model_path:=/nonexistent/arm.xml")
    assert code == 1
    assert out.strip().splitlines() == ["[EstimatorNode] cannot start: expected an MJCF or URDF file, got "
                                        "'/nonexistent/arm.xml' (not found)"], out
