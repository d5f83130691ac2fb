"""numba, imported once for the project's compiled kernels, without the optional packages it
would load for nothing.

numba's import loads ``coverage`` whenever it is installed (``numba.misc.coverage_support``), to
report compiled lines to a coverage run that is active in the process. In a process where no such
run is active (``coverage`` not imported yet: a coverage run imports it before the code it
measures, in-process or in subprocesses through its start-up hook) that import is ~0.25 s of CPU
of every ``sysid`` command for nothing: here it is skipped (numba then reports coverage as
unavailable, which it is). Likewise ``yaml`` (~0.02-0.03 s), which numba's configuration reads only
for a ``.numba_config.yaml`` in the working folder: hidden unless there is one.

numba's typing of CFFI functions (``numba.core.typing.cffi_utils``, loaded with the CPU target on
the first kernel call) imports ``cffi`` and builds an ``FFI`` whenever cffi is installed (with
``pycparser``: 0.08-0.1 s of CPU at load 19). No kernel of the project takes a CFFI function, so
that module is loaded here with cffi hidden (numba then reports CFFI typing as unsupported).

A package already imported is never hidden, and a later ``import`` of a hidden one imports it as
usual. Every module with kernels imports numba from here::

    from sysid_ros.core.jit import numba
"""

from __future__ import annotations

import os
import sys


def _without(names: tuple[str, ...], module: str) -> None:
    """Import ``module`` with the packages ``names`` hidden (``import name`` -> ImportError), except
    those already imported; afterwards they import as usual."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        __import__(module)
    finally:
        for name in hidden:
            del sys.modules[name]


if "numba" not in sys.modules:
    _without(("coverage",) if os.path.isfile(".numba_config.yaml") else ("coverage", "yaml"), "numba")
_without(("cffi",), "numba.core.typing.cffi_utils")
import numba  # noqa: E402

__all__ = ["numba"]
