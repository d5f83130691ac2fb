"""BLAS/LAPACK threads: the project runs its linear algebra on one thread.

The project's matrices are small: a ``(4465, 58)`` least squares, a ``(1200, 84)`` QR in the
base-parameter search, ~100×100 updates online. A second OpenBLAS thread saves nothing there and,
on a machine with more runnable processes than cores, its hand-offs wait for a core.
``benchmarks/blas_threads.py`` (UR5e, 20 s at 1 kHz, one process, 1 vs 2 threads alternating,
load average 2 on 2 CPUs): model set-up 0.007 s vs 0.11 s, OLS solve 0.07 s vs 0.20 s, the
``(4465, 58)`` lstsq 3.5 ms vs 7.4 ms, the ``(1200, 84)`` QR 1.9 ms vs 6.1 ms; nothing measured
ran faster on two. Under load 10–17 the whole ``sysid identify`` took 16 s on the default threads
and 10.5 s on one.

NumPy and SciPy each bring their own OpenBLAS (SciPy's is loaded with ``scipy.linalg``): the
controller is built after ``scipy.linalg`` is imported, so that it sees both. Set the limit from the main
thread where work runs in other threads: with OpenBLAS 0.3.31, once the main thread has set a
thread count, a limit set in a worker thread does not take effect (30 lstsq of ``(4465, 58)`` in
a worker at load 5.6: 1.2 s limited there, 0.24 s limited from the main thread).

A node process is on one thread from its start (:func:`one_thread_from_start`, called by
``sysid_ros.nodes`` before NumPy loads): an idle OpenBLAS thread spins for a while after each call,
and the estimator's constructor (its base-parameter QR ``(1200, 60)`` and SVD) cost 1.7–1.9 s of CPU
on the default two threads against 0.6–0.8 s on one (load 14–15, two runs each).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

__all__ = ["on_one_blas_thread", "on_one_thread_from_start", "one_thread_from_start", "single_threaded_blas"]

#: the environment variables that set the thread count of the BLAS/OpenMP libraries at their load
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread_from_start() -> bool:
    """BLAS/LAPACK on one thread for this process (and the processes it starts), unless the user
    set a thread count: the libraries read it when they load, so this must run before NumPy is
    imported; returns False (nothing changed) when NumPy is already loaded."""
    if "numpy" in sys.modules:
        return False
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    global _ONE_FROM_START
    _ONE_FROM_START = all(os.environ[name] == "1" for name in THREAD_VARIABLES)
    return True


#: set by :func:`one_thread_from_start`: every BLAS library of the process loads on one thread
_ONE_FROM_START = False


def on_one_thread_from_start() -> bool:
    """Whether :func:`one_thread_from_start` put every BLAS library on one thread before it loaded
    (a later limit, :func:`single_threaded_blas`, has nothing to do: it costs SciPy's import)."""
    return _ONE_FROM_START


@functools.cache
def _blas() -> ThreadpoolController:
    """The process's BLAS/LAPACK thread pools (looked up once, after numpy and scipy loaded)."""
    import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS before the controller looks for it)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def single_threaded_blas() -> contextlib.AbstractContextManager:
    """BLAS/LAPACK on one thread (all loaded libraries, process-wide) from now on: as a context,
    the previous limits come back on exit; else they stay until ``.restore_original_limits()``."""
    return _blas().limit(limits=1, user_api="blas")


def on_one_blas_thread() -> contextlib.AbstractContextManager:
    """A context on one BLAS/LAPACK thread, for code that runs many times a second (the online
    estimators' batches): nothing to do in a process on one thread from its start (a node), where
    each :func:`single_threaded_blas` entry and exit still cost ~0.25 ms of threadpoolctl calls."""
    return contextlib.nullcontext() if _ONE_FROM_START else single_threaded_blas()
