"""Every documented ``ros2`` line runs as typed against the graph its page starts (where the
``ros2`` command is installed: an apt ROS 2 install; skipped with the reason elsewhere), or is
marked ``# needs hardware: <what>`` in the docs (counted). What each kind of line is and how it is
run: test/support/docs.py. Per page, in reading order, in a scratch folder laid out like a fresh
clone, in a private DDS domain on loopback:

- ``ros2 launch`` / ``ros2 run`` start in the background (own process group, output to a log);
  the graph runs until a later block starts another graph or the page ends, then gets SIGINT
  (its process group; SIGKILL after 60 s). A graph that ended with an error fails the test with
  its log.
- queries are retried (the nodes may still be starting on a loaded host) until they succeed or
  ``GRAPH_START`` seconds pass: ``ros2 topic echo`` is run with ``--once`` (a reader stops it with
  Ctrl-C) and must print a message; ``ros2 service call`` must print a response (with
  ``success=True`` where the response has it); ``ros2 action send_goal`` must end ``SUCCEEDED``;
  ``ros2 lifecycle set`` must say ``Transitioning successful``; ``ros2 param set`` ``successful``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.docs import ROOT, Command, fresh_clone, page_commands, pages, ros2_problems

GRAPH_START = 600.0  # [s] longest wait for a graph's first answer: node start-up on a loaded 2-core host
STOP = 60.0  # [s] SIGINT to a graph's process group until SIGKILL (a bag or a solve being finished)
ATTEMPT = 60.0  # [s] one attempt of a query that does not wait by itself (topic echo, lifecycle set)
RAN: dict[str, int] = {"ends": 0, "graph": 0, "query": 0, "marked": 0}

ROS2_PAGES = [p for p in pages() if any(c.words[0] == "ros2" for c in page_commands(p))]


def test_every_ros2_line_is_run_or_marked():
    """Without a ROS install too: a new ``ros2`` line the docs test would not run, a query with
    no graph before it, or a graph nothing checks, fails here."""
    problems = [p for page in pages() for p in ros2_problems(page)]
    assert problems == [], "\n".join(problems)
    kinds = [c.kind for page in ROS2_PAGES for c in page_commands(page) if c.words[0] == "ros2"]
    assert kinds.count("graph") >= 5 and kinds.count("query") >= 8, kinds


@pytest.fixture(scope="module")
def ros2_clone(tmp_path_factory):
    """A scratch folder laid out like a fresh clone: the tracked inputs, no outputs."""
    return fresh_clone(tmp_path_factory.mktemp("clone_ros2"))


class Graph:
    """A ``ros2 launch``/``ros2 run`` line running in the background, in its own process group."""

    def __init__(self, command: Command, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.command, self.log = command, log
        self._out = log.open("w")
        self.proc = subprocess.Popen(command.words, cwd=cwd, env=env, stdout=self._out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def check_running(self) -> None:
        code = self.proc.poll()
        if code not in (None, 0):
            pytest.fail(f"`{self.command}` ended with exit {code}:\n{self.tail()}")

    def stop(self) -> int:
        """SIGINT to the process group, bounded (SIGKILL to what is left of the group after
        ``STOP`` seconds: no node outlives the test); the exit status."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        deadline = time.monotonic() + STOP
        try:
            self.proc.wait(timeout=STOP)
            while self._group_alive() and time.monotonic() < deadline:
                time.sleep(0.1)  # the nodes of the group finishing their files (bounded)
        except subprocess.TimeoutExpired:
            pass
        if self._group_alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._out.close()
        return self.proc.returncode

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True


def _answered(words: list[str], out: str) -> str:
    """'' if the query's output says it succeeded, else what is missing."""
    verb = tuple(words[1:3])
    if verb == ("topic", "echo"):
        return "" if "\n---" in out else "no message printed"
    if verb == ("service", "call"):
        if "response:" not in out:
            return "no response"
        return "" if "success=" not in out or "success=True" in out else "the response says success=False"
    if verb == ("action", "send_goal"):
        return "" if "Goal finished with status: SUCCEEDED" in out else "the goal did not succeed"
    if verb == ("lifecycle", "set"):
        return "" if "Transitioning successful" in out else "the transition did not succeed"
    if verb == ("param", "set"):
        return "" if "successful" in out else "the parameter was not set"
    return "" if out.strip() else "nothing printed"


def _query(command: Command, cwd: Path, env: dict[str, str], graphs: list[Graph]) -> str:
    """Run a query line until it succeeds (bounded); its output. Fails naming the line."""
    words = list(command.words)
    if tuple(words[1:3]) == ("topic", "echo") and "--once" not in words:
        words.append("--once")
    waits = tuple(words[1:3]) in (("service", "call"), ("action", "send_goal"))
    deadline = time.monotonic() + GRAPH_START
    while True:
        for g in graphs:
            g.check_running()
        left = deadline - time.monotonic()
        try:
            done = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=max(1.0, left if waits else min(ATTEMPT, left)))
            out, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            out, code = f"{exc.stdout or ''}{exc.stderr or ''} (timed out)", None
        if code == 0:
            missing = _answered(words, out)
            assert not missing, f"`{command}`: {missing}:\n{out[-3000:]}"
            return out
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- `{g.command}`:\n{g.tail(1500)}" for g in graphs)
            pytest.fail(f"`{command}` did not succeed within {GRAPH_START:.0f} s (last exit {code}):\n"
                        f"{out[-2000:]}\n{logs}")
        time.sleep(2.0)  # a node still starting: ask again (bounded by the deadline above)


def _stop_all(graphs: list[Graph]) -> None:
    for g in graphs:
        code = g.stop()
        print(f"    stopped `{str(g.command)[:80]}`: exit {code}")
    graphs.clear()


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", ROS2_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_documented_ros2_line_runs_against_its_graph(page, ros2_clone, ros_domain_id, tmp_path):
    if shutil.which("ros2") is None:
        pytest.skip("no `ros2` command on PATH (the PyPI set-up has none; an apt ROS 2 install "
                    "provides it): the page's ros2 lines are not run")
    env = dict(os.environ, ROS_DOMAIN_ID=str(ros_domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               MPLBACKEND="Agg")
    env.pop("ROS_STATIC_PEERS", None)
    graphs: list[Graph] = []
    graph_block, counts = None, dict.fromkeys(RAN, 0)
    try:
        for command in page_commands(page):
            kind, started = command.kind, time.monotonic()
            if kind in ("other", "unknown"):  # unknown: test_every_ros2_line_is_run_or_marked says so
                continue
            counts[kind] += 1
            if kind == "marked":
                print(f"  marked   {str(command)[:90]}  (needs hardware: {command.hardware})")
                continue
            if kind == "graph":
                if command.block != graph_block:
                    _stop_all(graphs)
                    graph_block = command.block
                graphs.append(Graph(command, ros2_clone, env, tmp_path / f"graph{len(graphs)}.log"))
            elif kind == "query":
                _query(command, ros2_clone, env, graphs)
            else:  # ends by itself: ros2 pkg, ros2 interface, ros2 launch --show-args
                done = subprocess.run(command.words, cwd=ros2_clone, env=env, capture_output=True,
                                      text=True, timeout=ATTEMPT)
                assert done.returncode == 0 and done.stdout.strip(), (
                    f"`{command}` exited {done.returncode}:\n{done.stderr[-3000:]}")
            print(f"  {kind:6} {time.monotonic() - started:6.1f} s  {str(command)[:90]}")
        for g in graphs:
            g.check_running()
    finally:
        _stop_all(graphs)
        subprocess.run(["ros2", "daemon", "stop"], env=env, capture_output=True, timeout=60)
    for k, n in counts.items():
        RAN[k] += n
    print(f"{page.relative_to(ROOT)}: {counts}; so far {RAN}")


def test_the_ros2_control_argument_table_is_what_show_args_says():
    """docs/ros2_control.md's table of launch arguments (a row may name several, with one default
    each) lists every argument of ``ros2 launch ... --show-args``, with its default."""
    import re

    if shutil.which("ros2") is None:
        pytest.skip("no `ros2` command on PATH (an apt ROS 2 install provides it)")
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    done = subprocess.run(["ros2", "launch", "sysid_ros", "ros2_control_identify.launch.py", "--show-args"],
                          env=env, capture_output=True, text=True, timeout=ATTEMPT)
    assert done.returncode == 0, done.stderr
    argument = r"^    '(\w+)':\n(?:        .*\n)*?        \(default: '(.*)'\)$"
    shown = dict(re.findall(argument, done.stdout, re.M))
    table: dict[str, str] = {}
    for names, defaults in re.findall(r"^\| (`[^|]+) \| (`[^|]+) \|", (ROOT / "docs" / "ros2_control.md")
                                      .read_text(encoding="utf-8"), re.M):
        values = [d.strip("`") for d in defaults.split(", ")]
        table.update(zip((n.strip("`") for n in names.split(", ")), (v.strip("'") for v in values),
                         strict=True))
    assert "joints" in shown and len(shown) >= 20, shown
    assert table == shown
