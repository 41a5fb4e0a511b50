"""Fuzz targets of the remote read plans (issue 30): a hostile MCAP or bag read by ranges.

A remote MCAP or bag is read another way than a local one: the log-time merge is planned
from the summary's Chunk Indexes (MCAP) or the index section's chunk infos (bag), chunks are
fetched only when they may hold the next message, an MCAP chunk is walked without its
Message Indexes, and a chunk whose messages lie outside its claimed times re-plans the rest
or is a FormatError.  These targets put each mutated file in fsspec's in-memory filesystem
and open it as ``memory://`` (a :class:`~polybag.io.remote_source.RemoteSource`, so the
remote plans), then do what the file targets do.  Escapes, besides a non-PolybagError:

* a remote read that succeeds without a message the local read of the same bytes gives (when
  both succeed: the remote plan may refuse a lie the local plan puts right; it walks MCAP
  chunks without their Message Indexes, as a streaming reader does, so it may also give a
  message a lying index leaves out), or gives them in another time order;
* fetching more than twice the file (plus the open's edges): the plan follows claims, but
  what it fetches is bounded by the object.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from typing import Any

import polybag
from fuzz.targets import MESSAGE_LIMIT, FileTarget, Stats, _exercise, attempt, flags

#: the open fetches the first 16 KiB and last 64 KiB; reads may fetch each byte twice at most
FETCH_SLACK = 80 << 10


class RemotePlanEscape(Exception):
    """A remote read that answered differently from the local one, or fetched too much."""


def _at(m: tuple[str, int, bytes]) -> int:
    return m[1]


def _messages(r: polybag.Reader, kw: dict[str, Any]) -> list[tuple[str, int, bytes]]:
    return [(m.topic, m.log_time, bytes(m.data)) for m in itertools.islice(r.messages(**kw), MESSAGE_LIMIT)]


class _RemoteTarget(FileTarget):
    ext = ""

    def setup(self) -> None:
        super().setup()
        import fsspec

        self.fs = fsspec.filesystem("memory")

    def run(self, data: bytes, stats: Stats) -> None:
        opts = self.open_options(data)
        f = flags(data)
        name = f"/fuzz-remote/{hashlib.blake2b(data, digest_size=8).hexdigest()}{self.ext}"
        self.fs.pipe(name, data)
        try:
            url = f"memory:/{name}"
            r = attempt(lambda: polybag.open(url, **opts))
            if r is None:
                return
            stats.mark("opened")
            with r:
                kw: dict[str, Any] = {"order": "log_time", "reverse": bool(f & 0x08)}
                s = attempt(lambda: r.summary)
                if f & 0x20 and s is not None and s.start_time is not None and s.end_time is not None:
                    mid = s.start_time + (s.end_time - s.start_time) // 2
                    kw["start"], kw["end"] = mid, mid + max(1, (s.end_time - s.start_time) // 50)
                if f & 0x10 and s is not None and s.channels:
                    kw["topics"] = [next(iter(s.channels.values())).topic]
                remote = attempt(lambda: _messages(r, kw))
                _exercise(r, data, stats)
                got = int((r.fetch_stats or {}).get("bytes_fetched", 0))
            if got > 2 * len(data) + FETCH_SLACK:
                raise RemotePlanEscape(f"fetched {got} bytes of a {len(data)}-byte object")
            if remote is None:
                return
            stats.mark("remote-messages", len(remote))
            local_r = attempt(lambda: polybag.open(data, **opts))
            if local_r is None:
                return
            with local_r:
                local = attempt(lambda: _messages(local_r, kw))
            if local is None or len(local) >= MESSAGE_LIMIT or len(remote) >= MESSAGE_LIMIT:
                return
            lost = Counter(local) - Counter(remote)
            if lost:
                topic, t, _data = next(iter(lost))
                raise RemotePlanEscape(
                    f"the remote read gave {len(remote)} messages, the local read {len(local)}: "
                    f"{sum(lost.values())} of the local ones missing remotely (first: {topic} at {t})"
                )
            if sorted(local, key=_at) != local or sorted(remote, key=_at) != remote:
                return  # (reverse or equal times: only what both hold is compared)
            held = set(local)
            common = [m for m in remote if m in held]
            if [m[1] for m in common] != [m[1] for m in local]:
                raise RemotePlanEscape("the remote read gave the local messages in another time order")
        finally:
            self.fs.rm(name)


class McapRemote(_RemoteTarget):
    name = "mcap_remote"
    fmt = "mcap"
    ext = ".mcap"
    doc = "MCAP read by ranges (memory://): log-time plans from lying Chunk Indexes; equal to the local read, fetch bounded"


class BagRemote(_RemoteTarget):
    name = "bag_remote"
    fmt = "bag"
    ext = ".bag"
    doc = "ROS bags read by ranges (memory://): log-time plans from lying chunk infos; equal to the local read, fetch bounded"


TARGETS = [McapRemote, BagRemote]
