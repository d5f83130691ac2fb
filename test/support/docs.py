"""The shell blocks of the docs (README.md, docs/**/*.md) as commands, in reading order, and what
the docs tests do with each ``ros2`` line.

A ``ros2`` line is one of:
- ``ends``: a verb that ends by itself (``ros2 pkg``, ``ros2 interface``, ``ros2 launch
  --show-args``): run, exit 0 and something printed;
- ``graph``: ``ros2 launch`` / ``ros2 run``: started in the background; it runs until a later block
  of the page starts another graph, or the page ends (SIGINT to its process group, bounded);
- ``query``: a verb asking the running graph (``topic echo``, ``service call``, ``action
  send_goal``, ``lifecycle set``, ``param set``/``get``): run with a bounded wait, its exit status
  and its own statement of success checked;
- ``marked``: a line the docs mark with a trailing ``# needs hardware: <what>`` comment (a real CAN
  bus, a ros2_control arm): counted, not run. A reader sees the same comment.
Any other ``ros2`` line is unknown, and the docs tests fail on it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ("simulated-arm", "vendor-log", "damiao-arm", "ros-install")
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL = ("bash", "sh", "shell")
#: the docs' mark of a line that cannot run without hardware (a trailing comment)
HARDWARE = re.compile(r"\s#\s*needs hardware:\s*(\S.*)$")
ENDS = {("pkg",), ("interface",)}
GRAPH = {("launch",), ("run",)}
QUERY = {("topic", "echo"), ("service", "call"), ("action", "send_goal"), ("lifecycle", "set"),
         ("param", "set"), ("param", "get")}


@dataclass(frozen=True)
class Command:
    """One command of a shell block: its words (comments dropped), the block's index on its
    page, and the reason of a ``# needs hardware:`` mark ('' = none)."""

    words: list[str]
    block: int
    hardware: str = ""

    @property
    def kind(self) -> str:
        """``ends``, ``graph``, ``query``, ``marked`` or ``unknown`` (``ros2`` lines); ``other``."""
        if self.words[0] != "ros2":
            return "other"
        if self.hardware:
            return "marked"
        verb = tuple(w for w in self.words[1:3] if not w.startswith("-"))
        if verb[:1] == ("launch",) and {"--show-args", "-s", "--help", "-h"} & set(self.words):
            return "ends"
        for kinds, name in ((ENDS, "ends"), (GRAPH, "graph"), (QUERY, "query")):
            if verb[:1] in kinds or verb[:2] in kinds:
                return name
        return "unknown"

    def __str__(self) -> str:
        return shlex.join(self.words)


def pages() -> list[Path]:
    """README.md, the tutorials in docs/index.md's order, then every other page of docs/."""
    ordered = [ROOT / "README.md"] + [ROOT / "docs" / "tutorials" / f"{t}.md" for t in TUTORIALS]
    rest = sorted(p for p in (ROOT / "docs").rglob("*.md") if p not in ordered)
    return [p for p in ordered if p.is_file()] + rest


def blocks(page: Path, kinds: tuple[str, ...]) -> list[str]:
    """The text of the page's fenced blocks whose language is one of ``kinds``."""
    return [m.group(2) for m in FENCE.finditer(page.read_text(encoding="utf-8")) if m.group(1) in kinds]


def commands(block: str, index: int = 0) -> list[Command]:
    """The block's commands: continuation lines joined, comments dropped (a hardware mark kept)."""
    text = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            mark = HARDWARE.search(line)
            out.append(Command(words, index, mark.group(1).strip() if mark else ""))
    return out


def page_commands(page: Path) -> list[Command]:
    """Every command of the page's shell blocks, in reading order."""
    return [c for i, b in enumerate(blocks(page, SHELL)) for c in commands(b, i)]


def fresh_clone(root: Path) -> Path:
    """Lay ``root`` (an empty folder) out like a fresh clone for the docs' commands: the tracked
    inputs (config/, examples/, tools/, launch/, test/robots/ linked from this checkout), no
    outputs, so every other input must be made by an earlier command. Returns ``root``."""
    (root / "test").mkdir()
    for name in ("config", "examples", "tools", "launch"):
        (root / name).symlink_to(ROOT / name)
    (root / "test" / "robots").symlink_to(ROOT / "test" / "robots")
    return root


def ros2_problems(page: Path) -> list[str]:
    """What the docs test cannot run on this page: unknown ``ros2`` lines, queries with no graph
    started before them, graphs that no query checks."""
    problems, graph_block, queried = [], None, True
    rel = page.relative_to(ROOT)
    for c in page_commands(page):
        kind = c.kind
        if kind == "unknown":
            problems.append(f"{rel}: `{c}`: neither run by the docs test nor marked "
                            "`# needs hardware: <what>`")
        elif kind == "graph" and c.block != graph_block:
            if not queried:
                problems.append(f"{rel}: the graph of block {graph_block} is started but no query "
                                "line checks it (add one, e.g. `ros2 topic echo <topic> --once`)")
            graph_block, queried = c.block, False
        elif kind == "query":
            if graph_block is None:
                problems.append(f"{rel}: `{c}` queries a graph no earlier block starts")
            queried = True
    if not queried:
        problems.append(f"{rel}: the graph of block {graph_block} is started but no query line checks it")
    return problems
