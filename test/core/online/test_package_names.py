"""``sysid_ros.core.online`` loads its public names on first use (PEP 562). Three lists name them
and are kept in step by hand (ruff needs a literal ``__all__``): the lazy map ``_WHERE``, the
``TYPE_CHECKING`` imports (for type checkers and editors) and ``__all__``. They must agree, and
each name must resolve to the object its module defines."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import sysid_ros.core.online as online


def _type_checking_imports() -> dict[str, str]:
    """name -> module (relative to the package) of the imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(Path(online.__file__).read_text())
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.dump(stmt)
                prefix = f"{online.__name__}."
                assert stmt.module.startswith(prefix), stmt.module
                names.update({alias.name: stmt.module[len(prefix):] for alias in stmt.names})
    return names


def test_the_lazy_map_the_type_checking_imports_and_all_name_the_same_objects():
    where = online._WHERE
    assert sorted(online.__all__) == sorted(where), set(online.__all__) ^ set(where)
    assert _type_checking_imports() == where
    for name, module in where.items():
        defined = getattr(importlib.import_module(f"{online.__name__}.{module}"), name)
        assert getattr(online, name) is defined, name


def test_an_unknown_name_is_an_attribute_error_naming_it():
    try:
        online.NoSuchEstimator  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchEstimator" in str(exc)
    else:
        raise AssertionError("no AttributeError")
