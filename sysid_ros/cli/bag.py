"""``sysid bag``: bag maintenance: recovery of an interrupted recording."""

from __future__ import annotations

import argparse

from sysid_ros.cli.common import Parser


def _bag_recover(args: argparse.Namespace) -> int:
    from sysid_ros.core.data.bag_recovery import recover_bag

    rec = recover_bag(args.path)
    dropped = f" (dropped an incomplete last record: {rec.truncated_bytes} B)" if rec.truncated_bytes else ""
    print(f"recovered {rec.path} from {rec.source}{dropped}")
    for topic, n in rec.counts.items():
        gaps = f", {rec.gaps[topic]} missing in stamp gaps" if topic in rec.gaps else ""
        print(f"  {topic}: {n} messages recovered{gaps}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``sysid bag`` parser."""
    p = sub.add_parser("bag", help="bag maintenance: recover an interrupted recording")
    bag = p.add_subparsers(dest="bag_command", required=True, parser_class=Parser)
    q = bag.add_parser("recover", help="rebuild a complete bag from a recording killed before it finished "
                       "(its .NAME.partial-* folder); the folder is removed once the bag is complete")
    q.add_argument("path", help="the intended bag path or its .NAME.partial-* folder")
    q.set_defaults(func=_bag_recover)
