"""``recover``: rebuild a valid, indexed log from a damaged one (MCAP, bag, ULog).

The input is opened with ``recover=True`` (indexes it cannot trust are ignored, the data is
scanned linearly, damage is skipped), every intact message is written through a fresh
writer (new indexes, atomic rename), then the output is read back and compared (message
count and a CRC of every topic, time and payload) before success is claimed.

``messages_lost`` is known when the damaged file still has an index or summary that
declares its message count; ``bytes_lost`` is what the reader had to skip.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import polybag
from polybag.errors import PolybagError, UnknownFormatError
from polybag.model import Message
from polybag.ops.batch import name_once
from polybag.ops.copying import CopyJob, CopyResult
from polybag.ops.inputs import input_name
from polybag.ops.options import Input, PathLike, WriteOptions, Writing, is_path
from polybag.ops.outputs import check_output, target_format
from polybag.reader import Reader

if TYPE_CHECKING:
    from typing_extensions import Unpack


@dataclass
class RecoverResult(CopyResult):
    input: str = ""
    format: str = ""
    messages_expected: int | None = None
    messages_lost: int | None = None
    bytes_total: int = 0
    bytes_kept: int = 0
    bytes_lost: int = 0
    errors: list[str] = field(default_factory=list)
    verified: bool = False

    @property
    def lost_anything(self) -> bool:
        return bool(self.bytes_lost or self.messages_lost or self.errors)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["lost_anything"] = self.lost_anything
        return d


def _declared_count(src: Input) -> int | None:
    """The message count the damaged file's own index declares, if it has a usable one."""
    if isinstance(src, Reader):
        return None
    import warnings

    try:
        with warnings.catch_warnings():  # (what a plain read would warn of: the recovery reports it)
            warnings.simplefilter("ignore")
            r = polybag.open(src)
        with r:
            s = r.summary
            if s.indexed and s.message_counts:
                return int(s.message_count)
    except (PolybagError, OSError, ValueError):
        return None
    return None


def _open_damaged(src: PathLike | BinaryIO) -> Reader:
    """``polybag.open(src, recover=True)``; a damaged magic falls back on the file extension
    (a stream has none: its error stands)."""
    try:
        return polybag.open(src, recover=True)
    except UnknownFormatError:
        from polybag.writer import format_for_path

        if not is_path(src):
            raise
        fmt = format_for_path(src)
        return polybag.open(src, format=fmt, recover=True)


def _digest(crc: int, m: Message, data: Any) -> int:
    crc = zlib.crc32(m.channel.topic.encode(), crc)
    crc = zlib.crc32(m.log_time.to_bytes(8, "little", signed=True), crc)
    return zlib.crc32(data, crc)


def recover(
    src: Input,
    dst: PathLike,
    **options: Unpack[WriteOptions],
) -> RecoverResult:
    """Copy every intact message of ``src`` into a fresh ``dst`` and verify it (an existing
    ``dst`` only with ``overwrite``; never the input; nothing is left behind on failure)."""
    w = Writing.of("recover", options)
    check_output(dst, [src], w.overwrite)
    result = RecoverResult(input=input_name(src), output=str(dst))
    result.messages_expected = _declared_count(src)
    own = not isinstance(src, Reader)
    reader = src if isinstance(src, Reader) else _open_damaged(src)
    try:
        result.format = reader.format
        fmt = target_format(dst, w.format)
        result.bytes_total = reader.source_size
        written, crc, plain = _copy_intact(reader, dst, fmt, w, result)
        report = reader.recovery_report
        result.bytes_lost = int(report.get("bytes_skipped", 0) or 0) if report else 0
        # each damage line names the file (a format's report may give only the offset)
        name = str(reader.path or result.input)
        result.errors.extend(name_once(name, str(e)) for e in (report.get("errors", []) if report else []) or [])
    finally:
        if own:
            reader.close()

    # re-read our own output before claiming anything
    _verify(dst, written, crc, plain, result)
    return result


def _copy_intact(
    reader: Reader, dst: PathLike, fmt: str, w: Writing, result: RecoverResult
) -> tuple[int, int, bool]:
    """Copy the intact messages, attachments and metadata of ``reader`` into ``dst``;
    returns ``(messages written, CRC of them, whether they were copied unchanged)``."""
    try:
        channels = list(reader.summary.channels.values())
    except PolybagError as e:
        result.errors.append(f"summary: {e}")
        channels = []
    crc = 0
    plain = True
    with CopyJob(dst, fmt, result, [reader], channels, w.compression, w.chunk_size, w.overwrite, storage=w.storage) as job:

        def digest(m: Message) -> None:
            nonlocal crc, plain
            ent = job.cmap._by_obj.get(id(m.channel))
            if ent is not None and ent[2] is not None:
                plain = False
            crc = _digest(crc, m, m.data)

        def safe(msgs: Any) -> Any:
            try:
                yield from msgs
            except PolybagError as e:  # a reader that still raised: keep what came before
                result.errors.append(str(e))

        msgs = job.with_ulog_extras(reader, reader.messages(order="file"))
        total = result.messages_expected or 0
        written = job.copy(safe(msgs), total, f"recover {result.input}", w.progress, on_message=digest)
        try:
            result.attachments, _, result.metadata, _ = job.copy_extras(reader)
        except PolybagError as e:
            result.errors.append(f"attachments/metadata: {e}")
    return written, crc, plain


def _verify(dst: PathLike, written: int, crc: int, plain: bool, result: RecoverResult) -> None:
    """Read ``dst`` back and compare it with what was written (count, and the CRC when the
    messages were copied unchanged); then fill in what was kept and lost."""
    n = 0
    crc2 = 0
    with polybag.open(dst) as out:
        for m in out.messages(order="file"):
            n += 1
            crc2 = _digest(crc2, m, m.data)
    result.messages = n
    if written and n != written:
        raise PolybagError(f"{dst}: wrote {written} messages but read back {n}")
    if plain and written and crc2 != crc:
        raise PolybagError(f"{dst}: the messages read back differ from those written")
    result.verified = True
    result.bytes_kept = max(0, result.bytes_total - result.bytes_lost)
    if result.messages_expected is not None:
        result.messages_lost = max(0, result.messages_expected - n)
    if result.lost_anything:
        result.warn(
            f"data lost: {result.bytes_lost} bytes skipped"
            + (
                f", {result.messages_lost} of {result.messages_expected} messages"
                if result.messages_lost
                else ""
            )
        )
