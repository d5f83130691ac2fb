"""Where a result came from: package version, command line, input files' and model file's
SHA-256, time. Written into ``result.json`` (``"provenance"``) by the writer of the result files;
shown by the report.

A folder input (a rosbag2 bag) is hashed over its files in name order, each contributing its
relative path and its bytes, so the digest changes with any file's name or content.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["file_digest", "provenance"]

_CHUNK = 1 << 20


def file_digest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"path", "sha256", "bytes"}`` of a file, or of a folder's files (``"files"``: their
    count); ``{"path", "missing": True}`` when ``path`` does not exist (a stream, a deleted file)."""
    p = Path(path)
    if not p.exists():
        return {"path": str(p), "missing": True}
    digest = hashlib.sha256()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    size = 0
    for f in files:
        if p.is_dir():
            digest.update(str(f.relative_to(p)).encode() + b"\0")
        with open(f, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
    out: dict[str, Any] = {"path": str(p.resolve()), "sha256": digest.hexdigest(), "bytes": size}
    if p.is_dir():
        out["files"] = len(files)
    return out


def provenance(*, inputs: Sequence[str | os.PathLike[str]] = (), model: str | os.PathLike[str] | None = None,
               argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The provenance record of a result made now from ``inputs`` with ``model`` by the command
    ``argv`` (default: this process's)."""
    from sysid_ros import __version__

    return {
        "package": "sysid_ros",
        "version": __version__,
        "command_line": shlex.join(list(sys.argv if argv is None else argv)),
        "python": platform.python_version(),
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "inputs": [file_digest(p) for p in inputs],
        "model": None if model is None else file_digest(model),
    }
