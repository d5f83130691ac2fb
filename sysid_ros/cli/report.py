"""``sysid report``: report.html of a result folder."""

from __future__ import annotations

import argparse

from sysid_ros.core.output_paths import check_file
from sysid_ros.core.report.html import write_report


def _report_html(args: argparse.Namespace) -> int:
    """``sysid report RESULT_DIR [--out FILE]``: report.html of a result folder."""
    out = check_file(args.out, "--out") if args.out else None
    print(f"wrote {write_report(args.result_dir, out=out)}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid report`` parser."""
    p = sub.add_parser("report", help="report.html of a result folder: verdict, torque fit, residuals, "
                       "parameters, bodies vs nominal, identifiability, validation checks, provenance "
                       "(one self-contained file; identify and validate write it too)")
    p.add_argument("result_dir", metavar="RESULT_DIR", help="folder of sysid identify --out (result.json, "
                   "torques.npz) or of sysid validate --out (validation.json)")
    p.add_argument("--out", metavar="FILE", help="HTML file to write (default: RESULT_DIR/report.html)")
    p.set_defaults(func=_report_html)

