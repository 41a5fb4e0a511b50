"""The definitions section of a ULog being written: :class:`DefinitionsSection`, owned by
:class:`~polybag.formats.ulog.writer.UlogWriter`, holds the formats, info, multi-info,
parameters, default parameters and compat flags, and packs them (with the header and flag
bits) on close.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from polybag.codecs.ulog import FormatDef, nested_formats, parse_format
from polybag.errors import WriteError
from polybag.formats.ulog import records as rec
from polybag.writer import check_open


class DefinitionsSection:
    """What a ULog writer puts before the data.  ``closed``: the writer is closed (every
    addition is refused)."""

    def __init__(self, compat_flags: list[int]) -> None:
        self.closed = False
        self.compat_flags = compat_flags
        self.formats: dict[str, FormatDef] = {}
        self.info: dict[str, tuple[str, Any]] = {}
        self.info_multiple: list[tuple[str, str, list[Any]]] = []
        self.params: dict[str, Any] = {}
        self.default_params: dict[str, tuple[int, Any]] = {}

    def add_format(self, text: str | FormatDef) -> FormatDef:
        """Register a message format (``name:type field;...``)."""
        check_open(self.closed)
        try:
            fmt = parse_format(text) if isinstance(text, str) else text
        except ValueError as e:
            raise WriteError(str(e)) from None
        old = self.formats.get(fmt.name)
        if old is not None and old != fmt:
            raise WriteError(f"format {fmt.name} is already defined differently")
        self.formats[fmt.name] = fmt
        return fmt

    def add_info(self, key: str, value: Any, type: str | None = None) -> None:  # noqa: A002
        """An ``I`` message; the type is inferred (strings char[n], ints int32, floats float)."""
        check_open(self.closed)
        self.info[key] = (type or rec.info_type_for(value), value)

    def add_info_multiple(self, key: str, values: Sequence[Any], type: str | None = None) -> None:  # noqa: A002
        """One multi-info entry: ``values`` are written as one message and its continuations."""
        check_open(self.closed)
        if not values:
            return
        self.info_multiple.append((key, type or rec.info_type_for(values[0]), list(values)))

    def add_param(self, name: str, value: int | float) -> None:
        check_open(self.closed)
        self.params[name] = value

    def add_default_param(self, name: str, value: int | float, default_types: int = 1) -> None:
        """A ``Q`` message; ``default_types`` bit 0: system default, bit 1: current setup."""
        check_open(self.closed)
        old = self.default_params.get(name)
        if old is not None and old[1] == value and type(old[1]) is type(value):
            default_types |= old[0]
        elif old is not None:
            # a different value for another default type: keep both as separate messages
            self.default_params[f"{name}\0{default_types}"] = (default_types, value)
            return
        self.default_params[name] = (default_types, value)
        self.compat_flags[0] |= rec.COMPAT_DEFAULT_PARAMETERS

    def add_format_extras(self, name: str, metadata: Mapping[str, str]) -> bool:
        """The ``ulog_info`` / ``ulog_params`` / ``ulog_default_params_<bit>`` metadata
        records of a ULog converted to MCAP, back into info, parameter and default
        parameter messages (integers stay integers; values that are no number are left
        out of the parameters); True when ``name`` is one of them (see
        :meth:`polybag.writer.Writer.add_format_extras`)."""
        if name == "ulog_info":
            for k, v in metadata.items():
                num = _number(v) if re.fullmatch(r"-?\d+", v or "") else None
                self.add_info(k, num if num is not None else v)
            return True
        if name == "ulog_params":
            for k, v in metadata.items():
                num = _number(v)
                if num is not None:
                    self.add_param(k, num)
            return True
        m = re.fullmatch(r"ulog_default_params_(\d+)", name)
        if m is not None:
            for k, v in metadata.items():
                num = _number(v)
                if num is not None:
                    self.add_default_param(k, num, int(m.group(1)))
            return True
        return False

    def copy_definitions(self, ulog: Any) -> None:
        """Info, multi-info, parameters and defaults of ``ulog`` (a read log or anything with
        those dicts), and its compat flags or-ed into this writer's."""
        for k, v in ulog.info.items():
            self.add_info(k, v, ulog.info_types.get(k))
        for k, sets in ulog.info_multiple.items():
            typ = ulog.info_multiple_types.get(k)
            for vs in sets:
                self.add_info_multiple(k, vs, typ)
        for k, v in ulog.params.items():
            self.add_param(k, v)
        for bit, d in sorted(ulog.default_params.items()):
            for k, v in d.items():
                self.add_default_param(k, v, 1 << bit)
        self.compat_flags = [a | b for a, b in zip(self.compat_flags, ulog.compat_flags)]

    def pack(self, version: int, start_timestamp: int) -> bytes:
        """The file header (``version``, ``start_timestamp`` in us), the flag bits and the
        definitions section."""
        parts: list[bytes] = []
        parts.append(rec.FileHeader(version, max(0, int(start_timestamp))).pack())
        parts.append(rec.FlagBits(self.compat_flags, [0] * 8, []).pack())
        written: set[str] = set()
        for name in self.formats:
            for fmt in reversed(nested_formats(name, self.formats)):
                if fmt.name not in written:
                    written.add(fmt.name)
                    parts.append(rec.pack_message(rec.FORMAT, fmt.text().encode("utf-8")))
        for key, (typ, value) in self.info.items():
            parts.append(rec.pack_info(rec.INFO, typ, key, value))
        for key, typ, values in self.info_multiple:
            for i, v in enumerate(values):
                parts.append(rec.pack_info(rec.INFO_MULTIPLE, typ, key, v, bytes([1 if i else 0])))
        for name, value in self.params.items():
            parts.append(rec.pack_info(rec.PARAMETER, rec.param_type_for(value), name, value))
        for name, (types, value) in self.default_params.items():
            parts.append(
                rec.pack_info(
                    rec.PARAMETER_DEFAULT,
                    rec.param_type_for(value),
                    name.split("\0")[0],
                    value,
                    bytes([types]),
                )
            )
        return b"".join(parts)


def _number(text: str) -> int | float | None:
    """``text`` as an int, else as a float, else None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None

