"""The test tree keeps its layout (test/README.md): every test file in a tier directory, base names
unique (pytest imports test files by base name), oracles independent of the package."""

from __future__ import annotations

import ast
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent
TIERS = ("core", "hardware", "nodes", "cli", "ros/node", "ros/process", "ros/launch", "acceptance")


def _test_files() -> list[Path]:
    return sorted(p for p in TEST_DIR.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_every_test_file_is_in_a_tier_directory():
    stray = [str(p.relative_to(TEST_DIR)) for p in _test_files()
             if p.parent != TEST_DIR
             and not any(p.relative_to(TEST_DIR).as_posix().startswith(t + "/") for t in TIERS)]
    assert stray == [], f"test files outside {TIERS} (see test/README.md): {stray}"


def test_test_file_names_are_unique():
    seen: dict[str, list[str]] = {}
    for p in _test_files():
        seen.setdefault(p.name, []).append(str(p.relative_to(TEST_DIR)))
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


def test_oracles_import_nothing_of_the_package():
    """An oracle is a reference the package is checked against: it must not be the package."""
    offenders = []
    for p in sorted((TEST_DIR / "oracles").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{p.name}: {n}" for n in names if n.split(".")[0] in ("sysid_ros", "support")]
    assert offenders == []
