"""MCAP: records (one class per spec table), an indexed and streamed reader, a writer."""

from polybag.formats.mcap.reader import McapReader, open_mcap
from polybag.formats.mcap.writer import McapWriter

__all__ = ["McapReader", "McapWriter", "open_mcap"]
