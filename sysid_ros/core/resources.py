"""Locate files shipped with the package (default robot models, configs).

Search order: ``$SYSID_ROS_SHARE``; the ament index (a colcon/apt install); the source tree;
``<prefix>/share/sysid_ros`` (a pip install).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sysid_ros.core.errors import SysIdError

DEFAULT_ROBOT = "yam_damiao.xml"


def share_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("SYSID_ROS_SHARE"):
        dirs.append(Path(os.environ["SYSID_ROS_SHARE"]))
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            dirs.append(Path(get_package_share_directory("sysid_ros")))
        except (PackageNotFoundError, OSError):  # OSError: AMENT_PREFIX_PATH unset
            pass
    except ImportError:
        pass
    dirs.append(Path(__file__).resolve().parent.parent)  # source tree: the package root
    dirs.append(Path(sys.prefix) / "share" / "sysid_ros")
    return dirs


def find_share_file(relative: str) -> Path:
    """First existing ``<share>/<relative>``; :class:`SysIdError` listing where it looked."""
    tried = []
    for d in share_dirs():
        candidate = d / relative
        if candidate.is_file():
            return candidate
        tried.append(str(candidate))
    raise SysIdError(f"cannot find {relative!r}; looked in {tried}")


def default_robot_path() -> Path:
    """The MJCF of the default robot (a 6-DOF Damiao arm)."""
    return find_share_file(f"config/robots/{DEFAULT_ROBOT}")
