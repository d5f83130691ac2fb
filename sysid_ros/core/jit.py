"""numba, imported once for the project's compiled kernels, without the ``coverage`` and ``cffi`` packages.

numba's import loads ``coverage`` whenever it is installed (``numba.misc.coverage_support``), to
report compiled lines to a coverage run that is active in the process. In a process where no such
run is active (``coverage`` not imported yet: a coverage run imports it before the code it
measures, in-process or in subprocesses through its start-up hook) that import is ~0.25 s of CPU
of every ``sysid`` command for nothing: here it is skipped (numba then reports coverage as
unavailable, which it is).

Likewise numba's typing of CFFI functions (``numba.core.typing.cffi_utils``, loaded with the CPU
target on the first kernel call) imports ``cffi`` and builds an ``FFI`` whenever cffi is installed
(with ``pycparser``: 0.08-0.1 s of CPU at load 19). No kernel of the project takes a CFFI function,
so that module is loaded here with cffi hidden (numba then reports CFFI typing as unsupported), unless
cffi is already imported. Every module with kernels imports numba from here::

    from sysid_ros.core.jit import numba
"""

from __future__ import annotations

import sys


def _without(name: str, module: str) -> None:
    """Import ``module`` with the package ``name`` hidden (``import name`` -> ImportError), unless
    ``name`` is already imported; a later ``import name`` imports it as usual."""
    if name in sys.modules:
        __import__(module)
        return
    sys.modules[name] = None  # type: ignore[assignment]
    try:
        __import__(module)
    finally:
        del sys.modules[name]


if "numba" not in sys.modules:
    _without("coverage", "numba")
_without("cffi", "numba.core.typing.cffi_utils")
import numba  # noqa: E402

__all__ = ["numba"]
