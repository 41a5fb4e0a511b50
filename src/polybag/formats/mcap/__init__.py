"""MCAP: records (one class per spec table), an indexed and streamed reader, a writer.

The reader and the writer are imported on first use of their names here, so that writing
an MCAP file (``convert`` bag -> MCAP) does not import the reader's modules, and reading
one does not import the writer's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polybag.formats.mcap.reader import McapReader, open_mcap
    from polybag.formats.mcap.writer import McapWriter

__all__ = ["McapReader", "McapWriter", "open_mcap"]

_WHERE = {
    "McapReader": "polybag.formats.mcap.reader",
    "open_mcap": "polybag.formats.mcap.reader",
    "McapWriter": "polybag.formats.mcap.writer",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(where), name)
