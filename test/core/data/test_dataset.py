"""CSV reading (core/data/dataset.py): NumPy's parser for files of numbers, the cell by cell reading
(with its line-and-column messages) for anything else, the same values either way."""

from __future__ import annotations

import numpy as np
import pytest

from sysid_ros.core.data import dataset
from sysid_ros.core.data.columns import ColumnMap
from sysid_ros.core.data.dataset import read_csv
from sysid_ros.core.errors import DataError

HEADER = "time,q_a,q_b,dq_a,dq_b,tau_a,tau_b"
VALUES = np.array([[0.0, 0.1, -0.2, 1.0, 2.0, 0.5, -0.5],
                   [0.001, 0.1015, -0.1985, 1.5, 2.5, 0.25, -0.75],
                   [0.002, 0.103, -0.197, 1.0e-3, float("nan"), 0.5, -0.625],
                   [0.003, 0.1045, -0.1955, 1.0, 2.0, 0.5, -0.5]])


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_file_of_numbers_is_parsed_at_once_with_the_values_of_the_cell_by_cell_reading(tmp_path):
    rows = [",".join(repr(float(v)) for v in row) for row in VALUES]
    # padded cells, an empty line, a blank line: as the cell by cell reading takes them
    rows[1] = " " + rows[1].replace(",", " , ") + " "
    path = _write(tmp_path / "log.csv", [HEADER, rows[0], "", rows[1], "   ", rows[2], rows[3]])
    header, cells, table = dataset._read_table(path)
    assert header == HEADER.split(",") and cells == []
    assert np.array_equal(table, VALUES, equal_nan=True)
    ds = read_csv(path)
    assert ds.joint_names == ("a", "b")
    assert np.array_equal(ds.q, VALUES[:, 1:3]) and np.array_equal(ds.t, VALUES[:, 0])
    assert np.array_equal(ds.dq, VALUES[:, 3:5], equal_nan=True) and np.array_equal(ds.tau, VALUES[:, 5:7])


def test_other_files_are_read_cell_by_cell_with_their_messages(tmp_path):
    rows = [",".join(repr(float(v)) for v in row) for row in VALUES]
    # a column the map leaves out may hold text: read cell by cell, the same values
    path = _write(tmp_path / "note.csv", [HEADER + ",note", *(r + ",ok" for r in rows)])
    _, cells, table = dataset._read_table(path)
    assert table is None and len(cells) == len(rows)
    ds = read_csv(path, columns=ColumnMap.parse("q=q_{joint},dq=dq_{joint},tau=tau_{joint}"))
    assert np.array_equal(ds.q, VALUES[:, 1:3])
    # a cell that is not a number, a row with another count, a comment line: named by line
    bad = [*rows[:2], rows[2].replace("0.103", "0.1o3"), *rows[3:]]
    with pytest.raises(DataError, match=r"bad.csv:4: column 'q_a': expected a number, got '0.1o3'"):
        read_csv(_write(tmp_path / "bad.csv", [HEADER, *bad]))
    with pytest.raises(DataError, match=r"short.csv:3: expected 7 values, got 6"):
        read_csv(_write(tmp_path / "short.csv", [HEADER, rows[0], rows[1].rsplit(",", 1)[0], *rows[2:]]))
    with pytest.raises(DataError, match=r"comment.csv:2: expected 7 values, got 1"):
        read_csv(_write(tmp_path / "comment.csv", [HEADER, "# a comment", *rows]))
