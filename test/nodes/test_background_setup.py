"""BackgroundSetUp: the set-up runs in its own thread, its outcome is one log line (success with
its time, or the failure and that the first samples will set up again), and nothing is logged after
close() (the node's logger may be gone)."""

from __future__ import annotations

import threading

from sysid_ros.nodes.background_setup import BackgroundSetUp


class Lines:
    """A logger's ``info`` collecting its lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.said = threading.Event()

    def info(self, text: str) -> None:
        self.lines.append(text)
        self.said.set()


def test_a_set_up_runs_in_its_own_thread_and_says_it_is_ready():
    log, ran_in = Lines(), []
    setup = BackgroundSetUp(log, lambda: ran_in.append(threading.current_thread().name))
    assert log.said.wait(30.0)
    assert ran_in == ["prepare"] and ran_in[0] != threading.current_thread().name
    assert len(log.lines) == 1 and log.lines[0].startswith("ready to process: compiled kernels set up in ")
    assert log.lines[0].endswith(" s of CPU)")
    setup.close()


def test_a_failed_set_up_is_said_in_one_line_naming_the_error():
    def fail() -> None:
        raise RuntimeError("no LAPACK")

    log = Lines()
    BackgroundSetUp(log, fail)
    assert log.said.wait(30.0)
    assert log.lines == ["setting up ahead of the first samples failed (no LAPACK): done when they arrive"]


def test_nothing_is_logged_after_close():
    release, log = threading.Event(), Lines()
    setup = BackgroundSetUp(log, lambda: release.wait(30.0))
    setup.close()
    release.set()
    setup._thread.join(30.0)
    assert not setup._thread.is_alive() and log.lines == []
