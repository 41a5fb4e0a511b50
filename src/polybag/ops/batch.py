"""Many files in parallel: ``convert --jobs N IN... OUTDIR`` and ``export --jobs N FILE... -o DIR``.

One operation per input file runs in a local process pool (``jobs`` processes, forked when
this process runs no other thread, else started by the ``forkserver`` so that no parent
thread is copied; each worker's helper threads capped so ``jobs`` workers share the cores
instead of each starting a thread per core), or on a Dask distributed cluster
when a scheduler address is given (``--scheduler tcp://host:8786``; the workers need
polybag and read the inputs by their paths or URLs).  Every file's outcome is reported:
the operation's result dictionary, or its error message, so one bad file does not stop
the others.

Outputs go into one directory: ``OUTDIR/<input stem><extension of the format>`` for
convert, ``DIR/<input stem>/`` (one table per topic) for export.  Two inputs with the same
stem are refused before anything runs.
"""

from __future__ import annotations

import multiprocessing
import os
import posixpath
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from polybag.errors import PolybagError, UsageError


@dataclass
class FileOutcome:
    """What one input gave: the operation's result (``to_dict()``) or an error."""

    input: str
    output: str
    result: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "result": self.result, "error": self.error}


@dataclass
class BatchResult:
    """Every file's outcome, in input order."""

    files: list[FileOutcome] = field(default_factory=list)
    jobs: int = 1
    scheduler: str | None = None

    @property
    def failed(self) -> int:
        return sum(1 for f in self.files if f.error is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "scheduler": self.scheduler,
            "failed": self.failed,
            "files": [f.to_dict() for f in self.files],
        }


def stem(path: str) -> str:
    """The file name of a path or URL without its extension (``s3://b/run_3.bag`` -> ``run_3``)."""
    name = posixpath.basename(path.rstrip("/")) if "://" in path else os.path.basename(os.path.normpath(path))
    base, _ext = os.path.splitext(name)
    return base or name


def _unique_stems(inputs: Sequence[str]) -> list[str]:
    stems = [stem(p) for p in inputs]
    seen: dict[str, str] = {}
    for p, s in zip(inputs, stems):
        if s in seen:
            raise UsageError(f"{seen[s]} and {p} would write the same output {s!r}; rename one or run them apart")
        seen[s] = p
    return stems


def _convert_one(src: str, dst: str, options: dict[str, Any]) -> dict[str, Any]:
    from polybag.ops.convert import convert

    return convert(src, dst, **options).to_dict()


def _export_one(src: str, dst: str, options: dict[str, Any]) -> dict[str, Any]:
    from polybag.ops.export import export

    return export(src, dst, **options).to_dict()


def _export_part(src: str, dst: str, options: dict[str, Any]) -> dict[str, Any]:
    """One input's tables in the dataset ``dst``, under ``file=<its name>``."""
    from polybag.ops.export import export, partition_name

    return export(src, dst, file_partition=partition_name(stem(src)), **options).to_dict()


#: what the forkserver imports once, so that each worker it forks starts with them loaded
#: (otherwise every worker pays the imports of numpy and the operations on its first file)
_PRELOAD = ["numpy", "polybag.ops.convert", "polybag.ops.export"]
_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def limit_threads(threads: int) -> None:
    """Cap the threads one worker uses beside its own (polybag's chunk packing and
    scanning helpers, numpy's BLAS, pyarrow): ``jobs`` workers on as many cores would
    otherwise each start one thread per core and take turns on them."""
    from polybag.util import threads as _threads

    n = max(1, threads)
    _threads.MAX_WORKERS = min(_threads.MAX_WORKERS, n)
    for var in _THREAD_ENV:
        os.environ[var] = str(n)
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is not None:  # already loaded (a preload): its pool was sized at import
        pa.set_cpu_count(n)
        pa.set_io_thread_count(max(2, n))


def _threads_per_worker(workers: int) -> int:
    from polybag.util import threads as _threads

    return max(1, _threads.cores() // max(1, workers))


def _mp_context() -> Any:
    """How the workers start: forked from this process when it runs no other thread (they
    begin with everything imported, at once); otherwise from the forkserver (a fork would
    copy locks other threads may hold), which preloads the operations (``_PRELOAD``)."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        # (the pool starts every worker before its own manager thread when it forks)
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)  # (ignored when the server already runs)
    return ctx


def _guarded(
    task: Callable[[str, str, dict[str, Any]], dict[str, Any]],
    src: str,
    dst: str,
    options: dict[str, Any],
    threads: int = 0,
    caller: int = 0,
) -> tuple[dict[str, Any] | None, str | None]:
    """``task`` in a worker: its result, or the message of the polybag error that stopped it
    (``threads``: the worker's thread cap, see :func:`limit_threads`; 0 leaves it; a task
    running in the process ``caller`` (the pid that submitted it: a thread of an in-process
    Dask cluster) leaves it too, as the cap would stay on the caller's process)."""
    if threads and os.getpid() != caller:
        limit_threads(threads)
    try:
        return task(src, dst, options), None
    except PolybagError as e:
        return None, str(e)
    except OSError as e:
        return None, name_once(src, str(e.strerror or e))


def name_once(path: str, text: str) -> str:
    """``text`` led by ``path``, unless it already names it (starts with ``path``, or names
    it as ``path: ...`` further on: a polybag error or damage warning naming its file), so
    that a line never shows the path twice (issue 30)."""
    if not path or text.startswith(path) or f" {path}: " in text:
        return text
    return f"{path}: {text}"


def run_many(
    task: Callable[[str, str, dict[str, Any]], dict[str, Any]],
    pairs: Sequence[tuple[str, str]],
    options: dict[str, Any],
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
) -> BatchResult:
    """``task(input, output, options)`` for every pair: in ``jobs`` local processes (default:
    the CPU count), or on the Dask distributed cluster at ``scheduler``."""
    n = max(1, jobs or os.cpu_count() or 1)
    out = BatchResult(jobs=n, scheduler=scheduler)
    if scheduler:
        try:
            from distributed import Client
        except ImportError as e:
            raise UsageError(f"--scheduler needs dask.distributed ({e}): pip install distributed") from None
        try:
            client = Client(scheduler, timeout=30)  # type: ignore[no-untyped-call]  # distributed leaves Client unannotated
        except (OSError, TimeoutError) as e:
            raise PolybagError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        with client:
            # each worker's threads: its cores shared by the tasks it runs at once
            per = _dask_threads(client)
            futs = [client.submit(_guarded, task, s, d, options, per, os.getpid(), pure=False) for s, d in pairs]
            got = client.gather(futs)  # type: ignore[no-untyped-call]  # distributed leaves gather unannotated
    elif n == 1 or len(pairs) <= 1:
        got = [_guarded(task, s, d, options) for s, d in pairs]
    else:
        k = min(n, len(pairs))
        per = _threads_per_worker(k)
        with ProcessPoolExecutor(k, mp_context=_mp_context(), initializer=limit_threads, initargs=(per,)) as ex:
            futs_ = [ex.submit(_guarded, task, s, d, options) for s, d in pairs]
            got = [f.result() for f in futs_]
    for (s, d), (res, err) in zip(pairs, got):
        out.files.append(FileOutcome(s, d, res, err))
    return out


def _dask_threads(client: Any) -> int:
    """The thread cap of a task on the cluster: the fewest cores per task slot of any worker."""
    try:
        info = client.scheduler_info()["workers"].values()
        slots = [max(1, int(w.get("nthreads", 1))) for w in info]
    except (KeyError, TypeError, ValueError, AttributeError, OSError):
        return 0
    if not slots:
        return 0
    # the cores of a worker's machine are not reported: assume the local ones, split between
    # the workers of this machine and their task slots
    return max(1, _threads_per_worker(sum(slots)))


def _output_dir(output_dir: str, make: bool = True) -> str:
    """OUTDIR of a batch: a URL prefix (checked writable: never an http(s) URL) or a local
    directory (made; a ``file://`` URL is its path)."""
    from polybag.io.upload import check_destination, local_output, output_url

    if output_url(output_dir) is not None:
        check_destination(output_dir)  # (the bucket is there: checked before any work)
        return output_dir
    output_dir = local_output(output_dir)
    if make:
        os.makedirs(output_dir, exist_ok=True)
    return output_dir


def _join(output_dir: str, name: str) -> str:
    """``output_dir/name`` for a local directory or a URL prefix."""
    if "://" in output_dir:
        return output_dir.rstrip("/") + "/" + name
    return os.path.join(output_dir, name)


def convert_many(
    inputs: Sequence[str],
    output_dir: str,
    *,
    format: str = "mcap",  # noqa: A002
    jobs: int | None = None,
    scheduler: str | None = None,
    **options: Any,
) -> BatchResult:
    """Convert every input into ``output_dir/<stem><ext>`` (``format``: the target format)."""
    from polybag.ops.outputs import ext_for, target_format

    fmt = target_format("x", format)
    stems = _unique_stems(inputs)
    output_dir = _output_dir(output_dir)
    pairs = [(p, _join(output_dir, s + ext_for(fmt))) for p, s in zip(inputs, stems)]
    for p, d in pairs:
        if "://" not in p and os.path.abspath(p) == os.path.abspath(d):
            raise UsageError(f"{p}: the output would overwrite the input; choose another OUTDIR")
    options = dict(options, format=fmt, progress=None)
    return run_many(_convert_one, pairs, options, jobs=jobs, scheduler=scheduler)


def export_many(
    inputs: Sequence[str],
    output_dir: str,
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    **options: Any,
) -> BatchResult:
    """Export every input's tables into ``output_dir/<stem>/`` (``options``: :func:`polybag.ops.export.export`'s);
    with ``layout="dataset"`` into one parquet dataset, ``output_dir/topic=<table>/file=<stem>/``
    (the stems made safe by :func:`polybag.ops.export.partition_name`, distinct ignoring case)."""
    stems = _unique_stems(inputs)
    if options.get("layout") == "dataset":
        from polybag.ops.export import partition_name

        seen: dict[str, str] = {}
        for p, s in zip(inputs, stems):
            key = partition_name(s).casefold()
            if key in seen:
                raise UsageError(f"{seen[key]} and {p} would write the same partition file={partition_name(s)}; rename one")
            seen[key] = p
        output_dir = _output_dir(output_dir, make=False)
        options = dict(options, progress=None)
        return run_many(_export_part, [(p, output_dir) for p in inputs], options, jobs=jobs, scheduler=scheduler)
    output_dir = _output_dir(output_dir, make=False)
    pairs = [(p, _join(output_dir, s)) for p, s in zip(inputs, stems)]
    options = dict(options, progress=None)
    return run_many(_export_one, pairs, options, jobs=jobs, scheduler=scheduler)
