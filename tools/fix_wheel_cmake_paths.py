"""Rewrite build-machine include paths baked into the ROS 2 PyPI wheels' CMake exports.

The wheels' exported CMake targets (``$VIRTUAL_ENV/share/*/cmake/*.cmake``) name the include
directories of the machine that built them, e.g. ``/opt/python/cp311-cp311/include/python3.11``
and ``/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include``. CMake rejects
non-existent include directories, so point them at this interpreter's headers and numpy.
Idempotent: a second run finds nothing to change. Prints the number of files rewritten.

When the venv lies inside the package's source tree (``.venv`` next to ``package.xml``), CMake
refuses numpy's include directory in an exported target ("prefixed in the source directory"), so
the numpy path can be given as a link that lives outside the tree (``--numpy-include PATH``).
"""

from __future__ import annotations

import argparse
import re
import sys
import sysconfig
from pathlib import Path

import numpy

_PY_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+")
_NP_INCLUDE = re.compile(
    r"[^\s\";]*/site-packages/numpy/(?:_core|core)/include"
    # ... or a link written by an earlier run (the venv may have moved since)
    r"|[^\s\";]*/sysid_ros/numpy-include-[0-9a-f]{12}"
)


def fix_tree(prefix: Path, np_include: str) -> int:
    """Rewrite every ``*.cmake`` under ``prefix/share``; return how many files changed."""
    py_include = sysconfig.get_paths()["include"]
    changed = 0
    for path in sorted((prefix / "share").glob("*/cmake/*.cmake")):
        text = path.read_text(encoding="utf-8")
        new = _NP_INCLUDE.sub(np_include, text)
        new = _PY_INCLUDE.sub(py_include, new)
        if new != text:
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(new, encoding="utf-8")
            tmp.replace(path)
            changed += 1
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix", type=Path, nargs="?", default=Path(sys.prefix))
    parser.add_argument("--numpy-include", default=numpy.get_include(),
                        help="path written for numpy's include directory")
    args = parser.parse_args(argv)
    print(fix_tree(args.prefix, args.numpy_include))
    return 0


if __name__ == "__main__":
    sys.exit(main())
