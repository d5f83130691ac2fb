"""numba, imported once for the project's compiled kernels, without the ``coverage`` package.

numba's import loads ``coverage`` whenever it is installed (``numba.misc.coverage_support``), to
report compiled lines to a coverage run that is active in the process. In a process where no such
run is active (``coverage`` not imported yet: a coverage run imports it before the code it
measures, in-process or in subprocesses through its start-up hook) that import is ~0.25 s of CPU
of every ``sysid`` command for nothing: here it is skipped (numba then reports coverage as
unavailable, which it is). Every module with kernels imports numba from here::

    from sysid_ros.core.jit import numba
"""

from __future__ import annotations

import sys

if "numba" in sys.modules or "coverage" in sys.modules:
    import numba
else:
    sys.modules["coverage"] = None  # type: ignore[assignment]  # `import coverage` -> ImportError
    try:
        import numba
    finally:
        del sys.modules["coverage"]  # a later `import coverage` imports it as usual

__all__ = ["numba"]
