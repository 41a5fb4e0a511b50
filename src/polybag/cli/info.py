"""``polybag info FILE... [--json | -y [-k KEY]] [-v]``: what a log holds, from its index when it has one.

Each file in turn, ``---`` between them (as ``rosbag info`` does); the exit status is the
worst.  The text is the layout people know the format by (``rosbag info`` for bags,
``ros2 bag info`` with each topic's offered QoS for rosbag2, a short summary for ULogs with
``ulog_info -v``'s whole dump and the parameters and logged messages behind ``-v``), else the
generic table: format, profile/library, duration, start/end as human UTC times, message counts
and frequency per channel, schemas, chunks and their compression, attachments and metadata
(once), and the format's own extras (``reader.info_extras()``; an MCAP's statistics and
summary offsets only with ``-v``).  ``-y`` prints ``rosbag info --yaml``'s keys for every
format and the format's own; ``-k KEY`` one of them.  On an MCAP file with a summary
section this reads only the summary, never the data section.

A damaged file (the summary lists errors: a cut or corrupt chunk, a summary that does not
parse, ULog corruption) is still described, with ``error:`` lines, and the exit status is 1
with one ``polybag info: error: ...`` line on stderr; an unreadable one exits 3.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any

from polybag.cli import render as _render
from polybag.cli.render import human_duration, human_stamp
from polybag.cli.render import info_yaml as format_yaml
from polybag.cli.text import format_size, json_default, print_json
from polybag.errors import PolybagError, UsageError
from polybag.formats import registry
from polybag.ops.inputs import damage, damage_verdict
from polybag.reader import Reader
from polybag.util.text import safe_line, safe_text


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("info", help="summarize logs: ROS 1 bags, ROS 2 (rosbag2) bags, MCAP, ULog (topics, counts, times, QoS, chunks)", description="Summarize each log as rosbag info and ros2 bag info do: a ROS 1 bag, a ROS 2 bag (rosbag2 directory or .db3), an MCAP file or a PX4 ULog.")
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="log file (bag, mcap, ulog) or rosbag2 directory, a URL (s3://, gs://, http(s)://), "
        "or - for stdin; several are described one after another, separated by ---",
    )
    add_format_option(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON instead of a table (a list for several files)")
    fmt.add_argument(
        "-y",
        "--yaml",
        action="store_true",
        help="print YAML with rosbag info --yaml's keys for every format (path, version, duration, "
        "start, end, size, messages, compression, types, topics) and the format's own",
    )
    p.add_argument(
        "-k",
        "--key",
        metavar="KEY",
        help="print only this key of the YAML (implies --yaml), as rosbag info -y -k duration; "
        "nested keys with dots or indexes: topics[0].topic",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="everything: a ULog's every info key, parameter and logged message (ulog_info -v); "
        "an MCAP's statistics and summary offsets; on stderr: what was read, timings (-vv: more)",
    )
    p.add_argument(
        "--stats",
        action="store_true",
        help="a URL: print the bytes fetched and the requests made to stderr (--json has them as 'fetched')",
    )
    p.set_defaults(func=run)


FORMAT_CHOICES = tuple(registry.names())


def add_format_option(p: Any) -> None:
    """``--format``: the input's format when its magic bytes do not tell (a version-0 bag
    has no header line, so ``polybag cat - < old.bag`` needs ``--format bag``)."""
    p.add_argument(
        "--format",
        dest="input_format",
        choices=FORMAT_CHOICES,
        default=None,
        help="input format, instead of guessing it from the first bytes",
    )


def open_input(name: str, format: str | None = None) -> Reader:  # noqa: A002
    import polybag

    if name == "-":
        return polybag.open(sys.stdin.buffer, format=format)
    return polybag.open(name, format=format)


def info_dict(reader: Reader) -> dict[str, Any]:
    # the format's extras first: a remote bag fetches what they need and the summary's
    # chunk headers in one batch (the summary alone would fetch the headers in one more)
    extras = reader.info_extras()
    s = reader.summary
    dur = s.duration
    secs = dur / 1e9
    unknown = s.extras.get("message_counts") == "unknown"  # the file's counts cannot be trusted
    channels = []
    for cid, ch in sorted(s.channels.items()):
        n: int | None = None if unknown else s.message_counts.get(cid, 0)
        channels.append(
            {
                "id": cid,
                "topic": ch.topic,
                "type": ch.type_name,
                "message_encoding": ch.message_encoding,
                "schema_id": ch.schema.id if ch.schema is not None else 0,
                "message_count": n,
                "frequency_hz": (n / secs) if secs > 0 and n is not None and n > 1 else None,
            }
        )
    comp: dict[str, int] = {}
    for c in s.chunks:
        comp[c.compression] = comp.get(c.compression, 0) + 1
    return {
        "path": reader.path,
        "format": s.format,
        "version": s.version,
        "profile": s.profile,
        "library": s.library,
        "file_size": s.file_size,
        "indexed": s.indexed,
        "message_count": None if unknown else s.message_count,
        "start_time": s.start_time,
        "end_time": s.end_time,
        "duration_ns": dur,
        "channels": channels,
        "schemas": [
            {"id": sid, "name": sc.name, "encoding": sc.encoding, "size": len(sc.data)}
            for sid, sc in sorted(s.schemas.items())
        ],
        "chunks": {
            "count": s.chunk_count,
            "compression": comp,
            "compressed_size": sum(c.compressed_size for c in s.chunks),
            "uncompressed_size": sum(c.uncompressed_size for c in s.chunks),
        },
        "attachment_count": s.attachment_count,
        "metadata_count": s.metadata_count,
        "extras": extras,
    } | fetched(reader)


def fetched(reader: Reader) -> dict[str, Any]:
    """``{"fetched": {requests, bytes_fetched, size, url}}`` of a remote log; {} for a local one."""
    stats = reader.fetch_stats
    return {} if stats is None else {"fetched": stats}


def print_stats(reader: Reader, prog: str = "polybag") -> None:
    """What reading a remote log cost, on stderr (nothing for a local one)."""
    stats = reader.fetch_stats
    if stats is not None:
        print(
            f"{prog}: fetched {stats['bytes_fetched']} of {stats['size']} bytes in {stats['requests']} requests",
            file=sys.stderr,
        )


def table_lines(rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    rows = [[safe_line(c) for c in r] for r in rows]  # (names from the file: one visible line each)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i < len(r) - 1 else c for i, (c, w) in enumerate(zip(r, widths))) for r in rows]


#: extras that are the file's bookkeeping rather than its content: printed with -v only
_INTERNALS = ("statistics", "summary_offsets")


def render(d: dict[str, Any], verbose: bool = False) -> str:
    """The generic table (MCAP and any format without a layout of its own): human times,
    attachments and metadata listed once, the file's bookkeeping (``statistics``,
    ``summary_offsets``) only when ``verbose``."""
    lines = []

    def kv(k: str, v: object) -> None:
        lines.append(f"{k + ':':<13} {v}")

    kv("path", d["path"])
    fmt = d["format"] + (f" (version {d['version']})" if d["version"] else "")
    kv("format", fmt)
    if d["profile"]:
        kv("profile", d["profile"])
    if d["library"]:
        kv("library", d["library"])
    kv("size", format_size(d["file_size"]))
    if not d["indexed"]:
        kv("index", "none (summary from a scan of the data)")
    kv("messages", "unknown" if d["message_count"] is None else d["message_count"])
    kv("duration", human_duration(d["duration_ns"], 3))
    kv("start", human_stamp(d["start_time"], 9))
    kv("end", human_stamp(d["end_time"], 9))
    ch = d["chunks"]
    if ch["count"]:
        comp = ", ".join(f"{k or 'none'}: {v}" for k, v in sorted(ch["compression"].items()))
        ratio = ""
        if ch["uncompressed_size"]:
            ratio = f", {format_size(ch['compressed_size'])} / {format_size(ch['uncompressed_size'])}"
        kv("chunks", f"{ch['count']} ({comp}{ratio})")
    if d["channels"]:
        lines.append("channels:")
        rows = []
        for c in d["channels"]:
            hz = f"{c['frequency_hz']:.2f} Hz" if c["frequency_hz"] else "-"
            rows.append(
                [f"  ({c['id']})", c["topic"], f"{'?' if c['message_count'] is None else c['message_count']} msgs", hz, f": {c['type'] or '-'}", f"[{c['message_encoding']}]"]
            )
        lines.extend(table_lines(rows))
    if d["schemas"]:
        lines.append("schemas:")
        lines.extend(
            table_lines([[f"  ({s['id']})", s["name"], f"[{s['encoding'] or '-'}]", format_size(s["size"])] for s in d["schemas"]])
        )
    listed = d["extras"].get("attachments")
    kv("attachments", d["attachment_count"])
    if isinstance(listed, list):
        lines.extend(
            table_lines(
                [
                    [f"  {safe_line(str(a.get('name', '')))}", f"[{safe_line(str(a.get('media_type', '')))}]",
                     format_size(int(a.get("size") or 0)), human_stamp(a.get("log_time"), 9)]
                    for a in listed if isinstance(a, dict)
                ]
            )
        )  # fmt: skip
    names = d["extras"].get("metadata")
    kv("metadata", d["metadata_count"])
    if isinstance(names, list):
        lines.extend(f"  {safe_line(str(n))}" for n in names)
    hidden = {"chunk_compression", "indexed", "attachments", "metadata"}
    if not verbose:
        hidden.update(_INTERNALS)
    extras = {k: v for k, v in d["extras"].items() if k not in hidden}
    for k, v in extras.items():
        if isinstance(v, dict):
            lines.append(f"{k}:")
            for k2, v2 in v.items():
                lines.append(f"  {k2}: {v2}")
        elif isinstance(v, list):
            lines.append(f"{k}:")
            for item in v:
                lines.append(f"  {item}")
        else:
            kv(k, v)
    return "\n".join(lines)


_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*\Z")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ".nan"
        if math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        r = repr(v)
        if "e" in r and "." not in r:  # YAML 1.1 floats need a dot: 1e-05 -> 1.0e-05
            r = r.replace("e", ".0e", 1)
        return r
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return _yaml_quoted(s)


def _yaml_quoted(s: str) -> str:
    """A YAML double-quoted scalar: printable ASCII kept, everything else escaped."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def _yaml_lines(v: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(v, dict):
        for k, x in v.items():
            key = _yaml_scalar(str(k))
            if isinstance(x, (dict, list)) and x:
                out.append(f"{pad}{key}:")
                out.extend(_yaml_lines(x, indent + 2))
            else:
                out.append(f"{pad}{key}: {_yaml_inline(x)}")
    else:
        for x in v:
            if isinstance(x, (dict, list)) and x:
                inner = _yaml_lines(x, indent + 2)
                out.append(f"{pad}- {inner[0][indent + 2 :]}")
                out.extend(inner[1:])
            else:
                out.append(f"{pad}- {_yaml_inline(x)}")
    return out


def _yaml_inline(x: Any) -> str:
    if isinstance(x, dict):
        return "{}"
    if isinstance(x, list):
        return "[]"
    return _yaml_scalar(x)


def to_yaml(d: dict[str, Any]) -> str:
    """A block-style YAML document of a JSON-like dict (what ``--json`` prints, as YAML)."""
    plain = json.loads(json.dumps(d, default=json_default))
    return "\n".join(_yaml_lines(plain, 0)) + "\n" if plain else "{}\n"


def _r(x: float | None, digits: int) -> float | None:
    return None if x is None else round(float(x), digits)


def _bag_record(ex: dict[str, Any]) -> dict[str, Any]:
    """``rosbag info --yaml``'s document of a bag, as a dict (the values :func:`render.rosbag_yaml` prints)."""
    comp = ex["compression"]
    d: dict[str, Any] = {
        "path": ex["path"],
        "version": ex["version"],
        "duration": _r(ex["duration"], 6),
        "start": _r(ex["start"] if ex["start"] is not None else 0.0, 6),
        "end": _r(ex["end"] if ex["end"] is not None else 0.0, 6),
        "size": ex["size"],
        "messages": ex["messages"],
        "indexed": ex["indexed"],
        "compression": max(comp, key=lambda k: comp[k]["chunks"]) if comp else "none",
    }
    if any(n != "none" for n in comp):
        d["uncompressed"] = int(ex["uncompressed"])
        d["compressed"] = int(ex["compressed"])
    d["types"] = [{"type": t["type"], "md5": t["md5"]} for t in ex["types"]]
    topics = []
    for t in ex["topics"]:
        e = {"topic": t["topic"], "type": t["type"], "messages": t["messages"]}
        if t["connections"] > 1:
            e["connections"] = t["connections"]
        if t.get("frequency"):
            e["frequency"] = _r(t["frequency"], 4)
        topics.append(e)
    d["topics"] = topics
    return d


def info_record(reader: Reader) -> dict[str, Any]:
    """What ``polybag info --yaml`` prints: ``rosbag info --yaml``'s keys for every format
    (path, version, duration, start, end in seconds, size, messages, indexed, compression,
    types, topics), then the format's own (rosbag2: storage_identifier, files, QoS per topic;
    MCAP: profile, library, schemas, attachments, metadata; ULog: the PX4 system, parameters,
    dropouts, logged messages)."""
    if reader.info_style == "rosbag":
        return _bag_record(reader.info_extras())
    d = info_dict(reader)
    ex = d["extras"]
    fmt = d["format"]
    secs = d["duration_ns"] / 1e9
    comp = d["chunks"]["compression"]
    compression = max(comp, key=lambda k: comp[k]) if comp else (ex.get("compression_format") or "none")
    out: dict[str, Any] = {
        "path": d["path"],
        "format": fmt,
        "version": d["version"],
        "duration": _r(secs, 6),
        "start": _r((d["start_time"] or 0) / 1e9, 6),
        "end": _r((d["end_time"] or 0) / 1e9, 6),
        "size": d["file_size"],
        "messages": d["message_count"],
        "indexed": d["indexed"],
        "compression": compression or "none",
    }
    if d["chunks"]["count"] and any(k not in ("", "none") for k in comp):
        out["uncompressed"] = d["chunks"]["uncompressed_size"]
        out["compressed"] = d["chunks"]["compressed_size"]
    types: dict[str, dict[str, Any]] = {}
    topics: dict[str, dict[str, Any]] = {}
    channels = reader.summary.channels
    for c in d["channels"]:
        name = c["type"] or ""
        if name and name not in types:
            ch = channels.get(c["id"])
            t: dict[str, Any] = {"type": name}
            md5 = ch.metadata.get("md5sum") if ch is not None else None
            if md5:
                t["md5"] = md5
            types[name] = t
        e = topics.get(c["topic"])
        if e is None:
            e = topics[c["topic"]] = {"topic": c["topic"], "type": name, "messages": 0, "connections": 0}
        if c["message_count"] is None or e["messages"] is None:
            e["messages"] = None
        else:
            e["messages"] += c["message_count"]
        e["connections"] += 1
        e["message_encoding"] = c["message_encoding"]
    for e in topics.values():
        n = e["messages"]
        if e["connections"] == 1:
            del e["connections"]
        if secs > 0 and n is not None and n > 1:
            e["frequency"] = _r(n / secs, 4)
    out["types"] = sorted(types.values(), key=lambda t: t["type"])
    out["topics"] = sorted(topics.values(), key=lambda t: t["topic"])
    own = _RECORD_STYLES.get(reader.info_style or "", _generic_record)
    own(reader, d, out)
    for k in ("error", "summary_error"):
        if ex.get(k):
            out[k] = ex[k]
    return out


def _generic_record(reader: Reader, d: dict[str, Any], out: dict[str, Any]) -> None:
    """MCAP's keys (and any format's without a layout): profile, library, chunks, schemas,
    attachments, metadata and the format's other facts (not its bookkeeping)."""
    ex = d["extras"]
    out["profile"] = d["profile"]
    out["library"] = d["library"]
    out["chunks"] = d["chunks"]["count"]
    out["schemas"] = [{"name": x["name"], "encoding": x["encoding"], "size": x["size"]} for x in d["schemas"]]
    out["attachments"] = ex.get("attachments", [])
    out["metadata"] = ex.get("metadata", [])
    rest = {
        k: v
        for k, v in ex.items()
        if k not in (*_INTERNALS, "attachments", "metadata", "chunk_compression", "indexed", "error", "summary_error")
    }
    if rest:
        out["extras"] = rest


def _rosbag2_record(reader: Reader, d: dict[str, Any], out: dict[str, Any]) -> None:
    """rosbag2's keys: storage_identifier, ros_distro, compression, files, custom_data, and
    per topic its serialization_format and offered QoS."""
    ex = d["extras"]
    qos = ex.get("qos") or {}
    for t in out["topics"]:
        t["serialization_format"] = t.pop("message_encoding")
        if t["topic"] in qos:
            t["qos"] = qos[t["topic"]]
    if ex.get("rosbag2_version") is not None:
        out["version"] = ex["rosbag2_version"]  # metadata.yaml's version (a number)
    out["storage_identifier"] = ex.get("storage")
    for k in ("ros_distro", "compression_mode", "compression_format", "files", "custom_data"):
        if ex.get(k):
            out[k] = ex[k]


def _ulog_keys(reader: Reader, d: dict[str, Any], out: dict[str, Any]) -> None:
    out["ulog"] = _ulog_record(reader, d["extras"])


def _ulog_record(reader: Reader, ex: dict[str, Any]) -> dict[str, Any]:
    u = reader.ulog
    assert u is not None
    levels = [m.level_name for m in u.logged_messages]
    return {
        "version": u.version,
        "sys_name": u.info.get("sys_name"),
        "ver_sw": u.info.get("ver_sw"),
        "ver_sw_release": u.version_info_str(),
        "ver_hw": u.info.get("ver_hw"),
        "start_us": u.start_timestamp,
        "duration_us": u.last_timestamp - u.start_timestamp,
        "dropouts": len(u.dropouts),
        "dropout_ms": sum(x.duration for x in u.dropouts),
        "parameters": len(u.params),
        "changed_parameters": len(u.changed_params),
        "info_keys": len(u.info),
        "logged_messages": len(levels),
        "warnings": sum(1 for x in levels if x == "WARNING"),
        "errors": sum(1 for x in levels if x in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY")),
        "info": {k: v for k, v in ex.get("info", {}).items() if not str(k).startswith("perf_")},
    }


#: info_style -> the format's own keys of :func:`info_record`
_RECORD_STYLES = {"rosbag2": _rosbag2_record, "ulog": _ulog_keys}

_KEY_PART = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


def pick_key(doc: Any, key: str, where: str) -> Any:
    """``rosbag info -y -k``: the value at ``key`` (``duration``, ``topics[0].topic``,
    ``topics.0.topic``); a :class:`UsageError` naming the keys there are when it is missing."""
    val = doc
    for m in _KEY_PART.finditer(key):
        name, index = m.group(1), m.group(2)
        if index is None and isinstance(val, list) and name.lstrip("-").isdigit():
            index = name
        if index is not None:
            if not isinstance(val, list) or not -len(val) <= int(index) < len(val):
                raise UsageError(f"{where}: no item {index} in key {key!r} (it has {len(val) if isinstance(val, list) else 0})")
            val = val[int(index)]
        elif isinstance(val, dict) and name in val:
            val = val[name]
        else:
            there = ", ".join(map(str, val)) if isinstance(val, dict) else "none"
            raise UsageError(f"{where}: no key {key!r} in the info (keys: {there})")
    return val


def key_text(val: Any) -> str:
    """A value of ``-k`` as rosbag prints it: a scalar as is, a mapping as ``key: value``
    lines, a list as ``- `` items (values unquoted, as rosbag does)."""
    return "\n".join(_key_lines(val, 0)) + "\n"


def _key_lines(val: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(val, dict):
        out: list[str] = []
        for k, v in val.items():
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{k}:")
                out.extend(_key_lines(v, indent + 2))
            else:
                out.append(f"{pad}{k}: {_key_scalar(v)}")
        return out or [f"{pad}{{}}"]
    if isinstance(val, list):
        out = []
        for v in val:
            inner = _key_lines(v, indent + 2)
            out.append(f"{pad}- {inner[0][indent + 2 :]}")
            out.extend(inner[1:])
        return out or [f"{pad}[]"]
    return [f"{pad}{_key_scalar(val)}"]


def _key_scalar(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return "{}" if isinstance(v, dict) else "[]"
    return safe_line(str(v))


def _describe(reader: Reader, args: argparse.Namespace) -> Any:
    """Print one file's info (returns the JSON dict for --json, else None)."""
    verbose = bool(getattr(args, "verbose", False))
    key = getattr(args, "key", None)
    if key:
        sys.stdout.write(safe_text(key_text(pick_key(info_record(reader), key, str(reader.path)))))
        return None
    if getattr(args, "yaml", False):
        text = format_yaml(reader)  # bags: rosbag info --yaml's own layout
        sys.stdout.write(safe_text(text if text is not None else to_yaml(info_record(reader))))
        return None
    if args.json:
        return info_dict(reader)
    text = _render.info_command_text(reader, verbose)
    out = text if text is not None else render(info_dict(reader), verbose)
    if len(getattr(args, "files", ())) > 1 and not out.startswith("path:"):
        out = f"path: {reader.path}\n{out}"  # the header of each file's part
    print(safe_text(out))  # (text from the file: names, metadata, extras)
    return None


def _one(name: str, args: argparse.Namespace, docs: list[Any]) -> int:
    with open_input(name, getattr(args, "input_format", None)) as reader:
        doc = _describe(reader, args)
        if doc is not None:
            docs.append(doc)
        if getattr(args, "stats", False):
            print_stats(reader, "polybag info")
        problems = damage(reader)
        if problems:
            sys.stdout.flush()
            print(f"polybag info: error: {safe_line(damage_verdict(str(reader.path or name), problems))}", file=sys.stderr)
            return 1
    return 0


def run(args: argparse.Namespace) -> int:
    """Each file in turn (``---`` between them, as ``rosbag info`` does); the exit status is
    the worst: 1 for a damaged file, 3 for one that cannot be read (the others are still
    described)."""
    files: list[str] = list(args.files)
    if getattr(args, "key", None):
        args.yaml = True
    docs: list[Any] = []
    worst = 0
    for i, name in enumerate(files):
        if i and not args.json:
            print("---", flush=True)
        if len(files) == 1:
            return _finish(_one(name, args, docs), docs, args, single=True)
        try:
            code = _one(name, args, docs)
        except UsageError:
            raise
        except (PolybagError, OSError) as e:
            sys.stdout.flush()
            text = str(e) if isinstance(e, PolybagError) else f"{e.filename or name}: {e.strerror or e}"
            print(f"polybag info: error: {safe_line(text)}", file=sys.stderr)
            if args.json:
                docs.append({"path": name, "error": text})
            code = 3
        worst = max(worst, code)
    return _finish(worst, docs, args, single=False)


def _finish(code: int, docs: list[Any], args: argparse.Namespace, single: bool) -> int:
    if args.json:
        print_json(docs[0] if single and docs else docs)
    return code
