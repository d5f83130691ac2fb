"""Output paths checked before any work: a command that would run for minutes and then fail to
write its result says so at once, in one line, and writes nothing.

:func:`check_folder` for an output folder (made if missing), :func:`check_file` for an output
file. Both find the nearest existing ancestor, which must be a folder, and prove it writable by
creating and removing a temporary file there: permissions, a read-only file system and a full
disk all show, for root too (whom ``os.access`` and mode bits do not stop).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sysid_ros.core.errors import SysIdError

__all__ = ["check_file", "check_folder"]


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(os.sep)


def _writable(folder: Path, what: str, given: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SysIdError(f"{what} {given}: cannot write in {folder} ({reason})") from None


def check_folder(path: str | os.PathLike[str], what: str = "--out") -> Path:
    """``path`` as an output folder: an existing folder, or one that can be made. Raises
    :class:`SysIdError` naming ``what`` (the option) otherwise. Returns the path."""
    path = Path(path)
    given = str(path)
    found = _nearest_existing(path.absolute())
    if not found.is_dir():
        if found == path.absolute():
            raise SysIdError(f"{what} {given} is a file; expected a folder (existing or to be made)")
        raise SysIdError(f"{what} {given}: {found} is a file, so no folder can be made under it")
    _writable(found, what, given)
    return path


def check_file(path: str | os.PathLike[str], what: str = "--export") -> Path:
    """``path`` as an output file (replaced if it exists): not a folder, in a folder that exists or
    can be made and is writable. Raises :class:`SysIdError` naming ``what``. Returns the path."""
    path = Path(path)
    given = str(path)
    if path.is_dir():
        raise SysIdError(f"{what} {given} is a folder; expected a file name")
    if str(path).endswith(os.sep):
        raise SysIdError(f"{what} {given} ends with {os.sep}; expected a file name")
    found = _nearest_existing(path.absolute().parent)
    if not found.is_dir():
        raise SysIdError(f"{what} {given}: {found} is a file, so no file can be made under it")
    _writable(found, what, given)
    return path
