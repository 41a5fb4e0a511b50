"""The index values of an MCAP file: what its summary section holds (:class:`SummaryIndex`),
what a linear scan of the top-level records found (:class:`ScanIndex`), and the array
layout of the summary's Chunk Indexes (:data:`CHUNK_INDEX_DTYPE`, made by :func:`chunk_index_array`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from polybag.formats.mcap import records as R

CHUNK_INDEX_DTYPE = np.dtype(
    [
        ("start", "<u8"),
        ("end", "<u8"),
        ("offset", "<u8"),
        ("length", "<u8"),
        ("mi_length", "<u8"),
        ("compressed_size", "<u8"),
        ("uncompressed_size", "<u8"),
    ]
)


def chunk_index_array(cis: list[R.ChunkIndex]) -> np.ndarray:
    """The Chunk Indexes' numbers as one ``CHUNK_INDEX_DTYPE`` array (for vectorised planning)."""
    arr = np.zeros(len(cis), CHUNK_INDEX_DTYPE)
    if cis:
        arr["start"] = [c.message_start_time for c in cis]
        arr["end"] = [c.message_end_time for c in cis]
        arr["offset"] = [c.chunk_start_offset for c in cis]
        arr["length"] = [c.chunk_length for c in cis]
        arr["mi_length"] = [c.message_index_length for c in cis]
        arr["compressed_size"] = [c.compressed_size for c in cis]
        arr["uncompressed_size"] = [c.uncompressed_size for c in cis]
    return arr


@dataclass
class ScanIndex:
    """What a linear scan of the top-level records of a mapped file found."""

    chunks: list[tuple[int, int, int, int]] = field(default_factory=list)  # (offset, length, start, end)
    chunk_ranks: list[int] = field(default_factory=list)
    loose: list[tuple[int, int, int, list[int]]] = field(default_factory=list)  # (rank, start, end, offsets)
    attachments: list[int] = field(default_factory=list)
    metadata: list[int] = field(default_factory=list)
    data_end: int | None = None
    footer: int | None = None
    statistics: R.Statistics | None = None


@dataclass
class SummaryIndex:
    """The indexes and statistics of a summary section (its definitions are registered as it
    is read); ``chunk_index_array``: the Chunk Indexes' numbers as one ``CHUNK_INDEX_DTYPE`` array."""

    chunk_indexes: list[R.ChunkIndex] = field(default_factory=list)
    chunk_index_array: np.ndarray | None = None
    attachment_indexes: list[R.AttachmentIndex] = field(default_factory=list)
    metadata_indexes: list[R.MetadataIndex] = field(default_factory=list)
    summary_offsets: list[R.SummaryOffset] = field(default_factory=list)
    statistics: R.Statistics | None = None
