"""What the ``sysid`` subcommands share: the help formatter and parser class, the model's base
option, reading a recording's torque calibration, CSV layout and controller, and the command's
logger."""

from __future__ import annotations

import argparse
import logging

from sysid_ros.core.data.columns import ColumnMap
from sysid_ros.core.data.controller import ControllerDescription
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.urdf import BASES

log = logging.getLogger("sysid")


class HelpFormatter(argparse.HelpFormatter):
    """The one help formatter of the ``sysid`` parser and every subcommand's parser: every option
    that has a default shows it, once — appended as ``(default: X)`` unless its help already says
    what the default is; switches (default off) and options without a default say nothing more."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or "%(default)" in text or default is None
                or default is False or default is argparse.SUPPRESS or action.nargs == 0):
            return text
        shown = "''" if default == "" else "%(default)s"
        return f"{text} (default: {shown})" if text else f"(default: {shown})"


class Parser(argparse.ArgumentParser):
    """Every subcommand's parser: the one :class:`HelpFormatter`."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def add_base_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", choices=BASES, default=None,
                        help="fixed: weld the root to the world; floating: a free joint on the root "
                        "(URDF: MuJoCo's import welds the root link); default: as the model says. "
                        "Data of joint states (simulate, identify) need a fixed base")


def calibrated(ds, args: argparse.Namespace):
    """``--torque-scale`` / ``--torque-offset`` applied (``ds`` in the model's joint order)."""
    return ds.with_torque_calibration(floats(args.torque_scale), floats(args.torque_offset))


def csv_layout(args: argparse.Namespace) -> dict:
    """``--columns`` / ``--time-unit`` as :func:`read_data`'s arguments."""
    return {"columns": ColumnMap.parse(args.columns) if args.columns else None, "time_unit": args.time_unit}


def controlled(ds, args: argparse.Namespace):
    """``--controller``'s gains with the recorded reference as the command log (IV methods)."""
    return ControllerDescription.parse(args.controller).apply(ds) if args.controller else ds


def floats(text: str | None) -> list[float] | None:
    """Comma-separated numbers (``None`` stays ``None``)."""
    if text is None:
        return None
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise SysIdError(f"expected comma-separated numbers, got {text!r}") from None
    return values
