"""Opening an MCAP file or stream: the magic, the Header record, and the summary section
(footer -> :func:`~polybag.formats.mcap.summary_section.load_summary`), read into the
reader's :class:`~polybag.formats.mcap.context.McapContext` (its Schema/Channel copies into
the :class:`~polybag.formats.mcap.definitions.McapDefinitions`).
"""

from __future__ import annotations

import gc

from polybag.errors import ChecksumError, FormatError, PolybagError, TruncatedError, UnsupportedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.index import SummaryIndex
from polybag.formats.mcap.records import MAGIC, RECORD_HEAD
from polybag.formats.mcap.summary_section import load_summary, read_footer
from polybag.formats.mcap.vocabulary import OP_HEADER
from polybag.io.source import MappedSource, StreamSource


def check_magic(ctx: McapContext, head: bytes) -> None:
    """Raise unless ``head`` is the MCAP magic of a supported version."""
    if len(head) < 8:
        if MAGIC.startswith(head):
            raise ctx.err(TruncatedError, f"expected 8 bytes of MCAP magic, file has {len(head)}", 0)
        raise ctx.err(FormatError, f"not an MCAP file: starts with {head!r}", 0)
    if head[:5] != MAGIC[:5]:
        raise ctx.err(FormatError, f"not an MCAP file: starts with {head!r}", 0)
    if head != MAGIC:
        raise UnsupportedError(f"{ctx.path}: MCAP major version {chr(head[5])!r} is not supported (only '0')")


def open_mapped(ctx: McapContext, defs: McapDefinitions) -> None:
    """Read the magic, the Header and (unless recovering) the summary section of a mapped file."""
    src = ctx.source
    assert isinstance(src, MappedSource)
    check_magic(ctx, bytes(src.view[:8]))
    pos = 8
    if src.size < pos + 9:
        if ctx.recover:
            return
        raise ctx.err(TruncatedError, "expected a Header record after the magic", pos)
    op, ln = RECORD_HEAD.unpack_from(src.view, pos)
    if op != OP_HEADER:
        if not ctx.recover:
            raise ctx.err(FormatError, f"expected a Header record (opcode 0x01), found opcode 0x{op:02x}", pos)
    elif ln > src.size - pos - 9:
        if not ctx.recover:
            raise ctx.err(TruncatedError, f"Header declares {ln} bytes, file has {src.size - pos - 9} left", pos)
    else:
        src.need(pos, 9 + ln)
        try:
            rec = R.parse_record(op, src.view, pos + 9, pos + 9 + ln, ctx.path, 0)
        except FormatError as e:
            if not ctx.recover:
                raise
            ctx.recovery.note(str(e))  # a damaged Header only loses profile/library
        else:
            assert isinstance(rec, R.Header)
            ctx.header = rec
        ctx.header_end = pos + 9 + ln
    if not ctx.recover:
        read_summary_or_scan(ctx, defs)
    else:
        src.need_all()  # recovery reads the whole file
        _borrow_summary_definitions(ctx, defs)


def open_stream(ctx: McapContext) -> bytes:
    """Read the magic and the Header of a stream; the Header record as read (empty: none)."""
    src = ctx.source
    assert isinstance(src, StreamSource)
    check_magic(ctx, src.read(8))
    head = src.peek(9)
    if len(head) < 9:
        if ctx.recover:
            return b""
        raise ctx.err(TruncatedError, "expected a Header record after the magic", 8)
    op, ln = RECORD_HEAD.unpack_from(head, 0)
    if op != OP_HEADER:
        if not ctx.recover:
            raise ctx.err(FormatError, f"expected a Header record (opcode 0x01), found opcode 0x{op:02x}", 8)
        return b""
    src.read(9)
    body = src.read_exact(ln, "Header record")
    rec = R.parse_as(R.Header, op, body, 0, ln, ctx.path, 17)
    ctx.header = rec
    return RECORD_HEAD.pack(op, ln) + body


def read_summary_or_scan(ctx: McapContext, defs: McapDefinitions) -> None:
    """Read the summary; one that does not parse is ignored (the data is scanned instead)."""
    was = gc.isenabled()
    gc.disable()  # many small index objects: the cyclic collector would rescan them all
    try:
        _read_summary(ctx, defs)
    except FormatError as e:
        # messages are then found by a scan; a CRC mismatch is raised after them
        ctx.summary_error = str(e)
        if isinstance(e, ChecksumError):
            ctx.summary_crc_error = e
        _forget_summary(ctx, defs)
    finally:
        if was:
            gc.enable()


def _borrow_summary_definitions(ctx: McapContext, defs: McapDefinitions) -> None:
    """Recovering: keep the summary's Schema/Channel copies (if they read), nothing else.

    A damaged data section may have lost a Channel record that the summary repeats.
    """
    try:
        _read_summary(ctx, defs)
    except PolybagError:
        _forget_summary(ctx, defs)
    ctx.has_summary = False
    ctx.index = SummaryIndex()


def _forget_summary(ctx: McapContext, defs: McapDefinitions) -> None:
    """A summary section that did not parse: none of it is used, not even its definitions."""
    ctx.has_summary = False
    defs.schemas.clear()
    defs.channels.clear()
    defs.channel_records.clear()
    ctx.index = SummaryIndex()


def _read_summary(ctx: McapContext, defs: McapDefinitions) -> None:
    """Footer -> summary section (:func:`~polybag.formats.mcap.summary_section.load_summary`);
    leaves ``has_summary`` False when there is none."""
    src = ctx.source
    assert isinstance(src, MappedSource)
    footer = ctx.footer = read_footer(src, ctx.header_end)
    if footer is None or footer.summary_start == 0:
        return

    def define_copy(view: memoryview, op: int, pos: int, e: int) -> None:
        defs.define(view, op, pos, e, 0, summary=True)

    index = load_summary(src, ctx.path, footer, ctx.header_end, ctx.validate_crcs, define_copy)
    ctx.index = index
    ctx.has_summary = True
    st = ctx.index.statistics
    if st is not None and defs.channel_records and (
        st.channel_count > len(defs.channel_records) or (defs.schemas and st.schema_count > len(defs.schemas))
    ):
        # more Channel (Schema) records were written than the summary has ids: some id
        # was defined twice, or the summary is incomplete; the data section decides
        defs.need_timeline = True
