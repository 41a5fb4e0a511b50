"""A format's own layout of ``polybag info``: ``rosbag info`` (and ``rosbag info --yaml``)
for bags, pyulog's ``ulog_info`` for ULogs.

The formats give only data (``reader.info_extras()``, ``reader.ulog``) and name the layout
people know them by in ``reader.info_style``; :data:`STYLES` maps that name to its text
renderer and, when the layout has one, its YAML renderer.  :func:`info_text` and
:func:`info_yaml` return None when the reader has no style or the style no such renderer:
the command then prints its generic output.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

from polybag.reader import ReaderProtocol

__all__ = ["STYLES", "hms", "info_text", "info_yaml", "rosbag_text", "rosbag_yaml", "ulog_text"]

#: ``(reader, verbose) -> text``
TextRenderer = Callable[[ReaderProtocol, bool], str]
#: ``reader -> YAML document``
YamlRenderer = Callable[[ReaderProtocol], str]


def info_text(reader: ReaderProtocol, verbose: bool = True) -> str | None:
    """The text of the reader's :attr:`~polybag.reader.Reader.info_style`; None: no style
    (print the generic table).  ``verbose=False`` is ``ulog_info`` without ``-v``."""
    style = STYLES.get(reader.info_style) if reader.info_style is not None else None
    return None if style is None else style[0](reader, verbose)


def info_yaml(reader: ReaderProtocol) -> str | None:
    """The YAML of the reader's style (``rosbag info --yaml`` for bags); None: the style has
    no YAML layout (print the generic YAML)."""
    style = STYLES.get(reader.info_style) if reader.info_style is not None else None
    return None if style is None or style[1] is None else style[1](reader)


# --- rosbag info --------------------------------------------------------------------------


def _stamp(ns: int | None) -> str:
    if ns is None:
        return "-"
    d = _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc)
    return f"{d.strftime('%b %d %Y %H:%M:%S')}.{(ns // 10_000_000) % 100:02d} ({ns / 1e9:.6f})"


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def rosbag_text(info: dict[str, Any]) -> str:
    """The dict from :func:`polybag.formats.bag.info.bag_info` laid out like ``rosbag info``."""
    rows: list[tuple[str, str]] = [
        ("path", str(info["path"])),
        ("version", info["version"]),
        ("duration", f"{info['duration']:.3f}s"),
        ("start", _stamp(info["start_ns"])),
        ("end", _stamp(info["end_ns"])),
        ("size", _size(info["size"])),
        ("messages", str(info["messages"])),
    ]
    comp = info["compression"]
    n_chunks = info["chunk_count"]
    lines = []
    for name, c in sorted(comp.items(), key=lambda kv: -kv[1]["chunks"]):
        if name == "none":
            lines.append(f"none [{c['chunks']}/{n_chunks} chunks]")
        else:
            pct = 100.0 * c["compressed"] / c["uncompressed"] if c["uncompressed"] else 0.0
            lines.append(f"{name} [{c['chunks']}/{n_chunks} chunks; {pct:.2f}%]")
    if not lines:
        lines = ["none [0/0 chunks]"]
    compressed = any(n != "none" for n in comp)
    w = 14 if compressed else 13  # rosbag widens the label column for "uncompressed:"
    out = [f"{k + ':':<{w}}{v}" for k, v in rows]
    out.append(f"{'compression:':<{w}}{lines[0]}")
    out.extend(" " * w + x for x in lines[1:])
    if compressed:
        out.append(f"{'uncompressed:':<{w}}{_size(info['uncompressed'])}")
        out.append(
            f"{'compressed:':<{w}}{_size(info['compressed'])} ({100.0 * (info['compression_ratio'] or 0):.2f}%)"
        )
    if not info["indexed"]:
        out.append(f"{'index:':<{w}}none usable ({info.get('index_problem', 'scanned')}); read by scanning")
    types = info["types"]
    tw = max((len(t["type"]) for t in types), default=0)
    for i, t in enumerate(types):
        out.append(f"{'types:' if i == 0 else '':<{w}}{t['type']:<{tw}} [{t['md5']}]")
    topics = info["topics"]
    pw = max((len(t["topic"]) for t in topics), default=0)
    cw = max((len(str(t["messages"])) for t in topics), default=0)
    for i, t in enumerate(topics):
        freq = t.get("frequency")
        fs = f" @ {freq:.4g} Hz" if freq else ""
        conns = f" ({t['connections']} connections)" if t["connections"] > 1 else ""
        unit = "msg " if t["messages"] == 1 else "msgs"
        out.append(
            f"{'topics:' if i == 0 else '':<{w}}{t['topic']:<{pw}}  {t['messages']:>{cw}} {unit}{fs:<14} : "
            f"{t['type']}{conns}"
        )
    for e in info.get("errors", []):
        out.append(f"{'error:':<{w}}{e}")
    return "\n".join(out)


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, str):
        return v if v and all(ch.isalnum() or ch in "/_.-" for ch in v) else '"' + v.replace('"', '\\"') + '"'
    return str(v)


def rosbag_yaml(info: dict[str, Any]) -> str:
    """The dict from :func:`polybag.formats.bag.info.bag_info` as ``rosbag info --yaml``."""
    q = _yaml_scalar
    out = [
        f"path: {q(info['path'])}",
        f"version: {info['version']}",
        f"duration: {info['duration']:.6f}",
        f"start: {info['start'] if info['start'] is not None else 0.0:.6f}",
        f"end: {info['end'] if info['end'] is not None else 0.0:.6f}",
        f"size: {info['size']}",
        f"messages: {info['messages']}",
        f"indexed: {str(info['indexed']).lower()}",
        f"compression: {q(max(info['compression'], key=lambda k: info['compression'][k]['chunks']) if info['compression'] else 'none')}",
    ]
    if any(n != "none" for n in info["compression"]):
        # rosbag adds the byte totals of the chunk data when any chunk is compressed
        out += [f"uncompressed: {int(info['uncompressed'])}", f"compressed: {int(info['compressed'])}"]
    out.append("types:")
    for t in info["types"]:
        out += [f"    - type: {q(t['type'])}", f"      md5: {q(t['md5'])}"]
    out.append("topics:")
    for t in info["topics"]:
        out += [f"    - topic: {q(t['topic'])}", f"      type: {q(t['type'])}", f"      messages: {t['messages']}"]
        if t.get("frequency"):
            out.append(f"      frequency: {t['frequency']:.4f}")
        if t["connections"] > 1:
            out.append(f"      connections: {t['connections']}")
    return "\n".join(out) + "\n"


# --- ulog_info ----------------------------------------------------------------------------


def hms(us: int) -> str:
    """Microseconds as ``H:MM:SS`` (``ulog_info``'s times)."""
    m, s = divmod(int(us / 1e6), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}"


def ulog_text(reader: ReaderProtocol, verbose: bool = True) -> str:
    """What ``ulog_info -v`` (``verbose``) or ``ulog_info`` prints: start, duration,
    dropouts, info, subscriptions; from ``reader.ulog`` and the subscriptions of
    ``reader.info_extras()``."""
    u = reader.ulog
    lines = []
    if u.file_corruption:
        lines.append("Warning: file has data corruption(s)")
    lines.append(
        f"Logging start time: {hms(u.start_timestamp)}, duration: {hms(u.last_timestamp - u.start_timestamp)}"
    )
    durs = [d.duration for d in u.dropouts]
    if not durs:
        lines.append("No Dropouts")
    else:
        lines.append(
            f"Dropouts: count: {len(durs)}, total duration: {sum(durs) / 1000.0:.1f} s, "
            f"max: {max(durs)} ms, mean: {int(sum(durs) / len(durs))} ms"
        )
    ver = u.version_info_str()
    if ver is not None:
        lines.append(f"SW Version: {ver}")
    lines.append("Info Messages:")
    for k in sorted(u.info):
        if verbose or not k.startswith("perf_"):
            lines.append(f" {k}: {u.info[k]}")
    if u.info_multiple:
        if verbose:
            lines.append("Info Multiple Messages:")
            for k in sorted(u.info_multiple):
                lines.append(f" {k}: {u.info_multiple[k]}")
        else:
            lines.append(
                "Info Multiple Messages: "
                + ", ".join(f"[{k}: {len(u.info_multiple[k])}]" for k in sorted(u.info_multiple))
            )
    lines.append("")
    lines.append(
        "{:<41} {:7}, {:10}".format(
            "Name (multi id, message size in bytes)", "number of data points", "total bytes"
        )
    )
    rows = [s for s in reader.info_extras()["subscriptions"] if s["count"]]
    rows.sort(key=lambda s: s["name"] + str(s["multi_id"]))
    for s in rows:
        size, cnt = s["message_size"], s["count"]
        name_id = f"{s['name']} ({s['multi_id']}, {size})"
        lines.append(f" {name_id:<40} {cnt:7d} {size * cnt:10d}")
    return "\n".join(lines)


#: style name (``reader.info_style``) -> (text renderer, YAML renderer or None)
STYLES: dict[str, tuple[TextRenderer, YamlRenderer | None]] = {
    "rosbag": (
        lambda reader, verbose: rosbag_text(reader.info_extras()),
        lambda reader: rosbag_yaml(reader.info_extras()),
    ),
    "ulog": (ulog_text, None),
}
