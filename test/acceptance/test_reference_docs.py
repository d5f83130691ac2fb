"""The reference pages are generated from the code: docs/reference/cli.md from the `sysid` parsers,
docs/reference/parameters.md from the nodes' parameter tables. A change to either without
`python tools/gen_reference.py` fails here, naming the page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_reference_pages_match_the_code():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
