"""Structural check of a bag: every record, every chunk, the index against the data."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from polybag.codecs.ros1 import compute_md5
from polybag.errors import PolybagError
from polybag.model import Channel
from polybag.source import MappedSource

from .reader import open_bag
from .reader_v2 import BagV2Reader, parse_chunk_records


def md5_problems(path: str, channels: Iterable[Channel], kind: str = "channel") -> list[dict[str, Any]]:
    """md5sum mismatches of ``ros1`` channels (bag connections, MCAP ros1 channels).

    Each problem is ``{"message": ..., "offset": ...}``: the offset of the channel's
    record when the channel object carries one (a ``record_offset`` attribute), else
    ``None``; the message always names the channel id and topic.
    """
    out: list[dict[str, Any]] = []
    for ch in channels:
        if ch.message_encoding != "ros1" or ch.schema is None or not ch.schema.data:
            continue
        want = str(ch.metadata.get("md5sum", ""))
        if want in ("", "*"):
            continue
        off = getattr(ch, "record_offset", None)
        where = f"{kind} {ch.id} ({ch.topic})"
        try:
            got = compute_md5(ch.type_name, bytes(ch.schema.data).decode("utf-8", "replace"))
        except Exception as e:  # a definition the codec cannot parse
            out.append({"message": f"{path}: {where}: definition of {ch.type_name} does not parse: {e}", "offset": off})
            continue
        if got != want:
            out.append(
                {
                    "message": f"{path}: {where}: md5sum {want} does not match the definition "
                    f"of {ch.type_name} (computes to {got})",
                    "offset": off,
                }
            )
    return out


def check_bag(path: str) -> dict[str, Any]:
    """``{"problems": [...], "notes": [...], "messages": n, "version": v}``; problems name offsets."""
    problems: list[Any] = []
    notes: list[str] = []
    src = MappedSource.from_path(path)
    try:
        r = open_bag(src, path, verify_checksums=True)
    except PolybagError as e:
        src.close()
        return {"problems": [str(e)], "notes": notes, "messages": 0, "version": "?"}
    n = 0
    try:
        try:
            for _m in r.messages(order="file"):
                n += 1
        except PolybagError as e:
            problems.append(str(e))
        _m = None  # the last message holds its chunk: release it before the checks below decompress again
        s = r.summary
        for e in s.extras.get("errors", []):
            if e not in problems:
                problems.append(e)
        if isinstance(r, BagV2Reader):
            _check_v2(r, problems, notes)
        else:
            mism = s.extras.get("index_mismatch")
            if mism:
                for topic, (want, got) in mism.items():
                    problems.append(f"{path}: index data says {want} messages on {topic}, the file holds {got}")
            notes.append(f"bag version {r.version}: no chunks or index to cross-check beyond the records")
        problems.extend(md5_problems(path, s.channels.values(), "connection"))
        return {"problems": problems, "notes": notes, "messages": n, "version": r.version}
    finally:
        r.close()


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
            buf = r._chunk_buffer(ci)
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
            r._chunk_index(ci, fallback=False)
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


_OFFSET_RE = re.compile(r"\boffset (\d+)")


def check_any(path: str) -> dict[str, Any]:
    """Any format polybag reads: iterate everything, report what fails."""
    import polybag

    problems: list[str | dict[str, Any]] = []
    n = 0
    try:
        with polybag.open(path) as r:
            s = r.summary
            try:
                for _m in r.messages(order="file"):
                    n += 1
            except PolybagError as e:
                problems.append(str(e))
            try:
                for _a in r.attachments():
                    pass
                for _md in r.metadata():
                    pass
            except PolybagError as e:
                problems.append(str(e))
            if s.indexed and s.message_count and s.message_count != n:
                problems.append(f"{path}: summary counts {s.message_count} messages, reading found {n}")
            # MCAP: a Schema/Channel id defined twice with different content (read as written,
            # but the spec forbids it and other readers give every message one of the two)
            problems.extend(getattr(r, "definition_problems", ()))
            problems.extend(md5_problems(path, s.channels.values()))
            fmt = s.format
    except PolybagError as e:
        problems.append(str(e))
        fmt = "?"
    notes: list[str] = []
    if problems and fmt != "?":
        _all_damage(path, problems, notes)
    return {"problems": problems, "notes": notes, "messages": n, "format": fmt}


def _all_damage(path: str, problems: list[str | dict[str, Any]], notes: list[str]) -> None:
    """A strict read stops at the first damage; a second pass in recovery mode lists every
    damaged place (the reader's ``recovery_report``) in place of that first one."""
    import warnings

    import polybag

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with polybag.open(path, recover=True) as r:
                m = sum(1 for _ in r.messages(order="file"))
                report = getattr(r, "recovery_report", None) or {}
    except PolybagError:
        return  # nothing more to learn than the strict read's error
    errors = [str(e) for e in report.get("errors", ())]
    if len(errors) > 1:
        first = str(problems[0])
        where = _OFFSET_RE.search(first)
        # the strict read's error is one of the damaged places: keep its wording, add the rest
        rest = [e for e in errors if where is None or f"offset {where.group(1)}:" not in e]
        problems[1:1] = [f"{path}: {e}" for e in rest]
    notes.append(f"recovery mode reads {m} messages past the damage ({report.get('bytes_skipped', 0)} bytes skipped)")
