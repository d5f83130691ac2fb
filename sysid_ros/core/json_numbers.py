"""The one JSON number rule: a number JSON cannot hold (NaN, +inf, -inf) is written as ``null``.

Every document the package writes (``result.json``, validation reports, summaries, the recorder's
state) is strict JSON: :func:`strict_json` turns NumPy arrays and scalars into JSON values and
non-finite floats into None, so ``json.dumps(..., allow_nan=False)`` never meets one;
:func:`dumps_strict` is that text. Files are written by :func:`sysid_ros.core.atomic.write_json`
(``result.json`` by its owner, :class:`sysid_ros.core.result_file.ResultFile`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["dumps_strict", "json_number", "json_numbers", "rounded_json_numbers", "strict_json"]


def json_number(x: float) -> float | None:
    """``x`` as a float, or None where it is not finite (NaN, ±inf)."""
    x = float(x)
    return x if math.isfinite(x) else None


def json_numbers(values: Iterable[float]) -> list[float | None]:
    """:func:`json_number` of each value."""
    return [json_number(v) for v in values]


def rounded_json_numbers(values: Any, digits: int) -> list[float | None]:
    """:func:`json_number` of each of ``values`` (array-like, flattened), rounded to ``digits``
    significant digits: the long number lists of a report's figures (~10⁵ values), in one pass."""
    flat = np.asarray(values, dtype=float).reshape(-1)
    fmt = f"%.{digits}g"
    return [float(fmt % v) if finite else None
            for v, finite in zip(flat.tolist(), np.isfinite(flat).tolist(), strict=True)]


def strict_json(value: Any) -> Any:
    """``value`` with JSON types only: mappings (keys as strings) and sequences recursively, NumPy
    arrays as lists, NumPy scalars as Python ones, non-finite floats as None."""
    if isinstance(value, float | np.floating):
        return json_number(value)
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return strict_json(value.tolist())
    if isinstance(value, list | tuple):
        return [_strict_item(v) for v in value]
    return value


def _strict_item(v: Any) -> Any:
    """:func:`strict_json` of a sequence's item, Python floats, ints, strings and None without the
    general dispatch (the long number lists of a report's figures)."""
    kind = type(v)
    if kind is float:
        return v if math.isfinite(v) else None
    if v is None or kind is str or kind is int or kind is bool:
        return v
    return strict_json(v)


def dumps_strict(value: Any, **kwargs: Any) -> str:
    """JSON text of ``value`` under the one number rule (:func:`strict_json`): never ``NaN`` or
    ``Infinity``; ``kwargs`` as :func:`json.dumps` (``indent``)."""
    return json.dumps(strict_json(value), allow_nan=False, **kwargs)
