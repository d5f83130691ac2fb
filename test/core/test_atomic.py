"""The one atomic writer (core/atomic.py): a file is there whole or not at all, with the umask's
mode; files that belong together are moved into place together."""

from __future__ import annotations

import os
import stat

import pytest

from sysid_ros.core.atomic import StagedFiles, atomic_path, final_path, umask, write_atomic, write_json


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_write_atomic_replaces_whole_and_leaves_nothing_on_failure(tmp_path):
    path = write_atomic(tmp_path / "sub" / "a.txt", "one\n")
    assert path.read_text() == "one\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask()
    write_atomic(path, b"two\n")
    assert path.read_text() == "two\n" and _names(path.parent) == ["a.txt"]
    with pytest.raises(TypeError):
        write_atomic(path, 3)  # type: ignore[arg-type]
    assert path.read_text() == "two\n" and _names(path.parent) == ["a.txt"]
    write_json(tmp_path / "b.json", {"x": float("inf"), "y": [1.5, float("nan")]})
    assert (tmp_path / "b.json").read_text() == '{\n  "x": null,\n  "y": [\n    1.5,\n    null\n  ]\n}\n'


def test_atomic_path_keeps_the_suffix_and_renames_only_on_success(tmp_path):
    target = tmp_path / "plot.png"
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".png" and tmp.name.startswith(".")
        assert final_path(tmp) == target and final_path(target) == target
        tmp.write_bytes(b"png")
    assert target.read_bytes() == b"png" and _names(tmp_path) == ["plot.png"]
    with pytest.raises(RuntimeError, match="writer failed"), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert target.read_bytes() == b"png" and _names(tmp_path) == ["plot.png"]


def test_staged_files_move_together_or_not_at_all(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), StagedFiles(out) as stage:
        assert stage.path.parent == out and stage.path.name.startswith(f".sysid-partial-{os.getpid()}-")
        (stage.path / "a.json").write_text("{}")
        raise RuntimeError("the second file failed")
    assert _names(out) == []
    with StagedFiles(out) as stage:
        (stage.path / "a.json").write_text("{}")
        (stage.path / "b.txt").write_text("b")
        paths = stage.commit(["a.json", "b.txt"])
    assert paths == [(out / "a.json").resolve(), (out / "b.txt").resolve()]
    assert _names(out) == ["a.json", "b.txt"]
