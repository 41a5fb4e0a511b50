"""Remote files (any fsspec URL) read by range requests.

A :class:`RemoteSource` is a :class:`~polybag.io.source.MappedSource` whose ``view`` maps a
sparse temporary file as large as the remote object.  Nothing is downloaded up front but
the first 16 and the last 64 KiB (magic, bag header, MCAP footer); a reader asks for the ranges it
is about to touch with :meth:`~RemoteSource.need` / :meth:`~RemoteSource.need_many`
(a no-op on a local file), and the source fetches the missing 2 KiB blocks of them:

- neighbouring ranges (gaps under 64 KiB) go out as one request, long runs as several
  concurrent requests of at most 8 MiB;
- reads that follow each other (a chunk after the chunk before it) switch on background
  read-ahead, doubling from 1 MiB up to 64 MiB ahead of the reader, so a sequential pass
  overlaps the network with decoding;
- every byte fetched and every request is counted (:attr:`RemoteSource.stats`).

A format that cannot say what it needs (ULog, a bag without an index, an MCAP without a
summary, recovery) calls :meth:`~RemoteSource.need_all`: the whole object, fetched in
concurrent 8 MiB parts.  Fetched bytes live in the temporary file (anonymous: gone when the
source closes), so memory stays that of the pages a reader touches.

What reads a URL is looked up by its scheme (:mod:`polybag.io.transports`): plain
``http(s)://`` URLs are read by :mod:`polybag.io.http`, ``gs://`` URLs by gcsfs when it is
installed, else through GCS's XML API over the same transport (:mod:`polybag.io.gcs`); every
other scheme through :func:`fsspec.core.url_to_fs` (``s3://`` needs s3fs).  ``file://`` URLs
are mapped like local paths by :func:`polybag.io.source.open_source`.  This module knows no
format: a remote log that is no single object (a rosbag2 bag directory) is its format's
(the registry's ``open_url`` hook, :mod:`polybag.formats.rosbag2.remote`).

Servers are untrusted (see :mod:`polybag.io.http` for the HTTP details).  Every operation
here (an open, each ``need``, a ``download``) has an overall deadline:
``storage_options={"deadline": seconds}``, else ``POLYBAG_REMOTE_DEADLINE``, else one hour;
``storage_options={"timeout": seconds}`` (``POLYBAG_HTTP_TIMEOUT``, 120 s) bounds each HTTP
request.  Both are polybag's own options, never passed to fsspec.  The object is pinned to
the version that was opened: over HTTP by its ``ETag``/``Last-Modified`` (``If-Match``), on
S3 (s3fs) by its ``VersionId`` or ``If-Match`` with its ``ETag``; a change is an error.  Sizes
over :data:`~polybag.io.http.MAX_OBJECT_BYTES` are refused, and messages name the URL
without its user info or query values.  An ``http(s)://`` URL given options only fsspec
takes (``client_kwargs``, ``ssl``, ...) is read by fsspec's HTTP filesystem (aiohttp) under
the redirect rules of :class:`~polybag.io.http.HttpRanges`, through a trace hook added to
its ``client_kwargs["trace_configs"]`` (:func:`~polybag.io.http.aiohttp_guard`): a refused
redirect is a :class:`~polybag.io.http.RedirectRefused`.
"""

from __future__ import annotations

import mmap
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from polybag.errors import PolybagError, UsageError
from polybag.io.http import (
    DEADLINE,
    DEADLINE_ENV,
    MAX_OBJECT_BYTES,
    HttpRanges,
    RedirectRefused,
    aiohttp_guard,
    limits,
    redact,
    refused_redirect,
    scrub,
    secrets_of,
)
from polybag.io.source import MappedSource
from polybag.io.transports import transport_for
from polybag.io.urls import is_url

#: bookkeeping granularity: what a small request is rounded to (one state byte per block)
BLOCK = 2048
#: ranges closer than this are fetched in one request
COALESCE = 64 << 10
#: the longest single request; longer runs are split and fetched concurrently
PART = 8 << 20
#: what is fetched at open from the start (magic, MCAP header, bag header) and the end
#: (MCAP footer and, often, the whole summary) of the object
HEAD = 16 << 10
TAIL = 64 << 10
#: read-ahead window of a sequential pass: from 1 MiB, doubling up to this
MAX_AHEAD = 64 << 10 << 10
#: objects up to this size are cached in anonymous memory (what is fetched stays resident);
#: larger ones in a sparse temporary file (what is fetched goes to disk)
MEMORY_CACHE = 1 << 30
#: an in-memory cache at least this large asks for transparent huge pages
HUGE_PAGES_FROM = 8 << 20
#: the least read-ahead of a sequential run
MIN_AHEAD = 4 << 20
#: how far ahead of the reader hinted ranges (:meth:`RemoteSource.hint`) are fetched
HINT_AHEAD = 64 << 20
#: concurrent requests of one source
WORKERS = 8
#: a range this short is batched with others (a multi-range request, ``cat_ranges``)
SMALL = 256 << 10
#: most ranges in one batch
BATCH = 256
#: more small ranges than this inside a hinted read, on a transport without multi-range
#: requests, are fetched with the hinted stream instead of one request each
FEW = 4

_MISSING, _INFLIGHT, _PRESENT = 0, 1, 2


def _guarded(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The options of an ``http(s)://`` URL read through fsspec's HTTP filesystem: the
    caller's ``client_kwargs`` (kept) with polybag's redirect rules added to their
    ``trace_configs`` (:func:`polybag.io.http.aiohttp_guard`)."""
    kwargs = opts.get("client_kwargs")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise UsageError(f"{redact(url)}: the storage option client_kwargs must be a dict")
    theirs = kwargs.get("trace_configs") or []
    if not isinstance(theirs, (list, tuple)):
        raise UsageError(f"{redact(url)}: client_kwargs['trace_configs'] must be a list")
    try:
        guard = aiohttp_guard()
    except ImportError as e:  # pragma: no cover - the remote extra
        raise UsageError(f"{redact(url)}: reading this URL needs aiohttp (pip install 'polybag[remote]')") from e
    return {**opts, "client_kwargs": {**kwargs, "trace_configs": [*theirs, guard]}}


def _fs_for(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    _timeout, _deadline, opts = limits(url, storage_options)  # polybag's own options stay here
    try:
        import fsspec.core  # type: ignore[import-untyped]  # fsspec ships no type hints
    except ImportError as e:  # pragma: no cover - the remote extra
        raise UsageError(f"{redact(url)}: reading URLs needs fsspec (pip install 'polybag[remote]')") from e
    if url.lower().startswith(("http://", "https://")):
        opts = _guarded(url, opts)  # aiohttp under fsspec: the redirect rules of HttpRanges
    try:
        fs, fpath = fsspec.core.url_to_fs(url, **opts)
        return fs, fpath
    except (ImportError, ValueError) as e:
        raise UsageError(f"{redact(url)}: cannot read this URL: {scrub(str(e), secrets_of(url))}") from e


def _transport_error(url: str, what: str, e: BaseException) -> PolybagError:
    """A transport's exception as a PolybagError naming ``url`` (no secrets, no raw text); a
    refused redirect (fsspec's HTTP filesystem) as a :class:`RedirectRefused`."""
    reason = refused_redirect(e)
    if reason is not None:
        return RedirectRefused(f"{redact(url)}: {what}: {scrub(reason, secrets_of(url))}")
    return PolybagError(f"{redact(url)}: {what}: {scrub(f'{type(e).__name__}: {e}', secrets_of(url))}")


def _not_found(url: str, e: FileNotFoundError) -> PolybagError:
    """fsspec's FileNotFoundError: no such object, or (over HTTP, where fsspec turns every
    failure of its size request into one) a refused redirect."""
    if refused_redirect(e) is not None:
        return _transport_error(url, "cannot open", e)
    return PolybagError(f"{redact(url)}: cannot open: no such object")


def _check_size(url: str, size: int) -> None:
    if size > MAX_OBJECT_BYTES:
        raise PolybagError(
            f"{redact(url)}: the server says the object is {size} bytes, more than polybag reads "
            f"({MAX_OBJECT_BYTES} bytes)"
        )


class RemoteSource(MappedSource):
    """A remote object as a lazily filled ``memoryview`` (see the module notes)."""

    def __init__(self, url: str, fs: Any, fpath: str, size: int, deadline: float = DEADLINE) -> None:
        self.url = url
        self.name = redact(url)  # what messages (and ``path``) say: no credentials
        self._secrets = secrets_of(url)
        self.deadline = deadline  # of each operation (an open, a need), seconds
        self._fs = fs  # an fsspec filesystem (cat_file, maybe cat_ranges) or an HttpRanges
        self._fpath = fpath
        self._tmp: Any = None
        buf: bytes | mmap.mmap = b""
        try:
            if 0 < size <= MEMORY_CACHE:
                # anonymous memory: untouched pages cost nothing, a copy in is a memcpy
                buf = mmap.mmap(-1, size)
                if size >= HUGE_PAGES_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
                    try:  # 2 MiB pages: a 200 MB fetch takes 100 page faults, not 50,000
                        buf.madvise(mmap.MADV_HUGEPAGE)
                    except OSError:
                        pass
            elif size:
                self._tmp = tempfile.TemporaryFile(prefix="polybag-remote-")  # noqa: SIM115 - owned by the source
                self._tmp.truncate(size)  # sparse: takes no space until written
                buf = mmap.mmap(self._tmp.fileno(), size)
        except OSError as e:
            if self._tmp is not None:
                self._tmp.close()
            raise PolybagError(f"{self.name}: cannot set up a cache for {size} bytes: {e.strerror or e}") from e
        self._file_backed = self._tmp is not None
        super().__init__(self.name, buf)
        self._wview = self.view  # fetches write here; readers get the read-only view
        self.view = self.view.toreadonly()
        self._spool = self._tmp  # closed (and so freed) with the source
        self._state = np.zeros((size + BLOCK - 1) // BLOCK, np.uint8)
        self._cv = threading.Condition()
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="polybag-fetch")
        self._closed = False
        self._next = -1  # where the last need ended (sequential detection)
        self._run_start = 0  # where the current sequential run began
        self._ahead_to = 0  # read-ahead of the current run was scheduled up to here
        self._hints: list[tuple[int, int]] = []  # block spans a reader said it will read, in order
        self._hinted: list[tuple[int, int]] = []  # the same, as given
        self._hint_at = 0  # the first hinted span not yet scheduled
        self._hint_to = 0  # hinted blocks were scheduled up to this one
        self.requests = 0
        self.bytes_fetched = 0

    # --- what readers call ---------------------------------------------------------------
    @property
    def stats(self) -> dict[str, Any]:
        """Requests made and bytes fetched so far (and the object's size)."""
        with self._cv:
            return {
                "url": self.name,
                "size": self.size,
                "requests": self.requests,
                "bytes_fetched": self.bytes_fetched,
                **({"bytes_received": self._fs.bytes_received} if isinstance(self._fs, HttpRanges) else {}),
            }

    def need(self, offset: int, length: int) -> None:
        """Make ``[offset, offset + length)`` (clipped to the object) readable in ``view``."""
        self.need_many(((offset, length),))

    def need_many(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Make all ``(offset, length)`` ranges readable; neighbours share requests."""
        spans = self._blocks(ranges)
        if not spans:
            return
        until = time.monotonic() + self.deadline
        lo, hi = spans[0][0] * BLOCK, min(self.size, spans[-1][1] * BLOCK)
        if self._hint_at < len(self._hints):  # a hinted read: keep its ranges coming
            # many small ranges inside what the read will fetch anyway (an MCAP's Message
            # Indexes after each chunk), on a transport that asks for one range a request (S3):
            # the hinted stream fetched up to the last of them in large requests instead
            scattered = len(spans) > FEW and not self._multirange() and self._inside_hints(spans)
            self._pump(lo, hi if scattered else 0)
            self._ensure(spans, until)
            self._pump(hi)
            return
        if hi <= self._next and self._held(spans):
            return  # a look back at bytes already here: the sequential run goes on
        self._ensure(spans, until)
        self._maybe_read_ahead(lo, hi)

    def hint(self, ranges: Iterable[tuple[int, int]]) -> None:
        """The ``(offset, length)`` ranges a read is about to go through, in file order (the
        chunks a plan selected): they are fetched in the background, in order, in requests
        of up to PART bytes, up to HINT_AHEAD bytes ahead of the reader's last need, so the
        reader finds them there; the sequential read-ahead is off while hints remain (it
        would fetch what the plan skips).  A new hint replaces the last."""
        spans = self._blocks(ranges)
        with self._cv:
            self._hints = spans
            self._hinted = list(spans)  # as given (``_hints`` is consumed as they are fetched)
            self._hint_at = 0
            self._hint_to = 0
        if spans:
            self._pump(spans[0][0] * BLOCK)

    def _multirange(self) -> bool:
        """Whether the transport takes several ranges in one request (HTTP servers that
        answer ``multipart/byteranges``; not S3 or other fsspec stores)."""
        return isinstance(self._fs, HttpRanges) and self._fs.multirange

    def _inside_hints(self, spans: list[tuple[int, int]]) -> bool:
        """Whether every block span lies within the hinted spans (fetched, on the way or to
        come)."""
        with self._cv:
            hints = self._hinted
        k = 0
        for b0, b1 in spans:  # both sorted
            while k < len(hints) and hints[k][1] < b1:
                k += 1
            if k == len(hints) or hints[k][0] > b0:
                return False
        return True

    def _pump(self, pos: int, upto: int = 0) -> None:
        """Start fetching the hinted blocks from ``pos`` up to HINT_AHEAD bytes beyond it (or
        up to ``upto``, when that is further)."""
        todo: list[tuple[int, int]] = []
        limit = max((pos + HINT_AHEAD + BLOCK - 1) // BLOCK, (upto + BLOCK - 1) // BLOCK)
        first = pos // BLOCK
        with self._cv:
            half = HINT_AHEAD // 2 // BLOCK
            if self._hint_to > max(first + half, limit - half):
                return  # enough is on the way: top up in large requests, not a little per need
            self._hint_to = limit
            while self._hint_at < len(self._hints):
                b0, b1 = self._hints[self._hint_at]
                if b1 <= first:  # passed (or skipped) by the reader
                    self._hint_at += 1
                    continue
                if b0 >= limit:
                    break
                cut = min(b1, limit)
                todo += self._claim(max(b0, first), cut)
                if cut < b1:
                    self._hints[self._hint_at] = (cut, b1)
                    break
                self._hint_at += 1
        for s, e in todo:
            try:
                self._pool.submit(self._background, s, e)
            except RuntimeError:  # closed meanwhile
                self._settle(s, e, False)

    def need_all(self) -> None:
        """Fetch the whole object (concurrent parts); for formats read front to back."""
        if self.size:
            self._ensure([(0, len(self._state))], time.monotonic() + self.deadline)

    # --- block bookkeeping ------------------------------------------------------------------
    def _blocks(self, ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Block spans ``[b0, b1)`` of ``ranges``, sorted, neighbours (under COALESCE) merged."""
        out: list[tuple[int, int]] = []
        gap = COALESCE // BLOCK
        for off, ln in sorted((max(0, o), o + n) for o, n in ranges if n > 0):
            end = min(self.size, ln)
            if off >= end:
                continue
            b0, b1 = off // BLOCK, (end + BLOCK - 1) // BLOCK
            if out and b0 <= out[-1][1] + gap:
                out[-1] = (out[-1][0], max(out[-1][1], b1))
            else:
                out.append((b0, b1))
        return out

    def _held(self, spans: list[tuple[int, int]]) -> bool:
        with self._cv:
            return all(bool((self._state[b0:b1] == _PRESENT).all()) for b0, b1 in spans)

    def _claim(self, b0: int, b1: int) -> list[tuple[int, int]]:
        """Mark the missing blocks of ``[b0, b1)`` in flight (caller holds the lock); returns
        the byte ranges to fetch: runs of them, split at PART.  Runs are not joined across
        blocks others have in flight (a fetch settles exactly the blocks of its range)."""
        seg = self._state[b0:b1]
        miss = seg == _MISSING
        if not miss.any():
            return []
        edges = np.flatnonzero(np.diff(np.concatenate(([0], miss.view(np.int8), [0]))))
        seg[miss] = _INFLIGHT
        runs: list[list[int]] = []
        gap = COALESCE // BLOCK
        for i in range(0, len(edges), 2):
            s, e = b0 + int(edges[i]), b0 + int(edges[i + 1])
            if runs and s - runs[-1][1] <= gap and bool((self._state[runs[-1][1] : s] == _PRESENT).all()):
                self._state[runs[-1][1] : s] = _INFLIGHT  # re-reading a few present blocks beats a request
                runs[-1][1] = e
            else:
                runs.append([s, e])
        out: list[tuple[int, int]] = []
        step = PART // BLOCK
        for s, e in runs:
            for p in range(s, e, step):
                out.append((p * BLOCK, min(self.size, min(e, p + step) * BLOCK)))
        return out

    def _settle(self, start: int, end: int, ok: bool) -> None:
        """Blocks of a finished fetch: present, or (failed) missing again for a retry."""
        b0, b1 = start // BLOCK, (end + BLOCK - 1) // BLOCK
        with self._cv:
            seg = self._state[b0:b1]
            if ok:
                seg[seg == _INFLIGHT] = _PRESENT
            else:
                seg[seg == _INFLIGHT] = _MISSING
            self._cv.notify_all()

    def _sink(self, start: int, end: int) -> memoryview:
        return self._wview[start:end]

    def _fetch(self, start: int, end: int, until: float | None = None) -> None:
        """One range request, written into the cache."""
        try:
            if self._closed:
                raise PolybagError(f"{self.name}: source closed")
            if isinstance(self._fs, HttpRanges):
                got = self._fs.read_into(start, end, self._sink, until)
            else:
                try:
                    data = self._fs.cat_file(self._fpath, start=start, end=end)
                except PolybagError:
                    raise
                except Exception as e:  # noqa: BLE001 - any transport error becomes one clear error
                    raise _transport_error(self.url, f"cannot read bytes {start}..{end}", e) from None
                got = self._store(start, end, data)
        except BaseException:
            self._settle(start, end, False)
            raise
        with self._cv:
            self.requests += 1
            self.bytes_fetched += got
        self._settle(start, end, True)

    def _store(self, start: int, end: int, data: bytes) -> int:
        if len(data) != end - start:
            raise PolybagError(
                f"{self.name}: asked for bytes {start}..{end}, got {len(data)} bytes (does the server honour Range?)"
            )
        try:
            self._wview[start:end] = data
        except OSError as e:  # pragma: no cover - a full disk under the file-backed cache
            raise PolybagError(f"{self.name}: cannot write to the temporary file: {e.strerror or e}") from e
        return len(data)

    def _fetch_many(self, ranges: list[tuple[int, int]], until: float | None = None) -> None:
        """Several small ranges in as few requests as the transport allows: one multi-range
        request over HTTP, fsspec's concurrent ``cat_ranges`` otherwise, else one by one."""
        todo = list(ranges)
        try:
            if self._closed:
                raise PolybagError(f"{self.name}: source closed")
            fs = self._fs
            if isinstance(fs, HttpRanges) and fs.multirange:
                done = fs.read_many(todo, self._sink, until)
                if done:
                    with self._cv:
                        self.requests += 1
                        self.bytes_fetched += sum(e - s for s, e in done)
                    for s, e in done:
                        self._settle(s, e, True)
                    held = set(done)
                    todo = [r for r in todo if r not in held]
            elif not isinstance(fs, HttpRanges) and hasattr(fs, "cat_ranges"):
                try:
                    datas = fs.cat_ranges(
                        [self._fpath] * len(todo), [s for s, _ in todo], [e for _, e in todo]
                    )
                except Exception as err:  # noqa: BLE001 - any transport error becomes one clear error
                    raise _transport_error(self.url, f"cannot read {len(todo)} ranges", err) from None
                for (s, e), data in zip(todo, datas):
                    if isinstance(data, BaseException):
                        raise _transport_error(self.url, f"cannot read bytes {s}..{e}", data)
                    got = self._store(s, e, data)
                    with self._cv:
                        self.requests += 1
                        self.bytes_fetched += got
                    self._settle(s, e, True)
                todo = []
        except BaseException:
            for s, e in todo:
                self._settle(s, e, False)
            raise
        for i, (s, e) in enumerate(todo):
            try:
                self._fetch(s, e, until)
            except BaseException:
                for s2, e2 in todo[i + 1 :]:
                    self._settle(s2, e2, False)
                raise

    def _ensure(self, spans: list[tuple[int, int]], until: float | None = None) -> None:
        """Fetch what is missing of the block spans and wait for what others are fetching,
        by ``until`` (the operation's deadline, :func:`time.monotonic`)."""
        while True:
            with self._cv:
                todo = [r for b0, b1 in spans for r in self._claim(b0, b1)]
                if not todo:
                    if all(bool((self._state[b0:b1] == _PRESENT).all()) for b0, b1 in spans):
                        return
                    self._cv.wait(self._left(until, 1.0))  # in flight elsewhere (read-ahead): wait for it
                    continue
            if len(todo) == 1 and isinstance(self._fs, HttpRanges):
                self._fetch(*todo[0], until)  # the request's deadline is cut to the operation's
                continue
            # small scattered ranges (headers, indexes) go out in batches, large ones alone
            small = [r for r in todo if r[1] - r[0] <= SMALL]
            jobs: list[tuple[Any, tuple[Any, ...]]] = [
                (self._fetch, (*r, until)) for r in todo if r[1] - r[0] > SMALL
            ]
            if len(small) > 1:
                jobs += [(self._fetch_many, (small[i : i + BATCH], until)) for i in range(0, len(small), BATCH)]
            else:
                jobs += [(self._fetch, (*r, until)) for r in small]
            futs: list[Future[None]] = []
            try:
                for fn, args in jobs:
                    futs.append(self._pool.submit(fn, *args))
            except RuntimeError as e:  # the pool is shut down: the source was closed
                for fn, args in jobs[len(futs) :]:
                    for s, e_ in args[0] if fn == self._fetch_many else (args[:2],):
                        self._settle(s, e_, False)
                raise PolybagError(f"{self.name}: source closed") from e
            err: BaseException | None = None
            for f in futs:
                try:
                    f.result(timeout=None if until is None else max(0.0, until - time.monotonic()))
                except FutureTimeout:
                    err = err or self._expired()
                except BaseException as e:  # noqa: BLE001 - the first one is raised below
                    err = err or e
            if err is not None:
                raise err

    def _left(self, until: float | None, most: float) -> float:
        """What is left of the operation's deadline (at most ``most``); past it, the error."""
        if until is None:
            return most
        left = until - time.monotonic()
        if left <= 0:
            raise self._expired()
        return min(most, left)

    def _expired(self) -> PolybagError:
        return PolybagError(
            f"{self.name}: a read did not finish within the deadline of {self.deadline:g} s "
            f"(storage_options={{'deadline': seconds}} or {DEADLINE_ENV} sets it)"
        )

    def _maybe_read_ahead(self, lo: int, hi: int) -> None:
        """Background fetch of what follows ``[lo, hi)`` when reads run front to back.

        A run is a sequence of needs each starting within 64 KiB of where the one before
        ended; the read-ahead is twice as long as the run so far (at least MIN_AHEAD, at most
        MAX_AHEAD), so a short read (a time window) fetches little beyond what it reads; it
        is topped up when half of it is used, in requests of up to PART bytes."""
        sequential = self._next >= 0 and self._next - COALESCE <= lo <= self._next + COALESCE
        self._next = hi
        if not sequential:
            self._run_start = lo
            self._ahead_to = hi
            return
        if hi >= self.size:
            return
        window = min(MAX_AHEAD, max(MIN_AHEAD, 2 * (hi - self._run_start)))
        if self._ahead_to - hi > window // 2:
            return  # enough is on the way: top up in large requests, not a little per need
        start = max(hi, self._ahead_to)
        end = min(self.size, hi + window)
        with self._cv:
            todo = self._claim(start // BLOCK, (end + BLOCK - 1) // BLOCK)
        self._ahead_to = end
        for s, e in todo:
            try:
                self._pool.submit(self._background, s, e)
            except RuntimeError:  # closed meanwhile
                self._settle(s, e, False)

    def _background(self, start: int, end: int) -> None:
        try:
            self._fetch(start, end)
        except BaseException:  # noqa: BLE001 - a foreground need retries and reports it
            pass

    def release_pages(self) -> None:
        """Drop the pages of a file-backed cache from the resident set (their bytes stay in
        the temporary file); nothing for an in-memory cache, whose pages are the only copy."""
        if self._file_backed:
            super().release_pages()

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(self._fs, HttpRanges):
            self._fs.close()
        self._wview.release()
        super().close()


class _S3Pinned:
    """An s3fs filesystem whose reads are of the object as it was opened: its ``VersionId``
    when the bucket keeps versions, else ``If-Match`` with its ``ETag`` (S3 answers 412 when
    the object was replaced); every answer's ETag is compared too.  No more bytes are read
    of an answer than were asked for (and one)."""

    def __init__(self, fs: Any, info: dict[str, Any], url: str) -> None:
        self._fs = fs
        self._url = url
        vid = info.get("VersionId")
        self._version = vid if isinstance(vid, str) and vid not in ("", "null") else None
        etag = info.get("ETag")
        self._etag = etag if isinstance(etag, str) and etag else None

    def _changed(self, detail: str) -> PolybagError:
        return PolybagError(f"{redact(self._url)}: the object changed while it was read ({detail})")

    async def _get(self, path: str, start: int, end: int) -> bytes:
        bucket, key, _vers = self._fs.split_path(path)
        kw: dict[str, Any] = {}
        if self._version:
            kw["VersionId"] = self._version
        elif self._etag:
            kw["IfMatch"] = self._etag
        try:
            resp = await self._fs._call_s3(
                "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **kw
            )
        except Exception as e:  # noqa: BLE001 - s3fs/botocore errors of any kind
            text = f"{type(e).__name__}: {e}"
            if "PreconditionFailed" in text or "412" in text or "pre-conditions you specified did not hold" in text:
                raise self._changed("S3 answered 412 Precondition Failed on the pinned ETag") from None
            raise
        body = resp["Body"]
        want = end - start + 1  # one more than asked for: a longer answer is caught, not read
        parts: list[bytes] = []
        got = 0
        try:
            while got < want:
                piece = await body.read(want - got)
                if not piece:
                    break
                parts.append(piece)
                got += len(piece)
        finally:
            body.close()
        data = b"".join(parts)
        now = resp.get("ETag")
        if self._etag and isinstance(now, str) and now != self._etag:
            raise self._changed(f"ETag was {self._etag}, now {now}")
        return data

    def cat_file(self, path: str, start: int, end: int) -> bytes:
        from fsspec.asyn import sync  # type: ignore[import-untyped]  # fsspec ships no type hints

        return sync(self._fs.loop, self._get, path, start, end)  # type: ignore[no-any-return]

    def cat_ranges(self, paths: list[str], starts: list[int], ends: list[int]) -> list[Any]:
        import asyncio

        from fsspec.asyn import sync

        async def all_of() -> list[Any]:
            return await asyncio.gather(
                *(self._get(p, s, e) for p, s, e in zip(paths, starts, ends)), return_exceptions=True
            )

        return sync(self._fs.loop, all_of)  # type: ignore[no-any-return]


def _pinned(fs: Any, fpath: str, info: dict[str, Any]) -> Any:
    """The filesystem to read ``fpath`` through: for S3 (s3fs), one pinned to the version
    that ``info`` describes (:class:`_S3Pinned`); others as they are (their answers carry no
    validator polybag can check through fsspec, only the size)."""
    if type(fs).__name__ == "S3FileSystem" and hasattr(fs, "_call_s3") and hasattr(fs, "split_path"):
        return _S3Pinned(fs, info, fs.unstrip_protocol(fpath) if hasattr(fs, "unstrip_protocol") else fpath)
    return fs


def read_head(url: str, n: int, storage_options: dict[str, Any] | None = None) -> bytes:
    """The first ``n`` bytes of the object at ``url`` (one small request; for sniffing)."""
    _timeout, deadline, _opts = limits(url, storage_options)
    until = time.monotonic() + deadline
    fast = transport_for(url, storage_options)
    if fast is not None:
        try:
            size = fast.open(until)
            if not size:
                return b""
            out = bytearray(min(n, size))
            fast.read_into(0, len(out), lambda s, e: memoryview(out)[s:e], until)
            return bytes(out)
        finally:
            fast.close()
    fs, fpath = _fs_for(url, storage_options)
    try:
        size = fs.size(fpath)
        data = bytes(fs.cat_file(fpath, start=0, end=min(n, size))) if size else b""
    except FileNotFoundError as e:
        raise _not_found(url, e) from None
    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
        raise _transport_error(url, "cannot open", e) from None
    if len(data) > n:
        raise PolybagError(f"{redact(url)}: asked for {n} bytes, got {len(data)}")
    return data


def expand_url(url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The URLs a glob URL (``s3://bucket/logs/*.mcap``) matches, sorted; a plain URL as is."""
    import glob as _glob

    if not _glob.has_magic(url):
        return [url]
    if url.lower().startswith(("gs://", "gcs://")):
        from polybag.io.gcs import have_gcsfs, no_listing

        if not have_gcsfs():
            raise no_listing(url)
    fs, _fpath = _fs_for(url, storage_options)
    try:
        hits = sorted(fs.glob(url))
    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
        raise _transport_error(url, "cannot list", e) from None
    return [h if is_url(h) else fs.unstrip_protocol(h) for h in hits]


def open_url(url: str, storage_options: dict[str, Any] | None = None) -> RemoteSource:
    """A :class:`RemoteSource` for ``url`` with its first 16 and last 64 KiB fetched.

    Plain ``http(s)://`` URLs (without storage options other than ``headers``, ``timeout``,
    ``deadline``) are read by :class:`polybag.io.http.HttpRanges`; everything else
    through fsspec.  The open (size, first and last bytes) is one operation under the
    ``deadline``."""
    _timeout, deadline, _opts = limits(url, storage_options)
    until = time.monotonic() + deadline
    fast = transport_for(url, storage_options)
    if fast is not None:
        try:
            size = fast.open(until)
        except BaseException:
            fast.close()
            raise
        src = RemoteSource(url, fast, url, size, deadline)
    else:
        fs, fpath = _fs_for(url, storage_options)
        try:
            info = fs.info(fpath)
        except FileNotFoundError as e:
            raise _not_found(url, e) from None
        except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
            raise _transport_error(url, "cannot open", e) from None
        if info.get("type") == "directory":
            raise PolybagError(f"{redact(url)}: is a directory, not a log file (a rosbag2 bag: end the URL with /)")
        size = info.get("size")
        if not isinstance(size, int) or size < 0:
            raise PolybagError(f"{redact(url)}: the server does not say how large the object is")
        _check_size(url, size)
        src = RemoteSource(url, _pinned(fs, fpath, info), fpath, size, deadline)
    try:
        src.need_many(((0, HEAD), (size - TAIL, TAIL)))
        src._next = -1  # the edges are not the start of a sequential pass
        if time.monotonic() > until:
            raise src._expired()
    except BaseException:
        src.close()
        raise
    return src


def download(url: str, dest: str, storage_options: dict[str, Any] | None = None) -> int:
    """Copy the whole object at ``url`` to the local file ``dest`` in PART-sized pieces
    (memory stays one piece, whatever the object's size); returns the bytes copied.  For
    what needs a local file (a rosbag2 sqlite3 storage file: SQLite reads files only).
    The copy is one operation under the ``deadline``."""
    _timeout, deadline, _opts = limits(url, storage_options)
    until = time.monotonic() + deadline
    fast = transport_for(url, storage_options)
    fs: Any = None
    fpath = url
    name = redact(url)
    try:
        if fast is not None:
            size = fast.open(until)
        else:
            fs, fpath = _fs_for(url, storage_options)
            try:
                info = fs.info(fpath)
                size = int(info["size"])
            except FileNotFoundError as e:
                raise _not_found(url, e) from None
            except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
                raise _transport_error(url, "cannot open", e) from None
            _check_size(url, size)
            fs = _pinned(fs, fpath, info)
        buf = bytearray(min(PART, size))
        view = memoryview(buf)
        try:
            with open(dest, "wb") as out:
                for start in range(0, size, PART):
                    end = min(size, start + PART)
                    if fast is not None:

                        def into(s: int, e: int, o: int = start) -> memoryview:
                            return view[s - o : e - o]

                        fast.read_into(start, end, into, until)
                        out.write(view[: end - start])
                        continue
                    if time.monotonic() > until:
                        raise PolybagError(
                            f"{name}: the copy did not finish within the deadline of {deadline:g} s "
                            f"(storage_options={{'deadline': seconds}} or {DEADLINE_ENV} sets it)"
                        )
                    try:
                        data = fs.cat_file(fpath, start=start, end=end)
                    except PolybagError:
                        raise
                    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
                        raise _transport_error(url, f"cannot read bytes {start}..{end}", e) from None
                    if len(data) != end - start:
                        raise PolybagError(f"{name}: asked for bytes {start}..{end}, got {len(data)} bytes")
                    out.write(data)
        except OSError as e:
            raise PolybagError(f"{dest}: cannot write a copy of {name}: {e.strerror or e}") from e
        return size
    finally:
        if fast is not None:
            fast.close()
