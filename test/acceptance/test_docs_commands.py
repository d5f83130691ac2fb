"""Every documented command runs as typed: the `sysid` lines of every ``bash`` block of README.md
and docs/**/*.md (and the README's ``python`` blocks), in reading order — README, the tutorials in
the order docs/index.md gives, then every other page — in one scratch folder laid out like a fresh
clone (config/, test/robots/, examples/ from this checkout; nothing else, so every other input must
be made by an earlier command). Each must exit 0. ``sysid`` lines run in this process
(``sysid_ros.cli.main`` with the line's arguments, in the scratch folder: what the command does
and says, without an interpreter start-up per line; the installed ``sysid`` on PATH is
test/cli/test_cli_on_path.py's). ``ros2`` lines run only where the ``ros2``
command is installed, and then only the verbs that end by themselves (``ros2 pkg``, ``ros2
interface``; ``ros2 launch`` as ``--show-args``); the others need a running graph. Blocks marked
``text`` are templates with placeholders and are not run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import sysid

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ("simulated-arm", "vendor-log", "damiao-arm", "ros-install")
TIMEOUT = 900.0  # s per command: a whole-arm IV identification on a loaded 2-core machine
#: commands a page may show that need no check here: the environment is already set up
SET_UP = ("source", "make", ".", "export", "cd")
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```", re.M | re.S)


def pages() -> list[Path]:
    ordered = [ROOT / "README.md"] + [ROOT / "docs" / "tutorials" / f"{t}.md" for t in TUTORIALS]
    rest = sorted(p for p in (ROOT / "docs").rglob("*.md") if p not in ordered)
    return [p for p in ordered if p.is_file()] + rest


def blocks(page: Path, kinds: tuple[str, ...]) -> list[str]:
    return [m.group(2) for m in _FENCE.finditer(page.read_text(encoding="utf-8")) if m.group(1) in kinds]


def commands(block: str) -> list[list[str]]:
    """The block's commands as argument lists: continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def _ros2(words: list[str]) -> list[str] | None:
    """What to run of a ``ros2`` line here, or None (skipped)."""
    if shutil.which("ros2") is None:
        return None
    verb = words[1] if len(words) > 1 else ""
    if verb in ("pkg", "interface"):
        return words
    if verb == "launch":
        return ["ros2", "launch", "--show-args", *[w for w in words[2:4] if ":=" not in w]]
    return None


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A scratch folder laid out like a fresh clone: the tracked inputs, no outputs."""
    root = tmp_path_factory.mktemp("clone")
    (root / "test").mkdir()
    for name in ("config", "examples", "tools", "launch"):
        (root / name).symlink_to(ROOT / name)
    (root / "test" / "robots").symlink_to(ROOT / "test" / "robots")
    return root


RUN: dict[str, int] = {"sysid": 0, "ros2": 0, "python": 0}


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_documented_command_runs_as_typed(page, clone):
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    ran = 0
    for block in blocks(page, ("bash", "sh", "shell")):
        for words in commands(block):
            started = time.monotonic()
            if words[0] == "sysid":
                RUN["sysid"] += 1
                proc = sysid(*words[1:], cwd=clone)
            elif words[0] == "ros2":
                argv = _ros2(words)
                if argv is None:
                    continue
                RUN["ros2"] += 1
                proc = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True,
                                      timeout=TIMEOUT)
            else:
                assert words[0] in (*SET_UP, "sudo", "colcon", "python", "cat"), (
                    f"{page.name}: a command the docs test does not know: {shlex.join(words)}")
                continue
            print(f"  {time.monotonic() - started:6.1f} s  {shlex.join(words)[:100]}")
            assert proc.returncode == 0, (f"{page.relative_to(ROOT)}: `{shlex.join(words)}` exited "
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
    counted = {p.name: sum(1 for b in blocks(p, ("bash",)) for w in commands(b) if w[0] == "sysid")
               for p in pages()}
    assert counted["README.md"] >= 3 and counted["simulated-arm.md"] >= 8 and counted["vendor-log.md"] >= 2


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_relative_link_resolves():
    broken = []
    for page in pages():
        text = _FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.is_file():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no file)")
                continue
            if anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", _FENCE.sub("", linked.read_text(encoding="utf-8")), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no heading)")
    assert not broken, "\n".join(broken)
