"""Files written whole or not at all, with the permissions the umask gives: the one atomic writer.

Every file the package writes (results, models, trajectories, summaries, recorder state) goes
through :func:`write_atomic` (or :func:`write_json`): the content is written to a temporary file
beside the target and renamed over it, so a reader never sees half a file and a failure leaves
no partial one. The temporary file is created with mode ``0o666`` and the process's umask applied
by the kernel (0644 under the usual umask 022), as ``open()`` would; folders the package stages
and renames into place get :func:`folder_mode`.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from sysid_ros.core.json_numbers import strict_json

__all__ = ["folder_mode", "umask", "write_atomic", "write_json"]


def umask() -> int:
    """The process's umask (read from ``/proc/self/status`` where there is one, so that no other
    thread sees it changed)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def folder_mode(path: str | os.PathLike[str]) -> Path:
    """Give a folder made by ``tempfile.mkdtemp`` (mode 0700) the mode a ``mkdir`` would have
    (``0o777`` less the umask) before it is renamed into place; returns ``path``."""
    os.chmod(path, 0o777 & ~umask())
    return Path(path)


def write_atomic(path: str | os.PathLike[str], content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8, or bytes) to ``path`` atomically: a temporary file in the
    same folder renamed into place, removed on any failure. Creates the parent folders. The file's
    mode is ``0o666`` less the umask. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike[str], doc: Any, *, indent: int | None = 2) -> Path:
    """``doc`` as strict JSON (:func:`~sysid_ros.core.json_numbers.strict_json`: NumPy values as
    JSON values, NaN and ±inf as null), written atomically with a final newline."""
    return write_atomic(path, json.dumps(strict_json(doc), indent=indent, allow_nan=False) + "\n")
