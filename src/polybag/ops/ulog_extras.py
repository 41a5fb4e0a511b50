"""A ULog's extras (its info, parameters, their changes and dropouts) carried into an
output: kept by a writer that holds them (a ULog), as metadata records where the output
holds those (MCAP), and otherwise named in a warning."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from polybag.formats import registry
from polybag.model import Message


def _str(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def ulog_metadata_records(
    info: dict[str, Any], params: dict[str, Any], default_params: dict[int, dict[str, Any]]
) -> dict[str, dict[str, str]]:
    """The MCAP metadata records of a ULog's info and parameters: ``ulog_info``,
    ``ulog_params`` and ``ulog_default_params_<bit>`` (empty ones left out)."""
    records = {
        "ulog_info": {k: _str(v) for k, v in info.items()},
        "ulog_params": {k: _str(v) for k, v in params.items()},
    }
    for bit, d in sorted(default_params.items()):
        records[f"ulog_default_params_{bit}"] = {k: _str(v) for k, v in d.items()}
    return {name: md for name, md in records.items() if md}


def ulog_metadata_to(
    writer: Any,
    fmt: str,
    info: dict[str, Any],
    params: dict[str, Any],
    default_params: dict[int, dict[str, Any]],
    has_changes: bool,
    result: Any,
) -> int:
    """A ULog's definitions for a target that does not keep them itself: a format whose
    files hold metadata records (:attr:`~polybag.formats.registry.FormatSpec.holds_metadata`:
    MCAP) gets those of :func:`ulog_metadata_records`; what a target cannot hold (a bag's
    info and parameters, anyone's parameter changes and dropouts) is reported as a warning
    on ``result``.  Returns the estimated size on disk of what was written."""
    size = 0
    if registry.get(fmt).holds_metadata:
        for name, md in ulog_metadata_records(info, params, default_params).items():
            writer.add_metadata(name, md)
            result.metadata += 1
            size += 64 + len(name) + sum(len(k) + len(v) + 8 for k, v in md.items())
    else:
        lost = [n for n, d in (("info", info), ("parameters", params)) if d]
        if lost:
            result.warn(f"{fmt} files cannot hold the ULog's {' and '.join(lost)}; not copied")
    if has_changes:
        result.warn(f"{fmt} files have no place for ULog parameter changes and dropouts; not copied")
    return size


def ulog_extras(
    reader: Any, writer: Any, fmt: str, result: Any, messages: Iterable[Message]
) -> Iterator[Message]:
    """Carry a ULog's extras over (the logged strings are messages on the reader's log channel).

    ULog -> ULog: info, multi-info, parameters, defaults, parameter changes and dropouts are
    copied by the ULog writer.  ULog -> MCAP: info and parameters become metadata records
    ``ulog_info``/``ulog_params``/``ulog_default_params_<bit>``.  What the target cannot hold
    is reported as a warning.
    """
    u = reader.ulog
    if registry.get(fmt).keeps_ulog_extras:
        writer.copy_extras(u)
    else:
        ulog_metadata_to(
            writer, fmt, u.info, u.params, u.default_params,
            bool(u.changed_params or u.dropouts), result,
        )  # fmt: skip
    yield from messages
