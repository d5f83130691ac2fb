"""Files written whole or not at all, with the permissions the umask gives: the one atomic writer.

Every file the package writes (results, models, trajectories, summaries, recorder state) goes
through :func:`write_atomic` (or :func:`write_json`): the content is written to a temporary file
beside the target and renamed over it, so a reader never sees half a file and a failure leaves
no partial one. A writer that wants a file name (matplotlib's ``savefig``, ``np.savetxt``) writes
to the name :func:`atomic_path` gives, renamed the same way. Files that belong together (an
identification's result folder) are written into a :class:`StagedFiles` folder and moved into
place only when all of them exist. The temporary file is created with mode ``0o666`` and the
process's umask applied by the kernel (0644 under the usual umask 022), as ``open()`` would;
folders the package stages and renames into place get :func:`folder_mode`.

(A recorded bag is the one thing staged differently: :mod:`sysid_ros.core.data.bag` keeps a
partial bag and its loss state for ``sysid bag recover`` when a recording is interrupted, and
renames the finished bag folder into place whole.)
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sysid_ros.core.json_numbers import strict_json

__all__ = ["STAGING_PREFIX", "StagedFiles", "atomic_path", "final_path", "folder_mode",
           "remove_stale_staging", "umask", "write_atomic", "write_json"]

log = logging.getLogger(__name__)

#: a staging folder of :class:`StagedFiles`: ``.sysid-partial-<pid>-<random>``
STAGING_PREFIX = ".sysid-partial-"
_STAGING_PID = re.compile(re.escape(STAGING_PREFIX) + r"(\d+)-")


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


_TEMPORARY = re.compile(r"^\.(?P<stem>.+)\.\d+\.[0-9a-f]{8}\.tmp(?P<suffix>(\.[^.]*)?)$")


def _temporary(path: Path) -> Path:
    """A fresh hidden name beside ``path`` ending in ``path``'s suffix (writers that pick the
    format by the suffix, e.g. ``savefig``, see the same one): ``.<stem>.<pid>.<8 hex>.tmp<suffix>``."""
    return path.parent / f".{path.stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp{path.suffix}"


def final_path(path: str | os.PathLike[str]) -> Path:
    """The path a temporary name of :func:`write_atomic` / :func:`atomic_path` will be renamed to
    (any other path as it is): what a writer handed the temporary name is writing."""
    path = Path(path)
    match = _TEMPORARY.match(path.name)
    return path if match is None else path.with_name(match["stem"] + match["suffix"])


def write_atomic(path: str | os.PathLike[str], content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8, or bytes) to ``path`` atomically: a temporary file in the
    same folder renamed into place, removed on any failure. Creates the parent folders. The file's
    mode is ``0o666`` less the umask. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = _temporary(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary name beside ``path`` (same suffix) for a writer that takes a file name; when
    the ``with`` block ends without an error it is renamed over ``path``, else removed::

        with atomic_path(out / "plot.png") as tmp:
            fig.savefig(tmp)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class StagedFiles:
    """Files that belong together, written into a staging folder ``.sysid-partial-<pid>-*`` inside
    ``out_dir`` and moved into ``out_dir`` by :meth:`commit` only when all of them exist; a failure
    before leaves nothing behind (the folder is removed when the ``with`` block ends)::

        with StagedFiles(out) as stage:
            (stage.path / "a.json").write_text(...)
            paths = stage.commit(["a.json"])

    The folder's name holds the writing process's id: one left by a process that was killed
    (``kill -9``) is removed by the next staging in the same folder (:func:`remove_stale_staging`).
    """

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir

    def __enter__(self) -> StagedFiles:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(self.out_dir)
        self.path = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=self.out_dir))
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def commit(self, names: Iterable[str]) -> list[Path]:
        """Move the staged ``names`` into ``out_dir`` (each by one rename, over an older file of the
        same name); returns their absolute paths in order."""
        paths = []
        for name in names:
            os.replace(self.path / name, self.out_dir / name)
            paths.append((self.out_dir / name).resolve())
        return paths


def remove_stale_staging(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Remove the staging folders ``.sysid-partial-<pid>-*`` in ``out_dir`` whose process no longer
    runs (a writer killed before it finished; same host); each removal is logged as a warning.
    Folders of running processes are left alone, and so are unnamed ones of older versions
    (``.sysid-partial-*`` without a pid: reported, to be removed by hand). Returns the removed."""
    removed = []
    for folder in sorted(Path(out_dir).glob(f"{STAGING_PREFIX}*")):
        if not folder.is_dir():
            continue
        match = _STAGING_PID.match(folder.name)
        if match is None:
            log.warning("%s: partial output of an older version, left as it is (remove it if no "
                        "identification is writing into %s)", folder, out_dir)
            continue
        pid = int(match.group(1))
        if _running(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            log.warning("removed %s: partial output of process %d, which ended before it finished",
                        folder, pid)
            removed.append(folder)
    return removed


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one of another user counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_json(path: str | os.PathLike[str], doc: Any, *, indent: int | None = 2) -> Path:
    """``doc`` as strict JSON (:func:`~sysid_ros.core.json_numbers.strict_json`: NumPy values as
    JSON values, NaN and ±inf as null), written atomically with a final newline."""
    return write_atomic(path, json.dumps(strict_json(doc), indent=indent, allow_nan=False) + "\n")
