"""Output paths are checked before any work, in one line naming the option: an existing file as a
folder, a path under a file, a folder as a file name, a read-only file system (a read-only tmpfs
mounted for the test: root ignores mode bits, not a read-only mount)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.output_paths import check_file, check_folder


def test_folders(tmp_path):
    assert check_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checking makes nothing
    (tmp_path / "file").write_text("x")
    with pytest.raises(SysIdError,
                       match=r"^--out .*/file is a file; expected a folder \(existing or to be made\)$"):
        check_folder(tmp_path / "file")
    with pytest.raises(SysIdError,
                       match=r"^--out .*/file/sub: .*/file is a file, so no folder can be made under it$"):
        check_folder(tmp_path / "file" / "sub")


def test_files(tmp_path):
    assert check_file(tmp_path / "a" / "b.csv", "--export") == tmp_path / "a" / "b.csv"
    with pytest.raises(SysIdError, match=r"^--export .* is a folder; expected a file name$"):
        check_file(tmp_path, "--export")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SysIdError,
                       match=r"^--export .*/file/x.csv: .*/file is a file, so no file can be made"):
        check_file(tmp_path / "file" / "x.csv", "--export")


def test_read_only_file_system(read_only):
    with pytest.raises(SysIdError,
                       match=r"^--out .*/ro/out: cannot write in .*/ro \(Read-only file system\)$"):
        check_folder(read_only / "out")
    with pytest.raises(SysIdError,
                       match=r"^--export .*/ro/x.csv: cannot write in .*/ro \(Read-only file system\)$"):
        check_file(read_only / "x.csv", "--export")
    assert not list(Path(read_only).iterdir())
