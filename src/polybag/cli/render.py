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

from polybag.reader import ReaderProtocol, UlogExtras
from polybag.util.text import safe_line

__all__ = [
    "STYLES",
    "hms",
    "human_duration",
    "human_stamp",
    "COMMAND_STYLES",
    "info_command_text",
    "info_text",
    "info_yaml",
    "rosbag2_text",
    "rosbag_text",
    "rosbag_yaml",
    "since_boot",
    "ulog_brief",
    "ulog_full",
    "ulog_text",
]

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
        ("duration", human_duration(info["duration"] * 1e9)),
        ("start", human_stamp(info["start_ns"])),
        ("end", human_stamp(info["end_ns"])),
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


def _ulog_of(reader: ReaderProtocol) -> UlogExtras:
    """The ULog data of a reader drawn in the ``ulog`` style (only readers that have it are)."""
    u = reader.ulog
    if u is None:
        raise TypeError(f"a {reader.format} reader has no ULog data to draw")
    return u


def ulog_text(reader: ReaderProtocol, verbose: bool = True) -> str:
    """What ``ulog_info -v`` (``verbose``) or ``ulog_info`` prints: start, duration,
    dropouts, info, subscriptions; from ``reader.ulog`` and the subscriptions of
    ``reader.info_extras()``."""
    u = _ulog_of(reader)
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


# --- human times, for every format -----------------------------------------------------


def human_stamp(ns: int | None, digits: int = 2) -> str:
    """An epoch time as ``rosbag info`` prints it, in UTC: ``Nov 28 2026 10:00:00.12
    (1795860000.12)``; ``digits`` decimals (rosbag: 2; rosbag2 and MCAP: 9, as ``ros2 bag
    info`` prints nanoseconds); ``-`` for None."""
    if ns is None:
        return "-"
    sec, frac = divmod(int(ns), 1_000_000_000)
    d = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(seconds=sec)
    part = f"{frac:09d}"[:digits]
    dot = f".{part}" if digits > 0 else ""
    return f"{d.strftime('%b %d %Y %H:%M:%S')}{dot} ({sec}{dot})"


def human_duration(ns: int | float, digits: int = 1) -> str:
    """A duration as ``rosbag info`` prints it: ``21.7s``, ``1:03s (63s)``,
    ``1hr 2:03s (3723s)`` (``digits`` decimals under a minute)."""
    secs = max(float(ns) / 1e9, 0.0)
    mins, rest = divmod(int(secs), 60)
    hrs, mins = divmod(mins, 60)
    if hrs:
        return f"{hrs}hr {mins}:{rest:02d}s ({int(secs)}s)"
    if mins:
        return f"{mins}:{rest:02d}s ({int(secs)}s)"
    return f"{secs:.{digits}f}s"


def since_boot(us: int) -> str:
    """A ULog timestamp (microseconds since boot) for people: ``0:03:12.50 since boot (192.50)``."""
    s = us / 1e6
    m, sec = divmod(s, 60)
    h, m = divmod(int(m), 60)
    return f"{h}:{m:02d}:{sec:05.2f} since boot ({s:.2f})"


# --- ros2 bag info ------------------------------------------------------------------------


def rosbag2_text(reader: ReaderProtocol, verbose: bool = False) -> str:
    """A rosbag2 bag laid out as ``ros2 bag info`` does (``Files:``, ``Bag size:``, ...,
    ``Topic information:`` lines ``Topic: /x | Type: T | Count: N | Serialization Format:
    cdr``) with each topic's offered QoS profiles summarised (``| QoS: reliable volatile
    keep_last(10)``) and service event topics under ``Service information:``."""
    s = reader.summary
    ex = reader.info_extras()
    qos = ex.get("qos") or {}
    w = 19  # ros2 bag info's label column

    def row(label: str, value: object) -> str:
        return f"{label + ':':<{w}}{value}" if len(label) < w - 1 else f"{label}: {value}"

    files = [str(f) for f in ex.get("files") or []]
    out = [row("Files", files[0] if files else "-")]
    out += [" " * w + f for f in files[1:]]
    out.append(row("Bag size", _size(float(s.file_size))))
    out.append(row("Storage id", ex.get("storage") or "-"))
    version = ex.get("rosbag2_version")
    out.append(row("Format", f"{s.format}" + (f" (metadata version {version})" if version is not None else "")))
    if ex.get("ros_distro"):
        out.append(row("ROS Distro", ex["ros_distro"]))
    if ex.get("compression_mode"):
        out.append(row("Compression", f"{ex['compression_format'] or '-'} ({ex['compression_mode']} mode)"))
    out.append(row("Duration", human_duration(s.duration, 3)))
    out.append(row("Start", human_stamp(s.start_time, 9)))
    out.append(row("End", human_stamp(s.end_time, 9)))
    unknown = s.extras.get("message_counts") == "unknown"
    out.append(row("Messages", "unknown" if unknown else s.message_count))
    topics: list[str] = []
    services: list[str] = []
    for cid, ch in sorted(s.channels.items(), key=lambda kv: (kv[1].topic, kv[0])):
        n = "?" if unknown else s.message_counts.get(cid, 0)
        is_service = ch.topic.endswith("/_service_event") and (ch.type_name or "").endswith("_Event")
        name = ch.topic[: -len("/_service_event")] if is_service else ch.topic
        typ = (ch.type_name or "-")[: -len("_Event")] if is_service else (ch.type_name or "-")
        line = f"{'Service' if is_service else 'Topic'}: {safe_line(name)} | Type: {safe_line(typ)} | "
        line += f"{'Event Count' if is_service else 'Count'}: {n} | Serialization Format: {ch.message_encoding}"
        if ch.topic in qos:
            line += f" | QoS: {qos[ch.topic]}"
        (services if is_service else topics).append(line)
    out.append(row("Topic information", topics[0] if topics else ""))
    out += [" " * w + t for t in topics[1:]]
    if services:
        out.append(row("Service", len(services)))
        out.append(row("Service information", services[0]))
        out += [" " * w + t for t in services[1:]]
    if verbose:
        for k in ("custom_data",):
            if ex.get(k):
                out.append(row("Custom data", ""))
                out += [f"  {a}: {b}" for a, b in ex[k].items()]
    return "\n".join(out)


# --- a short ULog summary -----------------------------------------------------------------


def ulog_brief(reader: ReaderProtocol) -> str:
    """``polybag info``'s default for a ULog: system, times since boot, dropouts, counts of
    parameters, info keys and logged messages (warnings, errors), and each logged topic
    with its count and rate.  The whole ``ulog_info -v`` dump is :func:`ulog_text`."""
    u = _ulog_of(reader)
    ex = reader.info_extras()
    info = u.info
    lines: list[str] = []

    def kv(k: str, v: object) -> None:
        lines.append(f"{k + ':':<13} {v}")

    kv("path", reader.path)
    kv("format", f"ulog (version {u.version})")
    system = " ".join(str(info[k]) for k in ("sys_name",) if info.get(k)) or "-"
    ver = u.version_info_str()
    if ver:
        system += f" {ver}"
    if info.get("ver_hw"):
        system += f" on {info['ver_hw']}"
    if info.get("sys_os_name"):
        system += f" ({info['sys_os_name']})"
    kv("system", system)
    if info.get("ver_sw"):
        kv("software", f"{info['ver_sw']}" + (f" ({info['ver_sw_branch']})" if info.get("ver_sw_branch") else ""))
    kv("size", _size(float(reader.summary.file_size)))
    dur_us = u.last_timestamp - u.start_timestamp
    kv("duration", human_duration(dur_us * 1000))
    kv("start", since_boot(u.start_timestamp))
    kv("end", since_boot(u.last_timestamp))
    durs = [d.duration for d in u.dropouts]
    kv("dropouts", f"{len(durs)} ({sum(durs) / 1000.0:.1f} s total, max {max(durs)} ms)" if durs else "none")
    subs = [x for x in ex.get("subscriptions", []) if x.get("count")]
    kv("messages", reader.summary.message_count)
    kv("parameters", f"{len(u.params)} ({len(u.changed_params)} changed during the log)")
    kv("info", f"{len(info)} keys, {len(u.info_multiple)} multi-keys")
    levels = [m.level_name for m in u.logged_messages]
    warn = sum(1 for x in levels if x == "WARNING")
    err = sum(1 for x in levels if x in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY"))
    kv("logged", f"{len(levels)} messages ({warn} warnings, {err} errors)")
    if u.file_corruption:
        kv("warning", "the file has data corruption(s) (`polybag check` lists them)")
    secs = dur_us / 1e6
    rows = []
    for x in sorted(subs, key=lambda x: (x["name"], x["multi_id"])):
        name = x["name"] + (f" ({x['multi_id']})" if x["multi_id"] else "")
        hz = f"@ {x['count'] / secs:.4g} Hz" if secs > 0 and x["count"] > 1 else ""
        rows.append((name, str(x["count"]), hz))
    nw = max((len(r[0]) for r in rows), default=0)
    cw = max((len(r[1]) for r in rows), default=0)
    for i, (name, n, hz) in enumerate(rows):
        lines.append(f"{'topics:' if i == 0 else '':<14}{name:<{nw}}  {n:>{cw}} {'msg ' if n == '1' else 'msgs'} {hz}".rstrip())
    lines.append("(`polybag info -v`: every info key, parameter and logged message)")
    return "\n".join(lines)


def ulog_full(reader: ReaderProtocol) -> str:
    """``polybag info -v`` of a ULog: what ``ulog_info -v`` prints, then every parameter
    (``name: value``, later changes with their times) and every logged message
    (``H:MM:SS LEVEL: text``)."""
    u = _ulog_of(reader)
    lines = [ulog_text(reader, True), "", f"Parameters ({len(u.params)}):"]
    changes: dict[str, list[str]] = {}
    for t, name, value in u.changed_params:
        changes.setdefault(name, []).append(f"{value} at {hms(t)}")
    for name in sorted(u.params):
        later = changes.get(name)
        lines.append(f" {safe_line(name)}: {u.params[name]}" + (f" (then {', '.join(later)})" if later else ""))
    lines.append("")
    lines.append(f"Logged Messages ({len(u.logged_messages)}):")
    for m in u.logged_messages:
        lines.append(f" {hms(m.timestamp)} {m.level_name}: {safe_line(m.text)}")
    return "\n".join(lines)


#: style name (``reader.info_style``) -> (text renderer, YAML renderer or None)
STYLES: dict[str, tuple[TextRenderer, YamlRenderer | None]] = {
    "rosbag": (
        lambda reader, verbose: rosbag_text(reader.info_extras()),
        lambda reader: rosbag_yaml(reader.info_extras()),
    ),
    "ulog": (ulog_text, None),
    "rosbag2": (rosbag2_text, None),
}

#: style name -> ``polybag info``'s own text when it is not the style's: a ULog gets a short
#: summary, and with ``-v`` ``ulog_info -v``'s dump followed by every parameter and logged message
COMMAND_STYLES: dict[str, TextRenderer] = {
    "ulog": lambda reader, verbose: ulog_full(reader) if verbose else ulog_brief(reader),
}


def info_command_text(reader: ReaderProtocol, verbose: bool = False) -> str | None:
    """The text ``polybag info`` prints for the reader's style (``verbose``: ``-v``); None:
    no style (print the generic table)."""
    own = COMMAND_STYLES.get(reader.info_style) if reader.info_style is not None else None
    return own(reader, verbose) if own is not None else info_text(reader, verbose)
