"""The ``sysid`` command: one parser assembled from the subcommands' modules, and :func:`main`."""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import sys
from collections.abc import Sequence

from sysid_ros.cli import (
    bag,
    demo,
    identify,
    inspect_model,
    monitor,
    pipeline,
    report,
    simulate,
    trajectory,
    validate,
)
from sysid_ros.cli.common import HelpFormatter, Parser
from sysid_ros.core.errors import InterruptError, SysIdError
from sysid_ros.core.progress import not_shown

#: the subcommands in the order ``sysid --help`` lists them; each module's ``add_parser`` owns its parser
SUBCOMMANDS = (inspect_model, demo, pipeline, trajectory, simulate, identify, monitor, validate, report,
               bag)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sysid", description="Robot arm dynamic-parameter identification.",
                                     formatter_class=HelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is None:  # this process's own command (in-process callers, e.g. tests, keep their collector)
        # the ~130,000 objects the imports made (SciPy, MuJoCo, numba, ...) live until exit: out of the
        # collector's reach, a full collection skips them (identify: 0.7 s -> 0.2 s of collections at load 7)
        gc.freeze()
        # and what the command imports and makes later (cvxpy, matplotlib, ...): the interpreter's last
        # collection at exit would traverse it all (identify: 0.3 s at load 2.5)
        atexit.register(gc.freeze)
    if argv is None and args.command == "identify":
        # this process's own one-shot command: its cyclic garbage is left for the exit (the
        # collector's passes over what cvxpy and matplotlib import took 0.15 s of `--method ols`;
        # peak memory on a 20 s, 1 kHz bag the same without them). In-process callers keep theirs.
        gc.disable()
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
