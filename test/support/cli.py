"""``sysid ARGS`` run in the test process (``sysid_ros.cli.main``), for tests of what a command
does and says where the process boundary is not what is tested: no interpreter start-up and no
second import of MuJoCo, numba's kernels and cvxpy per call."""

from __future__ import annotations

import contextlib
import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Completed:
    """What ``subprocess.run(..., capture_output=True, text=True)`` gives, of an in-process run."""

    returncode: int
    stdout: str
    stderr: str


def sysid(*args, cwd: Path | str | None = None) -> Completed:
    """Run ``sysid ARGS`` in this process (in ``cwd`` if given): its exit code (argparse's
    ``SystemExit`` included), what it printed to stdout and stderr, and the WARNING and higher
    records it logged (on stderr, as the command's own handler prints them)."""
    from sysid_ros.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    before = list(root.handlers)
    root.addHandler(handler)
    here = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse: --help, usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(here)
        for made in [h for h in root.handlers if h not in before]:  # ours, and main's own (on err)
            root.removeHandler(made)
    return Completed(int(code), out.getvalue(), err.getvalue())
