"""Many files in parallel: ``convert --jobs N IN... OUTDIR`` and ``export --jobs N FILE... -o DIR``.

One operation per input file runs in a local process pool (``jobs`` processes, started
with ``forkserver`` so that no parent thread is copied), or on a Dask distributed cluster
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


def _guarded(task: Callable[[str, str, dict[str, Any]], dict[str, Any]], src: str, dst: str, options: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``task`` in a worker: its result, or the message of the polybag error that stopped it."""
    try:
        return task(src, dst, options), None
    except PolybagError as e:
        return None, str(e)
    except OSError as e:
        return None, f"{src}: {e.strerror or e}"


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
            client = Client(scheduler, timeout=30)
        except (OSError, TimeoutError) as e:
            raise PolybagError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        with client:
            futs = [client.submit(_guarded, task, s, d, options, pure=False) for s, d in pairs]
            got = client.gather(futs)
    elif n == 1 or len(pairs) <= 1:
        got = [_guarded(task, s, d, options) for s, d in pairs]
    else:
        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(min(n, len(pairs)), mp_context=ctx) as ex:
            got = list(ex.map(_guarded, [task] * len(pairs), [s for s, _ in pairs], [d for _, d in pairs], [options] * len(pairs)))
    for (s, d), (res, err) in zip(pairs, got):
        out.files.append(FileOutcome(s, d, res, err))
    return out


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
    from polybag.ops._common import ext_for, target_format

    fmt = target_format("x", format)
    stems = _unique_stems(inputs)
    os.makedirs(output_dir, exist_ok=True)
    pairs = [(p, os.path.join(output_dir, s + ext_for(fmt))) for p, s in zip(inputs, stems)]
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
    """Export every input's tables into ``output_dir/<stem>/`` (``options``: :func:`polybag.ops.export.export`'s)."""
    stems = _unique_stems(inputs)
    pairs = [(p, os.path.join(output_dir, s)) for p, s in zip(inputs, stems)]
    options = dict(options, progress=None)
    return run_many(_export_one, pairs, options, jobs=jobs, scheduler=scheduler)
