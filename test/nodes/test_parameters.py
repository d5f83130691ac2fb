"""Node defaults come from one table per node (sysid_ros.nodes.parameters.NODE_TABLES, the estimator's
session options derived from OnlineOptions): every config/*.yaml names only parameters the node
declares, and a node's own config/<node>.yaml holds every one of them with the table's default (a
launch setting that differs says so on its line: "(node default: X)")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from sysid_ros.core.online import OnlineOptions
from sysid_ros.nodes.parameters import NODE_TABLES, node_table

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
#: the files that are one node's defaults; the others (yam_damiao.yaml) configure a robot
DEFAULT_FILES = sorted(node for node in NODE_TABLES if (CONFIG / f"{node}.yaml").is_file())
UNSET = "unset"


def _table(node: str) -> dict[str, object]:
    """Parameter name -> default (unset arrays and per-joint arrays: UNSET)."""
    out: dict[str, object] = {}
    for row in node_table(node):
        if isinstance(row, tuple):
            name, default, _ = row
            out[name] = UNSET if type(default).__name__ == "Type" else default
        else:
            out[f"joints.{row.key}"] = UNSET
    return out


def _flat(doc: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _same(value, default) -> bool:
    if default is UNSET:
        return False  # an unset array given a value: a launch setting
    if isinstance(default, bool) or isinstance(value, bool):
        return type(value) is type(default) and value == default
    if isinstance(default, int | float) and isinstance(value, int | float):
        return float(value) == float(default)
    return value == default


def _shown(default) -> str:
    if default is UNSET:
        return UNSET
    if isinstance(default, bool):
        return "true" if default else "false"
    return json.dumps(default) if isinstance(default, str | list) else repr(default)


@pytest.mark.parametrize("node", DEFAULT_FILES)
def test_a_nodes_config_file_holds_every_parameter_with_the_tables_default(node):
    path = CONFIG / f"{node}.yaml"
    text = path.read_text(encoding="utf-8")
    given = _flat(yaml.safe_load(text)[node]["ros__parameters"])
    table = _table(node)
    assert not sorted(set(given) - set(table)), f"{path.name}: not parameters of {node}"
    absent = [name for name in table if name not in given
              and not re.search(rf"^\s*#\s*{re.escape(name)}:", text, re.MULTILINE)]
    assert not absent, f"{path.name}: parameters of {node} neither set nor shown in a comment: {absent}"
    lines = text.splitlines()
    undeclared = []
    for name, value in given.items():
        if _same(value, table[name]):
            continue
        leaf = name.rsplit(".", 1)[-1]
        at = next(k for k, line in enumerate(lines) if re.match(rf"\s*{re.escape(leaf)}:", line))
        marker = f"(node default: {_shown(table[name])}"
        if marker not in lines[at] and marker not in lines[at - 1]:
            undeclared.append(f"{name}: {value!r} (table: {_shown(table[name])})")
    assert not undeclared, (f"{path.name}: values unlike the table's defaults without a '(node default: "
                            f"...)' on their line: {undeclared}")


def test_every_config_file_names_only_declared_parameters():
    for path in sorted(CONFIG.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        sections = {node: _flat(body["ros__parameters"]) for node, body in doc.items()}
        for node, given in sections.items():
            if node == "/**":  # every node of the file: each name declared by one of them
                known = set().union(*(_table(n) for n in sections if n in NODE_TABLES))
            else:
                assert node in NODE_TABLES, f"{path.name}: {node!r} is no node of this package"
                known = set(_table(node))
            assert not sorted(set(given) - known), f"{path.name}: {node}: undeclared parameters"


def test_the_estimators_table_is_its_session_options_and_the_node_parameters():
    table = _table("estimator")
    defaults = OnlineOptions()
    for name in OnlineOptions.names():
        assert table[name] == getattr(defaults, name), name
    assert "history" not in table  # the replay's option, not a node parameter
