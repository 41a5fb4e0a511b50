"""Checks of channel definitions against the codecs, for any format that carries them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polybag.codecs.ros1 import compute_md5
from polybag.model import Channel

__all__ = ["md5_problems"]


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
