"""The local process pool of ``--jobs``: how workers start and how many threads each uses."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from polybag.ops import batch
from polybag.util import threads as _threads


def _report(src: str, dst: str, options: dict[str, Any]) -> dict[str, Any]:
    """A task reporting the worker's thread cap and whether it inherited this module's state."""
    return {
        "pid": os.getpid(),
        "workers": _threads.workers(),
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "marker": os.environ.get("POLYBAG_TEST_MARKER"),
    }


def test_each_worker_gets_its_share_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "cores", lambda: 4)
    # (a Dask test before this one may have run tasks on threads of this process, which cap
    # this process's MAX_WORKERS: the parent's cap is set here, as a fresh process has it)
    monkeypatch.setattr(_threads, "MAX_WORKERS", 8)
    assert batch._threads_per_worker(2) == 2
    assert batch._threads_per_worker(8) == 1
    res = batch.run_many(_report, [(f"in{i}", f"out{i}") for i in range(4)], {}, jobs=2)
    assert res.failed == 0
    got = [f.result for f in res.files]
    assert all(g is not None for g in got)
    assert len({g["pid"] for g in got if g}) <= 2 and all(g["pid"] != os.getpid() for g in got if g)
    # 4 cores (as patched here, and so in the forked workers) shared by 2 workers: 2 each
    assert {g["workers"] for g in got if g} == {min(2, _threads.MAX_WORKERS)}
    assert {g["omp"] for g in got if g} == {"2"}


_CHILD = """
import os, sys
sys.path.insert(0, sys.argv[1])
from test_batch_workers import _report
from polybag.ops import batch
os.environ["POLYBAG_TEST_MARKER"] = "inherited"
print(batch._mp_context().get_start_method())
res = batch.run_many(_report, [("a", "x"), ("b", "y")], {}, jobs=2)
print(*[f.result["marker"] for f in res.files])
"""


def test_a_single_threaded_parent_forks_its_workers() -> None:
    # (pytest's process runs other threads: the parent is a fresh interpreter)
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _CHILD, os.path.dirname(__file__)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["fork", "inherited inherited"]


def test_a_parent_with_threads_uses_the_forkserver() -> None:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert batch._mp_context().get_start_method() == "forkserver"
    finally:
        stop.set()
        t.join()


def test_limit_threads_caps_the_pool_and_the_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "MAX_WORKERS", 4)
    for var in batch._THREAD_ENV:
        monkeypatch.delenv(var, raising=False)
    batch.limit_threads(1)
    assert _threads.MAX_WORKERS == 1 and _threads.workers() == 1 and _threads.helpers() == 0
    assert all(os.environ[v] == "1" for v in batch._THREAD_ENV)
