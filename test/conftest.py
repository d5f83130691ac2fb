"""Shared fixtures. Every ROS test runs on loopback only, in its own context and DDS domain."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

# DDS stays on this machine, for every test in this session (set before rclpy is imported).
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_STATIC_PEERS", None)

ROOT = Path(__file__).resolve().parent.parent
TEST_ROBOTS = ROOT / "test" / "robots"  # written for this repository from published figures
DEFAULT_ROBOT = ROOT / "config" / "robots" / "yam_damiao.xml"
ROBOT_FILES = sorted(TEST_ROBOTS.glob("*.xml"))

# Domain ids 1..100 stay inside the default port range; spread concurrent pytest processes apart.
_domains = itertools.count(1 + (os.getpid() % 50) * 2)


@pytest.fixture
def ros_domain_id() -> int:
    """A DDS domain id of this test alone (use it for every context the test creates)."""
    return 1 + (next(_domains) - 1) % 100


def stop_process(proc) -> str:
    """SIGINT a node process, wait (kill after 20 s) and return its output."""
    import signal
    import subprocess

    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    except ValueError:  # already stopped and read by the test
        return ""
    return out or ""


def robot_params():
    """pytest params over the test robots plus the default robot."""
    files = [*ROBOT_FILES, DEFAULT_ROBOT]
    return [pytest.param(f, id=f.stem) for f in files]
