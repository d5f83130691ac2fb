#!/usr/bin/env python3
"""Print the package's import cycles (file level and subpackage level) and its module sizes.

Usage::

    python tools/import_graph.py            # cycles + module-size histogram
    python tools/import_graph.py --edges    # also every import that closes a subpackage cycle

Every ``import``/``from ... import`` statement in ``sysid_ros/`` counts, wherever it stands (module
level, inside a function, under ``TYPE_CHECKING``), as import-linter counts them. A file-level cycle
is a strongly connected component of more than one module in the graph module -> imported module;
``sysid_ros.core``'s lazy facade (``core/__init__.py``) is left out, since nothing below the CLI
imports through it. A subpackage-level unit is ``core.<subpackage>`` for the core, ``core.<file>``
for a file directly in the core, and the first package level elsewhere (``hardware``, ``nodes``,
``cli``, ``app``, ``resources``, ...).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "sysid_ros"
FACADES = {"sysid_ros.core"}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every .py file of the package."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                targets.append(sub if sub in known else module)
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package modules it imports (facades left out)."""
    known = modules(root)
    return {name: _imports(name, path, known) - FACADES
            for name, path in known.items() if name not in FACADES}


def unit(module: str) -> str:
    """The subpackage-level unit a module belongs to (see the module docstring)."""
    parts = module.split(".")[1:]
    if not parts:
        return "sysid_ros"
    if parts[0] == "core" and len(parts) > 1:
        return "core." + parts[1]
    return parts[0]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found, key=lambda c: (-len(c), c))


def unit_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for source, targets in edges.items():
        out[unit(source)]
        for target in targets:
            if unit(target) != unit(source):
                out[unit(source)].add(unit(target))
    return dict(out)


def histogram(root: Path = ROOT) -> list[tuple[str, int]]:
    bins = [(0, 100), (100, 200), (200, 300), (300, 400), (400, 500), (500, 600), (600, 10**9)]
    sizes = [len(p.read_text().splitlines()) for p in modules(root).values()]
    rows = []
    for lo, hi in bins:
        label = f"{lo}-{hi - 1}" if hi < 10**9 else f">={lo}"
        rows.append((label, sum(lo <= s < hi for s in sizes)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true",
                        help="list the unit-level imports inside each subpackage cycle")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="checkout to read (default: this one), e.g. an older commit's `git archive`")
    args = parser.parse_args(argv)
    root = args.root
    edges = graph(root)
    files = cycles(edges)
    lines = sum(len(p.read_text().splitlines()) for p in modules(root).values())
    print(f"modules: {len(edges)}, lines: {lines}")
    print(f"file-level cycles: {len(files)} ({sum(map(len, files))} modules in them)")
    for component in files:
        print("  " + " <-> ".join(m.removeprefix("sysid_ros.") for m in component))
    units = unit_graph(edges)
    unit_cycles = cycles(units)
    print(f"subpackage-level: {len(units)} units, {len(unit_cycles)} cycle(s)")
    for component in unit_cycles:
        print(f"  {len(component)} units: " + ", ".join(component))
        if args.edges:
            members = set(component)
            for source, targets in sorted(edges.items()):
                for target in sorted(targets):
                    if unit(source) in members and unit(target) in members and unit(source) != unit(target):
                        print(f"    {source} -> {target}")
    print("module sizes (lines: modules):")
    for label, count in histogram(root):
        print(f"  {label:>8}: {count}")
    big = sorted(((len(p.read_text().splitlines()), n) for n, p in modules(root).items()), reverse=True)
    print("over 600 lines: " + (", ".join(f"{n.removeprefix('sysid_ros.')} ({s})" for s, n in big if s >= 600)
                                 or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
