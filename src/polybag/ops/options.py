"""What an operation is called with: its inputs and outputs, and the writing options.

``**options: Unpack[WriteOptions]`` is the keyword signature of every operation that writes
logs; :meth:`Writing.of` checks the keywords and fills in their defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, TypedDict

from polybag.reader import Reader

if TYPE_CHECKING:
    from typing_extensions import TypeIs

PathLike = str | os.PathLike[str]
Input = PathLike | Reader | BinaryIO
Output = PathLike | BinaryIO


def is_path(target: object) -> TypeIs[str | os.PathLike[str]]:
    """Whether an input or output is named by a path (not a reader or an open file)."""
    return isinstance(target, (str, os.PathLike))


class WriteOptions(TypedDict, total=False):
    """The keywords every operation that writes logs takes (``**options: Unpack[WriteOptions]``).

    ``format``: the output format (default: from the extension); ``compression``,
    ``chunk_size``: the writer's chunking (the format's defaults); ``progress``: a progress
    bar (None: only on a terminal); ``overwrite``: replace an existing output (refused
    otherwise; an input never is); ``storage``: a rosbag2 output's storage (``sqlite3`` or
    ``mcap``); ``strict``: refuse a damaged input (no output) instead of writing every
    message read before the damage and reporting it
    (:func:`polybag.ops.inputs.open_input`)."""

    format: str | None
    compression: str | None
    chunk_size: int | None
    progress: bool | None
    overwrite: bool
    storage: str | None
    strict: bool


@dataclass(frozen=True)
class Writing:
    """:class:`WriteOptions` with their defaults filled in, as attributes."""

    format: str | None = None
    compression: str | None = None
    chunk_size: int | None = None
    progress: bool | None = False
    overwrite: bool = False
    storage: str | None = None
    strict: bool = False

    @classmethod
    def of(cls, operation: str, options: Mapping[str, Any]) -> Writing:
        """The options an operation was called with (a TypeError names any unknown keyword,
        as for any function)."""
        for k in options:
            if k not in WriteOptions.__annotations__:
                raise TypeError(f"{operation}() got an unexpected keyword argument {k!r}")
        return cls(**options)
