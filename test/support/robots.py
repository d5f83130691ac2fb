"""Where the test robots and the default robot are, and pytest params over them."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_ROBOTS = ROOT / "test" / "robots"  # written for this repository from published figures
DEFAULT_ROBOT = ROOT / "config" / "robots" / "yam_damiao.xml"
ROBOT_FILES = sorted(TEST_ROBOTS.glob("*.xml"))


def robot_params():
    """pytest params over the test robots plus the default robot."""
    files = [*ROBOT_FILES, DEFAULT_ROBOT]
    return [pytest.param(f, id=f.stem) for f in files]
