"""Shared fixtures only (helpers live in test/support). Every ROS test runs on loopback only, in
its own context and DDS domain."""

from __future__ import annotations

import itertools
import os
import signal
from pathlib import Path

import pytest

# DDS stays on this machine, for every test in this session (set before rclpy is imported).
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_STATIC_PEERS", None)

# The tests send SIGINT to programs as a Ctrl-C at a terminal would. A suite started in the background
# of a non-interactive shell (`make test &`, some CI runners) has SIGINT ignored, and an ignored signal
# stays ignored in every child: Python then installs no KeyboardInterrupt handler and the programs
# under test would never see the Ctrl-C. A handled SIGINT here is reset to the default in children.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Domain ids 1..100 stay inside the default port range; spread concurrent pytest processes apart.
# SYSID_TEST_DOMAINS=LO-HI keeps this session's tests inside that range (parallel checkouts).
_range = os.environ.get("SYSID_TEST_DOMAINS", "").strip()
_lo, _hi = (int(v) for v in _range.split("-")) if _range else (1, 100)
_start = 0 if _range else (os.getpid() % 50) * 2  # where in the range this process begins
# pytest-xdist (make test PARALLEL="-n 2 --dist loadgroup"): worker k of n takes the k-th of n blocks of
# the range, so two workers never share a domain; SYSID_TEST_DOMAINS and ROS_DOMAIN_ID are set to
# its block for what reads them later (launch_support.use_private_domain, child processes).
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    _size = (_hi - _lo + 1) // _workers
    if _size < 1:
        raise RuntimeError(f"SYSID_TEST_DOMAINS={_range}: {_hi - _lo + 1} domain(s) for {_workers} "
                           "pytest-xdist workers; expected at least one per worker")
    _k = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
    _lo, _hi = _lo + _k * _size, _lo + (_k + 1) * _size - 1
    _start %= _size
    os.environ["SYSID_TEST_DOMAINS"] = f"{_lo}-{_hi}"
    os.environ["ROS_DOMAIN_ID"] = str(_hi)
_domains = (_lo + (_start + i) % (_hi - _lo + 1) for i in itertools.count())


# The tier of a test is its directory (test/README.md): markers are given here, not per file.
_TEST_DIR = Path(__file__).resolve().parent
_UNIT, _ROS, _ACCEPTANCE = ("unit",), ("ros", "slow"), ("acceptance", "slow")
_TIERS = {"core": _UNIT, "hardware": _UNIT, "nodes": _UNIT, "cli": _UNIT, "oracles": _UNIT,
          "support": _UNIT, "ros": _ROS, "acceptance": _ACCEPTANCE}


#: files whose tests start ROS graphs (DDS participants, node processes): under pytest-xdist with
#: ``--dist loadgroup`` they all run on one worker, one after the other, as in a serial run
_GRAPH_GROUP = "ros_graphs"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test by its directory: unit (core, hardware, nodes, cli), ros (ros/*; launch
    also for ros/launch), acceptance; ros and acceptance are also slow. A unit test marked slow
    in its file stays out of ``make test-fast`` (``-m "unit and not slow"``).

    And its ``xdist_group`` (used by ``--dist loadgroup``): the tests under ros/ and the docs'
    ros2 lines share one group (never two graphs at once, never two in one DDS domain block);
    any other file is a group of its own (its module fixtures computed once)."""
    for item in items:
        try:
            parts = Path(str(item.path)).resolve().relative_to(_TEST_DIR).parts
        except ValueError:
            continue
        tiers = _TIERS.get(parts[0], _UNIT) if len(parts) > 1 else _UNIT
        if parts[:2] == ("ros", "launch"):
            tiers = (*tiers, "launch")
        for name in tiers:
            item.add_marker(name)
        graphs = parts[0] == "ros" or parts[-1] == "test_docs_ros2.py"
        item.add_marker(pytest.mark.xdist_group(_GRAPH_GROUP if graphs else "/".join(parts)))


def pytest_sessionstart(session) -> None:
    """Compile the regressor kernels (or load them from numba's disk cache) once, before any
    test: the first compilation takes seconds and must not land inside a bounded wait."""
    from sysid_ros.core.model.newton_euler import compile_kernels

    compile_kernels()


def pytest_addoption(parser) -> None:
    parser.addoption("--cpu-durations", type=int, default=0, metavar="N",
                     help="list the N tests that used the most CPU time (this process and the "
                          "children it waited for, setup to teardown): what a test costs "
                          "whatever share of the cores a loaded host leaves it")


_CPU: dict[str, float] = {}  # test id -> CPU seconds (--cpu-durations)


def _cpu_seconds() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not item.config.getoption("cpu_durations"):
        yield
        return
    start = _cpu_seconds()
    yield
    _CPU[item.nodeid] = _cpu_seconds() - start


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    count = config.getoption("cpu_durations")
    if not count or not _CPU:
        return
    terminalreporter.write_sep("=", f"most CPU time: {min(count, len(_CPU))} of {len(_CPU)} tests "
                                    f"({sum(_CPU.values()):.1f} CPU s in all)")
    for nodeid, seconds in sorted(_CPU.items(), key=lambda kv: -kv[1])[:count]:
        terminalreporter.write_line(f"{seconds:8.2f} CPU s  {nodeid}")


@pytest.fixture
def ros_domain_id() -> int:
    """A DDS domain id of this test alone (use it for every context the test creates)."""
    return next(_domains)


@pytest.fixture
def free_ros_domain_id() -> int:
    """A domain id of this test alone in which no node is visible now: an in-process test's rclpy
    context keeps its DDS participant (and nodes) after shutdown, and the ids come round again."""
    from sysid_ros.nodes.sim_demo import nodes_in_domain

    for _ in range(_hi - _lo + 1):
        domain = next(_domains)
        if not nodes_in_domain(domain, 1.0):
            return domain
    pytest.fail(f"every DDS domain {_lo}-{_hi} shows nodes")


@pytest.fixture
def read_only(tmp_path):
    """A read-only tmpfs at tmp_path/ro (skipped where mounting is not allowed); unmounted after."""
    import subprocess

    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, timeout=30)
