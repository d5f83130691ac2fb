"""Every documented command runs as typed: the `sysid` lines of every ``bash`` block of README.md
and docs/**/*.md (and the README's ``python`` blocks), in reading order — README, the tutorials in
the order docs/index.md gives, then every other page — in one scratch folder laid out like a fresh
clone (config/, test/robots/, examples/ from this checkout; nothing else, so every other input must
be made by an earlier command). Each must exit 0. ``sysid`` lines run in this process
(``sysid_ros.cli.main`` with the line's arguments, in the scratch folder: what the command does
and says, without an interpreter start-up per line; the installed ``sysid`` on PATH is
test/cli/test_cli_on_path.py's). The ``ros2`` lines are test_docs_ros2.py's (run against the
graph their page starts, where ``ros2`` is installed). Blocks marked ``text`` are templates with
placeholders and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from support.cli import sysid
from support.docs import FENCE, ROOT, blocks, fresh_clone, page_commands, pages

TIMEOUT = 900.0  # s per command: a whole-arm IV identification on a loaded 2-core machine
#: commands a page may show that need no check here: the environment is already set up
SET_UP = ("source", "make", ".", "export", "cd")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A scratch folder laid out like a fresh clone: the tracked inputs, no outputs."""
    return fresh_clone(tmp_path_factory.mktemp("clone"))


RUN: dict[str, int] = {"sysid": 0, "python": 0}


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_documented_command_runs_as_typed(page, clone):
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    ran = 0
    for command in page_commands(page):
        words, started = command.words, time.monotonic()
        if words[0] == "ros2":
            continue  # test_docs_ros2.py
        if words[0] != "sysid":
            assert words[0] in (*SET_UP, "sudo", "colcon", "python", "cat"), (
                f"{page.name}: a command the docs test does not know: {command}")
            continue
        RUN["sysid"] += 1
        proc = sysid(*words[1:], cwd=clone)
        print(f"  {time.monotonic() - started:6.1f} s  {str(command)[:100]}")
        assert proc.returncode == 0, (f"{page.relative_to(ROOT)}: `{command}` exited "
                                      f"{proc.returncode}:\n{proc.stderr[-3000:]}")
        ran += 1
    if page.name == "README.md":
        for block in blocks(page, ("python",)):
            proc = subprocess.run([sys.executable, "-c", block], cwd=clone, env=env, capture_output=True,
                                  text=True, timeout=TIMEOUT)
            assert proc.returncode == 0, f"README.md: a python block failed:\n{proc.stderr[-3000:]}"
            RUN["python"] += 1
    print(f"{page.relative_to(ROOT)}: {ran} command(s) run; so far {RUN}")


def test_the_tour_and_tutorials_have_commands():
    counted = {p.name: sum(1 for c in page_commands(p) if c.words[0] == "sysid") for p in pages()}
    assert counted["README.md"] >= 3 and counted["simulated-arm.md"] >= 8 and counted["vendor-log.md"] >= 2


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_relative_link_resolves():
    broken = []
    for page in pages():
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.is_file():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no file)")
                continue
            if anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", FENCE.sub("", linked.read_text(encoding="utf-8")), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no heading)")
    assert not broken, "\n".join(broken)
