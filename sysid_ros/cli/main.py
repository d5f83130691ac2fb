"""The ``sysid`` command: one parser assembled from the subcommands' modules, and :func:`main`."""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import logging
import sys
from collections.abc import Sequence

from sysid_ros.core.blas import one_thread_from_start
from sysid_ros.core.errors import InterruptError, SysIdError
from sysid_ros.core.progress import not_shown

#: the subcommands' modules (``sysid_ros.cli.<name>``) in the order ``sysid --help`` lists them; each
#: module's ``add_parser`` owns its parser. Imported by :func:`build_parser`, not with this module:
#: :func:`main` first turns the collector off for the imports (SciPy, MuJoCo, numba, ...)
SUBCOMMANDS = ("inspect_model", "demo", "pipeline", "trajectory", "simulate", "identify", "monitor",
               "validate", "report", "bag")


def build_parser() -> argparse.ArgumentParser:
    from sysid_ros.cli.common import HelpFormatter, Parser

    parser = argparse.ArgumentParser(prog="sysid", description="Robot arm dynamic-parameter identification.",
                                     formatter_class=HelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in SUBCOMMANDS:
        importlib.import_module(f"sysid_ros.cli.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    own = argv is None  # this process's own command (in-process callers, e.g. tests, keep their collector)
    if own:
        # the imports make ~130,000 objects that live until exit: collecting while they are made
        # finds nothing (~190 passes, 0.15-0.19 s of CPU of `sysid identify` at load 6)
        gc.disable()
        # BLAS/LAPACK on one thread from their load, as in a node (sysid_ros/core/blas.py: the
        # project's matrices are small; unless the user set a thread count): NumPy is not loaded yet
        one_thread_from_start()
    try:
        args = build_parser().parse_args(argv)
    except BaseException:  # --help, a usage error (exit 2), an import that failed
        if own:
            gc.enable()
        raise
    if own:
        # what the imports made: out of the collector's reach, a full collection skips it
        # (identify: 0.7 s -> 0.2 s of collections at load 7)
        gc.freeze()
        # and what the command imports and makes later (cvxpy, matplotlib, ...): the interpreter's last
        # collection at exit would traverse it all (identify: 0.3 s at load 2.5)
        atexit.register(gc.freeze)
        if args.command != "identify":
            gc.enable()
        # identify, a one-shot command: its cyclic garbage is left for the exit (the collector's
        # passes over what cvxpy and matplotlib import took 0.15 s of `--method ols`; peak memory
        # on a 20 s, 1 kHz bag the same without them)
    before = set(logging.getLogger().handlers)  # only the handler made here gets the filter
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    for handler in set(logging.getLogger().handlers) - before:  # warnings progress printed: once
        handler.addFilter(not_shown)
    try:
        return int(args.func(args))
    except InterruptError as exc:
        print(f"sysid {args.command}: interrupted ({exc})", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"sysid {args.command}: interrupted (nothing written)", file=sys.stderr)
        return 130
    except SysIdError as exc:
        print(f"sysid {args.command}: error: {exc}", file=sys.stderr)
        return 1
