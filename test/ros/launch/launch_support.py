"""What every launch test in test/ros/launch shares: the skip where the launch tooling is absent,
its DDS domain, the launch tooling's modules (``launch``, ``launch_ros``, ``launch_testing``), the
entry point's decorator, the include of an installed launch file, and a bounded wait that spins
the test's node. A launch test's header::

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (for ``launch_test FILE``)
    from launch_support import launch, launch_test, launch_testing, package_launch, ...  # noqa: E402

Importing this module skips the importing test module (``pytest.importorskip``) where ``launch``,
``launch_ros`` or ``launch_testing`` is not installed, and sets the process's DDS domain
(:func:`use_private_domain`) before any ROS context starts.

The DDS domain of a launch test process (one rule for every file in test/ros/launch):
``SYSID_TEST_DOMAINS=LO-HI`` (parallel checkouts on one host): a domain in that range, picked by
process id; else ``ROS_DOMAIN_ID`` when set (the caller's private domain); else 1 + pid % 101 so
launch tests side by side, or a user's graph on domain 0, never see each other. DDS stays on this
machine either way (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``)."""

from __future__ import annotations

import os
import time

import pytest

for _name in ("launch_testing", "launch", "launch_ros"):
    pytest.importorskip(_name)

import launch.actions  # noqa: E402
import launch_ros.actions  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402

import launch  # noqa: E402

__all__ = ["STARTUP", "launch", "launch_ros", "launch_test", "launch_testing", "package_launch",
           "ready", "spin_until", "use_private_domain"]

#: [s] launch_testing's wait for the launch to have started its processes (its default, 15 s, ran
#: out at load 36 beside CPU hogs: "Timed out waiting for processes to start up")
STARTUP = 180.0


def use_private_domain() -> str:
    """Set and return this process's ``ROS_DOMAIN_ID`` (before any ROS context or launch starts)."""
    span = os.environ.get("SYSID_TEST_DOMAINS", "").strip()
    if span:
        lo, hi = (int(v) for v in span.split("-"))
        domain = str(lo + os.getpid() % (hi - lo + 1))
    else:
        domain = os.environ.get("ROS_DOMAIN_ID", "").strip() or str(1 + os.getpid() % 101)
    os.environ["ROS_DOMAIN_ID"] = domain
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return domain


def launch_test(timeout: float):
    """The decorator of a launch test's ``generate_test_description``: launch_testing's entry point
    (``pytest.mark.launch_test``), its start-up wait :data:`STARTUP`, and ``timeout`` [s] for the
    whole test (pytest-timeout; past pytest.ini's 300 s: the run's own bounded waits come first)."""
    def decorate(function):
        function = pytest.mark.timeout(timeout)(function)
        function = launch_testing.ready_to_test_action_timeout(STARTUP)(function)
        return pytest.mark.launch_test(function)
    return decorate


def ready(*actions) -> launch.LaunchDescription:
    """A launch test's description: ``actions``, then launch_testing's ``ReadyToTest``."""
    return launch.LaunchDescription([*actions, launch_testing.actions.ReadyToTest()])


def package_launch(file_name: str, arguments: dict[str, str]):
    """The installed ``sysid_ros`` launch file ``file_name`` included with ``arguments`` (the forms a
    user types on the command line)."""
    from ament_index_python.packages import get_package_share_directory
    from launch.launch_description_sources import PythonLaunchDescriptionSource

    path = os.path.join(get_package_share_directory("sysid_ros"), "launch", file_name)
    return launch.actions.IncludeLaunchDescription(PythonLaunchDescriptionSource(path),
                                               launch_arguments=arguments.items())


def spin_until(node, condition, seconds: float, what: str) -> None:
    """Spin ``node`` until ``condition()`` holds; AssertionError naming ``what`` after ``seconds``."""
    import rclpy

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")
        rclpy.spin_once(node, timeout_sec=0.1)


use_private_domain()
