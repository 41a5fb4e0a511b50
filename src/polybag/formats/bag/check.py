"""Structural check of a bag: every record, every chunk, the index against the data.

The check of any format polybag reads is :func:`polybag.ops.check.check_any`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polybag.codecs.checks import md5_problems
from polybag.errors import PolybagError
from polybag.io.remote import open_url
from polybag.io.source import MappedSource
from polybag.io.urls import is_url
from polybag.model import Message

from .chunks import parse_chunk_records
from .reader import open_bag
from .reader_v2 import BagV2Reader


def check_bag(path: str) -> dict[str, Any]:
    """``{"problems": [...], "notes": [...], "messages": n, "version": v}``; problems name offsets."""
    problems: list[Any] = []
    notes: list[str] = []
    if is_url(path):  # a remote bag: checked whole (every record is read)
        src: MappedSource = open_url(path)
        src.need_all()
    else:
        src = MappedSource.from_path(path)
    try:
        r = open_bag(src, path, verify_checksums=True)
        if isinstance(r, BagV2Reader):
            # every chunk record the index points at, checked before the read (as at open
            # before headers were read lazily): an index that lies is not used
            r.load_headers()
    except PolybagError as e:
        src.close()
        return {"problems": [str(e)], "notes": notes, "messages": 0, "version": "?"}
    n = 0
    try:
        _m: Message | None = None
        try:
            for _m in r.messages(order="file"):
                n += 1
        except PolybagError as e:
            problems.append(str(e))
        _m = None  # the last message holds its chunk: release it before the checks below decompress again
        s = r.summary
        for err in s.extras.get("errors", []):
            if err not in problems:
                problems.append(err)
        if isinstance(r, BagV2Reader):
            _check_v2(r, problems, notes)
        else:
            mism = s.extras.get("index_mismatch")
            if mism:
                for topic, (want, got) in mism.items():
                    problems.append(f"{path}: index data says {want} messages on {topic}, the file holds {got}")
            notes.append(f"bag version {r.version}: no chunks or index to cross-check beyond the records")
        problems.extend(md5_problems(path, s.channels.values(), "connection"))
        return {"problems": _once(problems), "notes": notes, "messages": n, "version": r.version}
    finally:
        r.close()


def _once(problems: list[Any]) -> list[Any]:
    """``problems`` with each one given once (the read and the chunk check meet the same
    damaged chunk: one report of it), in their order."""
    seen: set[str] = set()
    out = []
    for p in problems:
        key = repr(sorted(p.items())) if isinstance(p, dict) else str(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _check_v2(r: BagV2Reader, problems: list[str], notes: list[str]) -> None:
    p = r.path
    if not r.indexed:
        problems.append(f"{p}: bag is unindexed or its index is unusable ({r.index_problem}); run `polybag reindex`")
        return
    prev_end = r.data_start
    for ci in sorted(r.chunks, key=lambda c: c.pos):
        if ci.pos != prev_end:
            notes.append(f"{p}: offset {prev_end}: {ci.pos - prev_end} bytes between records before the chunk at {ci.pos}")
        try:
            buf = r.loader.buffer(ci)
        except PolybagError as e:
            problems.append(str(e))
            prev_end = ci.pos + ci.record_len
            continue
        conns: dict[int, Any] = dict(r.conns)
        t, c, o, _d, _l, err, _end = parse_chunk_records(buf, ci.data_start, p, conns)
        if err is not None:
            problems.append(f"inside chunk at {ci.pos}: {err}")
        try:
            ci.dstart = ci.dlen = None
            r.loader.read_index_data(ci, r.conns, fallback=False)
        except PolybagError as e:
            problems.append(str(e))
            continue
        prev_end = ci.index_end
        assert ci.times is not None and ci.conns is not None and ci.offsets is not None
        actual = set(zip(c, t, o))
        indexed = set(zip(ci.conns.tolist(), ci.times.tolist(), ci.offsets.tolist()))
        if actual != indexed:
            miss = sorted(actual - indexed)[:3]
            extra = sorted(indexed - actual)[:3]
            problems.append(
                f"{p}: offset {ci.pos}: chunk index data disagrees with the chunk's records "
                f"({len(actual - indexed)} records not indexed, e.g. {miss}; {len(indexed - actual)} index entries "
                f"point at no matching record, e.g. {extra})"
            )
        if t:
            tmin, tmax = min(t), max(t)
            if tmin != ci.start or tmax != ci.end:
                problems.append(
                    f"{p}: offset {ci.pos}: chunk info times {ci.start}..{ci.end} but its messages span {tmin}..{tmax}"
                )
            u, k = np.unique(np.array(c, np.int64), return_counts=True)
            counts = dict(zip(u.tolist(), k.tolist()))
            if counts != ci.counts:
                problems.append(f"{p}: offset {ci.pos}: chunk info counts {ci.counts} but the chunk holds {counts}")
            for cid in counts:
                if cid not in r.conns:
                    problems.append(f"{p}: offset {ci.pos}: messages of connection {cid}, which has no connection record")
    if r.index_pos != prev_end and r.chunks:
        notes.append(f"{p}: offset {prev_end}: {r.index_pos - prev_end} bytes between the last chunk and the index")
