"""A remote object as a source filled by range requests (:class:`RemoteSource`).

A :class:`RemoteSource` is a :class:`~polybag.io.source.MappedSource` whose ``view`` maps a
sparse temporary file as large as the remote object.  Nothing is downloaded up front but
the first 16 and the last 64 KiB (magic, bag header, MCAP footer; :meth:`~RemoteSource.fetch_edges`);
a reader asks for the ranges it is about to touch with :meth:`~RemoteSource.need` /
:meth:`~RemoteSource.need_many` (a no-op on a local file), and the source fetches the missing
2 KiB blocks of them (:mod:`polybag.io.block_map`):

- neighbouring ranges (gaps under 64 KiB) go out as one request, long runs as several
  concurrent requests of at most 8 MiB;
- reads that follow each other (a chunk after the chunk before it) switch on background
  read-ahead, doubling from 1 MiB up to 64 MiB ahead of the reader, so a sequential pass
  overlaps the network with decoding; a read whose plan is known says what it will read
  (:meth:`~RemoteSource.hint`) and that is fetched instead (:mod:`polybag.io.read_ahead`);
- every byte fetched and every request is counted (:attr:`RemoteSource.stats`).

A format that cannot say what it needs (ULog, a bag without an index, an MCAP without a
summary, recovery) calls :meth:`~RemoteSource.need_all`: the whole object, fetched in
concurrent 8 MiB parts.  Fetched bytes live in the temporary file (anonymous: gone when the
source closes), so memory stays that of the pages a reader touches.  The bytes come from an
:class:`~polybag.io.http_ranges.HttpRanges` or an fsspec filesystem
(:mod:`polybag.io.fsspec_transport`); :func:`polybag.io.remote.open_url` makes the source.
"""

from __future__ import annotations

import mmap
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from polybag.errors import PolybagError
from polybag.io.block_map import BLOCK, BlockMap
from polybag.io.fsspec_transport import transport_error
from polybag.io.http_ranges import HttpRanges
from polybag.io.read_ahead import ReadAhead
from polybag.io.redaction import redact, secrets_of
from polybag.io.remote_limits import DEADLINE, DEADLINE_ENV
from polybag.io.source import MappedSource

#: what is fetched at open from the start (magic, MCAP header, bag header) and the end
#: (MCAP footer and, often, the whole summary) of the object
HEAD = 16 << 10
TAIL = 64 << 10
#: objects up to this size are cached in anonymous memory (what is fetched stays resident);
#: larger ones in a sparse temporary file (what is fetched goes to disk)
MEMORY_CACHE = 1 << 30
#: an in-memory cache at least this large asks for transparent huge pages
HUGE_PAGES_FROM = 8 << 20
#: concurrent requests of one source
WORKERS = 8
#: a range this short is batched with others (a multi-range request, ``cat_ranges``)
SMALL = 256 << 10
#: most ranges in one batch
BATCH = 256
#: more small ranges than this inside a hinted read, on a transport without multi-range
#: requests, are fetched with the hinted stream instead of one request each
FEW = 4


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
        self._map = BlockMap(self.size)
        self._cv = self._map.cv  # guards the block states and the counters below
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="polybag-fetch")
        self._closed = False
        self._ahead = ReadAhead(self._map, self._start_background)
        self.requests = 0
        self.bytes_fetched = 0
        # (start, block end): bytes [start, block end) of a partly held block are here (the
        # open's last bytes); a fetch of that block ends at start (:meth:`_upto`)
        self._edge: tuple[int, int] | None = None

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
        spans = self._map.spans(ranges)
        if not spans:
            return
        until = time.monotonic() + self.deadline
        lo, hi = spans[0][0] * BLOCK, min(self.size, spans[-1][1] * BLOCK)
        ahead = self._ahead
        if ahead.hinting():  # a hinted read: keep its ranges coming
            # many small ranges inside what the read will fetch anyway (an MCAP's Message
            # Indexes after each chunk), on a transport that asks for one range a request (S3):
            # the hinted stream fetched up to the last of them in large requests instead
            scattered = len(spans) > FEW and not self._multirange() and ahead.inside_hints(spans)
            ahead.pump(lo, hi if scattered else 0)
            self._ensure(spans, until)
            ahead.pump(hi)
            return
        if hi <= ahead.end and self._map.held(spans):
            return  # a look back at bytes already here: the sequential run goes on
        self._ensure(spans, until)
        ahead.after_need(lo, hi)

    def hint(self, ranges: Iterable[tuple[int, int]]) -> None:
        """The ``(offset, length)`` ranges a read is about to go through, in file order (the
        chunks a plan selected): they are fetched in the background, in order, in requests
        of up to PART bytes, up to HINT_AHEAD bytes ahead of the reader's last need, so the
        reader finds them there; the sequential read-ahead is off while hints remain (it
        would fetch what the plan skips).  A new hint replaces the last."""
        self._ahead.hint(self._map.spans(ranges))

    def need_all(self) -> None:
        """Fetch the whole object (concurrent parts); for formats read front to back."""
        if self.size:
            self._ensure([(0, len(self._map))], time.monotonic() + self.deadline)

    def fetch_edges(self, until: float) -> None:
        """Fetch the first HEAD and the last TAIL bytes (what every format reads at open) by
        ``until``; they are not the start of a sequential pass."""
        self.need_many(((0, HEAD), (self.size - TAIL, TAIL)))
        self._ahead.end = -1  # the edges are not the start of a sequential pass
        if time.monotonic() > until:
            raise self._expired()

    def preload(self, start: int, data: bytes) -> None:
        """Keep ``data``, the object's bytes from ``start`` (what the open's request brought
        back besides the size: S3's last bytes), as one fetched request; only whole blocks
        are kept (a partial first block is dropped, the object's last block may be short)."""
        end = start + len(data)
        if start < 0 or end > self.size:
            raise PolybagError(f"{self.name}: asked for the last bytes, got bytes {start}..{end} of {self.size}")
        lo = -(-start // BLOCK) * BLOCK
        hi = end if end == self.size else end // BLOCK * BLOCK
        with self._cv:
            self.requests += 1
            self.bytes_fetched += len(data)
            if hi <= lo:
                return
            claimed = self._map.claim(lo // BLOCK, (hi + BLOCK - 1) // BLOCK)
        try:
            self._wview[start:hi] = data[: hi - start]
            if start < lo:  # the bytes of the block before stay: its fetch asks only for the rest
                self._edge = (start, lo)
        except BaseException:
            for s, e in claimed:
                self._map.settle(s, e, False)
            raise
        for s, e in claimed:
            self._map.settle(s, e, True)

    def _multirange(self) -> bool:
        """Whether the transport takes several ranges in one request (HTTP servers that
        answer ``multipart/byteranges``; not S3 or other fsspec stores)."""
        return isinstance(self._fs, HttpRanges) and self._fs.multirange

    # --- fetching -----------------------------------------------------------------------------
    def _sink(self, start: int, end: int) -> memoryview:
        return self._wview[start:end]

    def _upto(self, start: int, end: int) -> int:
        """Where a fetch of ``[start, end)`` has to end: before the bytes of a partly held
        block (:meth:`preload`) when it ends with that block, else ``end``."""
        edge = self._edge
        if edge is not None and end == edge[1] and start < edge[0]:
            return edge[0]
        return end

    def _fetch(self, start: int, end: int, until: float | None = None) -> None:
        """One range request, written into the cache."""
        try:
            if self._closed:
                raise PolybagError(f"{self.name}: source closed")
            upto = self._upto(start, end)
            if isinstance(self._fs, HttpRanges):
                got = self._fs.read_into(start, upto, self._sink, until)
            else:
                try:
                    data = self._fs.cat_file(self._fpath, start=start, end=upto)
                except PolybagError:
                    raise
                except Exception as e:  # noqa: BLE001 - any transport error becomes one clear error
                    raise transport_error(self.url, f"cannot read bytes {start}..{upto}", e) from None
                got = self._store(start, upto, data)
        except BaseException:
            self._map.settle(start, end, False)
            raise
        with self._cv:
            self.requests += 1
            self.bytes_fetched += got
        self._map.settle(start, end, True)

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
                        self._map.settle(s, e, True)
                    held = set(done)
                    todo = [r for r in todo if r not in held]
            elif not isinstance(fs, HttpRanges) and hasattr(fs, "cat_ranges"):
                ends = [self._upto(s, e) for s, e in todo]
                try:
                    datas = fs.cat_ranges([self._fpath] * len(todo), [s for s, _ in todo], ends)
                except Exception as err:  # noqa: BLE001 - any transport error becomes one clear error
                    raise transport_error(self.url, f"cannot read {len(todo)} ranges", err) from None
                for (s, e), upto, data in zip(todo, ends, datas):
                    if isinstance(data, BaseException):
                        raise transport_error(self.url, f"cannot read bytes {s}..{upto}", data)
                    got = self._store(s, upto, data)
                    with self._cv:
                        self.requests += 1
                        self.bytes_fetched += got
                    self._map.settle(s, e, True)
                todo = []
        except BaseException:
            for s, e in todo:
                self._map.settle(s, e, False)
            raise
        for i, (s, e) in enumerate(todo):
            try:
                self._fetch(s, e, until)
            except BaseException:
                for s2, e2 in todo[i + 1 :]:
                    self._map.settle(s2, e2, False)
                raise

    def _ensure(self, spans: list[tuple[int, int]], until: float | None = None) -> None:
        """Fetch what is missing of the block spans and wait for what others are fetching,
        by ``until`` (the operation's deadline, :func:`time.monotonic`)."""
        while True:
            with self._cv:
                todo = [r for b0, b1 in spans for r in self._map.claim(b0, b1)]
                if not todo:
                    if self._map.present(spans):
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
                        self._map.settle(s, e_, False)
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

    def _start_background(self, todo: list[tuple[int, int]]) -> None:
        """Fetch the claimed byte ranges ``todo`` in the background (the read-ahead's)."""
        for s, e in todo:
            try:
                self._pool.submit(self._background, s, e)
            except RuntimeError:  # closed meanwhile
                self._map.settle(s, e, False)

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
