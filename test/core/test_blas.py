"""``single_threaded_blas``: every BLAS library (NumPy's and SciPy's own OpenBLAS) on one thread
inside, the previous limits back outside (the batch path's policy, ``sysid_ros/core/blas.py``)."""

from __future__ import annotations

import threading

from threadpoolctl import threadpool_info, threadpool_limits

from sysid_ros.core.blas import single_threaded_blas


def _blas_threads() -> dict[str, int]:
    return {info["filepath"]: info["num_threads"] for info in threadpool_info()
            if info["user_api"] == "blas"}


def test_every_blas_library_runs_on_one_thread_inside_and_as_before_outside():
    with threadpool_limits(limits=2, user_api="blas"):  # as on the 2-core machine, whatever the env says
        before = _blas_threads()
        assert sum(n == 2 for n in before.values()) >= 2  # NumPy's and SciPy's OpenBLAS, separately
        with single_threaded_blas():
            inside = _blas_threads()
        after = _blas_threads()
    assert set(inside) == set(before)
    assert set(inside.values()) == {1}
    assert after == before


def test_a_limit_set_from_the_main_thread_holds_in_worker_threads_until_restored():
    """The batch_solver node solves in worker threads; it limits BLAS once, from its main thread."""
    with threadpool_limits(limits=2, user_api="blas"):
        limit = single_threaded_blas()  # held, not a context: as the node does for its life
        seen: dict[str, int] = {}
        worker = threading.Thread(target=lambda: seen.update(_blas_threads()))
        worker.start()
        worker.join(timeout=30)
        limit.restore_original_limits()
        restored = _blas_threads()
    assert seen and set(seen.values()) == {1}
    assert sum(n == 2 for n in restored.values()) >= 2


def _threads_in_a_fresh_process(env: dict[str, str]) -> tuple[list[int], str | None]:
    import json
    import os
    import subprocess
    import sys

    code = ("import json, os, sysid_ros.nodes, numpy, scipy.linalg\n"
            "from threadpoolctl import threadpool_info\n"
            "print(json.dumps([[i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'], "
            "os.environ.get('OPENBLAS_NUM_THREADS')]))")
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                              "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True,
                         text=True, timeout=120, check=True)
    threads, variable = json.loads(out.stdout.strip().splitlines()[-1])
    return threads, variable


def test_a_node_process_runs_its_blas_on_one_thread_from_its_start_unless_the_user_chose():
    """``sysid_ros.nodes`` (imported before a node's NumPy) sets one thread; a user's count stays."""
    assert _threads_in_a_fresh_process({}) == ([1, 1], "1")  # NumPy's and SciPy's OpenBLAS
    assert _threads_in_a_fresh_process({"OPENBLAS_NUM_THREADS": "2"})[1] == "2"
